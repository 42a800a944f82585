"""Paths and helpers shared by the shim's tests (not a test module)."""

import os
import subprocess
import sys

TESTS = os.path.dirname(os.path.abspath(__file__))
SHIM = os.path.dirname(TESTS)                                   # internal/shim/python
ROOT = os.path.abspath(os.path.join(SHIM, "..", "..", ".."))    # the repository
AGENTS = os.path.join(TESTS, "agents")
DAL_EXEC = os.environ.get("DAL_EXEC") or os.path.join(ROOT, "bin", "dal-exec")

if SHIM not in sys.path:
    sys.path.insert(0, SHIM)


def run_python(args, env=None, timeout=60, cwd=None):
    """Run the interpreter under test with a clean environment plus env."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("DAL_") and k not in ("PYTHONPATH",)}
    e.update(env or {})
    return subprocess.run([sys.executable] + list(args), env=e, capture_output=True, text=True, timeout=timeout, cwd=cwd)


def dal_run(run_args, cmd, env=None, timeout=120, cwd=None):
    """`dal-exec run RUN_ARGS -- CMD`; returns the CompletedProcess."""
    # DAL_* variables are dal-exec flags (DAL_MODE, DAL_SEED, ...): none leak in
    e = {k: v for k, v in os.environ.items() if not k.startswith("DAL_")}
    e.update(env or {})
    argv = [DAL_EXEC, "run", "--cpus", "all"] + list(run_args) + ["--"] + list(cmd)
    return subprocess.run(argv, env=e, capture_output=True, text=True, timeout=timeout, cwd=cwd or ROOT)
