"""dal._runtime without a daemon: each check runs in its own interpreter
(the shim patches process-wide state) through agents/offline.py, in parallel."""

import json
import os
import sys
import unittest
from concurrent.futures import ThreadPoolExecutor

import os as _os
import sys as _sys
_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))  # _common, also under -t

from _common import AGENTS, SHIM, run_python
from dal import _runtime

EPOCH = 1767225600 * 10**9
CHECKS = [("clock", "strict"), ("asyncio_order", "strict"), ("idle", "strict"), ("real_waits", "strict"),
          ("random", "strict"), ("seeded_ticks", "seeded"), ("foreign_loop", "strict"), ("child_env", "strict"), ("compat", "strict"), ("threads", "strict"), ("threads_again", "strict"),
          ("asyncio_threads", "strict"), ("blocking_calls", "strict"), ("stuck", "strict")]


class Offline(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        def one(check):
            name = "threads" if check[0] == "threads_again" else check[0]
            r = run_python([os.path.join(AGENTS, "offline.py"), name, check[1]], env={"TZ": "UTC"}, timeout=120)
            return check[0], r
        with ThreadPoolExecutor(len(CHECKS)) as ex:
            cls.runs = dict(ex.map(one, CHECKS))

    def result(self, check, stderr=""):
        r = self.runs[check]
        self.assertEqual(r.returncode, 0, "offline check %s failed:\n%s%s" % (check, r.stdout, r.stderr))
        self.assertEqual(r.stderr, stderr, "the shim printed on stderr")
        return json.loads(r.stdout)

    def test_foreign_loops_are_reported_once(self):
        r = self.runs["foreign_loop"]
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 2, r.stderr)  # the policy, then the loop it made
        self.assertTrue(lines[0].startswith("dal: asyncio event loop policy ") and "is not dal's" in lines[0], lines[0])
        self.assertTrue(lines[1].startswith("dal: asyncio loop ") and "real clock" in lines[1], lines[1])
        out = self.result("foreign_loop", stderr=r.stderr)
        self.assertEqual(out["loop"], "_UnixSelectorEventLoop")
        self.assertEqual(out["default_loop"], "DalEventLoop")
        # counted for the exit report's unserved (syscalls.json's escapes)
        self.assertEqual(out["unserved"], {"clock/asyncio policy __main__.check_foreign_loop.<locals>.Foreign": 2, "clock/asyncio loop asyncio.unix_events._UnixSelectorEventLoop": 3})

    def test_custom_child_env_keeps_the_child_under_dal(self):
        e = self.result("child_env")["env"]
        self.assertEqual(e["DAL_STREAM"], "0.7")
        self.assertEqual(e["DAL_SESSION_TOKEN"], "t0k")  # put back: the child must say hello with it
        self.assertEqual(e["PATH"], "/bin")
        self.assertEqual(e["PYTHONPATH"], SHIM + os.pathsep + "/user")
        self.assertEqual(e["NODE_OPTIONS"], '--require "/x y/node/dal-register.js" --trace-warnings')

    def test_clock_reads_advance_one_quantum(self):
        out = self.result("clock")
        r, t0 = out["reads"], out["t0"]
        self.assertEqual(t0, 1000)  # logging's import-time time.time()
        # epoch + t, mono + t, t += 1000 ns per read
        self.assertAlmostEqual(r[0], (EPOCH + t0 + 1000) / 1e9, delta=1e-6)
        self.assertEqual(r[1], EPOCH + t0 + 2000)
        self.assertAlmostEqual(r[2], (10**9 + t0 + 3000) / 1e9, places=12)
        self.assertEqual(r[3], 10**9 + t0 + 4000)
        self.assertAlmostEqual(r[4], (10**9 + t0 + 5000) / 1e9, places=12)
        self.assertEqual(r[5], 10**9 + t0 + 6000)
        self.assertAlmostEqual(r[6], (EPOCH + t0 + 7000) / 1e9, delta=1e-6)
        self.assertEqual(r[7], 10**9 + t0 + 8000)
        self.assertLess(r[0], r[6])

    def test_sleep_advances_virtual_time(self):
        out = self.result("clock")
        self.assertEqual(out["sleep_1_5"], 1_500_000_000 + 1000)
        self.assertEqual(out["sleep_0_1"], 100_000_000 + 1000)
        self.assertEqual(out["sleep_2"], 2_000_000_000 + 1000)
        self.assertEqual(out["sleep_errors"], ["ValueError", "ValueError", "ValueError", "TypeError", "TypeError"])

    def test_calendar_functions_follow_the_virtual_clock(self):
        out = self.result("clock")
        self.assertEqual(out["localtime"], [2026, 1, 1, 0, 0, 3])  # TZ=UTC in tests; 3.6 s of sleeps
        self.assertEqual(out["gmtime"], [2026, 1, 1, 0, 0, 3])
        self.assertEqual(out["ctime"], "Thu Jan  1 00:00:03 2026")
        self.assertEqual(out["strftime"], "2026-01-01T00:00:03")
        self.assertTrue(out["now"].startswith("2026-01-01T00:00:03.6"), out["now"])
        self.assertTrue(out["utcnow"].startswith("2026-01-01T00:00:03.6"), out["utcnow"])
        self.assertTrue(out["now_utc"].startswith("2026-01-01T00:00:03.6") and out["now_utc"].endswith("+00:00"))
        self.assertEqual(out["today"], "2026-01-01")

    def test_stats(self):
        st = self.result("clock")["stats"]
        self.assertEqual(st["mode"], "strict")
        self.assertEqual(st["round_trips"], 0)
        self.assertEqual(st["sleep_ns"], 3_600_000_000)
        # 1 at import, 8 reads, 6 around the sleeps, 1 each for localtime,
        # gmtime, ctime, strftime, now, utcnow, now(utc), today
        self.assertEqual(st["reads"], 1 + 8 + 6 + 8)

    def test_asyncio_timer_order(self):
        out = self.result("asyncio_order")
        self.assertEqual(out["loop"], "DalEventLoop")
        self.assertEqual(out["order"], ["a", "b", "c", "d"])
        self.assertAlmostEqual(out["sleep_elapsed"], 0.25, places=9)
        self.assertLess(out["wall"], 1.0)
        fired = out["timers"]
        # [deadline offset ns, registration seq]: a=2, b=3, c=1, d=4, then the sleeps
        self.assertEqual([seq for _, seq in fired[:4]], [2, 3, 1, 4])
        self.assertEqual(fired[0][0], fired[1][0])
        self.assertEqual([off for off, _ in fired[:4]], sorted(off for off, _ in fired[:4]))
        self.assertNotIn(5, [seq for _, seq in fired])  # the cancelled timer never fired

    def test_idle_rule(self):
        out = self.result("idle")
        ex = out["executor"]
        self.assertEqual(ex["result"], "done")
        self.assertEqual(ex["fired"], [], "the 10 s timer fired before the executor result")
        self.assertLess(ex["virtual"], 1.0)
        self.assertGreaterEqual(ex["wall"], 0.09)
        self.assertAlmostEqual(out["no_io"]["virtual"], 3600, places=6)
        self.assertLess(out["no_io"]["wall"], 1.0)
        self.assertAlmostEqual(out["listening"]["virtual"], 600, places=6)
        self.assertLess(out["listening"]["wall"], 1.0, "a listening socket held virtual time back")
        # an idle connected socket is outstanding I/O: the timer waits (bounded) wall time
        self.assertAlmostEqual(out["idle_conn"]["virtual"], 0.2, places=6)
        self.assertGreaterEqual(out["idle_conn"]["wall"], 0.19)
        self.assertEqual(out["wrapped"]["result"], "done")
        self.assertEqual(out["wrapped"]["fired"], [])
        self.assertLess(out["wrapped"]["virtual"], 1.0)
        self.assertEqual(out["leftover"], [], "a pending timer fired while asyncio.run shut the executor down")
        self.assertEqual(out["data"]["line"], "pong\n")
        self.assertLess(out["data"]["virtual"], 1.0)

    def test_thread_waits_are_virtual_and_subprocess_waits_real(self):
        out = self.result("real_waits")
        self.assertEqual(out["event_wait"], 50_000_000 + 1000)  # the timeout and the quantum of the second read
        self.assertEqual(out["queue"], "Empty")
        self.assertEqual(out["queue_wait"], 50_000_000 + 1000)
        self.assertEqual(out["subprocess"], 0, "subprocess.run timed out on the virtual clock")
        self.assertGreaterEqual(out["subprocess_wall"], 0.25)
        self.assertEqual(out["popen_wait"], "TimeoutExpired")
        self.assertGreaterEqual(out["popen_wait_wall"], 0.19)
        self.assertTrue(out["poll_loop_done"])

    def test_threads_take_turns_on_the_virtual_clock(self):
        out = self.result("threads")
        self.assertEqual(out["log"], ["event@300", "cond@500", "queue-empty@1000", "b@1100", "c@1100", "d@1200", "a@1300", "pool@6800", "sync@7350"])
        self.assertFalse(out["cond"])
        # each thread runs until it blocks: no interleaving by the GIL's switch interval
        self.assertEqual(out["spin"], [[k, i] for k in range(3) for i in range(0, 20000, 5000)])
        # five jobs on four workers, sleeping 0.5, 0.1, 0.3, 0.2 and 0.05 s: done at 0.1, 0.15, 0.2, 0.3, 0.5
        self.assertEqual(out["as_completed"], [1, 4, 3, 2, 0])
        self.assertEqual(out["wait_timeout"], [0, 1])
        self.assertTrue(out["join_timeout_alive"])
        self.assertFalse(out["sem"])
        self.assertEqual(out["barrier"], ["t", "main"])
        self.assertEqual(out["popen_timeout_virtual"], 200)
        self.assertEqual(out["cpu"], [True, True, True, True])
        self.assertTrue(out["elapsed_is_virtual"])
        self.assertEqual(out["cpu_unserved"], {"cpu_clock/time.process_time_ns": 1, "cpu_clock/time.thread_time_ns": 1, "cpu_clock/resource.getrusage": 1,
                                               "cpu_clock/time.clock_gettime_ns(2)": 1, "cpu_clock/os.times": 1})  # 2: CLOCK_PROCESS_CPUTIME_ID

    def test_blocking_calls_hand_the_turn_over(self):
        r = self.runs["blocking_calls"]
        # the forked child has no dald to name it (offline): said once, and
        # nothing else (no thread was stuck)
        self.assertRegex(r.stderr, r"^dal: forked child \(pid \d+\) got no stream name from dald; [^\n]*\n$")
        self.assertEqual(self.result("blocking_calls", stderr=r.stderr)["log"], [
            "write@500", "read x@500", "write@750", "select 1@750", "drained y@750",
            "release@850", "mp lock@850", "wake child@950", "waitpid 3@950"])

    def test_a_stuck_thread_is_reported_and_the_others_run(self):
        r = self.runs["stuck"]
        self.assertTrue(self.result("stuck", stderr=r.stderr)["finished"])
        self.assertRegex(r.stderr, r"^dal: thread 'MainThread' held the turn 5 s while other threads waited for it, at .*offline.py:\d+ \(check_stuck\), "
                         r"blocked in the system call futex, which dal does not wrap: threads now run beside it, so this process's thread order is no longer deterministic\n$")

    def test_asyncio_and_threads_share_the_virtual_clock(self):
        # the loop, a to_thread worker's sleep and a Timer thread take turns
        # on one clock: each event at its virtual instant
        self.assertEqual(self.result("asyncio_threads")["events"], [["sleep", 0.5], ["timer", 0.7], ["thread", 1.0], ["timeout", 3.0]])

    def test_threads_are_identical_run_to_run(self):
        self.assertEqual(self.result("threads"), self.result("threads_again"))

    def test_seeded_random_streams(self):
        out = self.result("random")
        self.assertEqual(out["module_random"], out["module_expect"])
        self.assertEqual(out["instance"], out["instance_expect"])
        self.assertEqual(out["urandom"], out["urandom_expect"])
        self.assertEqual(out["uuid1"], out["uuid1_expect"])
        self.assertEqual(out["stats"]["draws"]["python.random"], 32)
        self.assertEqual(out["stats"]["draws"]["python.random.instance"], 64)
        self.assertEqual(out["stats"]["draws"]["python.uuid1"], 8)
        self.assertEqual(out["stats"]["draws"]["os.urandom"], 16 + 16 + 8 + 4 + 7)

    def test_seeded_mode_logs_real_ticks(self):
        out = self.result("seeded_ticks")
        a, b, c = out["values"]
        self.assertGreater(a, 1.7e18)  # the real clock
        self.assertEqual(out["logged"][:2], [a, b | 1 << 63])  # realtime as is, monotonic marked
        self.assertEqual(len(out["logged"]), 3)
        self.assertEqual(out["stats"]["reads"], 3)
        self.assertEqual(out["unserved"], {"cpu_clock/time.process_time": 1})


    def test_datetime_compatibility(self):
        import pickle
        import datetime as real
        out = self.result("compat")
        self.assertEqual(out["log"], "2026-01-01 00:00:00,000 hello\n")
        self.assertEqual(out["types"], [True, True, True, "datetime.datetime", "<class 'datetime.datetime'>", "datetime.datetime(2020, 1, 2, 0, 0)"])
        # byte-identical to the pickles of an unshimmed interpreter (this one)
        self.assertEqual(out["pickle0"], pickle.dumps(real.datetime(2026, 1, 1, 0, 0, 0, 1), 0).decode("latin-1"))
        self.assertEqual(out["pickle4"], pickle.dumps(real.datetime(2026, 1, 1, 0, 0, 0, 1, tzinfo=real.timezone.utc), 4).hex())
        self.assertEqual(out["roundtrips"], [True, True, True, True])
        self.assertTrue(out["sqlite"][0].startswith("2026-01-01 00:00:00.0000"), out["sqlite"])
        self.assertEqual(out["sqlite"][1], "2026-01-01")
        self.assertEqual(out["subclass"], ["Sub", False, 2026])


