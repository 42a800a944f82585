"""The three clocks behind the patched ``time`` module (the manual is
dal._runtime's docstring, "Modes"), and the real ``time`` module the stdlib
keeps for deadlines of real waits.

Every clock has the same shape, so patching does not care which one runs:
``time``, ``time_ns``, ``monotonic``, ``monotonic_ns`` (reads), ``sleep``
(None: sleeps stay real), ``advance(ns)`` (an idle event loop's jump; None
without one), ``reads()``, and ``t``/``advanced`` (virtual ns so far and
the part of it sleeps and idle jumps added; 0 outside strict mode). The
patched functions are bound methods of the clock: a Python function set as
a class attribute becomes a method and gets `self`
(``logging.Formatter.converter = time.localtime``); the builtins it replaces
do not, and neither does a bound method.

StrictClock
    Virtual time: one counter ``t`` (ns since the stream started; a float,
    exact below 2**53 ns = 104 days, because float adds are twice as fast as
    bigint adds on the read path). Every read adds the quantum. No IPC.
RecordingClock
    seeded/logged: real reads, logged as ticks, sent with ``ticks.put``
    every ``batch`` ticks and at exit.
ReplayClock
    Reads served from ``ticks.fetch``; drift reported once, then the last
    served value + quantum.
"""

import sys
import time as _timemod
import _thread
from _operator import index as _index
from math import inf as _INF, trunc as _trunc

from . import _wire
from ._say import dbg, say_once, unserved

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
_o_process_time = _timemod.process_time
_o_process_time_ns = _timemod.process_time_ns

_RT_CLOCKS = frozenset(c for c in (getattr(_timemod, "CLOCK_REALTIME", None), 5 if sys.platform.startswith("linux") else None) if c is not None)
_MONO_CLOCKS = frozenset(c for c in (getattr(_timemod, "CLOCK_MONOTONIC", None), getattr(_timemod, "CLOCK_MONOTONIC_RAW", None),
                                     getattr(_timemod, "CLOCK_BOOTTIME", None), 6 if sys.platform.startswith("linux") else None) if c is not None)
_CPU_CLOCKS = frozenset(c for c in (getattr(_timemod, "CLOCK_PROCESS_CPUTIME_ID", None), getattr(_timemod, "CLOCK_THREAD_CPUTIME_ID", None)) if c is not None)
_OTHER_WALL_CLOCKS = frozenset(c for c in (getattr(_timemod, "CLOCK_TAI", None),) if c is not None)


def sleep_ns(secs):
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


class _Clock:
    """What every clock shares: the reads derived from time()/monotonic()."""

    __slots__ = ()

    t = 0.0       # overridden by StrictClock's slots
    advanced = 0
    sleep = None
    advance = None

    def __repr__(self):
        return "<dal clock>"

    def clock_gettime(self, clk_id):
        if clk_id in _RT_CLOCKS:
            return self.time()
        if clk_id in _MONO_CLOCKS:
            return self.monotonic()
        if clk_id in _CPU_CLOCKS:
            unserved("cpu_clock/time.clock_gettime(%s)" % clk_id)  # real: see count_cpu_times
        if clk_id in _OTHER_WALL_CLOCKS:
            unserved("clock/time.clock_gettime(%s)" % clk_id)
            say_once("clk%s" % clk_id, "time.clock_gettime(%s) reads the real clock: only CLOCK_REALTIME and the monotonic clocks are virtualized" % clk_id)
        return _o_clock_gettime(clk_id)

    def clock_gettime_ns(self, clk_id):
        if clk_id in _RT_CLOCKS:
            return self.time_ns()
        if clk_id in _MONO_CLOCKS:
            return self.monotonic_ns()
        if clk_id in _CPU_CLOCKS:
            unserved("cpu_clock/time.clock_gettime_ns(%s)" % clk_id)  # real: see count_cpu_times
        if clk_id in _OTHER_WALL_CLOCKS:
            unserved("clock/time.clock_gettime(%s)" % clk_id)
            say_once("clk%s" % clk_id, "time.clock_gettime(%s) reads the real clock: only CLOCK_REALTIME and the monotonic clocks are virtualized" % clk_id)
        return _o_clock_gettime_ns(clk_id)

    def localtime(self, secs=None):
        return _o_localtime(self.time() if secs is None else secs)

    def gmtime(self, secs=None):
        return _o_gmtime(self.time() if secs is None else secs)

    def ctime(self, secs=None):
        return _o_ctime(self.time() if secs is None else secs)

    def asctime(self, t=None):
        return _o_asctime(_o_localtime(self.time()) if t is None else t)

    def strftime(self, format, t=None):
        return _o_strftime(format, _o_localtime(self.time()) if t is None else t)


