"""Seeded byte streams, byte for byte as specified by the Go package seedrng.

    block(i) = SHAKE256("dal.seedrng.v1" || 0x00 || u64be(seed) || u64be(i) || utf8(label), 4096 bytes)
    stream   = block(0) || block(1) || ...
    Uint64   = next 8 bytes, big-endian
    Float64  = (Uint64 >> 11) * 2**-53

Vectors: testdata/seedrng.json (tests/test_seedrng.py checks them).
"""

try:  # the builtin module avoids importing hashlib (and OpenSSL) at startup
    from _sha3 import shake_256 as _shake_256
except ImportError:  # pragma: no cover - every CPython 3.6+ build has _sha3
    from hashlib import shake_256 as _shake_256

BLOCK_SIZE = 4096
_DOMAIN = b"dal.seedrng.v1\x00"
_MASK64 = (1 << 64) - 1


def block(seed, label, i):
    """Block i of stream (seed, label)."""
    if isinstance(label, str):
        label = label.encode("utf-8")
    h = _shake_256(_DOMAIN + (seed & _MASK64).to_bytes(8, "big") + (i & _MASK64).to_bytes(8, "big") + label)
    return h.digest(BLOCK_SIZE)


class Stream:
    """Reader over the bytes of stream (seed, label). Not thread-safe on its
    own; the runtime serialises access."""

    __slots__ = ("seed", "label", "_lb", "_next", "_buf", "_pos", "drawn")

    def __init__(self, seed, label):
        self.seed = seed & _MASK64
        self.label = label
        self._lb = label.encode("utf-8")
        self._next = 0
        self._buf = b""
        self._pos = 0
        self.drawn = 0

    def read(self, n):
        """The next n bytes of the stream."""
        if n < 0:
            raise ValueError("negative read length")
        self.drawn += n
        buf, pos = self._buf, self._pos
        avail = len(buf) - pos
        if n <= avail:
            self._pos = pos + n
            return buf[pos:pos + n]
        parts = [buf[pos:]]
        need = n - avail
        seed8 = self.seed.to_bytes(8, "big")
        while need > 0:
            blk = _shake_256(_DOMAIN + seed8 + self._next.to_bytes(8, "big") + self._lb).digest(BLOCK_SIZE)
            self._next += 1
            if need >= BLOCK_SIZE:
                parts.append(blk)
                need -= BLOCK_SIZE
                self._buf, self._pos = b"", 0
            else:
                parts.append(blk[:need])
                self._buf, self._pos = blk, need
                need = 0
        return b"".join(parts)

    def uint64(self):
        return int.from_bytes(self.read(8), "big")

    def float64(self):
        return (self.uint64() >> 11) * (1.0 / (1 << 53))


def derive(seed, label):
    """Stream (seed, label), positioned at its first byte."""
    return Stream(seed, label)
