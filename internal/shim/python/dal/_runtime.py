"""dal's Python runtime shim: virtual time, seeded randomness, spawn naming.

Installed by ``sitecustomize`` when ``DAL_SOCKET`` and ``DAL_SESSION`` are set.
Everything it does is decided by dald's ``hello`` reply (docs/protocol.md):
the process's stream name, the mode, the seed, the epoch, the quantum.

Modes
-----
strict
    Virtual time. The process owns one counter ``_t`` (ns since the stream
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
never a hang, but not fast); a thread that is not an executor future and
wakes the loop with ``call_soon_threadsafe`` is not seen, so virtual time may
jump past it; a server slower than ``T`` of wall time loses the race to the
timer, as it would for real. Loops not made by dal -- uvloop (libuv reads its
clock in C), a third-party policy, a ``loop_factory`` -- run on the real clock:
the shim says so once on stderr when such a policy is installed, uvloop is
imported, or a non-dal loop starts running.

Blocking waits outside asyncio
------------------------------
Waits on other threads and processes are real waits. The stdlib modules that
compute deadlines for them (threading, queue, subprocess,
concurrent.futures, multiprocessing, socketserver) keep the real monotonic
clock, so ``Event.wait(5)``, ``queue.get(timeout=5)``,
``Popen.wait(timeout=5)`` wait in wall time and never spin or time out early.
Socket timeouts, ``select``, ``signal.alarm``/``setitimer`` and file
timestamps are real too. A sleep loop that polls another thread
(``while t.is_alive(): time.sleep(0.1)``) progresses, but the virtual time it
accumulates depends on how long the thread really took.

Spawn naming
------------
Before a child starts through ``subprocess.Popen``, ``os.posix_spawn[p]``,
``os.fork`` (and thus ``multiprocessing``'s fork start method) or
``multiprocessing.util.spawnv_passfds``, the shim reserves the child's stream
name with ``spawn`` and puts it in the child's ``DAL_STREAM``. A forked child
drops the parent's connection and says hello on a fresh socket with the
reserved name; its clock and random streams restart for that name.
"""

import sys
import os
import time as _timemod
import _socket
import _thread
import atexit
from _operator import index as _index
from array import array as _array
from math import trunc as _trunc
from types import MethodType as _MethodType
from collections.abc import Hashable as _Hashable

from . import _wire
from . import _seedrng

PROTO = 1

# --------------------------------------------------------------------------
# Originals, captured before anything is patched.

_o_time = _timemod.time
_o_time_ns = _timemod.time_ns
_o_monotonic = _timemod.monotonic
_o_monotonic_ns = _timemod.monotonic_ns
_o_perf_counter = _timemod.perf_counter
_o_perf_counter_ns = _timemod.perf_counter_ns
_o_sleep = _timemod.sleep
_o_clock_gettime = _timemod.clock_gettime
_o_clock_gettime_ns = _timemod.clock_gettime_ns
_o_localtime = _timemod.localtime
_o_gmtime = _timemod.gmtime
_o_ctime = _timemod.ctime
_o_asctime = _timemod.asctime
_o_strftime = _timemod.strftime
_o_urandom = os.urandom
_o_getrandom = getattr(os, "getrandom", None)
_o_posix_spawn = getattr(os, "posix_spawn", None)
_o_posix_spawnp = getattr(os, "posix_spawnp", None)
_o_execv = os.execv
_o_execve = os.execve
_o__exit = os._exit

#: The unpatched functions, for benchmarks and for code that must measure
#: real time inside a shimmed process.
ORIG = {
    "time": _o_time, "time_ns": _o_time_ns, "monotonic": _o_monotonic,
    "monotonic_ns": _o_monotonic_ns, "perf_counter": _o_perf_counter,
    "perf_counter_ns": _o_perf_counter_ns, "sleep": _o_sleep,
    "clock_gettime": _o_clock_gettime, "clock_gettime_ns": _o_clock_gettime_ns,
    "urandom": _o_urandom,
}

_RT_CLOCKS = frozenset(c for c in (getattr(_timemod, "CLOCK_REALTIME", None), 5 if sys.platform.startswith("linux") else None) if c is not None)
_MONO_CLOCKS = frozenset(c for c in (getattr(_timemod, "CLOCK_MONOTONIC", None), getattr(_timemod, "CLOCK_MONOTONIC_RAW", None),
                                     getattr(_timemod, "CLOCK_BOOTTIME", None), 6 if sys.platform.startswith("linux") else None) if c is not None)
_OTHER_WALL_CLOCKS = frozenset(c for c in (getattr(_timemod, "CLOCK_TAI", None),) if c is not None)

# --------------------------------------------------------------------------
# State. The hot path reads plain module globals.

_installed = False
_mode = None          # None until hello succeeded; then strict/seeded/logged/default
_replay = False
_stream = None
_session = None
_seed = 0
_E = 0                # epoch_ns
_M = 1_000_000_000    # mono_ns
_Q = 1000             # quantum_ns
_Ef = _E / 1e9        # strict hot path: epoch and monotonic origin in seconds,
_Mf = _M / 1e9        # quantum and virtual time as floats (exact integers
_Qf = 1000.0          # of ns below 2**53 ns, 104 days: float adds beat
_t = 0.0              # bigint adds two to one on the read path)
_advanced = 0         # strict: ns added by sleeps and idle jumps
_batch = 4096
_reads_extra = 0      # strict with quantum 0: reads counted separately
_round_trips = 0
_conn = None
_debug = os.environ.get("DAL_SHIM_DEBUG") == "1"
_said = set()
_reported = False
_tls = _thread._local()

_tv = []              # record modes: logged ticks, realtime ns as is, monotonic ns | 1 << 63
_ticks_sent = 0

_timers = []          # strict asyncio: [deadline_offset_ns, seq] in firing order
_TIMERS_MAX = 65536
_timer_seq = 0

_srcs = {}            # source name -> byte source
_src_lock = _thread.allocate_lock()
_uuid_node = None

_r_lock = _thread.allocate_lock()
_r_buf = []           # replay: fetched encoded ticks
_r_pos = 0
_r_from = 0           # index of the next tick to fetch
_r_end = False
_r_served = 0
_r_past = False
_r_last = [0, 0]      # last served value per kind
_r_drifted = set()


def _say(msg):
    """One `dal:` line on stderr. Never raises."""
    try:
        sys.stderr.write("dal: " + msg + "\n")
        sys.stderr.flush()
    except Exception:
        try:
            os.write(2, ("dal: " + msg + "\n").encode("utf-8", "replace"))
        except Exception:
            pass


def _say_once(key, msg):
    if key not in _said:
        _said.add(key)
        _say(msg)


def _dbg(msg):
    if _debug:
        _say(msg)


# --------------------------------------------------------------------------
# Connection to dald.

class DaldError(Exception):
    pass


