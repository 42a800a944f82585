"""The shim's voice: one ``dal:`` line on stderr per thing worth saying.

``say_once`` remembers what it said (by key) for the life of the process;
``forget`` lets a forked child say a key again. ``dbg`` speaks only with
``DAL_SHIM_DEBUG=1``. ``unserved`` counts what the shim leaves real, for
the exit report.
"""

import os
import sys

DEBUG = os.environ.get("DAL_SHIM_DEBUG") == "1"

_said = set()  # keys say_once has said


def say(msg):
    """One `dal:` line on stderr. Never raises."""
    try:
        sys.stderr.write("dal: " + msg + "\n")
        sys.stderr.flush()
    except Exception:
        try:
            os.write(2, ("dal: " + msg + "\n").encode("utf-8", "replace"))
        except Exception:
            pass


def say_once(key, msg):
    if key not in _said:
        _said.add(key)
        say(msg)


def forget(key):
    _said.discard(key)


#: Calls of clock and random APIs the shim leaves real, by
#: "<category>/<api>" (category clock or random): sent in the exit report
#: as `unserved`, they become escapes in syscalls.json.
UNSERVED = {}


def unserved(what):
    what = what.encode("utf-8")[:120].decode("utf-8", "ignore")  # dald takes names of up to 128 bytes
    if what in UNSERVED or len(UNSERVED) < 64:
        UNSERVED[what] = UNSERVED.get(what, 0) + 1


def dbg(msg):
    if DEBUG:
        say(msg)
