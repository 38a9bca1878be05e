"""Premise retractions: mixing a mechanism with the constant one until a level is reached.

A candidate ``K`` is mixed with the constant mechanism ``U`` (rows ``1/m``):
``K_t = (1−t)K + tU``. That is a post-processing of ``K`` (keep the output with probability
``1−t``, else draw a uniform one), so every notion that obeys data processing is non-increasing
in ``t``, and ``t = 1`` has level 0. The least ``t`` with ``level ≤ x`` therefore retracts ``K``
onto the premise set, and is the identity on feasible mechanisms (``t = 0``).

* :func:`bisect_keep` finds it for **any** such notion by a bracketed root finder on ``t``
  (:func:`bracketed_root`: secant and Illinois steps, safeguarded; in log space of
  ``1 − t``), with the gradient of the implicit function ``level(K_t(θ)) = x`` (so optax sees how
  the retracted mechanism moves with the parameters); it lands on the feasible side of the
  bracket, inside the premise by a relative margin.
* closed forms (:func:`ldp_keep`, :func:`mbp_keep`, :func:`database_keep`) serve as fast paths:
  every ratio ``K[d,w]/K[d',w]`` or ``K[d,w]/p(w)`` moves monotonically towards 1 as ``t`` grows,
  so the least ``t`` solves one linear inequality per entry.

The same trick keeps the prior ``ε``-close to uniform and the belief ``ε``-close to the prior.
Everything here is dtype-generic (float32 search, float64 re-evaluation) and gradient-safe.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
from jax.scipy.special import logsumexp

from jaxpriv.core import databases
from jaxpriv.core.mechanisms import Mechanism

MARGIN = 1e-6
"""Relative margin by which a root-found retracted mechanism sits inside its premise level."""
ROOT_STEPS = 24
"""Level evaluations of :func:`bisect_keep`'s root finding in float64 (bisection took 60): on
512 random 3×3 mechanisms at premise levels 0.1, 1, 3 of zCDP, Rényi 2 and 16, KL, GDP, ε(δ),
TV and δ(ε), the retracted level is within 2.2e-16 relative of 60 bisection steps' (20 steps:
within 6e-15, 16: 2.4e-10)."""
ROOT_STEPS_FLOAT32 = 14
"""The same in float32 (bisection took 32): within 8.5e-6 relative of 32 bisection steps',
0 at the 99th percentile (12 steps: 3.3e-4, 10: 0.28)."""


def mix(log_a, log_b, log_keep):
    """``log(keep·a + (1−keep)·b)`` with ``keep = exp(log_keep) ∈ (0, 1]``; gradient-safe at
    ``keep = 1`` (double where: the unused branch never sees ``log 0``)."""
    mixing = log_keep < 0
    safe = jnp.where(mixing, log_keep, -1.0)
    mixed = jnp.logaddexp(safe + log_a, jnp.log(-jnp.expm1(safe)) + log_b)
    return jnp.where(mixing, mixed, log_a)


def mix_constant(mech: Mechanism, log_keep) -> Mechanism:
    """``(1−t)K + t/m`` with ``log_keep = log(1−t)`` (prior, belief and values unchanged)."""
    log_K = mix(mech.log_K, jnp.full_like(mech.log_K, -jnp.log(mech.m)), log_keep)
    return Mechanism(log_K, mech.log_prior, mech.log_belief, mech.values, mech.records)


def log_keep_for(a, b, E, floor):
    """``log(1 − t)`` for the least ``t`` with ``(1−t)a + t·c ≤ E·((1−t)b + t·c)``, where mixing
    moves ``a`` and ``b`` towards the same ``c`` and ``floor = (E−1)·c``:
    ``1 − t = floor/(A + floor)``, ``A = a − E·b``; 0 where the inequality already holds."""
    excess = a - E * b
    over = excess > 0
    safe = jnp.where(over, excess, 1.0)
    return jnp.where(over, jnp.log(floor) - jnp.log(safe + floor), 0.0)


def soft_max(values, temperature):
    """``τ·logsumexp(v/τ)`` (≥ max, within ``τ·log(size)``); the hard max when ``τ`` is None."""
    values = values.reshape(-1)
    if temperature is None:
        return jnp.max(values)
    return temperature * logsumexp(values / temperature)


def soft_min(values, temperature):
    """``−τ·logsumexp(−v/τ)`` (never above the min); the hard min when ``τ`` is None."""
    return -soft_max(-values, temperature)


def ldp_keep(mech: Mechanism, x, temperature=None):
    """Closed form for the LDP level: every column's max/min ratio ``≤ e^x``. ``temperature``:
    the min over entries is a soft min (smooth, never above the min: still feasible)."""
    K = jnp.exp(mech.log_K)
    E = jnp.exp(x)
    floor = jnp.expm1(x) / K.shape[-1]
    keep = log_keep_for(jnp.max(K, axis=0), jnp.min(K, axis=0), E, floor)
    return jnp.minimum(soft_min(keep, temperature), 0.0)


def mbp_keep(mech: Mechanism, x, temperature=None):
    """Closed form for the MBP level: ``K[d,w]/p(w) ∈ [e^{−x}, e^x]`` for every entry."""
    K = jnp.exp(mech.log_K)
    # full float32 on GPUs too (XLA's default there is TF32: ~3 digits), the prior's marginal
    p = jnp.matmul(jnp.exp(mech.log_prior), K, precision=jax.lax.Precision.HIGHEST)
    E = jnp.exp(x)
    floor = jnp.expm1(x) / K.shape[-1]
    keep = jnp.minimum(log_keep_for(K, p[None, :], E, floor), log_keep_for(p[None, :], K, E,
                                                                            floor))
    return jnp.minimum(soft_min(keep, temperature), 0.0)


def database_keep(premise: str, mech: Mechanism, x):
    """``log(1 − t)`` for the least ``t`` (a feasible one for SP and BSP, see below) such that
    ``(1−t)K + t/m`` has the database-level ``premise ≤ x``; 0 where ``K`` already has.

    DP, BDP and MP compare ratios of rows of ``K`` or of prior-weighted conditionals
    ``P[y | x_i, x_S]``, which mixing moves towards 1 like K's own entries (the weights sum to
    1), so the least ``t`` is :func:`log_keep_for`'s closed form on the max and min along each
    record's axis (MP over 𝔻_* is ``max(DP, BDP)``). SP and BSP (sups over beliefs,
    ``tanh(Λ/4)``) bound every product ratio ``a_u c_v / (c_u a_v) ≤ E = e^{4·atanh(x)}``;
    with ``s = t/((1−t)m)`` each pair needs the quadratic ``(a_u+s)(c_v+s) − E(c_u+s)(a_v+s) ≤ 0``
    (leading coefficient ``1 − E < 0``), which holds beyond its larger root. Taking the
    largest root over all pairs (0 when every pair holds at ``s = 0``) gives a feasible ``t``
    that is the identity on feasible mechanisms (not always the least: a pair's infeasible
    set is an interval that may start above 0).
    """
    records = mech.records
    dtype = mech.log_K.dtype
    m = mech.m
    if premise in ("sp", "bsp"):
        E = jnp.exp(4.0 * jnp.arctanh(jnp.minimum(x, 1.0 - 1e-7)))
        s = jnp.zeros((), dtype)
        for log_a, log_c in _database_games(premise, mech):
            a, c = jnp.exp(log_a), jnp.exp(log_c)  # (N, m): candidates × outputs
            a_u, c_u = a[:, None, :], c[:, None, :]
            a_v, c_v = a[None, :, :], c[None, :, :]
            A = 1.0 - E
            B = a_u + c_v - E * (c_u + a_v)
            C = a_u * c_v - E * c_u * a_v
            disc = B * B - 4 * A * C
            over = C > 0  # infeasible at s = 0, so disc > 0
            root = (-B - jnp.sqrt(jnp.where(over, disc, 1.0))) / (2 * A)
            s = jnp.maximum(s, jnp.max(jnp.where(over, root, 0.0)))
        any_over = s > 0
        return jnp.where(any_over, -jnp.log1p(jnp.where(any_over, s, 0.0) * m), 0.0)
    E = jnp.exp(x)
    floor = jnp.expm1(x) / m
    keep = jnp.zeros((), dtype)
    tensors = []
    if premise in ("dp", "mp"):
        K = databases._as_tensor(jnp.exp(mech.log_K), records, 1)
        tensors += [(i, K) for i in range(records.r)]
    if premise in ("bdp", "mp"):
        tensors += [(i, jnp.exp(log_p)) for i, _, log_p, _ in databases._known_set_conditionals(
            mech, records, proper=premise == "mp")]
    for i, P in tensors:
        keep = jnp.minimum(keep, jnp.min(log_keep_for(jnp.max(P, axis=i), jnp.min(P, axis=i),
                                                      E, floor)))
    return keep


def database_retraction(premise: str) -> Callable:
    """:func:`database_keep` for one database-level notion, in a notion's ``retract`` form."""
    def retract(mech: Mechanism, x, temperature=None):
        return database_keep(premise, mech, x)
    return retract