# --------------------------------------------------------------------------
# strict: virtual clock. The hot path: the reads are closures sharing one
# cell, t (LOAD_DEREF, a float add, STORE_DEREF: a fifth cheaper than slot
# reads of a bound method's self), no IPC.

class StrictClock(_Clock):
    """The strict clock. t (ns since the stream started, a float, exact
    below 2**53 ns = 104 days) lives in the cell the read functions share;
    the t property reads and writes it for everyone else. Quantum 0: reads
    cannot be derived from t, so the reads count themselves (reads_extra)."""

    __slots__ = ("epoch_ns", "mono_ns", "quantum_ns", "epoch_s", "mono_s", "quantum", "advanced", "reads_extra", "threads",
                 "time", "time_ns", "monotonic", "monotonic_ns", "mono_peek", "make_now", "_get", "_set")

    def __init__(self, epoch_ns, mono_ns, quantum_ns):
        self.epoch_ns = epoch_ns
        self.mono_ns = mono_ns
        self.quantum_ns = quantum_ns
        # epoch and monotonic origin in seconds, quantum and virtual time as
        # floats (exact integers of ns below 2**53 ns, 104 days: float adds
        # beat bigint adds two to one on the read path)
        self.epoch_s = epoch_ns / 1e9
        self.mono_s = mono_ns / 1e9
        self.quantum = float(quantum_ns)
        self.threads = None  # the thread scheduler (dal._threads), once threading is imported
        self.advanced = 0     # ns added by sleeps and idle jumps
        self.reads_extra = 0  # quantum 0: reads counted separately
        _strict_reads(self, epoch_ns, mono_ns, float(quantum_ns))

    @property
    def t(self):
        return self._get()

    @t.setter
    def t(self, v):
        self._set(v)

    def reset(self):
        """A new stream (a forked child): time starts again."""
        self._set(0.0)
        self.advanced = 0
        self.reads_extra = 0

    def sleep(self, secs):
        n = sleep_ns(secs)
        threads = self.threads
        if threads is not None and threads.sleep(n):
            return  # another thread exists: the scheduler slept us
        self._set(self._get() + n)
        self.advanced += n
        _o_sleep(0)  # yield the GIL: threads not started by threading progress

    def advance(self, n):
        """An idle event loop or thread scheduler jumps virtual time by n ns."""
        if n > 0:
            self._set(self._get() + n)
            self.advanced += int(n)

    def reads(self):
        if self.quantum_ns > 0:
            return int(round((self._get() - self.advanced) / self.quantum_ns))
        return self.reads_extra


