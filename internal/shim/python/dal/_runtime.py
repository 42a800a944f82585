"""dal's Python runtime shim: virtual time, seeded randomness, spawn naming.

Installed by ``sitecustomize`` when ``DAL_SOCKET`` and ``DAL_SESSION`` are set.
Everything it does is decided by dald's ``hello`` reply (docs/protocol.md):
the process's stream name, the mode, the seed, the epoch, the quantum.

Modes
-----
strict
    Virtual time. The process owns one counter ``t`` (ns since the stream
    started; held as a float, exact below 2**53 ns = 104 days, because float
    adds are twice as fast as bigint adds on the read path). Every clock read
    adds the quantum and returns ``epoch_ns + _t``
    (realtime: ``time.time[_ns]``, ``datetime.now/utcnow/today``,
    ``date.today``, ``time.clock_gettime(CLOCK_REALTIME)``, the no-argument
    forms of ``localtime/gmtime/ctime/asctime/strftime``) or ``mono_ns + _t``
    (``time.monotonic[_ns]``, ``time.perf_counter[_ns]``,
    ``time.clock_gettime(CLOCK_MONOTONIC)``). ``time.sleep(d)`` adds ``d`` and
    yields the GIL (a real ``sleep(0)``) so that threads polling in sleep loops
    still progress. Randomness is seeded (see below). No clock read makes an
    IPC round trip.

    ``datetime.date`` and ``datetime.datetime`` are replaced in the
    ``datetime`` module by subclasses (the C types are immutable) whose
    metaclass makes ``isinstance``/``issubclass`` hold against real
    datetimes. Every instance, ``now()``'s included, is a real
    ``datetime.datetime``: C extensions that check the exact type (orjson,
    database drivers) keep working, reprs and pickles are byte-identical to
    an unshimmed run (pickling goes through ``copyreg``). The price:
    ``type(datetime.now()) is datetime.datetime`` is False.
seeded
    Clock reads are real and logged as ticks (kind 0 realtime, 1 monotonic),
    sent with ``ticks.put`` every ``batch`` ticks and at exit. Randomness
    seeded, sleeps real, asyncio native.
logged
    As seeded, but randomness is real and every draw is sent with
    ``draws.put`` (label = the source name, e.g. ``os.urandom``).
default
    ``hello`` only; nothing is patched.
replay (seeded/logged session with ``replay: true``)
    Clock reads are served from ``ticks.fetch`` (prefetched ``batch`` at a
    time); sleeps do not wait. Reading past the log sends one ``drift`` op and
    continues from the last served value + quantum. A logged session's draws
    are served from ``draws.fetch``.

Randomness (labels ``<stream>/<source>``, bytes from ``seedrng``)
    ``python.random``: first 32 bytes (big-endian int) seed the module-level
    generator, a fresh ``random.Random`` instance the module functions are
    rebound to. ``python.random.instance``: every ``Random.seed(None)``, so
    every ``random.Random()`` without a seed, takes the next 32 bytes.
    ``os.urandom``: ``os.urandom``, ``os.getrandom``, ``random._urandom``,
    hence ``secrets``, ``random.SystemRandom``, ``uuid.uuid4``, ``tempfile``.
    ``python.uuid1``: the ``uuid.uuid1`` node (first 6 bytes, multicast bit
    set) and every clock sequence (next 2 bytes, 14 bits); ``uuid1`` takes its
    time from the virtual clock.

asyncio on virtual time (strict mode)
-------------------------------------
The default event loop policy makes ``DalEventLoop`` loops (a
``SelectorEventLoop`` subclass; ``asyncio.SelectorEventLoop`` and
``asyncio.DefaultEventLoopPolicy`` are rebound to the dal classes).
``loop.time()`` is the virtual monotonic clock in seconds; reading it does not
advance the quantum. Timers fire in (deadline, registration order): timer
handles compare on ``(when, seq)``, so equal deadlines keep registration
order. The idle rule, applied whenever the loop would block with a timeout
``T > 0`` (no ready callbacks, earliest timer ``T`` ahead):

1. poll I/O without blocking; if something is ready, handle it (virtual time
   does not move);
2. else, if there is OUTSTANDING I/O -- a registered fd other than the loop's
   own self-pipe and listening sockets (``SO_ACCEPTCONN``), a pending
   thread future (``run_in_executor``, ``asyncio.wrap_future``;
   ``getaddrinfo`` and ``to_thread`` run there), the default executor's
   shutdown, or a subprocess transport whose process has not exited -- wait for real
   I/O for up to ``T`` of wall time. If it arrives, handle it (virtual time
   does not move): a local HTTP response beats a 30 s timeout timer, and does
   so deterministically whenever the server answers within ``T`` of wall
   time. If ``T`` of wall time passes, advance virtual time by ``T``;
3. else advance virtual time by ``T`` at once and fire the timer.

With no timers (timeout ``None``) the loop blocks on real I/O as usual.

Limits of the rule: an idle connection that stays registered for reading (a
keep-alive connection in a client pool, a websocket, a pipe from stdin)
counts as outstanding, so timers then wait in wall time (bounded by ``T``,
never a hang, but not fast); a thread ``threading`` did not start that
wakes the loop with ``call_soon_threadsafe`` is not seen, so virtual time may
jump past it (threads it started take turns with the loop, see Threads); a server slower than ``T`` of wall time loses the race to the
timer, as it would for real. Loops not made by dal -- uvloop (libuv reads its
clock in C), a third-party policy, a ``loop_factory`` -- run on the real clock:
the shim says so once on stderr when such a policy is installed, uvloop is
imported, or a non-dal loop starts running.

Threads (strict mode; dal/_threads.py)
--------------------------------------
Threads started by ``threading`` take turns: one runs Python code at a time
and hands over only at a blocking point -- a contended ``Lock``, ``RLock``,
``Condition.wait``, ``Event.wait``, ``Semaphore``, ``Barrier``,
``queue.get``, ``Thread.join``, ``time.sleep``, or a real blocking call --
to the next runnable thread, in the order threads became runnable. The real
blocking calls: socket ``connect/accept/recv*/send*`` and TLS sockets'
reads, writes and handshakes; ``os.read/readv/write/writev`` on a blocking
pipe, socket, FIFO or terminal (multiprocessing's connections);
``os.wait/waitpid/wait3/wait4/waitid`` without ``WNOHANG``
(``Process.join``); ``select.select`` and ``selectors`` ``select``;
multiprocessing's locks, semaphores, conditions and events (a contended
acquire); ``Popen.wait/communicate``. A read with data already waiting and
a send of at most 4 KiB to a socket ready for writing return at once and
keep the turn. The GIL's switch interval decides nothing, so
``ThreadPoolExecutor``, ``as_completed`` and ``Timer`` orders are the same
on every run, and so is ``multiprocessing.Pool``'s use of its threads.
Every wait with a timeout is a virtual timer: when no thread can run, time
jumps to the earliest deadline (ties in registration order) and the timers
fired are reported with asyncio's. The outstanding-I/O rule holds: while a
thread is out in a real blocking call, time jumps only after the deadline's
distance has passed in wall time without it coming back; a thread that
comes back waits for the next point where no thread runs, and threads that
come back together run in the order they were started. Wall time is
measured by the scheduler's own timed waits, which stay real under dal's
syscall layer (every clock a process reads there is virtual). A server's
poll loop (select on listening sockets only, ``accept``) is not
outstanding. ``Popen.wait/communicate(timeout)``, a ``select`` and a
multiprocessing acquire that time out move virtual time by the timeout.
``queue.SimpleQueue`` is the pure-Python one (the C one would block the
running thread in C).

Limits: a thread that busy-waits for another (``while not flag: pass``) or
blocks in a call dal does not wrap (a raw ``_thread`` lock, ``select.poll``
or ``epoll`` objects used directly, a C extension's blocking call) while
others are runnable would hold everyone: the scheduler's watchdog (a thread
of its own, from the second thread on) notices after 5 s of wall time, says
once on stderr which thread held the turn, where its Python code was and
what the kernel says it was doing (computing, or blocked in which system
call), counts it unserved (``clock/thread order``: an escape), and lets the
others run beside it: the order is no longer deterministic. Which thread
comes back first from real I/O depends on the I/O (a thread that comes back
waits for an idle point, but whether it is back by then is the I/O's
timing): clock reads and draws made by threads racing on real I/O are
ordered by it. Threads not started by ``threading`` (``_thread``, C
extensions) run beside the turns until they first block. An in-process
server answering a client thread makes the client's wait outstanding I/O, so
the server's own sleeps take wall time (bounded, never a hang).
``multiprocessing`` deadlines, ``socketserver`` deadlines, socket timeouts,
``signal.alarm``/``setitimer`` and file timestamps are real. Which
multiprocessing worker process takes which task is the kernel's decision
(the workers race for the task queue): a pool's results are the same on
every run, what a task reads from its worker's own state (its draws, its
pid) is not.

``threading.get_ident()`` and ``_thread.get_ident()`` are the C library's
thread handle (the thread's stack address): they vary with stack reuse and
address-space layout, so use them as keys (what the stdlib does), never as
values to print. Giving them deterministic values would break code that
hands them back to C: ``signal.pthread_kill``, ``sys._current_frames()``'s
keys, ``PyThreadState_SetAsyncExc``. ``threading.get_native_id()`` is the
kernel's thread id: in a strict run's pid namespace it follows the order in
which the whole tree creates processes and threads.

CPU time (every mode): CPU-time clocks and resource usage are real, as dal's
syscall layer leaves them for every other program (C's ``clock()``, the CPU
fields of ``times()``, ``CLOCK_PROCESS_CPUTIME_ID``): they measure the work
the process did, not time. Each call of ``time.process_time[_ns]``,
``thread_time[_ns]``, ``clock_gettime`` of a CPU-time clock, ``os.times``
and ``resource.getrusage`` is counted as ``cpu_clock/<api>`` in the exit
report's ``unserved`` (syscalls.json lists them under ``real``, not as
escapes). ``os.times().elapsed`` is a clock: the virtual monotonic clock in
strict mode. clock_gettime of CLOCK_TAI, asyncio loops that are not dal's
and uvloop are real and counted as unserved clock reads (escapes).

Spawn naming
------------
Before a child starts through ``subprocess.Popen``, ``os.posix_spawn[p]``,
``os.fork`` (and thus ``multiprocessing``'s fork start method) or
``multiprocessing.util.spawnv_passfds``, the shim reserves the child's stream
name with ``spawn`` and puts it in the child's ``DAL_STREAM``. A forked child
drops the parent's connection and says hello on a fresh socket with the
reserved name; its clock and random streams restart for that name.

The modules, one per concern: _wire (codec, the connection to dald),
_clock (the clocks, CPU times, real time for real waits), _datetime,
_random, _eventloop (asyncio), _threads (threads take turns), _spawn (spawn
naming, exec and exit), _say (stderr).
This module ties them together: the Session with dald, the post-import
hooks that patch modules as they are imported, and one Runtime per process
that holds the state. _datetime, _eventloop and _threads are imported by their hooks,
when datetime or asyncio is (start-up pays only for what it patches).
"""

