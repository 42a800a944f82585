"""Runs one check of dal's runtime with no dald (`_install_offline`) and
prints its findings as JSON. Used by test_runtime.py; argv: check [mode]."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from dal import _runtime  # noqa: E402

CHECK = sys.argv[1]
MODE = sys.argv[2] if len(sys.argv) > 2 else "strict"
_runtime._install_offline({"mode": MODE, "stream": "0", "seed": 7, "epoch_ns": 1767225600 * 10**9,
                           "mono_ns": 10**9, "quantum_ns": 1000, "batch": 4096, "replay": False})

import asyncio  # noqa: E402  (after install, as in an agent)
import datetime  # noqa: E402
import time  # noqa: E402

wall = _runtime.ORIG["perf_counter"]
out = {}


def check_clock():
    out["t0"] = int(_runtime._t)  # importing logging (via asyncio) read time.time() once
    out["reads"] = [time.time(), time.time_ns(), time.monotonic(), time.monotonic_ns(), time.perf_counter(), time.perf_counter_ns(),
                    time.clock_gettime(time.CLOCK_REALTIME), time.clock_gettime_ns(time.CLOCK_MONOTONIC)]
    t0 = time.monotonic_ns()
    time.sleep(1.5)
    out["sleep_1_5"] = time.monotonic_ns() - t0
    t0 = time.monotonic_ns()
    time.sleep(0.1)
    out["sleep_0_1"] = time.monotonic_ns() - t0
    t0 = time.monotonic_ns()
    time.sleep(2)
    out["sleep_2"] = time.monotonic_ns() - t0
    errs = []
    for bad in (-1, -0.5, float("nan"), "1", None):
        try:
            time.sleep(bad)
            errs.append(None)
        except (ValueError, TypeError) as e:
            errs.append(type(e).__name__)
    out["sleep_errors"] = errs
    out["localtime"] = list(time.localtime())[:6]
    out["gmtime"] = list(time.gmtime())[:6]
    out["ctime"] = time.ctime()
    out["strftime"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    out["now"] = datetime.datetime.now().isoformat()
    out["utcnow"] = datetime.datetime.utcnow().isoformat()
    out["now_utc"] = datetime.datetime.now(datetime.timezone.utc).isoformat()
    out["today"] = datetime.date.today().isoformat()
    out["stats"] = _runtime.stats()


def check_asyncio_order():
    order = []

    async def main():
        loop = asyncio.get_running_loop()
        out["loop"] = type(loop).__name__
        for name, d in (("c", 0.3), ("a", 0.1), ("b", 0.1), ("d", 2.0)):
            loop.call_later(d, order.append, name)
        h = loop.call_later(1.0, order.append, "cancelled")
        h.cancel()
        await asyncio.sleep(2.5)
        t0 = loop.time()
        await asyncio.sleep(0.25)
        out["sleep_elapsed"] = loop.time() - t0
    w0 = wall()
    asyncio.run(main())
    out["wall"] = wall() - w0
    out["order"] = order
    out["timers"] = _runtime._timers


def check_idle():
    import concurrent.futures
    import socket
    import threading

    async def executor_beats_timer():
        loop = asyncio.get_running_loop()
        fired = []
        loop.call_later(10, fired.append, "timer")
        t0, w0 = loop.time(), wall()
        r = await loop.run_in_executor(None, lambda: (_runtime.ORIG["sleep"](0.1), "done")[1])
        return {"result": r, "fired": list(fired), "virtual": loop.time() - t0, "wall": wall() - w0}

    async def no_io_jumps():
        loop = asyncio.get_running_loop()
        t0, w0 = loop.time(), wall()
        await asyncio.sleep(3600)
        return {"virtual": loop.time() - t0, "wall": wall() - w0}

    async def listening_is_not_outstanding():
        loop = asyncio.get_running_loop()
        srv = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        plain = socket.socket()
        plain.bind(("127.0.0.1", 0))
        plain.listen()
        loop.add_reader(plain.fileno(), lambda: None)  # a listening socket we manage ourselves
        t0, w0 = loop.time(), wall()
        await asyncio.sleep(600)
        loop.remove_reader(plain.fileno())
        plain.close()
        srv.close()
        await srv.wait_closed()
        return {"virtual": loop.time() - t0, "wall": wall() - w0}

    async def idle_connection_waits_real_time():
        loop = asyncio.get_running_loop()
        a, b = socket.socketpair()
        reader, writer = await asyncio.open_connection(sock=a)
        t0, w0 = loop.time(), wall()
        await asyncio.sleep(0.2)
        res = {"virtual": loop.time() - t0, "wall": wall() - w0}
        writer.close()
        b.close()
        return res

    async def data_arrives_before_timer():
        loop = asyncio.get_running_loop()
        a, b = socket.socketpair()
        reader, writer = await asyncio.open_connection(sock=a)
        threading.Timer(0.05, lambda: b.sendall(b"pong\n")).start()
        t0, w0 = loop.time(), wall()
        line = await asyncio.wait_for(reader.readline(), 30)
        res = {"line": line.decode(), "virtual": loop.time() - t0, "wall": wall() - w0}
        writer.close()
        b.close()
        return res

    async def wrapped_future_is_outstanding():
        loop = asyncio.get_running_loop()
        fired = []
        loop.call_later(10, fired.append, "timer")
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            t0 = loop.time()
            r = await asyncio.wrap_future(pool.submit(lambda: (_runtime.ORIG["sleep"](0.05), "done")[1]))
        return {"result": r, "fired": list(fired), "virtual": loop.time() - t0}

    async def leftover_timer_does_not_fire_at_shutdown():
        loop = asyncio.get_running_loop()
        out["leftover"] = []
        loop.call_later(10, out["leftover"].append, "fired during asyncio.run's shutdown")
        await asyncio.to_thread(_runtime.ORIG["sleep"], 0.01)
        return {}

    for name, fn in (("wrapped", wrapped_future_is_outstanding), ("shutdown", leftover_timer_does_not_fire_at_shutdown),
                     ("executor", executor_beats_timer), ("no_io", no_io_jumps), ("listening", listening_is_not_outstanding),
                     ("idle_conn", idle_connection_waits_real_time), ("data", data_arrives_before_timer)):
        out[name] = asyncio.run(fn())


def check_real_waits():
    import queue
    import subprocess
    import threading
    v0 = time.monotonic_ns()
    threading.Event().wait(0.05)
    out["event_wait"] = time.monotonic_ns() - v0
    v0 = time.monotonic_ns()
    try:
        queue.Queue().get(timeout=0.05)
        out["queue"] = "no Empty"
    except queue.Empty:
        out["queue"] = "Empty"
    out["queue_wait"] = time.monotonic_ns() - v0
    w0 = wall()
    r = subprocess.run([sys.executable, "-c", "import time; time.sleep(0.3)"], timeout=5,
                       env={k: v for k, v in os.environ.items() if not k.startswith("DAL_")})
    out["subprocess"] = r.returncode
    out["subprocess_wall"] = wall() - w0
    w0 = wall()
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"],
                         env={k: v for k, v in os.environ.items() if not k.startswith("DAL_")})
    try:
        p.wait(timeout=0.2)
        out["popen_wait"] = "returned"
    except subprocess.TimeoutExpired:
        out["popen_wait"] = "TimeoutExpired"
    p.kill()
    p.wait()
    out["popen_wait_wall"] = wall() - w0
    t = threading.Thread(target=lambda: _runtime.ORIG["sleep"](0.05))
    t.start()
    n = 0
    while t.is_alive():  # a sleep loop polling a thread: the thread progresses
        time.sleep(0.01)
        n += 1
    out["poll_loop_done"] = True


def check_threads():
    import concurrent.futures as cf
    import os
    import queue
    import resource
    import subprocess
    import threading
    log = []

    def note(what):
        log.append("%s@%d" % (what, (time.monotonic_ns() - start) // 1_000_000))
        if os.environ.get("DAL_TEST_WALL"):
            sys.stderr.write("%s %.3f\n" % (what, wall()))
    start = time.monotonic_ns()
    # waits with a timeout are virtual timers
    threading.Event().wait(0.3)
    note("event")
    c = threading.Condition()
    with c:
        out["cond"] = c.wait(0.2)
    note("cond")
    try:
        queue.Queue().get(timeout=0.5)
    except queue.Empty:
        note("queue-empty")
    # Timers fire in (deadline, registration) order
    ts = [threading.Timer(d, note, args=(name,)) for name, d in (("a", 0.3), ("b", 0.1), ("c", 0.1), ("d", 0.2))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()

    # threads take turns: CPU loops never interleave by the switch interval
    counts = []

    def spin(k):
        for i in range(20000):
            if i % 5000 == 0:
                counts.append((k, i))
    th = [threading.Thread(target=spin, args=(k,)) for k in range(3)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    out["spin"] = counts

    # a pool: completion order is the virtual durations' order
    def job(k, d):
        time.sleep(d)
        return k
    with cf.ThreadPoolExecutor(4) as pool:
        fs = [pool.submit(job, k, d) for k, d in enumerate((0.5, 0.1, 0.3, 0.2, 0.05))]
        out["as_completed"] = [f.result() for f in cf.as_completed(fs, timeout=10)]
        done, pending = cf.wait([pool.submit(job, 9, 5)], timeout=1)
        out["wait_timeout"] = [len(done), len(pending)]
    note("pool")

    # join with a timeout, a Semaphore, a Barrier
    ev = threading.Event()
    t = threading.Thread(target=ev.wait, args=(10,))
    t.start()
    t.join(0.25)
    out["join_timeout_alive"] = t.is_alive()
    ev.set()
    t.join()
    sem = threading.Semaphore(0)
    out["sem"] = sem.acquire(timeout=0.1)
    b = threading.Barrier(2)
    order = []
    bt = threading.Thread(target=lambda: (time.sleep(0.2), order.append("t"), b.wait()))
    bt.start()
    b.wait()
    order.append("main")
    bt.join()
    out["barrier"] = order
    note("sync")

    # a subprocess timeout advances virtual time by the timeout
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"], env={k: v for k, v in os.environ.items() if not k.startswith("DAL_")})
    v0 = time.monotonic_ns()
    try:
        p.wait(timeout=0.2)
    except subprocess.TimeoutExpired:
        out["popen_timeout_virtual"] = (time.monotonic_ns() - v0) // 1_000_000
    p.kill()
    p.wait()
    out["log"] = log
    # CPU times are real (they measure work), counted; os.times().elapsed
    # is the virtual monotonic clock
    from dal import _say
    out["cpu"] = [time.process_time_ns() > 0, time.thread_time_ns() > 0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss > 0,
                  time.clock_gettime_ns(time.CLOCK_PROCESS_CPUTIME_ID) > 0]
    mono = time.monotonic()
    out["elapsed_is_virtual"] = abs(os.times().elapsed - mono) < 0.02
    out["cpu_unserved"] = {k: v for k, v in _say.UNSERVED.items() if k.startswith("cpu_clock/")}


def check_asyncio_threads():
    import threading
    events = []

    async def main():
        loop = asyncio.get_running_loop()
        t0 = loop.time()

        def at(what):
            events.append([what, round(loop.time() - t0, 6)])
        threading.Timer(0.7, lambda: loop.call_soon_threadsafe(at, "timer")).start()
        worker = asyncio.create_task(asyncio.to_thread(time.sleep, 1.0))
        await asyncio.sleep(0.5)
        at("sleep")
        await worker
        at("thread")
        try:
            await asyncio.wait_for(asyncio.to_thread(time.sleep, 5), timeout=2)
        except asyncio.TimeoutError:
            at("timeout")
    asyncio.run(main())
    out["events"] = events


def check_random():
    import random
    import secrets
    import uuid
    from dal import _seedrng
    label = lambda s: _seedrng.derive(7, "0/" + s)  # noqa: E731
    mod_seed = int.from_bytes(label("python.random").read(32), "big")
    ref = random.Random.__mro__[1]  # _random.Random: unpatched seeding
    expect = random.Random(0)
    out["module_random"] = random.random()
    expect.seed(mod_seed)
    out["module_expect"] = expect.random()
    inst = label("python.random.instance")
    out["instance"] = [random.Random().random(), random.Random().random()]
    e1 = random.Random(int.from_bytes(inst.read(32), "big")).random()
    e2 = random.Random(int.from_bytes(inst.read(32), "big")).random()
    out["instance_expect"] = [e1, e2]
    u = label("os.urandom")
    out["urandom"] = [os.urandom(16).hex(), uuid.uuid4().bytes.hex(), secrets.token_bytes(8).hex(), os.getrandom(4).hex()]
    exp = [u.read(16).hex(), u.read(16).hex(), u.read(8).hex(), u.read(4).hex()]
    b = bytearray.fromhex(exp[1])
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    exp[1] = b.hex()
    out["urandom_expect"] = exp
    before = time.time_ns()
    u1 = uuid.uuid1()
    node_stream = label("python.uuid1")
    node = int.from_bytes(node_stream.read(6), "big") | 0x010000000000
    seq = int.from_bytes(node_stream.read(2), "big") & 0x3FFF
    out["uuid1"] = [u1.node, u1.clock_seq, u1.time]
    out["uuid1_expect"] = [node, seq, (before + 1000) // 100 + 0x01B21DD213814000]
    out["sysrandom"] = random.SystemRandom().random()
    out["stats"] = _runtime.stats()
    del ref


def check_seeded_ticks():
    del _runtime._tv[:]  # drop the reads made while importing
    a = time.time_ns()
    b = time.monotonic_ns()
    c = time.time()
    out["values"] = [a, b, c]
    out["logged"] = list(_runtime._tv)
    time.sleep(0.01)  # real in seeded mode
    out["stats"] = _runtime.stats()
    time.process_time()  # real in seeded mode, and counted as such
    from dal import _say
    out["unserved"] = dict(_say.UNSERVED)


def check_foreign_loop():
    from asyncio import unix_events

    class Foreign(unix_events._UnixDefaultEventLoopPolicy):
        _loop_factory = unix_events._UnixSelectorEventLoop
    asyncio.set_event_loop_policy(Foreign())
    asyncio.set_event_loop_policy(Foreign())  # said once, not twice

    async def main():
        return type(asyncio.get_running_loop()).__name__
    out["loop"] = asyncio.run(main())
    asyncio.set_event_loop_policy(None)  # back to the default: dal's
    out["default_loop"] = asyncio.run(main())
    from dal import _say
    out["unserved"] = dict(_say.UNSERVED)


def check_child_env():
    os.environ["NODE_OPTIONS"] = '--require "/x y/node/dal-register.js" --max-old-space-size=100'
    os.environ["DAL_SESSION_TOKEN"] = "t0k"
    e = _runtime._child_env({"PATH": "/bin", "PYTHONPATH": "/user", "NODE_OPTIONS": "--trace-warnings"}, "0.7")
    out["env"] = e


def check_compat():
    import copy
    import io
    import logging
    import pickle
    import sqlite3
    buf = io.StringIO()
    h = logging.StreamHandler(buf)
    h.setFormatter(logging.Formatter("%(asctime)s %(message)s"))  # converter = time.localtime, a class attribute
    log = logging.getLogger("compat")
    log.addHandler(h)
    log.warning("hello")
    out["log"] = buf.getvalue()
    now = datetime.datetime.now()
    out["types"] = [isinstance(now, datetime.datetime), isinstance(now, datetime.date), issubclass(datetime.datetime, datetime.date),
                    type(now).__module__ + "." + type(now).__qualname__, repr(datetime.datetime), repr(datetime.datetime(2020, 1, 2))]
    out["pickle0"] = pickle.dumps(datetime.datetime(2026, 1, 1, 0, 0, 0, 1), 0).decode("latin-1")
    out["pickle4"] = pickle.dumps(datetime.datetime(2026, 1, 1, 0, 0, 0, 1, tzinfo=datetime.timezone.utc), 4).hex()
    out["roundtrips"] = [pickle.loads(pickle.dumps(now)) == now, copy.deepcopy(now) == now, copy.copy(datetime.date.today()) == datetime.date.today(),
                         pickle.loads(pickle.dumps(datetime.datetime)) is datetime.datetime]
    db = sqlite3.connect(":memory:")
    db.execute("create table t (d timestamp, day date)")
    db.execute("insert into t values (?, ?)", (now, datetime.date.today()))
    out["sqlite"] = list(db.execute("select * from t").fetchone())

    class Sub(datetime.datetime):
        pass
    s = Sub.now()
    out["subclass"] = [type(s).__name__, isinstance(now, Sub), s.year]


def check_blocking_calls():
    """Threads blocked in os.read, select.select, a multiprocessing lock
    and os.waitpid hand the turn over: each would otherwise hold it while
    the thread that unblocks it waits for it (the multiprocessing.Pool
    hang)."""
    import multiprocessing
    import select
    import threading
    log = []
    start = time.monotonic_ns()

    def note(what):
        log.append("%s@%d" % (what, (time.monotonic_ns() - start) // 1_000_000))

    def pair(first, second):
        ts = [threading.Thread(target=first), threading.Thread(target=second)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    r, w = os.pipe()
    pair(lambda: note("read " + os.read(r, 10).decode()), lambda: (time.sleep(0.5), note("write"), os.write(w, b"x")))
    pair(lambda: note("select %d" % len(select.select([r], [], [], 30)[0])), lambda: (time.sleep(0.25), note("write"), os.write(w, b"y")))
    note("drained " + os.read(r, 10).decode())
    lock = multiprocessing.Lock()
    lock.acquire()

    def locker():
        with lock:
            note("mp lock")
    pair(locker, lambda: (time.sleep(0.1), note("release"), lock.release()))
    pid = os.fork()
    if pid == 0:
        os.read(r, 1)  # until the parent writes
        os._exit(3)
    pair(lambda: note("waitpid %d" % os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])), lambda: (time.sleep(0.1), note("wake child"), os.write(w, b"z")))
    out["log"] = log


def check_stuck():
    """A thread holding the turn blocked in a call dal does not wrap (a raw
    C lock): the watchdog says so and lets the others run."""
    import _thread
    import threading
    raw = _thread.allocate_lock()
    raw.acquire()

    def release_later():
        time.sleep(1)
        raw.release()
    t = threading.Thread(target=release_later, name="releaser")
    t.start()
    raw.acquire()
    t.join()
    out["finished"] = True


globals()["check_" + CHECK]()
print(json.dumps(out))