class _Conn:
    """A synchronous client. Requests that need no answer (ticks.put,
    draws.put) are pipelined: sent without waiting, their replies read (and
    checked) before the next request that waits, or when 16 are pending, so
    a tick batch costs an encode and a send, not a round trip."""

    MAX_PENDING = 16

    def __init__(self, path, timeout=60.0):
        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            s.settimeout(timeout)
            s.connect(path)
        except BaseException:
            s.close()
            raise
        self.sock = s
        self.path = path
        self.lock = _thread.allocate_lock()
        self.next_id = 0
        self.broken = None
        self.pending = []  # (id, op) of pipelined requests, oldest first

    def _recv_exact(self, n):
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:], n - got)
            if k == 0:
                raise DaldError("dald closed the connection")
            got += k
        return bytes(buf)

    def _read_reply(self, rid, op):
        global _round_trips
        try:
            n = _wire.frame_length(self._recv_exact(4))
            reply = _wire.unpackb(self._recv_exact(n))
        except BaseException as e:
            # A half-read reply desynchronises the stream: stop using it.
            self.broken = "connection to dald lost during %r (%s: %s)" % (op, type(e).__name__, e)
            raise
        _round_trips += 1
        if not isinstance(reply, dict):
            self.broken = "dald replied to %r with a non-map" % (op,)
            raise DaldError(self.broken)
        if reply.get("id") != rid:
            self.broken = "dald answered id %r to request %d (%s)" % (reply.get("id"), rid, op)
            raise DaldError(self.broken)
        return reply

    def _send(self, msg):
        if self.broken:
            raise DaldError(self.broken)
        self.next_id += 1
        msg["id"] = self.next_id
        try:
            self.sock.sendall(_wire.frame(msg))
        except BaseException as e:
            self.broken = "connection to dald lost during %r (%s: %s)" % (msg.get("op"), type(e).__name__, e)
            raise
        return self.next_id

    def drain_locked(self):
        """Read the replies of pipelined requests; refusals are said once."""
        while self.pending:
            rid, op = self.pending.pop(0)
            reply = self._read_reply(rid, op)
            if not reply.get("ok"):
                _say_once("op:" + op, "dald refused %s: %s" % (op, reply.get("err", "no reason given")))

    def call_locked(self, msg):
        """Send msg and return the reply; the caller holds self.lock."""
        self.drain_locked()
        rid = self._send(msg)
        return self._read_reply(rid, msg.get("op"))

    def send_locked(self, msg):
        """Send msg without waiting for its reply; the caller holds self.lock."""
        rid = self._send(msg)
        self.pending.append((rid, msg.get("op")))
        if len(self.pending) > self.MAX_PENDING:
            rid, op = self.pending.pop(0)
            reply = self._read_reply(rid, op)
            if not reply.get("ok"):
                _say_once("op:" + op, "dald refused %s: %s" % (op, reply.get("err", "no reason given")))

    def call(self, msg):
        with self.lock:
            return self.call_locked(msg)

    def close(self):
        try:
            self.sock.close()
        except Exception:
            pass


def _op(msg, locked=False, quiet=False, nowait=False):
    """Run one op for this process's session/stream. Returns the reply map, or
    None after saying (once per op) what went wrong. nowait (lock held):
    pipeline it, returning {} (its reply is checked later)."""
    conn = _conn
    if conn is None:
        return None
    msg.setdefault("session", _session)
    if "stream" not in msg and msg["op"] not in ("status",):
        msg["stream"] = _stream
    name = msg["op"]
    try:
        if nowait:
            conn.send_locked(msg)
            return {"ok": True}
        reply = conn.call_locked(msg) if locked else conn.call(msg)
    except Exception as e:
        if not quiet:
            _say_once("conn", "%s failed: %s: %s; dald no longer hears from stream %s" % (name, type(e).__name__, e, _stream))
        return None
    if not reply.get("ok"):
        if not quiet:
            _say_once("op:" + name, "dald refused %s: %s" % (name, reply.get("err", "no reason given")))
        return None
    return reply


def _runtime_name():
    return "python " + sys.version.split()[0]


def _hello(conn, session, hint):
    # DAL_SESSION_TOKEN is the session's capability: dald refuses a hello
    # without it. The connection is authorized from then on.
    return conn.call({
        "op": "hello", "proto": PROTO, "role": "shim", "session": session,
        "token": os.environ.get("DAL_SESSION_TOKEN", ""),
        "stream": hint or "", "pid": os.getpid(), "ppid": os.getppid(),
        "runtime": _runtime_name(),
    })


def _apply_hello(reply):
    global _mode, _replay, _stream, _seed, _E, _M, _Q, _batch, _Ef, _Mf, _Qf
    mode = reply.get("mode", "default")
    if mode not in ("strict", "seeded", "logged", "default"):
        _say("dald asked for mode %r, which this shim does not know: running unpatched (default)" % (mode,))
        mode = "default"
    _mode = mode
    _replay = bool(reply.get("replay", False)) and mode in ("seeded", "logged")
    _stream = str(reply.get("stream") or os.environ.get("DAL_STREAM") or "0")
    _seed = int(reply.get("seed", 0)) & ((1 << 64) - 1)
    _E = int(reply.get("epoch_ns", 1767225600 * 10**9))
    _M = int(reply.get("mono_ns", 10**9))
    _Q = int(reply.get("quantum_ns", 1000))
    _Ef, _Mf, _Qf = _E / 1e9, _M / 1e9, float(_Q)
    b = int(reply.get("batch", 4096))
    _batch = b if b > 0 else 4096
    os.environ["DAL_STREAM"] = _stream


# --------------------------------------------------------------------------
# strict: virtual clock. The hot path: module globals only, float arithmetic
# on the float seconds functions (specialized float add/multiply), no
# attribute lookups, no IPC.

def _v_time(_c):
    global _t
    _t += _Qf
    return _Ef + _t * 1e-9


def _v_time_ns(_c):
    global _t
    _t += _Qf
    return _E + _trunc(_t)  # math.trunc: a third cheaper than int()


def _v_monotonic(_c):
    global _t
    _t += _Qf
    return _Mf + _t * 1e-9


def _v_monotonic_ns(_c):
    global _t
    _t += _Qf
    return _M + _trunc(_t)


def _sleep_ns(secs):
    """Duration of time.sleep(secs) in ns, validated like time.sleep."""
    if isinstance(secs, float):
        if secs != secs:
            raise ValueError("Invalid value NaN (not a number)")
        if secs < 0:
            raise ValueError("sleep length must be non-negative")
        d = secs * 1e9
        n = int(d)
        return n + 1 if n < d else n  # ceil, as CPython's _PyTime_ROUND_TIMEOUT
    n = _index(secs)
    if n < 0:
        raise ValueError("sleep length must be non-negative")
    return n * 1_000_000_000


def _v_sleep(_c, secs):
    global _t, _advanced
    n = _sleep_ns(secs)
    _t += n
    _advanced += n
    _o_sleep(0)


def _v_advance(n):
    """An idle event loop jumps virtual time by n ns."""
    global _t, _advanced
    if n > 0:
        _t += n
        _advanced += n


def _counting(f):
    """Quantum 0: reads cannot be derived from _t; count them."""
    def g(_c):
        global _reads_extra
        _reads_extra += 1
        return f(_c)
    g.__name__ = f.__name__
    return g


class _Clock:
    """The object the patched functions are bound methods of. A Python
    function set as a class attribute becomes a method and gets `self`
    (logging.Formatter.converter = time.localtime); the builtins it replaces
    do not, and neither does a bound method. Calling one costs ~2 ns more."""

    __slots__ = ()

    def __repr__(self):
        return "<dal clock>"


_CLOCK = _Clock()


def _bind(f, name, like=None):
    """f (first parameter ignored) as a non-binding callable named name."""
    f.__name__ = f.__qualname__ = name
    if like is not None:
        f.__doc__ = like.__doc__
    return _MethodType(f, _CLOCK)


# --------------------------------------------------------------------------
# seeded/logged: real clock, logged ticks.

_MB = 1 << 63  # the monotonic mark: a logged tick is ns (realtime) or ns | _MB
_KIND_OF_TOP = bytes(b >> 7 for b in range(256))
_CLEAR_TOP = bytes(b & 0x7F for b in range(256))


