#!/usr/bin/env python3
"""clock_cmp.py: ns per clock read as this process sees it, whatever serves
its clock: the native vDSO read, libfaketime (LD_PRELOAD) or dal's shim
(under dal-exec). dal-bench runs it three ways, alternating, and compares.

    python3 bench/clock_cmp.py
    LD_PRELOAD=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 FAKETIME="@2026-01-01 00:00:00" python3 bench/clock_cmp.py
    bin/dal-exec run --keep-env 'BENCH_*' -- python3 bench/clock_cmp.py

Each read is timed over BENCH_CALLS calls (a 10x unrolled loop), BENCH_ROUNDS
times; the median round is reported. The timer is the real monotonic clock:
dal's unpatched perf_counter_ns under dal, perf_counter_ns otherwise (under
libfaketime it runs at the real rate from a shifted origin, so intervals are
real); in dal's strict mode, where the syscall layer serves every clock the process
reads, the unpatched ones too, it is the thread's CPU time (which the layer leaves
real; the loops never block). Output, one line of JSON:

  {"runtime": "python 3.x", "under": "native|faketime|dal", "now": time.time(), "reads":
   [{"name", "ns", "min_ns", "max_ns", "rounds", "calls"}, ...]}
"""

import datetime
import json
import os
import sys
import time

N = int(os.environ.get("BENCH_CALLS", "1000000"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))


def timed(fn, n, clock):
    t0 = clock()
    for _ in range(n // 10):
        fn(); fn(); fn(); fn(); fn(); fn(); fn(); fn(); fn(); fn()
    return (clock() - t0) / (n // 10 * 10)


def main():
    under, clock = "native", time.perf_counter_ns
    try:
        import dal
        if dal.mode() not in (None, "default"):
            under, clock = "dal", dal.ORIG["perf_counter_ns"]
            if dal.mode() == "strict":
                # dal's syscall layer serves every clock read, the
                # unpatched ones too; the thread's CPU time stays real.
                get, cpu = dal.ORIG["clock_gettime_ns"], time.CLOCK_THREAD_CPUTIME_ID
                clock = lambda: get(cpu)  # noqa: E731
    except ImportError:
        pass
    if under == "native" and "faketime" in os.environ.get("LD_PRELOAD", ""):
        under = "faketime"
    reads = [
        ("time.time", time.time, N),
        ("time.monotonic", time.monotonic, N),
        ("time.perf_counter", time.perf_counter, N),
        ("datetime.now", datetime.datetime.now, N // 10),
    ]
    out = []
    for name, fn, n in reads:
        timed(fn, n // 10, clock)  # warm up
        rounds = sorted(timed(fn, n, clock) for _ in range(ROUNDS))
        out.append({"name": name, "ns": round(rounds[len(rounds) // 2], 2), "min_ns": round(rounds[0], 2),
                    "max_ns": round(rounds[-1], 2), "rounds": ROUNDS, "calls": n})
    sys.stdout.write(json.dumps({"runtime": "python " + sys.version.split()[0], "under": under, "now": time.time(), "reads": out}) + "\n")


if __name__ == "__main__":
    main()
