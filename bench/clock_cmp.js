'use strict';
// clock_cmp.js: ns per clock read as this process sees it, whatever serves
// its clock: the native read, libfaketime (LD_PRELOAD) or dal's shim (under
// dal-exec). dal-bench runs it three ways, alternating, and compares.
//
//   node bench/clock_cmp.js
//   LD_PRELOAD=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 FAKETIME="@2026-01-01 00:00:00" node bench/clock_cmp.js
//   bin/dal-exec run --keep-env 'BENCH_*' -- node bench/clock_cmp.js
//
// Each read is timed over BENCH_CALLS calls, BENCH_ROUNDS times; the median
// round is reported. The timer is the real monotonic clock,
// process.hrtime.bigint (under libfaketime it runs at the real rate from a
// shifted origin), or the shim's unpatched hrtime under dal; in dal's
// strict mode, where the syscall layer serves every clock the process reads,
// the unpatched ones too, it is the process's CPU time (getrusage, which
// the layer leaves real; the loops never block). Output, one
// line of JSON:
//
//   {"runtime": "node v..", "under": "native|faketime|dal", "now": Date.now() / 1000, "reads":
//    [{"name", "ns", "min_ns", "max_ns", "rounds", "calls"}, ...]}

const dal = globalThis[Symbol.for('dal')];
const active = Boolean(dal && dal.active);
const hr = !active ? process.hrtime.bigint : dal.mode() === 'strict' ? cpuNs : dal.native.hrtimeBigint;

// cpuNs is the process's CPU time in ns (microsecond resolution).
function cpuNs() {
  const u = dal.native.cpuUsage.call(process);
  return BigInt(u.user + u.system) * 1000n;
}
const N = Number(process.env.BENCH_CALLS || 2e6);
const ROUNDS = Number(process.env.BENCH_ROUNDS || 5);

// Each loop is its own function so V8 optimizes each call site separately.
const loops = {
  'Date.now': (n) => { const f = Date.now; let x = 0; for (let i = 0; i < n; i++) x += f(); return x; },
  'new Date()': (n) => { let x = 0; for (let i = 0; i < n; i++) x += new Date().getTime(); return x; },
  'performance.now': (n) => { const f = performance.now.bind(performance); let x = 0; for (let i = 0; i < n; i++) x += f(); return x; },
  'process.hrtime.bigint': (n) => { const f = process.hrtime.bigint; let x = 0n; for (let i = 0; i < n; i++) x += f() & 1n; return x; },
};

function time(fn, n) {
  const t0 = hr();
  const sink = fn(n);
  const ns = Number(hr() - t0);
  if (sink === -1) process.stdout.write(''); // keep the result alive
  return ns / n;
}

const reads = [];
for (const [name, loop] of Object.entries(loops)) {
  time(loop, N / 10); // warm up
  const rounds = [];
  for (let r = 0; r < ROUNDS; r++) rounds.push(time(loop, N));
  rounds.sort((a, b) => a - b);
  reads.push({
    name,
    ns: round(rounds[Math.floor(rounds.length / 2)]),
    min_ns: round(rounds[0]),
    max_ns: round(rounds[rounds.length - 1]),
    rounds: ROUNDS,
    calls: N,
  });
}
console.log(JSON.stringify({ runtime: `node ${process.version}`, under: active ? 'dal' : /faketime/.test(process.env.LD_PRELOAD || '') ? 'faketime' : 'native', now: Date.now() / 1000, reads }));

function round(v) {
  return Math.round(v * 100) / 100;
}
