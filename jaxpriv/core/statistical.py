"""The statistical relations R14 (003 Lemma C.1; 002 Lemma A.10), a Chernoff bound on the
estimate ``κ̂₁ = X/T``, ``X ~ Binomial(T, κ₁)``, and R15 (003 Thm D.1; 002 Thm A.11), the error
of ``C₁ = sqrt(JS)`` computed from such an estimate (see :func:`r15_extremes`).

Claim: ``P(|κ̂₁ − κ₁| ≤ ε·κ₁) ≥ 1 − 2·exp(−ε²·T·κ₁/3)``, stated without a range for ε. The
multiplicative Chernoff bound it comes from needs ``0 < ε ≤ 1``; beyond, the upper tail
``P(X ≥ (1+ε)Tκ₁)`` decays only like ``exp(−ε²Tκ₁/(2+ε))``, so the claim fails for large ε
and ``Tκ₁``. jaxpriv audits it exactly: the failure probability ``P(|X − Tκ₁| > εTκ₁)`` is a
finite sum of binomial probabilities, summed in log space in float64; a Monte Carlo estimate
(with its standard error) checks the sum.

The slack of a setting is ``claimed failure bound / exact failure probability``; below 1 the
claim is violated. Outcomes ``X`` within ``1e-12`` relative of the boundary count as successes,
which can only raise the slack (no false alarm from rounding).

Examples:
  >>> from jaxpriv.core import statistical
  >>> float(statistical.failure_probability(1000, 0.01, 1.0)) < float(statistical.claimed_failure(1000, 0.01, 1.0))
  True
  >>> bool(statistical.audit([10_000], [0.001], [4.0]).violated.any())  # ε = 4: false
  True
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln, logsumexp

from jaxpriv.core.errors import InputError

BOUNDARY_RTOL = 1e-12


MAX_T = 1_000_000
"""Largest sample count the exact R14 computations accept (the pmf vector has ``T + 1`` terms)."""
R14_RTOL = 1e-6
"""Relative tolerance of an R14 violation. ``log C(T, j)`` from three ``gammaln`` values of size
up to ``T log T`` carries an absolute error of a few ulps of that size: ~1e−9 at ``T = 10^6``."""


def _checked(T, kappa, eps):
    if any(isinstance(v, bool) or (isinstance(v, np.ndarray) and v.dtype == bool)
           for v in (T, kappa, eps)):  # (true read as T = 1)
        raise InputError("T, κ₁ and ε must be numbers, not true/false")
    try:
        T = np.asarray(T, np.float64)
        kappa, eps = np.asarray(kappa, np.float64), np.asarray(eps, np.float64)
    except (TypeError, ValueError):
        raise InputError("T, κ₁ and ε must be numbers") from None
    if not np.isfinite(T).all() or (T < 1).any() or (T != np.round(T)).any():
        raise InputError("T must be a positive integer number of samples")
    if (T > MAX_T).any():
        raise InputError(f"T must be at most {MAX_T:,} for the exact tail sums")
    if not ((kappa > 0) & (kappa < 1)).all():
        raise InputError("κ₁ must lie strictly between 0 and 1")
    if not ((eps > 0) & np.isfinite(eps)).all():
        raise InputError("ε must be positive and finite")
    return T.astype(np.int64), kappa, eps


def log_failure_probability(T: int, kappa, eps) -> np.ndarray:
    """``log P(|X − Tκ| > εTκ)`` for ``X ~ Binomial(T, κ)``, exactly (float64, log space);
    ``−∞`` when no outcome fails. ``kappa`` and ``eps`` broadcast; ``T`` is one integer."""
    T, kappa, eps = _checked(T, kappa, eps)
    T = int(T)
    # outcomes padded to a power of two: one compiled program serves every T up to that size
    size = 1 << max(int(T).bit_length(), 4)
    with jax.enable_x64(True):
        return np.asarray(_log_failure_padded(size, jnp.float64(T), jnp.asarray(kappa),
                                              jnp.asarray(eps)))


@functools.partial(jax.jit, static_argnums=0)
def _log_failure_padded(size: int, T, kappa, eps):
    j = jnp.arange(size, dtype=jnp.float64)
    T_minus_j = jnp.where(j <= T, T - j, 0.0)
    log_choose = gammaln(T + 1.0) - gammaln(j + 1.0) - gammaln(T_minus_j + 1.0)
    return log_failure_sum(log_choose, j, T, kappa[..., None], eps[..., None])


def log_failure_sum(log_choose, j, T, kappa, eps):
    """``log Σ_{j fails} C(T, j) κ^j (1−κ)^{T−j}`` over the outcomes ``j`` on the last axis
    (padded beyond ``T``), given ``log C(T, j)``; every argument broadcasts. Outcomes within
    :data:`BOUNDARY_RTOL` of the boundary count as successes."""
    inside = j <= T
    log_pmf = log_choose + j * jnp.log(kappa) + (T - j) * jnp.log1p(-kappa)
    fails = inside & (jnp.abs(j - T * kappa) > eps * T * kappa * (1 + BOUNDARY_RTOL))
    return logsumexp(jnp.where(fails, log_pmf, -jnp.inf), axis=-1)


def failure_probability(T: int, kappa, eps) -> np.ndarray:
    """``P(|κ̂₁ − κ₁| > εκ₁)``, exactly (see :func:`log_failure_probability`)."""
    return np.exp(log_failure_probability(T, kappa, eps))


def claimed_failure(T, kappa, eps) -> np.ndarray:
    """The failure probability R14 claims at most: ``2·exp(−ε²Tκ₁/3)``."""
    T, kappa, eps = _checked(T, kappa, eps)
    return 2.0 * np.exp(-eps**2 * T * kappa / 3.0)


def monte_carlo_failure(key, T: int, kappa, eps, draws: int) -> tuple[np.ndarray, np.ndarray]:
    """Monte Carlo estimate of the failure probability and its standard error
    (``draws`` binomial samples per setting, vectorized)."""
    T, kappa, eps = _checked(T, kappa, eps)
    with jax.enable_x64(True):
        k = jnp.asarray(kappa)
        x = jax.random.binomial(key, float(T), k, shape=(draws,) + k.shape, dtype=jnp.float64)
        fails = jnp.abs(x - T * k) > jnp.asarray(eps) * T * k * (1 + BOUNDARY_RTOL)
        p = np.asarray(jnp.mean(fails, axis=0, dtype=jnp.float64))
    return p, np.sqrt(p * (1 - p) / draws)


class R14Audit(NamedTuple):
    """Exact audit of R14 over a grid; arrays of shape ``(len(T), len(κ), len(ε))``."""

    T: np.ndarray
    kappa: np.ndarray
    eps: np.ndarray
    log_failure: np.ndarray  # exact, natural log
    log_claimed: np.ndarray
    log_slack: np.ndarray  # log(claimed / exact failure probability); +∞ when nothing can fail
    slack: np.ndarray  # exp(log_slack), which may under- or overflow: compare log_slack
    violated: np.ndarray  # claimed < exact·(1 − 1e-9)


def audit(Ts, kappas, epss) -> R14Audit:
    """R14 on every ``(T, κ₁, ε)`` of the grid, exactly; slacks in log space, so tail
    probabilities far below float64's range are still compared correctly."""
    Ts = np.asarray(Ts, np.int64)
    kappas, epss = np.asarray(kappas, np.float64), np.asarray(epss, np.float64)
    grid_k, grid_e = np.meshgrid(kappas, epss, indexing="ij")
    log_failure = np.stack([log_failure_probability(int(T), grid_k, grid_e) for T in Ts])
    T3 = Ts[:, None, None].astype(np.float64)
    log_claimed = np.log(2.0) - grid_e[None] ** 2 * T3 * grid_k[None] / 3.0
    log_slack = log_claimed - log_failure
    violated = log_slack < np.log1p(-1e-9)
    with np.errstate(over="ignore", under="ignore"):
        slack = np.exp(log_slack)
    return R14Audit(Ts, kappas, epss, log_failure, log_claimed, log_slack, slack, violated)


