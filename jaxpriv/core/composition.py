"""Composition (SPEC §6): the exact privacy profile of a finite mechanism used ``k`` times.

A mechanism used ``k`` times on the same secret releases ``k`` independent outputs. For an
ordered pair of secrets with rows ``P = K[d,·]``, ``Q = K[d',·]`` the composed privacy profile is

  ``δ_k(ε) = Σ_o max(0, P^⊗k(o) − e^ε Q^⊗k(o)) = E_{o∼P^⊗k}[(1 − e^{ε − L(o)})_+]``,

with the privacy loss ``L(o) = Σ_j L_{o_j}``, ``L_w = log(P(w)/Q(w))``. Output sequences with
the same count vector ``n`` (``n_w`` uses of output ``w``, ``Σ n_w = k``) have the same loss
``Σ n_w L_w`` and P-mass ``k!/Π n_w! · Π P(w)^{n_w}``, so the sum runs over the
``C(k + m − 1, m − 1)`` count vectors (:func:`count_vectors`), each term non-negative: no
cancellation, whatever the size of δ. Outputs with ``P(w) > 0 = Q(w)`` have ``L_w = +∞``: the
sequences that use one carry P-mass ``1 − (1 − P_∞)^k`` and count in ``δ_k`` at every ε; outputs
with ``P(w) = 0`` carry no P-mass.

* ``delta_composed(k, ε)``: ``δ_k(ε)``, max over ordered pairs of distinct secrets (or a
  neighbour relation), SPEC §6;
* ``eps_composed(k, δ)``: the least ``ε ≥ 0`` with ``δ_k(ε) ≤ δ``; exact: on the segment between
  two consecutive losses ``δ_k(ε) = A − e^ε B`` (``A``, ``B`` the P- and Q-mass of the losses
  above it), so ``ε = log((A − δ)/B)`` on the segment where ``δ_k`` crosses ``δ`` (``+∞`` where
  the ``+∞`` atom's mass alone exceeds δ). At ``k = 1`` they are SPEC §5's ``delta`` and
  ``eps_at_delta``.

The worst case over ε-LDP pairs (Kairouz, Oh, Viswanath 2015, Thm 3.3) is binary randomized
response: :func:`rr_delta_composed` is its closed form
``δ_k(ε') = (1+e^ε)^−k Σ_l C(k,l) max(0, e^{(k−l)ε} − e^{ε' + lε})``.

Numerics: float64 (the notions are float64 references); losses as sums ``Σ n_w L_w`` (no dot:
exact products of small integers by the losses, added in float64 on every device); masks before
every ``log``; ``+∞`` is a value (ε where the ``+∞`` atom alone exceeds δ), never NaN. The count
vectors are held in memory: :data:`MAX_COUNT_VECTORS` per pair, else an :class:`InputError`
naming the size and how to shrink it.

Examples:
  >>> from jaxpriv import families, level
  >>> rr = families.randomized_response(1.0)
  >>> round(float(level("delta_composed", rr, k=1, epsilon=0.5)), 6) == \\
  ...     round(float(level("delta", rr, epsilon=0.5)), 6)
  True
  >>> rr = families.randomized_response(0.1)  # 100 uses at δ = 1e-5: far below kε = 10
  >>> round(float(level("eps_composed", rr, k=100, delta=1e-5)), 4)
  4.3068
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln
from jaxtyping import Array, Float

from jaxpriv.core.composition_tails import eps_over_pairs, pair_losses
from jaxpriv.core.errors import InputError
from jaxpriv.core.mechanisms import Mechanism

NEG_INF = -jnp.inf
MAX_COUNT_VECTORS = 4_000_000  # count vectors of one pair held at once (each: m int32 + 4 floats)
MAX_PAIR_TERMS = 2_000_000_000  # ordered pairs × count vectors of one mechanism
MAX_TAIL_USES = 1000  # the binomial-tail tables' scaled entries stay in [2^−k, 2^k]
_CHUNK_ELEMENTS = 1 << 22
_TAIL_ROUND_ELEMENTS = 16_384  # outer count vectors a CPU round of eps_over_pairs takes at once:
# its rounds and searches run in step across a chunk's mechanisms, so a wide chunk waits for its
# slowest (EPYC, 4×4 at k = 100: 1–8 mechanisms a chunk 660–730/s, 256 a chunk 120/s; k = 10:
# 100–400 a chunk 21,000–26,000/s)


# --------------------------------------------------------------------------------------------
# count vectors
# --------------------------------------------------------------------------------------------


def number_of_count_vectors(k: int, m: int) -> int:
    """``C(k + m − 1, m − 1)``: the count vectors of ``k`` uses of ``m`` outputs."""
    return math.comb(k + m - 1, m - 1)


def count_vectors(k: int, m: int) -> np.ndarray:
    """Every ``n ∈ ℕ^m`` with ``Σ n = k``, shape ``(C(k+m−1, m−1), m)`` int32, in
    lexicographic order of ``n`` (cached).

    Raises:
      InputError: more than :data:`MAX_COUNT_VECTORS` of them.
    """
    k, m = checked_uses(k), int(m)
    size = number_of_count_vectors(k, m)
    if size > MAX_COUNT_VECTORS:
        raise InputError(
            f"composition of k = {k} uses of {m} outputs has {size:,} count vectors, more than "
            f"the {MAX_COUNT_VECTORS:,} held exactly; use fewer outputs (merge outputs with equal "
            f"privacy loss), a smaller k, or the certified bracket (jaxpriv compose)")
    return _count_vectors(k, m)


@functools.lru_cache(maxsize=64)
def _count_vectors(k: int, m: int) -> np.ndarray:
    # the first m − 1 counts with sum ≤ k, extended one coordinate at a time (each row of sum s
    # repeated k − s + 1 times, with 0..k − s appended); the last count is what is left
    head = np.zeros((1, 0), np.int32)
    for _ in range(m - 1):
        left = k - head.sum(axis=1)
        rows = np.repeat(np.arange(len(head)), left + 1)
        starts = np.cumsum(left + 1) - (left + 1)
        new = np.arange(len(rows)) - np.repeat(starts, left + 1)
        head = np.column_stack([head[rows], new.astype(np.int32)])
    return np.column_stack([head, k - head.sum(axis=1)]).astype(np.int32)


@functools.lru_cache(maxsize=16)
def log_multinomials(k: int, m: int) -> np.ndarray:
    """``log(k! / Π n_w!)`` for each row of :func:`count_vectors` (float64, cached)."""
    from math import lgamma
    counts = count_vectors(k, m)
    table = np.array([lgamma(j + 1.0) for j in range(k + 1)])
    return table[k] - table[counts].sum(axis=1)


def checked_uses(k) -> int:
    """``k`` as a number of uses (an int ≥ 1), else an :class:`InputError`."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise InputError(f"k must be an integer ≥ 1 (the number of uses), got {k!r}")
    return int(k)


