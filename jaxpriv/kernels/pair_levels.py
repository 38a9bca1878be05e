"""Pair levels as the catalog registers them, with their float32 path on the CPU in the native
kernel: the zCDP level ``ρ = sup_{α>1} D_α/α`` (Bun, Steinke 2016, Def. 1.1), ``ε(δ)``, the
least ``ε ≥ 0`` with ``δ(ε) ≤ δ`` (SPEC §5), and the GDP level ``μ`` (Dong, Roth, Su 2022,
Def. 2.6), each a max over ordered pairs of rows.

:mod:`jaxpriv.core.pair_levels` is the reference. Its float32 zCDP level is a 12-point grid and
16 golden-section steps over the order, each step a vector operation over the pairs' short axis
of outputs: what sweeps screen with and what a zCDP-premise search's retraction evaluates ~15
times a step, most of such a search's time (and it can miss the higher of two local maxima in α,
by up to ~5%). Its ``ε(δ)`` and GDP sort each pair's outputs with XLA's general sort. Here, in float32
on a CPU where :func:`jaxpriv.kernels.native.available`:

* **zCDP**: each pair's level and its order come from :func:`jaxpriv.kernels.native.zcdp_orders`
  (double precision, the reference's branch and bound, then Newton steps); the value is the
  kernel's, its derivative the envelope theorem's, ``∂(D_α/α)`` at the kernel's order
  (:func:`jaxpriv.core.zcdp.zcdp_at_order`): one Rényi evaluation per pair. The level of a
  mechanism (every ordered pair counted) runs the kernel with its pairs as one group: only the
  pairs whose upper bound reaches the best level found are searched, and the max is the same
  bit for bit.
* **ε(δ)** and **GDP**: :func:`jaxpriv.kernels.native.eps_at_delta` and
  :func:`jaxpriv.kernels.native.gdp` (the same closed forms, double precision); their
  derivatives are the reference's (:func:`jaxpriv.core.pair_notions.eps_at_delta_pair`,
  :func:`jaxpriv.core.pair_notions.gdp_pair`, evaluated where a derivative is asked for). The
  level of a mechanism runs them with its pairs as one group, in decreasing order of an upper
  bound of each pair's level (``D_∞``; for GDP randomized response's μ at the symmetric
  ``D_∞``): a pair whose bound is below the best level found is not solved, and the max is the
  same bit for bit.

Everywhere else (float64, other backends, no native kernel) they are the reference.

Examples:
  >>> from jaxpriv import families
  >>> from jaxpriv.kernels import pair_levels
  >>> round(float(pair_levels.zcdp(families.randomized_response(1.0))), 4)
  0.4621
  >>> round(float(pair_levels.eps_at_delta(families.randomized_response(1.0), delta=1e-5)), 4)
  1.0
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxpriv.core import pair_levels as reference
from jaxpriv.core.mechanisms import Mechanism
from jaxpriv.core import pair_notions
from jaxpriv.core.pair_notions import (PAIR_BLOCK_ELEMENTS, _number, _pair_level,
                                       distinct_pairs, eps_at_delta_pair as reference_eps)
from jaxpriv.core.zcdp import zcdp_at_order, zcdp_pair as reference_zcdp
from jaxpriv.kernels import fused, native

__all__ = ["eps_at_delta", "eps_at_delta_pair", "gdp", "gdp_pair", "uses_native_kernel", "zcdp",
           "zcdp_pair"]


def uses_native_kernel(*arrays: Array) -> bool:
    """Whether the levels here take the native kernel on these arrays (float32 on a CPU where
    it is available)."""
    return fused.uses_native_kernel(*arrays)


def zcdp(mech: Mechanism, neighbours=None) -> Float[Array, "*b"]:
    """zCDP level ``ρ = sup_α D_α/α``, max over ordered pairs (SPEC §5); the native kernel's in
    float32 on a CPU, else :func:`jaxpriv.core.pair_levels.zcdp`."""
    if not uses_native_kernel(mech.log_K):
        return reference.zcdp(mech, neighbours)
    return _mechanism_level(zcdp_pair, _native_zcdp, mech.log_K, neighbours)


def _mechanism_level(pair_level, native_level, log_K, neighbours, **params):
    """The max over a mechanism's counted pairs. With ``neighbours`` every pair alone
    (``pair_level``: a pair that does not count must not decide one that does); else each
    mechanism's ``n(n − 1)`` pairs of distinct rows (or, past :data:`PAIR_BLOCK_ELEMENTS`, a
    block of rows' ``r × n`` pairs) as one group of the native kernel,
    ``native_level(log_P, log_Q, group, **params)``, which skips a pair whose upper bound is
    below the best level found: only the max is exact, and it is the same bit for bit
    (:func:`jaxpriv.kernels.native.zcdp_orders` and the others say how).

    (Only here, not in :func:`jaxpriv.core.pair_notions._pair_level`, are the diagonal's pairs
    left out: there every reference notion's values and derivatives stay as they were, a max
    over ``n²`` entries, the diagonal's masked to 0, whose derivative is split among its ties.)"""
    if neighbours is not None:
        return _pair_level(pair_level, log_K, neighbours, **params)
    n, m = log_K.shape[-2:]
    if n > 1 and math.prod(log_K.shape[:-2]) * n * (n - 1) * m <= PAIR_BLOCK_ELEMENTS:
        # the n(n − 1) pairs of distinct rows only (the diagonal's n pairs of P = Q, each 0,
        # were a quarter of a 4×4 mechanism's first pass): one group per mechanism
        values = native_level(*distinct_pairs(log_K), n * (n - 1), **params)
        return jnp.maximum(jnp.max(values, axis=-1), 0.0)  # as max_over_pairs: NaN stays NaN

    def grouped(log_P: Float[Array, "*b r n m"], log_Q: Float[Array, "*b r n m"], **params):
        log_P, log_Q = jnp.broadcast_arrays(log_P, log_Q)
        return native_level(log_P, log_Q, log_P.shape[-3] * log_P.shape[-2], **params)

    return _pair_level(grouped, log_K, **params)


def zcdp_pair(log_P: Float[Array, "*p m"], log_Q: Float[Array, "*p m"]) -> Float[Array, "*p"]:
    """``ρ`` of pairs: the native kernel's where :func:`uses_native_kernel`, else
    :func:`jaxpriv.core.zcdp.zcdp_pair`."""
    if not uses_native_kernel(log_P, log_Q):
        return reference_zcdp(log_P, log_Q)
    return _native_zcdp(*jnp.broadcast_arrays(log_P, log_Q))


def eps_at_delta(mech: Mechanism, delta=1e-5, neighbours=None) -> Float[Array, "*b"]:
    """The least ``ε ≥ 0`` with ``δ(ε) ≤ δ``, max over ordered pairs (SPEC §5); the native
    kernel's in float32 on a CPU, else :func:`jaxpriv.core.pair_levels.eps_at_delta`."""
    if not uses_native_kernel(mech.log_K):
        return reference.eps_at_delta(mech, delta, neighbours)
    value = _number("eps_at_delta", "delta", delta, lambda v: 0.0 < v < 1.0, "in (0, 1)")
    return _mechanism_level(eps_at_delta_pair, _native_eps_of_pairs, mech.log_K, neighbours,
                            delta=value)


def eps_at_delta_pair(log_P: Float[Array, "*p m"], log_Q: Float[Array, "*p m"], delta
                      ) -> Float[Array, "*p"]:
    """``ε(δ)`` of pairs: the native kernel's where :func:`uses_native_kernel`, else
    :func:`jaxpriv.core.pair_notions.eps_at_delta_pair`."""
    if not uses_native_kernel(log_P, log_Q):
        return reference_eps(log_P, log_Q, delta)
    return _native_eps_of_pairs(*jnp.broadcast_arrays(log_P, log_Q), 1, delta=delta)


def _native_eps_of_pairs(log_P, log_Q, group, delta):
    """The native ε(δ) of pairs of one shape, δ broadcast to one per pair (float32)."""
    delta = jnp.broadcast_to(jnp.asarray(delta, jnp.float32), log_P.shape[:-1])
    return _native_eps(log_P, log_Q, delta, group)


def gdp(mech: Mechanism, neighbours=None) -> Float[Array, "*b"]:
    """Gaussian-DP level ``μ``, max over ordered pairs (SPEC §5); the native kernel's in float32
    on a CPU, else :func:`jaxpriv.core.pair_notions.gdp`."""
    if not uses_native_kernel(mech.log_K):
        return pair_notions.gdp(mech, neighbours)
    return _mechanism_level(gdp_pair, _native_gdp, mech.log_K, neighbours)


def gdp_pair(log_P: Float[Array, "*p m"], log_Q: Float[Array, "*p m"]) -> Float[Array, "*p"]:
    """``μ`` of pairs: the native kernel's where :func:`uses_native_kernel`, else
    :func:`jaxpriv.core.pair_notions.gdp_pair`."""
    if not uses_native_kernel(log_P, log_Q):
        return pair_notions.gdp_pair(log_P, log_Q)
    return _native_gdp(*jnp.broadcast_arrays(log_P, log_Q))


def _varying_like(value, *arrays):
    """``value``, NaN where an input is NaN (as the kernels give): that also makes it vary over
    a ``shard_map``'s axes as the inputs do (a custom JVP's primal and tangent must agree)."""
    nan = jnp.zeros(value.shape, bool)
    for a in arrays:
        nan = nan | (jnp.isnan(a).any(axis=-1) if a.ndim > value.ndim else jnp.isnan(a))
    return jnp.where(nan, jnp.nan, value)


def _orders(log_P, log_Q, group):
    value, u = native.zcdp_orders(log_P, log_Q, group)
    return _varying_like(value, log_P, log_Q), _varying_like(u, log_P, log_Q)


@functools.partial(jax.custom_jvp, nondiff_argnums=(2,))
def _native_zcdp(log_P, log_Q, group=1):
    return _orders(log_P, log_Q, group)[0]


@_native_zcdp.defjvp
def _native_zcdp_jvp(group, primals, tangents):
    # a pair the grouped kernel skipped reads its KL and the order -inf: below the group's
    # max, so the max's derivative multiplies its (finite) tangent by 0
    log_P, log_Q = primals
    value, u = _orders(log_P, log_Q, group)
    u = jnp.where(jnp.isnan(u), 0.0, u)
    at_kl = u == -jnp.inf
    infinite = value == jnp.inf
    distinct = value > 0

    def at_order(log_P, log_Q):
        return zcdp_at_order(log_P, log_Q, u, at_kl, infinite, distinct)

    _, tangent = jax.jvp(at_order, primals, tangents)
    return value, jnp.where(jnp.isfinite(value), tangent, 0.0)


@functools.partial(jax.custom_jvp, nondiff_argnums=(3,))
def _native_eps(log_P, log_Q, delta, group=1):
    return _varying_like(native.eps_at_delta(log_P, log_Q, delta, group), log_P, log_Q, delta)


@_native_eps.defjvp
def _native_eps_jvp(group, primals, tangents):
    # where a derivative is asked for (a search's objective), the reference's value and
    # derivative: its sort is differentiable, and a search evaluates few mechanisms (every
    # pair's own value, grouped or not: the max over them is the same)
    def per_pair(log_P, log_Q, delta):  # δ shaped like the pairs: against each prefix sum
        return reference_eps(log_P, log_Q, delta[..., None])

    return jax.jvp(per_pair, primals, tangents)


@functools.partial(jax.custom_jvp, nondiff_argnums=(2,))
def _native_gdp(log_P, log_Q, group=1):
    return _varying_like(native.gdp(log_P, log_Q, group), log_P, log_Q)


@_native_gdp.defjvp
def _native_gdp_jvp(group, primals, tangents):
    return jax.jvp(pair_notions.gdp_pair, primals, tangents)  # the reference's, as for ε(δ)
