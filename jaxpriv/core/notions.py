"""Exact privacy notions of finite mechanisms (SPEC §2.1–2.5, §2.7), and SPEC §5's channel
notions with a prior: maximal leakage ``log Σ_w max_{d: π(d)>0} K[d,w]`` (Issa, Wagner, Kamath
2020) and pointwise maximal leakage ``max_{w: p(w)>0} log max_{d: π(d)>0} K[d,w]/p(w)``
(Saeidian, Cervia, Oechtering, Skoglund 2023).

Two layers:

* **kernels** (``*_kernel``) on raw log-space arrays. They reduce over the last one or two axes
  and broadcast over any leading batch axes, so a batch of a million mechanisms is one fused
  XLA computation; they are pure and jit/vmap/grad-safe (masks come *before* ``log``/division).
* **notions** on a :class:`~jaxpriv.core.mechanisms.Mechanism`, returning one level per mechanism of
  the batch.

Conventions (SPEC §1): an output with ``p(w) = 0`` is skipped; a secret with ``π(d) = 0`` is
skipped where the notion conditions on the prior; ``x/0 = +∞`` for ``x > 0``; every level is in
``[0, +∞]`` and never NaN. The library never jits: wrap calls in ``jax.jit`` at the edge.

Examples:
  >>> import jax
  >>> from jaxpriv import families
  >>> from jaxpriv.core import notions
  >>> mech = families.randomized_response(1.0)
  >>> float(notions.ldp(mech)), round(float(notions.mbp(mech)), 5)  # float32: 5 digits
  (1.0, 0.62011)
"""

from __future__ import annotations

from typing import NamedTuple, Union

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp
from jaxtyping import Array, Bool, Float

from jaxpriv.core import divergences
from jaxpriv.core.errors import InputError
from jaxpriv.core.mechanisms import SUM_ATOL, Mechanism

NEG_INF = -jnp.inf

# --------------------------------------------------------------------------------------------
# kernels
# --------------------------------------------------------------------------------------------


def log_marginal_kernel(log_K: Float[Array, "*b n m"], log_prior: Float[Array, "*b n"]
                        ) -> Float[Array, "*b m"]:
    """``log p(w) = log Σ_d π(d) K[d,w]``; ``−∞`` for an output that cannot occur."""
    joint = log_prior[..., :, None] + log_K
    top = jnp.max(joint, axis=-2, keepdims=True)
    possible = top > NEG_INF
    safe_top = jnp.where(possible, top, 0.0)
    total = jnp.sum(jnp.exp(joint - safe_top), axis=-2, keepdims=True)
    log_p = jnp.where(possible, jnp.log(jnp.where(possible, total, 1.0)) + safe_top, NEG_INF)
    return log_p[..., 0, :]


def log_ratio_kernel(log_K: Float[Array, "*b n m"], log_p: Float[Array, "*b m"]
                     ) -> tuple[Float[Array, "*b n m"], Bool[Array, "*b m"]]:
    """``log(K[d,w]/p(w)) = log(P[d,w]/π(d))`` on possible outputs (0 elsewhere), and the mask."""
    possible = log_p > NEG_INF
    safe_log_p = jnp.where(possible, log_p, 0.0)[..., None, :]
    log_ratio = jnp.where(possible[..., None, :], log_K - safe_log_p, 0.0)
    return log_ratio, possible


def ldp_kernel(log_K: Float[Array, "*b n m"], neighbours: Bool[Array, "n n"] | None = None
               ) -> Float[Array, "*b"]:
    """``ε_LDP = max_w max_{d,d'} log(K[d,w]/K[d',w])`` (SPEC §2.1), or ``ε_DP`` over ``E``.

    Args:
      log_K: shape ``(*b, n, m)``.
      neighbours: optional symmetric relation ``E``, boolean ``(n, n)``; ``None`` = all pairs.

    Returns:
      shape ``(*b)``; ``+∞`` when a column has both a zero and a positive entry (over ``E``).
    """
    if neighbours is None:
        top = jnp.max(log_K, axis=-2)
        bottom = jnp.min(log_K, axis=-2)
        occurs = top > NEG_INF
        spread = jnp.where(occurs, top - jnp.where(occurs, bottom, 0.0), 0.0)
        return jnp.max(spread, axis=-1)
    E = jnp.asarray(neighbours, dtype=bool)
    upper = log_K[..., :, None, :]
    lower = log_K[..., None, :, :]
    valid = E[:, :, None] & (upper > NEG_INF)
    spread = jnp.where(valid, jnp.where(valid, upper, 0.0) - lower, 0.0)
    return jnp.maximum(jnp.max(spread, axis=(-3, -2, -1)), 0.0)


