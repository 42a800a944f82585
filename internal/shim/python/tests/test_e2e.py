"""End to end: agents run under `dal-exec run` (DAL_EXEC, default
<repo>/bin/dal-exec) against a real dald. The runs start in parallel in
setUpClass; the tests assert on their results. A missing or stale dal-exec
fails every test here (it never skips)."""

import json
import os
import shutil
import sys
import tempfile
import unittest
from concurrent.futures import ThreadPoolExecutor

import os as _os
import sys as _sys
_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))  # _common, also under -t

from _common import AGENTS, DAL_EXEC, ROOT, SHIM, dal_run

PY = sys.executable
EXAMPLE = os.path.join(ROOT, "examples", "python", "agent.py")
PARENT = os.path.join(ROOT, "examples", "multiproc", "parent.py")


# Three children: with the session token, a forged one and none. The parent
# drops the variable from os.environ first, so the shim's spawn patch has
# nothing to put back.
TOKEN_AGENT = """
import json, os, subprocess, sys
code = "import time; print(time.time() < 1767225601)"
def child(token):
    env = dict(os.environ)
    if token is not None:
        env["DAL_SESSION_TOKEN"] = token
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    return {"stdout": r.stdout, "stderr": r.stderr}
# A strict run gives the token as a file (DAL_SESSION_TOKEN_FILE), the
# same path in every run.
own = os.environ.get("DAL_SESSION_TOKEN") or open(os.environ["DAL_SESSION_TOKEN_FILE"]).read().strip()
os.environ.pop("DAL_SESSION_TOKEN", None)
os.environ.pop("DAL_SESSION_TOKEN_FILE", None)
print(json.dumps({"own": child(own), "forged": child("f" * 64), "missing": child(None)}))
"""


def agent(name):
    return os.path.join(AGENTS, name)


