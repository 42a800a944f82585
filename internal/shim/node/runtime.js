'use strict';
// runtime.js: the Node shim's session and patches, loaded by
// dal-register.js (the manual is at its top): hello to dald, the clock,
// process times, randomness, timers and child naming for the mode, the exit
// report, and the API object (globalThis[Symbol.for('dal')]).

module.exports = { start };

function start(say, KEY, Module) {
  const env = process.env;
  const debug = env.DAL_SHIM_DEBUG === '1';
  const socketPath = env.DAL_SOCKET;
  const session = env.DAL_SESSION;
  if (!socketPath || !session) {
    say(`DAL_SOCKET or DAL_SESSION is not set: node pid ${process.pid} runs unvirtualized`);
    return;
  }

  // What the patches need from the real runtime is saved before anything
  // is patched (no program code has run yet). The builtins only some
  // patches use (crypto, perf_hooks, os, timers/promises, AbortSignal) are
  // patched when Node loads them (builtins.js), child_process when it loads
  // (patchSpawn): a process pays for what it uses.
  const { Client } = require('./wire.js');
  const native = {
    Date,
    dateNow: Date.now,
    hrtime: process.hrtime,
    hrtimeBigint: process.hrtime.bigint,
    cpuUsage: process.cpuUsage,
    uptime: process.uptime,
    mathRandom: Math.random,
    atomicsWait: Atomics.wait,
    perfNow: null, // performance.now, once performance is loaded
    timeOrigin: undefined,
  };
  native.nowNs = () => Number(native.hrtimeBigint());

  // ------------------------------------------------------------ hello

  // The hello is written at once and its reply read after the modules
  // every virtualized mode needs are loaded: dald answers meanwhile.
  let client;
  let hello;
  let helloID;
  try {
    client = new Client(socketPath, { wait: native.atomicsWait });
    helloID = client.write('hello', {
      proto: 1,
      role: 'shim',
      session,
      // The session's capability: dald refuses a hello without it. In a
      // sandbox it is a file (DAL_SESSION_TOKEN_FILE), so that every
      // variable dal sets reads the same in every run.
      token: env.DAL_SESSION_TOKEN || tokenFile(env.DAL_SESSION_TOKEN_FILE),
      stream: env.DAL_STREAM || '0',
      pid: process.pid,
      ppid: process.ppid,
      runtime: `node ${process.version}`,
    });
  } catch (e) {
    if (client) client.close();
    say(`cannot use dald at ${socketPath}: ${e.message}; node pid ${process.pid} runs unvirtualized`);
    return;
  }
  const { loadHooks } = require('./builtins.js');
  require('./clock.js');
  try {
    hello = client.readReply('hello', helloID);
    client.roundTrips++;
  } catch (e) {
    client.close();
    say(`cannot use dald at ${socketPath}: ${e.message}; node pid ${process.pid} runs unvirtualized`);
    return;
  }

  const stream = hello.stream === undefined || hello.stream === null ? env.DAL_STREAM || '0' : String(hello.stream);
  const mode = String(hello.mode || 'strict');
  const seed = BigInt(hello.seed || 0);
  const epochNs = hello.epoch_ns === undefined ? 1767225600000000000n : BigInt(hello.epoch_ns);
  const monoNs = hello.mono_ns === undefined ? 1e9 : Number(hello.mono_ns);
  const quantumNs = hello.quantum_ns === undefined ? 1000 : Number(hello.quantum_ns);
  const batch = Math.max(1, Number(hello.batch) || 4096);
  const replay = hello.replay === true && (mode === 'seeded' || mode === 'logged');
  env.DAL_STREAM = stream;
  const ids = { session, stream };

  // call is every IPC after hello that needs its reply; post sends an
  // upload without waiting (its reply is checked by a later call or post).
  // A refused op is reported once per op; a failed connection is reported
  // once, then dropped, and later calls return null.
  let lost = false;
  function ipc(fn, op, fields) {
    if (lost) return null;
    try {
      return fn.call(client, op, Object.assign({}, ids, fields));
    } catch (e) {
      if (e.refused) {
        say(`dald refused ${e.refused} for stream ${stream}: ${e.message}`);
        return null;
      }
      lost = true;
      client.close();
      say(`lost the connection to dald during ${op} (${e.message}); stream ${stream} (node pid ${process.pid}) keeps running but its log and exit report are incomplete`);
      return null;
    }
  }
  const call = (op, fields) => ipc(client.call, op, fields);
  const post = (op, fields) => { ipc(client.send, op, fields); };

  // drift is reported to dald, which shows it to the user (dal-exec prints it).
  function drift(what, detail) {
    if (call('drift', { what, detail }) === null) say(`drift on stream ${stream}: ${detail}`);
  }

  // unserved counts the calls of clock and random APIs this shim leaves
  // real ("random/crypto.generateKeyPair(rsa)", "clock/worker_threads"):
  // reported at exit, they become escapes in syscalls.json.
  const unserved = new Map();
  const note = (name) => {
    const what = Buffer.from(name).subarray(0, 120).toString(); // dald takes names of up to 128 bytes
    if (unserved.has(what) || unserved.size < 64) unserved.set(what, (unserved.get(what) || 0) + 1);
  };
  const state = { mode, stream, seed, replay, clock: null, timers: null, bytes: null, floats: null, drawLog: null, note };
  const virtualized = mode === 'strict' || mode === 'seeded' || mode === 'logged';
  if (virtualized) {
    const timers = require('timers'); // loaded by Node already
    const esmLoaded = process.moduleLoadList.includes('NativeModule internal/modules/esm/loader');
    const hooks = loadHooks(say);
    Object.assign(native, {
      setTimeout: timers.setTimeout,
      setInterval: timers.setInterval,
      clearTimeout: timers.clearTimeout,
      clearInterval: timers.clearInterval,
      setImmediate: timers.setImmediate,
      clearImmediate: timers.clearImmediate,
    });
    if (mode !== 'strict') {
      // The recording clocks read the real performance.now.
      native.perfNow = performance.now.bind(performance);
      native.timeOrigin = performance.timeOrigin;
    }
    installClock(state, { native, epochNs, monoNs, quantumNs, batch, call, post, drift, say });
    installPerformance(state, hooks, native);
    installProcessTimes(state, hooks);
    installRandom(state, hooks, { native, call, post, drift });
    patchSpawn(call, say);
    patchWorkers(hooks, call, note, say, stream);
    if (mode === 'strict') {
      // The connect request of the dald connection is the shim's own, not the agent's I/O.
      const ignore = (name) => name === 'PipeConnectWrap' && client.connecting;
      installTimers(state, hooks, { native, timers, ignore });
      patchAtomicsWait(state.clock, native);
    }
    if (esmLoaded) {
      try {
        Module.syncBuiltinESMExports();
      } catch (e) {
        say(`ES module imports of node: builtins may see unpatched functions (${e.message})`);
      }
    }
  } else {
    // default mode: hello only, nothing patched, nothing to report.
    if (mode !== 'default') say(`dald asked for unknown mode ${mode}; node pid ${process.pid} runs unvirtualized`);
    client.close();
  }

  function draws() {
    const out = {};
    if (state.floats && state.floats.drawn() > 0) out[require('./random.js').SOURCE_MATH] = state.floats.drawn();
    if (state.bytes && state.bytes.drawn() > 0) out[require('./random.js').SOURCE_CRYPTO] = state.bytes.drawn();
    return out;
  }

  // ------------------------------------------------------------ exit

  let reported = !virtualized;
  function onExit() {
    if (reported) return;
    reported = true;
    const clock = state.clock;
    try {
      clock.flush();
      if (state.drawLog) state.drawLog.flush();
    } catch (e) {
      say(`could not flush the log of stream ${stream}: ${e.message}`);
    }
    const strict = mode === 'strict';
    call('report', {
      reads: clock.reads,
      sleep_ns: strict ? clock.sleepNs : 0,
      now_ns: strict ? clock.t : 0,
      timers: state.timers ? state.timers.fired : [],
      draws: draws(),
      unserved: Object.fromEntries(unserved),
    });
    client.close();
  }
  if (virtualized) {
    process.on('exit', onExit);
    // Stay the last 'exit' listener, so reads in the agent's own exit
    // handlers are logged and counted.
    let moving = false;
    process.on('newListener', (event) => {
      if (event !== 'exit' || moving || reported) return;
      queueMicrotask(() => {
        moving = true;
        process.removeListener('exit', onExit);
        process.on('exit', onExit);
        moving = false;
      });
    });
  }

  // ------------------------------------------------------------ API

  const api = {
    active: virtualized,
    mode: () => mode,
    stream: () => stream,
    seed: () => seed,
    replay: () => replay,
    // now returns the realtime clock in ns (a BigInt); it is a clock read.
    now: () => (state.clock ? state.clock.realtimeNs() : BigInt(native.dateNow()) * 1000000n),
    stats: () => ({
      mode,
      replay,
      stream,
      round_trips: client.roundTrips,
      reads: state.clock ? state.clock.reads : 0,
      now_ns: state.clock ? state.clock.t : 0,
      sleep_ns: state.clock ? state.clock.sleepNs : 0,
      timers: state.timers ? state.timers.stats().fired : 0,
      draws: draws(),
    }),
    // native holds the unpatched clock and random functions, for benchmarks.
    native: Object.freeze({
      Date: native.Date,
      dateNow: native.dateNow,
      get performanceNow() {
        if (native.perfNow === null) {
          const perf = globalThis.performance; // loads and patches it
          if (native.perfNow === null) native.perfNow = perf.now.bind(perf);
        }
        return native.perfNow;
      },
      hrtimeBigint: native.hrtimeBigint,
      cpuUsage: native.cpuUsage,
      mathRandom: native.mathRandom,
    }),
    // iteration and checkpoint write marks into $DAL_MARKS (marks.js, loaded
    // on first use); at_ns is one read of this clock.
    iteration: (opts) => require('./marks.js').iteration(opts, api),
    checkpoint: (name, opts) => require('./marks.js').checkpoint(name, opts, api),
    phase: (name, opts) => require('./marks.js').phase(name, opts, api),
  };
  Object.defineProperty(globalThis, KEY, { value: Object.freeze(api), enumerable: false, configurable: true });

  if (debug) {
    say(`node pid ${process.pid} is stream ${stream} of session ${session}: mode ${mode}${replay ? ' (replay)' : ''}, seed ${seed}, epoch ${epochNs} ns, quantum ${quantumNs} ns, batch ${batch}`);
  }
}