# --------------------------------------------------------------------------------------------
# R15 (003 Thm D.1; 002 Thm A.11): the estimation error of C₁ = sqrt(JS(κ₁ ‖ κ₂))
# --------------------------------------------------------------------------------------------


def _half_js_terms(a, b):
    """``½[a·log(2a/(a+b)) + b·log(2b/(a+b))]`` per coordinate, for ``a ≥ 0, b ≥ 0`` (``a`` need
    not be normalized: 003 eq. for ``Ĉ₁²`` plugs in the estimate ``κ̂₁`` as it is). Each term is
    ``(a+b)(log 2 − H(a/(a+b)))/2 ≥ 0``."""
    from jax.scipy.special import xlogy
    total = a + b
    safe = jnp.where(total > 0, total, 1.0)
    return 0.5 * (xlogy(a, 2 * a / safe) + xlogy(b, 2 * b / safe))


def _sqrt(v):
    """``sqrt(max(v, 0))`` with a zero (not infinite) gradient at 0 (double where): ``Ĉ₁ = 0``
    wherever the estimate can match ``κ₂``, and the R15 search differentiates through it."""
    positive = v > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, v, 1.0)), 0.0)


def c1(kappa1, kappa2) -> jax.Array:
    """``C₁ = sqrt(½Σ κ₁ log(κ₁/m) + ½Σ κ₂ log(κ₂/m))``, ``m = (κ₁+κ₂)/2`` (003 App. D.3)."""
    return _sqrt(jnp.sum(_half_js_terms(kappa1, kappa2), axis=-1))


