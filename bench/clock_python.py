#!/usr/bin/env python3
"""clock_python.py: the cost of a clock read through dal's Python shim against
the native read, measured in the same process and run.

    bin/dal-exec run -- python3 bench/clock_python.py                 strict mode
    bin/dal-exec run --mode seeded -- python3 bench/clock_python.py   real clock, logged

The shim keeps the unpatched functions (dal.ORIG), so both sides run in the
same interpreter state; both sides call a captured function reference. Each
read is timed over N calls (a 10x unrolled loop, the same for both sides),
native and shimmed alternating for ROUNDS rounds; the median of the rounds is
reported. Output, one line of JSON (what bench/cmd/dal-bench reads), an array
with one element per read:

  [{name, native_ns, shim_ns, ratio, ratio_min, ratio_max,
    round_trips_per_million, repeats, spread, mode, runtime}, ...]

ratio is the median shim/native; ratio_min and ratio_max the spread of the
per-round ratios (each round times both sides back to back).

round_trips_per_million counts the shim's IPC round trips per 10^6 shimmed
reads (0 in strict mode; 10^6/batch in seeded mode). Timing uses the native
perf_counter, except in strict mode: there dal's syscall layer serves every clock
the process reads, the unpatched functions' too (so "native" is dal's vDSO read),
and the timer is the thread's CPU time (CLOCK_THREAD_CPUTIME_ID, which the layer
leaves real; the loops never block, so their CPU time is their time). Run outside dal, the script re-runs itself under $DAL_EXEC
(default bin/dal-exec of this repository), or exits 2 when there is none.
"""

import json
import os
import sys

N = int(os.environ.get("BENCH_CALLS", "1000000"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "7"))


def rerun_under_dal():
    here = os.path.dirname(os.path.abspath(__file__))
    exe = os.environ.get("DAL_EXEC") or os.path.join(os.path.dirname(here), "bin", "dal-exec")
    if os.environ.get("DAL_SESSION") or not os.access(exe, os.X_OK):
        sys.stderr.write("clock_python.py measures the dal shim: run it under dal-exec, e.g. bin/dal-exec run -- python3 bench/clock_python.py\n")
        sys.exit(2)
    os.execv(exe, [exe, "run", "--keep-env", "BENCH_*", "--", sys.executable, os.path.abspath(__file__)])


def timed(fn, n, clock):
    """ns per call of fn over n calls."""
    t0 = clock()
    for _ in range(n // 10):
        fn(); fn(); fn(); fn(); fn(); fn(); fn(); fn(); fn(); fn()
    return (clock() - t0) / (n // 10 * 10)


def timer(dal):
    """The real clock to time with (see the module's doc)."""
    if dal.mode() != "strict":
        return dal.ORIG["perf_counter_ns"]
    import time
    get, cpu = dal.ORIG["clock_gettime_ns"], time.CLOCK_THREAD_CPUTIME_ID
    return lambda: get(cpu)


def median(xs):
    return sorted(xs)[len(xs) // 2]


def main():
    try:
        import dal
    except ImportError:
        dal = None
    if dal is None or dal.mode() in (None, "default"):
        rerun_under_dal()
    import datetime
    import time
    clock = timer(dal)
    pairs = [
        ("time.time", dal.ORIG["time"], time.time, N),
        ("time.time_ns", dal.ORIG["time_ns"], time.time_ns, N),
        ("time.monotonic", dal.ORIG["monotonic"], time.monotonic, N),
        ("time.perf_counter", dal.ORIG["perf_counter"], time.perf_counter, N),
        # the C classmethod of the real class against the shim's subclass
        ("datetime.now", datetime.datetime.__mro__[1].now, datetime.datetime.now, N // 10),
    ]
    # let the CPU settle (frequency, caches) before the first pair: without
    # this the first measured read comes out ~30% slower than the others
    end = clock() + 300_000_000
    while clock() < end:
        for _, native, shim, _n in pairs:
            timed(native, 1000, clock)
            timed(shim, 1000, clock)
    results = []
    for name, native, shim, n in pairs:
        timed(native, n // 10, clock)  # warm up both sides
        timed(shim, n // 10, clock)
        nat, sh = [], []
        trips = reads = 0
        for _ in range(ROUNDS):
            nat.append(timed(native, n, clock))
            s0 = dal.stats()
            sh.append(timed(shim, n, clock))
            s1 = dal.stats()
            trips += s1["round_trips"] - s0["round_trips"]
            reads += s1["reads"] - s0["reads"]
        native_ns, shim_ns = median(nat), median(sh)
        results.append({
            "name": name,
            "native_ns": round(native_ns, 1),
            "shim_ns": round(shim_ns, 1),
            "ratio": round(shim_ns / native_ns, 2),
            "ratio_min": round(min(s / n for s, n in zip(sh, nat)), 2),
            "ratio_max": round(max(s / n for s, n in zip(sh, nat)), 2),
            "round_trips_per_million": round(trips * 1e6 / reads, 3) if reads else 0,
            "reads": reads,
            "repeats": ROUNDS,
            "spread": "median of %d x %d calls; native %.1f-%.1f, shim %.1f-%.1f ns" % (ROUNDS, n, min(nat), max(nat), min(sh), max(sh)),
            "mode": dal.mode(),
            "runtime": "python " + sys.version.split()[0],
        })
    sys.stdout.write(json.dumps(results) + "\n")


if __name__ == "__main__":
    main()
