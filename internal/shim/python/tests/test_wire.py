"""dal._wire: msgpack round trips, every encoding, frames."""

import math
import struct
import sys
import unittest

import os as _os
import sys as _sys
_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))  # _common, also under -t

import _common  # noqa: F401  (puts the shim on sys.path)
from dal import _wire
from dal._wire import Ext, WireError, frame, frame_length, packb, unpackb


class IntWidths(unittest.TestCase):
    CASES = [
        # value, expected first byte, encoded length
        (0, 0x00, 1), (127, 0x7F, 1),
        (128, 0xCC, 2), (255, 0xCC, 2),
        (256, 0xCD, 3), (65535, 0xCD, 3),
        (65536, 0xCE, 5), (2**32 - 1, 0xCE, 5),
        (2**32, 0xCF, 9), (2**64 - 1, 0xCF, 9),
        (-1, 0xFF, 1), (-32, 0xE0, 1),
        (-33, 0xD0, 2), (-128, 0xD0, 2),
        (-129, 0xD1, 3), (-32768, 0xD1, 3),
        (-32769, 0xD2, 5), (-2**31, 0xD2, 5),
        (-2**31 - 1, 0xD3, 9), (-2**63, 0xD3, 9),
    ]

    def test_smallest_encoding_and_round_trip(self):
        for v, first, n in self.CASES:
            with self.subTest(v=v):
                b = packb(v)
                self.assertEqual(b[0], first)
                self.assertEqual(len(b), n)
                self.assertEqual(unpackb(b), v)

    def test_decoder_accepts_every_width(self):
        # A peer may use a wider encoding than needed (Go's msgpack does for
        # typed fields): every int encoding of 1 must decode to 1.
        encodings = [b"\x01", b"\xcc\x01", b"\xcd\x00\x01", b"\xce\x00\x00\x00\x01",
                     b"\xcf" + (1).to_bytes(8, "big"), b"\xd0\x01", b"\xd1\x00\x01",
                     b"\xd2\x00\x00\x00\x01", b"\xd3" + (1).to_bytes(8, "big")]
        for e in encodings:
            with self.subTest(e=e.hex()):
                self.assertEqual(unpackb(e), 1)
        self.assertEqual(unpackb(b"\xd3" + (-5).to_bytes(8, "big", signed=True)), -5)
        self.assertEqual(unpackb(b"\xcf" + (2**64 - 1).to_bytes(8, "big")), 2**64 - 1)

    def test_out_of_range(self):
        with self.assertRaises(WireError):
            packb(2**64)
        with self.assertRaises(WireError):
            packb(-2**63 - 1)


