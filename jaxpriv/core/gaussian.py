"""The privacy profile of μ-Gaussian differential privacy and its inverse (float64-accurate).

μ-GDP is the trade-off of ``N(0, 1)`` against ``N(μ, 1)`` (Dong, Roth, Su 2022, Def. 2.6); its
profile (Cor. 2.13) is

  ``δ_μ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)``,

decreasing in ε, from ``δ_μ(0) = 2Φ(μ/2) − 1`` to 0. :func:`gaussian_delta` evaluates it without
cancellation down to 1e-300; :func:`gaussian_eps` is the least ``ε ≥ 0`` with ``δ_μ(ε) ≤ δ``.

Examples:
  >>> import jax.numpy as jnp
  >>> from jaxpriv.core.gaussian import gaussian_delta, gaussian_eps
  >>> round(float(gaussian_delta(1.0, 1.0)), 6)  # Φ(−1/2) − e Φ(−3/2)
  0.126937
  >>> round(float(gaussian_eps(1.0, 1e-5)), 3)  # the ε where δ_1(ε) = 1e-5
  4.377

References:
  Dong, Roth, Su (2022), "Gaussian differential privacy", JRSS-B; arXiv 1905.02383, Cor. 2.13.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax.scipy.special import erfcx as _jax_erfcx
from jax.scipy.special import log_ndtr
from jaxtyping import Array, Float

__all__ = ["gaussian_delta", "gaussian_eps"]

_ROOT2 = math.sqrt(2.0)


def erfcx(x):
    """``e^{x²} erfc(x)``. JAX's ``erfcx`` returns 0 at scattered points (jax 0.10.2: float32 at
    1,026 of 200,001 grid points of ``[−3, 60]``, all in ``[9.19, 26.6]``, e.g. 0 for 0.0610 at
    x = 9.1946; float64 at 312, all near x = 26.54), which made the GDP bound NaN (float32: 12–25
    of 20,000 D10 mechanisms of the quick sweep; float64 at ``−ε/μ + μ/2 ≈ −37.5``). Past
    ``x₀`` (8 in float32, 25 in float64) this takes the asymptotic series ``(x√π)⁻¹ Σ_k (−1)^k
    (2k−1)!!/(2x²)^k`` (7 and 9 terms: remainder below 1e-8 and 1e-17 relative), elsewhere
    JAX's (checked against SciPy in tests/test_gaussian_erfcx.py)."""
    x = jnp.asarray(x)
    wide = x.dtype == jnp.float64
    start, terms = (25.0, 9) if wide else (8.0, 7)
    large = x >= start
    xl = jnp.where(large, x, start)
    w = 1.0 / (2.0 * xl * xl)
    series = jnp.ones_like(xl)
    term = jnp.ones_like(xl)
    for k in range(1, terms):
        term = -term * (2 * k - 1) * w
        series = series + term
    return jnp.where(large, series / (xl * 1.7724538509055159),
                     _jax_erfcx(jnp.where(large, 0.0, x)))


def gaussian_delta(mu, epsilon) -> Float[Array, "*b"]:
    """``δ_μ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)`` (0 at μ = 0); broadcasts.

    With ``a = −ε/μ + μ/2``, ``b = a − μ``: ``δ = Φ(a)·(1 − e^ε Φ(b)/Φ(a))``. In the tail
    (``a ≤ 0``) ``Φ(x) = ½·erfcx(−x/√2)·e^{−x²/2}`` and the Gaussian factors cancel exactly
    against ``e^ε`` (``(a² − b²)/2 = −ε``), so ``δ = Φ(a)·(−expm1(log erfcx(−b/√2) −
    log erfcx(−a/√2)))`` keeps full relative accuracy down to 1e-300 (``log Φ`` differences
    would lose six digits there); for ``a > 0`` the same with ``log Φ`` (no tail).
    """
    mu, epsilon = jnp.broadcast_arrays(jnp.asarray(mu), jnp.asarray(epsilon, jnp.asarray(mu).dtype))
    positive = mu > 0
    safe = jnp.where(positive, mu, 1.0)
    a = -epsilon / safe + safe / 2.0
    b = a - safe
    tail = a <= 0
    at = jnp.where(tail, a, -1.0)
    bt = at - safe
    log_phi_a = jnp.where(tail, jnp.log(0.5 * erfcx(-at / _ROOT2)) - at * at / 2.0, log_ndtr(a))
    gap = jnp.where(tail, jnp.log(erfcx(-bt / _ROOT2)) - jnp.log(erfcx(-at / _ROOT2)),
                    epsilon + log_ndtr(b) - log_ndtr(a))
    # Φ(a) = 0 in floating point (ε/μ beyond ~1e308: erfcx's tail underflows): δ = 0 there, not
    # 0·(1 − e^{−∞ + ∞}) = NaN (μ = ∞ stays NaN: its callers take δ = 1 there)
    value = jnp.exp(log_phi_a) * -jnp.expm1(jnp.where(jnp.isneginf(log_phi_a), 0.0, gap))
    return jnp.where(positive, jnp.maximum(value, 0.0), 0.0)


def gaussian_eps(mu, delta, steps: int = 100) -> Float[Array, "*b"]:
    """The least ``ε ≥ 0`` with ``δ_μ(ε) ≤ δ`` (``δ ∈ (0, 1)``); broadcasts.

    Bisection on ``[0, μ²/2 + μ·√(2 log(1/δ))]``: at the upper end ``−ε/μ + μ/2 =
    −√(2 log(1/δ))`` and ``δ_μ(ε) ≤ Φ(−√(2 log 1/δ)) ≤ e^{−log(1/δ)} = δ``. ``steps`` halvings
    (100: the bracket shrinks below float64 spacing) keep the upper end, so the returned ε has
    ``δ_μ(ε) ≤ δ`` up to rounding of ``δ_μ`` itself."""
    mu, delta = jnp.broadcast_arrays(jnp.asarray(mu), jnp.asarray(delta, jnp.asarray(mu).dtype))
    hi = 0.5 * mu * mu + mu * jnp.sqrt(2.0 * jnp.log(1.0 / delta))
    lo = jnp.minimum(hi, 0.0)  # 0, computed from the data: varying like it under shard_map

    def halve(_, bracket):
        lo, hi = bracket
        mid = 0.5 * (lo + hi)
        over = gaussian_delta(mu, mid) > delta
        return jnp.where(over, mid, lo), jnp.where(over, hi, mid)

    lo, hi = jax.lax.fori_loop(0, steps, halve, (lo, hi))
    return jnp.where(gaussian_delta(mu, jnp.zeros_like(mu)) <= delta, 0.0, hi)
