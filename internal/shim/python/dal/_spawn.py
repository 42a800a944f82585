"""Spawn naming (the manual is dal._runtime's docstring, "Spawn naming"):
before a child starts, dald reserves its stream name, which the child finds
in DAL_STREAM; a custom environment that dropped what keeps a child under
dal gets it back. Also the exits that skip atexit (exec, os._exit)."""

import os
import _thread

from ._say import dbg

_o_posix_spawn = getattr(os, "posix_spawn", None)
_o_posix_spawnp = getattr(os, "posix_spawnp", None)
_o_execv = os.execv
_o_execve = os.execve
_o__exit = os._exit

_PROPAGATE = ("DAL_SOCKET", "DAL_SESSION", "DAL_SESSION_TOKEN", "DAL_SESSION_TOKEN_FILE", "PYTHONPATH", "NODE_OPTIONS")
SHIM_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _node_require():
    """The `--require .../dal-register.js` part of our NODE_OPTIONS."""
    opts = os.environ.get("NODE_OPTIONS", "")
    end = opts.find("dal-register.js")
    start = opts.rfind("--require", 0, end)
    if end < 0 or start < 0:
        return None
    end += len("dal-register.js")
    if end < len(opts) and opts[end] == '"':
        end += 1
    return opts[start:end]


def child_env(env, child):
    """A copy of env (os.environ when None) with DAL_STREAM=child. A custom
    env that dropped what keeps a child under dal (DAL_SOCKET, DAL_SESSION,
    DAL_SESSION_TOKEN, the shims in PYTHONPATH and NODE_OPTIONS) gets it
    back."""
    if env is None:
        e = dict(os.environ)
        e["DAL_STREAM"] = child
        return e
    e = dict(env)
    as_bytes = any(isinstance(k, bytes) for k in e)

    def key(k):
        return k.encode() if as_bytes else k

    def val(v):
        return os.fsencode(v) if as_bytes else v

    def text(v):
        return os.fsdecode(v) if isinstance(v, bytes) else str(v)
    e[key("DAL_STREAM")] = val(child)
    for k in _PROPAGATE:
        if key(k) not in e and k in os.environ:
            e[key(k)] = val(os.environ[k])
    pp = text(e.get(key("PYTHONPATH"), ""))
    if SHIM_DIR not in pp.split(os.pathsep):
        e[key("PYTHONPATH")] = val(os.pathsep.join(p for p in (SHIM_DIR, pp) if p))
    no = text(e.get(key("NODE_OPTIONS"), ""))
    req = _node_require()
    if req and "dal-register.js" not in no:
        e[key("NODE_OPTIONS")] = val((req + " " + no).strip())
    return e


class Spawner:
    """Names children before they start: subprocess, posix_spawn,
    multiprocessing's spawnv_passfds and fork. A fork holds the connection's
    lock from before to after (the child must not inherit a half-sent
    request); the child starts over with fork_child_name."""

    __slots__ = ("session", "tls", "env_lock", "fork_child_name")

    def __init__(self, session):
        self.session = session
        self.tls = _thread._local()  # in_spawn: inside Popen; fork_locked: the connection a fork holds
        self.env_lock = _thread.allocate_lock()
        self.fork_child_name = None

    def patch_os(self, finish):
        """Wrap os's spawns, execs and _exit; finish() flushes and reports
        before an exit that skips atexit."""
        if _o_posix_spawn is not None:
            os.posix_spawn = self.wrap_posix_spawn(_o_posix_spawn)
        if _o_posix_spawnp is not None:
            os.posix_spawnp = self.wrap_posix_spawn(_o_posix_spawnp)
        os.execv, os.execve, os._exit = _exits(finish)

    def patch_subprocess(self, sp):
        P = sp.Popen
        orig = P._execute_child
        if getattr(orig, "_dal", False):
            return
        code = orig.__code__
        params = code.co_varnames[:code.co_argcount]
        idx = params.index("env") - 1 if "env" in params else None  # position in *args (without self)
        reserve, tls = self.session.reserve, self.tls

        def _execute_child(self, *args, **kwargs):
            child = reserve()
            if child is not None and idx is not None:
                if "env" in kwargs:
                    kwargs["env"] = child_env(kwargs["env"], child)
                elif len(args) > idx:
                    args = args[:idx] + (child_env(args[idx], child),) + args[idx + 1:]
                dbg("subprocess child gets stream %s" % child)
            tls.in_spawn = True
            try:
                return orig(self, *args, **kwargs)
            finally:
                tls.in_spawn = False
        _execute_child._dal = True
        _execute_child.__doc__ = orig.__doc__
        P._execute_child = _execute_child

    def wrap_posix_spawn(self, orig):
        reserve, tls = self.session.reserve, self.tls

        def posix_spawn(path, argv, *args, **kwargs):
            if not getattr(tls, "in_spawn", False):
                child = reserve()
                if child is not None:
                    # env is the third positional argument; omitted (3.13+) or
                    # None, it means os.environ
                    args = (child_env(args[0] if args else None, child),) + args[1:]
            return orig(path, argv, *args, **kwargs)
        posix_spawn.__name__ = orig.__name__
        posix_spawn.__doc__ = orig.__doc__
        return posix_spawn

    def patch_mp_util(self, u):
        orig = getattr(u, "spawnv_passfds", None)
        if orig is None or getattr(orig, "_dal", False):
            return
        spawner = self

        def spawnv_passfds(path, args, passfds):
            child = spawner.session.reserve()
            if child is None:
                return orig(path, args, passfds)
            with spawner.env_lock:  # the child inherits the C environment at fork
                prev = os.environ.get("DAL_STREAM")
                os.environ["DAL_STREAM"] = child
                try:
                    return orig(path, args, passfds)
                finally:
                    if prev is None:
                        os.environ.pop("DAL_STREAM", None)
                    else:
                        os.environ["DAL_STREAM"] = prev
        spawnv_passfds._dal = True
        u.spawnv_passfds = spawnv_passfds

    def fork_before(self):
        self.fork_child_name = None
        conn = self.session.conn
        if conn is None:
            return
        conn.lock.acquire()
        self.tls.fork_locked = conn
        self.fork_child_name = self.session.reserve(locked=True)

    def fork_parent(self):
        conn = getattr(self.tls, "fork_locked", None)
        if conn is not None:
            self.tls.fork_locked = None
            conn.lock.release()

    def fork_child(self):
        """In the child: the connection the fork held (or None) and the
        child's reserved name (or None)."""
        held = getattr(self.tls, "fork_locked", None)
        self.tls.fork_locked = None
        return held, self.fork_child_name

    def reset(self):
        """A new stream (a forked child): the environment lock starts free."""
        self.env_lock = _thread.allocate_lock()


def _exits(finish):
    """os.execv, os.execve and os._exit that finish() first: exec replaces
    the image, and _exit leaves, without atexit."""
    def before_exec():
        try:
            finish()
        except Exception:
            pass

    def execv(path, args):
        before_exec()
        return _o_execv(path, args)

    def execve(path, args, env):
        before_exec()
        return _o_execve(path, args, env)

    def _exit(status):
        try:
            finish()
        except BaseException:
            pass
        _o__exit(status)

    for f, o in ((execv, _o_execv), (execve, _o_execve), (_exit, _o__exit)):
        f.__doc__ = o.__doc__
        f.__name__ = o.__name__
    return execv, execve, _exit