// tokenFile reads the session token from the file at path, '' without one.
// utf8, not latin1: fs.readFileSync reads utf8 in one native call, any other
// encoding through its JS path (~0.4 ms at its first call); the token is
// 64 hex digits.
function tokenFile(path) {
  if (!path) return '';
  try {
    return require('fs').readFileSync(path, 'utf8').slice(0, 256).trim();
  } catch (e) {
    return '';
  }
}

// ---------------------------------------------------------------- clock

function installClock(state, { native, epochNs, monoNs, quantumNs, batch, call, post, drift }) {
  const { strictClock, recordingClock, replayClock } = require('./clock.js');
  let clock;
  if (state.mode === 'strict') {
    clock = strictClock({ epochNs, monoNs, quantumNs });
  } else if (state.replay) {
    clock = replayClock({
      epochNs, monoNs, quantumNs, batch, drift,
      fetch: (from, max) => call('ticks.fetch', { from, max }) || { end: true },
    });
  } else {
    clock = recordingClock({
      monoNs, batch, native,
      put: (kinds, values) => post('ticks.put', { kinds, values }),
    });
  }
  state.clock = clock;

  // Date: a function standing in for the Date constructor. Date objects are
  // still native Date objects; Date.prototype is shared, so instanceof holds
  // both ways and subclasses work.
  const NativeDate = native.Date;
  const DalDate = function Date(year, monthIndex, day, hours, minutes, seconds, ms) {
    if (new.target === undefined) return new NativeDate(clock.nowMs()).toString();
    if (arguments.length === 0) {
      return new.target === DalDate ? new NativeDate(clock.nowMs()) : Reflect.construct(NativeDate, [clock.nowMs()], new.target);
    }
    return Reflect.construct(NativeDate, arguments, new.target);
  };
  DalDate.prototype = NativeDate.prototype;
  Object.defineProperty(NativeDate.prototype, 'constructor', { value: DalDate, writable: true, enumerable: false, configurable: true });
  Object.defineProperty(DalDate, 'now', { value: function now() { return clock.nowMs(); }, writable: true, enumerable: false, configurable: true });
  Object.defineProperty(DalDate, 'parse', { value: NativeDate.parse, writable: true, enumerable: false, configurable: true });
  Object.defineProperty(DalDate, 'UTC', { value: NativeDate.UTC, writable: true, enumerable: false, configurable: true });
  Object.defineProperty(globalThis, 'Date', { value: DalDate, writable: true, enumerable: false, configurable: true });

  // process.hrtime([prev]) and process.hrtime.bigint().
  const hrtime = function hrtime(time) {
    const ns = clock.monoNs();
    const sec = Math.floor(ns / 1e9);
    const nsec = ns - sec * 1e9;
    if (time !== undefined) {
      if (!Array.isArray(time)) {
        const e = new TypeError('The "time" argument must be an instance of Array.');
        e.code = 'ERR_INVALID_ARG_TYPE';
        throw e;
      }
      if (time.length !== 2) {
        const e = new RangeError(`The value of "time" is out of range. It must be 2. Received ${time.length}`);
        e.code = 'ERR_OUT_OF_RANGE';
        throw e;
      }
      const s = sec - time[0];
      const n = nsec - time[1];
      return [n < 0 ? s - 1 : s, n < 0 ? n + 1e9 : n];
    }
    return [sec, nsec];
  };
  hrtime.bigint = function bigint() { return BigInt(clock.monoNs()); };
  process.hrtime = hrtime;

  // process.uptime(): seconds on the monotonic clock since the stream started.
  process.uptime = function uptime() { return (clock.monoNs() - monoNs) / 1e9; };

  // Intl.DateTimeFormat#format()/formatToParts() without a date read "now".
  const dtf = Intl.DateTimeFormat.prototype;
  const formatGetter = Object.getOwnPropertyDescriptor(dtf, 'format');
  if (formatGetter && formatGetter.get) {
    Object.defineProperty(dtf, 'format', {
      get() {
        const bound = formatGetter.get.call(this);
        return function format(date) { return bound(date === undefined ? clock.nowMs() : date); };
      },
      enumerable: false,
      configurable: true,
    });
  }
  const formatToParts = dtf.formatToParts;
  Object.defineProperty(dtf, 'formatToParts', {
    value: function formatToParts_(date) { return formatToParts.call(this, date === undefined ? clock.nowMs() : date); },
    writable: true, enumerable: false, configurable: true,
  });
}

