#!/usr/bin/env python3
"""A parent agent that spawns a Python child and a Node child and prints
their output with its own. Under dal every process has its own clock stream,
named by spawn order (0, 0.1, 0.2), and its own seeded random streams:

    bin/dal-exec run --seed 7 -- python3 examples/multiproc/parent.py
"""

import os
import random
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))


def stream():
    try:
        import dal
        return dal.stream() or "-"
    except ImportError:
        return "-"


def main():
    print("parent stream %s: time %r random %r uuid4 %s" % (stream(), time.time(), random.random(), uuid.uuid4()))
    children = [
        [sys.executable, os.path.join(HERE, "child.py")],
        ["node", os.path.join(HERE, "child.js")],
    ]
    for argv in children:
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        except FileNotFoundError as e:
            print("  cannot start %s: %s" % (argv[0], e))
            continue
        for line in out.stdout.splitlines():
            print("  " + line)
        for line in out.stderr.splitlines():
            print("  stderr: " + line)
        if out.returncode:
            print("  %s exited with %d" % (os.path.basename(argv[-1]), out.returncode))
    time.sleep(2)
    print("parent stream %s: after 2 s of sleep, time %r" % (stream(), time.time()))


if __name__ == "__main__":
    main()
