"""The accountant libraries jaxpriv calls, and what their adapters have in common.

Which libraries (:data:`LIBRARIES`), the versions the adapters were verified against
(:data:`VERIFIED_VERSIONS`), which are installed (:data:`AVAILABLE`, :func:`installed_versions`),
the adapters' shared conventions (their argument checks; a NaN from a library raised as
:class:`LibraryNaNError`, never passed on as a claim; see
:mod:`jaxpriv.catalog.accountant_adapters`) and :func:`vectorized`, an adapter applied to an
array for ``jax.pure_callback``.

Pure Python/NumPy: imports nothing from jaxpriv and no library (``importlib.util.find_spec``
only), so it imports, and :data:`AVAILABLE` reports ``False``, where none is installed.

Examples:
  >>> sorted(LIBRARIES)
  ['autodp', 'dp_accounting', 'opendp', 'prv_accountant']
"""

from __future__ import annotations

import importlib.util
import math
from typing import Any, Callable

import numpy as np

__all__ = [
    "AVAILABLE", "LIBRARIES", "LibraryNaNError", "VERIFIED_VERSIONS", "installed_versions",
    "vectorized",
]

#: The libraries, by import name, and their distribution names on PyPI.
LIBRARIES: dict[str, str] = {
    "dp_accounting": "dp-accounting",
    "autodp": "autodp",
    "opendp": "opendp",
    "prv_accountant": "prv-accountant",
}

#: The versions the adapters' formulas (accountant_adapters) were read from and tested against.
VERIFIED_VERSIONS: dict[str, str] = {
    "dp_accounting": "0.6.0",
    "autodp": "0.2.3.1",
    "opendp": "0.16.0",
    "prv_accountant": "0.2.0",
}


def _available(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken or half-installed package
        return False


#: Whether each library can be imported here (``importlib.util.find_spec``; nothing imported).
AVAILABLE: dict[str, bool] = {name: _available(name) for name in LIBRARIES}


def installed_versions() -> dict[str, str | None]:
    """The installed version of each library (``None`` where it is not installed)."""
    from importlib import metadata
    versions: dict[str, str | None] = {}
    for module, dist in LIBRARIES.items():
        try:
            versions[module] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[module] = None
    return versions


class LibraryNaNError(FloatingPointError):
    """A library returned NaN for a premise level: there is no claim to audit at that level."""


# --------------------------------------------------------------------------------------------
# argument checks
# --------------------------------------------------------------------------------------------


def _level(x: Any, name: str = "x") -> float:
    x = float(x)
    if math.isnan(x) or x < 0:
        raise ValueError(f"{name} must be a premise level in [0, +inf], got {x}")
    return x


def _order(order: Any) -> float:
    order = float(order)
    if not order > 1:  # also rejects NaN
        raise ValueError(f"order must be > 1, got {order}")
    return order


def _delta(delta: Any, *, zero_ok: bool = False) -> float:
    delta = float(delta)
    if not (0 <= delta < 1 if zero_ok else 0 < delta < 1):
        raise ValueError(f"delta must be in {'[0, 1)' if zero_ok else '(0, 1)'}, got {delta}")
    return delta


def _epsilon(epsilon: Any) -> float:
    epsilon = float(epsilon)
    if not epsilon >= 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon}")
    return epsilon


def _claim(value: Any, what: str) -> float:
    value = float(value)
    if math.isnan(value):
        raise LibraryNaNError(f"{what} returned NaN")
    return value


# --------------------------------------------------------------------------------------------
# vectorisation for jax.pure_callback
# --------------------------------------------------------------------------------------------


def vectorized(fn: Callable[..., float], /, *, nan_ok: bool = False, cache_size: int = 4096,
               **fixed: Any) -> Callable[[Any], np.ndarray]:
    """A NumPy function applying ``fn(x, **fixed)`` to every entry of an array of premise levels.

    Returns ``f(xs) -> np.ndarray`` (float64, the shape of ``xs``) for ``jax.pure_callback``.
    Values are cached by their float value (up to ``cache_size`` entries, then the cache is
    cleared), since a batch of mechanisms repeats levels (0, ``+∞``, families' parameters).
    With ``nan_ok`` an entry whose adapter raises :class:`LibraryNaNError` becomes NaN instead
    of failing the batch; every other exception propagates.

    Examples:
      >>> f = vectorized(lambda x, *, k: k * x, k=2.0)
      >>> f(np.array([[0.5, 1.0], [0.5, np.inf]])).tolist()
      [[1.0, 2.0], [1.0, inf]]
    """
    cache: dict[float, float] = {}

    def one(x: float) -> float:
        try:
            return cache[x]
        except KeyError:
            pass
        try:
            value = float(fn(x, **fixed))
        except LibraryNaNError:
            if not nan_ok:
                raise
            value = math.nan
        if len(cache) >= cache_size:
            cache.clear()
        cache[x] = value
        return value

    def apply(xs: Any) -> np.ndarray:
        xs = np.asarray(xs, dtype=np.float64)
        out = np.fromiter((one(float(x)) for x in xs.ravel()), dtype=np.float64, count=xs.size)
        return out.reshape(xs.shape)

    apply.__name__ = f"vectorized_{getattr(fn, '__name__', 'fn')}"
    return apply