def mbp_kernel(log_K: Float[Array, "*b n m"], log_prior: Float[Array, "*b n"]
               ) -> Float[Array, "*b"]:
    """``ξ = max_{w: p(w)>0} max_{d: π(d)>0} |log K[d,w] − log p(w)|`` (SPEC §2.2, 003 Def. 4.2)."""
    log_p = log_marginal_kernel(log_K, log_prior)
    log_ratio, _ = log_ratio_kernel(log_K, log_p)
    counted = (log_prior > NEG_INF)[..., :, None]
    return jnp.max(jnp.where(counted, jnp.abs(log_ratio), 0.0), axis=(-2, -1))


class PosteriorShift(NamedTuple):
    """What every ABP law needs, computed once per mechanism.

    Attributes:
      shift: ``P[d,w] − π(d)`` on possible outputs, 0 elsewhere; shape ``(*b, n, m)``.
      belief_shift: ``P[d,w] − b(d)`` on possible outputs, 0 elsewhere; shape ``(*b, n, m)``.
      marginal: ``p(w)``; shape ``(*b, m)``.
      possible: ``p(w) > 0``; shape ``(*b, m)``.
    """

    shift: Float[Array, "*b n m"]
    belief_shift: Float[Array, "*b n m"]
    marginal: Float[Array, "*b m"]
    possible: Bool[Array, "*b m"]


def _shift_from(log_ratio, log_prior, log_reference, possible):
    """``P[d,w] − ref(d)`` with ``P = π·exp(log_ratio)``, on possible outputs (0 elsewhere).

    ``ref·expm1(log(P/ref))`` is exact to rounding for ``P ≈ ref``; for ``P ≫ ref`` it could
    overflow (``ref`` tiny, ratio huge), so there — and where ``π`` or ``ref`` is 0 — the
    difference is taken in the ordinary way, where it cannot cancel.
    """
    both = (log_prior > NEG_INF) & (log_reference > NEG_INF)
    offset = jnp.where(both, log_prior - jnp.where(both, log_reference, 0.0), 0.0)
    log_rel = log_ratio + offset[..., :, None]
    large = log_rel > 1.0
    reference = jnp.exp(log_reference)[..., :, None]
    relative = reference * jnp.expm1(jnp.where(large, 0.0, log_rel))
    direct = jnp.exp(log_prior[..., :, None] + log_ratio) - reference
    value = jnp.where(both[..., :, None] & ~large, relative, direct)
    return jnp.where(possible[..., None, :], value, 0.0)


def posterior_shift_kernel(log_K: Float[Array, "*b n m"], log_prior: Float[Array, "*b n"],
                           log_belief: Float[Array, "*b n"] | None = None) -> PosteriorShift:
    """``P[d,w] − π(d)`` and ``P[d,w] − b(d)`` without cancellation, with the output marginal
    (``b`` defaults to ``π``)."""
    log_p = log_marginal_kernel(log_K, log_prior)
    log_ratio, possible = log_ratio_kernel(log_K, log_p)
    shift = _shift_from(log_ratio, log_prior, log_prior, possible)
    belief_shift = shift if log_belief is None else _shift_from(log_ratio, log_prior, log_belief,
                                                                possible)
    return PosteriorShift(shift, belief_shift, jnp.exp(log_p), possible)


def abp_kernel(
    log_K: Float[Array, "*b n m"],
    log_prior: Float[Array, "*b n"],
    log_belief: Float[Array, "*b n"],
    laws: Float[Array, "*b L m"],
) -> Float[Array, "*b L"]:
    """``ε_pa = sqrt(JS(F^A ‖ b))`` for each observation law ``q`` (SPEC §2.3, 003 Def. 4.1).

    ``F^A(d) = Σ_w P[d,w] q(w)``. The mass a law puts on impossible outputs (``p(w) = 0``) is
    dropped and the rest renormalized; a law with no mass on possible outputs leaves the belief
    at ``F^A = π``.

    Args:
      log_K, log_prior, log_belief: the mechanism.
      laws: ``L`` observation laws on the outputs, shape ``(*b, L, m)``.

    Returns:
      shape ``(*b, L)``.
    """
    posterior = posterior_shift_kernel(log_K, log_prior, log_belief)
    return _abp_for_laws(posterior, log_prior, log_belief, laws)