class Values(unittest.TestCase):
    def round_trip(self, v):
        self.assertEqual(unpackb(packb(v)), v)

    def test_scalars(self):
        for v in (None, True, False, 0.0, -1.5, 1e300, math.inf, "", "héllo π", b"", b"\x00\xff"):
            with self.subTest(v=v):
                self.round_trip(v)
        self.assertIs(unpackb(packb(True)), True)
        self.assertTrue(math.isnan(unpackb(packb(math.nan))))

    def test_float64_and_float32(self):
        self.assertEqual(packb(1.5), b"\xcb" + struct.pack(">d", 1.5))
        self.assertEqual(unpackb(b"\xca" + struct.pack(">f", 0.25)), 0.25)

    def test_str_widths(self):
        for n, first in ((0, 0xA0), (31, 0xBF), (32, 0xD9), (255, 0xD9), (256, 0xDA), (65535, 0xDA), (65536, 0xDB)):
            with self.subTest(n=n):
                s = "x" * n
                b = packb(s)
                self.assertEqual(b[0], first)
                self.assertEqual(unpackb(b), s)

    def test_bin_widths(self):
        for n, first in ((0, 0xC4), (255, 0xC4), (256, 0xC5), (65535, 0xC5), (65536, 0xC6)):
            with self.subTest(n=n):
                v = bytes(range(256)) * (n // 256) + bytes(n % 256)
                b = packb(v)
                self.assertEqual(b[0], first)
                self.assertEqual(unpackb(b), v)
        self.assertEqual(unpackb(packb(bytearray(b"ab"))), b"ab")
        self.assertEqual(unpackb(packb(memoryview(b"ab"))), b"ab")

    def test_array_and_map_widths(self):
        for n, first in ((0, 0x90), (15, 0x9F), (16, 0xDC), (65535, 0xDC), (65536, 0xDD)):
            with self.subTest(array=n):
                v = list(range(n))
                b = packb(v)
                self.assertEqual(b[0], first)
                self.assertEqual(unpackb(b), v)
        for n, first in ((0, 0x80), (15, 0x8F), (16, 0xDE), (65536, 0xDF)):
            with self.subTest(map=n):
                v = {"k%d" % i: i for i in range(n)}
                b = packb(v)
                self.assertEqual(b[0], first)
                self.assertEqual(unpackb(b), v)
        self.assertEqual(unpackb(packb((1, 2))), [1, 2])

    def test_protocol_message(self):
        msg = {"op": "ticks.put", "id": 7, "session": "s1", "stream": "0.1",
               "kinds": bytes([0, 1, 1]), "values": [1767225600000000000, 1000000000, 2**63 - 1],
               "timers": [[100000000, 1], [100000000, 2]], "draws": {"os.urandom": 24}, "ok": True}
        self.round_trip(msg)

    def test_u64_array(self):
        from dal._wire import U64Array
        for n in (0, 1, 15, 16, 4096, 70000):
            with self.subTest(n=n):
                v = [(i * 0x9E3779B97F4A7C15) % 2**64 for i in range(n)]
                b = packb(U64Array(v))
                self.assertEqual(unpackb(b), v)
                self.assertEqual(len(b), (1 if n < 16 else 3 if n <= 0xFFFF else 5) + 9 * n)
        from dal._wire import u64_array_le
        import array
        a = array.array("Q", [1, 2**64 - 1, 2**40])
        if sys.byteorder == "big":
            a.byteswap()
        self.assertEqual(unpackb(packb({"v": u64_array_le(a.tobytes())})), {"v": [1, 2**64 - 1, 2**40]})
        # out of range elements fall back to the general encoder, which names the problem
        self.assertEqual(unpackb(packb(U64Array([1, -2]))), [1, -2])
        with self.assertRaises(WireError):
            packb(U64Array([2**64]))

    def test_ext(self):
        for n in (1, 2, 4, 8, 16, 3, 300, 70000):
            with self.subTest(n=n):
                v = Ext(-1, bytes(n))
                self.assertEqual(unpackb(packb(v)), v)

    def test_errors(self):
        for bad in (b"", b"\xc1", b"\xcd\x00", b"\xa5ab", b"\x92\x01", b"\xd9\x02\xff\xfe", b"\x01\x02"):
            with self.subTest(bad=bad.hex()):
                with self.assertRaises(WireError):
                    unpackb(bad)
        with self.assertRaises(WireError):
            packb(object())
        with self.assertRaises(WireError):
            unpackb(b"\xdd\xff\xff\xff\xff")  # announces more elements than bytes


class Frames(unittest.TestCase):
    def test_frame(self):
        f = frame({"op": "hello", "proto": 1})
        n = frame_length(f[:4])
        self.assertEqual(n, len(f) - 4)
        self.assertEqual(unpackb(f[4:]), {"op": "hello", "proto": 1})

    def test_frame_limits(self):
        with self.assertRaises(WireError):
            frame_length(b"\x00\x00\x00\x00")
        with self.assertRaises(WireError):
            frame_length(struct.pack(">I", _wire.MAX_FRAME + 1))
        self.assertEqual(frame_length(struct.pack(">I", _wire.MAX_FRAME)), _wire.MAX_FRAME)
        with self.assertRaises(WireError):
            frame({"data": bytes(_wire.MAX_FRAME)})


if __name__ == "__main__":
    unittest.main()