import atexit
import os
import sys

from . import _clock, _random, _say, _spawn, _wire
from ._clock import sleep_ns as _sleep_ns  # noqa: F401 (the shim's tests)
from ._clock import _o_time_ns
from ._say import DEBUG, dbg, forget, say, say_once
from ._spawn import child_env as _child_env  # noqa: F401 (the shim's tests)
from ._wire import DaldError  # noqa: F401

# --------------------------------------------------------------------------
# The session.

PROTO = 1

MODES = ("strict", "seeded", "logged", "default")



def session_token():
    """The session's token: DAL_SESSION_TOKEN, else the file that
    DAL_SESSION_TOKEN_FILE names (a sandbox gives it so, to keep every
    variable dal sets the same in every run)."""
    token = os.environ.get("DAL_SESSION_TOKEN", "")
    path = os.environ.get("DAL_SESSION_TOKEN_FILE", "")
    if token or not path:
        return token
    try:
        with open(path, "rb") as f:
            return f.read(256).decode("ascii", "replace").strip()
    except OSError:
        return ""

class Session:
    """One per process (a forked child reuses its parent's, renamed).
    mode is None until hello succeeded; then one of MODES."""

    __slots__ = ("installed", "conn", "session", "mode", "replay", "stream", "seed",
                 "epoch_ns", "mono_ns", "quantum_ns", "batch", "round_trips", "reported")

    def __init__(self):
        self.installed = False
        self.conn = None
        self.session = None
        self.mode = None
        self.replay = False
        self.stream = None
        self.seed = 0
        self.epoch_ns = 0
        self.mono_ns = 1_000_000_000
        self.quantum_ns = 1000
        self.batch = 4096
        self.round_trips = 0
        self.reported = False

    def connect(self, path):
        """A new connection to dald at path, its replies counted here."""
        return _wire.Conn(path, self._count, self._refused)

    def _count(self):
        self.round_trips += 1

    def _refused(self, op, reply):
        say_once("op:" + op, "dald refused %s: %s" % (op, reply.get("err", "no reason given")))

    def hello(self, conn, hint):
        # DAL_SESSION_TOKEN is the session's capability: dald refuses a hello
        # without it. The connection is authorized from then on.
        return conn.call({
            "op": "hello", "proto": PROTO, "role": "shim", "session": self.session,
            "token": session_token(),
            "stream": hint or "", "pid": os.getpid(), "ppid": os.getppid(),
            "runtime": "python " + sys.version.split()[0],
        })

    def apply(self, reply):
        """Take the stream name, mode, seed and clock origins from hello's reply."""
        mode = reply.get("mode", "default")
        if mode not in MODES:
            say("dald asked for mode %r, which this shim does not know: running unpatched (default)" % (mode,))
            mode = "default"
        self.mode = mode
        self.replay = bool(reply.get("replay", False)) and mode in ("seeded", "logged")
        self.stream = str(reply.get("stream") or os.environ.get("DAL_STREAM") or "0")
        self.seed = int(reply.get("seed", 0)) & ((1 << 64) - 1)
        self.epoch_ns = int(reply.get("epoch_ns", 1767225600 * 10**9))
        self.mono_ns = int(reply.get("mono_ns", 10**9))
        self.quantum_ns = int(reply.get("quantum_ns", 1000))
        b = int(reply.get("batch", 4096))
        self.batch = b if b > 0 else 4096
        os.environ["DAL_STREAM"] = self.stream

    def op(self, msg, locked=False, quiet=False, nowait=False):
        """Run one op for this process's session/stream. Returns the reply
        map, or None after saying (once per op) what went wrong. nowait
        (lock held): pipeline it, returning {} (its reply is checked later)."""
        conn = self.conn
        if conn is None:
            return None
        msg.setdefault("session", self.session)
        if "stream" not in msg and msg["op"] not in ("status",):
            msg["stream"] = self.stream
        name = msg["op"]
        try:
            if nowait:
                conn.send_locked(msg)
                return {"ok": True}
            reply = conn.call_locked(msg) if locked else conn.call(msg)
        except Exception as e:
            if not quiet:
                say_once("conn", "%s failed: %s: %s; dald no longer hears from stream %s" % (name, type(e).__name__, e, self.stream))
            return None
        if not reply.get("ok"):
            if not quiet:
                say_once("op:" + name, "dald refused %s: %s" % (name, reply.get("err", "no reason given")))
            return None
        return reply

    def reserve(self, locked=False):
        """The stream name dald reserves for a child about to start, or None."""
        r = self.op({"op": "spawn"}, locked=locked)
        if r is None:
            return None
        child = r.get("child")
        return str(child) if child else None


