'use strict';
// dal.js: the Node shim's API for agents and tools that want to know whether
// they run under dal. require('<shim dir>/node/dal.js') returns the object
// dal-register.js installed as globalThis[Symbol.for('dal')]:
//
//   active          true when this process is virtualized
//   mode()          'strict' | 'seeded' | 'logged' | 'default'
//   stream()        this process's stream name ('0', '0.1', ...)
//   seed()          the session seed (BigInt)
//   now()           the realtime clock in ns (BigInt); counts as a clock read
//   stats()         { mode, replay, stream, round_trips, reads, now_ns,
//                     sleep_ns, timers, draws }
//   native          the unpatched Date, Date.now, performance.now,
//                   process.hrtime.bigint and Math.random (for benchmarks)
//   iteration({ score, artifacts, dimensions, note, name })
//                   records a refinement iteration: score in [0, 1] (or null
//                   with dimensions such as { validation: 1, completeness:
//                   0.8 }, each in [0, 1]) and the files of its output.
//                   dal-exec keeps every iteration and places the best one's
//                   artifacts in the workspace.
//   checkpoint(name, { artifacts, state, tag, note })
//                   records a checkpoint: artifacts plus state (any JSON
//                   value handed back on recovery); a tagged one is kept
//                   forever.
//   phase(name, { note })
//                   marks the start of a phase of the work; with dal-exec
//                   --auto-checkpoint phase_start it becomes a checkpoint.
//
// iteration and checkpoint (docs/marks.md, marks.js) take artifacts as a path
// or an array of paths (files, or directories expanded to their regular
// files sorted by path) relative to the current directory, copy the files
// at once and return the mark as written to mark.json ({ v, kind, seq,
// score, artifacts: [{ path, abs, file, sha256, size, mode }], ..., at_ns }
// with at_ns a BigInt), or null outside dal (no DAL_MARKS in the
// environment). Bad input throws (TypeError, RangeError for a value outside
// [0, 1], an ENOENT error for a missing artifact) and writes nothing.
// Concurrent writers (threads, processes) each get their own number.
//
// Without the shim (dald unreachable, or not loaded) it returns an inactive
// object with the same methods answering from the real runtime; its
// iteration and checkpoint still write marks when DAL_MARKS is set, with
// at_ns from the real clock.

const installed = globalThis[Symbol.for('dal')];

const realClock = { now: () => BigInt(Date.now()) * 1000000n };

module.exports = installed || Object.freeze({
  active: false,
  mode: () => null,
  stream: () => null,
  seed: () => null,
  replay: () => false,
  now: () => BigInt(Date.now()) * 1000000n,
  stats: () => ({ mode: null, replay: false, stream: null, round_trips: 0, reads: 0, now_ns: 0, sleep_ns: 0, timers: 0, draws: {} }),
  native: Object.freeze({
    Date,
    dateNow: Date.now,
    performanceNow: performance.now.bind(performance),
    hrtimeBigint: process.hrtime.bigint,
    mathRandom: Math.random,
  }),
  iteration: (opts) => require('./marks.js').iteration(opts, realClock),
  checkpoint: (name, opts) => require('./marks.js').checkpoint(name, opts, realClock),
  phase: (name, opts) => require('./marks.js').phase(name, opts, realClock),
});
