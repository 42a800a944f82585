'use strict';
// dal-register.js: the Node runtime shim of dal, loaded into every Node
// process of a session with NODE_OPTIONS=--require <dir>/node/dal-register.js.
//
// At startup it says hello to dald over DAL_SOCKET (synchronously, see
// wire.js), learns its stream, mode, seed, epoch and quantum, sets
// process.env.DAL_STREAM to the stream it was granted, and patches the
// runtime for the mode (docs/protocol.md):
//
//   strict   virtual clock (Date, performance.now/timeOrigin, process.hrtime,
//            process.uptime, Intl.DateTimeFormat without a date), virtual
//            timers (timers.js), seeded randomness (random.js), virtual
//            Atomics.wait sleeps, AbortSignal.timeout on virtual time
//   seeded   real clock with every read logged (ticks.put every `batch`
//            reads and at exit), seeded randomness, native timers
//   logged   as seeded, but real randomness with every draw logged (draws.put)
//   default  nothing patched
//   replay   (hello reply replay: true, seeded/logged recordings) clock reads
//            served from the recording (ticks.fetch), and in logged mode the
//            draws too (draws.fetch); reading past the end is drift
//
// In every mode but default, child_process children are named before they
// start (the process_wrap handle's spawn, see patchSpawn). At exit the shim
// flushes what it buffered and sends `report`.
//
// Nothing here may break the agent: a dald that cannot be reached leaves the
// process unpatched with one `dal:` line on stderr; later IPC failures give
// one line too. The shim writes to fd 2 directly and never touches
// process.stdout/process.stderr.
//
// globalThis[Symbol.for('dal')] (also require('<dir>/node/dal.js')) exposes
// now(), stream(), mode(), seed(), stats() -> {round_trips, reads, ...}, and
// iteration()/checkpoint()/phase() (marks.js).
//
// Start-up cost (strict mode ~3 ms, docs/benchmarks.md): this file is kept
// small; the shim's other files (runtime.js first) are compiled with the V8
// code cache dal-exec made when it installed the shim (codecache.js, one
// file in .v8/<node version>-<arch>/), which holds the functions start-up
// runs, so they are not compiled again in every process. A node of another
// version finds no cache and compiles them as usual. The builtins only some
// patches need (crypto, perf_hooks, os, timers/promises, AbortSignal) are
// patched when Node loads them (builtins.js). worker_threads is not loaded to
// learn whether this is the main thread (it costs ~1.6 ms): the main
// thread's process.chdir is Node's wrappedChdir, a worker's is not.

(function main() {
  const KEY = Symbol.for('dal');
  if (globalThis[KEY]) return; // preloaded twice
  const fs = require('fs');

  const said = new Set();
  function say(msg) {
    if (said.has(msg)) return;
    said.add(msg);
    try {
      fs.writeSync(2, `dal: ${msg}\n`);
    } catch {
      // stderr closed: nothing else to tell
    }
  }

  let isMainThread = typeof process.chdir === 'function' && process.chdir.name === 'wrappedChdir';
  if (!isMainThread) {
    try {
      isMainThread = require('worker_threads').isMainThread;
    } catch {
      isMainThread = true; // no worker_threads: the main thread
    }
  }
  if (!isMainThread) {
    // A worker runs the shim when the thread that made it reserved its
    // stream (runtime.js's patchWorkers); else that thread reports it.
    if (process.env.DAL_WORKER !== '1') return;
    delete process.env.DAL_WORKER;
  }

  try {
    shimRequire(fs, __dirname)('./runtime.js').start(say, KEY, module.constructor);
  } catch (e) {
    say(`the Node shim failed to start (${e && e.message}); node pid ${process.pid} may be partly virtualized`);
  }
})();

// wrap is Module.wrap (as node:module has it; loading node:module costs
// ~0.3 ms): the cache is made of the same source (codecache.js).
function wrap(source) {
  return `(function (exports, require, module, __filename, __dirname) { ${source}\n});`;
}

// readCaches returns the code caches codecache.js wrote into path, by file
// name, or none (another node, or no cache was made). It reads them in one
// go: a u32be count, then per file a u16be name length, the name, a u32be
// length and the cache. fs.readFileSync without an encoding costs ~0.4 ms
// at its first call (fstat, a Stats object, a Buffer), a plain read ~0.1 ms
// less, and the client reads its socket with the same fs.readSync.
function readCaches(fs, path) {
  const caches = new Map();
  let fd;
  try {
    fd = fs.openSync(path, 'r');
  } catch {
    return caches; // no cache for this node: the files compile as usual
  }
  let buf = new Uint8Array(128 * 1024);
  let n = 0;
  try {
    for (;;) {
      const got = fs.readSync(fd, buf, n, buf.length - n, null);
      if (got === 0) break;
      n += got;
      if (n === buf.length) {
        const next = new Uint8Array(buf.length * 2);
        next.set(buf);
        buf = next;
      }
    }
  } catch {
    return caches;
  } finally {
    fs.closeSync(fd);
  }
  const u16 = (p) => (buf[p] << 8) | buf[p + 1];
  const u32 = (p) => ((buf[p] << 24) | (buf[p + 1] << 16) | (buf[p + 2] << 8) | buf[p + 3]) >>> 0;
  if (n < 4) return caches;
  let p = 4;
  for (let i = u32(0); i > 0 && p + 2 <= n; i--) {
    const nameLen = u16(p);
    if (p + 2 + nameLen + 4 > n) break;
    const name = String.fromCharCode.apply(null, buf.subarray(p + 2, p + 2 + nameLen));
    const len = u32(p + 2 + nameLen);
    p += 2 + nameLen + 4;
    if (p + len > n) break;
    caches.set(name, buf.subarray(p, p + len));
    p += len;
  }
  return caches;
}

// shimRequire returns the require the shim's own files use: './name.js' is
// one of them, compiled once with its code cache if there is one; anything
// else is Node's require.
function shimRequire(fs, dir) {
  const vm = require('vm');
  const caches = readCaches(fs, `${dir}/.v8/${process.version}-${process.arch}/shim.cache`);
  const modules = new Map();
  function shimReq(id) {
    if (!id.startsWith('./')) return require(id);
    const name = id.slice(2);
    let m = modules.get(name);
    if (m !== undefined) return m.exports;
    const filename = `${dir}/${name}`;
    m = { exports: {}, id: filename, filename, loaded: false };
    modules.set(name, m);
    const cachedData = caches.get(name);
    const script = new vm.Script(wrap(fs.readFileSync(filename, 'utf8')), { filename, cachedData });
    script.runInThisContext().call(m.exports, m.exports, shimReq, m, filename, dir);
    m.loaded = true;
    return m.exports;
  }
  return shimReq;
}
