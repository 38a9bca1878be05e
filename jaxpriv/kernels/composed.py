"""The composed ε(δ) as the catalog registers it, with its CPU path in the native kernel
(SPEC §6): the least ``ε ≥ 0`` with ``δ_k(ε) ≤ δ`` for ``k`` uses, max over ordered pairs.

:func:`jaxpriv.core.composition.eps_composed` is the reference: for ``m ≥ 3`` outputs the
binomial-tail sums of :mod:`jaxpriv.core.composition_tails`, whose searches and rounds over the
pairs run *in step* across a batch (a ``while_loop`` waits for its slowest mechanism; a gather
per table lookup). Here, on a CPU where :func:`jaxpriv.kernels.native.available`, in float32
**and float64** (the value is exact in double precision either way), for ``2 ≤ m`` outputs and
``k ≤`` :data:`jaxpriv.core.composition.MAX_TAIL_USES`:

* the value comes from :func:`jaxpriv.kernels.native.composed_eps` (``composed_eps.cc``): the
  same algorithm step for step, each mechanism on its own, the lookups multiplying linear
  masses where every atom's mass is well inside double's range (no exponential in the search's
  inner loop), the Rényi bound's minimum over the reference's 48 orders by a ternary search;
* its derivative is the segment formula of the attaining pair on the segment the kernel's
  search ended on (:func:`jaxpriv.core.composition_tails.attained_jvp`), not clipped to the
  kernel's bracket: the bracket is found in double, and recomputed sums at its ends can put
  the segment step a rounding below ``lo`` (in float32 the bracket may even round to one
  point), where a clip would make the derivative 0 — as the reference's own float32 search
  does on some mechanisms (tests/test_composed_native.py).

It agrees with the reference to ~1e-15 relative (tests/test_composed_native.py, with 50-digit
mpmath on randomized response and on mechanisms with zeros). ``JAXPRIV_NATIVE=0`` gives the
reference everywhere. Float64 violation checks use this path too: both are exact in double, and
the tests hold them to each other and to mpmath.

Examples:
  >>> from jaxpriv import families
  >>> from jaxpriv.kernels import composed
  >>> round(float(composed.eps_composed(families.randomized_response(1.0), k=10,
  ...                                   delta=1e-5)), 4)
  9.9998
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from jaxpriv.core import composition
from jaxpriv.core.composition_tails import attained_jvp, eps_over_pairs
from jaxpriv.core.mechanisms import Mechanism
from jaxpriv.kernels import native

__all__ = ["eps_composed", "uses_native_kernel"]


def uses_native_kernel(log_K: Array, k: int) -> bool:
    """Whether :func:`eps_composed` takes the native kernel for this ``log_K`` (float32 or
    float64 ``(*b, n, m)``) and ``k``: on a CPU where the kernel is available, ``m ≥ 2``,
    ``k ≤`` :data:`~jaxpriv.core.composition.MAX_TAIL_USES` and the outer count vectors
    (``C(k + m − 2, m − 2)``) within :data:`~jaxpriv.core.composition.MAX_COUNT_VECTORS`."""
    m = jnp.shape(log_K)[-1]
    return (jax.default_backend() == "cpu"
            and jnp.result_type(log_K) in (jnp.float32, jnp.float64)
            and m >= 2 and k <= composition.MAX_TAIL_USES
            and composition.number_of_count_vectors(k, m - 1) <= composition.MAX_COUNT_VECTORS
            and native.available())


def eps_composed(mech: Mechanism, k=10, delta=1e-5, neighbours=None) -> Float[Array, "*b"]:
    """The least ``ε ≥ 0`` with ``δ_k(ε) ≤ δ`` for ``k`` uses, max over ordered pairs (SPEC §6):
    the native kernel's on a CPU (:func:`uses_native_kernel`), else
    :func:`jaxpriv.core.composition.eps_composed`."""
    k = composition.checked_uses(k)
    d = composition.checked_number("eps_composed", "delta", delta, lambda v: 0.0 < v < 1.0,
                                   "in (0, 1)")
    log_K = mech.log_K
    if not uses_native_kernel(log_K, k):
        return composition.eps_composed(mech, k, d, neighbours)
    n, m = log_K.shape[-2:]
    pairs = composition._pair_indices(n, neighbours)
    batch = log_K.shape[:-2]
    flat = log_K.reshape((-1, n, m))
    if len(pairs) == 0 or flat.shape[0] == 0:
        return jnp.zeros(batch, log_K.dtype)
    return _native(k, _Pairs(pairs), flat, jnp.asarray(d, log_K.dtype)).reshape(batch)


class _Pairs:
    """The ordered pairs as a hashable static argument."""

    def __init__(self, pairs: np.ndarray):
        self.pairs = np.asarray(pairs, np.int32).reshape(-1, 2)
        self._key = self.pairs.tobytes()

    def __hash__(self):
        return hash(self._key)

    def __eq__(self, other):
        return isinstance(other, _Pairs) and self._key == other._key


def _kernel(k: int, pairs: _Pairs, log_K, delta):
    """The kernel's ``(ε, which, lo, hi)`` for the ``(b, n, m)`` batch at the scalar ``delta``,
    NaN where a mechanism has NaN (as the kernel gives): that also makes them vary over a
    ``shard_map``'s axes as the input does (a custom JVP's primal and tangent must agree)."""
    out = native.composed_eps(log_K, jnp.broadcast_to(delta, log_K.shape[:1]), k, pairs.pairs)
    nan = jnp.isnan(log_K).any(axis=(-2, -1)) | jnp.isnan(delta)
    best, which, lo, hi = (jnp.where(nan, jnp.nan, a) if a.dtype != jnp.int32
                           else jnp.where(nan, 0, a) for a in out)
    return best, which, lo, hi


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1))
def _native(k: int, pairs: _Pairs, log_K, delta):
    """``ε`` of the ``(b, n, m)`` batch at the scalar ``delta``."""
    return _kernel(k, pairs, log_K, delta)[0]


@_native.defjvp
def _native_jvp(k, pairs, primals, tangents):
    log_K, delta = primals
    d_log_K, _ = tangents  # δ is a parameter: its tangent is not asked for
    m = log_K.shape[-1]
    delta = jax.lax.stop_gradient(delta)
    counts = composition.count_vectors(k, m - 1)
    log_mult = composition.log_multinomials(k, m - 1)
    best, which, lo, hi = _kernel(k, pairs, jax.lax.stop_gradient(log_K), delta)
    _, tangent = attained_jvp(log_K, d_log_K, pairs.pairs, k, delta, counts, log_mult,
                              best, which, lo, hi, bracket=False)
    return best, jnp.where(jnp.isfinite(best), tangent, 0.0)
