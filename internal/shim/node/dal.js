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
//
// Without the shim (dald unreachable, or not loaded) it returns an inactive
// object with the same methods answering from the real runtime.

const installed = globalThis[Symbol.for('dal')];

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
});
