"""dal._seedrng reproduces testdata/seedrng.json byte for byte."""

import json
import os
import unittest

import os as _os
import sys as _sys
_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))  # _common, also under -t

from _common import ROOT
from dal import _seedrng


class SeedRNGVectors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(os.path.join(ROOT, "testdata", "seedrng.json"), encoding="utf-8") as f:
            cls.vectors = json.load(f)

    def test_vectors_present(self):
        self.assertGreaterEqual(len(self.vectors), 7)

    def test_bytes(self):
        for v in self.vectors:
            with self.subTest(seed=v["seed"], label=v["label"], offset=v["offset"]):
                s = _seedrng.derive(v["seed"], v["label"])
                s.read(v["offset"])
                self.assertEqual(s.read(v["length"]).hex(), v["hex"])

    def test_bytes_read_in_pieces(self):
        # the same bytes whatever the read sizes, across block boundaries
        for v in self.vectors:
            with self.subTest(label=v["label"]):
                s = _seedrng.derive(v["seed"], v["label"])
                got = b""
                n = v["offset"] + v["length"]
                step = 1
                while len(got) < n:
                    got += s.read(min(step, n - len(got)))
                    step = step * 3 + 1
                self.assertEqual(got[v["offset"]:].hex(), v["hex"])

    def test_floats(self):
        for v in self.vectors:
            with self.subTest(seed=v["seed"], label=v["label"]):
                s = _seedrng.derive(v["seed"], v["label"])
                self.assertEqual([s.float64() for _ in v["floats"]], v["floats"])

    def test_block_is_the_spec(self):
        # stream(0, "") starts with SHAKE256("dal.seedrng.v1\0" || 0^16)
        import hashlib
        want = hashlib.shake_256(b"dal.seedrng.v1\x00" + bytes(16)).digest(4096)
        self.assertEqual(_seedrng.block(0, "", 0), want)
        self.assertEqual(_seedrng.derive(0, "").read(4096), want)

    def test_large_read_spans_blocks(self):
        whole = _seedrng.derive(5, "l").read(10000)
        s = _seedrng.derive(5, "l")
        parts = b"".join(s.read(n) for n in (1, 4095, 3, 4097, 1804))
        self.assertEqual(parts, whole)
        self.assertEqual(whole[:4096], _seedrng.block(5, "l", 0))
        self.assertEqual(whole[4096:8192], _seedrng.block(5, "l", 1))

    def test_streams_differ(self):
        a = _seedrng.derive(7, "0/x").read(32)
        self.assertNotEqual(a, _seedrng.derive(8, "0/x").read(32))
        self.assertNotEqual(a, _seedrng.derive(7, "0.1/x").read(32))

    def test_drawn_counter(self):
        s = _seedrng.derive(1, "c")
        s.read(10)
        s.uint64()
        self.assertEqual(s.drawn, 18)


if __name__ == "__main__":
    unittest.main()