def _database_games(premise: str, mech: Mechanism):
    """``(log a, log c)`` per game, shaped ``(candidates, m)``: SP compares ``K[x, y]`` with
    ``K[x_{−i}, y]`` over databases ``x``; BSP ``P[y|x_i,x_S]`` with ``P[y|⊥,x_S]`` over partial
    databases (full-support priors: every game exists)."""
    records = mech.records
    if premise == "sp":
        for i in range(records.r):
            yield mech.log_K, mech.log_K[databases.without(records, i), :]
        return
    for _, log_a, log_c, _ in databases._reset_games(mech, records):
        yield log_a.reshape(-1, mech.m), log_c.reshape(-1, mech.m)


def belief_keep(belief, prior, eps):
    """``log(1 − t)`` for the least ``t`` such that ``(1−t)b + tπ`` has ``ε_bel ≤ ε``."""
    E = jnp.exp(eps)
    floor = jnp.expm1(eps) * prior
    return jnp.min(jnp.minimum(log_keep_for(belief, prior, E, floor),
                               log_keep_for(prior, belief, E, floor)))


def bisect_keep(level: Callable[[Mechanism], jax.Array], mech: Mechanism, x,
                steps: int | None = None, margin: float = MARGIN):
    """``log(1 − t)`` for (a hair above) the least ``t`` with ``level((1−t)K + t/m) ≤ x``, for any
    ``level`` that is non-increasing in ``t`` and 0 at ``t = 1`` (a post-processing-monotone
    notion). 0 (the identity) when ``K`` already has ``level ≤ x``.

    The root is bracketed on ``u = log(1 − t) ∈ [−40, 0]`` and found by :func:`bracketed_root`
    on the log of the level (secant and Illinois steps, safeguarded: a divergence's level is
    nearly a power of ``1 − t``, so its log is nearly linear in ``u`` and a handful of steps
    reach the precision bisection needed 32 (float32) or 60 (float64) for). It returns the
    feasible end of the final bracket, aimed at ``x·(1 − margin)`` so that the result sits inside
    the premise by a margin and an independent float64 re-check agrees. Its derivative with
    respect to the mechanism is the implicit function's, ``du/dθ = −(∂g/∂θ)/(∂g/∂u)`` with
    ``g = level(K_u(θ)) − x`` (:func:`jax.lax.custom_root`), zero where ``K`` is feasible.

    Args:
      level: the notion's level of one mechanism (a scalar).
      mech: one mechanism.
      x: the premise level (> 0).
      steps: root-finding steps (default: :data:`ROOT_STEPS` in float64,
        :data:`ROOT_STEPS_FLOAT32` otherwise).
      margin: relative margin inside the premise.
    """
    if steps is None:
        steps = ROOT_STEPS if mech.log_K.dtype == jnp.float64 else ROOT_STEPS_FLOAT32
    target = x * (1.0 - margin)

    def g(u):
        return level(mix_constant(mech, u)) - target

    def log_over_target(value):  # −∞ where the level is 0, +∞ where it is
        positive = value > 0
        return jnp.where(positive, jnp.log(jnp.where(positive, value, 1.0)) - jnp.log(target),
                         -jnp.inf)

    def solve(_, u0):
        # the bracket starts from u0 so that it carries u0's sharding (shard_map: varying); the
        # unmixed level (at u0 = 0) is the loop's first evaluation, not one of its own: the
        # level's program once, not twice (a float64 zCDP level compiles ~1 s). The level itself
        # (not g's level − target) is what the loop reads and what comes back for the test below
        def h(u):
            value = level(mix_constant(mech, u))
            return log_over_target(value), value
        return bracketed_root(h, u0 - 40.0, u0, None, steps)

    def tangent_solve(linear, y):
        slope = linear(jnp.ones_like(y))
        safe = jnp.where(slope != 0, slope, 1.0)
        return jnp.where(slope != 0, y / safe, 0.0)

    zero = jnp.zeros_like(mech.log_K[..., 0, 0])  # 0, carrying the mechanism's sharding
    u, at_zero = jax.lax.custom_root(g, zero, solve, tangent_solve, has_aux=True)
    return jnp.where(at_zero <= x, zero, u)  # feasible unmixed: the identity