def _abp_for_laws(posterior: PosteriorShift, log_prior, log_belief, laws):
    """ABP for explicit laws, with ``F^A − b`` formed by whichever of two exact identities
    rounds less:

    * ``Σ_w (q(w) − p(w))·(P[d,w] − π(d)) + (π(d) − b(d))``, since
      ``Σ_w p(w)·(P[d,w] − π(d)) = 0``: a product of two small differences when the law is close
      to ``p`` (the record law of a nearly constant mechanism), where ``Σ_w q·P`` would cancel
      to the last digit;
    * ``Σ_w q(w)·(P[d,w] − b(d))``: exact when the posteriors the law reaches equal a belief
      ``b ≠ π``, where the first form cancels ``F^A − π`` against ``π − b``.

    The error of each is about machine epsilon times the sum of its terms' magnitudes; the
    smaller one is kept per law and secret. (``sqrt(JS)`` turns an absolute error ``δ`` of
    ``F^A − b`` into an error ``~sqrt(δ)`` of ABP near 0, so this matters: 3e−9 instead of
    1e−16 in ``tests/test_edge_cases.py::test_abp_vanishes_when_the_posterior_is_the_belief``.)
    """
    kept = jnp.where(posterior.possible[..., None, :], laws, 0.0)
    mass = jnp.sum(kept, axis=-1, keepdims=True)
    has_mass = mass > 0
    kept = kept / jnp.where(has_mass, mass, 1.0)
    deviation = jnp.where(has_mass, kept - posterior.marginal[..., None, :], 0.0)
    gap = (jnp.exp(log_prior) - jnp.exp(log_belief))[..., None, :]
    via_prior = _batched_inner(deviation, posterior.shift) + gap
    via_belief = jnp.where(has_mass, _batched_inner(kept, posterior.belief_shift), gap)
    size_prior = _batched_inner(jnp.abs(deviation), jnp.abs(posterior.shift)) + jnp.abs(gap)
    size_belief = jnp.where(has_mass, _batched_inner(kept, jnp.abs(posterior.belief_shift)),
                            jnp.abs(gap))
    difference = jnp.where(size_belief < size_prior, via_belief, via_prior)
    return _abp_from_difference(difference, log_belief)


_SMALL_INNER = 32


def _batched_inner(a: Float[Array, "*b l w"], b: Float[Array, "*b d w"]) -> Float[Array, "*b l d"]:
    """``Σ_w a[l,w]·b[d,w]`` per mechanism. XLA's CPU dot is slow on millions of tiny matrices;
    up to ``d·w = 32`` a broadcast multiply-and-sum is ~2× faster; at n = m = 8 the dot wins."""
    if b.shape[-2] * b.shape[-1] <= _SMALL_INNER:
        return jnp.sum(a[..., :, None, :] * b[..., None, :, :], axis=-1)
    # precision HIGHEST: full float32 on GPUs too (XLA's default there is TF32, ~3 digits)
    return jnp.einsum("...lw,...dw->...ld", a, b, precision=jax.lax.Precision.HIGHEST)


def _abp_from_difference(difference, log_belief):
    """``sqrt(JS(F^A ‖ b))`` per law from ``F^A − b``, formed exactly by the caller."""
    belief = jnp.exp(log_belief)[..., None, :]
    total = jnp.maximum(2.0 * belief + difference, 0.0)
    js = divergences.js_from_moments(total, difference)
    # sqrt has an infinite slope at 0 (ABP behaves like |F^A − b| there): give it the zero
    # subgradient so the search sees no NaN at a constant mechanism.
    positive = js > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, js, 1.0)), 0.0)


def abp_record_kernel(log_K, log_prior, log_belief) -> Float[Array, "*b n"]:
    """ABP under the ``record`` law: ``q = K[d*,·]``, one value per true secret ``d*``."""
    return abp_kernel(log_K, log_prior, log_belief, jnp.exp(log_K))


