"""jaxpriv's version (one place: the package, run records and reports read it here)."""

__version__ = "0.1.0"

import os as _os

_SOURCE_SUFFIXES = (".py", ".cc", ".h")


def source_files() -> dict[str, tuple[int, int]]:
    """Every source file of the package (``*.py``, the native kernel's ``*.cc`` and ``*.h``) by
    its path relative to the package, with its modification time (ns) and size now.

    Returns:
      ``{relative path: (st_mtime_ns, st_size)}``, sorted by path.
    """
    package = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
    found = {}
    for folder, subfolders, files in _os.walk(package):
        subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
        for name in files:
            if name.endswith(_SOURCE_SUFFIXES):
                path = _os.path.join(folder, name)
                stat = _os.stat(path)
                found[_os.path.relpath(path, package)] = (stat.st_mtime_ns, stat.st_size)
    return dict(sorted(found.items()))


SOURCES_AT_IMPORT = source_files()
"""The package's source files as they were when this process imported it: a file changed, added
or removed since then may not be the code running (:mod:`jaxpriv.engines.program_cache` keeps
nothing then). A snapshot, not a comparison with the clock: a checkout whose files carry times
ahead of this machine's clock (copied from another machine) is not "changed"."""