def checked_number(key: str, name: str, value, ok=None, must: str = "") -> float:
    """``value`` as a float (not a bool, not NaN, ``ok(value)`` where given; a traced value as
    it is), else an :class:`InputError` naming ``key``'s parameter ``name`` (the pair notions'
    check)."""
    from jaxpriv.core.pair_notions import _number
    return _number(key, name, value, ok, must)


# --------------------------------------------------------------------------------------------
# one ordered pair
# --------------------------------------------------------------------------------------------


class ComposedLoss(NamedTuple):
    """The k-fold privacy-loss distribution of one pair over count vectors (arrays ``(V,)``):
    ``loss`` (``Σ n_w L_w``), ``log_p`` (its P-mass; ``−∞`` for vectors that use an output
    outside both supports or an ``+∞`` atom) and ``infinite`` (the P-mass of the sequences with
    an ``+∞`` loss, a scalar)."""

    loss: Float[Array, " V"]
    log_p: Float[Array, " V"]
    infinite: Float[Array, ""]


def composed_loss(log_P: Float[Array, " m"], log_Q: Float[Array, " m"],
                  counts: np.ndarray, log_multinomial: np.ndarray) -> ComposedLoss:
    """:class:`ComposedLoss` of the pair ``(P, Q)`` at the count vectors ``counts`` (``(V, m)``,
    all summing to ``k``) with their ``log_multinomial`` coefficients."""
    k = int(counts[0].sum())
    both, L, infinite = pair_losses(log_P, log_Q, k)
    safe_log_P = jnp.where(both, log_P, 0.0)
    counts = jnp.asarray(counts, log_P.dtype)
    used = counts > 0
    allowed = ~jnp.any(used & ~both, axis=-1)
    loss = jnp.sum(counts * L, axis=-1)
    log_p = jnp.where(allowed, jnp.asarray(log_multinomial, log_P.dtype)
                      + jnp.sum(counts * safe_log_P, axis=-1), NEG_INF)
    return ComposedLoss(loss, log_p, infinite)


