'use strict';
// codecache.js: run once by dal-exec when it installs the shim (node
// codecache.js, in this directory): writes the V8 code cache of every shim
// file dal-register.js loads into .v8/<node version>-<arch>/shim.cache,
// which the installer then lists in its manifest. The files are compiled as
// dal-register.js compiles them (the CommonJS wrapper), then the shim's
// start-up is run for real in strict mode, against a stand-in for dald in a
// worker thread (it answers hello and acknowledges the rest), followed by
// the first clock reads, draws and timers of a program, so that the cache
// holds the functions a shimmed process compiles at start-up too: a
// function the cache lacks costs its compilation in every process (start-up
// was ~2 ms slower with a cache of the top-level code only). V8 rejects a
// cache made by another version or with other flags; the file is then
// compiled as usual.

const fs = require('fs');
const path = require('path');
const vm = require('vm');
const { Worker } = require('worker_threads');

// as dal-register.js wraps the files (Module.wrap)
const wrap = (source) => `(function (exports, require, module, __filename, __dirname) { ${source}\n});`;

const dir = __dirname;
const out = path.join(dir, '.v8', `${process.version}-${process.arch}`);
fs.mkdirSync(out, { recursive: true });

const scripts = new Map();
const modules = new Map();
function load(id) {
  if (!id.startsWith('./')) return require(id);
  const name = id.slice(2);
  if (modules.has(name)) return modules.get(name).exports;
  const filename = path.join(dir, name);
  const m = { exports: {}, id: filename, filename, loaded: false };
  modules.set(name, m);
  const script = new vm.Script(wrap(fs.readFileSync(filename, 'utf8')), { filename });
  scripts.set(name, script);
  script.runInThisContext().call(m.exports, m.exports, load, m, filename, dir);
  m.loaded = true;
  return m.exports;
}

for (const name of fs.readdirSync(dir).sort()) {
  if (name.endsWith('.js') && name !== 'dal-register.js' && name !== 'codecache.js') load(`./${name}`);
}
// The stand-in for dald: hello gets a strict-mode reply, anything else ok.
const DALD = `
const net = require('net');
const { parentPort, workerData } = require('worker_threads');
const wire = require(workerData.dir + '/wire.js');
const server = net.createServer((conn) => {
  let buf = Buffer.alloc(0);
  conn.on('data', (d) => {
    buf = Buffer.concat([buf, d]);
    while (buf.length >= 4 && buf.length >= 4 + buf.readUInt32BE(0)) {
      const req = wire.decode(buf.subarray(4, 4 + buf.readUInt32BE(0)));
      buf = buf.subarray(4 + buf.readUInt32BE(0));
      const rep = req.op === 'hello'
        ? { ok: true, id: req.id, proto: 1, stream: '0', mode: 'strict', seed: 7, epoch_ns: 1767225600000000000n, mono_ns: 1e9, quantum_ns: 1000, batch: 4096, replay: false }
        : { ok: true, id: req.id, child: '0.1' };
      conn.write(wire.frame(rep));
    }
  });
  conn.on('error', () => {});
});
server.listen(workerData.sock, () => parentPort.postMessage('listening'));
`;

function startUp() {
  const sock = path.join(fs.mkdtempSync(path.join(require('os').tmpdir(), 'dal-codecache-')), 'dald.sock');
  const dald = new Worker(DALD, { eval: true, workerData: { dir, sock } });
  dald.once('error', (e) => fail(e));
  dald.once('message', () => {
    dald.unref(); // it answers the exit report, then goes with the process
    try {
      Object.assign(process.env, { DAL_SOCKET: sock, DAL_SESSION: 'codecache', DAL_SESSION_TOKEN: 'codecache', DAL_STREAM: '0' });
      load('./runtime.js').start(() => {}, Symbol('dal codecache'), module.constructor);
      // a program's first clock reads and timers
      Date.now(); new Date(); Date(); process.hrtime(); process.hrtime.bigint(); process.uptime();
      clearTimeout(setTimeout(() => {}, 10));
      snapshot();
      // the first draws and their modules, cached apart: only the start-up
      // path goes into runtime.js's cache (a bigger cache costs its size in
      // deserialization at every start)
      Math.random();
      const crypto = require('crypto');
      crypto.randomBytes(16); crypto.randomUUID(); crypto.randomInt(10);
      performance.now(); void performance.timeOrigin;
      snapshot(['random.js', 'seedrng.js']);
      write();
    } catch (e) {
      fail(e);
    } finally {
      fs.rmSync(path.dirname(sock), { recursive: true, force: true });
    }
  });
}

// snapshot keeps the code cache of the named scripts (all by default) as it
// is now: what has run so far.
const caches = new Map();
function snapshot(names = [...scripts.keys()]) {
  for (const name of names) caches.set(name, scripts.get(name).createCachedData());
}

// write writes the caches into one file, shim.cache, read at start-up in
// one go (a file each cost ~50 µs more apiece): a u32be count, then per
// script a u16be name length, the name, a u32be length and the cache.
let written = false;
function write() {
  if (written) return;
  written = true;
  const parts = [];
  const u16 = (v) => { const b = Buffer.alloc(2); b.writeUInt16BE(v); return b; };
  const u32 = (v) => { const b = Buffer.alloc(4); b.writeUInt32BE(v); return b; };
  parts.push(u32(scripts.size));
  for (const [name, script] of scripts) {
    const data = caches.get(name) || script.createCachedData();
    parts.push(u16(Buffer.byteLength(name)), Buffer.from(name), u32(data.length), data);
  }
  fs.writeFileSync(path.join(out, 'shim.cache'), Buffer.concat(parts));
}

function fail(e) {
  process.stderr.write(`dal: codecache.js could not run the shim's start-up (${e && e.message}); the cache holds less\n`);
  write();
}

startUp();
