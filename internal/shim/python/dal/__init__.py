"""dal: the deterministic execution runtime, seen from inside a Python agent.

Under ``dal-exec`` this interpreter is already virtualized (sitecustomize
installed the shim before your code ran). This module only lets an agent ask
where it stands:

    dal.mode()    'strict', 'seeded', 'logged', 'default', or None outside dal
    dal.stream()  this process's clock stream, e.g. '0' or '0.1', or None
    dal.now()     realtime ns on this process's clock (a clock read: in strict
                  mode it advances virtual time by one quantum)
    dal.stats()   {'round_trips', 'reads', 'mode', 'stream', 'now_ns',
                   'sleep_ns', 'timers', 'draws', 'replay'}

Outside dal-exec (no DAL_SOCKET/DAL_SESSION) nothing is patched, mode() and
stream() return None, now() is time.time_ns().

It also lets an agent tell dal-exec about its refinement iterations and its
checkpoints (docs/marks.md):

    dal.iteration(score=None, artifacts=(), dimensions=None, note='', name='')
        one refinement iteration: score in [0, 1] (or None with dimensions,
        e.g. {'validation': 1.0, 'completeness': 0.8}, each in [0, 1]) and
        the files that make up its output. dal-exec keeps every iteration and
        places the best one's artifacts in the workspace.
    dal.checkpoint(name, artifacts=(), state=None, tag='', note='')
        a checkpoint: the artifacts plus `state`, any JSON-serializable value
        handed back on recovery; a tagged checkpoint is kept forever.
    dal.phase(name, note='')
        the start of a phase of the work (plan, build, test, ...); with
        dal-exec --auto-checkpoint phase_start it becomes a checkpoint.

Artifacts are paths (files or directories, expanded to their regular files
sorted by path), relative to the current directory. Both copy the files
when called and return the mark as written to mark.json, a dict such as
{'v': 1, 'kind': 'iteration', 'seq': 2, 'score': 0.85, 'artifacts':
[{'path': 'out/report.md', 'sha256': ..., 'size': ..., 'mode': ...}], ...},
or None outside dal (no DAL_MARKS in the environment). Bad input (a score
out of range or a bool, state that is not JSON, a missing artifact) raises
ValueError or FileNotFoundError and writes nothing. Threads and processes
may call them concurrently: each mark gets its own number.
"""

from ._runtime import now, stream, mode, stats, ORIG

_MARKS = ("iteration", "checkpoint", "phase")


def __getattr__(name):
    """iteration, checkpoint and phase load dal._marks on first use: every
    process under dal imports this package at start-up."""
    if name in _MARKS:
        from . import _marks
        return getattr(_marks, name)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


__all__ = ["now", "stream", "mode", "stats", "ORIG", "iteration", "checkpoint", "phase"]