// ---------------------------------------------------------------- process times

// CPU time and uptime. CPU-time clocks and resource usage are real in
// every mode, as the syscall layer leaves them for every other program
// (clock(), times()'s CPU fields, CLOCK_PROCESS_CPUTIME_ID): they measure
// the work the process did, not time, and no clock can give them back.
// Each call of process.cpuUsage and process.resourceUsage is counted
// ("cpu_clock/process.cpuUsage": the exit report's unserved, syscalls.json's
// real). os.uptime is a clock: the virtual monotonic clock in seconds in
// strict mode, real and reported as unserved otherwise.
function installProcessTimes(state, hooks) {
  const clock = state.clock;
  const nativeCpu = process.cpuUsage;
  const nativeRusage = process.resourceUsage;
  const strict = state.mode === 'strict';
  const note = (what) => state.note(`clock/${what}`);
  process.cpuUsage = function cpuUsage(prev) {
    state.note('cpu_clock/process.cpuUsage');
    return nativeCpu.call(process, prev);
  };
  process.resourceUsage = function resourceUsage() {
    state.note('cpu_clock/process.resourceUsage');
    return nativeRusage.call(process);
  };
  hooks.after('os', () => {
    const os = require('os');
    const nativeUptime = os.uptime;
    os.uptime = function uptime() {
      if (!strict) {
        note('os.uptime');
        return nativeUptime.call(os);
      }
      return Math.floor(clock.monoNs() / 1e7) / 100;
    };
  });
}