def delta_of_loss(c: ComposedLoss, epsilon) -> Float[Array, ""]:
    """``δ_k(ε) = P_∞^(k) + Σ_v P_v (1 − e^{ε − L_v})_+``, clipped to ``[0, 1]``."""
    above = (c.loss > epsilon) & (c.log_p > NEG_INF)
    gap = jnp.where(above, epsilon - c.loss, -1.0)  # where before expm1 (no inf·0)
    terms = jnp.where(above, jnp.exp(jnp.where(above, c.log_p, 0.0)) * -jnp.expm1(gap), 0.0)
    return jnp.clip(c.infinite + jnp.sum(terms), 0.0, 1.0)


def eps_of_loss(c: ComposedLoss, delta, steps: int = 64) -> Float[Array, ""]:
    """The least ``ε ≥ 0`` with ``δ_k(ε) ≤ δ``, exactly.

    Between consecutive losses ``δ_k(ε) = A − e^ε B`` (``A``, ``B``: the P- and Q-mass of the
    losses above ε, the ``+∞`` atom's in ``A``), decreasing in ε. A bisection on ``[0, max L]``
    finds the crossing's segment: it stops as soon as no loss lies strictly inside the bracket
    (15–20 halvings on random 4×4 pairs at k = 100; at most ``steps``, float64 spacing); there
    ``ε = log(A − δ) − log B`` exactly, ``B`` summed in log space (losses of hundreds of nats:
    ``e^{log p − L}`` underflows). The halvings compare ``A − δ`` with ``e^ε B = Σ e^{ε + log q}``
    over the losses above ε, each term ≤ its P-mass ≤ 1: no overflow, and no underflow where it
    matters (Q-masses scaled once by their largest, as before 2026-11-26, lost the terms of
    ``e^{−960}`` that decide ε ≈ 962 at k = 100 and returned 962.73 for 962.27). For m ≥ 3
    outputs :mod:`jaxpriv.core.composition_tails` does the same search on fewer terms."""
    live = c.log_p > NEG_INF
    L = jnp.where(live, c.loss, NEG_INF)
    p = jnp.where(live, jnp.exp(jnp.where(live, c.log_p, 0.0)), 0.0)
    log_q = jnp.where(live, c.log_p - jnp.where(live, c.loss, 0.0), NEG_INF)

    def segment(eps):  # log(A − δ) − log B over the losses above ε (−∞ where A ≤ δ)
        above = L > eps
        A = c.infinite + jnp.sum(jnp.where(above, p, 0.0))
        masked = jnp.where(above, log_q, NEG_INF)
        top = jnp.max(masked)
        shift = jnp.where(top > NEG_INF, top, 0.0)
        log_B = shift + jnp.log(jnp.sum(jnp.exp(masked - shift)))
        ok = A > delta
        return jnp.where(ok, jnp.log(jnp.where(ok, A - delta, 1.0)) - log_B, NEG_INF)

    # the segment search is not differentiated (a while loop): its inputs are constants to it,
    # the gradient flows through the exact segment formula
    fixed_L, fixed_p, fixed_log_q, fixed_inf = jax.lax.stop_gradient((L, p, log_q, c.infinite))

    def over(eps):  # δ_k(eps) > δ ⇔ A − δ > e^eps B; e^{eps + log q} ≤ P ≤ 1 above eps
        above = fixed_L > eps
        A = fixed_inf + jnp.sum(jnp.where(above, fixed_p, 0.0))
        eB = jnp.sum(jnp.where(above, jnp.exp(jnp.where(above, eps + fixed_log_q, 0.0)), 0.0))
        return A - delta > eB

    def more(state):
        _, _, step, inside = state
        return (step < steps) & inside

    def halve(state):
        lo, hi, step, _ = state
        mid = 0.5 * (lo + hi)
        below = over(mid)
        lo, hi = jnp.where(below, mid, lo), jnp.where(below, hi, mid)
        return lo, hi, step + 1, jnp.any((fixed_L > lo) & (fixed_L < hi))

    top = jnp.maximum(jnp.max(fixed_L), 0.0)
    zero = jnp.minimum(top, 0.0)  # 0, computed from the data: varying like it under shard_map
    start = (zero, top, jnp.zeros((), jnp.int32), top >= zero)
    lo, hi, _, _ = jax.lax.while_loop(more, halve, start)
    eps = jnp.clip(segment(lo), lo, hi)
    eps = jnp.where(segment(zero) > zero, eps, zero)  # δ_k(0) ≤ δ: ε = 0
    return jnp.where(c.infinite > delta, jnp.inf, eps)