def abp_output_kernel(log_K, log_prior, log_belief) -> Float[Array, "*b m"]:
    """ABP under the ``output`` law: ``q = δ_w``, one value per output (0 for impossible ones).

    Here ``F^A − b`` is the column ``P[·,w] − b`` itself, taken directly (no cancellation).
    """
    posterior = posterior_shift_kernel(log_K, log_prior, log_belief)
    values = _abp_from_difference(jnp.swapaxes(posterior.belief_shift, -1, -2), log_belief)
    return jnp.where(posterior.possible, values, 0.0)


def eps_unif_kernel(log_prior: Float[Array, "*b n"]) -> Float[Array, "*b"]:
    """``ε_unif(π) = max_{d,d'} |log(π(d)/π(d'))|`` (002 Thm IV.4); ``+∞`` if some ``π(d) = 0``."""
    top = jnp.max(log_prior, axis=-1)
    bottom = jnp.min(log_prior, axis=-1)
    return jnp.where(bottom > NEG_INF, top - jnp.where(bottom > NEG_INF, bottom, 0.0), jnp.inf)


def eps_bel_kernel(log_belief: Float[Array, "*b n"], log_prior: Float[Array, "*b n"]
                   ) -> Float[Array, "*b"]:
    """``ε_bel(b, π) = max_d |log(b(d)/π(d))|`` (003 Thm 5.4); secrets with ``b = π = 0`` skipped."""
    both_zero = (log_belief == NEG_INF) & (log_prior == NEG_INF)
    gap = jnp.abs(jnp.where(both_zero, 0.0, log_belief) - jnp.where(both_zero, 0.0, log_prior))
    return jnp.max(gap, axis=-1)


def mutual_information_kernel(log_K: Float[Array, "*b n m"], log_prior: Float[Array, "*b n"]
                              ) -> Float[Array, "*b"]:
    """``I(D; W) = Σ_d π(d) KL(K[d,·] ‖ p)`` in nats (stable near independence)."""
    log_p = log_marginal_kernel(log_K, log_prior)
    per_secret = divergences.kl_from_logs(log_K, log_p[..., None, :])
    prior = jnp.exp(log_prior)
    return jnp.sum(jnp.where(prior > 0, prior * jnp.where(prior > 0, per_secret, 0.0), 0.0),
                   axis=-1)


def failure_probability_kernel(log_K: Float[Array, "*b n m"], values: Float[Array, "*b m"],
                               mu, alpha) -> Float[Array, "*b n"]:
    """``β(d) = P[|v(W) − μ| > α | d]`` (SPEC §2.7, 002 Def. IV.4)."""
    far = jnp.abs(values - mu) > alpha
    return jnp.sum(jnp.where(far[..., None, :], jnp.exp(log_K), 0.0), axis=-1)


# --------------------------------------------------------------------------------------------
# notions of a Mechanism
# --------------------------------------------------------------------------------------------


def ldp(mech: Mechanism, neighbours=None) -> Float[Array, "*b"]:
    """LDP level, or the DP level over a neighbour relation (SPEC §2.1)."""
    if neighbours is not None:
        neighbours = _checked_neighbours(neighbours, mech.n)
    return ldp_kernel(mech.log_K, neighbours)


def mbp(mech: Mechanism) -> Float[Array, "*b"]:
    """MBP level ``ξ`` (SPEC §2.2)."""
    return mbp_kernel(mech.log_K, mech.log_prior)


class ABP(NamedTuple):
    """ABP under one observation law family.

    Attributes:
      vector: one value per law: per true secret ``d*`` (record), per output ``w`` (output), or
        per explicit law given; shape ``(*b, L)``.
      level: the max over the laws that can occur (record: ``π(d*) > 0``; output: ``p(w) > 0``).
      mean: the average of ``vector`` weighted by ``π`` (record), ``p`` (output), or uniformly.
    """

    vector: Float[Array, "*b L"]
    level: Float[Array, "*b"]
    mean: Float[Array, "*b"]


Law = Union[str, Float[Array, "m"], Float[Array, "L m"]]