// performance.now and performance.timeOrigin (own properties of the one
// Performance instance shared by globalThis and perf_hooks) on the clock;
// performance.mark/measure and toJSON read Node's internal clock and are
// reported. Applied when Node loads perf_hooks (builtins.js): the
// performance global loads it too.
function installPerformance(state, hooks, native) {
  const clock = state.clock;
  hooks.after('perf_hooks', () => {
    const perf = require('perf_hooks').performance;
    if (native.perfNow === null) native.perfNow = perf.now.bind(perf);
    Object.defineProperty(perf, 'now', { value: function now() { return clock.monoNs() / 1e6; }, writable: true, enumerable: false, configurable: true });
    Object.defineProperty(perf, 'timeOrigin', { get: function timeOrigin() { return clock.timeOriginMs(); }, enumerable: true, configurable: true });
    for (const name of ['mark', 'measure', 'toJSON']) {
      const fn = perf[name];
      if (typeof fn !== 'function') continue;
      Object.defineProperty(perf, name, {
        value: function (...args) { state.note(`clock/performance.${name}`); return fn.apply(this, args); },
        writable: true, enumerable: false, configurable: true,
      });
    }
  });
}

// ---------------------------------------------------------------- randomness

// Math.random is patched at once, its source made (random.js loaded) at
// the first value; node:crypto and the Web Crypto object (globalThis.crypto,
// crypto.webcrypto) when Node loads them (builtins.js), with the
// node.crypto source made by the first of the two.
function installRandom(state, hooks, { native, call, post, drift }) {
  const loadRandom = () => require('./random.js');
  const label = (source) => `${state.stream}/${source}`;
  let log = null; // logged mode: the draw log both sources append to
  const drawLog = (r) => {
    if (log === null) {
      log = new r.DrawLog((source, data) => post('draws.put', { label: source, data }));
      state.drawLog = log;
    }
    return log;
  };
  // Past the end of the log a replayed source continues with its seeded
  // stream, so a drifting replay stays deterministic (as the Python shim does).
  const replaying = state.mode === 'logged' && state.replay;
  const fetcher = (source) => (from, max) => call('draws.fetch', { label: source, from, max }) || { end: true };

  function floatsOf(r) {
    if (replaying) {
      const seededMath = r.seededFloats(state.seed, label(r.SOURCE_MATH));
      const mathBytes = r.replayBytes(r.SOURCE_MATH, fetcher(r.SOURCE_MATH), drift, (u8) => {
        const b = Buffer.from(u8.buffer, u8.byteOffset, u8.length);
        for (let i = 0; i + 8 <= b.length; i += 8) b.writeDoubleBE(seededMath.float(), i);
      }, 8 * 4096);
      return r.replayFloats(mathBytes);
    }
    if (state.mode === 'logged') return r.loggedFloats(r.SOURCE_MATH, native.mathRandom, drawLog(r));
    return r.seededFloats(state.seed, label(r.SOURCE_MATH));
  }

  // bytes returns the node.crypto source, made at the first call; realFill
  // fills a Uint8Array with real random bytes (logged mode).
  function bytes(r, realFill) {
    if (state.bytes !== null) return state.bytes;
    if (replaying) {
      const s = r.seededBytes(state.seed, label(r.SOURCE_CRYPTO));
      state.bytes = r.replayBytes(r.SOURCE_CRYPTO, fetcher(r.SOURCE_CRYPTO), drift, (u8) => s.fill(u8));
    } else if (state.mode === 'logged') {
      state.bytes = r.loggedBytes(r.SOURCE_CRYPTO, realFill, drawLog(r));
    } else {
      state.bytes = r.seededBytes(state.seed, label(r.SOURCE_CRYPTO));
    }
    return state.bytes;
  }

  // Math.random: the first call makes the source. One function from the
  // start (not a stand-in replaced at the first call), so that call sites
  // see one target and V8 inlines it.
  let float = null;
  const makeFloats = () => {
    state.floats = floatsOf(loadRandom());
    float = state.floats.float;
  };
  Object.defineProperty(Math, 'random', {
    value: function random() {
      if (float === null) makeFloats();
      return float();
    },
    writable: true, enumerable: false, configurable: true,
  });

  const unserved = (what) => state.note(`random/${what}`);
  hooks.after('crypto', () => {
    const crypto = require('crypto');
    const r = loadRandom();
    const randomFillSync = crypto.randomFillSync;
    r.installCrypto(crypto, bytes(r, (u8) => randomFillSync.call(crypto, u8)), unserved);
  });
  // globalThis.crypto's own getter, taken before the program runs; without
  // it (--no-experimental-global-webcrypto) the Web Crypto object is only
  // reachable through node:crypto, loaded by then.
  const d = Object.getOwnPropertyDescriptor(globalThis, 'crypto');
  const webCrypto = d && typeof d.get === 'function' ? () => d.get.call(globalThis) : () => require('crypto').webcrypto;
  hooks.after('internal/crypto/webcrypto', () => {
    const web = webCrypto();
    const r = loadRandom();
    const getRandomValues = web.getRandomValues;
    const realFill = (u8) => {
      for (let off = 0; off < u8.length; off += 65536) getRandomValues.call(web, u8.subarray(off, Math.min(u8.length, off + 65536)));
    };
    r.installWebCrypto(web, bytes(r, realFill), unserved);
  });
}