def bracketed_root(h: Callable[[jax.Array], jax.Array], low, high, h_high, steps: int,
                   slope: float = 2.0):
    """The feasible end of a bracket ``[low, high]`` around the root of a non-decreasing ``h``
    (``h(low) ≤ 0 < h(high)``, ``h(low)`` never evaluated: taken as ``−∞``) after ``steps``
    evaluations: ``low`` with ``h(low) ≤ 0`` always.

    Each step evaluates one point inside the bracket and keeps the half it tells: regula falsi
    with the Illinois rule (the end kept twice in a row has its value halved) once both ends'
    values are finite; before a feasible value is known, a secant step from the infeasible end
    (slope ``slope`` at first: a divergence's level near the constant mechanism grows like
    ``(1 − t)²``, ``h`` like ``2u``); bisection where a value is infinite. Every point is kept at
    least 1/64 of the bracket from its ends, so the bracket shrinks by that at least; on a
    nearly linear ``h`` both ends converge superlinearly.

    Args:
      h: a scalar function, non-decreasing, possibly ``±∞``.
      low, high: the bracket (``low < high``).
      h_high: ``h(high) > 0``; ``None``: not known, the loop's first evaluation (one more, in
        the same loop body: ``h``'s program once), and ``h`` returns ``(value, aux)``, ``aux``
        of the value's shape and type.
      steps: evaluations of ``h`` inside the bracket.
      slope: the first secant step's slope guess.
    Returns:
      ``low`` of the final bracket (``h ≤ 0`` there, or the initial ``low``); with ``h_high``
      ``None``, ``(low, aux)``, ``aux`` what ``h`` gave at ``high`` (where ``h(high) ≤ 0`` the
      bracket is not one and ``low`` is not a root).
    """
    given = h_high is not None
    h_high_aux = h_high
    if not given:
        h_high = h_high_aux = jnp.full_like(high, jnp.nan)  # set by the first evaluation
    neg_inf = jnp.full_like(h_high, -jnp.inf)
    # state: bracket, its ends' values (Illinois-scaled), the last infeasible point before the
    # current high (for the secant), which end moved last (+1 high, −1 low, 0 none) and the
    # aux at high
    state = (low, high, neg_inf, h_high, high, h_high, jnp.zeros_like(h_high), h_high_aux)

    def body(i, state):
        first = False if given else i == 0
        low, high, h_low, h_high, prev, h_prev, moved, top = state
        width = high - low
        both = jnp.isfinite(h_low) & jnp.isfinite(h_high)
        falsi = low + width * (-h_low) / jnp.where(both, h_high - h_low, 1.0)
        # secant through (prev, high) where it has two infeasible points, else the slope guess
        run = high - prev
        rise = h_high - h_prev
        secant_slope = jnp.where((run > 0) & (rise > 0) & jnp.isfinite(rise),
                                 rise / jnp.where(run > 0, run, 1.0), slope)
        secant = high - jnp.where(jnp.isfinite(h_high), h_high, 0.0) / secant_slope
        middle = low + 0.5 * width
        point = jnp.where(both, falsi, jnp.where(jnp.isfinite(h_high), secant, middle))
        guard = width / 64.0
        point = jnp.clip(jnp.where(jnp.isnan(point), middle, point), low + guard, high - guard)
        point = jnp.where(first, high, point)
        value, aux = (h(point), None) if given else h(point)
        ok = value <= 0
        # Illinois: the end that stays for the second time in a row has its value halved
        keep_high_again = ok & (moved < 0) & jnp.isfinite(value)
        keep_low_again = ~ok & (moved > 0)
        new_low = jnp.where(ok, point, low)
        new_h_low = jnp.where(ok, value, jnp.where(keep_low_again, 0.5 * h_low, h_low))
        new_high = jnp.where(ok, high, point)
        new_h_high = jnp.where(ok, jnp.where(keep_high_again, 0.5 * h_high, h_high), value)
        new_prev = jnp.where(ok, prev, high)
        new_h_prev = jnp.where(ok, h_prev, h_high)
        new_moved = jnp.where(ok, -jnp.ones_like(moved), jnp.ones_like(moved))
        new = (new_low, new_high, new_h_low, new_h_high, new_prev, new_h_prev, new_moved, top)
        if given:
            return new
        # the first evaluation, at high: only its value (and aux) is kept
        start = (low, high, h_low, value, high, value, moved, aux)
        return tuple(jnp.where(first, a, b) for a, b in zip(start, new))

    if given:
        return jax.lax.fori_loop(0, steps, body, state)[0]
    final = jax.lax.fori_loop(0, steps + 1, body, state)
    return final[0], final[-1]
