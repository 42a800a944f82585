"""dal.iteration and dal.checkpoint: marks written into $DAL_MARKS.

The protocol is docs/marks.md (the Go reference is internal/marks). A mark is
a numbered directory claimed with mkdir (atomic, so concurrent threads and
processes never share a number), copies of the artifacts under files/, and
mark.json written last (mark.json.tmp, then rename).

Everything is validated before a number is claimed: bad input raises
ValueError (or FileNotFoundError, PermissionError for artifacts) and writes
nothing. The mark's at_ns is one read of this process's realtime clock, the
virtual one under the shim, so record and replay write the same value. No
randomness is used and no other clock is read.
"""

import os

VERSION = 1
_CHUNK = 1 << 20


def iteration(score=None, artifacts=(), dimensions=None, note="", name=""):
    """Record a refinement iteration; returns the mark (a dict, as written to
    mark.json), or None outside dal (no DAL_MARKS in the environment)."""
    return _write("iteration", score=score, dimensions=dimensions, name=name, tag="", state=None,
                  note=note, artifacts=artifacts)


def checkpoint(name, artifacts=(), state=None, tag="", note=""):
    """Record a checkpoint named `name`; `state` is any JSON-serializable value
    given back on recovery. Returns the mark (a dict), or None outside dal."""
    if not isinstance(name, str) or not name:
        raise ValueError("dal.checkpoint: the name must be a non-empty string, got %r" % (name,))
    return _write("checkpoint", score=None, dimensions=None, name=name, tag=tag, state=state,
                  note=note, artifacts=artifacts)


def phase(name, note=""):
    """Mark the start of a phase of the agent's work named `name` (with
    --auto-checkpoint phase_start dal-exec stores a checkpoint there).
    Returns the mark (a dict), or None outside dal."""
    if not isinstance(name, str) or not name:
        raise ValueError("dal.phase: the name must be a non-empty string, got %r" % (name,))
    return _write("phase", score=None, dimensions=None, name=name, tag="", state=None,
                  note=note, artifacts=())