// ---------------------------------------------------------------- timers

function installTimers(state, hooks, { native, timers, ignore }) {
  const { createTimers, loopActivity } = require('./timers.js');
  const vt = createTimers({ clock: state.clock, native, activity: () => loopActivity(ignore) });
  state.timers = vt;

  Object.defineProperty(vt.setTimeout, Symbol.for('nodejs.util.promisify.custom'), { value: vt.promises.setTimeout, enumerable: false, configurable: true });
  for (const target of [globalThis, timers]) {
    target.setTimeout = vt.setTimeout;
    target.setInterval = vt.setInterval;
    target.clearTimeout = vt.clearTimeout;
    target.clearInterval = vt.clearInterval;
  }
  hooks.after('timers/promises', () => {
    const timersPromises = require('timers/promises');
    timersPromises.setTimeout = vt.promises.setTimeout;
    timersPromises.setInterval = vt.promises.setInterval;
    if (timersPromises.scheduler) {
      Object.defineProperty(timersPromises.scheduler, 'wait', { value: function wait(delay, options) { return vt.promises.wait(delay, options); }, writable: true, enumerable: false, configurable: true });
    }
  });

  // AbortSignal.timeout(ms): aborted by an unref'd virtual timer. Patched
  // when Node loads AbortSignal (~0.3 ms), through the global's own getter
  // taken before the program runs.
  const d = Object.getOwnPropertyDescriptor(globalThis, 'AbortSignal');
  const abortSignal = () => {
    const now = Object.getOwnPropertyDescriptor(globalThis, 'AbortSignal');
    // the getter once, unless the program replaced the global meanwhile
    return d && typeof d.get === 'function' && now && now.get === d.get ? d.get.call(globalThis) : globalThis.AbortSignal;
  };
  hooks.after('internal/abort_controller', () => {
    const AbortSignal = abortSignal();
    const nativeTimeout = AbortSignal.timeout;
    Object.defineProperty(AbortSignal, 'timeout', {
      value: function timeout(delay) {
        if (typeof delay !== 'number' || !Number.isFinite(delay) || delay < 0 || delay > Number.MAX_SAFE_INTEGER) {
          return nativeTimeout.call(AbortSignal, delay); // throws Node's own validation error
        }
        const controller = new AbortController();
        vt.setTimeout(() => {
          controller.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError'));
        }, delay).unref();
        return controller.signal;
      },
      writable: true, enumerable: false, configurable: true,
    });
  });
}

