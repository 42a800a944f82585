"""msgpack codec and frame format of the dald protocol (docs/protocol.md).

Standard library only. The encoder writes the smallest encoding of every
value; the decoder accepts every msgpack encoding (all int widths, float32
and float64, str/bin/array/map 8/16/32, ext as :class:`Ext`).

A frame is ``u32 big-endian length || msgpack body``; the body of every dald
message is a map with string keys. :class:`Conn` is a synchronous client of
dald over a Unix socket.
"""

import _socket
import _thread
import sys as _sys
from _struct import Struct

__all__ = ["Ext", "Raw", "U64Array", "u64_array_le", "WireError", "packb", "unpackb", "frame", "MAX_FRAME", "Conn", "DaldError"]

MAX_FRAME = 4 << 20  # 4 MiB, dald's default maximum

_u8 = Struct(">B")
_u16 = Struct(">H")
_u32 = Struct(">I")
_u64 = Struct(">Q")
_i8 = Struct(">b")
_i16 = Struct(">h")
_i32 = Struct(">i")
_i64 = Struct(">q")
_f32 = Struct(">f")
_f64 = Struct(">d")


class WireError(ValueError):
    """A malformed or unsupported msgpack value or frame."""


class Raw(bytes):
    """Pre-encoded msgpack, written verbatim by packb."""

    __slots__ = ()


class U64Array(list):
    """A list of ints in [0, 2**64), every element encoded as uint64 (0xcf)
    with C loops only: tick batches are thousands of them. Decoders accept
    any int width, so the wider encoding is still valid msgpack."""

    __slots__ = ()


def u64_array_le(le):
    """The msgpack array of the little-endian uint64s in le (bytes-like,
    a multiple of 8 long), as Raw: each element 0xcf || 8 bytes big-endian."""
    n = len(le) // 8
    if n < 16:
        head = bytes((0x90 | n,))
    elif n <= 0xFFFF:
        head = b"\xdc" + _u16.pack(n)
    else:
        head = b"\xdd" + _u32.pack(n)
    out = bytearray(9 * n)
    out[0::9] = b"\xcf" * n
    for j in range(8):
        out[1 + j::9] = le[7 - j::8]
    return Raw(head + out)


def _pack_u64_array(obj, out):
    from array import array  # here, not at start-up: only tick batches need it
    a = array("Q", obj)  # OverflowError for an element outside [0, 2**64)
    if _sys.byteorder == "big":
        a.byteswap()
    out += u64_array_le(a.tobytes())


class Ext(tuple):
    """An msgpack extension value: (type code, data bytes)."""

    __slots__ = ()

    def __new__(cls, code, data):
        return tuple.__new__(cls, (code, bytes(data)))

    code = property(lambda self: self[0])
    data = property(lambda self: self[1])