# --------------------------------------------------------------------------
# Post-import hooks: patch a module when (and if) it is imported, or at once
# if it already is. A hook that fails is said once; the module then runs
# unpatched.

class _HookLoader:
    def __init__(self, loader, hook):
        self._loader = loader
        self._hook = hook

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def create_module(self, spec):
        cm = getattr(self._loader, "create_module", None)
        return cm(spec) if cm is not None else None

    def exec_module(self, module):
        loader = self._loader
        try:
            module.__loader__ = loader
            if module.__spec__ is not None:
                module.__spec__.loader = loader
        except Exception:
            pass
        loader.exec_module(module)
        _run_hook(self._hook, module)


class _PostImportFinder:
    def __init__(self, hooks):
        self.hooks = hooks
        self.busy = set()

    def find_spec(self, name, path=None, target=None):
        hook = self.hooks.get(name)
        if hook is None or name in self.busy:
            return None
        self.busy.add(name)
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self:
                    continue
                fs = getattr(finder, "find_spec", None)
                if fs is None:
                    continue
                spec = fs(name, path, target)
                if spec is not None:
                    break
        finally:
            self.busy.discard(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _HookLoader(spec.loader, hook)
        return spec

    def invalidate_caches(self):
        pass


def _run_hook(hook, module):
    try:
        hook(module)
        dbg("patched %s" % module.__name__)
    except Exception as e:
        say_once("hook:" + module.__name__, "could not virtualize %s (%s: %s); it runs on the real clock/randomness" % (module.__name__, type(e).__name__, e))


def _install_hooks(hooks):
    for name, hook in list(hooks.items()):
        mod = sys.modules.get(name)
        if mod is not None:
            _run_hook(hook, mod)
    sys.meta_path.insert(0, _PostImportFinder(hooks))


# --------------------------------------------------------------------------
# The process.

TIMERS_MAX = 65536


class TimerLog:
    """Timers fired in strict mode, [deadline offset ns, seq] in firing
    order (the report's timers), and the registration counter that orders
    equal deadlines."""

    __slots__ = ("fired", "seq")

    def __init__(self):
        self.fired = []
        self.seq = 0

    def reset(self):
        del self.fired[:]
        self.seq = 0

    def next_seq(self):
        self.seq += 1
        return self.seq

    def fire(self, offset_ns, seq):
        """A timer with deadline offset_ns (from the monotonic origin) fired."""
        if len(self.fired) < TIMERS_MAX:
            self.fired.append([offset_ns, seq])


#: The unpatched functions, for benchmarks and for code that must measure
#: real time inside a shimmed process.
ORIG = dict(_clock.ORIG, urandom=_random._o_urandom)


class Runtime:
    """What the shim holds for this process: its session, its clock (None
    until patched), its random sources, its fired timers and its spawn
    naming. A forked child keeps the objects and resets them."""

    __slots__ = ("session", "clock", "draws", "timers", "spawner")

    def __init__(self):
        self.session = Session()
        self.clock = None
        self.draws = _random.Draws(self.session)
        self.timers = TimerLog()
        self.spawner = _spawn.Spawner(self.session)

    def install(self):
        """Connect to dald, say hello, and virtualize this interpreter as the
        reply says. Never raises: failures are one `dal:` line on stderr."""
        s = self.session
        if s.installed:
            return
        s.installed = True
        path = os.environ.get("DAL_SOCKET")
        session = os.environ.get("DAL_SESSION")
        if not path or not session:
            return
        s.session = session
        try:
            conn = s.connect(path)
        except Exception as e:
            say("cannot reach dald at %s (%s: %s): this process runs on the real clock and real randomness" % (path, type(e).__name__, e))
            return
        try:
            reply = s.hello(conn, os.environ.get("DAL_STREAM", ""))
        except Exception as e:
            conn.close()
            say("hello to dald at %s failed (%s: %s): this process runs on the real clock and real randomness" % (path, type(e).__name__, e))
            return
        if not reply.get("ok"):
            conn.close()
            say("dald refused hello: %s: this process runs on the real clock and real randomness" % reply.get("err", "no reason given"))
            return
        s.apply(reply)
        dbg("stream %s, mode %s%s, seed %d, epoch_ns %d, quantum_ns %d" % (s.stream, s.mode, " (replay)" if s.replay else "", s.seed, s.epoch_ns, s.quantum_ns))
        if s.mode == "default":
            conn.close()  # hello only: nothing to report, nothing a fork could share
            return
        s.conn = conn
        try:
            self.patch_all()
        except Exception as e:
            say("internal error while virtualizing (%s: %s): this process may be partly on the real clock" % (type(e).__name__, e))
            if DEBUG:
                import traceback
                traceback.print_exc()

    def install_offline(self, reply):
        """Virtualize as if dald had answered hello with `reply`, with no
        connection: ops are dropped. For the shim's own tests and benchmarks
        only; an agent never takes this path."""
        s = self.session
        s.installed = True
        s.session = reply.get("session", "offline")
        s.apply(dict(reply, ok=True))
        if s.mode != "default":
            self.patch_all()

    def patch_all(self):
        s = self.session
        clock = self.clock = _clock.new(s)
        real_time = _clock.real_time_module()
        _clock.patch(clock)
        self.draws.patch_os()
        self.spawner.patch_os(self.finish)
        os.register_at_fork(before=self.spawner.fork_before, after_in_parent=self.spawner.fork_parent, after_in_child=self.fork_child)
        draws, spawner = self.draws, self.spawner
        keep_real_time = _clock.keeping_real_time(real_time)
        hooks = {
            "random": draws.patch_random,
            "datetime": lambda m: _lazy_datetime().patch(m, clock.time_ns, clock),
            "uuid": draws.patch_uuid,
            "subprocess": spawner.patch_subprocess,
            "multiprocessing.util": spawner.patch_mp_util,
            "uvloop": lambda m: _lazy_eventloop().note_uvloop(m),
            "sqlite3": lambda m: _lazy_datetime().patch_sqlite3(m),
            "yaml.representer": lambda m: _lazy_datetime().patch_yaml_representer(m),
        }
        for name in _clock.REAL_TIME_MODULES:
            if name == "subprocess":
                hooks[name] = lambda m: (keep_real_time(m), spawner.patch_subprocess(m))
            else:
                hooks[name] = keep_real_time
        hooks["resource"] = _clock.count_cpu_times(clock, s.mode == "strict")
        if s.mode == "strict":
            self.patch_strict(clock, hooks, spawner, keep_real_time)
        if s.mode == "strict" or s.replay:
            hooks["asyncio"] = lambda m: _lazy_eventloop().patch(m, clock, self.timers, s.mode == "strict")
        _install_hooks(hooks)
        atexit.register(self.at_exit)

    def patch_strict(self, clock, hooks, spawner, keep_real_time):
        """Threads on the virtual clock (dal._threads, imported with
        threading)."""
        timers = self.timers

        def threads():
            from . import _threads
            return _threads

        def on_threading(m):
            t = threads()
            t.scheduler(clock, timers)
            t.patch_threading(m, clock)
            t.patch_os(os)

        def on_futures(m):
            m.time = threads().virtual_time_module(clock)
        hooks["threading"] = on_threading
        hooks["queue"] = lambda m: threads().patch_queue(m, clock)
        hooks["concurrent.futures._base"] = on_futures
        hooks["socket"] = lambda m: threads().patch_socket(m)
        hooks["ssl"] = lambda m: threads().patch_ssl(m)
        hooks["selectors"] = lambda m: threads().patch_selectors(m, clock)
        hooks["select"] = lambda m: threads().patch_select(m, clock)
        hooks["multiprocessing.synchronize"] = lambda m: threads().patch_mp_synchronize(m, clock)
        hooks["subprocess"] = lambda m: (keep_real_time(m), threads().patch_subprocess(m, clock), spawner.patch_subprocess(m))

    def fork_child(self):
        """After os.fork, in the child: drop the parent's connection and say
        hello on a fresh one as the reserved stream."""
        threads = sys.modules.get("dal._threads")
        if threads is not None:
            threads.after_fork_child()
        s = self.session
        held, child = self.spawner.fork_child()
        if held is not None:
            held.close()  # our copy of the parent's fd only; never shutdown()
        elif s.conn is not None:
            s.conn.close()
        s.conn = None
        s.round_trips = 0
        forget("conn")
        path = os.environ.get("DAL_SOCKET")
        if child is None:
            s.reported = True  # the parent reports this stream
            say("forked child (pid %d) got no stream name from dald; it continues the parent's clock and randomness, unreported" % os.getpid())
            return
        s.reported = False
        self.reset_stream()
        try:
            conn = s.connect(path)
            reply = s.hello(conn, child)
        except Exception as e:
            say("forked child (pid %d) cannot reach dald at %s (%s: %s); it runs as stream %s unreported" % (os.getpid(), path, type(e).__name__, e, child))
            s.stream = child
            os.environ["DAL_STREAM"] = child
            self.draws.reseed_after_fork()
            return
        if not reply.get("ok"):
            say("dald refused the forked child's hello: %s; it runs as stream %s unreported" % (reply.get("err"), child))
            conn.close()
            s.stream = child
            os.environ["DAL_STREAM"] = child
            self.draws.reseed_after_fork()
            return
        s.conn = conn
        s.stream = str(reply.get("stream") or child)
        os.environ["DAL_STREAM"] = s.stream
        self.draws.reseed_after_fork()
        dbg("forked child pid %d is stream %s" % (os.getpid(), s.stream))

    def reset_stream(self):
        """A new stream: clock, draws, timers and locks start over."""
        if self.clock is not None:
            self.clock.reset()
        self.timers.reset()
        self.draws.reset()
        _say.UNSERVED.clear()
        self.spawner.reset()

    def finish(self):
        """Flush ticks and draws, send the report. Once per process."""
        s = self.session
        if s.reported or s.mode is None or s.mode == "default":
            return
        s.reported = True
        if s.conn is None:
            return
        if s.mode in ("seeded", "logged") and not s.replay:
            self.clock.flush(True)
        self.draws.flush()
        s.op(self.report())

    def report(self):
        clock = self.clock
        return {
            "op": "report",
            "reads": clock.reads(),
            "sleep_ns": clock.advanced,
            "now_ns": int(clock.t),
            "timers": [list(x) for x in self.timers.fired[:TIMERS_MAX]],
            "draws": self.draws.drawn(),
            "unserved": dict(_say.UNSERVED),
        }

    def at_exit(self):
        try:
            self.finish()
        except Exception as e:
            say("could not send the exit report: %s: %s" % (type(e).__name__, e))
        if self.session.conn is not None:
            self.session.conn.close()

    def stats(self):
        s, clock = self.session, self.clock
        return {
            "mode": s.mode,
            "replay": s.replay,
            "stream": s.stream,
            "round_trips": s.round_trips,
            "reads": clock.reads() if s.mode not in (None, "default") else 0,
            "now_ns": int(clock.t) if clock is not None else 0,
            "sleep_ns": clock.advanced if clock is not None else 0,
            "timers": len(self.timers.fired),
            "draws": self.draws.drawn(),
        }


def _lazy_datetime():
    from . import _datetime
    return _datetime


def _lazy_eventloop():
    from . import _eventloop
    return _eventloop


_rt = Runtime()


def install():
    """See Runtime.install: called by sitecustomize under dal-exec."""
    _rt.install()


def _install_offline(reply):
    _rt.install_offline(reply)


def __getattr__(name):
    """The counters the shim's tests read: _t (virtual ns), _tv (logged
    ticks, a list they may clear), _timers (fired timers)."""
    if name == "_t":
        return _rt.clock.t if _rt.clock is not None else 0.0
    if name == "_tv":
        return _rt.clock.tv if isinstance(_rt.clock, _clock.RecordingClock) else []
    if name == "_timers":
        return _rt.timers.fired
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


# --------------------------------------------------------------------------
# Public helpers (re-exported by dal/__init__.py).

def now():
    """Realtime ns on this process's clock (virtual in strict mode). A read."""
    if _rt.session.mode in (None, "default"):
        return _o_time_ns()
    return _rt.clock.time_ns()


def stream():
    return _rt.session.stream


def mode():
    return _rt.session.mode


def stats():
    return _rt.stats()
