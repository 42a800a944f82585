"""dal.iteration and dal.checkpoint (dal/_marks.py): the marks directory of
docs/marks.md, written in this process with DAL_MARKS set, and by child
interpreters for concurrency and for the shim's virtual clock."""

import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
import unittest
from unittest import mock

import os as _os
import sys as _sys
_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))  # _common, also under -t

from _common import SHIM, run_python
import dal
from dal import _marks

EPOCH = 1767225600 * 10**9


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class Marks(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="dal-marks-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.ws = os.path.join(self.tmp, "ws")
        self.marks = os.path.join(self.tmp, "marks")
        os.makedirs(os.path.join(self.ws, "out"))
        os.mkdir(self.marks)
        env = mock.patch.dict(os.environ, {"DAL_MARKS": self.marks, "DAL_WORKSPACE": self.ws})
        env.start()
        self.addCleanup(env.stop)

    def file(self, rel, data, mode=0o644, base=None):
        p = os.path.join(base or self.ws, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
        os.chmod(p, mode)
        return p

    def on_disk(self, kind, seq):
        with open(os.path.join(self.marks, kind + "s", "%04d" % seq, "mark.json"), encoding="utf-8") as f:
            return json.load(f)

    def test_two_iterations_are_numbered_1_and_2_with_their_copies(self):
        report = self.file("out/report.md", b"# draft 1\n", 0o640)
        m1 = dal.iteration(score=0.5, artifacts=[report], dimensions={"validation": 1, "completeness": 0.25}, note="first")
        self.file("out/report.md", b"# draft 2, longer\n", 0o600)
        m2 = dal.iteration(0.75, [report])
        self.assertEqual((m1["seq"], m2["seq"]), (1, 2))
        self.assertEqual(m1, self.on_disk("iteration", 1))
        self.assertEqual(m2, self.on_disk("iteration", 2))
        self.assertEqual({k: m1[k] for k in ("v", "kind", "score", "dimensions", "note", "runtime", "pid")},
                         {"v": 1, "kind": "iteration", "score": 0.5, "dimensions": {"validation": 1.0, "completeness": 0.25},
                          "note": "first", "runtime": "python", "pid": os.getpid()})
        self.assertNotIn("state", m2)  # empty fields are left out, as the Go writer does
        self.assertNotIn("dimensions", m2)
        for seq, m, data, mode in ((1, m1, b"# draft 1\n", 0o640), (2, m2, b"# draft 2, longer\n", 0o600)):
            [a] = m["artifacts"]
            copy = os.path.join(self.marks, "iterations", "%04d" % seq, "files", "0")
            with open(copy, "rb") as f:
                self.assertEqual(f.read(), data)
            self.assertEqual(a, {"path": "out/report.md", "abs": report, "file": "files/0",
                                 "sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "mode": mode})
        self.assertGreater(m2["at_ns"], 0)
        self.assertGreaterEqual(m2["at_ns"], m1["at_ns"])
        self.assertFalse(os.path.exists(os.path.join(self.marks, "iterations", "0001", "mark.json.tmp")))

    def test_a_directory_expands_to_its_regular_files_sorted_by_path(self):
        for rel in ("site/a/b.txt", "site/a-c/x.txt", "site/z.txt", "site/a/deep/e.txt", "site/B.txt", "site/\U0001F600.txt", "site/\uFF21.txt"):
            self.file(rel, rel.encode())
        os.mkdir(os.path.join(self.ws, "site", "empty"))
        os.symlink(os.path.join(self.ws, "site", "z.txt"), os.path.join(self.ws, "site", "link.txt"))
        os.symlink(os.path.join(self.ws, "site", "a"), os.path.join(self.ws, "site", "linkdir"))
        single = self.file("first.txt", b"1")
        m = dal.iteration(1, [single, os.path.join(self.ws, "site")])
        # '-' sorts before '/', capitals before lower case, U+FF21 before
        # U+1F600: the UTF-8 byte order of the whole path, as in Go and Node
        want = ["first.txt", "site/B.txt", "site/a-c/x.txt", "site/a/b.txt", "site/a/deep/e.txt", "site/z.txt",
                "site/\uFF21.txt", "site/\U0001F600.txt"]
        self.assertEqual([a["path"] for a in m["artifacts"]], want)
        self.assertEqual([a["file"] for a in m["artifacts"]], ["files/%d" % i for i in range(len(want))])
        d = os.path.join(self.marks, "iterations", "0001")
        for a in m["artifacts"]:
            self.assertEqual(a["sha256"], sha(os.path.join(self.ws, a["path"])))
            self.assertEqual(a["sha256"], sha(os.path.join(d, a["file"])))

    def test_paths_are_resolved_against_the_cwd_and_stored_relative_to_the_workspace(self):
        inside = self.file("out/sub/r.txt", b"r")
        outside = self.file("elsewhere.txt", b"e", base=self.tmp)
        cwd = os.getcwd()
        os.chdir(os.path.join(self.ws, "out", "sub"))
        self.addCleanup(os.chdir, cwd)
        m = dal.iteration(0.1, ["r.txt", "../../../elsewhere.txt", "."])
        self.assertEqual([(a["path"], a["abs"]) for a in m["artifacts"]],
                         [("out/sub/r.txt", inside), (outside, outside), ("out/sub/r.txt", inside)])
        with mock.patch.dict(os.environ, {"DAL_WORKSPACE": ""}):
            m = dal.iteration(0.1, "r.txt")  # a single path is one artifact
        self.assertEqual(m["artifacts"][0]["path"], inside)  # no workspace: absolute

    def test_bad_input_raises_and_writes_nothing(self):
        ok = self.file("ok.txt", b"ok")
        cases = [
            ("score bool", lambda: dal.iteration(True, [ok]), ValueError),
            ("score above 1", lambda: dal.iteration(1.5, [ok]), ValueError),
            ("score below 0", lambda: dal.iteration(-0.1), ValueError),
            ("score NaN", lambda: dal.iteration(float("nan")), ValueError),
            ("score string", lambda: dal.iteration("0.5"), ValueError),
            ("dimension above 1", lambda: dal.iteration(dimensions={"validation": 2}), ValueError),
            ("dimension bool", lambda: dal.iteration(dimensions={"validation": True}), ValueError),
            ("dimension key not a string", lambda: dal.iteration(dimensions={1: 0.5}), ValueError),
            ("dimensions not a dict", lambda: dal.iteration(dimensions=[("a", 1)]), ValueError),
            ("missing artifact", lambda: dal.iteration(0.5, [ok, os.path.join(self.ws, "nope")]), FileNotFoundError),
            ("missing relative artifact", lambda: dal.checkpoint("c", ["nope.txt"]), FileNotFoundError),
            ("artifact not a path", lambda: dal.iteration(0.5, [ok, 5]), ValueError),
            ("artifacts not a list", lambda: dal.iteration(0.5, 5), ValueError),
            ("artifact a fifo", lambda: (os.mkfifo(os.path.join(self.tmp, "fifo")), dal.iteration(0.5, [os.path.join(self.tmp, "fifo")])), ValueError),
            ("state not JSON", lambda: dal.checkpoint("c", state={"x": object()}), ValueError),
            ("state NaN", lambda: dal.checkpoint("c", state=[float("nan")]), ValueError),
            ("state circular", lambda: (lambda l: (l.append(l), dal.checkpoint("c", state=l)))([]), ValueError),
            ("checkpoint without a name", lambda: dal.checkpoint("", [ok]), ValueError),
            ("checkpoint name not a string", lambda: dal.checkpoint(None), ValueError),
            ("note not a string", lambda: dal.iteration(0.5, note=3), ValueError),
            ("tag not a string", lambda: dal.checkpoint("c", tag=1), ValueError),
        ]
        for name, call, exc in cases:
            with self.subTest(name):
                try:
                    with self.assertRaises(exc):
                        call()
                    self.assertEqual(os.listdir(self.marks), [])
                finally:  # each case starts from an empty directory
                    for e in os.listdir(self.marks):
                        shutil.rmtree(os.path.join(self.marks, e))

    def test_a_failed_copy_removes_its_mark(self):
        ok = self.file("ok.txt", b"ok")
        with mock.patch.object(_marks, "_copy", side_effect=OSError(5, "Input/output error")):
            with self.assertRaises(OSError):
                dal.iteration(0.5, [ok])
        self.assertEqual(os.listdir(os.path.join(self.marks, "iterations")), [])
        self.assertEqual(dal.iteration(0.5, [ok])["seq"], 1)

    def test_numbers_follow_the_highest_directory(self):
        os.makedirs(os.path.join(self.marks, "iterations", "0007"))      # incomplete: its writer died
        open(os.path.join(self.marks, "iterations", "0009"), "w").close()  # not a directory
        os.makedirs(os.path.join(self.marks, "iterations", "notes"))
        self.assertEqual(dal.iteration(0.5)["seq"], 8)
        self.assertEqual(dal.checkpoint("first")["seq"], 1)  # its own sequence

    def test_checkpoint_keeps_name_tag_and_state(self):
        a = self.file("state/db.json", b"{}")
        state = {"phase": "build", "done": [1, 2], "nested": {"ok": True, "none": None}}
        m = dal.checkpoint("phase-build", [os.path.dirname(a)], state=state, tag="release", note="built")
        self.assertEqual(m, self.on_disk("checkpoint", 1))
        self.assertEqual({k: m[k] for k in ("kind", "seq", "score", "name", "tag", "state", "note")},
                         {"kind": "checkpoint", "seq": 1, "score": None, "name": "phase-build", "tag": "release",
                          "state": state, "note": "built"})
        self.assertEqual([x["path"] for x in m["artifacts"]], ["state/db.json"])
        self.assertFalse(os.path.exists(os.path.join(self.marks, "iterations")))

    def test_concurrent_threads_and_processes_get_distinct_numbers(self):
        ok = self.file("ok.txt", b"ok")
        per, seqs, errs = 5, [], []

        def thread():
            try:
                for _ in range(per):
                    seqs.append(dal.iteration(0.5, [ok])["seq"])
            except Exception as e:  # pragma: no cover - reported below
                errs.append(e)
        code = "import sys; sys.path.insert(0, %r); import dal\nfor _ in range(%d): print(dal.iteration(0.5, [%r])['seq'])" % (SHIM, per, ok)
        env = {"DAL_MARKS": self.marks, "DAL_WORKSPACE": self.ws}
        procs = []
        threads = [threading.Thread(target=thread) for _ in range(4)]
        threads += [threading.Thread(target=lambda: procs.append(run_python(["-c", code], env=env))) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errs, [])
        for r in procs:
            self.assertEqual(r.returncode, 0, r.stderr)
            seqs += [int(x) for x in r.stdout.split()]
        self.assertEqual(sorted(seqs), list(range(1, 8 * per + 1)))
        for n in seqs:
            self.assertEqual(self.on_disk("iteration", n)["seq"], n)

    def test_outside_dal_nothing_is_written(self):
        ok = self.file("ok.txt", b"ok")
        with mock.patch.dict(os.environ):
            del os.environ["DAL_MARKS"]
            self.assertIsNone(dal.iteration(0.5, [ok]))
            self.assertIsNone(dal.checkpoint("c", [ok], state={"a": 1}))
        self.assertEqual(os.listdir(self.marks), [])

    def test_at_ns_is_the_virtual_clock_under_the_shim(self):
        # strict mode without dald: the mark's at_ns is one read of the
        # virtual realtime clock, the next read is one quantum later
        code = "\n".join([
            "import json, sys; sys.path.insert(0, %r)" % SHIM,
            "from dal import _runtime",
            "_runtime._install_offline({'mode': 'strict', 'stream': '0', 'seed': 7, 'epoch_ns': %d, 'mono_ns': 10**9, 'quantum_ns': 1000, 'batch': 4096, 'replay': False})" % EPOCH,
            "import dal, time",
            "before = time.time_ns()",
            "m = dal.iteration(0.5)",
            "print(json.dumps([before, m['at_ns'], time.time_ns()]))",
        ])
        r = run_python(["-c", code], env={"DAL_MARKS": self.marks})
        self.assertEqual(r.returncode, 0, r.stderr)
        before, at, after = json.loads(r.stdout)
        self.assertGreaterEqual(before, EPOCH)
        self.assertEqual([at - before, after - at], [1000, 1000])
        self.assertEqual(self.on_disk("iteration", 1)["at_ns"], at)


if __name__ == "__main__":
    unittest.main()
