"""asyncio on dal's clock: DalEventLoop and its idle rule (the manual is
dal._runtime's docstring, "asyncio on virtual time"). Imported when asyncio
is, not before."""

import _socket

from ._say import say_once, unserved


def patch(aio, clock, timers, strict):
    """Make dal's loops asyncio's default (strict or replay); clock is the
    session's clock, timers the log of fired timers (kept in strict mode)."""
    if getattr(aio, "_dal_patched", False):
        return
    import heapq
    import weakref
    from asyncio import events, unix_events, selector_events

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
            if strict:
                timers.fire(int(round((self._when - clock.mono_s) * 1e9)), self._dal_seq)
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
            # the selector's own select: dal._threads' patched one would
            # advance the clock as well
            real = getattr(type(sel), "_dal_real_select", None) or type(sel).select
            s = _threads_sched()
            if timeout is None or timeout <= 0:
                if timeout is None and s is not None:
                    loop = self._loop()
                    if loop is not None and not loop._dal_outstanding(threads=True):
                        # only other threads can wake the loop: wait for
                        # them on the scheduler, not as outstanding I/O
                        ev = real(sel, 0)
                        return ev if ev else _idle_with_threads(s, loop, sel, real, None)
                    return s.call(real, sel, None)
                return real(sel, timeout)
            ev = real(sel, 0)
            if ev:
                return ev
            loop = self._loop()
            if s is not None and loop is not None:
                return _idle_with_threads(s, loop, sel, real, timeout)
            if loop is not None and loop._dal_outstanding():
                ev = real(sel, timeout)
                if ev:
                    return ev
            clock.advance(_idle_ns(loop, timeout))
            return []

    def _idle_with_threads(s, loop, sel, real, timeout):
        """The idle rule beside other threads (dal._threads): real I/O is
        waited for with the baton away; then the loop waits for its next
        deadline (timeout None: for ever) on the scheduler, which other
        threads' timers share, and call_soon_threadsafe from another thread
        ends the wait."""
        if timeout is not None and loop._dal_outstanding(threads=True):
            ev = s.call(real, sel, timeout)
            if ev:
                return ev
        me = s.me()
        loop._dal_task = me
        me.pokeable = True
        s.mu.acquire()
        try:
            s.block(me, None if timeout is None else clock.t + _idle_ns(loop, timeout))
        finally:
            me.pokeable = False
            loop._dal_task = None
        return real(sel, 0)

    def _idle_ns(loop, timeout):
        """How far an idle loop jumps: exactly to the earliest deadline
        (strict; ns-exact, so timer offsets stay round), else timeout."""
        d = timeout * 1e9
        n = int(d)
        if n < d:
            n += 1
        if strict and loop is not None and loop._scheduled:
            when = loop._scheduled[0]._when
            m = int(round((when - clock.mono_s) * 1e9 - clock.t))
            if 0 < m <= n + 1000:
                while clock.mono_s + (clock.t + m) * 1e-9 < when:
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
            self._dal_task = None       # the thread's dal._threads task while the loop waits idle

        if strict:
            def time(self, _peek=clock.mono_peek):
                return _peek()

        def call_at(self, when, callback, *args, context=None):
            if when is None:
                raise TypeError("when cannot be None")
            self._check_closed()
            if self._debug:
                self._check_thread()
                self._check_callback(callback, "call_at")
            timer = _DalTimerHandle(when, callback, args, self, context)
            timer._dal_seq = timers.next_seq()
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

        def _write_to_self(self):
            super()._write_to_self()
            t = self._dal_task
            if t is not None:
                s = _threads_sched()
                if s is not None:
                    s.poke(t)

        def _dal_outstanding(self, threads=False):
            # with dal._threads, executor threads take turns with the loop:
            # their futures are not real I/O
            if not threads and (self._dal_pending or self._dal_busy):
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

    # documented (and reported) as dal._runtime's
    DalEventLoop.__module__ = DalEventLoopPolicy.__module__ = "dal._runtime"

    orig_set_policy = events.set_event_loop_policy

    def set_event_loop_policy(policy):
        if policy is not None and not isinstance(policy, DalEventLoopPolicy):
            unserved("clock/asyncio policy %s.%s" % (type(policy).__module__, type(policy).__qualname__))
            say_once("policy", "asyncio event loop policy %s.%s is not dal's: its loops read the real clock and their timers wait in real time" % (type(policy).__module__, type(policy).__qualname__))
        return orig_set_policy(policy)
    set_event_loop_policy.__doc__ = orig_set_policy.__doc__

    orig_set_running = events._set_running_loop

    def _set_running_loop(loop):
        if loop is not None and not isinstance(loop, DalEventLoop):
            unserved("clock/asyncio loop %s.%s" % (type(loop).__module__, type(loop).__qualname__))
            say_once("loop", "asyncio loop %s.%s is not dal's: it reads the real clock and its timers wait in real time" % (type(loop).__module__, type(loop).__qualname__))
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


def _threads_sched():
    """dal._threads' scheduler when other threads may run, else None."""
    import sys
    t = sys.modules.get("dal._threads")
    s = t._sched if t is not None else None
    return None if s is None or s.alone() else s


def note_uvloop(mod):
    unserved("clock/uvloop")
    say_once("uvloop", "uvloop imported: its loops read libuv's clock in C and are not virtualized; run without uvloop for virtual asyncio time")
