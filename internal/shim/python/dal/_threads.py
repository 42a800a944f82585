"""Threads of a strict-mode process, one at a time, on the virtual clock
(the manual is dal._runtime's docstring, "Threads"). Imported by the
`threading` hook, not before: a process without threads never pays for it.

The Scheduler hands one baton around. A thread started by ``threading``
runs Python code only while it holds the baton; it gives the baton away at
its blocking points (a contended lock, ``Condition.wait``, ``Event.wait``,
``queue.get``, ``join``, ``time.sleep``, a real blocking call) and the next
runnable thread, in the order they became runnable, gets it. So the GIL's
switch interval decides nothing, and waits with a timeout are virtual
timers: when no thread can run, time jumps to the earliest deadline (ties in
registration order), unless a thread is out in a real blocking call (the
outstanding-I/O rule: wait up to the deadline's distance in wall time for it
to come back first).
"""

import _thread
from collections import deque
from os import fstat as _fstat, get_blocking as _get_blocking
from select import POLLIN as _POLLIN, POLLOUT as _POLLOUT, poll as _poll
from stat import S_ISCHR as _S_ISCHR, S_ISFIFO as _S_ISFIFO, S_ISSOCK as _S_ISSOCK
from heapq import heappop, heappush

from ._say import say_once, unserved

_get_ident = _thread.get_ident
_get_native_id = _thread.get_native_id

#: Wall seconds a thread may run while others are runnable before they are
#: let run beside it (the watchdog: never hang), counted in the idler's
#: timed waits of TICK seconds. Wall time is measured only by waits that
#: expire: under dal's syscall layer every clock a process can read is
#: virtual, while a timed wait of a multi-threaded process stays real.
STUCK = 5
TICK = 1.0


class Task:
    """One thread under the scheduler. gate is held while the thread is
    parked; releasing it hands the thread the baton."""

    __slots__ = ("seq", "gate", "woken", "entry", "finished", "joiners", "pokeable", "passive", "ident", "tid", "__weakref__")

    def __init__(self, seq):
        self.seq = seq
        self.gate = _thread.allocate_lock()
        self.gate.acquire()
        self.woken = None      # True: woken by an event; False: its deadline passed
        self.entry = None      # its live timer, [deadline, seq, task, live]
        self.finished = False
        self.joiners = []
        self.pokeable = False  # an event loop's idle wait: poke() ends it
        self.passive = False   # out in a wait for connections only (not outstanding I/O)
        self.ident = None      # _thread.get_ident() and the kernel's thread id, once it runs
        self.tid = None

    def __repr__(self):
        return "<dal thread %d>" % self.seq


