"""Pair levels of large mechanisms: the max over ordered pairs of a quantity that is costly per
pair (zCDP's sup over orders, ε(δ)'s sort of the outputs), with the pairs pruned by a proved
upper bound, exactly.

:func:`pruned_max` solves pairs exactly in order of decreasing bound, ``ROUND`` at a time, until
no bound left reaches the best value found: the result is the exact max (each skipped pair's
value is below it). Small problems (a mechanism's pairs × outputs × cost within one block),
float32 and batches of small mechanisms take every pair
(:func:`jaxpriv.core.pair_notions._pair_level`).

**zCDP** (``ρ = sup_{α>1} D_α(P‖Q)/α``, Bun, Steinke 2016, Def. 1.1). Each pair's exact value
(:func:`jaxpriv.core.zcdp.zcdp_pair`) costs ~90 evaluations of ``D_α`` over its
outputs (a grid of 24 orders, 8 rounds of branch and bound, 40 golden-section steps): 89,700
pairs of a 300×300 mechanism took 34 s (with the earlier 108-evaluation search). The bound:

* ``K(t) = (α − 1) D_α`` with ``t = α − 1`` is the cumulant generating function of the privacy
  loss ``L = log(P/Q)`` under ``P`` (``K(t) = log E_P e^{tL}``): convex, ``K(0) = 0``,
  increasing, ``K(t) ≤ t·D_∞``. So ``D_α/α = K(t)/(t(t + 1))`` is bounded on ``[0, t₁]`` by
  ``K(t₁)/t₁`` (the chord from 0), on ``[t_j, t_{j+1}]`` by the sup of the chord over
  ``t(t + 1)`` (a closed form: the chord ``a + st`` over ``t² + t`` peaks where
  ``st² + 2at + a = 0``), and beyond ``t_J`` by ``D_∞/(t_J + 1)``.
* ``K(t_j)`` at 16 points per pair is one log-sum-exp each (no series, no search), raised by
  ``1e-12·(1 + t)`` absolute and ``1e-12`` relative for the rounding of the logs (``|log P| ≤
  745`` is exact to ~1e-13) and of the sum, ``D_∞`` by ``1e-12``, the bound by a further
  ``1e-9`` relative: it stays above each pair's computed ρ, which the pruning needs.
* The points ``t_j`` span ``[10⁻³, 1.05·D_∞/ρ₀ − 1]`` per pair, ``ρ₀`` the largest
  ``max(KL, D_2/2)`` over pairs (each a lower bound of its pair's ρ; beyond,
  ``D_∞/(t + 1) < ρ₀``).

**ε(δ)** (the least ε with ``δ(ε) ≤ δ``): each pair sorts its outputs; the bound is ``D_∞``
(``δ(D_∞) = 0``), raised by ``1e-12`` and ``1e-9`` relative.

``benchmarks/bench_eval.py`` measures every notion's level of a 300×300 mechanism.
"""

from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp
from jaxtyping import Array, Float

from jaxpriv.core.mechanisms import Mechanism
from jaxpriv.core.pair_notions import (NEG_INF, PAIR_BLOCK_ELEMENTS, _number, _pair_level,
                                       eps_at_delta_pair, kl_pair, ldp_pair, pair_mask)
from jaxpriv.core.zcdp import ZCDP_GRID, ZCDP_ROUNDS, ZCDP_SPLIT, chord_sup, zcdp_pair

ROUND = 256
"""Pairs a round solves exactly."""
BOUND_POINTS = 16
"""Points ``t_j`` of each pair's upper bound."""
T_LOW = 1e-3
"""The first point: on ``[0, T_LOW]`` the bound is ``K(T_LOW)/T_LOW = D_{1.001}``."""
_COST = 2 * (ZCDP_GRID + ZCDP_ROUNDS * ZCDP_SPLIT)


def zcdp(mech: Mechanism, neighbours=None) -> Float[Array, "*b"]:
    """zCDP level ``ρ = sup_α D_α/α``, max over ordered pairs (SPEC §5); exact (pairs pruned by
    a proved bound where a mechanism has many: see the module)."""
    return _level(zcdp_pair, _zcdp_pruned, mech.log_K, neighbours, _COST)