def _strict_reads(clock, epoch_ns, mono_ns, q):
    """Set clock's read functions: closures over one cell, t. Each takes an
    ignored optional argument: a function set as a class attribute becomes
    a method (`clock = time.monotonic` in a class body), and the builtins
    these replace do not bind."""
    epoch_s, mono_s = epoch_ns / 1e9, mono_ns / 1e9
    t = 0.0

    def time(_bound=None):
        nonlocal t
        t += q
        return epoch_s + t * 1e-9

    def time_ns(_bound=None):
        nonlocal t
        t += q
        return epoch_ns + _trunc(t)  # math.trunc: a third cheaper than int()

    def monotonic(_bound=None):
        nonlocal t
        t += q
        return mono_s + t * 1e-9

    def monotonic_ns(_bound=None):
        nonlocal t
        t += q
        return mono_ns + _trunc(t)

    def mono_peek():
        """The monotonic clock in seconds without a read (asyncio's
        loop.time, the stdlib's deadlines for waits)."""
        return mono_s + t * 1e-9

    def get():
        return t

    def set(v):
        nonlocal t
        t = v

    def make_now(make, slow, aware, step=None):
        """datetime.now on this clock (dal._datetime). Without tz, while
        the read stays in the cached second [lo, hi) (ns since the epoch's
        whole second), make(prefix + 3 bytes of us); else slow(x) returns
        the instance and the new (lo, hi, prefix), or None for no cache.
        With tz: aware(tz).

        step, a timedelta of one quantum (a whole number of microseconds),
        makes the commonest call cheaper still: a read one quantum after
        the last one made in the cached second (nothing else read the clock
        between) is the last instance plus step, one C addition, the same
        value: within a second only the microsecond moves."""
        sub = float(epoch_ns % 1_000_000_000)
        lo, hi, prefix = 1.0, 0.0, b""
        last_x, last_d = -_INF, None  # the last instance made in [lo, hi), at x

        def now(tz=None):
            nonlocal t, lo, hi, prefix, last_x, last_d
            if tz is not None:
                return aware(tz)
            t += q
            x = t + sub
            if x - last_x == q and x < hi:
                last_x = x
                last_d = last_d + step
                return last_d
            if lo <= x < hi:
                # floor((x - lo) / 1000) for the whole numbers below 1e9
                # that x - lo is (checked for every boundary), without int()
                d = make(prefix + _trunc((x - lo) * 0.001 + 1e-7).to_bytes(3, "big"))
                if step is not None:
                    last_x, last_d = x, d
                return d
            d, cached = slow(x)
            last_x = -_INF
            if cached is not None:
                lo, hi, prefix = cached
                if step is not None and lo <= x < hi:
                    last_x, last_d = x, d
            return d
        return now

    reads = (time, time_ns, monotonic, monotonic_ns)
    if q == 0:  # quantum 0: every read counts itself
        reads = tuple(_counting(clock, f) for f in reads)
    clock.time, clock.time_ns, clock.monotonic, clock.monotonic_ns = reads
    clock.mono_peek, clock.make_now, clock._get, clock._set = mono_peek, (None if q == 0 else make_now), get, set
    for f, like in zip(reads, (_o_time, _o_time_ns, _o_monotonic, _o_monotonic_ns)):
        f.__name__ = f.__qualname__ = like.__name__
        f.__doc__ = like.__doc__


def _counting(clock, read):
    def counted(_bound=None):
        clock.reads_extra += 1
        return read()
    return counted


# --------------------------------------------------------------------------
# seeded/logged: real clock, logged ticks.

_MB = 1 << 63  # the monotonic mark: a logged tick is ns (realtime) or ns | _MB
_KIND_OF_TOP = bytes(b >> 7 for b in range(256))
_CLEAR_TOP = bytes(b & 0x7F for b in range(256))


def encode_ticks(vals):
    """(kinds, values) for ticks.put from logged ticks, with C loops only
    (a batch is 4096 ticks): the mark is the top bit of each u64."""
    from array import array  # here, not at start-up: strict mode never needs it
    try:
        a = array("Q", vals)
    except OverflowError:  # a realtime reading before 1970: the slow way
        return bytes(1 if v >= _MB else 0 for v in vals), [v - _MB if v >= _MB else v for v in vals]
    if sys.byteorder == "big":
        a.byteswap()
    b = bytearray(a.tobytes())
    top = b[7::8]
    kinds = top.translate(_KIND_OF_TOP)
    b[7::8] = top.translate(_CLEAR_TOP)
    return bytes(kinds), _wire.u64_array_le(b)


class RecordingClock(_Clock):
    __slots__ = ("session", "batch", "tv", "sent")

    def __init__(self, session):
        self.session = session
        self.batch = session.batch
        self.tv = []  # logged ticks, realtime ns as is, monotonic ns | 1 << 63
        self.sent = 0

    def reset(self):
        del self.tv[:]
        self.sent = 0

    def flush(self, blocking=True):
        """Send the logged ticks. From the read path it never waits for the
        connection lock (a signal handler may read the clock mid-request)."""
        tv = self.tv
        if not tv:
            return
        conn = self.session.conn
        if conn is None:
            return
        if not conn.lock.acquire(blocking):
            return
        try:
            vals = tv[:]
            n = len(vals)
            del tv[:n]
            kinds, values = encode_ticks(vals)
            self.sent += n
            self.session.op({"op": "ticks.put", "kinds": kinds, "values": values}, nowait=True)
        finally:
            conn.lock.release()

    def time(self):
        ns = _o_time_ns()
        tv = self.tv
        tv.append(ns)
        if len(tv) >= self.batch:
            self.flush(False)
        return ns / 1e9

    def time_ns(self):
        ns = _o_time_ns()
        tv = self.tv
        tv.append(ns)
        if len(tv) >= self.batch:
            self.flush(False)
        return ns

    def monotonic(self):
        ns = _o_monotonic_ns()
        tv = self.tv
        tv.append(ns | _MB)
        if len(tv) >= self.batch:
            self.flush(False)
        return ns / 1e9

    def monotonic_ns(self):
        ns = _o_monotonic_ns()
        tv = self.tv
        tv.append(ns | _MB)
        if len(tv) >= self.batch:
            self.flush(False)
        return ns

    def reads(self):
        return self.sent + len(self.tv)


