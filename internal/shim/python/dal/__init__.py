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
"""

from ._runtime import now, stream, mode, stats, ORIG

__all__ = ["now", "stream", "mode", "stats", "ORIG"]