// Atomics.wait(ia, i, v, timeout) used as a sleep: when it would block for a
// finite timeout, virtual time advances by the timeout and it returns
// 'timed-out' at once. A wait without timeout stays native. Limit: a
// notify() from a worker thread cannot cut a virtual sleep short.
function patchAtomicsWait(clock, native) {
  const wait = native.atomicsWait;
  Object.defineProperty(Atomics, 'wait', {
    value: function wait_(typedArray, index, value, timeout) {
      const ms = timeout === undefined ? Infinity : Number(timeout);
      if (!(ms > 0) || ms === Infinity) return wait.call(Atomics, typedArray, index, value, timeout);
      const r = wait.call(Atomics, typedArray, index, value, 0);
      if (r === 'timed-out') clock.sleep(Math.round(ms * 1e6));
      return r;
    },
    writable: true, enumerable: false, configurable: true,
  });
}

// ---------------------------------------------------------------- children

// patchSpawn names children before they start. Every asynchronous child
// (spawn, exec, execFile, fork) is started by the spawn method of a
// process_wrap Process handle, which receives the final environment as
// options.envPairs ("K=V" strings). The shim reserves the next child name
// with the `spawn` op and sets DAL_STREAM to it, so names follow spawn order
// even when children start concurrently. When a custom env dropped the
// variables that keep a child shimmed (DAL_SOCKET, DAL_SESSION,
// DAL_SESSION_TOKEN(_FILE), NODE_OPTIONS, PYTHONPATH), they are added back from
// this process's environment, as the Python shim does.
//
// The handle class is replaced in the process_wrap binding, which
// node:child_process reads when it loads: so child_process (~1.1 ms) is not
// loaded here, and a program that imports it, as a CommonJS or an ES module,
// gets the replaced class. Were it loaded already, its ChildProcess.prototype
// .spawn is wrapped instead (the same options reach both).
//
// spawnSync/execSync/execFileSync do not go through a Process handle: their
// children say hello with the parent's DAL_STREAM and dald grants the next
// child name in hello order. They are sequential (the parent blocks until the
// child exits), so that order is the spawn order too.
function patchSpawn(call, say) {
  const PROPAGATE = ['DAL_SOCKET', 'DAL_SESSION', 'DAL_SESSION_TOKEN', 'DAL_SESSION_TOKEN_FILE', 'NODE_OPTIONS', 'PYTHONPATH'];
  function nameChild(options) {
    try {
      const pairs = options && options.envPairs;
      if (Array.isArray(pairs)) {
        const reply = call('spawn', {});
        if (reply && reply.child !== undefined && reply.child !== null) {
          setPair(pairs, 'DAL_STREAM', String(reply.child));
          for (const name of PROPAGATE) {
            if (process.env[name] !== undefined && !pairs.some((p) => typeof p === 'string' && p.startsWith(`${name}=`))) {
              pairs.push(`${name}=${process.env[name]}`);
            }
          }
        }
      }
    } catch (e) {
      say(`could not name a child process (${e.message}); it is named in hello order`);
    }
  }

  if (!process.moduleLoadList.includes('NativeModule internal/child_process')) {
    let binding;
    const saved = process.noDeprecation; // as in wire.js: no DEP0111 warning on the agent's stderr
    try {
      process.noDeprecation = true;
      binding = process.binding('process_wrap');
    } catch {
      binding = null;
    } finally {
      process.noDeprecation = saved;
    }
    const Native = binding && binding.Process;
    if (typeof Native === 'function' && typeof Native.prototype.spawn === 'function') {
      binding.Process = class Process extends Native {
        spawn(options) {
          nameChild(options);
          return super.spawn(options);
        }
      };
      if (binding.Process !== Native) return;
    }
  }
  const childProcess = require('child_process');
  const proto = childProcess.ChildProcess && childProcess.ChildProcess.prototype;
  if (!proto || typeof proto.spawn !== 'function') {
    say('child_process.ChildProcess.prototype.spawn is missing: children are named in hello order');
    return;
  }
  const originalSpawn = proto.spawn;
  proto.spawn = function spawn(options) {
    nameChild(options);
    return originalSpawn.call(this, options);
  };
}

