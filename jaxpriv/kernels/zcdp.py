"""The zCDP level ``ρ = sup_{α>1} D_α/α`` (Bun, Steinke 2016, Def. 1.1), max over ordered pairs,
with its float32 path on the CPU in the native kernel.

:func:`jaxpriv.core.pair_levels.zcdp` is the reference: in float64 a branch and bound over the
order, in float32 a 12-point grid and 16 golden-section steps, each step a vector operation over
the pairs' short axis of outputs. That float32 level is what sweeps screen with and what a
zCDP-premise search's retraction evaluates ~15 times a step, and it was most of such a search's
time (and it can miss the higher of two local maxima in α, by up to ~5%). Here, in float32 on a
CPU where :func:`jaxpriv.kernels.native.available`, each pair's level and its order come from
:func:`jaxpriv.kernels.native.zcdp_orders` (double precision, the reference's branch and bound,
stopped per pair at 1e-9): the value is the kernel's; its derivative is the envelope theorem's,
``∂(D_α/α)`` at the kernel's order (:func:`jaxpriv.core.zcdp.zcdp_at_order`), so the search
differentiates one Rényi evaluation per pair. Everywhere else (float64, other backends, no
native kernel) it is the reference.

Examples:
  >>> import jax.numpy as jnp
  >>> from jaxpriv import families
  >>> from jaxpriv.kernels import zcdp
  >>> round(float(zcdp.zcdp(families.randomized_response(1.0))), 4)  # ε tanh(ε/2)/2 ≤ ρ ≤ ε²/2
  0.2311
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxpriv.core import pair_levels
from jaxpriv.core.mechanisms import Mechanism
from jaxpriv.core.pair_notions import _pair_level
from jaxpriv.core.zcdp import zcdp_at_order, zcdp_pair as reference_pair
from jaxpriv.kernels import fused, native

__all__ = ["uses_native_kernel", "zcdp", "zcdp_pair"]


def uses_native_kernel(*arrays: Array) -> bool:
    """Whether :func:`zcdp` and :func:`zcdp_pair` take the native kernel on these arrays
    (float32 on a CPU where it is available)."""
    return fused.uses_native_kernel(*arrays)


def zcdp(mech: Mechanism, neighbours=None) -> Float[Array, "*b"]:
    """zCDP level ``ρ = sup_α D_α/α``, max over ordered pairs (SPEC §5); the native kernel's in
    float32 on a CPU, else :func:`jaxpriv.core.pair_levels.zcdp`."""
    if not uses_native_kernel(mech.log_K):
        return pair_levels.zcdp(mech, neighbours)
    return _pair_level(zcdp_pair, mech.log_K, neighbours)


def zcdp_pair(log_P: Float[Array, "*p m"], log_Q: Float[Array, "*p m"]) -> Float[Array, "*p"]:
    """``ρ`` of pairs: the native kernel's where :func:`uses_native_kernel`, else
    :func:`jaxpriv.core.zcdp.zcdp_pair`."""
    if not uses_native_kernel(log_P, log_Q):
        return reference_pair(log_P, log_Q)
    return _native_pair(*jnp.broadcast_arrays(log_P, log_Q))


def _orders(log_P, log_Q):
    """:func:`jaxpriv.kernels.native.zcdp_orders`, its results typed like its inputs: NaN
    where an input is (as the kernel gives), which also makes them vary over a ``shard_map``'s
    axes as the inputs do (a custom JVP's primal and tangent must agree on that)."""
    value, u = native.zcdp_orders(log_P, log_Q)
    nan = jnp.isnan(log_P).any(axis=-1) | jnp.isnan(log_Q).any(axis=-1)
    return jnp.where(nan, jnp.nan, value), jnp.where(nan, 0.0, u)


@jax.custom_jvp
def _native_pair(log_P, log_Q):
    return _orders(log_P, log_Q)[0]


@_native_pair.defjvp
def _native_pair_jvp(primals, tangents):
    log_P, log_Q = primals
    value, u = _orders(log_P, log_Q)
    at_kl = u == -jnp.inf
    infinite = value == jnp.inf
    distinct = value > 0

    def at_order(log_P, log_Q):
        return zcdp_at_order(log_P, log_Q, u, at_kl, infinite, distinct)

    _, tangent = jax.jvp(at_order, primals, tangents)
    return value, jnp.where(jnp.isfinite(value), tangent, 0.0)
