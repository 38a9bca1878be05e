"""jaxpriv's version (one place: the package, run records and reports read it here)."""

__version__ = "0.1.0"

import time as _time

IMPORTED_AT = _time.time()
"""When this process began importing the package (this module comes first): a source file
changed since then may not be the code running (:mod:`jaxpriv.engines.program_cache` keeps
nothing then)."""
