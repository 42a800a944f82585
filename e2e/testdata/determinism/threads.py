"""A Python agent with threads: waits with timeouts, a thread pool racing
sleeps, Timers, CPU times, temporary files and randomness drawn in threads.
Lines: "<kind> <name> <value>"."""
import concurrent.futures as cf
import os
import queue
import random
import resource
import tempfile
import threading
import time

t0 = time.monotonic()
threading.Event().wait(0.3)
try:
    queue.Queue().get(timeout=0.2)
except queue.Empty:
    pass
print("fixed waited", round(time.monotonic() - t0, 6))

fired = []
timers = [threading.Timer(d, fired.append, args=(name,)) for name, d in (("a", 0.3), ("b", 0.1), ("c", 0.1), ("d", 0.2))]
for t in timers:
    t.start()
for t in timers:
    t.join()
print("fixed timers", "".join(fired))


def job(k):
    time.sleep((5 - k) * 0.01)
    return "%d:%.6f" % (k, random.random())


with cf.ThreadPoolExecutor(3) as pool:
    done = [f.result() for f in cf.as_completed([pool.submit(job, k) for k in range(6)])]
print("fixed pool_order", " ".join(d.split(":")[0] for d in done))
print("random pool_draws", " ".join(d.split(":")[1] for d in done))

seen = []
lock = threading.Lock()


def spin(k):
    for i in range(3):
        with lock:
            seen.append(k)
        time.sleep(0)


threads = [threading.Thread(target=spin, args=(k,)) for k in range(3)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("fixed interleaving", "".join(map(str, seen)))

# CPU time and resource usage are real (they measure work, not time);
# os.times().elapsed is a clock: virtual
print("fixed process_time", time.process_time_ns() > 0)
print("fixed rusage", resource.getrusage(resource.RUSAGE_SELF).ru_utime > 0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss > 0)
t = os.times()
print("fixed os_times", t.user + t.system > 0, t.elapsed)
with tempfile.NamedTemporaryFile() as f:
    print("random tempfile", os.path.basename(f.name))
print("fixed elapsed", round(time.monotonic() - t0, 6))