class Scheduler:
    """The baton, the run queue and the virtual timers of one process.
    Every field is guarded by mu."""

    def __init__(self, clock, timers):
        self.clock = clock
        self.timers = timers          # the TimerLog (registration seq, firings)
        self.reset()

    def reset(self):
        """The calling thread is the only one (start, and a forked child)."""
        self.mu = _thread.allocate_lock()
        self.bell = _thread.allocate_lock()  # the idler waits on it (held: not rung)
        self.bell.acquire()
        self.listening = False
        self.idler = False
        self.nseq = 0
        self.by_ident = {}
        self.runq = deque()
        self.heap = []
        self.back = []      # tasks back from a real blocking call, waiting for an idle point
        self.outside = 0    # tasks in a real blocking call
        self.live = 0
        self.io_waited = 0.0  # wall seconds the idler waited for outstanding I/O since a thread last ran
        self.switches = 0   # batons handed over: the watchdog's sign of life
        me = self._new()
        self._bind(me)
        self.current = me
        self.live = 1

    def _new(self):
        self.nseq += 1
        return Task(self.nseq)

    def _bind(self, t):
        """t is the calling thread. mu held (or the only thread)."""
        t.ident = _get_ident()
        t.tid = _get_native_id()
        self.by_ident[t.ident] = t

    # ------------------------------------------------------------ who runs

    def me(self):
        t = self.by_ident.get(_get_ident())
        if t is None:
            # a thread threading did not start (_thread, a C extension): it
            # runs beside the baton until it first blocks
            with self.mu:
                t = self._new()
                self._bind(t)
                self.live += 1
        return t

    def alone(self):
        """Whether nothing but the running thread could ever run: no other
        live thread and no timer."""
        return self.live <= 1 and not self.outside and not self.back

    def _handoff(self):
        """The baton is free (current is None): give it to the next
        runnable thread, else to those back from real calls (an idle
        point, in the order they were started), or let the idler decide.
        mu held."""
        if not self.runq and self.back:
            self.back.sort(key=_seq)
            self.runq.extend(self.back)
            del self.back[:]
        if self.runq:
            t = self.runq.popleft()
            self.current = t
            self.io_waited = 0.0
            self.switches += 1
            t.gate.release()
        elif self._live_timer():
            self._ring()  # nothing runs: the idler jumps to the timer (or waits for I/O first)

    def _ring(self):
        if not self.idler:
            self.idler = True
            _thread.start_new_thread(self._idle_loop, ())
        if self.listening:
            self.listening = False
            self.bell.release()

    def _wake(self, t, value):
        """t becomes runnable (and runs, if nobody holds the baton: the
        waker runs beside the turns, a thread dal did not start or one the
        watchdog let go). mu held."""
        t.woken = value
        e = t.entry
        if e is not None:
            e[3] = False
            t.entry = None
        self.runq.append(t)
        if self.current is None:
            self._handoff()

    def poke(self, t):
        """End t's pokeable wait (call_soon_threadsafe from another thread
        woke its event loop)."""
        with self.mu:
            if t.pokeable and t.woken is None and t is not self.current and t not in self.runq:
                t.pokeable = False
                self._wake(t, True)

    def block(self, me, deadline=None):
        """me waits until _wake (True) or its virtual deadline, an offset
        in ns (False). The caller holds mu; block releases it."""
        me.woken = None
        if deadline is not None:
            e = [deadline, self.timers.next_seq(), me, True]
            me.entry = e
            heappush(self.heap, e)
        if self.current is me:
            self.current = None
            self._handoff()
        self.mu.release()
        try:
            me.gate.acquire()
        except BaseException:  # a signal handler raised (KeyboardInterrupt)
            with self.mu:
                if me in self.runq:
                    self.runq.remove(me)
                if me.entry is not None:
                    me.entry[3] = False
                    me.entry = None
                if self.current is None:
                    self.current = me
                me.woken = False
            raise
        return me.woken

    # ------------------------------------------------------------ idle

    def _idle_loop(self):
        mu = self.mu
        seen, ticks = -1, 0
        while True:
            mu.acquire()
            wait = self._idle_step()
            io = wait is not None
            if wait is None and self.current is not None and self.live > 1:
                # the watchdog: others could run, the holder has not let them
                if not (self.runq or self.back or self._live_timer()):
                    seen = -1
                elif self.switches != seen:
                    seen, ticks = self.switches, 0
                elif ticks * TICK >= STUCK:
                    self._unstick()
                    seen = -1
                wait = TICK
            self.listening = True
            mu.release()
            got = self.bell.acquire(True, -1 if wait is None else wait)
            with mu:
                if not got:
                    if not self.listening:
                        self.bell.acquire()  # rung right after the timeout
                    elif io:
                        self.io_waited += wait
                    else:
                        ticks += 1
                self.listening = False

    def _unstick(self):
        """The baton holder ran STUCK seconds of wall time without a
        blocking point while others were runnable: a busy loop waiting for
        another thread, or a blocking call dal does not know. Never hang:
        the next thread runs beside it. mu held."""
        who, what = _describe(self.current)
        say_once("threads-stuck", "%s held the turn %d s while other threads waited for it%s: "
                 "threads now run beside it, so this process's thread order is no longer deterministic" % (who, STUCK, what))
        unserved("clock/thread order (a thread held the turn %d s)" % STUCK)
        self.current = None
        if not self.runq and self.back:
            self.back.sort(key=_seq)
            self.runq.extend(self.back)
            del self.back[:]
        if not self.runq and self._live_timer():
            self._fire(self.heap[0][0])
        self._handoff()

    def _live_timer(self):
        heap = self.heap
        while heap and not heap[0][3]:
            heappop(heap)
        return bool(heap)

    def _idle_step(self):
        """What to do when nobody holds the baton. Returns the wall seconds
        to wait for a thread to come back (None: until rung). mu held."""
        if self.current is not None:
            return None
        if self.runq or self.back:
            self.back.sort(key=_seq)
            self.runq.extend(self.back)
            del self.back[:]
            self._handoff()
            return None
        heap = self.heap
        while heap and not heap[0][3]:
            heappop(heap)
        if not heap:
            return None
        deadline = heap[0][0]
        if self.outside:
            left = (deadline - self.clock.t) * 1e-9 - self.io_waited
            if left > 0:
                return left
        self.io_waited = 0.0
        self._fire(deadline)
        self._handoff()
        return None

    def _fire(self, deadline):
        """Virtual time jumps to deadline; every timer due then fires, in
        (deadline, registration) order. mu held."""
        clock = self.clock
        n = int(deadline - clock.t)
        if n > 0:
            clock.advance(n)
        heap = self.heap
        while heap and heap[0][0] <= clock.t:
            e = heappop(heap)
            if e[3]:
                t = e[2]
                self.timers.fire(int(e[0]), e[1])
                t.entry = None
                e[3] = False
                t.woken = False
                self.runq.append(t)

    # ------------------------------------------------------------ real calls

    def leave(self, passive=False):
        """Before a real blocking call: give the baton away if another
        thread could use it. Returns what enter() takes back. A passive
        call (waiting for connections on listening sockets) is not
        outstanding I/O: time may jump while it waits."""
        me = self.by_ident.get(_get_ident())
        if me is None:
            return None
        with self.mu:
            if self.current is not me or (not self.runq and self.live <= 1 and not self.outside and not self.back):
                return None
            me.passive = passive
            if not passive:
                self.outside += 1
            self.current = None
            self._handoff()
        return me

    def enter(self, me):
        """After the real call: wait for the baton at the next idle point."""
        if me is None:
            return
        with self.mu:
            if not me.passive:
                self.outside -= 1
            me.passive = False
            if self.current is None and not self.runq and not self.back:
                # an idle point already, and nobody else came back: the
                # baton is ours without the idler's round
                self.current = me
                self.io_waited = 0.0
                self.switches += 1
                return
            self.back.append(me)
            if self.current is None:
                self._ring()
        me.gate.acquire()

    def call(self, fn, *args, _passive=False, **kwargs):
        """fn(*args, **kwargs), a real blocking call, with the baton away."""
        me = self.leave(_passive)
        try:
            return fn(*args, **kwargs)
        finally:
            self.enter(me)

    # ------------------------------------------------------------ sleeps

    def sleep(self, n):
        """time.sleep of n ns: False if this thread is alone (the clock
        just adds n), else the thread waits for its virtual deadline."""
        if self.live <= 1 and not self.outside and not self.back:
            return False
        me = self.me()
        self.mu.acquire()
        self.block(me, self.clock.t + n)
        return True

    # ------------------------------------------------------------ threads

    def started(self, thread):
        """threading.Thread.start: the new thread is runnable, after those
        already are."""
        with self.mu:
            t = self._new()
            self.live += 1
            self.runq.append(t)
            if not self.idler:
                # the watchdog: from the second thread on, a holder that
                # never gives the baton away is noticed
                self.idler = True
                _thread.start_new_thread(self._idle_loop, ())
        thread._dal_task = t
        return t

    def start_failed(self, t):
        with self.mu:
            if t in self.runq:
                self.runq.remove(t)
            self.live -= 1

    def begin(self, t):
        """First thing in the new thread: wait for the baton."""
        with self.mu:
            self._bind(t)
        t.gate.acquire()

    def end(self, t):
        """Last thing in a thread: wake its joiners, pass the baton on."""
        with self.mu:
            t.finished = True
            self.live -= 1
            self.by_ident.pop(_get_ident(), None)
            if self.current is t:
                self.current = None
            for j in t.joiners:
                self._wake(j, True)
            del t.joiners[:]
            if self.current is None:
                self._handoff()

    def join(self, t, timeout):
        """Wait for t to end, timeout (seconds, None: forever) virtual.
        Returns whether it ended."""
        me = self.me()
        self.mu.acquire()
        if t.finished:
            self.mu.release()
            return True
        t.joiners.append(me)
        deadline = None if timeout is None else self.clock.t + _ns(max(0.0, timeout))
        if self.block(me, deadline):
            return True
        with self.mu:
            if me in t.joiners:
                t.joiners.remove(me)
        return t.finished