def abp(mech: Mechanism, law: Law = "record") -> ABP:
    """Average Bayesian privacy ``ε_pa`` (SPEC §2.3, 003 Def. 4.1).

    Args:
      mech: the mechanism (belief ``b`` is the attacker's prior; posterior uses ``π``).
      law: ``"record"`` (default), ``"output"``, or an explicit law ``q`` of shape ``(m,)``
        or several, ``(L, m)``.

    Note (trap): ``q = p`` (the output marginal) gives ``F^A = π``, hence ``ε_pa = 0`` when
    ``b = π``, whatever the mechanism. The record law is the meaningful default.
    """
    # which laws can occur is read from the logs: a subnormal p(w) (below 2.2e-308) is 0 to
    # XLA's CPU arithmetic, and the output law's level read 0 beside its vector's 0.46
    if isinstance(law, str) and law == "record":
        vector = abp_record_kernel(mech.log_K, mech.log_prior, mech.log_belief)
        counted, weights = mech.log_prior > NEG_INF, mech.prior
    elif isinstance(law, str) and law == "output":
        vector = abp_output_kernel(mech.log_K, mech.log_prior, mech.log_belief)
        log_p = log_marginal_kernel(mech.log_K, mech.log_prior)
        counted, weights = log_p > NEG_INF, jnp.exp(log_p)
    elif isinstance(law, str):
        raise InputError(f"unknown observation law {law!r}; use 'record', 'output' or a vector q")
    else:
        q = _checked_law(law, mech.m)
        laws = jnp.broadcast_to(jnp.asarray(q, mech.dtype), (*mech.batch_shape, *q.shape[-2:]))
        vector = abp_kernel(mech.log_K, mech.log_prior, mech.log_belief, laws)
        weights = jnp.full(vector.shape, 1.0 / vector.shape[-1], dtype=mech.dtype)
        counted = weights > 0
    level = jnp.max(jnp.where(counted, vector, 0.0), axis=-1)
    mean = jnp.sum(jnp.where(counted, weights * vector, 0.0), axis=-1)
    return ABP(vector, level, mean)


def eps_unif(mech: Mechanism) -> Float[Array, "*b"]:
    """How far the prior is from uniform (SPEC §2.4)."""
    return eps_unif_kernel(mech.log_prior)


def eps_bel(mech: Mechanism) -> Float[Array, "*b"]:
    """How far the belief is from the prior (SPEC §2.4)."""
    return eps_bel_kernel(mech.log_belief, mech.log_prior)


def mutual_information(mech: Mechanism) -> Float[Array, "*b"]:
    """``I(D; W)`` under the prior, in nats (SPEC §2.5)."""
    return mutual_information_kernel(mech.log_K, mech.log_prior)


def failure_probabilities(mech: Mechanism, mu, alpha) -> Float[Array, "*b n"]:
    """``β(d)`` for each secret: the chance the output value misses ``μ`` by more than ``α``."""
    if mech.values is None:
        raise InputError("the PAC notions need output values: give 'values' with the mechanism")
    for name, value in (("mu", mu), ("alpha", alpha)):
        if isinstance(value, bool) or not isinstance(
                value, (int, float, np.number, np.ndarray, jax.Array, jax.core.Tracer)):
            raise InputError(f"the PAC notions need '{name}' to be a number, got {value!r}")
    if isinstance(alpha, (int, float, np.number)) and not alpha >= 0:  # (a traced α is a search's)
        raise InputError(f"the PAC notions need an accuracy 'alpha' >= 0, got {alpha!r}")
    return failure_probability_kernel(mech.log_K, mech.values, mu, alpha)


def pac_gamma(mech: Mechanism, mu, alpha, d_true: int) -> Float[Array, "*b"]:
    """``γ = max_{d' ≠ d_true} β(d')``: the least γ for α-PAC robustness w.p. ``1−γ`` (002 Def. IV.6)."""
    beta = failure_probabilities(mech, mu, alpha)
    others = jnp.arange(mech.n) != _checked_secret(d_true, mech.n)
    return jnp.max(jnp.where(others, beta, 0.0), axis=-1)


def pac_beta(mech: Mechanism, mu, alpha, d_true: int) -> Float[Array, "*b"]:
    """``β(d_true)``: the least β for PAC accuracy with confidence ``1−β`` (002 Def. IV.4)."""
    return failure_probabilities(mech, mu, alpha)[..., _checked_secret(d_true, mech.n)]