# --------------------------------------------------------------------------
# replay: ticks served from the log.

class ReplayClock(_Clock):
    __slots__ = ("session", "lock", "buf", "pos", "next", "end", "served", "past", "last", "drifted")

    def __init__(self, session):
        self.session = session
        self.reset()

    def reset(self):
        self.lock = _thread.allocate_lock()
        self.buf = []       # fetched encoded ticks
        self.pos = 0
        self.next = 0       # index of the next tick to fetch
        self.end = False
        self.served = 0
        self.past = False
        self.last = [self.session.epoch_ns, self.session.mono_ns]  # last served value per kind
        self.drifted = set()

    def _fetch(self):
        r = self.session.op({"op": "ticks.fetch", "from": self.next, "max": self.session.batch})
        if r is None:
            self.end = True
            return
        kinds = r.get("kinds") or b""
        values = r.get("values") or []
        if len(kinds) != len(values):
            say_once("fetch-shape", "ticks.fetch returned %d kinds for %d values; treating the log as ended" % (len(kinds), len(values)))
            self.end = True
            return
        self.buf = [-v if k else v for k, v in zip(kinds, values)]
        self.pos = 0
        self.next += len(values)
        self.end = bool(r.get("end", not values)) or not values

    def _drift(self, key, detail):
        if key in self.drifted:
            return
        self.drifted.add(key)
        self.session.op({"op": "drift", "what": "clock", "detail": detail})
        dbg("clock drift on stream %s: %s" % (self.session.stream, detail))

    def _read(self, kind):
        with self.lock:
            if self.pos >= len(self.buf) and not self.end:
                self._fetch()
            if self.pos < len(self.buf):
                v = self.buf[self.pos]
                self.pos += 1
                self.served += 1
                k = 1 if v < 0 else 0
                if k == kind:
                    v = -v if k else v
                    self.last[kind] = v
                    return v
                self._drift("kind", "read %d asked for the %s clock, the log has a %s tick there" % (
                    self.served, ("realtime", "monotonic")[kind], ("realtime", "monotonic")[k]))
            else:
                self.served += 1
                if not self.past:
                    self.past = True
                    self._drift("end", "read %d past the %d recorded ticks" % (self.served, self.next))
            v = self.last[kind] + self.session.quantum_ns
            self.last[kind] = v
            return v

    def time(self):
        return self._read(0) / 1e9

    def time_ns(self):
        return self._read(0)

    def monotonic(self):
        return self._read(1) / 1e9

    def monotonic_ns(self):
        return self._read(1)

    def advance(self, n):
        """Replay sleeps and idle waits do not wait; past the log they advance
        the synthesized clock."""
        if self.past and n > 0:
            with self.lock:
                self.last[0] += n
                self.last[1] += n

    def sleep(self, secs):
        self.advance(sleep_ns(secs))
        _o_sleep(0)

    def reads(self):
        return self.served


def _name_like_time(cls):
    """The patched functions carry the names and docs of those they replace
    (perf_counter is CLOCK_MONOTONIC on Linux: one clock, two names, and it
    goes by monotonic's)."""
    likes = {"time": _o_time, "time_ns": _o_time_ns, "monotonic": _o_monotonic, "monotonic_ns": _o_monotonic_ns,
             "sleep": _o_sleep, "clock_gettime": _o_clock_gettime, "clock_gettime_ns": _o_clock_gettime_ns,
             "process_time": _o_process_time, "process_time_ns": _o_process_time_ns,
             "localtime": _o_localtime, "gmtime": _o_gmtime, "ctime": _o_ctime, "asctime": _o_asctime, "strftime": _o_strftime}
    for name, like in likes.items():
        f = cls.__dict__.get(name)
        if callable(f) and hasattr(f, "__code__"):
            f.__qualname__ = name
            f.__doc__ = like.__doc__