def _write(kind, score, dimensions, name, tag, state, note, artifacts):
    where = "dal." + kind
    root = os.environ.get("DAL_MARKS")
    if not root:
        return None
    import json
    if score is not None:
        score = _unit(where, "the score", score)
    dims = {}
    if dimensions is not None:
        if not isinstance(dimensions, dict):
            raise ValueError("%s: dimensions must be a dict of name -> number in [0, 1], got %s" % (where, type(dimensions).__name__))
        for k, v in dimensions.items():
            if not isinstance(k, str) or not k:
                raise ValueError("%s: dimension names must be non-empty strings, got %r" % (where, k))
            dims[k] = _unit(where, "dimension %r" % k, v)
    for what, s in (("name", name), ("tag", tag), ("note", note)):
        if not isinstance(s, str):
            raise ValueError("%s: the %s must be a string, got %s" % (where, what, type(s).__name__))
    if state is not None:
        try:
            state = json.loads(json.dumps(state, allow_nan=False))
        except (TypeError, ValueError, RecursionError) as e:
            raise ValueError("%s: the state must be JSON-serializable (%s)" % (where, e)) from None
    files = _expand(where, artifacts)

    # Valid: claim a number, copy, then publish mark.json.
    from . import _runtime
    at_ns = int(_runtime.now())  # the agent's clock (virtual under the shim)
    ws = os.environ.get("DAL_WORKSPACE") or ""
    d, seq = _claim(os.path.join(root, kind + "s"))
    try:
        os.mkdir(os.path.join(d, "files"))
        arts = []
        for i, src in enumerate(files):
            rel = "files/%d" % i
            sha, size, mode = _copy(src, os.path.join(d, "files", str(i)))
            arts.append({"path": _rel_to(ws, src), "abs": src, "file": rel, "sha256": sha, "size": size, "mode": mode})
        mark = {"v": VERSION, "kind": kind, "seq": seq, "score": score}
        # Empty optional fields are left out, as the Go writer does.
        if dims:
            mark["dimensions"] = dims
        if name:
            mark["name"] = name
        if tag:
            mark["tag"] = tag
        if state is not None:
            mark["state"] = state
        if note:
            mark["note"] = note
        mark.update({"artifacts": arts, "runtime": "python", "pid": os.getpid(), "at_ns": at_ns})
        tmp = os.path.join(d, "mark.json.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps(mark, indent=2, allow_nan=False) + "\n")
        os.replace(tmp, os.path.join(d, "mark.json"))
    except BaseException:
        # A mark that cannot be completed is removed, not left half-written.
        import shutil
        shutil.rmtree(d, ignore_errors=True)
        raise
    return mark


def _unit(where, what, v):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError("%s: %s must be a number in [0, 1], got %r" % (where, what, v))
    f = float(v)
    if not 0.0 <= f <= 1.0:  # NaN fails too
        raise ValueError("%s: %s must be a number in [0, 1], got %r" % (where, what, v))
    return f


def _expand(where, artifacts):
    """The absolute paths of the regular files named by artifacts (files or
    directories, relative to the current directory), directories expanded to
    their regular files sorted by path. Raises before anything is written."""
    if artifacts is None:
        return []
    if isinstance(artifacts, (str, bytes, os.PathLike)):
        artifacts = [artifacts]
    try:
        artifacts = list(artifacts)
    except TypeError:
        raise ValueError("%s: artifacts must be a path or a list of paths, got %s" % (where, type(artifacts).__name__)) from None
    import stat
    out = []
    for p in artifacts:
        if not isinstance(p, (str, bytes, os.PathLike)):
            raise ValueError("%s: an artifact must be a path, got %r" % (where, p))
        p = os.path.abspath(os.fsdecode(p))
        try:
            st = os.stat(p)
        except FileNotFoundError:
            import errno
            raise FileNotFoundError(errno.ENOENT, "%s: artifact does not exist" % where, p) from None
        if stat.S_ISREG(st.st_mode):
            found = [p]
        elif stat.S_ISDIR(st.st_mode):
            found = []
            _walk(p, found)
            found.sort(key=os.fsencode)
        else:
            raise ValueError("%s: artifact %s is not a regular file or a directory" % (where, p))
        for f in found:
            if not os.access(f, os.R_OK):
                import errno
                raise PermissionError(errno.EACCES, "%s: artifact is not readable" % where, f)
        out.extend(found)
    return out


def _walk(d, found):
    """Regular files under d, symbolic links not followed."""
    with os.scandir(d) as it:
        entries = list(it)
    for e in entries:
        if e.is_dir(follow_symlinks=False):
            _walk(e.path, found)
        elif e.is_file(follow_symlinks=False):
            found.append(e.path)


def _rel_to(ws, p):
    """p relative to the workspace with / separators when inside it, else p."""
    if not ws:
        return p
    rel = os.path.relpath(p, ws)
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        return p
    return rel.replace(os.sep, "/")


def _copy(src, dst):
    import hashlib
    h = hashlib.sha256()
    size = 0
    fd = os.open(src, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode & 0o777
        with open(dst, "xb") as out:
            while True:
                b = os.read(fd, _CHUNK)
                if not b:
                    break
                h.update(b)
                out.write(b)
                size += len(b)
    finally:
        os.close(fd)
    return h.hexdigest(), size, mode


def _claim(parent):
    """mkdir the next %04d directory in parent; returns (path, number)."""
    os.makedirs(parent, exist_ok=True)
    with os.scandir(parent) as it:
        n = 1 + max((int(e.name) for e in it if e.name.isascii() and e.name.isdigit() and e.is_dir()), default=0)
    while True:
        d = os.path.join(parent, "%04d" % n)
        try:
            os.mkdir(d)
            return d, n
        except FileExistsError:
            n += 1