def r15_extremes(kappa1, kappa2, eps) -> tuple[jax.Array, jax.Array]:
    """The least and the largest ``Ĉ₁`` over every estimate with ``|κ̂₁ − κ₁| ≤ εκ₁``, exactly.

    ``Ĉ₁²`` is a sum of per-secret terms, each convex in ``κ̂₁(d)`` with its minimum at
    ``κ̂₁(d) = κ₂(d)``: the least is at ``clip(κ₂, (1−ε)κ₁, (1+ε)κ₁)`` and the largest at the
    better end of each interval.
    """
    low, high = (1 - eps) * kappa1, (1 + eps) * kappa1
    least = jnp.sum(_half_js_terms(jnp.clip(kappa2, low, high), kappa2), axis=-1)
    most = jnp.sum(jnp.maximum(_half_js_terms(low, kappa2), _half_js_terms(high, kappa2)), axis=-1)
    return _sqrt(least), _sqrt(most)


def r15_bound(eps):
    """003 Thm D.1 / 002 Thm A.11:
    ``sqrt((1+ε)log((1+ε)/(1−ε))/2 + (ε + max(log(1+ε), log(1/(1−ε))))/2)``, for ``0 < ε < 1``."""
    eps = jnp.asarray(eps)
    # log((1+ε)/(1−ε)) as log1p(ε) − log1p(−ε): the quotient's rounding lost the bound's digits
    # at small ε (29% at ε ≤ 1e-17, 2e-5 at 1e-12)
    return jnp.sqrt((1 + eps) * (jnp.log1p(eps) - jnp.log1p(-eps)) / 2
                    + (eps + jnp.maximum(jnp.log1p(eps), -jnp.log1p(-eps))) / 2)


class R15Audit(NamedTuple):
    """Worst estimation error of ``C₁`` found per ε (a lower bound on the sup over κ₁, κ₂;
    exact over the perturbations), the claimed bound, and their ratio."""

    eps: np.ndarray
    worst_error: np.ndarray
    bound: np.ndarray
    slack: np.ndarray
    kappa1: np.ndarray  # (len(eps), n): the distributions reaching the worst error
    kappa2: np.ndarray


def draw_distribution_pairs(key, count: int, n: int) -> tuple[jax.Array, jax.Array]:
    """``count`` pairs ``(κ₁, κ₂)`` on ``n`` secrets, Dirichlet with one concentration per pair
    log-uniform over four decades (float64; ``κ₁ > 0``, the relative perturbations need it)."""
    k_conc, k_1, k_2 = jax.random.split(key, 3)
    conc = jnp.exp(jax.random.uniform(k_conc, (count, 1), jnp.float64, jnp.log(1e-2),
                                      jnp.log(1e2)))
    kappa1 = jax.random.dirichlet(k_1, jnp.broadcast_to(conc, (count, n)))
    kappa2 = jax.random.dirichlet(k_2, jnp.broadcast_to(conc, (count, n)))
    kappa1 = jnp.maximum(kappa1, 1e-300)
    return kappa1 / jnp.sum(kappa1, -1, keepdims=True), kappa2


def r15_audit(key, n: int, epss, count: int) -> R15Audit:
    """Sample ``count`` pairs ``(κ₁, κ₂)`` on ``n`` secrets (Dirichlet, concentrations spread over
    four decades), take the exact worst perturbation of each, and keep the worst per ε."""
    epss = np.asarray(epss, np.float64)
    if not ((epss > 0) & (epss < 1)).all():
        raise InputError("the bound of 003 Thm D.1 is stated for 0 < ε < 1")
    if n < 2 or count < 1:
        raise InputError("R15 audit needs n >= 2 secrets and count >= 1")
    with jax.enable_x64(True):
        kappa1, kappa2 = draw_distribution_pairs(key, count, n)
        worst, w1, w2 = [], [], []
        for eps in epss:
            error = r15_worst_error(kappa1, kappa2, eps)
            i = int(jnp.argmax(error))
            worst.append(float(error[i]))
            w1.append(np.asarray(kappa1[i]))
            w2.append(np.asarray(kappa2[i]))
        bound = np.asarray(r15_bound(epss))
    worst = np.asarray(worst)
    return R15Audit(epss, worst, bound, bound / worst, np.stack(w1), np.stack(w2))


def r15_worst_error(kappa1, kappa2, eps) -> jax.Array:
    """``max |Ĉ₁ − C₁|`` over every ``κ̂₁`` with ``|κ̂₁ − κ₁| ≤ εκ₁``, exactly."""
    least, most = r15_extremes(kappa1, kappa2, eps)
    base = c1(kappa1, kappa2)
    return jnp.maximum(most - base, base - least)


def _checked_distribution(value, name: str) -> np.ndarray:
    try:
        a = np.asarray(value, np.float64)
    except (TypeError, ValueError):
        raise InputError(f"'{name}' must be an array of numbers") from None
    if a.ndim != 1 or a.size < 2:
        raise InputError(f"'{name}' must be a distribution over at least 2 secrets")
    if not np.isfinite(a).all() or (a < 0).any():
        raise InputError(f"'{name}' must be finite and non-negative")
    if abs(a.sum() - 1.0) > 1e-5:
        raise InputError(f"'{name}' must sum to 1, got {a.sum():.8g}")
    return a / a.sum()