for _cls in (_Clock, StrictClock, RecordingClock, ReplayClock):
    _name_like_time(_cls)
del _cls


def new(session):
    """The clock for the session's mode (not default)."""
    if session.mode == "strict":
        return StrictClock(session.epoch_ns, session.mono_ns, session.quantum_ns)
    if session.replay:
        return ReplayClock(session)
    return RecordingClock(session)


def patch(clock):
    """Point the time module's clock functions at clock."""
    T = _timemod
    T.time = clock.time
    T.time_ns = clock.time_ns
    T.monotonic = clock.monotonic
    T.monotonic_ns = clock.monotonic_ns
    T.perf_counter = clock.monotonic
    T.perf_counter_ns = clock.monotonic_ns
    if clock.sleep is not None:
        T.sleep = clock.sleep
    T.clock_gettime, T.clock_gettime_ns = clock.clock_gettime, clock.clock_gettime_ns
    T.localtime = clock.localtime
    T.gmtime = clock.gmtime
    T.ctime = clock.ctime
    T.asctime = clock.asctime
    T.strftime = clock.strftime


#: The unpatched functions, for benchmarks and for code that must measure
#: real time inside a shimmed process.
ORIG = {
    "time": _o_time, "time_ns": _o_time_ns, "monotonic": _o_monotonic,
    "monotonic_ns": _o_monotonic_ns, "perf_counter": _o_perf_counter,
    "perf_counter_ns": _o_perf_counter_ns, "sleep": _o_sleep,
    "clock_gettime": _o_clock_gettime, "clock_gettime_ns": _o_clock_gettime_ns,
}

# --------------------------------------------------------------------------
# Real time for real waits.

REAL_TIME_MODULES = ("threading", "queue", "socketserver", "subprocess", "concurrent.futures._base",
                     "multiprocessing.connection", "multiprocessing.queues", "multiprocessing.synchronize",
                     "multiprocessing.managers", "multiprocessing.pool")


def real_time_module():
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


def keeping_real_time(real):
    """A hook that points a stdlib module's deadline clock back at the real
    clocks (real: real_time_module())."""
    def keep_real_time(mod):
        name = mod.__name__
        if name == "threading":
            mod._time = _o_monotonic
        elif name in ("queue", "socketserver"):
            mod.time = _o_monotonic
        elif name == "subprocess":
            mod._time = _o_monotonic
            mod.time = real
        else:  # modules using time.monotonic() / time.sleep() through `time`
            if getattr(mod, "time", None) is _timemod:
                mod.time = real
    return keep_real_time


# --------------------------------------------------------------------------
# CPU time: real in every mode, counted.

def count_cpu_times(clock, strict):
    """CPU-time clocks and resource usage stay real in every mode, as the
    syscall layer leaves them for every other program (C's clock(), the CPU
    fields of times(), CLOCK_PROCESS_CPUTIME_ID): they measure the work the
    process did, not time, and no clock can give them back. Each call of
    time.process_time[_ns], thread_time[_ns], clock_gettime of a CPU-time
    clock, os.times and resource.getrusage is counted as
    "cpu_clock/<api>" (the exit report's unserved; syscalls.json's real,
    not an escape). os.times().elapsed is a clock: in strict mode the
    virtual monotonic clock (a read). Returns the hook for `resource`."""
    import os
    T = _timemod

    def counted(fn, name):
        key = "cpu_clock/" + name

        def f(*args):
            unserved(key)
            return fn(*args)
        f.__name__ = f.__qualname__ = fn.__name__
        f.__doc__ = fn.__doc__
        f._dal = True
        return f
    for name in ("process_time", "process_time_ns", "thread_time", "thread_time_ns"):
        setattr(T, name, counted(getattr(T, name), "time." + name))
    o_times = os.times
    if strict:
        def times():
            unserved("cpu_clock/os.times")
            r = o_times()
            return os.times_result((r.user, r.system, r.children_user, r.children_system, round(clock.monotonic(), 2)))
        times.__doc__ = o_times.__doc__
        times._dal = True
        os.times = times
    else:
        os.times = counted(o_times, "os.times")

    def hook(mod):
        if not getattr(mod.getrusage, "_dal", False):
            mod.getrusage = counted(mod.getrusage, "resource.getrusage")
    return hook