def _encode_ticks(vals):
    """(kinds, values) for ticks.put from logged ticks, with C loops only
    (a batch is 4096 ticks): the mark is the top bit of each u64."""
    try:
        a = _array("Q", vals)
    except OverflowError:  # a realtime reading before 1970: the slow way
        return bytes(1 if v >= _MB else 0 for v in vals), [v - _MB if v >= _MB else v for v in vals]
    if sys.byteorder == "big":
        a.byteswap()
    b = bytearray(a.tobytes())
    top = b[7::8]
    kinds = top.translate(_KIND_OF_TOP)
    b[7::8] = top.translate(_CLEAR_TOP)
    return bytes(kinds), _wire.u64_array_le(b)


def _tick_flush(blocking=True):
    """Send the logged ticks. From the read path it never waits for the
    connection lock (a signal handler may read the clock mid-request)."""
    global _ticks_sent
    if not _tv:
        return
    conn = _conn
    if conn is None:
        return
    if not conn.lock.acquire(blocking):
        return
    try:
        vals = _tv[:]
        n = len(vals)
        del _tv[:n]
        kinds, values = _encode_ticks(vals)
        _ticks_sent += n
        _op({"op": "ticks.put", "kinds": kinds, "values": values}, nowait=True)
    finally:
        conn.lock.release()


def _s_time(_c):
    ns = _o_time_ns()
    _tv.append(ns)
    if len(_tv) >= _batch:
        _tick_flush(False)
    return ns / 1e9


def _s_time_ns(_c):
    ns = _o_time_ns()
    _tv.append(ns)
    if len(_tv) >= _batch:
        _tick_flush(False)
    return ns


def _s_monotonic(_c):
    ns = _o_monotonic_ns()
    _tv.append(ns | _MB)
    if len(_tv) >= _batch:
        _tick_flush(False)
    return ns / 1e9


def _s_monotonic_ns(_c):
    ns = _o_monotonic_ns()
    _tv.append(ns | _MB)
    if len(_tv) >= _batch:
        _tick_flush(False)
    return ns


# --------------------------------------------------------------------------
# replay: ticks served from the log.

def _r_fetch():
    global _r_buf, _r_pos, _r_from, _r_end
    r = _op({"op": "ticks.fetch", "from": _r_from, "max": _batch})
    if r is None:
        _r_end = True
        return
    kinds = r.get("kinds") or b""
    values = r.get("values") or []
    if len(kinds) != len(values):
        _say_once("fetch-shape", "ticks.fetch returned %d kinds for %d values; treating the log as ended" % (len(kinds), len(values)))
        _r_end = True
        return
    _r_buf = [-v if k else v for k, v in zip(kinds, values)]
    _r_pos = 0
    _r_from += len(values)
    _r_end = bool(r.get("end", not values)) or not values


def _r_drift(key, detail):
    if key in _r_drifted:
        return
    _r_drifted.add(key)
    _op({"op": "drift", "what": "clock", "detail": detail})
    _dbg("clock drift on stream %s: %s" % (_stream, detail))


def _r_next(kind):
    global _r_pos, _r_served, _r_past
    with _r_lock:
        if _r_pos >= len(_r_buf) and not _r_end:
            _r_fetch()
        if _r_pos < len(_r_buf):
            v = _r_buf[_r_pos]
            _r_pos += 1
            _r_served += 1
            k = 1 if v < 0 else 0
            if k == kind:
                v = -v if k else v
                _r_last[kind] = v
                return v
            _r_drift("kind", "read %d asked for the %s clock, the log has a %s tick there" % (
                _r_served, ("realtime", "monotonic")[kind], ("realtime", "monotonic")[k]))
        else:
            _r_served += 1
            if not _r_past:
                _r_past = True
                _r_drift("end", "read %d past the %d recorded ticks" % (_r_served, _r_from))
        v = _r_last[kind] + _Q
        _r_last[kind] = v
        return v


def _r_time(_c):
    return _r_next(0) / 1e9


def _r_time_ns(_c):
    return _r_next(0)


def _r_monotonic(_c):
    return _r_next(1) / 1e9


def _r_monotonic_ns(_c):
    return _r_next(1)


def _r_advance(n):
    """Replay sleeps and idle waits do not wait; past the log they advance
    the synthesized clock."""
    if _r_past and n > 0:
        with _r_lock:
            _r_last[0] += n
            _r_last[1] += n


def _r_sleep(_c, secs):
    _r_advance(_sleep_ns(secs))
    _o_sleep(0)


# --------------------------------------------------------------------------
# Clock patching.

_now_s = _o_time        # current-mode realtime seconds (for localtime & co)
_now_ns = _o_time_ns    # current-mode realtime ns (for datetime)
_advance = None         # strict/replay: advance on idle


def _make_clock_gettime(rt, mono, rt_ns, mono_ns):
    def clock_gettime(_c, clk_id):
        if clk_id in _RT_CLOCKS:
            return rt()
        if clk_id in _MONO_CLOCKS:
            return mono()
        if clk_id in _OTHER_WALL_CLOCKS:
            _say_once("clk%s" % clk_id, "time.clock_gettime(%s) reads the real clock: only CLOCK_REALTIME and the monotonic clocks are virtualized" % clk_id)
        return _o_clock_gettime(clk_id)

    def clock_gettime_ns(_c, clk_id):
        if clk_id in _RT_CLOCKS:
            return rt_ns()
        if clk_id in _MONO_CLOCKS:
            return mono_ns()
        if clk_id in _OTHER_WALL_CLOCKS:
            _say_once("clk%s" % clk_id, "time.clock_gettime(%s) reads the real clock: only CLOCK_REALTIME and the monotonic clocks are virtualized" % clk_id)
        return _o_clock_gettime_ns(clk_id)
    clock_gettime.__doc__ = _o_clock_gettime.__doc__
    clock_gettime_ns.__doc__ = _o_clock_gettime_ns.__doc__
    return _bind(clock_gettime, "clock_gettime"), _bind(clock_gettime_ns, "clock_gettime_ns")


def _localtime(_c, secs=None):
    return _o_localtime(_now_s() if secs is None else secs)


def _gmtime(_c, secs=None):
    return _o_gmtime(_now_s() if secs is None else secs)


def _ctime(_c, secs=None):
    return _o_ctime(_now_s() if secs is None else secs)


def _asctime(_c, t=None):
    return _o_asctime(_o_localtime(_now_s()) if t is None else t)


def _strftime(_c, format, t=None):
    return _o_strftime(format, _o_localtime(_now_s()) if t is None else t)


def _patch_time():
    global _now_s, _now_ns, _advance
    T = _timemod
    if _mode == "strict":
        fns = [_v_time, _v_time_ns, _v_monotonic, _v_monotonic_ns]
        if _Q == 0:
            fns = [_counting(f) for f in fns]
        rt, rt_ns, mono, mono_ns = fns
        sleep = _v_sleep
        _advance = _v_advance
    elif _replay:
        rt, rt_ns, mono, mono_ns = _r_time, _r_time_ns, _r_monotonic, _r_monotonic_ns
        sleep = _r_sleep
        _advance = _r_advance
    else:
        rt, rt_ns, mono, mono_ns = _s_time, _s_time_ns, _s_monotonic, _s_monotonic_ns
        sleep = None  # real
        _advance = None
    rt = _bind(rt, "time", _o_time)
    rt_ns = _bind(rt_ns, "time_ns", _o_time_ns)
    # perf_counter is CLOCK_MONOTONIC on Linux: one clock, bound twice for the names
    perf, perf_ns = _MethodType(mono, _CLOCK), _MethodType(mono_ns, _CLOCK)
    mono = _bind(mono, "monotonic", _o_monotonic)
    mono_ns = _bind(mono_ns, "monotonic_ns", _o_monotonic_ns)
    _now_s, _now_ns = rt, rt_ns
    T.time = rt
    T.time_ns = rt_ns
    T.monotonic = mono
    T.monotonic_ns = mono_ns
    T.perf_counter = perf
    T.perf_counter_ns = perf_ns
    if sleep is not None:
        T.sleep = _bind(sleep, "sleep", _o_sleep)
    T.clock_gettime, T.clock_gettime_ns = _make_clock_gettime(rt, mono, rt_ns, mono_ns)
    T.localtime = _bind(_localtime, "localtime", _o_localtime)
    T.gmtime = _bind(_gmtime, "gmtime", _o_gmtime)
    T.ctime = _bind(_ctime, "ctime", _o_ctime)
    T.asctime = _bind(_asctime, "asctime", _o_asctime)
    T.strftime = _bind(_strftime, "strftime", _o_strftime)


