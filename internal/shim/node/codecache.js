'use strict';
// codecache.js: run once by dal-exec when it installs the shim (node
// codecache.js, in this directory): writes the V8 code cache of every shim
// file dal-register.js loads into .v8/<node version>-<arch>/<file>.cache,
// which the installer then lists in its manifest. The files are compiled as
// dal-register.js compiles them (the CommonJS wrapper), then the start-up
// path of the pure ones is run (a hello frame encoded and decoded, clock
// reads, a seeded draw, the timer table), so that the cache holds the
// functions start-up compiles too. V8 rejects a cache made by another
// version or with other flags; the file is then compiled as usual.

const fs = require('fs');
const path = require('path');
const vm = require('vm');
const { wrap } = require('module');

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
// the start-up path of the pure modules
try {
  const wire = load('./wire.js');
  const hello = { op: 'hello', id: 1, proto: 1, role: 'shim', session: 's', token: 't', stream: '0', pid: 1, ppid: 1, runtime: process.version };
  wire.decode(wire.frame(hello).subarray(4));
  wire.decode(wire.encode({ ok: true, id: 1, stream: '0', mode: 'strict', seed: 7, epoch_ns: 1767225600000000000n, mono_ns: 1e9, quantum_ns: 1000, batch: 4096 }));
  const clock = load('./clock.js').strictClock({ epochNs: 1767225600000000000n, monoNs: 1e9, quantumNs: 1000 });
  clock.nowMs(); clock.monoNs(); clock.timeOriginMs(); clock.realtimeNs(); clock.cpuUs();
  const random = load('./random.js');
  random.seededBytes(7n, '0/node.crypto').fill(new Uint8Array(16));
  random.seededFloats(7n, '0/node.Math.random').float();
} catch (e) {
  process.stderr.write(`dal: codecache.js could not run the start-up path (${e.message}); the cache holds less\n`);
}
for (const [name, script] of scripts) {
  fs.writeFileSync(path.join(out, `${name}.cache`), script.createCachedData());
}