def _pack(obj, out):
    t = type(obj)
    if obj is None:
        out += b"\xc0"
    elif obj is True:
        out += b"\xc3"
    elif obj is False:
        out += b"\xc2"
    elif t is int or (isinstance(obj, int) and not isinstance(obj, bool)):
        obj = int(obj)
        if obj >= 0:
            if obj < 0x80:
                out.append(obj)
            elif obj <= 0xFF:
                out += b"\xcc" + _u8.pack(obj)
            elif obj <= 0xFFFF:
                out += b"\xcd" + _u16.pack(obj)
            elif obj <= 0xFFFFFFFF:
                out += b"\xce" + _u32.pack(obj)
            elif obj <= 0xFFFFFFFFFFFFFFFF:
                out += b"\xcf" + _u64.pack(obj)
            else:
                raise WireError("integer %d does not fit in 64 bits" % obj)
        else:
            if obj >= -32:
                out.append(obj & 0xFF)
            elif obj >= -0x80:
                out += b"\xd0" + _i8.pack(obj)
            elif obj >= -0x8000:
                out += b"\xd1" + _i16.pack(obj)
            elif obj >= -0x80000000:
                out += b"\xd2" + _i32.pack(obj)
            elif obj >= -0x8000000000000000:
                out += b"\xd3" + _i64.pack(obj)
            else:
                raise WireError("integer %d does not fit in 64 bits" % obj)
    elif t is float or isinstance(obj, float):
        out += b"\xcb" + _f64.pack(obj)
    elif t is Raw:
        out += obj
    elif t is str or isinstance(obj, str):
        b = obj.encode("utf-8", "surrogatepass")
        n = len(b)
        if n < 32:
            out.append(0xA0 | n)
        elif n <= 0xFF:
            out += b"\xd9" + _u8.pack(n)
        elif n <= 0xFFFF:
            out += b"\xda" + _u16.pack(n)
        else:
            out += b"\xdb" + _u32.pack(n)
        out += b
    elif isinstance(obj, (bytes, bytearray, memoryview)):
        b = bytes(obj)
        n = len(b)
        if n <= 0xFF:
            out += b"\xc4" + _u8.pack(n)
        elif n <= 0xFFFF:
            out += b"\xc5" + _u16.pack(n)
        else:
            out += b"\xc6" + _u32.pack(n)
        out += b
    elif isinstance(obj, Ext):
        code, data = obj
        n = len(data)
        fixed = {1: 0xD4, 2: 0xD5, 4: 0xD6, 8: 0xD7, 16: 0xD8}
        if n in fixed:
            out.append(fixed[n])
        elif n <= 0xFF:
            out += b"\xc7" + _u8.pack(n)
        elif n <= 0xFFFF:
            out += b"\xc8" + _u16.pack(n)
        else:
            out += b"\xc9" + _u32.pack(n)
        out += _i8.pack(code)
        out += data
    elif type(obj) is U64Array:
        try:
            _pack_u64_array(obj, out)
        except Exception:  # an element out of range: the general encoder says which
            _pack(list(obj), out)
    elif isinstance(obj, (list, tuple)):
        n = len(obj)
        if n < 16:
            out.append(0x90 | n)
        elif n <= 0xFFFF:
            out += b"\xdc" + _u16.pack(n)
        else:
            out += b"\xdd" + _u32.pack(n)
        for v in obj:
            _pack(v, out)
    elif isinstance(obj, dict):
        n = len(obj)
        if n < 16:
            out.append(0x80 | n)
        elif n <= 0xFFFF:
            out += b"\xde" + _u16.pack(n)
        else:
            out += b"\xdf" + _u32.pack(n)
        for k, v in obj.items():
            _pack(k, out)
            _pack(v, out)
    else:
        raise WireError("cannot encode %s in msgpack" % type(obj).__name__)


def packb(obj):
    """Encode obj as msgpack bytes."""
    out = bytearray()
    _pack(obj, out)
    return bytes(out)


class _Reader:
    __slots__ = ("b", "i")

    def __init__(self, b):
        self.b = b
        self.i = 0

    def take(self, n):
        i = self.i
        j = i + n
        if j > len(self.b):
            raise WireError("msgpack value truncated at byte %d" % i)
        self.i = j
        return self.b[i:j]

    def unpack(self, st):
        i = self.i
        j = i + st.size
        if j > len(self.b):
            raise WireError("msgpack value truncated at byte %d" % i)
        self.i = j
        return st.unpack_from(self.b, i)[0]


def _unpack(r, depth=0):
    if depth > 512:
        raise WireError("msgpack value nested too deeply")
    if r.i >= len(r.b):
        raise WireError("msgpack value truncated at byte %d" % r.i)
    c = r.b[r.i]
    r.i += 1
    if c <= 0x7F:
        return c
    if c >= 0xE0:
        return c - 0x100
    if 0xA0 <= c <= 0xBF:
        return _str(r.take(c & 0x1F))
    if 0x90 <= c <= 0x9F:
        return [_unpack(r, depth + 1) for _ in range(c & 0x0F)]
    if 0x80 <= c <= 0x8F:
        return _map(r, c & 0x0F, depth)
    if c == 0xC0:
        return None
    if c == 0xC2:
        return False
    if c == 0xC3:
        return True
    if c == 0xCC:
        return r.unpack(_u8)
    if c == 0xCD:
        return r.unpack(_u16)
    if c == 0xCE:
        return r.unpack(_u32)
    if c == 0xCF:
        return r.unpack(_u64)
    if c == 0xD0:
        return r.unpack(_i8)
    if c == 0xD1:
        return r.unpack(_i16)
    if c == 0xD2:
        return r.unpack(_i32)
    if c == 0xD3:
        return r.unpack(_i64)
    if c == 0xCA:
        return r.unpack(_f32)
    if c == 0xCB:
        return r.unpack(_f64)
    if c == 0xD9:
        return _str(r.take(r.unpack(_u8)))
    if c == 0xDA:
        return _str(r.take(r.unpack(_u16)))
    if c == 0xDB:
        return _str(r.take(r.unpack(_u32)))
    if c == 0xC4:
        return bytes(r.take(r.unpack(_u8)))
    if c == 0xC5:
        return bytes(r.take(r.unpack(_u16)))
    if c == 0xC6:
        return bytes(r.take(r.unpack(_u32)))
    if c == 0xDC:
        return [_unpack(r, depth + 1) for _ in range(r.unpack(_u16))]
    if c == 0xDD:
        n = r.unpack(_u32)
        if n > len(r.b) - r.i:
            raise WireError("msgpack array of %d elements exceeds the frame" % n)
        return [_unpack(r, depth + 1) for _ in range(n)]
    if c == 0xDE:
        return _map(r, r.unpack(_u16), depth)
    if c == 0xDF:
        n = r.unpack(_u32)
        if n > len(r.b) - r.i:
            raise WireError("msgpack map of %d entries exceeds the frame" % n)
        return _map(r, n, depth)
    fixext = {0xD4: 1, 0xD5: 2, 0xD6: 4, 0xD7: 8, 0xD8: 16}
    if c in fixext:
        code = r.unpack(_i8)
        return Ext(code, r.take(fixext[c]))
    if c in (0xC7, 0xC8, 0xC9):
        n = r.unpack({0xC7: _u8, 0xC8: _u16, 0xC9: _u32}[c])
        code = r.unpack(_i8)
        return Ext(code, r.take(n))
    raise WireError("byte 0x%02x at %d is not a msgpack type" % (c, r.i - 1))


