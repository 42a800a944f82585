"""dal's Python entry point, found through the PYTHONPATH dal-exec sets.

If DAL_SOCKET and DAL_SESSION are set, install dal's runtime shim
(dal/_runtime.py). Then run the sitecustomize this file shadows, if any: the
next one on sys.path that is not a dal shim, under the name `sitecustomize`,
its exceptions reported as site.py would, never raised (dal/_site.py).
"""


def _dal_site(here):
    import sys
    # dal-exec sets PYTHONDONTWRITEBYTECODE for the agent; the shim's own
    # modules are still cached (in the shim's directory, outside any
    # workspace), or every process would spend ~15 ms compiling them.
    dont_write = sys.dont_write_bytecode
    sys.dont_write_bytecode = False
    try:
        from dal import _site
    except Exception as e:  # never crash the agent because of the shim
        sys.stderr.write("dal: cannot load the Python shim (%s: %s): this process runs on the real clock and real randomness\n" % (type(e).__name__, e))
        return
    finally:
        sys.dont_write_bytecode = dont_write
    _site.main(here)


_dal_site(__file__)
del _dal_site
