"""Randomness on dal's streams (the manual is dal._runtime's docstring,
"Randomness").

Every source (``os.urandom``, ``python.random``, ``python.random.instance``,
``python.uuid1``) is a byte stream of its own: seedrng bytes under the label
``<stream>/<source>`` (strict, seeded), real bytes logged with
``draws.put`` (logged) or the logged bytes served back with ``draws.fetch``
(replay of a logged session).
"""

import os
import sys
import _thread
from _operator import index as _index

_o_urandom = os.urandom
_o_getrandom = getattr(os, "getrandom", None)


class _SeedSource:
    __slots__ = ("stream",)

    def __init__(self, seed, label):
        from . import _seedrng  # on the first draw: start-up does not pay for sha3
        self.stream = _seedrng.derive(seed, label)

    def read(self, n):
        return self.stream.read(n)

    @property
    def drawn(self):
        return self.stream.drawn


class _LoggedSource:
    """logged mode: real bytes, every draw sent with draws.put."""
    __slots__ = ("session", "source", "buf", "drawn")
    FLUSH = 1 << 16

    def __init__(self, session, source):
        self.session = session
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
        conn = self.session.conn
        if not self.buf or conn is None:
            return
        if not conn.lock.acquire(blocking):
            return
        try:
            data = bytes(self.buf)
            del self.buf[:]
            self.session.op({"op": "draws.put", "label": self.source, "data": data}, nowait=True)
        finally:
            conn.lock.release()


class _FetchSource:
    """replay of a logged session: draws served from draws.fetch."""
    __slots__ = ("session", "source", "buf", "pos", "off", "end", "fallback", "drawn")

    def __init__(self, session, source):
        self.session = session
        self.source = source
        self.buf = b""
        self.pos = 0
        self.off = 0
        self.end = False
        self.fallback = None
        self.drawn = 0

    def read(self, n):
        op = self.session.op
        self.drawn += n
        out = bytearray()
        while len(out) < n:
            if self.pos >= len(self.buf):
                if self.fallback is not None:
                    out += self.fallback.read(n - len(out))
                    break
                if not self.end:
                    r = op({"op": "draws.fetch", "label": self.source, "from": self.off, "max": max(n - len(out), 1 << 16)})
                    data = (r or {}).get("data") or b""
                    self.buf, self.pos = bytes(data), 0
                    self.off += len(data)
                    self.end = r is None or bool(r.get("end", not data)) or not data
                    if data:
                        continue
                op({"op": "drift", "what": "random", "detail": "%s: draw of %d bytes past the %d recorded bytes" % (self.source, n, self.off)})
                from . import _seedrng
                self.fallback = _seedrng.derive(self.session.seed, self.session.stream + "/" + self.source)
                continue
            take = self.buf[self.pos:self.pos + n - len(out)]
            self.pos += len(take)
            out += take
        return bytes(out)


class Draws:
    """This process's random sources by name, made on first use for the
    session's mode and stream. The patched functions (os.urandom,
    os.getrandom, random._urandom) are its bound methods."""

    __slots__ = ("session", "sources", "lock", "uuid_node")

    def __init__(self, session):
        self.session = session
        self.reset()

    def __repr__(self):
        return "<dal randomness>"

    def reset(self):
        """A new stream (a forked child): every source starts again."""
        self.sources = {}
        self.lock = _thread.allocate_lock()
        self.uuid_node = None

    def source(self, name):
        """The source called name; the caller holds self.lock."""
        s = self.sources.get(name)
        if s is None:
            session = self.session
            if session.mode == "logged":
                s = _FetchSource(session, name) if session.replay else _LoggedSource(session, name)
            else:
                s = _SeedSource(session.seed, session.stream + "/" + name)
            self.sources[name] = s
        return s

    def draw(self, name, n):
        with self.lock:
            return self.source(name).read(n)

    def drawn(self):
        """Bytes drawn so far, by source (the report's draws)."""
        return {k: int(v.drawn) for k, v in sorted(self.sources.items())}

    def flush(self):
        """Send what logged sources hold (at exit)."""
        for s in list(self.sources.values()):
            if isinstance(s, _LoggedSource):
                s.flush(True)

    def urandom(self, size):
        n = _index(size)
        if n < 0:
            raise ValueError("negative argument not allowed")
        return self.draw("os.urandom", n)

    def getrandom(self, size, flags=0):
        n = _index(size)
        if n < 0:
            raise ValueError("negative argument not allowed")
        return self.draw("os.urandom", n)

    def seed_int(self, name):
        return int.from_bytes(self.draw(name, 32), "big")

    def patch_os(self):
        os.urandom = self.urandom
        if _o_getrandom is not None:
            os.getrandom = self.getrandom

    def patch_random(self, rnd):
        R = rnd.Random
        if not getattr(R.seed, "_dal", False):
            orig_seed = R.seed
            seed_int = self.seed_int

            def seed(self, a=None, version=2):
                if a is None:
                    if getattr(self, "_dal_retired", False):
                        # a replaced module generator: random's own at-fork hook
                        # reseeds it; it must not consume our streams
                        a = 0
                    else:
                        a = seed_int("python.random.instance")
                return orig_seed(self, a, version)
            seed.__doc__ = orig_seed.__doc__
            seed._dal = True
            seed._dal_orig = orig_seed
            R.seed = seed
        self.reseed_random_module(rnd)
        rnd._urandom = self.urandom

    def reseed_random_module(self, rnd):
        """Rebind the module functions to a fresh generator seeded from
        <stream>/python.random (a new instance: random's own at-fork reseed of
        the old one then touches nothing of ours)."""
        old = rnd._inst
        try:
            old._dal_retired = True
        except AttributeError:
            pass
        inst = rnd.Random(self.seed_int("python.random"))
        for name in dir(rnd):
            v = getattr(rnd, name, None)
            if getattr(v, "__self__", None) is old and callable(v):
                setattr(rnd, name, getattr(inst, name))
        rnd._inst = inst

    def reseed_after_fork(self):
        rnd = sys.modules.get("random")
        if rnd is not None and getattr(rnd.Random.seed, "_dal", False):
            self.reseed_random_module(rnd)

    def patch_uuid(self, u):
        if getattr(u.uuid1, "_dal", False):
            return
        u._generate_time_safe = None
        orig_uuid1 = u.uuid1
        draws = self

        def getnode():
            with draws.lock:
                if draws.uuid_node is None:
                    draws.uuid_node = int.from_bytes(draws.source("python.uuid1").read(6), "big") | 0x010000000000
                return draws.uuid_node

        def uuid1(node=None, clock_seq=None):
            if node is None:
                node = getnode()
            if clock_seq is None:
                clock_seq = int.from_bytes(draws.draw("python.uuid1", 2), "big") & 0x3FFF
            return orig_uuid1(node, clock_seq)
        uuid1.__doc__ = orig_uuid1.__doc__
        uuid1._dal = True
        getnode.__doc__ = u.getnode.__doc__
        u.getnode = getnode
        u.uuid1 = uuid1
        u._node = None


for _name, _like in (("urandom", _o_urandom), ("getrandom", _o_getrandom)):
    if _like is not None:
        Draws.__dict__[_name].__qualname__ = _name
        Draws.__dict__[_name].__doc__ = _like.__doc__
del _name, _like