def adjacent(n: int) -> Bool[Array, "n n"]:
    """Neighbour relation ``|d − d'| = 1`` (counts, the truncated geometric mechanism)."""
    d = jnp.arange(n)
    return jnp.abs(d[:, None] - d[None, :]) == 1


def levels(mech: Mechanism) -> dict[str, Array]:
    """Every core level of SPEC §2.1–2.5 at once (the content of ``jaxpriv eval``)."""
    record = abp(mech, "record")
    output = abp(mech, "output")
    return {
        "ldp": ldp(mech),
        "mbp": mbp(mech),
        "abp": record.level,
        "abp_mean": record.mean,
        "abp_record": record.vector,
        "abp_output": output.level,
        "abp_output_vector": output.vector,
        "eps_unif": eps_unif(mech),
        "eps_bel": eps_bel(mech),
        "mi": mutual_information(mech),
    }


# --------------------------------------------------------------------------------------------
# argument checks (host side, concrete inputs only)
# --------------------------------------------------------------------------------------------


def _checked_neighbours(neighbours, n: int):
    E = np.asarray(neighbours)
    if E.shape != (n, n):
        raise InputError(f"neighbour relation must be an ({n}, {n}) boolean matrix, got {E.shape}")
    E = E.astype(bool)
    if (E != E.T).any():
        raise InputError("neighbour relation must be symmetric")
    return E


def _checked_law(q, m: int) -> np.ndarray:
    a = np.asarray(q, dtype=np.float64)
    if a.ndim not in (1, 2) or a.shape[-1] != m:
        raise InputError(f"observation law q must have shape ({m},) or (L, {m}), got {a.shape}")
    if not np.isfinite(a).all() or (a < 0).any():
        raise InputError("observation law q must be finite and non-negative")
    if (np.abs(a.sum(axis=-1) - 1.0) > SUM_ATOL).any():
        raise InputError("observation law q must sum to 1")
    return np.atleast_2d(a / a.sum(axis=-1, keepdims=True))


def _checked_secret(d: int, n: int) -> int:
    if isinstance(d, bool) or not isinstance(d, (int, float, np.number)) \
            or not np.isfinite(d) or int(d) != d or not 0 <= d < n:
        raise InputError(f"d_true must be a secret index in 0..{n - 1}, got {d}")
    return int(d)


# -- SPEC §5: channel notions with a prior ------------------------------------------------------


def _allowed_columns(log_K, log_prior) -> Float[Array, "*b m"]:
    """``max_{d: π(d)>0} log K[d, w]``."""
    allowed = (log_prior > NEG_INF)[..., :, None]
    return jnp.max(jnp.where(allowed, log_K, NEG_INF), axis=-2)


def max_leakage_kernel(log_K: Float[Array, "*b n m"], log_prior: Float[Array, "*b n"]
                       ) -> Float[Array, "*b"]:
    """``log Σ_w max_{d: π(d)>0} K[d,w]`` (Issa, Wagner, Kamath 2020, Thm 1), ≥ 0."""
    return jnp.maximum(logsumexp(_allowed_columns(log_K, log_prior), axis=-1), 0.0)


def pml_kernel(log_K: Float[Array, "*b n m"], log_prior: Float[Array, "*b n"]
               ) -> Float[Array, "*b"]:
    """``max_{w: p(w)>0} log(max_{d: π(d)>0} K[d,w] / p(w))`` (Saeidian et al. 2023, Def. 1 and
    Thm 1), ≥ 0."""
    log_p = log_marginal_kernel(log_K, log_prior)
    possible = log_p > NEG_INF
    top = _allowed_columns(log_K, log_prior)
    ratio = jnp.where(possible, top - jnp.where(possible, log_p, 0.0), NEG_INF)
    return jnp.maximum(jnp.max(ratio, axis=-1), 0.0)


def max_leakage(mech: Mechanism) -> Float[Array, "*b"]:
    """Maximal leakage of the channel under the prior's support, in nats (SPEC §5)."""
    return max_leakage_kernel(mech.log_K, mech.log_prior)


def pml(mech: Mechanism) -> Float[Array, "*b"]:
    """Pointwise maximal leakage, max over outputs, in nats (SPEC §5)."""
    return pml_kernel(mech.log_K, mech.log_prior)
