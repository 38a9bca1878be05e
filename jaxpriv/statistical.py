"""The statistical relation R14 (003 Lemma C.1; 002 Lemma A.10): a Chernoff bound on the
estimate ``κ̂₁ = X/T``, ``X ~ Binomial(T, κ₁)``.

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
  >>> from jaxpriv import statistical
  >>> float(statistical.failure_probability(1000, 0.01, 1.0)) < float(statistical.claimed_failure(1000, 0.01, 1.0))
  True
  >>> bool(statistical.audit([10_000], [0.001], [4.0]).violated.any())  # ε = 4: false
  True
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln, logsumexp

from jaxpriv.errors import InputError

BOUNDARY_RTOL = 1e-12


def _checked(T, kappa, eps):
    T = np.asarray(T)
    kappa, eps = np.asarray(kappa, np.float64), np.asarray(eps, np.float64)
    if (T < 1).any() or (np.asarray(T) != np.round(T)).any():
        raise InputError("T must be a positive integer number of samples")
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
    with jax.enable_x64(True):
        j = jnp.arange(T + 1, dtype=jnp.float64)
        k = jnp.asarray(kappa)[..., None]
        e = jnp.asarray(eps)[..., None]
        log_pmf = (gammaln(T + 1.0) - gammaln(j + 1.0) - gammaln(T - j + 1.0)
                   + j * jnp.log(k) + (T - j) * jnp.log1p(-k))
        fails = jnp.abs(j - T * k) > e * T * k * (1 + BOUNDARY_RTOL)
        return np.asarray(logsumexp(jnp.where(fails, log_pmf, -jnp.inf), axis=-1))


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
        p = np.asarray(jnp.mean(fails, axis=0))
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