def eps_at_delta(mech: Mechanism, delta=1e-5, neighbours=None) -> Float[Array, "*b"]:
    """The least ``ε ≥ 0`` with ``δ(ε) ≤ δ``, max over ordered pairs (SPEC §5); exact (pairs
    pruned by ``D_∞`` where a mechanism has many)."""
    value = _number("eps_at_delta", "delta", delta, lambda v: 0.0 < v < 1.0, "in (0, 1)")

    def exact(log_P, log_Q):
        return eps_at_delta_pair(log_P, log_Q, value)

    def pruned(log_K, d, e):
        return pruned_max(log_K, d, e, exact, _d_inf_bound, jnp.zeros((), log_K.dtype))

    return _level(exact, pruned, mech.log_K, neighbours, 8)


def _level(pair_fn, pruned, log_K, neighbours, cost: int):
    """Every pair at once (or over blocks of rows) where a mechanism's pairs × outputs × cost
    fit one block, in float32 and for few pairs; else ``pruned(log_K (n, m), d, e)`` per
    mechanism."""
    n, m = log_K.shape[-2:]
    mask = pair_mask(n, neighbours)
    pairs = int(mask.sum())
    if (log_K.dtype != jnp.float64 or pairs <= ROUND
            or pairs * m * cost <= PAIR_BLOCK_ELEMENTS):
        return _pair_level(pair_fn, log_K, neighbours, cost=cost)
    d, e = np.nonzero(mask)
    flat = log_K.reshape(-1, n, m)
    out = jax.lax.map(lambda one: pruned(one, d, e), flat)
    return out.reshape(log_K.shape[:-2])


def _d_inf_bound(log_P, log_Q):
    """``D_∞`` raised past its rounding: above the pair's ε(δ) for every δ."""
    return (ldp_pair(log_P, log_Q) + 1e-12) * (1.0 + 1e-9)