def combined_loss(parts) -> ComposedLoss:
    """Heterogeneous composition of one pair: ``parts`` a sequence of ``(log_P, log_Q, k)``
    (each mechanism's rows for the same ordered pair of secrets and its number of uses). The
    k-fold losses of each are combined over every pair of count vectors: the losses add, the
    P-masses multiply, and a sequence with an ``+∞`` loss in any part has an ``+∞`` loss:
    ``1 − Π(1 − P_∞,i)``. Exact; the sizes multiply (checked against :data:`MAX_COUNT_VECTORS`)."""
    total = 1
    losses = []
    for log_P, log_Q, k in parts:
        m = log_P.shape[-1]
        total *= number_of_count_vectors(checked_uses(k), m)
        if total > MAX_COUNT_VECTORS:
            raise InputError(
                f"the composition has more than {MAX_COUNT_VECTORS:,} combinations of count "
                f"vectors; use fewer uses or fewer outputs")
        losses.append(composed_loss(log_P, log_Q, count_vectors(k, m), log_multinomials(k, m)))
    loss, log_p, survive = losses[0].loss, losses[0].log_p, -losses[0].infinite
    survive = jnp.log1p(survive)  # log Π(1 − P_∞,i)
    for c in losses[1:]:
        loss = (loss[:, None] + c.loss[None, :]).reshape(-1)
        log_p = (log_p[:, None] + c.log_p[None, :]).reshape(-1)
        survive = survive + jnp.log1p(-c.infinite)
    return ComposedLoss(loss, log_p, -jnp.expm1(survive))


# --------------------------------------------------------------------------------------------
# mechanisms: max over ordered pairs, any batch shape
# --------------------------------------------------------------------------------------------


def _pair_indices(n: int, neighbours) -> np.ndarray:
    from jaxpriv.core.pair_notions import pair_mask
    return np.argwhere(pair_mask(n, neighbours))