def _str(b):
    try:
        return bytes(b).decode("utf-8")
    except UnicodeDecodeError as e:
        raise WireError("msgpack str is not UTF-8: %s" % e) from None


def _map(r, n, depth):
    d = {}
    for _ in range(n):
        k = _unpack(r, depth + 1)
        if isinstance(k, list):
            k = tuple(k)
        try:
            d[k] = _unpack(r, depth + 1)
        except TypeError:
            raise WireError("msgpack map key of type %s is not hashable" % type(k).__name__) from None
    return d


def unpackb(b):
    """Decode exactly one msgpack value from b (bytes-like)."""
    r = _Reader(memoryview(b).cast("B") if not isinstance(b, bytes) else b)
    v = _unpack(r)
    if r.i != len(r.b):
        raise WireError("%d trailing bytes after the msgpack value" % (len(r.b) - r.i))
    return v


def frame(msg):
    """Encode msg (a dict) as one frame: u32 BE length || msgpack."""
    body = packb(msg)
    if not 1 <= len(body) <= MAX_FRAME:
        raise WireError("frame of %d bytes exceeds the %d byte maximum" % (len(body), MAX_FRAME))
    return _u32.pack(len(body)) + body


def frame_length(header):
    """Length of the body announced by a 4-byte frame header."""
    n = _u32.unpack(header)[0]
    if not 1 <= n <= MAX_FRAME:
        raise WireError("frame length %d is outside 1..%d" % (n, MAX_FRAME))
    return n


# --------------------------------------------------------------------------
# Connection to dald.

class DaldError(Exception):
    pass


class Conn:
    """A synchronous client. Requests that need no answer (ticks.put,
    draws.put) are pipelined: sent without waiting, their replies read (and
    checked) before the next request that waits, or when 16 are pending, so
    a tick batch costs an encode and a send, not a round trip.

    on_reply() is called for every reply read; on_refused(op, reply) for a
    pipelined request dald refused (the caller of a waited-for request sees
    its reply itself)."""

    MAX_PENDING = 16

    def __init__(self, path, on_reply, on_refused, timeout=60.0):
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
        self.on_reply = on_reply
        self.on_refused = on_refused

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
        try:
            n = frame_length(self._recv_exact(4))
            reply = unpackb(self._recv_exact(n))
        except BaseException as e:
            # A half-read reply desynchronises the stream: stop using it.
            self.broken = "connection to dald lost during %r (%s: %s)" % (op, type(e).__name__, e)
            raise
        self.on_reply()
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
            self.sock.sendall(frame(msg))
        except BaseException as e:
            self.broken = "connection to dald lost during %r (%s: %s)" % (msg.get("op"), type(e).__name__, e)
            raise
        return self.next_id

    def drain_locked(self):
        """Read the replies of pipelined requests."""
        while self.pending:
            rid, op = self.pending.pop(0)
            reply = self._read_reply(rid, op)
            if not reply.get("ok"):
                self.on_refused(op, reply)

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
                self.on_refused(op, reply)

    def call(self, msg):
        with self.lock:
            return self.call_locked(msg)

    def close(self):
        try:
            self.sock.close()
        except Exception:
            pass
