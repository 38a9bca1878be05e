"""jaxpriv's version (one place: the package, run records and reports read it here)."""

__version__ = "0.1.0"