def _real_time_module():
    """A stand-in `time` module with the real clocks, for stdlib modules that
    compute deadlines of real waits (threads, processes, sockets)."""
    m = type(sys)("time")
    for k in dir(_timemod):
        if not k.startswith("__"):
            setattr(m, k, getattr(_timemod, k))
    m.time, m.time_ns = _o_time, _o_time_ns
    m.monotonic, m.monotonic_ns = _o_monotonic, _o_monotonic_ns
    m.perf_counter, m.perf_counter_ns = _o_perf_counter, _o_perf_counter_ns
    m.sleep = _o_sleep
    m.clock_gettime, m.clock_gettime_ns = _o_clock_gettime, _o_clock_gettime_ns
    m.localtime, m.gmtime, m.ctime, m.asctime, m.strftime = _o_localtime, _o_gmtime, _o_ctime, _o_asctime, _o_strftime
    return m


_REAL_TIME = None


def _keep_real_time(mod):
    """Point a stdlib module's deadline clock back at the real clocks."""
    name = mod.__name__
    if name == "threading":
        mod._time = _o_monotonic
    elif name in ("queue", "socketserver"):
        mod.time = _o_monotonic
    elif name == "subprocess":
        mod._time = _o_monotonic
        mod.time = _REAL_TIME
    else:  # modules using time.monotonic() / time.sleep() through `time`
        if getattr(mod, "time", None) is _timemod:
            mod.time = _REAL_TIME


_REAL_TIME_MODULES = ("threading", "queue", "socketserver", "subprocess", "concurrent.futures._base",
                      "multiprocessing.connection", "multiprocessing.queues", "multiprocessing.synchronize",
                      "multiprocessing.managers", "multiprocessing.pool")


# --------------------------------------------------------------------------
# datetime

