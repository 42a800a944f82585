'use strict';
// clock_node.js: the cost of a clock read through dal's Node shim against the
// native read, measured in the same process and run.
//
//   bin/dal-exec run -- node bench/clock_node.js                 strict mode
//   bin/dal-exec run --mode seeded -- node bench/clock_node.js   real clock, logged
//
// The shim keeps the unpatched functions (globalThis[Symbol.for('dal')].native),
// so both sides run on the same engine state. Both sides call a captured
// function reference (new Date() aside), so property lookups on process or
// performance do not weigh on one side only. Each read is timed over
// N calls, native and shimmed alternating for ROUNDS rounds; the median of the
// rounds is reported. Output, one line of JSON (what bench/cmd/dal-bench
// reads), an array with one element per read:
//
//   [{name, native_ns, shim_ns, ratio, ratio_min, ratio_max,
//     round_trips_per_million, repeats, spread, mode, runtime}, ...]
//
// ratio is the median shim/native; ratio_min and ratio_max the spread of the
// per-round ratios (each round times both sides back to back).
//
// round_trips_per_million counts the shim's IPC round trips per 10^6 shimmed
// calls (0 in strict mode; 10^6/batch for clock reads in seeded mode).
//
// Timing uses the native monotonic clock, except in strict mode: there dal's
// syscall layer serves every clock the process reads, the unpatched
// functions' too (so "native" is dal's vDSO read), and the timer is the
// process's CPU time (getrusage, which the layer leaves real; these loops
// never block, so their CPU time is their time). Exit status 2 when the shim is not
// active (plain node, or dald unreachable): there would be nothing to compare.

const dal = globalThis[Symbol.for('dal')];
if (!dal || !dal.active) {
  process.stderr.write('clock_node.js measures the dal shim: run it under dal-exec, e.g. bin/dal-exec run -- node bench/clock_node.js\n');
  process.exit(2);
}

const N = Number(process.env.BENCH_CALLS || 2e6);
const ROUNDS = Number(process.env.BENCH_ROUNDS || 7);
const hr = dal.mode() === 'strict' ? cpuNs : dal.native.hrtimeBigint;

// cpuNs is the process's CPU time in ns (microsecond resolution).
function cpuNs() {
  const u = dal.native.cpuUsage.call(process);
  return BigInt(u.user + u.system) * 1000n;
}

// Each loop is its own function so V8 optimizes each call site separately.
const loops = {
  'Date.now': [
    (n) => { const f = dal.native.dateNow; let x = 0; for (let i = 0; i < n; i++) x += f(); return x; },
    (n) => { const f = Date.now; let x = 0; for (let i = 0; i < n; i++) x += f(); return x; },
  ],
  'new Date()': [
    (n) => { const D = dal.native.Date; let x = 0; for (let i = 0; i < n; i++) x += new D().getTime(); return x; },
    (n) => { let x = 0; for (let i = 0; i < n; i++) x += new Date().getTime(); return x; },
  ],
  'performance.now': [
    (n) => { const f = dal.native.performanceNow; let x = 0; for (let i = 0; i < n; i++) x += f(); return x; },
    (n) => { const f = performance.now; let x = 0; for (let i = 0; i < n; i++) x += f(); return x; },
  ],
  'process.hrtime.bigint': [
    (n) => { const f = dal.native.hrtimeBigint; let x = 0n; for (let i = 0; i < n; i++) x += f() & 1n; return x; },
    (n) => { const f = process.hrtime.bigint; let x = 0n; for (let i = 0; i < n; i++) x += f() & 1n; return x; },
  ],
  'Math.random': [
    (n) => { const f = dal.native.mathRandom; let x = 0; for (let i = 0; i < n; i++) x += f(); return x; },
    (n) => { const f = Math.random; let x = 0; for (let i = 0; i < n; i++) x += f(); return x; },
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
for (const [name, [nativeLoop, shimLoop]] of Object.entries(loops)) {
  time(nativeLoop, N / 10); // warm up both sides
  time(shimLoop, N / 10);
  const nat = [];
  const shim = [];
  let roundTrips = 0;
  for (let r = 0; r < ROUNDS; r++) {
    nat.push(time(nativeLoop, N));
    const before = dal.stats().round_trips;
    shim.push(time(shimLoop, N));
    roundTrips += dal.stats().round_trips - before;
  }
  const native_ns = median(nat);
  const shim_ns = median(shim);
  results.push({
    name,
    native_ns: round(native_ns),
    shim_ns: round(shim_ns),
    ratio: round(shim_ns / native_ns),
    ratio_min: round(Math.min(...shim.map((s, i) => s / nat[i]))),
    ratio_max: round(Math.max(...shim.map((s, i) => s / nat[i]))),
    round_trips_per_million: round(roundTrips * 1e6 / (N * ROUNDS)),
    repeats: ROUNDS,
    spread: `median of ${ROUNDS} x ${N} calls; native ${spread(nat)}, shim ${spread(shim)} ns`,
    mode: dal.mode(),
    runtime: `node ${process.version}`,
  });
}

console.log(JSON.stringify(results));

function spread(xs) {
  return `${round(Math.min(...xs))}-${round(Math.max(...xs))}`;
}

function round(v) {
  return Math.round(v * 100) / 100;
}
