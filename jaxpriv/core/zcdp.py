"""The zCDP level of a pair, ``ρ = sup_{α>1} D_α(P‖Q)/α`` (Bun, Steinke 2016, Def. 1.1).

``D_α/α ≤ D_∞/α`` and ``→ KL`` as α → 1, so the sup lies in ``α ∈ (1, max(2, D_∞/KL)]``.
``D_α/α`` need not be unimodal there (random 3–8-output pairs have two local maxima about once
in 3,000), so the float64 level is a branch and bound over ``u = log(α−1)``: a grid, rounds
that split the interval whose upper bound is largest (``K(t) = (α−1)D_α`` is convex in
``t = α−1``, so its chord bounds it: :func:`chord_sup`), then golden-section search between the
best point's neighbours, against the α → 1 limit (KL). The tests check it against a dense scan
of orders and 50-digit mpmath. The float32 path here keeps a 12-point grid and golden-section
search around its best point (see :data:`ZCDP_GRID`); on a CPU the catalog's zCDP notion takes
float32 pairs to the native kernel instead (:mod:`jaxpriv.kernels.pair_levels`), which values them at
the order it finds with :func:`zcdp_at_order`.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from jaxpriv.core.pair_notions import kl_pair, ldp_pair, renyi_over_order

ZCDP_GRID = 24
"""Grid points in ``log(α−1)`` of the float64 level's branch and bound. The float32 path (sweep
screen, search, premise retraction) takes 12 points and 16 golden-section steps around the best
(no branch and bound: its bookkeeping tripled the cost); it can miss the higher of two local
maxima (up to ~5% on ~1 in 3,000 random pairs), and every reported number is re-evaluated in
float64."""
ZCDP_ROUNDS, ZCDP_SPLIT = 8, 3
"""Branch-and-bound rounds, and the points each adds inside the interval of the largest bound."""
ZCDP_TOLERANCE = 1e-12
"""Relative gap between the best value and an interval's bound below which it is not split."""
ZCDP_GOLDEN_STEPS = 40
"""Golden-section steps between the best point's neighbours, last (the bracket shrinks 2e-9×)."""
_ZCDP_FLOAT32 = (12, 0, 0, 0.0, 16)
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0
_CHORD_TOP = 1e150
"""Beyond ``α − 1 = 1e150`` an interval's bound is ``D_∞/α`` (``t(t + 1)`` would overflow)."""


@jax.jit
def zcdp_pair(log_P, log_Q):
    """``ρ = sup_{α>1} D_α(P‖Q)/α`` (Bun, Steinke 2016, Def. 1.1): the α → 1 limit (KL) against
    a branch-and-bound search over ``log(α−1)`` in ``(1, max(2, D_∞/KL)]`` (:func:`_zcdp_order`).
    ``+∞`` where ``Q = 0 < P`` (then every ``D_α = ∞``); 0 where ``P = Q``.

    The order is found on the stopped inputs and the value recomputed at it: the derivative is
    the envelope theorem's (Danskin: ``∂ρ/∂θ = ∂(D_α/α)/∂θ`` at the maximizing order), one
    Rényi evaluation's, not the search's (whose reverse pass through the search dominated the
    zCDP-premise searches' compile and run time)."""
    u_best, at_kl, infinite, distinct = _zcdp_order(jax.lax.stop_gradient(log_P),
                                          jax.lax.stop_gradient(log_Q))
    return zcdp_at_order(log_P, log_Q, u_best, at_kl, infinite, distinct)


def zcdp_at_order(log_P, log_Q, u, at_kl, infinite, distinct):
    """``D_α/α`` at the order ``α = 1 + e^u`` (the KL divergence where ``at_kl``), ``+∞`` where
    ``infinite``, 0 where not ``distinct``: the value of :func:`zcdp_pair` at an order found
    apart, with its derivative (the envelope theorem's at that order). ``u`` is not used where
    ``at_kl`` (it may be ``−∞`` there) or where the value is ``∞`` or 0."""
    kl = kl_pair(log_P, log_Q)  # again, with its derivative
    used = ~at_kl & ~infinite & distinct
    on_order = renyi_over_order(log_P, log_Q, 1.0 + jnp.exp(jnp.where(used, u, 0.0)))
    value = jnp.where(at_kl, kl, on_order)
    return jnp.where(infinite, jnp.inf, jnp.where(distinct, value, 0.0))


def chord_sup(tl, tr, Kl, Kr):
    """``sup_{t∈[tl,tr]} c(t)/(t(t+1))`` for the chord ``c`` through ``(tl, Kl)``, ``(tr, Kr)``:
    above ``D_α/α`` on the interval, ``K(t) = (α−1)D_α`` (``t = α−1``) being convex. The
    chord ``a + st`` over ``t² + t`` peaks where ``st² + 2at + a = 0``. A zero-width interval
    gives its end's value."""
    width = tr - tl
    wide = width > 0
    s = jnp.where(wide, (Kr - Kl) / jnp.where(wide, width, 1.0), 0.0)
    a = Kl - s * tl

    def h(x):
        return (a + s * x) / (x * (x + 1.0))

    disc = jnp.maximum(a * a - a * s, 0.0)
    safe_s = jnp.where(s != 0.0, s, 1.0)
    roots = [jnp.clip(jnp.where(s != 0.0, (-a + sign * jnp.sqrt(disc)) / safe_s, tl), tl, tr)
             for sign in (1.0, -1.0)]
    return jnp.maximum(jnp.maximum(h(tl), h(tr)), jnp.maximum(h(roots[0]), h(roots[1])))


