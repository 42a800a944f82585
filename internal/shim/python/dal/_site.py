"""What sitecustomize.py does, kept here so that it is byte-compiled once."""

import os
import sys


def main(sitecustomize_file):
    if os.environ.get("DAL_SOCKET") and os.environ.get("DAL_SESSION"):
        try:
            from . import _runtime
            _runtime.install()
        except Exception as e:  # install() never raises; importing might
            sys.stderr.write("dal: cannot load the Python shim (%s: %s): this process runs on the real clock and real randomness\n" % (type(e).__name__, e))
    chain(os.path.dirname(os.path.abspath(sitecustomize_file)))


def _is_dal(d):
    return os.path.isfile(os.path.join(d, "dal", "_runtime.py")) and os.path.isfile(os.path.join(d, "sitecustomize.py"))


def chain(here):
    """Run the next sitecustomize on sys.path that is not a dal shim, as
    `sitecustomize`. Its exceptions are reported, as site.py reports them."""
    entries = []
    for p in sys.path:
        d = os.path.abspath(p or os.getcwd())
        try:
            if os.path.samefile(d, here) or _is_dal(d):
                continue
        except OSError:
            pass
        entries.append(p)
    try:
        # the import system's own modules, loaded before site runs:
        # importlib.util would cost ~4 ms (contextlib, collections, ...)
        bootstrap = sys.modules["_frozen_importlib"]
        PathFinder = sys.modules["_frozen_importlib_external"].PathFinder
        spec = PathFinder.find_spec("sitecustomize", entries)
    except Exception as e:
        sys.stderr.write("dal: could not look for another sitecustomize (%s: %s)\n" % (type(e).__name__, e))
        return None
    if spec is None or spec.loader is None:
        return None
    module = bootstrap.module_from_spec(spec)
    ours = sys.modules.get("sitecustomize")
    sys.modules["sitecustomize"] = module  # `import sitecustomize` gets the user's module
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        if ours is not None:
            sys.modules["sitecustomize"] = ours
        sys.stderr.write("dal: error in sitecustomize %s; set PYTHONVERBOSE for traceback:\n%s: %s\n" % (spec.origin, type(e).__name__, e))
        if sys.flags.verbose:
            import traceback
            traceback.print_exc()
    return module