def _patch_datetime(dt):
    real_date = dt.date
    real_datetime = dt.datetime
    if getattr(real_datetime, "_dal_fake", False):
        return
    real_tzinfo = dt.tzinfo
    NS = 1_000_000_000

    class _DateMeta(type):
        def __instancecheck__(cls, obj):
            if cls is FakeDate:
                return isinstance(obj, real_date)
            return type.__instancecheck__(cls, obj)

        def __subclasscheck__(cls, sub):
            if cls is FakeDate:
                return issubclass(sub, real_date)
            return type.__subclasscheck__(cls, sub)

    class _DatetimeMeta(_DateMeta):
        def __instancecheck__(cls, obj):
            if cls is FakeDatetime:
                return isinstance(obj, real_datetime)
            return type.__instancecheck__(cls, obj)

        def __subclasscheck__(cls, sub):
            if cls is FakeDatetime:
                return issubclass(sub, real_datetime)
            return type.__subclasscheck__(cls, sub)

    class FakeDate(real_date, metaclass=_DateMeta):
        """datetime.date whose today() reads dal's clock. Instances are real
        datetime.date objects."""
        _dal_fake = True

        def __new__(cls, *args, **kwargs):
            if cls is FakeDate:
                return real_date(*args, **kwargs)
            return real_date.__new__(cls, *args, **kwargs)

        @classmethod
        def today(cls):
            base = real_date if cls is FakeDate else cls
            return base.fromtimestamp(_now_ns() // NS)

    utc = dt.timezone.utc
    timedelta = dt.timedelta
    from functools import partial
    # tz (None: naive local, "utc": naive UTC) -> (second, make(us) for that second)
    cache = {}
    local = [None, None]  # the naive local entry, for now()'s fast path

    def _make_tz(f, tzi, us):
        return real_datetime(f[0], f[1], f[2], f[3], f[4], f[5], us, tzi)

    def _make_fold(f, tzi, us):
        return real_datetime(f[0], f[1], f[2], f[3], f[4], f[5], us, tzi, fold=1)

    def _fromns(base, ns, tz, naive_utc):
        """The datetime at ns (floored to the microsecond, as datetime.now
        does). For the real class, the calendar fields of the current second
        are cached: constructing is ~6x cheaper than replace()."""
        s, r = divmod(ns, NS)
        us = r // 1000
        if base is real_datetime:
            key = "utc" if naive_utc else tz
            try:
                c = cache.get(key)
            except TypeError:  # an unhashable tzinfo
                c, key = None, cache
            if c is None or c[0] != s:
                d = real_datetime.fromtimestamp(s, utc if naive_utc else tz)
                if d.microsecond or key is cache:  # a sub-second UTC offset: no cache
                    d = d + timedelta(microseconds=us)
                    return d.replace(tzinfo=None) if naive_utc else d
                if len(cache) > 64:
                    cache.clear()
                tzi = None if naive_utc else tz
                f = (d.year, d.month, d.day, d.hour, d.minute, d.second)
                if d.fold:
                    make = partial(_make_fold, f, tzi)
                elif tzi is None:  # positional arguments only: the fastest call
                    make = partial(real_datetime, *f)
                else:
                    make = partial(_make_tz, f, tzi)
                c = cache[key] = (s, make)
                if key is None:
                    local[0], local[1] = s, make
            return c[1](us)
        d = base.fromtimestamp(s, utc if naive_utc else tz)
        d = d + timedelta(microseconds=us)
        return d.replace(tzinfo=None) if naive_utc else d

    class FakeDatetime(real_datetime, metaclass=_DatetimeMeta):
        """datetime.datetime whose now/utcnow/today read dal's clock.
        Instances are real datetime.datetime objects."""
        _dal_fake = True

        def __new__(cls, *args, **kwargs):
            if cls is FakeDatetime:
                return real_datetime(*args, **kwargs)
            return real_datetime.__new__(cls, *args, **kwargs)

        @classmethod
        def now(cls, tz=None):
            if tz is None and cls is FakeDatetime:
                s, r = divmod(_now_ns(), NS)
                if local[0] == s:
                    return local[1](r // 1000)
                return _fromns(real_datetime, s * NS + r, None, False)
            if tz is not None and not isinstance(tz, real_tzinfo):
                raise TypeError("tzinfo argument must be None or of a tzinfo subclass, not type '%s'" % type(tz).__name__)
            return _fromns(real_datetime if cls is FakeDatetime else cls, _now_ns(), tz, False)

        @classmethod
        def utcnow(cls):
            return _fromns(real_datetime if cls is FakeDatetime else cls, _now_ns(), None, True)

        @classmethod
        def today(cls):
            return _fromns(real_datetime if cls is FakeDatetime else cls, _now_ns(), None, False)

    for fake, real, name in ((FakeDate, real_date, "date"), (FakeDatetime, real_datetime, "datetime")):
        # As for the C types: an interned module name, a fresh qualname (pickle's memo
        # is by identity: other identities would change the pickled bytes).
        fake.__name__ = name
        fake.__qualname__ = bytes(name, "ascii").decode("ascii")
        fake.__module__ = sys.intern(real.__module__)
        fake.__doc__ = real.__doc__
    dt.date = FakeDate
    dt.datetime = FakeDatetime
    _FAKE_TO_REAL[FakeDate] = real_date
    _FAKE_TO_REAL[FakeDatetime] = real_datetime

    # pickle saves a class by module and qualname and checks that the name
    # leads back to it; datetime.datetime now leads to the fake, so real
    # instances pickle (and copy) through the fake, whose constructor makes
    # real instances again. Other interpreters read plain datetime.datetime.
    import copyreg

    def _reducer(fake):
        def reduce(obj):
            rv = obj.__reduce_ex__(4)
            return (fake,) + tuple(rv[1:])
        return reduce
    copyreg.pickle(real_date, _reducer(FakeDate))
    copyreg.pickle(real_datetime, _reducer(FakeDatetime))


_FAKE_TO_REAL = {}  # dal's datetime.date/datetime -> the real classes


def _patch_sqlite3(mod):
    """sqlite3 keys adapters by exact type: registrations for the fake
    classes (its own datetime defaults included) also hold for the real
    classes, which every instance is."""
    adapters = getattr(mod, "adapters", None)
    if isinstance(adapters, dict):
        for key, fn in list(adapters.items()):
            if isinstance(key, tuple) and key and key[0] in _FAKE_TO_REAL:
                adapters.setdefault((_FAKE_TO_REAL[key[0]],) + key[1:], fn)
    orig = getattr(mod, "register_adapter", None)
    if orig is None or getattr(orig, "_dal", False):
        return

    def register_adapter(type, adapter):
        orig(type, adapter)
        real = _FAKE_TO_REAL.get(type) if isinstance(type, _Hashable) else None
        if real is not None:
            orig(real, adapter)
    register_adapter.__doc__ = orig.__doc__
    register_adapter._dal = True
    for m in (mod, sys.modules.get("sqlite3.dbapi2")):
        if m is not None and getattr(m, "register_adapter", None) is orig:
            m.register_adapter = register_adapter


def _patch_yaml_representer(mod):
    """PyYAML keys representers by exact type: the same mirroring."""
    Base = getattr(mod, "BaseRepresenter", None)
    if Base is None or getattr(Base, "_dal", False):
        return
    for cls in list(vars(mod).values()):
        if isinstance(cls, type) and issubclass(cls, Base):
            for attr in ("yaml_representers", "yaml_multi_representers"):
                d = cls.__dict__.get(attr)
                if isinstance(d, dict):
                    for k, v in list(d.items()):
                        if k in _FAKE_TO_REAL:
                            d.setdefault(_FAKE_TO_REAL[k], v)
    for name in ("add_representer", "add_multi_representer"):
        orig = getattr(Base, name).__func__

        def add(cls, data_type, representer, _orig=orig):
            _orig(cls, data_type, representer)
            real = _FAKE_TO_REAL.get(data_type) if isinstance(data_type, _Hashable) else None
            if real is not None:
                _orig(cls, real, representer)
        add.__name__ = name
        add.__doc__ = orig.__doc__
        setattr(Base, name, classmethod(add))
    Base._dal = True


# --------------------------------------------------------------------------
# Randomness.

class _SeedSource:
    __slots__ = ("stream",)

    def __init__(self, label):
        self.stream = _seedrng.derive(_seed, label)

    def read(self, n):
        return self.stream.read(n)

    @property
    def drawn(self):
        return self.stream.drawn


class _LoggedSource:
    """logged mode: real bytes, every draw sent with draws.put."""
    __slots__ = ("source", "buf", "drawn")
    FLUSH = 1 << 16

    def __init__(self, source):
        self.source = source
        self.buf = bytearray()
        self.drawn = 0

    def read(self, n):
        b = _o_urandom(n)
        self.drawn += n
        self.buf += b
        if len(self.buf) >= self.FLUSH:
            self.flush(False)
        return b

    def flush(self, blocking=True):
        if not self.buf or _conn is None:
            return
        if not _conn.lock.acquire(blocking):
            return
        try:
            data = bytes(self.buf)
            del self.buf[:]
            _op({"op": "draws.put", "label": self.source, "data": data}, nowait=True)
        finally:
            _conn.lock.release()


class _FetchSource:
    """replay of a logged session: draws served from draws.fetch."""
    __slots__ = ("source", "buf", "pos", "off", "end", "fallback", "drawn")

    def __init__(self, source):
        self.source = source
        self.buf = b""
        self.pos = 0
        self.off = 0
        self.end = False
        self.fallback = None
        self.drawn = 0

    def read(self, n):
        self.drawn += n
        out = bytearray()
        while len(out) < n:
            if self.pos >= len(self.buf):
                if self.fallback is not None:
                    out += self.fallback.read(n - len(out))
                    break
                if not self.end:
                    r = _op({"op": "draws.fetch", "label": self.source, "from": self.off, "max": max(n - len(out), 1 << 16)})
                    data = (r or {}).get("data") or b""
                    self.buf, self.pos = bytes(data), 0
                    self.off += len(data)
                    self.end = r is None or bool(r.get("end", not data)) or not data
                    if data:
                        continue
                _op({"op": "drift", "what": "random", "detail": "%s: draw of %d bytes past the %d recorded bytes" % (self.source, n, self.off)})
                self.fallback = _seedrng.derive(_seed, _stream + "/" + self.source)
                continue
            take = self.buf[self.pos:self.pos + n - len(out)]
            self.pos += len(take)
            out += take
        return bytes(out)


def _src(source):
    s = _srcs.get(source)
    if s is None:
        if _mode == "logged":
            s = _FetchSource(source) if _replay else _LoggedSource(source)
        else:
            s = _SeedSource(_stream + "/" + source)
        _srcs[source] = s
    return s


def _draw(source, n):
    with _src_lock:
        return _src(source).read(n)


def _urandom(_c, size):
    n = _index(size)
    if n < 0:
        raise ValueError("negative argument not allowed")
    return _draw("os.urandom", n)


_urandom_b = _bind(_urandom, "urandom", _o_urandom)


def _getrandom(_c, size, flags=0):
    n = _index(size)
    if n < 0:
        raise ValueError("negative argument not allowed")
    return _draw("os.urandom", n)


def _seed_int(source):
    return int.from_bytes(_draw(source, 32), "big")


def _patch_random(rnd):
    R = rnd.Random
    if not getattr(R.seed, "_dal", False):
        orig_seed = R.seed

        def seed(self, a=None, version=2):
            if a is None:
                if getattr(self, "_dal_retired", False):
                    # a replaced module generator: random's own at-fork hook
                    # reseeds it; it must not consume our streams
                    a = 0
                else:
                    a = _seed_int("python.random.instance")
            return orig_seed(self, a, version)
        seed.__doc__ = orig_seed.__doc__
        seed._dal = True
        seed._dal_orig = orig_seed
        R.seed = seed
    _reseed_random_module(rnd)
    rnd._urandom = _urandom_b


def _reseed_random_module(rnd):
    """Rebind the module functions to a fresh generator seeded from
    <stream>/python.random (a new instance: random's own at-fork reseed of
    the old one then touches nothing of ours)."""
    old = rnd._inst
    try:
        old._dal_retired = True
    except AttributeError:
        pass
    inst = rnd.Random(_seed_int("python.random"))
    for name in dir(rnd):
        v = getattr(rnd, name, None)
        if getattr(v, "__self__", None) is old and callable(v):
            setattr(rnd, name, getattr(inst, name))
    rnd._inst = inst


def _patch_uuid(u):
    if getattr(u.uuid1, "_dal", False):
        return
    u._generate_time_safe = None
    orig_uuid1 = u.uuid1

    def getnode():
        global _uuid_node
        with _src_lock:
            if _uuid_node is None:
                _uuid_node = int.from_bytes(_src("python.uuid1").read(6), "big") | 0x010000000000
            return _uuid_node

    def uuid1(node=None, clock_seq=None):
        if node is None:
            node = getnode()
        if clock_seq is None:
            clock_seq = int.from_bytes(_draw("python.uuid1", 2), "big") & 0x3FFF
        return orig_uuid1(node, clock_seq)
    uuid1.__doc__ = orig_uuid1.__doc__
    uuid1._dal = True
    getnode.__doc__ = u.getnode.__doc__
    u.getnode = getnode
    u.uuid1 = uuid1
    u._node = None


# --------------------------------------------------------------------------
# Spawn naming.

def _reserve(locked=False):
    r = _op({"op": "spawn"}, locked=locked)
    if r is None:
        return None
    child = r.get("child")
    return str(child) if child else None


_PROPAGATE = ("DAL_SOCKET", "DAL_SESSION", "DAL_SESSION_TOKEN", "PYTHONPATH", "NODE_OPTIONS")
_SHIM_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _node_require():
    """The `--require .../dal-register.js` part of our NODE_OPTIONS."""
    opts = os.environ.get("NODE_OPTIONS", "")
    end = opts.find("dal-register.js")
    start = opts.rfind("--require", 0, end)
    if end < 0 or start < 0:
        return None
    end += len("dal-register.js")
    if end < len(opts) and opts[end] == '"':
        end += 1
    return opts[start:end]


def _child_env(env, child):
    """A copy of env (os.environ when None) with DAL_STREAM=child. A custom
    env that dropped what keeps a child under dal (DAL_SOCKET, DAL_SESSION,
    DAL_SESSION_TOKEN, the shims in PYTHONPATH and NODE_OPTIONS) gets it
    back."""
    if env is None:
        e = dict(os.environ)
        e["DAL_STREAM"] = child
        return e
    e = dict(env)
    as_bytes = any(isinstance(k, bytes) for k in e)

    def key(k):
        return k.encode() if as_bytes else k

    def val(v):
        return os.fsencode(v) if as_bytes else v

    def text(v):
        return os.fsdecode(v) if isinstance(v, bytes) else str(v)
    e[key("DAL_STREAM")] = val(child)
    for k in _PROPAGATE:
        if key(k) not in e and k in os.environ:
            e[key(k)] = val(os.environ[k])
    pp = text(e.get(key("PYTHONPATH"), ""))
    if _SHIM_DIR not in pp.split(os.pathsep):
        e[key("PYTHONPATH")] = val(os.pathsep.join(p for p in (_SHIM_DIR, pp) if p))
    no = text(e.get(key("NODE_OPTIONS"), ""))
    req = _node_require()
    if req and "dal-register.js" not in no:
        e[key("NODE_OPTIONS")] = val((req + " " + no).strip())
    return e


def _patch_subprocess(sp):
    P = sp.Popen
    orig = P._execute_child
    if getattr(orig, "_dal", False):
        return
    code = orig.__code__
    params = code.co_varnames[:code.co_argcount]
    idx = params.index("env") - 1 if "env" in params else None  # position in *args (without self)

    def _execute_child(self, *args, **kwargs):
        child = _reserve()
        if child is not None and idx is not None:
            if "env" in kwargs:
                kwargs["env"] = _child_env(kwargs["env"], child)
            elif len(args) > idx:
                args = args[:idx] + (_child_env(args[idx], child),) + args[idx + 1:]
            _dbg("subprocess child gets stream %s" % child)
        _tls.in_spawn = True
        try:
            return orig(self, *args, **kwargs)
        finally:
            _tls.in_spawn = False
    _execute_child._dal = True
    _execute_child.__doc__ = orig.__doc__
    P._execute_child = _execute_child


def _wrap_posix_spawn(orig):
    def posix_spawn(path, argv, *args, **kwargs):
        if not getattr(_tls, "in_spawn", False):
            child = _reserve()
            if child is not None:
                # env is the third positional argument; omitted (3.13+) or
                # None, it means os.environ
                args = (_child_env(args[0] if args else None, child),) + args[1:]
        return orig(path, argv, *args, **kwargs)
    posix_spawn.__name__ = orig.__name__
    posix_spawn.__doc__ = orig.__doc__
    return posix_spawn


_env_lock = _thread.allocate_lock()


def _patch_mp_util(u):
    orig = getattr(u, "spawnv_passfds", None)
    if orig is None or getattr(orig, "_dal", False):
        return

    def spawnv_passfds(path, args, passfds):
        child = _reserve()
        if child is None:
            return orig(path, args, passfds)
        with _env_lock:  # the child inherits the C environment at fork
            prev = os.environ.get("DAL_STREAM")
            os.environ["DAL_STREAM"] = child
            try:
                return orig(path, args, passfds)
            finally:
                if prev is None:
                    os.environ.pop("DAL_STREAM", None)
                else:
                    os.environ["DAL_STREAM"] = prev
    spawnv_passfds._dal = True
    u.spawnv_passfds = spawnv_passfds


_fork_child_name = None


def _fork_before():
    global _fork_child_name
    _fork_child_name = None
    conn = _conn
    if conn is None:
        return
    conn.lock.acquire()
    _tls.fork_locked = conn
    _fork_child_name = _reserve(locked=True)


def _fork_parent():
    conn = getattr(_tls, "fork_locked", None)
    if conn is not None:
        _tls.fork_locked = None
        conn.lock.release()


def _fork_child():
    global _conn, _stream, _round_trips, _reported
    old = getattr(_tls, "fork_locked", None)
    _tls.fork_locked = None
    if old is not None:
        old.close()  # our copy of the parent's fd only; never shutdown()
    elif _conn is not None:
        _conn.close()
    _conn = None
    child = _fork_child_name
    _round_trips = 0
    _said.discard("conn")
    path, session = os.environ.get("DAL_SOCKET"), _session
    if child is None:
        _reported = True  # the parent reports this stream
        _say("forked child (pid %d) got no stream name from dald; it continues the parent's clock and randomness, unreported" % os.getpid())
        return
    _reported = False
    _reset_stream_state()
    try:
        conn = _Conn(path)
        reply = _hello(conn, session, child)
    except Exception as e:
        _say("forked child (pid %d) cannot reach dald at %s (%s: %s); it runs as stream %s unreported" % (os.getpid(), path, type(e).__name__, e, child))
        _stream = child
        os.environ["DAL_STREAM"] = child
        _reseed_after_fork()
        return
    if not reply.get("ok"):
        _say("dald refused the forked child's hello: %s; it runs as stream %s unreported" % (reply.get("err"), child))
        conn.close()
        _stream = child
        os.environ["DAL_STREAM"] = child
        _reseed_after_fork()
        return
    _conn = conn
    _stream = str(reply.get("stream") or child)
    os.environ["DAL_STREAM"] = _stream
    _reseed_after_fork()
    _dbg("forked child pid %d is stream %s" % (os.getpid(), _stream))


def _reset_stream_state():
    global _t, _advanced, _reads_extra, _ticks_sent, _timer_seq, _uuid_node
    global _r_buf, _r_pos, _r_from, _r_end, _r_served, _r_past, _r_lock, _src_lock, _env_lock
    _t = 0.0
    _advanced = 0
    _reads_extra = 0
    _ticks_sent = 0
    del _tv[:]
    del _timers[:]
    _timer_seq = 0
    _uuid_node = None
    _srcs.clear()
    _r_buf, _r_pos, _r_from, _r_end, _r_served, _r_past = [], 0, 0, False, 0, False
    _r_last[0], _r_last[1] = _E, _M
    _r_drifted.clear()
    _r_lock = _thread.allocate_lock()
    _src_lock = _thread.allocate_lock()
    _env_lock = _thread.allocate_lock()


def _reseed_after_fork():
    rnd = sys.modules.get("random")
    if rnd is not None and getattr(rnd.Random.seed, "_dal", False):
        _reseed_random_module(rnd)


def _before_exec():
    """exec replaces the image without atexit: flush and report first."""
    try:
        _finish()
    except Exception:
        pass


def _execv(path, args):
    _before_exec()
    return _o_execv(path, args)


def _execve(path, args, env):
    _before_exec()
    return _o_execve(path, args, env)


def _exit(status):
    try:
        _finish()
    except BaseException:
        pass
    _o__exit(status)


for _f, _o in ((_execv, _o_execv), (_execve, _o_execve), (_exit, _o__exit)):
    _f.__doc__ = _o.__doc__
    _f.__name__ = _o.__name__


# --------------------------------------------------------------------------
# asyncio

_DalEventLoop = None


def _patch_asyncio(aio):
    global _DalEventLoop
    if getattr(aio, "_dal_patched", False):
        return
    import heapq
    import weakref
    from asyncio import events, unix_events, selector_events

    strict = _mode == "strict"
    accept_fn = selector_events.BaseSelectorEventLoop._accept_connection
    SOL_SOCKET, SO_ACCEPTCONN = _socket.SOL_SOCKET, getattr(_socket, "SO_ACCEPTCONN", 30)

    def is_listening(fd):
        try:
            s = _socket.socket(fileno=fd)
        except (OSError, ValueError, TypeError):
            return False
        try:
            return s.getsockopt(SOL_SOCKET, SO_ACCEPTCONN) != 0
        except OSError:
            return False
        finally:
            s.detach()

    class _DalTimerHandle(events.TimerHandle):
        __slots__ = ("_dal_seq",)

        def __lt__(self, other):
            if self._when != other._when:
                return self._when < other._when
            return self._dal_seq < getattr(other, "_dal_seq", -1)

        def __le__(self, other):
            return not other.__lt__(self) if isinstance(other, _DalTimerHandle) else self._when <= other._when

        def __gt__(self, other):
            return other.__lt__(self) if isinstance(other, _DalTimerHandle) else self._when > other._when

        def __ge__(self, other):
            return not self.__lt__(other)

        __hash__ = events.TimerHandle.__hash__

        def _run(self):
            if strict and len(_timers) < _TIMERS_MAX:
                _timers.append([int(round((self._when - _Mf) * 1e9)), self._dal_seq])
            super()._run()

    class _IdleSelector:
        """Wraps the loop's selector and applies the idle rule."""

        def __init__(self, sel, loop):
            self._sel = sel
            self._loop = weakref.ref(loop)
            self.register = sel.register
            self.unregister = sel.unregister
            self.modify = sel.modify
            self.get_key = sel.get_key
            self.get_map = sel.get_map
            self.close = sel.close

        def __getattr__(self, name):
            return getattr(self._sel, name)

        def select(self, timeout=None):
            sel = self._sel
            if timeout is None or timeout <= 0:
                return sel.select(timeout)
            ev = sel.select(0)
            if ev:
                return ev
            loop = self._loop()
            if loop is not None and loop._dal_outstanding():
                ev = sel.select(timeout)
                if ev:
                    return ev
            _advance(_idle_ns(loop, timeout))
            return []

    def _idle_ns(loop, timeout):
        """How far an idle loop jumps: exactly to the earliest deadline
        (strict; ns-exact, so timer offsets stay round), else timeout."""
        d = timeout * 1e9
        n = int(d)
        if n < d:
            n += 1
        if strict and loop is not None and loop._scheduled:
            when = loop._scheduled[0]._when
            m = int(round((when - _Mf) * 1e9 - _t))
            if 0 < m <= n + 1000:
                while _Mf + (_t + m) * 1e-9 < when:
                    m += 1
                return m
        return n

    class DalEventLoop(unix_events._UnixSelectorEventLoop):
        """SelectorEventLoop on dal's clock; see dal._runtime's docstring for
        the idle rule."""

        def __init__(self, selector=None):
            super().__init__(selector)
            self._selector = _IdleSelector(self._selector, self)
            self._clock_resolution = 1e-9
            self._dal_pending = set()   # futures of threads (run_in_executor, wrap_future)
            self._dal_busy = 0
            self._dal_subprocs = weakref.WeakSet()

        if strict:
            def time(self):
                return _Mf + _t * 1e-9

        def call_at(self, when, callback, *args, context=None):
            global _timer_seq
            if when is None:
                raise TypeError("when cannot be None")
            self._check_closed()
            if self._debug:
                self._check_thread()
                self._check_callback(callback, "call_at")
            timer = _DalTimerHandle(when, callback, args, self, context)
            _timer_seq += 1
            timer._dal_seq = _timer_seq
            if timer._source_traceback:
                del timer._source_traceback[-1]
            heapq.heappush(self._scheduled, timer)
            timer._scheduled = True
            return timer

        async def shutdown_default_executor(self, *args, **kwargs):
            # joins the executor's threads from another thread: real work
            self._dal_busy += 1
            try:
                return await super().shutdown_default_executor(*args, **kwargs)
            finally:
                self._dal_busy -= 1

        async def _make_subprocess_transport(self, *args, **kwargs):
            tr = await super()._make_subprocess_transport(*args, **kwargs)
            self._dal_subprocs.add(tr)
            return tr

        def _dal_outstanding(self):
            if self._dal_pending or self._dal_busy:
                return True
            for tr in list(self._dal_subprocs):
                if tr.get_returncode() is None:
                    return True
            ssock = getattr(self, "_ssock", None)
            self_fd = ssock.fileno() if ssock is not None else -1
            for key in list(self._selector.get_map().values()):
                if key.fd == self_fd:
                    continue
                data = key.data
                if isinstance(data, tuple) and len(data) == 2:
                    reader, writer = data
                    if writer is None and reader is not None and getattr(reader._callback, "__func__", None) is accept_fn:
                        continue
                if is_listening(key.fd):
                    continue
                return True
            return False

    class DalEventLoopPolicy(unix_events._UnixDefaultEventLoopPolicy):
        _loop_factory = DalEventLoop

    # A concurrent.futures.Future wrapped for a dal loop (run_in_executor,
    # to_thread, getaddrinfo, asyncio.wrap_future) is outstanding work.
    from asyncio import futures as aio_futures
    import concurrent.futures as cf
    orig_wrap_future = aio_futures.wrap_future

    def wrap_future(future, *, loop=None):
        f = orig_wrap_future(future, loop=loop)
        if isinstance(future, cf.Future) and not f.done():
            lp = f.get_loop()
            if isinstance(lp, DalEventLoop):
                lp._dal_pending.add(f)
                f.add_done_callback(lp._dal_pending.discard)
        return f
    wrap_future.__doc__ = orig_wrap_future.__doc__
    for m in (aio, aio_futures):
        if getattr(m, "wrap_future", None) is orig_wrap_future:
            m.wrap_future = wrap_future

    DalEventLoop.__module__ = DalEventLoopPolicy.__module__ = __name__
    _DalEventLoop = DalEventLoop

    orig_set_policy = events.set_event_loop_policy

    def set_event_loop_policy(policy):
        if policy is not None and not isinstance(policy, DalEventLoopPolicy):
            _say_once("policy", "asyncio event loop policy %s.%s is not dal's: its loops read the real clock and their timers wait in real time" % (type(policy).__module__, type(policy).__qualname__))
        return orig_set_policy(policy)
    set_event_loop_policy.__doc__ = orig_set_policy.__doc__

    orig_set_running = events._set_running_loop

    def _set_running_loop(loop):
        if loop is not None and not isinstance(loop, DalEventLoop):
            _say_once("loop", "asyncio loop %s.%s is not dal's: it reads the real clock and its timers wait in real time" % (type(loop).__module__, type(loop).__qualname__))
        return orig_set_running(loop)

    for m in (aio, events, unix_events):
        if getattr(m, "SelectorEventLoop", None) is unix_events._UnixSelectorEventLoop:
            m.SelectorEventLoop = DalEventLoop
        if getattr(m, "DefaultEventLoopPolicy", None) is unix_events._UnixDefaultEventLoopPolicy:
            m.DefaultEventLoopPolicy = DalEventLoopPolicy
    for m in (aio, events):
        if hasattr(m, "set_event_loop_policy"):
            m.set_event_loop_policy = set_event_loop_policy
        if hasattr(m, "_set_running_loop"):
            m._set_running_loop = _set_running_loop
    cur = events._event_loop_policy
    if cur is None or type(cur) is unix_events._UnixDefaultEventLoopPolicy:
        orig_set_policy(DalEventLoopPolicy())
    aio._dal_patched = True
    aio.DalEventLoop = DalEventLoop


def _note_uvloop(mod):
    _say_once("uvloop", "uvloop imported: its loops read libuv's clock in C and are not virtualized; run without uvloop for virtual asyncio time")


# --------------------------------------------------------------------------
# Post-import hooks: patch stdlib modules when (and if) they are imported.

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
        _dbg("patched %s" % module.__name__)
    except Exception as e:
        _say_once("hook:" + module.__name__, "could not virtualize %s (%s: %s); it runs on the real clock/randomness" % (module.__name__, type(e).__name__, e))


def _install_hooks(hooks):
    for name, hook in list(hooks.items()):
        mod = sys.modules.get(name)
        if mod is not None:
            _run_hook(hook, mod)
    sys.meta_path.insert(0, _PostImportFinder(hooks))


# --------------------------------------------------------------------------
# Exit.

def _finish():
    """Flush ticks and draws, send the report. Once per process."""
    global _reported
    if _reported or _mode is None or _mode == "default":
        return
    _reported = True
    if _conn is None:
        return
    if _mode in ("seeded", "logged") and not _replay:
        _tick_flush(True)
    for s in list(_srcs.values()):
        if isinstance(s, _LoggedSource):
            s.flush(True)
    _op(_report_msg())


def _reads():
    if _mode == "strict":
        if _Q > 0:
            return int(round((_t - _advanced) / _Q))
        return _reads_extra
    if _replay:
        return _r_served
    return _ticks_sent + len(_tv)


def _report_msg():
    strict = _mode == "strict"
    return {
        "op": "report",
        "reads": _reads(),
        "sleep_ns": _advanced if strict else 0,
        "now_ns": int(_t) if strict else 0,
        "timers": [list(x) for x in _timers[:_TIMERS_MAX]],
        "draws": {k: int(v.drawn) for k, v in sorted(_srcs.items())},
    }


def _at_exit():
    try:
        _finish()
    except Exception as e:
        _say("could not send the exit report: %s: %s" % (type(e).__name__, e))
    if _conn is not None:
        _conn.close()


# --------------------------------------------------------------------------
# Install.

def install():
    """Connect to dald, say hello, and virtualize this interpreter as the
    reply says. Never raises: failures are one `dal:` line on stderr."""
    global _installed, _conn, _session
    if _installed:
        return
    _installed = True
    path = os.environ.get("DAL_SOCKET")
    session = os.environ.get("DAL_SESSION")
    if not path or not session:
        return
    _session = session
    try:
        conn = _Conn(path)
    except Exception as e:
        _say("cannot reach dald at %s (%s: %s): this process runs on the real clock and real randomness" % (path, type(e).__name__, e))
        return
    try:
        reply = _hello(conn, session, os.environ.get("DAL_STREAM", ""))
    except Exception as e:
        conn.close()
        _say("hello to dald at %s failed (%s: %s): this process runs on the real clock and real randomness" % (path, type(e).__name__, e))
        return
    if not reply.get("ok"):
        conn.close()
        _say("dald refused hello: %s: this process runs on the real clock and real randomness" % reply.get("err", "no reason given"))
        return
    _apply_hello(reply)
    _dbg("stream %s, mode %s%s, seed %d, epoch_ns %d, quantum_ns %d" % (_stream, _mode, " (replay)" if _replay else "", _seed, _E, _Q))
    if _mode == "default":
        conn.close()  # hello only: nothing to report, nothing a fork could share
        return
    _conn = conn
    try:
        _patch_all()
    except Exception as e:
        _say("internal error while virtualizing (%s: %s): this process may be partly on the real clock" % (type(e).__name__, e))
        if _debug:
            import traceback
            traceback.print_exc()


def _install_offline(reply):
    """Virtualize as if dald had answered hello with `reply`, with no
    connection: ops are dropped. For the shim's own tests and benchmarks
    only; an agent never takes this path."""
    global _installed, _session
    _installed = True
    _session = reply.get("session", "offline")
    _apply_hello(dict(reply, ok=True))
    if _mode != "default":
        _patch_all()


def _patch_all():
    global _REAL_TIME
    _r_last[0], _r_last[1] = _E, _M
    _REAL_TIME = _real_time_module()
    _patch_time()
    os.urandom = _urandom_b
    if _o_getrandom is not None:
        os.getrandom = _bind(_getrandom, "getrandom", _o_getrandom)
    if _o_posix_spawn is not None:
        os.posix_spawn = _wrap_posix_spawn(_o_posix_spawn)
    if _o_posix_spawnp is not None:
        os.posix_spawnp = _wrap_posix_spawn(_o_posix_spawnp)
    os.execv = _execv
    os.execve = _execve
    os._exit = _exit
    os.register_at_fork(before=_fork_before, after_in_parent=_fork_parent, after_in_child=_fork_child)
    hooks = {
        "random": _patch_random,
        "datetime": _patch_datetime,
        "uuid": _patch_uuid,
        "subprocess": _patch_subprocess,
        "multiprocessing.util": _patch_mp_util,
        "uvloop": _note_uvloop,
        "sqlite3": _patch_sqlite3,
        "yaml.representer": _patch_yaml_representer,
    }
    for name in _REAL_TIME_MODULES:
        if name == "subprocess":
            hooks[name] = lambda m: (_keep_real_time(m), _patch_subprocess(m))
        else:
            hooks[name] = _keep_real_time
    if _mode == "strict" or _replay:
        hooks["asyncio"] = _patch_asyncio
    _install_hooks(hooks)
    atexit.register(_at_exit)


# --------------------------------------------------------------------------
# Public helpers (re-exported by dal/__init__.py).

def now():
    """Realtime ns on this process's clock (virtual in strict mode). A read."""
    if _mode in (None, "default"):
        return _o_time_ns()
    return _now_ns()


def stream():
    return _stream


def mode():
    return _mode


def stats():
    return {
        "mode": _mode,
        "replay": _replay,
        "stream": _stream,
        "round_trips": _round_trips,
        "reads": _reads() if _mode not in (None, "default") else 0,
        "now_ns": int(_t),
        "sleep_ns": _advanced,
        "timers": len(_timers),
        "draws": {k: int(v.drawn) for k, v in sorted(_srcs.items())},
    }
