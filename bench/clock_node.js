'use strict';
// clock_node.js: the cost of a clock read through dal's Node shim against the
// native read, measured in the same process and run.
//
//   bin/dal-exec run -- node bench/clock_node.js                 strict mode
//   bin/dal-exec run --mode seeded -- node bench/clock_node.js   real clock, logged
//
// The shim keeps the unpatched functions (globalThis[Symbol.for('dal')].native),
// so both sides run on the same engine state. Each read is timed over
// N calls, native and shimmed alternating for ROUNDS rounds; the median of the
// rounds is reported. Output, one JSON object:
//
//   {mode, runtime, calls, results: [{read, native_ns, shim_ns, ratio}],
//    round_trips_per_1e6_reads, reads}
//
// Timing uses the native monotonic clock. Exit status 2 when the shim is not
// active (plain node, or dald unreachable): there would be nothing to compare.

const dal = globalThis[Symbol.for('dal')];
if (!dal || !dal.active) {
  process.stderr.write('clock_node.js measures the dal shim: run it under dal-exec, e.g. bin/dal-exec run -- node bench/clock_node.js\n');
  process.exit(2);
}

const N = Number(process.env.BENCH_CALLS || 2e6);
const ROUNDS = Number(process.env.BENCH_ROUNDS || 7);
const hr = dal.native.hrtimeBigint;

// Each loop is its own function so V8 optimizes each call site separately.
const loops = {
  'Date.now': [
    (n) => { const f = dal.native.dateNow; let x = 0; for (let i = 0; i < n; i++) x += f(); return x; },
    (n) => { let x = 0; for (let i = 0; i < n; i++) x += Date.now(); return x; },
  ],
  'new Date()': [
    (n) => { const D = dal.native.Date; let x = 0; for (let i = 0; i < n; i++) x += new D().getTime(); return x; },
    (n) => { let x = 0; for (let i = 0; i < n; i++) x += new Date().getTime(); return x; },
  ],
  'performance.now': [
    (n) => { const f = dal.native.performanceNow; let x = 0; for (let i = 0; i < n; i++) x += f(); return x; },
    (n) => { let x = 0; for (let i = 0; i < n; i++) x += performance.now(); return x; },
  ],
  'process.hrtime.bigint': [
    (n) => { const f = dal.native.hrtimeBigint; let x = 0n; for (let i = 0; i < n; i++) x += f() & 1n; return x; },
    (n) => { let x = 0n; for (let i = 0; i < n; i++) x += process.hrtime.bigint() & 1n; return x; },
  ],
  'Math.random': [
    (n) => { const f = dal.native.mathRandom; let x = 0; for (let i = 0; i < n; i++) x += f(); return x; },
    (n) => { let x = 0; for (let i = 0; i < n; i++) x += Math.random(); return x; },
  ],
};

function time(fn, n) {
  const t0 = hr();
  const sink = fn(n);
  const ns = Number(hr() - t0);
  if (sink === -1) process.stdout.write(''); // keep the result alive
  return ns / n;
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

const results = [];
for (const [read, [nativeLoop, shimLoop]] of Object.entries(loops)) {
  time(nativeLoop, N / 10); // warm up both sides
  time(shimLoop, N / 10);
  const nat = [];
  const shim = [];
  for (let r = 0; r < ROUNDS; r++) {
    nat.push(time(nativeLoop, N));
    shim.push(time(shimLoop, N));
  }
  const native_ns = median(nat);
  const shim_ns = median(shim);
  results.push({ read, native_ns: round(native_ns), shim_ns: round(shim_ns), ratio: round(shim_ns / native_ns) });
}

// Round trips per 10^6 clock reads, counted by the shim.
const before = dal.stats();
let x = 0;
for (let i = 0; i < 1e6; i++) x += Date.now();
const after = dal.stats();

console.log(JSON.stringify({
  mode: dal.mode(),
  runtime: `node ${process.version}`,
  calls: N,
  rounds: ROUNDS,
  results,
  round_trips_per_1e6_reads: after.round_trips - before.round_trips,
  reads: after.reads - before.reads,
  sink: x > 0,
}, null, 1));

function round(v) {
  return Math.round(v * 100) / 100;
}