def _zcdp_order(log_P, log_Q):
    """The order ``u = log(α − 1)`` of :func:`zcdp_pair`'s max, whether the α → 1 limit (KL) is
    the max instead, whether ``D_∞ = ∞`` and whether ``D_∞ > 0`` (``P ≠ Q``; no derivative:
    the caller recomputes the value).

    ``g(u) = D_α/α`` is not unimodal in general (random 3–8-output pairs have two local maxima
    about once in 3,000; a grid with golden-section refinement around its best point missed
    the higher one by up to 0.8%), so the search is a branch and bound: a grid of points, then
    rounds that each add points inside the interval whose upper bound (:func:`chord_sup`) is
    largest, until every bound is within the tolerance of the best value found."""
    dtype = log_P.dtype
    kl = kl_pair(log_P, log_Q)
    d_inf = ldp_pair(log_P, log_Q)
    infinite = jnp.isinf(d_inf)
    usable = (kl > 0) & ~infinite
    wide = dtype == jnp.float64
    # the bracket's top D_∞/KL, in logs: a KL of 1e-40 under a D_∞ of 395 (float32 entries of
    # e^−400) overflowed it to +∞ and the grid to NaN; capped at α − 1 = 1e150 (float64),
    # 1e18 (float32), where α(α − 1) stays finite (at 1e30 it overflowed float32, and the
    # orders' values came out ∞ or NaN at XLA's optimization level 0) — the orders beyond
    # add at most D_∞/cap to ρ
    cap = math.log(1e150 if wide else 1e18)
    # a KL of 0 under a positive D_∞ is float32's flush of subnormal terms (P = e^−88 and
    # Q = e^−96 beside P = Q = 1: KL 5.6e-38, ρ 0.19 at α ≈ 12): the whole range
    distinct = d_inf > 0
    log_top = jnp.where(usable, jnp.log(jnp.where(usable, d_inf, 2.0)) -
                        jnp.log(jnp.where(usable, kl, 1.0)),
                        jnp.where(distinct & ~infinite, math.inf, math.log(2.0)))
    points, rounds, split, tolerance, steps = (
        (ZCDP_GRID, ZCDP_ROUNDS, ZCDP_SPLIT, ZCDP_TOLERANCE, ZCDP_GOLDEN_STEPS) if wide
        else _ZCDP_FLOAT32)
    low = math.log(1e-6 if wide else 1e-3)
    # log(max(top, 2) − 1) = log_top + log1p(−1/top)
    log_top = jnp.clip(log_top, math.log(2.0), cap)
    high = log_top + jnp.log1p(-jnp.exp(-log_top))
    fractions = jnp.linspace(0.0, 1.0, points, dtype=dtype)
    grid = low + (high[..., None] - low) * fractions  # (*p, G) in u = log(α − 1)

    def one(u):  # D_α/α at α = 1 + e^u, u shaped like the pairs' leading axes
        value = renyi_over_order(log_P, log_Q, 1.0 + jnp.exp(u))
        # finite where D_∞ is (the infinite pairs are answered apart): a value that is not is
        # the float32 evaluation failing at a huge order (seen at XLA's optimization level 0:
        # ∞ at α = 3e8 on a pair whose D_α/α there is 3e-8) and must not win the search
        return jnp.where(jnp.isfinite(value), value, -jnp.inf)

    def g(u):  # the same at u (*p, k)
        return jax.vmap(one, in_axes=-1, out_axes=-1)(u)

    def bound(ul, ur, gl, gr):  # of D_α/α over [ul, ur] (chord of K where t(t+1) is finite)
        tl, tr = jnp.exp(ul), jnp.exp(ur)
        in_range = tr <= _CHORD_TOP
        tr_in = jnp.where(in_range, tr, tl)
        chords = chord_sup(tl, tr_in, gl * tl * (tl + 1.0),
                           jnp.where(in_range, gr, gl) * tr_in * (tr_in + 1.0))
        return jnp.where(in_range, chords, d_inf[..., None] / (tl + 1.0))

    on_grid = g(grid)
    j = jnp.argmax(on_grid, axis=-1)[..., None]
    best = jnp.take_along_axis(on_grid, j, axis=-1)
    u_best = jnp.take_along_axis(grid, j, axis=-1)
    neighbours = (jnp.take_along_axis(grid, jnp.maximum(j - 1, 0), axis=-1),
                  jnp.take_along_axis(grid, jnp.minimum(j + 1, points - 1), axis=-1))
    if rounds:  # float64 only: float32 goes from the grid's best point to golden section
        best, u_best, neighbours = _branch_and_bound(grid, on_grid, best, u_best, neighbours,
                                                     g, bound, rounds, split, tolerance)
    a, b = neighbours
    best, u_best, a, b = (x[..., 0] for x in (best, u_best, a, b))

    # golden-section search between the best point's neighbours (one evaluation per step)
    c = b - _GOLDEN * (b - a)
    d = a + _GOLDEN * (b - a)

    def golden(_, state):
        a, b, c, d, gc, gd = state
        left = gc >= gd  # the max is in [a, d]: d ← c, evaluate a new c
        a, b = jnp.where(left, a, c), jnp.where(left, d, b)
        new = jnp.where(left, b - _GOLDEN * (b - a), a + _GOLDEN * (b - a))
        g_new = one(new)
        c, d = jnp.where(left, new, d), jnp.where(left, c, new)
        gc, gd = jnp.where(left, g_new, gd), jnp.where(left, gc, g_new)
        return a, b, c, d, gc, gd

    a, b, c, d, gc, gd = jax.lax.fori_loop(0, steps, golden, (a, b, c, d, one(c), one(d)))
    refined = jnp.maximum(gc, gd)
    u_best = jnp.where(refined > best, jnp.where(gc >= gd, c, d), u_best)
    return u_best, kl >= jnp.maximum(refined, best), infinite, distinct


