"""Notions of the wider differential-privacy literature (SPEC §5), exact for finite mechanisms.

Pair notions: for a mechanism ``K`` and an ordered pair of distinct secrets ``(d, d')`` write
``P = K[d,·]``, ``Q = K[d',·]``; the level is the max over ordered pairs (or the pairs of a
neighbour relation) of a quantity of ``(P, Q)``:

* ``tv`` ½Σ|P−Q|; ``kl`` Σ P log(P/Q); ``chi2`` Σ (P−Q)²/Q;
* ``renyi`` ``D_α = (α−1)⁻¹ log Σ P^α Q^{1−α}`` (α > 1; α = ∞ is the LDP level);
* ``zcdp`` ``ρ = sup_{α>1} D_α/α`` (Bun, Steinke 2016, Def. 1.1), in :mod:`jaxpriv.core.zcdp`;
* ``delta`` the privacy profile (hockey-stick divergence) ``δ(ε) = Σ max(0, P − e^ε Q)``;
* ``eps_at_delta`` the least ``ε ≥ 0`` with ``δ(ε) ≤ δ``, in closed form;
* ``gdp`` the least ``μ`` with the trade-off curve ``T(P, Q) ≥ G_μ`` (Dong, Roth, Su 2022).

The channel notions with a prior of SPEC §5 (maximal leakage, pointwise maximal leakage) are
in :mod:`jaxpriv.core.notions`.

Numerics. Every kernel works from ``log K`` and broadcasts over leading batch axes; masks come
before ``log``/division (gradient-safe); levels are in ``[0, +∞]``, never NaN; ``P(w) > 0 = Q(w)``
makes KL, χ², Rényi and zCDP infinite. Rényi divergences are formed without cancellation near
``P = Q``: with ``t = P/Q``, ``Σ P^α Q^{1−α} − 1 = α(α−1)·H_α`` where
``H_α = Σ Q·ψ_α(t)``, ``ψ_α(t) = (t^α − αt + α − 1)/(α(α−1)) ≥ 0`` (the α-divergence; ψ → the KL
generator ``t log t − t + 1`` as α → 1), each term non-negative and taken from its power series
``ψ_α(e^L) = Σ_{k≥2} (1 + α + … + α^{k−2}) L^k/k!`` when ``α|L|`` is small; so
``D_α = log1p(α(α−1)H_α)/(α−1)`` keeps full relative accuracy as ``P → Q`` and as ``α → 1``.
When ``Σ P^α Q^{1−α}`` is large it is taken as a log-sum-exp instead (no overflow).

Examples:
  >>> from jaxpriv import families, level
  >>> rr = families.randomized_response(1.0)
  >>> round(float(level("tv", rr)), 6), round(float(level("kl", rr)), 6)  # tanh(½), tanh(½)
  (0.462117, 0.462117)
  >>> round(float(level("zcdp", rr)), 6)  # ε·tanh(ε/2): the sup is the α → 1 limit
  0.462117
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr, logsumexp, ndtri
from jaxtyping import Array, Float

from jaxpriv.core import divergences
from jaxpriv.core.errors import InputError
from jaxpriv.core.mechanisms import Mechanism

NEG_INF = -jnp.inf

# --------------------------------------------------------------------------------------------
# pairs
# --------------------------------------------------------------------------------------------


def pair_mask(n: int, neighbours=None) -> np.ndarray:
    """Which ordered pairs ``(d, d')`` count: every pair of distinct secrets, or the pairs of a
    symmetric neighbour relation ``E`` (boolean ``(n, n)``, its diagonal ignored)."""
    distinct = ~np.eye(n, dtype=bool)
    if neighbours is None:
        return distinct
    E = np.asarray(neighbours, dtype=bool)
    if E.shape != (n, n) or (E != E.T).any():
        raise InputError(f"neighbour relation must be a symmetric ({n}, {n}) boolean matrix")
    return E & distinct


def split_pairs(log_K: Float[Array, "*b n m"]) -> tuple[Float[Array, "*b n n m"], ...]:
    """``(log P, log Q)`` for every ordered pair: ``log P[.., d, d', w] = log K[d, w]`` and
    ``log Q[.., d, d', w] = log K[d', w]``."""
    n = log_K.shape[-2]
    shape = (*log_K.shape[:-2], n, n, log_K.shape[-1])
    return (jnp.broadcast_to(log_K[..., :, None, :], shape),
            jnp.broadcast_to(log_K[..., None, :, :], shape))


def distinct_pairs(log_K: Float[Array, "*b n m"]) -> tuple[Float[Array, "*b p m"], ...]:
    """``(log P, log Q)`` of the ``p = n(n − 1)`` ordered pairs of distinct rows, row ``d``'s
    ``n − 1`` pairs ``(d, d')`` together, ``d'`` in increasing order (slices and a repeat: XLA's
    gather of the same rows cost more than leaving the diagonal out saved)."""
    n = log_K.shape[-2]
    log_P = jnp.repeat(log_K, n - 1, axis=-2)
    log_Q = jnp.concatenate([jnp.delete(log_K, d, axis=-2, assume_unique_indices=True)
                             for d in range(n)], axis=-2)
    return log_P, log_Q


def max_over_pairs(values: Float[Array, "*b n n"], mask) -> Float[Array, "*b"]:
    """The max of a pair quantity over the counted pairs (0 when none counts, e.g. n = 1)."""
    return jnp.max(jnp.where(jnp.asarray(mask), values, 0.0), axis=(-2, -1))


PAIR_BLOCK_ELEMENTS = 1 << 22
"""Entries of ``pairs × outputs × cost`` one block of a pair level holds (32 MB a float64
array): a level over more pairs runs over blocks of rows ``d`` in sequence (``lax.map``), so a
300×300 mechanism's levels need no more than a few hundred MB whatever the notion (the pairs ×
outputs table alone is 215 MB there, and zCDP's grid of orders multiplies it by 48)."""


def _pair_level(pair_fn, log_K, neighbours=None, *, cost: int = 1, **kwargs):
    """The max over counted pairs of ``pair_fn(log P, log Q, **kwargs)``; ``cost``: arrays of
    the pairs × outputs shape ``pair_fn`` holds at once per entry (zCDP's grid of orders)."""
    n, m = log_K.shape[-2:]
    mask = pair_mask(n, neighbours)
    batch = math.prod(log_K.shape[:-2])
    rows = max(1, PAIR_BLOCK_ELEMENTS // max(1, batch * n * m * cost))
    if rows >= n:
        log_P, log_Q = split_pairs(log_K)
        return max_over_pairs(pair_fn(log_P, log_Q, **kwargs), mask)
    blocks = -(-n // rows)
    ids = np.arange(blocks * rows) % n  # the last block's extra rows repeat, counted nowhere
    counted = np.concatenate([mask, np.zeros((blocks * rows - n, n), bool)])
    shape = (*log_K.shape[:-2], rows, n, m)

    def block(args):
        rows_of_p, counted_here = args
        log_P = jnp.broadcast_to(jnp.take(log_K, rows_of_p, axis=-2)[..., :, None, :], shape)
        log_Q = jnp.broadcast_to(log_K[..., None, :, :], shape)
        return max_over_pairs(pair_fn(log_P, log_Q, **kwargs), counted_here)

    per_block = jax.lax.map(block, (jnp.asarray(ids.reshape(blocks, rows)),
                                    jnp.asarray(counted.reshape(blocks, rows, n))))
    return jnp.max(per_block, axis=0)


# --------------------------------------------------------------------------------------------
# pair quantities (reduce over the last axis of log P, log Q)
# --------------------------------------------------------------------------------------------


def tv_pair(log_P, log_Q):
    """``½ Σ |P − Q|``."""
    return divergences.tv(jnp.exp(log_P), jnp.exp(log_Q))


def kl_pair(log_P, log_Q):
    """``Σ P log(P/Q)`` (accurate as ``P → Q``, see :func:`jaxpriv.core.divergences.kl`)."""
    return divergences.kl_from_logs(log_P, log_Q)


def chi2_pair(log_P, log_Q):
    """``Σ (P − Q)²/Q``; ``+∞`` where ``Q = 0 < P``. Positivity from the logs (XLA flushes a
    subnormal ``e^{log P}``: χ² read 0 beside KL = ∞), each term ``Q·expm1(L)²`` where
    ``L = log(P/Q) < 1``, else ``e^{2 log P − log Q} − 2P + Q`` (no cancellation there)."""
    L, both = _log_ratio(log_P, log_Q)
    P, Q = jnp.exp(log_P), jnp.exp(log_Q)
    near = both & (L < 1.0)
    close = Q * jnp.expm1(jnp.where(near, L, 0.0)) ** 2
    far = both & ~near
    spread = jnp.exp(jnp.where(far, 2.0 * log_P - jnp.where(far, log_Q, 0.0), NEG_INF))
    # P = 0 < Q: the term is Q; Q = 0 < P: +∞
    alone = jnp.where(log_P > NEG_INF, jnp.inf, Q)
    terms = jnp.where(near, close, jnp.where(far, spread - 2.0 * P + Q, alone))
    return jnp.sum(terms, axis=-1)


def hockey_stick_pair(log_P, log_Q, epsilon):
    """``δ(ε) = Σ max(0, P − e^ε Q)``, clipped to ``[0, 1]``."""
    P = jnp.exp(log_P)
    # e^ε·Q is 0 where Q = 0, at ε = +∞ too (the limit: δ(∞) is P's mass where Q = 0; -∞ + ∞ was NaN)
    scaled = jnp.exp(jnp.where(log_Q == -jnp.inf, -jnp.inf, log_Q + epsilon))
    return jnp.clip(jnp.sum(jnp.maximum(P - scaled, 0.0), axis=-1), 0.0, 1.0)


def _log_ratio(log_P, log_Q):
    """``L = log(P/Q)`` where both are positive (0 elsewhere), with the masks."""
    both = (log_P > NEG_INF) & (log_Q > NEG_INF)
    L = jnp.where(both, log_P - jnp.where(both, log_Q, 0.0), 0.0)
    return L, both


def ldp_pair(log_P, log_Q):
    """``max_{w: P(w)>0} log(P/Q)`` (``+∞`` if ``Q = 0 < P``), the Rényi divergence of order ∞."""
    L, both = _log_ratio(log_P, log_Q)
    only_p = (log_P > NEG_INF) & ~both
    values = jnp.where(both, L, jnp.where(only_p, jnp.inf, NEG_INF))
    return jnp.maximum(jnp.max(values, axis=-1), 0.0)


_PSI_TERMS = 16
"""Series terms of :func:`alpha_divergence_terms` in float64 (remainder < 1e-17 relative)."""
_PSI_TERMS_FLOAT32 = 9
"""The same in float32: with ``|αL| ≤ ½`` the first term left out, ``k = 11``, is at most
``2(k−1)(½)^{k−2}/k!`` ≈ 1e-9 of the sum (float32's resolution: 6e-8)."""
_PSI_RADIUS = 0.5


def alpha_divergence_terms(log_P, log_Q, order):
    """``Q·ψ_α(P/Q)`` per output, ``ψ_α(t) = (t^α − αt + α − 1)/(α(α−1))``, without cancellation:
    its power series in ``L = log(P/Q)`` for ``α|L| ≤ ½`` (16 terms: remainder < 1e-17; 9 in
    float32: < 1e-9),
    else ``[P·expm1((α−1)L)/(α−1) − P + Q]/α`` (``P^α Q^{1−α}`` itself where ``(α−1)L > 1``,
    its exponent capped at 1: a term that large sends :func:`renyi_pair` to its log-sum-exp
    branch, and the cap keeps the gradient finite). ``Q/α`` where ``P = 0``; ``+∞`` where
    ``Q = 0 < P``.
    """
    alpha = jnp.asarray(order, log_P.dtype)
    h = alpha - 1.0
    L, both = _log_ratio(log_P, log_Q)
    P, Q = jnp.exp(log_P), jnp.exp(log_Q)
    small = both & (jnp.maximum(alpha, 1.0) * jnp.abs(L) <= _PSI_RADIUS)
    Ls = jnp.where(small, L, 0.0)
    # Σ_{k≥2} t_k, t_k = c_k L^k/k!, c_k = 1 + α + … + α^{k−2}, by the recurrence
    # t_{k+1} = L t_k/(k+1) + g_k, g_k = (αL)^{k−1} L²/(k+1)!: every factor bounded (|αL| ≤ ½),
    # where c_k and α^k themselves overflow float32 at α ≈ 1e3 (inf·0 = NaN: the zCDP grid's
    # large orders on near-uniform pairs) and float64 at α ≈ 1e19
    aL = alpha * Ls
    term = Ls * Ls / 2.0  # t_2
    extra = aL * Ls * Ls / 6.0  # g_2
    series = jnp.zeros_like(term)
    for k in range(2, (_PSI_TERMS if log_P.dtype == jnp.float64 else _PSI_TERMS_FLOAT32) + 2):
        series = series + term
        term = Ls * term / (k + 1) + extra
        extra = extra * aL / (k + 2)
    z = h * jnp.where(both, L, 0.0)
    moderate = z <= 1.0
    zm = jnp.where(moderate, z, 0.0)
    # α − 1 = 0 where an order just above 1 rounds to 1 (1 + 1e-9 in float32): expm1(hL)/h is L
    # there, the α → 1 limit (0/0 was NaN)
    at_one = h == 0.0
    h_safe = jnp.where(at_one, 1.0, h)
    grown = jnp.where(moderate,
                      P * jnp.where(at_one, jnp.where(both, L, 0.0), jnp.expm1(zm) / h_safe),
                      (jnp.exp(jnp.minimum(jnp.where(both, log_P, 0.0) + z, 1.0)) - P) / h_safe)
    direct = (grown - P + Q) / alpha
    terms = jnp.where(small, Q * series, direct)
    only_q = (log_Q > NEG_INF) & (log_P == NEG_INF)
    only_p = (log_P > NEG_INF) & (log_Q == NEG_INF)
    terms = jnp.where(both, terms, jnp.where(only_q, Q / alpha, 0.0))
    return jnp.where(only_p, jnp.inf, jnp.maximum(terms, 0.0))


_LSE_SWITCH = 0.5


def _renyi_parts(log_P, log_Q, order):
    """``(D_α/α, huge, D_α where huge)`` for a finite order ``α > 1``, from one log-sum-exp:
    ``log1p(y)/(α(α−1))`` with ``y = α(α−1)H_α``; where ``log Σ P^α Q^{1−α} > ½`` the log-sum-exp
    itself over ``α(α−1)`` (no overflow, no cancellation there). ``huge``: where ``α(α − 1)``
    overflows (α beyond ~1.3e154 in float64, ~1.8e19 in float32), whose level read 0 (a false D6
    violation at α = 1e200) or NaN: there the log-sum-exp is shifted by ``(α−1)D_∞``, every
    exponent at most ``log P``, and ``D_α = D_∞ + log Σ P e^{(α−1)(L − D_∞)}/(α − 1)`` (``+∞``
    where ``Q = 0 < P``); ``D_α/α`` would underflow at α ≈ 1e308, so it is returned itself."""
    alpha = jnp.asarray(order, log_P.dtype)
    h = alpha - 1.0
    huge = ~jnp.isfinite(alpha * h)
    has_p = log_P > NEG_INF
    L, both = _log_ratio(log_P, log_Q)
    top = jnp.max(jnp.where(both, L, NEG_INF), axis=-1)
    top = jnp.where(jnp.isfinite(top), top, 0.0)
    exponent = jnp.where(
        huge[..., None],
        jnp.where(both, jnp.where(both, log_P, 0.0) + h[..., None] * (L - top[..., None]), NEG_INF),
        jnp.where(has_p, alpha[..., None] * log_P + (1.0 - alpha[..., None]) *
                  jnp.where(has_p, log_Q, 0.0), NEG_INF))
    lse = logsumexp(exponent, axis=-1)  # (the shifted one where huge)
    large = (lse > _LSE_SWITCH) & ~huge
    H = jnp.sum(alpha_divergence_terms(log_P, log_Q, alpha[..., None]), axis=-1)
    finite = jnp.isfinite(H) & ~large & ~huge
    y = jnp.where(finite, alpha * h * H, 0.0)
    small = y < 1e-6  # log1p(y)/y by its series there (exact to 1e-18; no 0/0 at y = 0)
    log1p_ratio = jnp.where(small, 1.0 - y / 2.0 + y * y / 3.0,
                            jnp.log1p(y) / jnp.where(small, 1.0, y))
    value = jnp.where(large, jnp.where(large, lse, 0.0) / jnp.where(large, alpha * h, 1.0),
                      H * log1p_ratio)
    value = jnp.where(jnp.isinf(H) & ~large, jnp.inf, jnp.maximum(value, 0.0))
    only_p = ((log_P > NEG_INF) & (log_Q == NEG_INF)).any(axis=-1)
    at_huge = top + jnp.where(huge, lse, 0.0) / jnp.where(huge, h, 1.0)
    at_huge = jnp.where(only_p, jnp.inf, jnp.maximum(at_huge, 0.0))
    return value, huge, at_huge


@jax.jit
def renyi_over_order(log_P, log_Q, order):
    """``D_α(P‖Q)/α`` for a finite order ``α > 1`` (any shape broadcasting with the pairs'
    leading axes), in ``[0, +∞]`` (:func:`_renyi_parts`)."""
    value, huge, at_huge = _renyi_parts(log_P, log_Q, order)
    alpha = jnp.asarray(order, log_P.dtype)
    return jnp.where(huge, at_huge / jnp.where(huge, alpha, 1.0), value)


def renyi_pair(log_P, log_Q, order):
    """``D_α(P‖Q)`` for ``α > 1`` (``α = ∞``: :func:`ldp_pair`; a traced order is finite: a
    claim's order parameter is)."""
    if not _traced(order) and np.isinf(order):
        return ldp_pair(log_P, log_Q)
    alpha = jnp.full(log_P.shape[:-1], order, log_P.dtype)
    value, huge, at_huge = _renyi_parts(log_P, log_Q, alpha)
    return jnp.where(huge, at_huge, alpha * value)


def _sorted_by(key, *values):
    """``key`` ascending along the last axis and ``values`` in its order: one sort of all of
    them together (no index gather; ties in any order, which no prefix sum here depends on at
    the prefixes that count: equal keys give equal candidates)."""
    key, *values = jnp.broadcast_arrays(key, *values)
    return jax.lax.sort((key, *values), dimension=key.ndim - 1, num_keys=1, is_stable=False)


def eps_at_delta_pair(log_P, log_Q, delta):
    """The least ``ε ≥ 0`` with ``δ(ε) ≤ δ``, exactly: ``δ(ε) = max_k (A_k − e^ε B_k)`` over the
    top-``k`` sums ``A_k, B_k`` of ``P, Q`` with outputs sorted by ``log(P/Q)`` descending (the
    best set ``{P > e^ε Q}`` is such a prefix), so ``δ(ε) ≤ δ ⇔ e^ε ≥ (A_k − δ)/B_k`` for every
    ``k`` with ``A_k > δ``: ``ε = max(0, max_k log((A_k − δ)/B_k))``; ``+∞`` when a prefix with
    ``B_k = 0`` has ``A_k > δ`` (more than δ of P's mass where Q has none)."""
    L, both = _log_ratio(log_P, log_Q)
    has_p = log_P > NEG_INF
    key = jnp.where(both, L, jnp.where(has_p, jnp.inf, NEG_INF))
    has_q = log_Q > NEG_INF
    # log B_k by a cumulative log-sum-exp of log Q: B itself underflows where Q is below
    # e^−708 (float64; XLA flushes the subnormal e^−736 to 0) and read ε = ∞ — a finite ε of
    # 735 on a mechanism with such an entry (a false violation of D6–D8 the audit once
    # reported); zero entries enter as a finite floor, their absence counted apart
    _, P, log_Q_sorted, q_count = _sorted_by(-key, jnp.exp(log_P),
                                              jnp.where(has_q, log_Q, _LOG_FLOOR),
                                              has_q.astype(log_P.dtype))
    A = jnp.cumsum(P, axis=-1)
    log_B, has_B = _log_prefix(log_Q_sorted, q_count)
    over = A > delta
    positive = over & has_B
    candidate = jnp.where(positive, jnp.log(jnp.where(positive, A - delta, 1.0)) -
                          jnp.where(positive, log_B, 0.0), NEG_INF)
    candidate = jnp.where(over & ~has_B, jnp.inf, candidate)
    return jnp.maximum(jnp.max(candidate, axis=-1), 0.0)


_LOG_FLOOR = -1e30
"""A zero probability's log where a cumulative log-sum-exp takes it (finite: no ``−∞ − (−∞)``
in its derivative); whether a sum has any mass is counted apart."""


_LOG_HALF = math.log(0.5)
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _tail_start(dtype) -> float:
    """Below this ``log x`` the probit is taken from ``log x`` itself: ``e^{log x}`` would be
    subnormal (float64 below ``e^−708``, float32 below ``e^−87``) and XLA flushes subnormals."""
    return -700.0 if jnp.dtype(dtype) == jnp.float64 else -80.0


@jax.custom_jvp
def _log_probit_lower(log_x):
    """``Φ⁻¹(e^{log x})`` for ``log x ≤ log ½`` (``−∞`` at ``x = 0``). Where ``e^{log x}`` is
    representable, ``ndtri``; below :func:`_tail_start`, the Mills-ratio start
    ``s² = −2 log x − log 2π − 2 log s`` (three fixed-point steps) and three Newton steps on
    ``log Φ(z) = log x`` (``d log Φ/dz = φ(z)/Φ(z)``, both from ``log_ndtr``): ``Φ⁻¹(5.3e-320)`` is
    −38.06, not −∞."""
    start = _tail_start(log_x.dtype)
    tail = log_x < start
    zero = log_x == NEG_INF
    direct = ndtri(jnp.exp(jnp.where(tail, _LOG_HALF, log_x)))
    # a log below −¼·max (a "zero" written as the dtype's lowest number) would overflow −2·log x
    lt = jnp.maximum(jnp.where(tail & ~zero, log_x, start), -0.25 * jnp.finfo(log_x.dtype).max)
    s = jnp.sqrt(-2.0 * lt)
    for _ in range(3):
        s = jnp.sqrt(-2.0 * lt - 2.0 * _LOG_SQRT_2PI - 2.0 * jnp.log(s))
    z = -s
    for _ in range(3):
        log_cdf = log_ndtr(z)
        slope = jnp.exp(-0.5 * z * z - _LOG_SQRT_2PI - log_cdf)
        step = (log_cdf - lt) / slope
        # far out (|z| ≳ 1e9: z² cancels to nothing in −z²/2 − log Φ) the start is exact enough
        z = z - jnp.where(jnp.isfinite(step), step, 0.0)
    return jnp.where(zero, NEG_INF, jnp.where(tail, z, direct))


@_log_probit_lower.defjvp
def _log_probit_lower_jvp(primals, tangents):
    # the inverse function's derivative, dz/d(log x) = x/φ(z) = e^{log x + z²/2 + log √(2π)},
    # not the derivative of the approximations (ndtri's branches, the unrolled fixed-point and
    # Newton steps): the same value to rounding, and a search's gradient program that traced
    # them all compiled 3.6 s (D10's segment, 7.5 s in all, the quick audit's largest); 0 at
    # x = 0 (z = −∞)
    (log_x,), (t,) = primals, tangents
    z = _log_probit_lower(log_x)
    finite = jnp.isfinite(z) & jnp.isfinite(log_x)
    safe_z = jnp.where(finite, z, 0.0)
    slope = jnp.exp(jnp.where(finite, log_x, 0.0) + 0.5 * safe_z * safe_z + _LOG_SQRT_2PI)
    return z, jnp.where(finite, slope * t, 0.0)


def _log_probit(log_x, log_complement):
    """``Φ⁻¹(x)`` given ``log x`` and ``log(1 − x)`` (each from its own sum: no cancellation near
    1, no underflow near 0); ``x > ½`` exactly where ``log x > log(1 − x)``."""
    upper = log_x > log_complement
    z = _log_probit_lower(jnp.where(upper, log_complement, log_x))
    return jnp.where(upper, -z, z)


def _log_prefix(log_x, count, reverse: bool = False):
    """``log Σ_{j≤k} x_j`` for every ``k`` (``reverse``: ``Σ_{j≥k}``) by a cumulative
    log-sum-exp, and whether the sum holds an entry (``count`` marks the entries that are not
    zero; a zero entry's log is the finite :data:`_LOG_FLOOR`, its sum's value then unused)."""
    axis = log_x.ndim - 1
    has = jax.lax.cumsum(count, axis=axis, reverse=reverse) > 0
    return jax.lax.cumlogsumexp(log_x, axis=axis, reverse=reverse), has


def _log_prefix_and_suffix(log_x, count):
    """``log Σ_{j≤k} x_j`` and ``log Σ_{j>k} x_j`` for every ``k`` (:func:`_log_prefix`), ``−∞``
    where the sum holds no entry; and whether each does."""
    log_in, has_in = _log_prefix(log_x, count)
    log_from, has_from = _log_prefix(log_x, count, reverse=True)  # Σ_{j≥k}
    log_out = jnp.concatenate([log_from[..., 1:], jnp.full_like(log_from[..., :1], _LOG_FLOOR)],
                              axis=-1)
    has_out = jnp.concatenate([has_from[..., 1:], jnp.zeros_like(has_from[..., :1])], axis=-1)
    return (jnp.where(has_in, log_in, NEG_INF), jnp.where(has_out, log_out, NEG_INF),
            has_in, has_out)


def gdp_pair(log_P, log_Q):
    """The least ``μ ≥ 0`` with ``T(P, Q) ≥ G_μ`` (Dong, Roth, Su 2022, Def. 2.6 and §2.2):
    ``T`` is piecewise linear with vertices at the prefixes ``S_k`` of the outputs sorted by
    ``Q/P`` descending, ``G_μ`` convex, so ``T − G_μ`` is concave on each segment and the
    vertices decide: ``μ = max_k Φ⁻¹(Q(S_k)) − Φ⁻¹(P(S_k))`` (type-I error ``P(S_k)``, power
    ``Q(S_k)``), ``+∞`` where ``P(S_k) = 0 < Q(S_k)`` or ``Q(S_k) = 1 > P(S_k)``. Every sum is
    a log-sum-exp of the logs and every probit is taken from a log (:func:`_log_probit`): a
    prefix of mass ``e^−736`` is subnormal, XLA flushes it to 0 and μ read ∞ (a finite 38)."""
    L, both = _log_ratio(log_Q, log_P)  # log(Q/P): ascending in P/Q
    has_p, has_q = log_P > NEG_INF, log_Q > NEG_INF
    key = jnp.where(both, L, jnp.where(has_q, jnp.inf, NEG_INF))
    _, lp, lq, cp, cq = _sorted_by(-key, jnp.where(has_p, log_P, _LOG_FLOOR),
                                   jnp.where(has_q, log_Q, _LOG_FLOOR),
                                   has_p.astype(log_P.dtype), has_q.astype(log_P.dtype))
    lp_in, lp_out, p_in, p_out = _log_prefix_and_suffix(lp, cp)
    lq_in, lq_out, q_in, q_out = _log_prefix_and_suffix(lq, cq)
    skip = (~p_in & ~q_in) | (~p_out & ~q_out)
    power = _log_probit(jnp.where(skip, _LOG_HALF, lq_in), jnp.where(skip, _LOG_HALF, lq_out))
    size = _log_probit(jnp.where(skip, _LOG_HALF, lp_in), jnp.where(skip, _LOG_HALF, lp_out))
    mu = jnp.where(skip, NEG_INF, power - size)
    nan = jnp.isnan(log_P).any(axis=-1) | jnp.isnan(log_Q).any(axis=-1)  # NaN in, NaN out
    return jnp.where(nan, jnp.nan, jnp.maximum(jnp.max(mu, axis=-1), 0.0))


# --------------------------------------------------------------------------------------------
# levels of a Mechanism (max over ordered pairs)
# --------------------------------------------------------------------------------------------


def _traced(value) -> bool:
    """A traced option (an argument of a compiled program shared by a claim's instances,
    :mod:`jaxpriv.registry.programs`): checked where it was set, not here."""
    return isinstance(value, jax.core.Tracer)


def _order(order) -> float:
    return _number("renyi", "order", order, lambda v: v > 1.0, "> 1 (α = inf is the LDP level)")


def _number(key: str, name: str, value, ok=None, must: str = "") -> float:
    """``value`` as a float, else an :class:`InputError` naming notion ``key``'s parameter
    ``name``: not a number, or ``ok(value)`` false (the message says it ``must`` be so). A traced
    value passes as it is: it was checked where it was set (a claim's parameter)."""
    if _traced(value):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) \
            or math.isnan(value):
        raise InputError(f"notion {key!r}: '{name}' must be a number, got {value!r}")
    if ok is not None and not ok(float(value)):
        raise InputError(f"notion {key!r}: '{name}' must be {must}, got {value!r}")
    return float(value)


def tv(mech: Mechanism, neighbours=None) -> Float[Array, "*b"]:
    """Total variation, max over ordered pairs of rows (SPEC §5)."""
    return _pair_level(tv_pair, mech.log_K, neighbours)


def kl(mech: Mechanism, neighbours=None) -> Float[Array, "*b"]:
    """KL divergence, max over ordered pairs of rows (SPEC §5)."""
    return _pair_level(kl_pair, mech.log_K, neighbours)


def chi2(mech: Mechanism, neighbours=None) -> Float[Array, "*b"]:
    """χ² divergence, max over ordered pairs of rows (SPEC §5)."""
    return _pair_level(chi2_pair, mech.log_K, neighbours)


def renyi(mech: Mechanism, order=2.0, neighbours=None) -> Float[Array, "*b"]:
    """Rényi divergence of order ``α > 1``, max over ordered pairs (SPEC §5)."""
    return _pair_level(renyi_pair, mech.log_K, neighbours, order=_order(order))


def delta(mech: Mechanism, epsilon=1.0, neighbours=None) -> Float[Array, "*b"]:
    """Privacy profile ``δ(ε)`` (hockey-stick divergence), max over ordered pairs (SPEC §5)."""
    value = _number("delta", "epsilon", epsilon, lambda v: v >= 0, "≥ 0")
    return _pair_level(hockey_stick_pair, mech.log_K, neighbours, epsilon=value)


def gdp(mech: Mechanism, neighbours=None) -> Float[Array, "*b"]:
    """Gaussian-DP level ``μ``, max over ordered pairs (SPEC §5)."""
    return _pair_level(gdp_pair, mech.log_K, neighbours)


__all__ = ["pair_mask", "split_pairs", "max_over_pairs", "tv_pair", "kl_pair", "chi2_pair",
           "hockey_stick_pair", "ldp_pair", "alpha_divergence_terms", "renyi_over_order",
           "renyi_pair", "eps_at_delta_pair", "gdp_pair", "tv", "kl", "chi2",
           "renyi", "delta", "gdp"]