class PureParts(unittest.TestCase):
    def test_sleep_ns_rounds_up_like_cpython(self):
        self.assertEqual(_runtime._sleep_ns(1.5), 1_500_000_000)
        self.assertEqual(_runtime._sleep_ns(0.1), 100_000_000)
        self.assertEqual(_runtime._sleep_ns(1e-10), 1)
        self.assertEqual(_runtime._sleep_ns(0), 0)
        self.assertEqual(_runtime._sleep_ns(3), 3_000_000_000)
        self.assertEqual(_runtime._sleep_ns(True), 1_000_000_000)
        for bad, exc in ((-1, ValueError), (-1e-9, ValueError), (float("nan"), ValueError), ("1", TypeError), (None, TypeError)):
            with self.subTest(bad=bad):
                with self.assertRaises(exc):
                    _runtime._sleep_ns(bad)

    def test_child_env(self):
        env = _runtime._child_env({"A": "1"}, "0.3")
        self.assertEqual(env["DAL_STREAM"], "0.3")
        self.assertEqual(env["A"], "1")
        benv = _runtime._child_env({b"A": b"1"}, "0.4")
        self.assertEqual(benv[b"DAL_STREAM"], b"0.4")
        full = _runtime._child_env(None, "0.5")
        self.assertEqual(full["DAL_STREAM"], "0.5")
        self.assertEqual(full.get("PATH"), os.environ.get("PATH"))

    def test_not_installed_without_environment(self):
        r = run_python(["-c", "import dal, time; print(dal.mode(), dal.stream(), time.time() > 1.7e9)"], env={"PYTHONPATH": SHIM})
        self.assertEqual((r.returncode, r.stdout.strip(), r.stderr), (0, "None None True", ""))

    def test_unreachable_dald_is_one_line_and_unpatched(self):
        r = run_python(["-c", "import dal, time, random; print(dal.mode(), type(time.time).__name__)"],
                       env={"PYTHONPATH": SHIM, "DAL_SOCKET": "/nonexistent/dald.sock", "DAL_SESSION": "s", "DAL_STREAM": "0"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "None builtin_function_or_method")
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertTrue(lines[0].startswith("dal: cannot reach dald at /nonexistent/dald.sock"), lines[0])
        self.assertIn("real clock", lines[0])


if __name__ == "__main__":
    unittest.main()


class SessionToken(unittest.TestCase):
    """In a sandbox the token comes in a file (DAL_SESSION_TOKEN_FILE), so
    that every variable dal sets is the same in every run."""

    def setUp(self):
        self.saved = {k: os.environ.pop(k, None) for k in ("DAL_SESSION_TOKEN", "DAL_SESSION_TOKEN_FILE")}

    def tearDown(self):
        for k, v in self.saved.items():
            os.environ.pop(k, None)
            if v is not None:
                os.environ[k] = v

    def test_variable_then_file(self):
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".token", delete=False) as f:
            f.write("f1le\n")
        self.addCleanup(os.unlink, f.name)
        self.assertEqual(_runtime.session_token(), "")
        os.environ["DAL_SESSION_TOKEN_FILE"] = f.name
        self.assertEqual(_runtime.session_token(), "f1le")
        os.environ["DAL_SESSION_TOKEN"] = "v4r"
        self.assertEqual(_runtime.session_token(), "v4r")
        del os.environ["DAL_SESSION_TOKEN"]
        os.environ["DAL_SESSION_TOKEN_FILE"] = f.name + ".missing"
        self.assertEqual(_runtime.session_token(), "")