// patchWorkers names every worker thread as a child process is named: the
// thread that creates it reserves the next child name of its own stream
// with spawn (creation order, counted together with its child processes:
// stream 0's first worker or child is 0.1, the next 0.2; a worker's worker
// is 0.1.1), and hands it over in the worker's environment (DAL_STREAM,
// with DAL_WORKER=1 to tell dal-register.js that the name is reserved).
// The worker says hello as that stream and is served as a process is: its
// own virtual clock from the epoch, its randomness labelled
// "<name>/node.Math.random", its own timers and exit report. A worker
// created with env: SHARE_ENV has no environment of its own to carry the
// name: it runs unserved (counted, said once).
function patchWorkers(hooks, call, note, say, stream) {
  hooks.after('worker_threads', () => {
    const wt = require('worker_threads');
    const Native = wt.Worker;
    if (typeof Native !== 'function' || Native.dalWorker) return;
    const PROPAGATE = ['DAL_SOCKET', 'DAL_SESSION', 'DAL_SESSION_TOKEN', 'DAL_SESSION_TOKEN_FILE', 'NODE_OPTIONS'];
    class Worker extends Native {
      constructor(filename, options) {
        const opts = options === undefined || options === null ? {} : Object.assign({}, options);
        if (opts.env === wt.SHARE_ENV) {
          note('clock/worker_threads(SHARE_ENV)');
          note('random/worker_threads(SHARE_ENV)');
          say(`node pid ${process.pid} (stream ${stream}) started a worker thread with env: SHARE_ENV: the shim cannot name it, so it reads the process's clock, randomness and native timers (dal's syscall layer's in a strict run, record or replay, else real ones)`);
        } else if (opts.env === undefined || opts.env === null || typeof opts.env === 'object') {
          const reply = call('spawn', {});
          if (reply && reply.child !== undefined && reply.child !== null) {
            const env = Object.assign({}, opts.env === undefined || opts.env === null ? process.env : opts.env);
            for (const name of PROPAGATE) {
              if (env[name] === undefined && process.env[name] !== undefined) env[name] = process.env[name];
            }
            env.DAL_STREAM = String(reply.child);
            env.DAL_WORKER = '1';
            opts.env = env;
          }
        }
        super(filename, opts);
      }
    }
    Object.defineProperty(Worker, 'name', { value: 'Worker' });
    Object.defineProperty(Worker, 'dalWorker', { value: true });
    wt.Worker = Worker;
  });
}

function setPair(pairs, name, value) {
  const entry = `${name}=${value}`;
  const i = pairs.findIndex((p) => typeof p === 'string' && p.startsWith(`${name}=`));
  if (i >= 0) pairs[i] = entry;
  else pairs.push(entry);
}