def _branch_and_bound(grid, on_grid, best, u_best, neighbours, g, bound, rounds, split,
                      tolerance):
    """:func:`_zcdp_order`'s rounds: each splits the interval (between points evaluated so
    far) whose bound is largest into ``split + 1``, while that bound exceeds the best value by
    more than ``tolerance``; returns the best value, its ``u`` and its neighbouring points
    (each ``(*p, 1)``)."""
    dtype = grid.dtype
    points = grid.shape[-1]
    # the intervals between the points so far, unordered: the grid's, then `split` more per
    # round (free slots: bound −∞); a round splits the interval of the largest bound
    free = jnp.full((*grid.shape[:-1], rounds * split), -jnp.inf, dtype)
    lows = jnp.concatenate([grid[..., :-1], free], axis=-1)
    highs = jnp.concatenate([grid[..., 1:], free], axis=-1)
    g_lows = jnp.concatenate([on_grid[..., :-1], free], axis=-1)
    g_highs = jnp.concatenate([on_grid[..., 1:], free], axis=-1)
    bounds = jnp.concatenate([bound(grid[..., :-1], grid[..., 1:], on_grid[..., :-1],
                                    on_grid[..., 1:]), free], axis=-1)
    slots = jnp.arange(lows.shape[-1])

    def pick(x, chosen):  # x at the one True of `chosen` along the last axis (no gather)
        return jnp.sum(jnp.where(chosen, x, 0.0), axis=-1, keepdims=True)

    def round_(r, state):
        lows, highs, g_lows, g_highs, bounds, best, u_best, (a, b) = state
        chosen = slots == jnp.argmax(bounds, axis=-1)[..., None]
        need = pick(bounds, chosen) > best * (1.0 + tolerance)
        ul, ur, gl, gr = (pick(x, chosen) for x in (lows, highs, g_lows, g_highs))
        u = [ul + (ur - ul) * (q + 1) / (split + 1) for q in range(split)]
        stacked = g(jnp.concatenate(u, axis=-1))  # one evaluation's program for the S points
        values = [stacked[..., q:q + 1] for q in range(split)]
        ends_u, ends_g = [ul, *u, ur], [gl, *values, gr]
        parts = [bound(ends_u[q], ends_u[q + 1], ends_g[q], ends_g[q + 1])
                 for q in range(split + 1)]
        # sub-interval 0 replaces the chosen interval, the others take this round's free slots
        start = points - 1 + r * split

        def put(old, column):
            new = jnp.where(chosen & need, column[0], old)
            for q in range(1, split + 1):
                new = jnp.where((slots == start + q - 1) & need, column[q], new)
            return new

        lows = put(lows, ends_u[:-1])
        highs = put(highs, ends_u[1:])
        g_lows = put(g_lows, ends_g[:-1])
        g_highs = put(g_highs, ends_g[1:])
        bounds = put(bounds, parts)
        for q, (v, value) in enumerate(zip(u, values)):
            better = need & (value > best)
            best = jnp.where(better, value, best)
            u_best = jnp.where(better, v, u_best)
            a = jnp.where(better, ends_u[q], a)
            b = jnp.where(better, ends_u[q + 2], b)
        return lows, highs, g_lows, g_highs, bounds, best, u_best, (a, b)

    state = (lows, highs, g_lows, g_highs, bounds, best, u_best, neighbours)
    *_, best, u_best, neighbours = jax.lax.fori_loop(0, rounds, round_, state)
    return best, u_best, neighbours


__all__ = ["zcdp_pair", "zcdp_at_order", "chord_sup", "ZCDP_GRID", "ZCDP_ROUNDS", "ZCDP_SPLIT",
           "ZCDP_TOLERANCE", "ZCDP_GOLDEN_STEPS"]