def _seq(t):
    return t.seq


#: System call numbers a stuck thread is most likely blocked in, by machine.
_SYSCALLS = {
    "x86_64": {0: "read", 1: "write", 7: "poll", 19: "readv", 20: "writev", 23: "select", 34: "pause", 35: "nanosleep",
               42: "connect", 43: "accept", 45: "recvfrom", 47: "recvmsg", 61: "wait4", 202: "futex", 230: "clock_nanosleep",
               232: "epoll_wait", 247: "waitid", 270: "pselect6", 271: "ppoll", 281: "epoll_pwait", 288: "accept4"},
    "aarch64": {22: "epoll_pwait", 63: "read", 64: "write", 65: "readv", 66: "writev", 72: "pselect6", 73: "ppoll",
                95: "waitid", 98: "futex", 101: "nanosleep", 115: "clock_nanosleep", 202: "accept", 203: "connect",
                207: "recvfrom", 212: "recvmsg", 242: "accept4", 260: "wait4"},
}


def _describe(t):
    """Who a thread that holds the turn is (its name), and where its Python
    code is and what the kernel says it does (computing, or blocked in
    which system call), as ", at FILE:LINE (FUNCTION), ..."."""
    import sys
    import threading
    ident = t.ident if t is not None else None
    th = threading._active.get(ident) if ident is not None else None
    who = "thread %r" % th.name if th is not None else "a thread"
    where = ""
    frame = sys._current_frames().get(ident) if ident is not None else None
    if frame is not None:
        code = frame.f_code
        where = ", at %s:%d (%s)" % (code.co_filename, frame.f_lineno, code.co_name)
    doing = ""
    if t is not None and t.tid is not None:
        try:
            with open("/proc/self/task/%d/stat" % t.tid, "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0].decode()
            if state == "R":
                doing = ", computing without a blocking point (a busy loop?)"
            else:
                with open("/proc/self/task/%d/syscall" % t.tid, "rb") as f:
                    nr = f.read().split()[0].decode()
                import os
                name = _SYSCALLS.get(os.uname().machine, {}).get(int(nr)) if nr.isdigit() else None
                doing = ", blocked in the system call %s, which dal does not wrap" % (name or "number " + nr)
        except (OSError, ValueError, IndexError):
            pass
    return who, where + doing


def _ns(secs):
    """A timeout in whole ns, to the nearest: deadlines the stdlib computes
    as differences of float seconds are off by a fraction of a ns."""
    return int(round(secs * 1e9))


class DalLock:
    """threading.Lock on the scheduler: a contended acquire gives the baton
    away; its timeout is virtual. Ownership passes to the first waiter on
    release, so waiters get the lock in the order they asked."""

    __slots__ = ("_locked", "_waiters", "__weakref__")

    def __init__(self):
        self._locked = False
        self._waiters = deque()

    def acquire(self, blocking=True, timeout=-1):
        s = _sched
        s.mu.acquire()
        if not self._locked:
            self._locked = True
            s.mu.release()
            return True
        if not blocking:
            s.mu.release()
            if timeout != -1:
                raise ValueError("can't specify a timeout for a non-blocking call")
            return False
        if timeout < 0 and timeout != -1:
            s.mu.release()
            raise ValueError("timeout value must be a non-negative number")
        me = s.by_ident.get(_get_ident())
        if me is None:
            s.mu.release()
            me = s.me()
            s.mu.acquire()
            if not self._locked:
                self._locked = True
                s.mu.release()
                return True
        self._waiters.append(me)
        deadline = None if timeout == -1 else s.clock.t + _ns(timeout)
        try:
            ok = s.block(me, deadline)
        except BaseException:
            with s.mu:
                if me in self._waiters:
                    self._waiters.remove(me)
                elif me.woken:  # the lock was handed to us as we were interrupted
                    self._release_locked()
            raise
        if not ok:
            with s.mu:
                if me in self._waiters:
                    self._waiters.remove(me)
                else:  # handed over at the very deadline: ours after all
                    return True
        return ok

    def release(self):
        s = _sched
        with s.mu:
            if not self._locked:
                raise RuntimeError("release unlocked lock")
            self._release_locked()

    def _release_locked(self):
        if self._waiters:
            _sched._wake(self._waiters.popleft(), True)  # stays locked: the waiter owns it
        else:
            self._locked = False

    def locked(self):
        return self._locked

    def _at_fork_reinit(self):
        self._locked = False
        self._waiters = deque()

    acquire_lock = acquire
    release_lock = release
    locked_lock = locked
    __enter__ = acquire

    def __exit__(self, *exc):
        self.release()

    def __repr__(self):
        return "<%s dal._threads.DalLock object at %#x>" % ("locked" if self._locked else "unlocked", id(self))


_sched = None


def scheduler(clock, timers):
    """The process's scheduler, made once (the main thread holds the baton)."""
    global _sched
    if _sched is None:
        _sched = Scheduler(clock, timers)
        clock.threads = _sched
    return _sched


def after_fork_child():
    if _sched is not None:
        _sched.reset()


# --------------------------------------------------------------------------
# Patching the stdlib.

def patch_threading(th, clock):
    """Locks, RLocks, Conditions, Events, Semaphores, Barriers and Timers
    made from now on are on the scheduler; threads started by Thread.start
    take turns; join and the interpreter's exit wait virtually."""
    if getattr(th, "_dal_threads", False):
        return
    s = _sched
    peek = _peek(clock)
    th._allocate_lock = DalLock
    th.Lock = DalLock
    th._CRLock = None  # RLock() is then _PyRLock, built on _allocate_lock
    th._time = peek     # Condition.wait_for, Semaphore.acquire deadlines: virtual, not reads
    T = th.Thread
    o_start, o_join, o_boot = T.start, T.join, T._bootstrap_inner

    def start(self):
        t = s.started(self)
        try:
            return o_start(self)
        except BaseException:
            s.start_failed(t)
            raise

    def _bootstrap_inner(self):
        t = getattr(self, "_dal_task", None)
        if t is None:
            return o_boot(self)
        s.begin(t)
        try:
            o_boot(self)
        finally:
            s.end(t)

    def join(self, timeout=None):
        t = getattr(self, "_dal_task", None)
        if t is not None and not t.finished and self._started.is_set() and s.by_ident.get(_get_ident()) is not t:
            if not s.join(t, timeout):
                return
            timeout = None  # ended: what remains is the interpreter's teardown of the thread
        return o_join(self, timeout)

    for f, o in ((start, o_start), (join, o_join), (_bootstrap_inner, o_boot)):
        f.__doc__ = o.__doc__
        f.__name__ = o.__name__
        f.__qualname__ = o.__qualname__
    T.start, T.join, T._bootstrap_inner = start, join, _bootstrap_inner

    o_shutdown = th._shutdown

    def _shutdown():
        # The interpreter waits for non-daemon threads here on their C
        # locks, which the baton would never reach: run the threading
        # atexits (an executor's shutdown) and join them here first.
        if th._main_thread._is_stopped:
            return
        th._SHUTTING_DOWN = True
        calls = list(th._threading_atexits)
        del th._threading_atexits[:]
        for c in reversed(calls):
            c()
        while True:
            pending = [t for t in list(th._active.values()) if t is not th._main_thread and not t.daemon
                       and getattr(t, "_dal_task", None) is not None and not t._dal_task.finished]
            if not pending:
                break
            for t in pending:
                t.join()
        return o_shutdown()
    th._shutdown = _shutdown
    th._dal_threads = True


def patch_queue(q, clock):
    """queue.Queue's deadlines on the virtual clock (no reads); SimpleQueue
    is the pure-Python one, which waits on the scheduler (the C one would
    block the baton holder in C)."""
    q.time = _peek(clock)
    if hasattr(q, "_PySimpleQueue"):
        q.SimpleQueue = q._PySimpleQueue


def virtual_time_module(clock):
    """A stand-in `time` module whose monotonic clocks are the virtual
    clock's, without reads (concurrent.futures' deadlines)."""
    from ._clock import real_time_module
    m = real_time_module()
    m.monotonic = m.perf_counter = _peek(clock)
    return m


def _peek(clock):
    """Monotonic seconds on the virtual clock without a read (the stdlib's
    deadlines for waits, which are not the program's clock reads)."""
    return clock.mono_peek


def _call(fn, *args, _passive=False, **kwargs):
    """fn(*args, **kwargs), a real blocking call, with the baton away (if
    there is a scheduler: threading was imported)."""
    s = _sched
    if s is None:
        return fn(*args, **kwargs)
    return s.call(fn, *args, _passive=_passive, **kwargs)


def patch_socket(sock):
    """The blocking socket calls give the baton away while they wait (a
    non-blocking socket's never wait: they keep it)."""
    S = sock.socket
    if getattr(S, "_dal", False):
        return
    for name in ("accept", "connect", "recv", "recv_into", "recvfrom", "recvfrom_into", "recvmsg", "send", "sendall", "sendto"):
        o = getattr(S, name, None)
        if o is None:
            continue

        def wrap(self, *args, _o=o, _passive=name == "accept", _reads=name.startswith("recv"), _sends=name.startswith("send"), **kwargs):
            s = _sched
            if s is None or self.gettimeout() == 0.0:  # non-blocking: it never waits
                return _o(self, *args, **kwargs)
            if (s.live <= 1 and not s.outside and not s.back or _reads and _ready(self.fileno())
                    or _sends and _small(args) and _ready(self.fileno(), _POLLOUT)):
                return _o(self, *args, **kwargs)
            return s.call(_o, self, *args, _passive=_passive, **kwargs)
        wrap.__name__ = name
        wrap.__doc__ = o.__doc__
        setattr(S, name, wrap)
    S._dal = True


def patch_ssl(ssl):
    """A TLS socket reads and writes in C, not through the socket methods:
    its read (unless a record is buffered or data waits), write and
    handshake give the baton away while they wait."""
    S = ssl.SSLSocket
    if getattr(S, "_dal", False):
        return
    for name in ("read", "write", "do_handshake"):
        o = getattr(S, name)

        def wrap(self, *args, _o=o, _reads=name == "read", **kwargs):
            s = _sched
            if s is None or self.gettimeout() == 0.0 or s.live <= 1 and not s.outside and not s.back:
                return _o(self, *args, **kwargs)
            if _reads and (self._sslobj is None or self._sslobj.pending() or _ready(self.fileno())):
                return _o(self, *args, **kwargs)
            return s.call(_o, self, *args, **kwargs)
        wrap.__name__ = name
        wrap.__doc__ = o.__doc__
        setattr(S, name, wrap)
    S._dal = True


def patch_subprocess(sp, clock):
    """Popen.wait and communicate: a real wait (the child is outstanding
    I/O) with the baton away; a timeout that expires advances virtual time
    by the timeout."""
    P = sp.Popen
    if getattr(P.wait, "_dal", False):
        return
    call = _call
    o_wait, o_comm = P.wait, P.communicate

    def timed(fn, timeout):
        try:
            return fn()
        except sp.TimeoutExpired:
            if timeout is not None and timeout > 0:
                clock.advance(_ns(timeout))
            raise

    def wait(self, timeout=None):
        return timed(lambda: call(o_wait, self, timeout), timeout)

    def communicate(self, input=None, timeout=None):
        return timed(lambda: call(o_comm, self, input, timeout), timeout)

    for f, o in ((wait, o_wait), (communicate, o_comm)):
        f.__doc__ = o.__doc__
        f._dal = True
    P.wait, P.communicate = wait, communicate


# --------------------------------------------------------------------------
# Blocking calls below the stdlib's classes: the baton never waits in them.

def _may_block(fd):
    """Whether a read or write on fd can wait: a blocking pipe, socket,
    FIFO or terminal (regular files, directories and block devices never
    wait on another thread or process)."""
    try:
        mode = _fstat(fd).st_mode
    except (OSError, TypeError, ValueError, OverflowError):
        return False  # the real call says what is wrong
    if not (_S_ISFIFO(mode) or _S_ISSOCK(mode) or _S_ISCHR(mode)):
        return False
    try:
        return _get_blocking(fd)
    except OSError:
        return True


def _ready(fd, events=_POLLIN):
    """Whether fd is ready for events now (for reading: data, end of file
    or an error waiting): a read then returns at once and keeps the baton,
    saving two hand-offs."""
    try:
        p = _poll()
        p.register(fd, events)
        return bool(p.poll(0))
    except (OSError, ValueError, TypeError, OverflowError):
        return False


#: A send of at most this many bytes to a socket ready for writing keeps
#: the baton: the kernel takes it at once (a writable socket has at least
#: a third of its buffer free, never below 16 KiB on Linux's defaults).
SMALL_SEND = 4096


def _small(args):
    try:
        return len(memoryview(args[0])) <= SMALL_SEND
    except (IndexError, TypeError):
        return False


def patch_os(os_mod):
    """os.read/readv/write/writev on a blocking pipe, socket, FIFO or
    terminal, and os.wait/waitpid/wait3/wait4/waitid without WNOHANG,
    give the baton away while they wait (multiprocessing's connections and
    Process.join use them). While no other thread could run they are the
    real calls (one attribute test)."""
    if getattr(os_mod.read, "_dal", False):
        return
    nohang = getattr(os_mod, "WNOHANG", 1)

    def fd_call(o, reads):
        def f(fd, *args):
            s = _sched
            if s.live <= 1 and not s.outside and not s.back or not _may_block(fd) or reads and _ready(fd):
                return o(fd, *args)
            return s.call(o, fd, *args)
        return f

    def wait_call(o, at):
        def f(*args, **kwargs):
            s = _sched
            if s.live <= 1 and not s.outside and not s.back:
                return o(*args, **kwargs)
            opts = args[at] if len(args) > at else kwargs.get("options", 0)
            if isinstance(opts, int) and opts & nohang:
                return o(*args, **kwargs)
            return s.call(o, *args, **kwargs)
        return f

    wrapped = {}
    for name in ("read", "readv", "write", "writev"):
        o = getattr(os_mod, name, None)
        if o is not None:
            wrapped[name] = fd_call(o, name.startswith("read"))
    for name, at in (("wait", 99), ("waitpid", 1), ("wait3", 0), ("wait4", 1), ("waitid", 2)):
        o = getattr(os_mod, name, None)
        if o is not None:
            wrapped[name] = wait_call(o, at)
    for name, f in wrapped.items():
        o = getattr(os_mod, name)
        f.__name__ = f.__qualname__ = name
        f.__doc__ = o.__doc__
        f._dal = True
        setattr(os_mod, name, f)


def patch_select(sel, clock):
    """select.select with a timeout other than 0 gives the baton away (a
    real wait for I/O, outstanding); when it times out with nothing ready,
    virtual time advances by the timeout, as a selector's does."""
    o = sel.select
    if getattr(o, "_dal", False):
        return

    def select(rlist, wlist, xlist, timeout=None):
        if timeout is not None and timeout <= 0:
            return o(rlist, wlist, xlist, timeout)
        s = _sched
        if s is None or s.live <= 1 and not s.outside and not s.back:
            return o(rlist, wlist, xlist, timeout)
        r = s.call(o, rlist, wlist, xlist, timeout)
        if timeout is not None and not (r[0] or r[1] or r[2]):
            clock.advance(_ns(timeout))
        return r
    select.__doc__ = o.__doc__
    select._dal = True
    sel.select = select


def patch_mp_synchronize(ms, clock):
    """multiprocessing's locks, semaphores, conditions and events wait on
    semaphores shared with other processes, in C: a contended acquire
    gives the baton away while it waits (real time: the holder is another
    process); one that times out advances virtual time by the timeout."""
    SL = ms.SemLock
    if getattr(SL, "_dal", False):
        return
    o_make = SL._make_methods

    def _make_methods(self):
        o_make(self)
        acq = self._semlock.acquire

        def acquire(block=True, timeout=None):
            if not block:
                return acq(False)
            if acq(False):
                return True  # not contended: the baton stays
            s = _sched
            if s is None:
                return acq(True, timeout)
            got = s.call(acq, True, timeout)
            if not got and timeout is not None and timeout > 0:
                clock.advance(_ns(timeout))
            return got
        acquire.__doc__ = acq.__doc__
        self.acquire = acquire

    def __enter__(self):
        return self.acquire()
    SL._make_methods = _make_methods
    SL.__enter__ = __enter__
    SL._dal = True


def _listening_only(selector):
    """Whether every file a selector waits on is a listening socket."""
    import _socket
    try:
        keys = list(selector.get_map().values())
    except Exception:
        return False
    if not keys:
        return False
    for key in keys:
        try:
            s = _socket.socket(fileno=key.fd)
        except (OSError, ValueError, TypeError):
            return False
        try:
            if not s.getsockopt(_socket.SOL_SOCKET, getattr(_socket, "SO_ACCEPTCONN", 30)):
                return False
        except OSError:
            return False
        finally:
            s.detach()
    return True


def patch_selectors(sel, clock):
    """A selector's select(timeout) is a real wait for I/O (outstanding,
    with the baton away); when it times out with nothing ready, virtual
    time advances by the timeout. Waiting on listening sockets only (a
    server's poll loop) is passive: not outstanding, and its timeout moves
    no virtual time. asyncio's loops use the real method
    (_dal_real_select): their idle rule advances time itself."""
    for cls in (getattr(sel, n, None) for n in ("SelectSelector", "PollSelector", "EpollSelector", "DevpollSelector", "KqueueSelector")):
        if cls is None or "_dal_real_select" in cls.__dict__:
            continue
        o = cls.select

        def select(self, timeout=None, _o=o):
            if timeout is not None and timeout <= 0:
                return _o(self, timeout)
            passive = _listening_only(self)
            ready = _call(_o, self, timeout, _passive=passive)
            if not ready and timeout is not None and not passive:
                clock.advance(_ns(timeout))
            return ready
        select.__doc__ = o.__doc__
        cls._dal_real_select = o
        cls.select = select