def _over_pairs(fn, log_K, d, e, per_pair_cost: int):
    """``fn(log P, log Q)`` (rows ``d``, ``e`` of ``log_K``: ``(B, m)`` each) → ``(B, …)`` over
    every pair, in blocks of ``PAIR_BLOCK_ELEMENTS // (m·per_pair_cost)`` pairs (the last block
    padded with pair ``(0, 0)``, cut off)."""
    m = log_K.shape[-1]
    count = len(d)
    size = max(1, min(count, PAIR_BLOCK_ELEMENTS // max(1, m * per_pair_cost)))
    blocks = -(-count // size)
    pad = blocks * size - count
    ids = np.stack([np.concatenate([d, np.zeros(pad, d.dtype)]),
                    np.concatenate([e, np.zeros(pad, e.dtype)])], axis=-1)

    def block(pair_ids):
        return fn(log_K[pair_ids[:, 0]], log_K[pair_ids[:, 1]])

    out = jax.lax.map(block, jnp.asarray(ids.reshape(blocks, size, 2)))
    out = jax.tree.map(lambda x: x.reshape(blocks * size, *x.shape[2:])[:count], out)
    return out


def _lower_bound(log_P, log_Q):
    """``max(KL, D_2/2)`` per pair, each a lower bound of its ρ (``D_2`` by a log-sum-exp,
    rounded within ~1e-15 relative)."""
    kl = kl_pair(log_P, log_Q)
    has_p = log_P > NEG_INF
    d2 = logsumexp(jnp.where(has_p, 2.0 * log_P - jnp.where(has_p, log_Q, 0.0), NEG_INF), -1)
    return jnp.maximum(kl, 0.5 * jnp.maximum(d2, 0.0))


def upper_bound(log_P, log_Q, d_inf, floor):
    """A proved upper bound of ``sup_α D_α(P‖Q)/α`` per pair, tight where it matters: at
    ``BOUND_POINTS`` points ``t ∈ [T_LOW, 1.05·D_∞/floor − 1]`` (see the module). ``+∞`` where
    ``D_∞ = ∞``; ``D_∞`` itself where it is at most ``floor`` (no point beats it)."""
    dtype = log_P.dtype
    both = (log_P > NEG_INF) & (log_Q > NEG_INF)
    has_p = log_P > NEG_INF
    L = jnp.where(both, log_P - jnp.where(both, log_Q, 0.0), 0.0)
    finite = jnp.isfinite(d_inf)
    reach = jnp.where(finite & (floor > 0), 1.05 * d_inf / jnp.where(floor > 0, floor, 1.0), 2.0)
    t_high = jnp.maximum(reach - 1.0, 2.0 * T_LOW)
    fractions = jnp.linspace(0.0, 1.0, BOUND_POINTS, dtype=dtype)
    t = T_LOW * jnp.exp(jnp.log(t_high / T_LOW)[:, None] * fractions)  # (B, J)
    exponent = jnp.where(has_p[:, None, :], log_P[:, None, :] + t[..., None] * L[:, None, :],
                         NEG_INF)
    K = logsumexp(exponent, axis=-1)  # (B, J): (α − 1)·D_α at α = 1 + t
    # raised past the rounding of the logs (|log P| ≤ 745 is exact to ~1e-13, and tL
    # carries it t times) and of the log-sum-exp
    K = K + 1e-12 * (1.0 + t) + 1e-12 * jnp.abs(K)
    first = K[:, 0] / t[:, 0]
    tl, tr, Kl, Kr = t[:, :-1], t[:, 1:], K[:, :-1], K[:, 1:]
    chords = jnp.max(chord_sup(tl, tr, Kl, Kr), axis=-1)
    d_up = d_inf + 1e-12  # D_∞ = max log P − log Q, each log exact to ~1e-13
    last = d_up / (1.0 + t[:, -1])
    bound = jnp.maximum(jnp.maximum(first, chords), last) * (1.0 + 1e-9)
    bound = jnp.where(d_up <= floor, d_up, bound)
    return jnp.where(finite, bound, jnp.inf)


def _zcdp_pruned(log_K, d, e):
    lower = _over_pairs(_lower_bound, log_K, d, e, 2)
    floor = jnp.max(lower) * (1.0 - 1e-12)  # below the max ρ: KL and D_2/2 are below each ρ

    def bound(log_P, log_Q):
        return upper_bound(log_P, log_Q, ldp_pair(log_P, log_Q), floor)

    return pruned_max(log_K, d, e, zcdp_pair, bound, floor, bound_cost=3 * BOUND_POINTS)


def pruned_max(log_K: Float[Array, "n m"], d: np.ndarray, e: np.ndarray, exact, bound,
               start, bound_cost: int = 4) -> Float[Array, ""]:
    """The exact max over the pairs ``(d[i], e[i])`` of one mechanism's ``exact(log P, log Q)``
    (``(B, m)`` rows → ``(B,)``), pairs solved ``ROUND`` at a time in order of decreasing
    ``bound(log P, log Q)`` (above each pair's computed value) until no bound left reaches the
    best found; ``start``: a value at most the max (the best before any round)."""
    count = len(d)
    ids = jnp.stack([jnp.asarray(d), jnp.asarray(e)], axis=-1)
    bounds = _over_pairs(bound, log_K, d, e, bound_cost)
    order = jnp.argsort(-bounds)
    rounds = -(-count // ROUND)
    pad = rounds * ROUND - count
    order = jnp.concatenate([order, jnp.zeros(pad, order.dtype)])
    sorted_bounds = jnp.concatenate([bounds[order[:count]], jnp.full(pad, -jnp.inf,
                                                                     bounds.dtype)])
    margin = 1.0 - 1e-9

    def more(state):
        i, best = state
        head = jax.lax.dynamic_index_in_dim(sorted_bounds, i * ROUND, keepdims=False)
        return (i < rounds) & (head >= best * margin)

    def solve(state):
        i, best = state
        chosen = jax.lax.dynamic_slice_in_dim(order, i * ROUND, ROUND)
        live = jax.lax.dynamic_slice_in_dim(sorted_bounds, i * ROUND, ROUND) > -jnp.inf
        pair = ids[chosen]
        values = exact(log_K[pair[:, 0]], log_K[pair[:, 1]])
        return i + 1, jnp.maximum(best, jnp.max(jnp.where(live, values, 0.0)))

    _, best = jax.lax.while_loop(more, solve, (jnp.zeros((), jnp.int32),
                                               jnp.asarray(start, log_K.dtype)))
    return best