class DatetimeNowFastPath(unittest.TestCase):
    """datetime.now() on the strict clock takes the last instance plus one
    quantum when nothing else read the clock between: the same values as
    the general path, across second boundaries, sleeps and other reads."""

    def run_clock(self, quantum_ns, fast):
        import datetime
        import random
        import types
        from dal import _clock, _datetime
        import copyreg
        m = types.ModuleType("datetime_copy")
        m.__dict__.update(datetime.__dict__)
        c = _clock.StrictClock(1767225600 * 10**9 + 999_000_000 - 3000, 10**9, quantum_ns)
        if not fast:
            c.make_now = None  # the general path
        # patch registers picklers for the real classes and maps its fakes:
        # put this process's back after, for the other tests here
        saved = dict(copyreg.dispatch_table), dict(_datetime.FAKE_TO_REAL)
        _datetime.patch(m, c.time_ns, c)

        def restore():
            copyreg.dispatch_table.clear()
            copyreg.dispatch_table.update(saved[0])
            _datetime.FAKE_TO_REAL.clear()
            _datetime.FAKE_TO_REAL.update(saved[1])
        self.addCleanup(restore)
        r = random.Random(3)
        out = []
        for i in range(30_000):
            k = r.random()
            if k < 0.001:
                c.time()
            elif k < 0.0015:
                c.sleep(0.0004)
            elif k < 0.002:
                out.append(m.datetime.now(datetime.timezone.utc))
            d = m.datetime.now()
            if i % 97 == 0 or d.microsecond < 3:
                out.append(d)
        return out

    def test_same_values(self):
        for q in (1000, 3000, 1500):
            fast, general = self.run_clock(q, True), self.run_clock(q, False)
            self.assertEqual(len(fast), len(general))
            self.assertEqual(fast, general, "quantum %d ns" % q)
            self.assertGreaterEqual(general[-1].second, 1, "the run crossed no second")
