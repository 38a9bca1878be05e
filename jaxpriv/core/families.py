"""Standard mechanism families, built in log space.

Each constructor returns a :class:`~jaxpriv.core.mechanisms.Mechanism` (uniform prior unless one is
given). Array-valued parameters broadcast into a leading batch axis, e.g.
``randomized_response(jnp.linspace(0, 5, 100))`` is a batch of 100 mechanisms.

Most families are a row-wise softmax of a score matrix, so their log K is a ``log_softmax``:
exact for large privacy parameters where ``K`` itself would underflow.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from jaxpriv.core.errors import InputError
from jaxpriv.core.mechanisms import Mechanism


def _check_finite_nonnegative(name: str, value) -> None:
    if isinstance(value, jax.core.Tracer):
        return
    a = np.asarray(value, dtype=np.float64)
    if not np.isfinite(a).all() or (a < 0).any():
        raise InputError(f"{name} must be finite and >= 0, got {value}")


def _check_positive_int(name: str, value: int, minimum: int = 1) -> None:
    if int(value) != value or value < minimum:
        raise InputError(f"{name} must be an integer >= {minimum}, got {value}")


def _softmax_mechanism(scores, prior=None) -> Mechanism:
    log_K = jax.nn.log_softmax(scores, axis=-1)
    return Mechanism.from_log_K(log_K, None if prior is None else jnp.log(jnp.asarray(prior)),
                                validate=False)


def k_randomized_response(k: int, eps, prior=None) -> Mechanism:
    """k-ary randomized response: report the truth w.p. ``e^ε/(e^ε+k−1)``, else a uniform lie.

    ``ε_LDP = ε``. Under a uniform prior ``p(w) = 1/k`` and, with
    ``B = log((e^ε+k−1)/k)``, ``ξ_MBP = max(B, ε − B)``.

    Args:
      k: number of secrets and outputs (>= 2).
      eps: ``ε ≥ 0``, scalar or array (a batch).
      prior: optional prior of shape ``(k,)``.
    """
    _check_positive_int("k", k, 2)
    _check_finite_nonnegative("eps", eps)
    eps = jnp.asarray(eps, dtype=jnp.asarray(0.0).dtype)
    scores = eps[..., None, None] * jnp.eye(k)
    return _softmax_mechanism(scores, prior)


def randomized_response(eps, prior=None) -> Mechanism:
    """Binary randomized response (Warner): ``K = [[e^ε, 1], [1, e^ε]] / (1 + e^ε)``."""
    return k_randomized_response(2, eps, prior)


def exponential_mechanism(scores, eps, sensitivity=None, prior=None) -> Mechanism:
    """Exponential mechanism ``K[d,w] ∝ exp(ε·u(d,w) / (2Δ))`` for a score matrix ``u``.

    Args:
      scores: ``u``, shape ``(n, m)``.
      eps: ``ε ≥ 0``.
      sensitivity: ``Δ``; default ``max_w max_{d,d'} |u(d,w) − u(d',w)|`` (every pair of secrets
        neighbouring, as in the local model), which makes the mechanism ε-LDP.
    """
    _check_finite_nonnegative("eps", eps)
    u = jnp.asarray(scores, dtype=jnp.asarray(0.0).dtype)
    if u.ndim != 2:
        raise InputError(f"scores must be an (n, m) matrix, got shape {u.shape}")
    if sensitivity is None:
        sensitivity = jnp.max(jnp.max(u, axis=0) - jnp.min(u, axis=0))
    sensitivity = jnp.where(sensitivity > 0, sensitivity, 1.0)
    eps = jnp.asarray(eps, dtype=u.dtype)
    return _softmax_mechanism(eps[..., None, None] * u / (2.0 * sensitivity), prior)


def truncated_geometric(n: int, eps, prior=None) -> Mechanism:
    """Truncated geometric mechanism (Ghosh–Roughgarden–Sundararajan) on counts ``0..n−1``.

    ``K[d,w] = (1−α)/(1+α)·α^|w−d|`` for interior outputs and ``α^|w−d|/(1+α)`` at ``w ∈ {0,
    n−1}``, with ``α = e^{−ε}``: ε-DP for neighbours ``|d − d'| = 1`` (see
    :func:`jaxpriv.core.notions.adjacent`).
    """
    _check_positive_int("n", n, 2)
    _check_finite_nonnegative("eps", eps)
    eps = jnp.asarray(eps, dtype=jnp.asarray(0.0).dtype)[..., None, None]
    d = jnp.arange(n)[:, None]
    w = jnp.arange(n)[None, :]
    edge = (w == 0) | (w == n - 1)
    log_one_plus_alpha = jnp.log1p(jnp.exp(-eps))
    # log((1−α)/(1+α)) with α = e^{−ε}; −∞ at ε = 0, where only the edge outputs occur.
    log_interior = jnp.where(eps > 0, jnp.log(-jnp.expm1(-jnp.where(eps > 0, eps, 1.0))),
                             -jnp.inf) - log_one_plus_alpha
    log_K = -eps * jnp.abs(w - d) + jnp.where(edge, -log_one_plus_alpha, log_interior)
    return Mechanism.from_log_K(log_K, None if prior is None else jnp.log(jnp.asarray(prior)),
                                validate=False)


def discretized_laplace(secrets, outputs, scale, prior=None) -> Mechanism:
    """Laplace noise restricted to a grid: ``K[d,w] ∝ exp(−|y_w − x_d| / scale)``.

    Args:
      secrets: the secret values ``x_d``, shape ``(n,)``.
      outputs: the output grid ``y_w``, shape ``(m,)``.
      scale: Laplace scale ``b > 0``.
    """
    return _grid_mechanism(secrets, outputs, scale, lambda dist, s: -jnp.abs(dist) / s, prior)


def discretized_gaussian(secrets, outputs, sigma, prior=None) -> Mechanism:
    """Gaussian noise restricted to a grid: ``K[d,w] ∝ exp(−(y_w − x_d)² / (2σ²))``."""
    return _grid_mechanism(secrets, outputs, sigma, lambda dist, s: -0.5 * (dist / s) ** 2, prior)


def _grid_mechanism(secrets, outputs, scale, log_density, prior=None) -> Mechanism:
    x = jnp.asarray(secrets, dtype=jnp.asarray(0.0).dtype)
    y = jnp.asarray(outputs, dtype=x.dtype)
    if x.ndim != 1 or y.ndim != 1:
        raise InputError("secrets and outputs must be 1-D grids of values")
    _check_finite_nonnegative("scale", scale)
    if not isinstance(scale, jax.core.Tracer) and np.any(np.asarray(scale) <= 0):
        raise InputError(f"scale must be > 0, got {scale}")
    s = jnp.asarray(scale, dtype=x.dtype)[..., None, None]
    mech = _softmax_mechanism(log_density(y[None, :] - x[:, None], s), prior)
    return mech.replace(values=jnp.broadcast_to(y, (*mech.batch_shape, y.shape[0])))


def unary_encoding(k: int, p, q, prior=None) -> Mechanism:
    """Unary encoding (RAPPOR-style) over a domain of ``k`` secrets; ``m = 2^k`` outputs.

    Secret ``d`` is one-hot encoded; bit ``d`` is reported as 1 with probability ``p``, every
    other bit with probability ``q``, independently. Output ``w`` is the bit vector with bit
    ``j`` equal to ``(w >> j) & 1``. ``ε_LDP = log(p(1−q) / (q(1−p)))`` for ``p > q``.

    Args:
      k: domain size, ``2 ≤ k ≤ 12`` (``2^k`` outputs).
      p: probability a true bit is reported 1, in ``[0, 1]``.
      q: probability a false bit is reported 1, in ``[0, 1]``.
    """
    _check_positive_int("k", k, 2)
    if k > 12:
        raise InputError(f"unary encoding has 2^k outputs; k={k} is above the limit of 12")
    for name, v in (("p", p), ("q", q)):
        if not isinstance(v, jax.core.Tracer) and not np.all((0 <= np.asarray(v)) & (np.asarray(v) <= 1)):
            raise InputError(f"{name} must be a probability in [0, 1], got {v}")
    dtype = jnp.asarray(0.0).dtype
    p = jnp.asarray(p, dtype)[..., None, None, None]
    q = jnp.asarray(q, dtype)[..., None, None, None]
    bits = (jnp.arange(2**k)[None, :, None] >> jnp.arange(k)[None, None, :]) & 1  # (1, m, k)
    true_bit = jnp.arange(k)[:, None, None] == jnp.arange(k)[None, None, :]  # (k, 1, k)
    one = jnp.where(true_bit, p, q)
    prob = jnp.where(bits == 1, one, 1.0 - one)
    log_K = jnp.sum(jnp.log(prob), axis=-1)
    return Mechanism.from_log_K(log_K, None if prior is None else jnp.log(jnp.asarray(prior)),
                                validate=False)


def symmetric_unary_encoding(k: int, eps, prior=None) -> Mechanism:
    """Basic one-time RAPPOR: ``p = e^{ε/2}/(1+e^{ε/2})``, ``q = 1 − p``; ε-LDP."""
    _check_finite_nonnegative("eps", eps)
    p = 1.0 / (1.0 + jnp.exp(-0.5 * jnp.asarray(eps)))
    return unary_encoding(k, p, 1.0 - p, prior)


def optimized_unary_encoding(k: int, eps, prior=None) -> Mechanism:
    """Optimized unary encoding (Wang et al. 2017): ``p = ½``, ``q = 1/(1+e^ε)``; ε-LDP."""
    _check_finite_nonnegative("eps", eps)
    return unary_encoding(k, 0.5, 1.0 / (1.0 + jnp.exp(jnp.asarray(eps))), prior)


def identity(n: int, prior=None) -> Mechanism:
    """The mechanism that publishes its secret: ``K = I``; every level is maximal."""
    _check_positive_int("n", n)
    return Mechanism.from_K(np.eye(n), prior)


def constant(n: int, m: int, prior=None) -> Mechanism:
    """The mechanism that ignores its secret: uniform rows; every level is 0."""
    _check_positive_int("n", n)
    _check_positive_int("m", m)
    return Mechanism.from_K(np.full((n, m), 1.0 / m), prior)


def from_scores(scores: Float[Array, "*batch n m"], prior=None) -> Mechanism:
    """Row-wise softmax of arbitrary logits; the parameterization the search uses."""
    return _softmax_mechanism(jnp.asarray(scores), prior)


__all__ = [
    "constant", "discretized_gaussian", "discretized_laplace", "exponential_mechanism",
    "from_scores", "identity", "k_randomized_response", "optimized_unary_encoding",
    "randomized_response", "symmetric_unary_encoding", "truncated_geometric", "unary_encoding",
]
