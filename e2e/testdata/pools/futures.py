"""concurrent.futures with 4 workers, threads and processes: results, the
threads' completion order, their clock reads and draws, and the main
process's clock and draws after the pools."""
import concurrent.futures as cf
import os
import random
import threading
import time


def cube(x):
    return x ** 3


def job(k):
    time.sleep((6 - k) * 0.01)
    return "%d:%s:%.6f:%.9f" % (k, threading.current_thread().name, time.monotonic(), random.random())


if __name__ == "__main__":
    with cf.ProcessPoolExecutor(4) as ex:
        print("process_map", list(ex.map(cube, range(10))))
        fs = [ex.submit(cube, k) for k in range(6)]
        print("process_results", sorted(f.result() for f in cf.as_completed(fs)))
    with cf.ThreadPoolExecutor(4) as ex:
        print("thread_map", list(ex.map(job, range(6))))
        fs = [ex.submit(job, k) for k in range(6)]
        print("thread_completed", [f.result() for f in cf.as_completed(fs)])
    print("now", time.time())
    print("draw", random.random(), os.urandom(4).hex())