class EndToEnd(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(DAL_EXEC, os.X_OK):
            raise AssertionError("%s is not an executable: build it (cd %s && go build -o bin/ ./cmd/...) or point DAL_EXEC at one" % (DAL_EXEC, ROOT))
        cls.tmp = tempfile.mkdtemp(prefix="dal-pyshim-test-")
        chain_dir = os.path.join(cls.tmp, "chain")
        broken_dir = os.path.join(cls.tmp, "broken")
        os.makedirs(chain_dir)
        os.makedirs(broken_dir)
        with open(os.path.join(chain_dir, "sitecustomize.py"), "w") as f:
            f.write("import time\nMARK = 'user sitecustomize'\nSAW = time.time()\n")
        with open(os.path.join(broken_dir, "sitecustomize.py"), "w") as f:
            f.write("raise RuntimeError('broken user sitecustomize')\n")
        clock_out = os.path.join(cls.tmp, "seeded-clock.json")
        cls.clock_out = clock_out
        runs = {
            "shimdir": (["--seed", "7"], [PY, "-c", "import dal, os; print(os.path.dirname(os.path.dirname(dal.__file__)))"], None),
            "probe7a": (["--seed", "7"], [PY, agent("probe.py")], None),
            "probe7b": (["--seed", "7"], [PY, agent("probe.py")], None),
            "probe8": (["--seed", "8"], [PY, agent("probe.py")], None),
            "example7a": (["--seed", "7"], [PY, EXAMPLE], None),
            "example7b": (["--seed", "7"], [PY, EXAMPLE], None),
            "timers": ([], [PY, agent("timers.py")], None),
            "http": ([], [PY, agent("http_agent.py")], None),
            "spawn": (["--seed", "3"], [PY, agent("spawn.py")], None),
            "parent": (["--seed", "7"], [PY, PARENT], None),
            "chain": (["--keep-env", "PYTHONPATH"], [PY, agent("chain_agent.py")], {"PYTHONPATH": chain_dir}),
            "chain_broken": (["--keep-env", "PYTHONPATH"], [PY, "-c", "import dal, time; print(dal.mode(), time.time())"], {"PYTHONPATH": broken_dir}),
            "default": (["--mode", "default"], [PY, agent("probe.py")], None),
            "logged": (["--mode", "logged"], [PY, agent("probe.py")], None),
            "seeded": (["--mode", "seeded", "--seed", "7", "--clock-out", clock_out], [PY, agent("timers.py"), "0.2"], None),
            "token": ([], [PY, "-c", TOKEN_AGENT], None),
        }

        def one(item):
            name, (args, cmd, env) = item
            return name, dal_run(args, cmd, env=env)
        with ThreadPoolExecutor(8) as ex:
            cls.runs = dict(ex.map(one, runs.items()))
        # replay needs the seeded run's clock log
        cls.runs["replay"] = dal_run(["--mode", "seeded", "--seed", "7", "--replay-clock", clock_out],
                                     [PY, agent("timers.py"), "0.2"])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def ok(self, name):
        r = self.runs[name]
        self.assertEqual(r.returncode, 0, "%s exited %d\nstdout:\n%s\nstderr:\n%s" % (name, r.returncode, r.stdout, r.stderr))
        return r

    def js(self, name):
        return json.loads(self.ok(name).stdout)

    def test_00_dal_exec_carries_this_shim(self):
        d = self.ok("shimdir").stdout.strip()
        stale = []
        for rel in ("sitecustomize.py", "dal/__init__.py", "dal/_runtime.py", "dal/_wire.py", "dal/_seedrng.py", "dal/_site.py", "dal/_marks.py"):
            with open(os.path.join(SHIM, rel), "rb") as a, open(os.path.join(d, rel), "rb") as b:
                if a.read() != b.read():
                    stale.append(rel)
        self.assertEqual(stale, [], "%s embeds a stale copy of these shim files: rebuild it (go build -o bin/ ./cmd/...)" % DAL_EXEC)

    def test_a_child_needs_its_session_token(self):
        out = self.js("token")
        self.assertEqual(out["own"], {"stdout": "True\n", "stderr": ""})
        for name, want in (("forged", "the session token is wrong"), ("missing", "the session token is missing")):
            with self.subTest(child=name):
                r = out[name]
                # Refused by dald, the child's shim stays out of the way;
                # the syscall layer still serves every process of the
                # run the virtual clock.
                self.assertEqual(r["stdout"], "True\n", "%s: the child is off the virtual clock" % name)
                self.assertTrue(r["stderr"].startswith("dal: dald refused hello: hello for session "), r["stderr"])
                self.assertIn(want, r["stderr"])
                self.assertIn("DAL_SESSION_TOKEN", r["stderr"])
                self.assertEqual(len(r["stderr"].splitlines()), 1, r["stderr"])

    def test_same_seed_is_byte_identical(self):
        a, b = self.ok("probe7a"), self.ok("probe7b")
        self.assertEqual(a.stdout, b.stdout)
        self.assertEqual(a.stderr, b.stderr)
        a, b = self.ok("example7a"), self.ok("example7b")
        self.assertEqual(a.stdout, b.stdout)
        self.assertIn("asyncio timer order   a b c d timeout@5s", a.stdout)
        self.assertIn("time.sleep(1.5) took  1.500 s", a.stdout)
        self.assertIn("time.sleep(60) took   60.000 s", a.stdout)

    def test_new_seed_changes_every_random_value_and_no_clock_value(self):
        a, b = self.js("probe7a"), self.js("probe8")
        self.assertEqual(a["clock"], b["clock"])
        for k in a["random"]:
            with self.subTest(value=k):
                self.assertNotEqual(a["random"][k], b["random"][k])
        self.assertEqual(sorted(a["random"]), sorted(["random", "randint", "choice", "gauss", "instance", "sysrandom", "uuid4",
                                                      "uuid1", "urandom", "token_hex", "token_urlsafe", "randbelow"]))

    def test_clocks_start_at_the_epoch(self):
        out = self.js("probe7a")
        c = out["clock"]
        self.assertEqual(out["mode"], "strict")
        self.assertEqual(out["stream"], "0")
        self.assertTrue(1767225600.0 < c["time"] < 1767225600.001, c["time"])
        self.assertTrue(c["datetime_now"].startswith("2026-01-01T00:00:00.0000"), c["datetime_now"])
        self.assertTrue(c["utcnow"].startswith("2026-01-01T00:00:00.0000"), c["utcnow"])
        self.assertTrue(c["now_utc"].startswith("2026-01-01T00:00:00.0000") and c["now_utc"].endswith("+00:00"))
        self.assertEqual(c["today"], "2026-01-01")
        self.assertEqual(c["ctime"], "Thu Jan  1 00:00:00 2026")
        self.assertTrue(1.0 < c["monotonic"] < 1.001)
        self.assertAlmostEqual(c["sleep_1_5"], 1.5, places=5)
        self.assertEqual(out["stats"]["round_trips"], 1)  # hello only: no clock read made IPC

    def test_seeded_values_come_from_the_seedrng_streams(self):
        from dal import _seedrng
        r = self.js("probe7a")["random"]
        # stream 0's os.urandom: 7 bytes for SystemRandom().random(), then uuid4's 16
        s = _seedrng.derive(7, "0/os.urandom")
        s.read(7)
        want = bytearray(s.read(16))
        want[6] = (want[6] & 0x0F) | 0x40
        want[8] = (want[8] & 0x3F) | 0x80
        self.assertEqual(r["uuid4"].replace("-", ""), want.hex())

    def test_asyncio_order_and_cost(self):
        out = self.js("timers")
        self.assertEqual(out["loop"], "DalEventLoop")
        self.assertEqual(out["order"], ["a", "b", "c", "d", "timeout"])
        self.assertGreaterEqual(out["virtual"], 5.0)
        self.assertLess(out["wall"], 2.0, "5 s of virtual sleeps and timers took %.2f s of wall time" % out["wall"])
        self.assertEqual(out["stats"]["round_trips"], 1)

    def test_http_to_a_local_server_beats_the_timeout(self):
        out = self.js("http")
        self.assertEqual(out["sync"], "hello /sync")
        self.assertEqual(out["executor"], "hello /executor")
        self.assertEqual(out["open_connection"], "hello /stream")
        self.assertEqual(out["fired_before"], [])
        self.assertLess(out["virtual"], 1.0)

    def test_children_are_named_and_virtual(self):
        lines = [json.loads(x) for x in self.ok("spawn").stdout.splitlines()]
        by = {x["kind"]: x for x in lines}
        self.assertEqual(sorted(by), ["fork", "node", "parent", "posix_spawn", "subprocess"])
        self.assertEqual(by["parent"]["stream"], "0")
        self.assertEqual((by["subprocess"]["stream"], by["subprocess"]["env"]), ("0.1", "0.1"))
        self.assertEqual(by["node"]["stream"], "0.2")
        self.assertEqual((by["fork"]["stream"], by["fork"]["env"]), ("0.3", "0.3"))
        self.assertEqual((by["posix_spawn"]["stream"], by["posix_spawn"]["env"]), ("0.4", "0.4"))
        for k in ("parent", "subprocess", "fork", "posix_spawn"):
            self.assertTrue(1767225600.0 < by[k]["time"] < 1767225600.001, (k, by[k]["time"]))
        self.assertTrue(1767225600000 <= by["node"]["now"] < 1767225600100, by["node"])
        # each child draws from its own stream
        randoms = [by[k]["random"] for k in ("subprocess", "fork", "posix_spawn")]
        self.assertEqual(len(set(randoms)), 3)

    def test_multiproc_example(self):
        out = self.ok("parent").stdout
        self.assertIn("parent stream 0: time 1767225600.000001", out)
        self.assertIn("python child stream 0.1: time 1767225600.000001", out)
        self.assertIn("node child stream 0.2: Date.now 1767225600000", out)
        self.assertIn("after 2 s of sleep, time 1767225602.000002", out)
        self.assertNotIn("stderr:", out)

    def test_chains_to_an_existing_sitecustomize(self):
        out = self.js("chain")
        self.assertEqual(out["mark"], "user sitecustomize")
        self.assertEqual(out["mode"], "strict")
        self.assertTrue(out["file"].endswith(os.path.join("chain", "sitecustomize.py")), out["file"])
        self.assertTrue(1767225600.0 <= out["saw_virtual_time"] < 1767225600.001, "the user's sitecustomize ran before the shim")

    def test_broken_user_sitecustomize_is_reported_not_raised(self):
        r = self.ok("chain_broken")
        mode, t = r.stdout.split()
        self.assertEqual(mode, "strict")
        self.assertIn("dal: error in sitecustomize", r.stderr)
        self.assertIn("broken user sitecustomize", r.stderr)

    def test_default_mode_patches_nothing(self):
        out = self.js("default")
        self.assertEqual(out["mode"], "default")
        self.assertGreater(out["clock"]["time"], 1767225600 + 86400, "default mode should read the real clock")

    def test_logged_mode_is_real(self):
        out = self.js("logged")
        self.assertEqual(out["mode"], "logged")
        self.assertGreater(out["clock"]["time"], 1767225600 + 86400)
        self.assertGreater(out["stats"]["reads"], 10)
        self.assertEqual(self.runs["logged"].stderr, "")

    def test_seeded_run_replays_its_clock(self):
        rec = self.js("seeded")
        rep = self.js("replay")
        self.assertEqual(rec["order"], ["a", "b", "c", "d", "timeout"])
        self.assertEqual(rep["order"], rec["order"])
        self.assertEqual(rep["virtual"], rec["virtual"], "replay served other clock values")
        self.assertGreaterEqual(rec["wall"], 0.8, "seeded mode sleeps for real")
        self.assertLess(rep["wall"], 0.5, "replay waited on the wall clock")
        self.assertEqual(rep["stats"]["reads"], rec["stats"]["reads"])
        self.assertNotIn("drift", self.runs["replay"].stderr)
        with open(self.clock_out) as f:
            log = json.load(f)
        st = [s for s in log["streams"] if s["stream"] == "0"][0]
        self.assertEqual(len(st["ticks"]["values"]), rec["stats"]["reads"])


if __name__ == "__main__":
    unittest.main()
