#!/usr/bin/env python3
"""Cost of a clock read through dal's Python shim versus the native read.

Run under dal (strict mode is the default):

    bin/dal-exec run -- python3 bench/clock_python.py

Run directly, it re-runs itself under $DAL_EXEC (default bin/dal-exec next to
this repository's bench/ directory). Inside the shimmed process it times the
native functions the shim saved (dal.ORIG) against the patched ones, with the
real perf_counter, best of several rounds, and counts the shim's IPC round
trips over the shimmed reads. Prints one JSON object on stdout.
"""

import json
import os
import sys

N = int(os.environ.get("DAL_BENCH_N", "1000000"))
ROUNDS = int(os.environ.get("DAL_BENCH_ROUNDS", "5"))


def _rerun_under_dal():
    here = os.path.dirname(os.path.abspath(__file__))
    exe = os.environ.get("DAL_EXEC") or os.path.join(os.path.dirname(here), "bin", "dal-exec")
    if not os.path.exists(exe):
        sys.stderr.write("clock_python: not running under dal-exec and %s does not exist: build it (go build -o bin/ ./cmd/...) or set DAL_EXEC\n" % exe)
        sys.exit(2)
    args = [exe, "run", "--mode", os.environ.get("DAL_BENCH_MODE", "strict"),
            "--keep-env", "DAL_BENCH_*", "--", sys.executable, os.path.abspath(__file__)]
    os.execv(exe, args)


def _loop(fn, n, clock):
    """ns per call of fn over n calls (loop overhead included, as for any
    caller; it is the same for native and shimmed)."""
    t0 = clock()
    for _ in range(n // 10):
        fn(); fn(); fn(); fn(); fn(); fn(); fn(); fn(); fn(); fn()
    return (clock() - t0) / (n // 10 * 10)


def _empty(clock, n):
    def nop():
        return None
    return _loop(nop, n, clock)


def main():
    try:
        import dal
    except ImportError:
        dal = None
    if dal is None or dal.mode() in (None, "default"):
        _rerun_under_dal()
    import time
    import datetime
    real = dal.ORIG["perf_counter_ns"]
    pairs = [
        ("time.time", dal.ORIG["time"], time.time),
        ("time.time_ns", dal.ORIG["time_ns"], time.time_ns),
        ("time.monotonic", dal.ORIG["monotonic"], time.monotonic),
        ("time.perf_counter", dal.ORIG["perf_counter"], time.perf_counter),
    ]
    out = {"runtime": "python " + sys.version.split()[0], "mode": dal.mode(), "n": N, "rounds": ROUNDS, "clocks": {}}
    for name, native, shim in pairs:
        best_native = min(_loop(native, N, real) for _ in range(ROUNDS))
        rt0, r0 = dal.stats()["round_trips"], dal.stats()["reads"]
        best_shim = min(_loop(shim, N, real) for _ in range(ROUNDS))
        rt1, r1 = dal.stats()["round_trips"], dal.stats()["reads"]
        reads = r1 - r0
        out["clocks"][name] = {
            "native_ns": round(best_native, 1),
            "shim_ns": round(best_shim, 1),
            "ratio": round(best_shim / best_native, 2),
            "reads": reads,
            "round_trips": rt1 - rt0,
            "round_trips_per_1e6_reads": round((rt1 - rt0) * 1e6 / reads, 3) if reads else None,
        }
    # datetime.now has no saved native twin: compare against the C classmethod.
    real_now = datetime.datetime.__mro__[1].now
    n = N // 10
    out["clocks"]["datetime.now"] = {
        "native_ns": round(min(_loop(real_now, n, real) for _ in range(ROUNDS)), 1),
        "shim_ns": round(min(_loop(datetime.datetime.now, n, real) for _ in range(ROUNDS)), 1),
    }
    out["clocks"]["datetime.now"]["ratio"] = round(out["clocks"]["datetime.now"]["shim_ns"] / out["clocks"]["datetime.now"]["native_ns"], 2)
    out["empty_call_ns"] = round(min(_empty(real, N) for _ in range(ROUNDS)), 1)
    tt = out["clocks"]["time.time"]
    out["ratio"] = tt["ratio"]
    out["round_trips_per_1e6_reads"] = tt["round_trips_per_1e6_reads"]
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