def _composed_level(log_K, k: int, pair_value, neighbours) -> Float[Array, "*b"]:
    """``max`` over the counted pairs of ``pair_value(composed_loss(pair))``; the (mechanism,
    pair) items are evaluated a chunk at a time (``lax.map``), so memory stays near
    :data:`_CHUNK_ELEMENTS` count-vector terms whatever the batch and the number of pairs."""
    n, m = log_K.shape[-2:]
    counts, log_mult = count_vectors(k, m), log_multinomials(k, m)
    pairs = _pair_indices(n, neighbours)
    batch = log_K.shape[:-2]
    flat = log_K.reshape((-1, n, m))
    if len(pairs) == 0 or flat.shape[0] == 0:
        return jnp.zeros(batch, log_K.dtype)
    work = len(pairs) * len(counts)
    if work > MAX_PAIR_TERMS:
        raise InputError(
            f"composition of k = {k} uses of a {n}×{m} mechanism sums {len(counts):,} count "
            f"vectors over {len(pairs):,} ordered pairs ({work:,} terms per mechanism, more than "
            f"{MAX_PAIR_TERMS:,}); use fewer secrets (a neighbour relation), fewer outputs or a "
            f"smaller k")
    first = jnp.asarray(pairs[:, 0])
    second = jnp.asarray(pairs[:, 1])

    def item(args):
        index, pair = args
        lk = flat[index]
        return pair_value(composed_loss(lk[first[pair]], lk[second[pair]], counts, log_mult))

    index = jnp.repeat(jnp.arange(flat.shape[0]), len(pairs))
    pair = jnp.tile(jnp.arange(len(pairs)), flat.shape[0])
    per_call = max(1, min(len(index), _CHUNK_ELEMENTS // len(counts)))
    values = jax.lax.map(item, (index, pair), batch_size=per_call)
    return jnp.max(values.reshape(flat.shape[0], len(pairs)), axis=1).reshape(batch)


def delta_composed(mech: Mechanism, k=10, epsilon=1.0, neighbours=None) -> Float[Array, "*b"]:
    """``δ_k(ε)`` of ``k`` uses of the mechanism, max over ordered pairs (SPEC §6)."""
    k = checked_uses(k)
    eps = checked_number("delta_composed", "epsilon", epsilon, lambda v: v >= 0, "≥ 0")
    return _composed_level(mech.log_K, k, lambda c: delta_of_loss(c, eps), neighbours)


def eps_composed(mech: Mechanism, k=10, delta=1e-5, neighbours=None) -> Float[Array, "*b"]:
    """The least ``ε ≥ 0`` with ``δ_k(ε) ≤ δ`` for ``k`` uses, max over ordered pairs (SPEC §6)."""
    k = checked_uses(k)
    d = checked_number("eps_composed", "delta", delta, lambda v: 0.0 < v < 1.0, "in (0, 1)")
    m = mech.log_K.shape[-1]
    if 3 <= m and k <= MAX_TAIL_USES:  # the binomial-tail sums: C(k+m−2, m−2) lookups a step
        return _eps_by_tails(mech.log_K, k, d, neighbours)
    return _composed_level(mech.log_K, k, lambda c: eps_of_loss(c, d), neighbours)


def _eps_by_tails(log_K, k: int, delta: float, neighbours, chunk: int | None = None):
    """:func:`jaxpriv.core.composition_tails.eps_over_pairs` over any batch shape, a chunk of
    mechanisms at a time (``lax.map``; memory near :data:`_CHUNK_ELEMENTS` terms)."""
    n, m = log_K.shape[-2:]
    counts, log_mult = count_vectors(k, m - 1), log_multinomials(k, m - 1)
    pairs = _pair_indices(n, neighbours)
    batch = log_K.shape[:-2]
    flat = log_K.reshape((-1, n, m))
    total = flat.shape[0]
    if len(pairs) == 0 or total == 0:
        return jnp.zeros(batch, log_K.dtype)
    if chunk is None:  # rounds run in step across a chunk: small on a CPU, wide on a GPU
        size = len(counts) + 2 * (k + 1) * (k + 2)
        wide = jax.default_backend() in ("gpu", "cuda", "rocm", "tpu")
        chunk = _CHUNK_ELEMENTS // size if wide else _TAIL_ROUND_ELEMENTS // len(counts)
    per = max(1, min(total, chunk))
    chunks = -(-total // per)
    padded = jnp.concatenate([flat, jnp.repeat(flat[:1], chunks * per - total, axis=0)])
    values = jax.lax.map(lambda x: eps_over_pairs(x, pairs, k, delta, counts, log_mult),
                         padded.reshape((chunks, per, n, m)))
    return values.reshape(-1)[:total].reshape(batch)


# --------------------------------------------------------------------------------------------
# the worst case over ε-LDP pairs (Kairouz, Oh, Viswanath 2015, Thm 3.3)
# --------------------------------------------------------------------------------------------


def rr_delta_composed(eps, k: int, eps_prime) -> Float[Array, "*b"]:
    """``δ_k(ε')`` of ``k`` uses of binary randomized response RR_ε (SPEC §6):
    ``(1+e^ε)^−k Σ_{l=0}^{k} C(k,l) max(0, e^{(k−l)ε} − e^{ε' + lε})`` in log space, each term
    ``C(k,l) e^{(k−l)ε}(1 − e^{ε' − (k−2l)ε})`` non-negative. Broadcasts over ``eps`` and
    ``eps_prime``. Kairouz, Oh, Viswanath (2015) Thm 3.3: every k-fold composition of ε-LDP steps
    (adaptive ones too) has ``δ_k(ε') ≤`` this."""
    return _over_rr(delta_of_loss, eps, k, eps_prime)


def rr_loss(eps, k: int) -> ComposedLoss:
    """The k-fold privacy-loss distribution of binary randomized response ``RR_ε`` (scalar
    ``eps``): atoms ``(k − 2l)ε`` with P-mass ``C(k,l) e^{(k−l)ε}/(1+e^ε)^k``, ``l = 0..k``."""
    k = checked_uses(k)
    eps = jnp.asarray(eps)
    l = jnp.arange(k + 1, dtype=eps.dtype)
    log_choose = gammaln(k + 1.0) - gammaln(l + 1.0) - gammaln(k - l + 1.0)
    # e^{(k−l)ε}/(1+e^ε)^k = σ(ε)^{k−l} σ(−ε)^l, each power taken only where its count is > 0
    # (ε = ∞: σ(−ε)^0 = 1, not 0·(−∞)); the same for the losses (k − 2l)ε
    log_keep, log_flip = -jnp.logaddexp(0.0, -eps), -jnp.logaddexp(0.0, eps)
    log_p = (log_choose + jnp.where(k - l > 0, (k - l) * log_keep, 0.0)
             + jnp.where(l > 0, l * log_flip, 0.0))
    loss = jnp.where(k - 2 * l == 0, 0.0, (k - 2 * l) * eps)
    # RR_∞ (ε = ∞): its one live atom has an infinite loss; it goes to the +∞ atom, as in
    # composed_loss, so that δ_k = 1 and ε_k(δ) = ∞, not NaN or 0
    infinite_atom = jnp.isposinf(loss) & (log_p > NEG_INF)
    infinite = jnp.sum(jnp.where(infinite_atom, jnp.exp(jnp.where(infinite_atom, log_p, 0.0)),
                                 0.0))
    log_p = jnp.where(infinite_atom | jnp.isneginf(loss), NEG_INF, log_p)
    return ComposedLoss(jnp.where(jnp.isfinite(loss), loss, 0.0), log_p, infinite)


def rr_eps_composed(eps, k: int, delta) -> Float[Array, "*b"]:
    """The least ``ε' ≥ 0`` with ``δ_k(ε') ≤ δ`` for ``k`` uses of ``RR_ε`` (any shape of
    ``eps``): by Kairouz, Oh, Viswanath (2015) Thm 3.3, the largest composed ε at δ of any k
    ε-LDP steps, attained by RR_ε itself (the envelope of the C-relations, SPEC §6)."""
    return _over_rr(eps_of_loss, eps, k, delta)


def _over_rr(pair_value, eps, k: int, at) -> Float[Array, "*b"]:
    """``pair_value(rr_loss(ε, k), at)`` for every ε and ``at`` (broadcast together)."""
    return _over_rr_program(pair_value, jnp.asarray(eps), checked_uses(k), at)


@functools.partial(jax.jit, static_argnums=(0, 2))  # one program (op by op: dozens per shape)
def _over_rr_program(pair_value, eps, k: int, at):
    eps, at = jnp.broadcast_arrays(eps, jnp.asarray(at, eps.dtype))
    value = jax.vmap(lambda e, a: pair_value(rr_loss(e, k), a))(eps.reshape(-1), at.reshape(-1))
    return value.reshape(eps.shape)


__all__ = ["ComposedLoss", "MAX_COUNT_VECTORS", "checked_number", "checked_uses", "combined_loss",
           "composed_loss", "count_vectors", "delta_composed", "delta_of_loss", "eps_composed",
           "eps_of_loss", "log_multinomials", "number_of_count_vectors", "rr_delta_composed",
           "rr_eps_composed", "rr_loss"]
