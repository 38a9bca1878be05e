"""A certified bracket of the composed privacy profile where the count vectors do not fit
(SPEC §6): the privacy-loss distribution on a grid, rounded up and down, composed by FFT, with
the floating-point error of the FFT bounded and carried into the bracket.

For one ordered pair of secrets, ``δ_k(ε) = E_P[(1 − e^{ε − L})_+] + P_∞^(k)`` is increasing in
every loss ``L`` of the P-weighted atoms. Rounding each single-use loss ``L_w`` up to the grid
``h·⌈L_w/h⌉`` (down: ``h·⌊L_w/h⌋``) with the same P-masses therefore gives, for the sum of k
(or Σ k_i) of them, ``δ⁻(ε) ≤ δ_k(ε) ≤ δ⁺(ε)`` at every ε: nothing is truncated (the grid holds
the whole support, ``Σ k_i (⌈max L⌉ − ⌊min L⌋) + 1`` points, so the circular convolution is the
linear one), and the ``+∞`` atom is exact (``1 − Π(1 − P_∞,i)^{k_i}``). The composed masses
``c = a_1^{*k_1} * … `` are computed as ``IFFT(Π FFT(a_i)^{k_i})`` (repeated squaring): the computed
``c̃`` differs from ``c`` by at most ``B`` in the 2-norm, with (``u = 2^−53``, ``N`` the FFT size, a
power of 2, ``φ = log₂N·η/(1 − log₂N·η)``, ``η = 8u`` ≥ Higham's ``μ + γ₄(√2 + μ)`` for twiddle
factors accurate to ``μ ≤ u``; Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed.,
Thm 24.2: ``‖fl(FFT x) − FFT x‖₂ ≤ φ‖FFT x‖₂``)::

  B = 2 (1 + τ) [ Σ_i k_i (φ + m_i u) ‖a_i‖₂ + (M √2 γ₂ + φ) ],   τ = (1 + φ√N)^K − 1,

``M`` the complex products of the powers, ``K = Σ k_i``; the factor 2 covers the second-order
terms. (Inputs ``a_i`` have ``‖FFT a_i‖_∞ ≤ ‖a_i‖₁ ≤ 1``, so a perturbation of a power grows at
most ``k_i``-fold; the inverse FFT divided by N has operator 2-norm ``1/√N``.) Then for
``f_j(ε) = (1 − e^{ε − L_j})_+`` (each ≤ 1), by Cauchy–Schwarz and ``c ≥ 0``::

  δ⁺(ε) = Σ_j max(c̃_j, 0) f_j + B‖f‖₂ ≥ Σ_j c_j f_j,
  δ⁻(ε) = Σ_j max(c̃_j, 0) f_j − 2B‖f‖₂ ≤ Σ_j c_j f_j,

each widened by the relative error of its float64 sum (``S·u``). The ε bracket comes from a
bisection that keeps only *checked* points: the lower end is a point where ``δ⁻ > δ`` (so the
exact ``δ_k > δ`` there: ε is above it), the upper end one where ``δ⁺ ≤ δ`` (so ε is at most it);
neither needs ``δ⁺`` or ``δ⁻`` to be monotone. The width is about ``Σ k_i · h`` (each use's loss
moved by less than h) plus what ``B`` adds; it is reported.

This bracket assumes the FFT meets Higham's bound (XLA's CPU FFT is the DUCC/pocketfft
Cooley–Tukey code; cuFFT on GPUs); the tests check that it contains the exact value on every
problem small enough to compute exactly.

Examples:
  >>> import numpy as np
  >>> from jaxpriv.core import composition_bracket as cb
  >>> P, Q = np.log([0.6, 0.4]), np.log([0.4, 0.6])  # randomized response at ε = log 1.5
  >>> lower, upper = cb.eps_bracket([(P, Q, 10)], delta=1e-5, size=1 << 16)
  >>> bool(lower <= 4.052996 <= upper), bool(upper - lower < 0.002)  # exact: 4.0529959
  (True, True)
"""

from __future__ import annotations

import math
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxpriv.core.errors import InputError

U = 2.0 ** -53
ETA = 8 * U  # ≥ μ + γ₄(√2 + μ) with twiddle factors accurate to μ ≤ u (Higham Thm 24.2)
DEFAULT_SIZE = 1 << 20
MAX_SIZE = 1 << 24  # 16M complex128 points: 256 MB per FFT buffer
BISECTION_STEPS = 64


class GridProfile(NamedTuple):
    """The composed loss distribution of one pair on one rounded grid.

    Attributes:
      loss: ``(S,)`` float64, the grid losses ``h·(G₀ + j)``.
      mass: ``(S,)`` float64, the computed P-masses ``c̃_j`` (clipped at 0).
      error: ``B``, the bound on ``‖c̃ − c‖₂``.
      infinite: the P-mass of the sequences with an ``+∞`` loss (exact).
      top: at least every finite loss a sequence can have, ``Σ k_i max L_i`` raised past its
        rounding: at ``ε ≥ top`` the exact ``δ_k(ε)`` is ``infinite`` alone (the grid's bounds,
        rounded per use and widened by the FFT's error, could read far more: ε = 636 for 100
        uses of an ε = 1 mechanism on a grid of 128 points).
      atom_rtol: a bound on ``infinite``'s relative rounding error.
    """

    loss: np.ndarray
    mass: np.ndarray
    error: float
    infinite: float
    top: float = math.inf
    atom_rtol: float = 0.0


class PairBracket(NamedTuple):
    """Both rounded grids of one pair: ``down`` (``δ⁻``) and ``up`` (``δ⁺``), step ``h``,
    FFT size ``size``."""

    down: GridProfile
    up: GridProfile
    step: float
    size: int


def _parts(parts) -> list:
    out = []
    for log_P, log_Q, k in parts:
        log_P = np.asarray(log_P, np.float64)
        log_Q = np.asarray(log_Q, np.float64)
        both = np.isfinite(log_P) & np.isfinite(log_Q)
        only_p = np.isfinite(log_P) & ~np.isfinite(log_Q)
        out.append((log_P[both] - log_Q[both], np.exp(log_P[both]),
                    float(np.exp(log_P[only_p]).sum()), int(k), int(log_P.shape[-1])))
    return out


def checked_size(size) -> int:
    """``size`` as an FFT size: a power of 2 in ``[2^4, MAX_SIZE]``, else an InputError."""
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 16 \
            or size & (size - 1) or size > MAX_SIZE:
        raise InputError(f"the grid size must be a power of 2 from 16 to {MAX_SIZE:,}, got "
                         f"{size!r}")
    return int(size)


def pair_bracket(parts: Sequence, size: int = DEFAULT_SIZE) -> PairBracket:
    """Both rounded composed loss distributions of one ordered pair.

    Args:
      parts: ``(log_P, log_Q, k)`` per mechanism: its two rows ``(m_i,)`` for the pair and its
        number of uses.
      size: the FFT size N (a power of 2): the grid holds ``N − Σk_i − 1`` steps of the span.

    Returns:
      a :class:`PairBracket`.

    Raises:
      InputError: ``Σ k_i + 2 > size`` (the grid cannot hold one step per use: a larger size).
    """
    size = checked_size(size)
    items = _parts(parts)
    total = sum(k for _, _, _, k, _ in items)
    if total + 2 > size:
        if total + 2 > MAX_SIZE:
            raise InputError(f"{total:,} uses need a grid above {total + 2:,} points, beyond "
                             f"the largest, {MAX_SIZE:,}: compose fewer uses")
        raise InputError(f"a grid of {size:,} points cannot bracket {total:,} uses; give a grid "
                         f"size above {total + 2:,} (a power of 2)")
    span = sum(k * (float(L.max() - L.min()) if L.size else 0.0) for L, _, _, k, _ in items)
    largest = max((float(np.abs(L).max()) for L, *_ in items if L.size), default=1.0)
    step = span / (size - total - 1) if span > 0 else max(largest, 1.0) * 2.0 ** -40
    # (a part whose +∞ atom holds all of P's mass: nothing survives, log1p(−1) raised)
    survive = sum((k * math.log1p(-p_inf) if p_inf < 1.0 else -math.inf) if k else 0.0
                  for _, _, p_inf, k, _ in items)
    infinite = max(0.0, -math.expm1(survive))  # (+0, not −0, where nothing is infinite)
    terms = [k * float(L.max()) for L, _, _, k, _ in items if L.size and k]
    top = sum(terms) + 1e-12 * sum(abs(t) for t in terms)  # (past the sum's rounding)
    known = dict(top=top, atom_rtol=_atom_rtol(items, survive))
    return PairBracket(_grid(items, step, size, np.floor, infinite)._replace(**known),
                       _grid(items, step, size, np.ceil, infinite)._replace(**known), step, size)


def _atom_rtol(items, survive: float) -> float:
    """A bound on the relative rounding error of the +∞ atom ``−expm1(Σ k_i log1p(−p_i))``:
    ``p_i``, a sum of ``m_i`` exponentials, within ``(m_i + 2)u``; ``log1p`` and the products
    within ``u`` each; then ``expm1``'s condition ``e^s/(1 − e^s)`` on the sum's error. Raised
    8-fold. (``4u`` was taken for it, and 2 of 400 random pairs with many ``Q = 0`` outputs fell
    outside their bracket by up to 3.8 ulps.)"""
    if not survive < 0.0 or math.isinf(survive):
        return 4 * U  # no atom (0, exact), or all of P's mass in it (1, exact)
    error = 0.0  # absolute, of the sum s = Σ k log1p(−p)
    for _, _, p_inf, k, m in items:
        if k and p_inf > 0.0:
            a = math.log1p(-p_inf)
            error += k * (abs(a) * 2 * U + p_inf * (m + 2) * U / (1.0 - p_inf))
    error += len(items) * U * abs(survive)
    return 8.0 * (U + error * math.exp(survive) / -math.expm1(survive))


def _grid(items, step: float, size: int, rounding, infinite: float) -> GridProfile:
    start, spectra, norms = 0, [], []
    for L, p, _, k, _ in items:
        g = rounding(L / step).astype(np.int64) if L.size else np.zeros(1, np.int64)
        w = p if L.size else np.zeros(1)
        low = int(g.min())
        a = np.bincount(g - low, weights=w)
        start += k * low
        norms.append(float(np.linalg.norm(a)))
        spectra.append((a, k))
    occupied = 1 + sum(k * (len(a) - 1) for a, k in spectra)
    with jax.enable_x64(True):
        product = None
        for a, k in spectra:
            power = jnp.fft.fft(jnp.asarray(a, jnp.float64), n=size) ** k  # repeated squaring
            product = power if product is None else product * power
        mass = np.asarray(jnp.fft.ifft(product).real)[:occupied]
    L2 = math.log2(size)
    phi = L2 * ETA / (1.0 - L2 * ETA)
    uses = sum(k for _, k in spectra)
    products = sum(2 * max(1, math.ceil(math.log2(k + 1))) for _, k in spectra) + len(spectra)
    gamma2 = 2 * U / (1 - 2 * U)
    tau = math.expm1(uses * math.log1p(phi * math.sqrt(size)))
    first = sum(k * (phi + m * U) * n for (_, _, _, k, m), n in zip(items, norms))
    error = 2.0 * (1.0 + tau) * (first + products * math.sqrt(2.0) * gamma2 + phi)
    loss = step * (start + np.arange(occupied, dtype=np.float64))
    return GridProfile(loss, np.maximum(mass, 0.0), error, infinite)


def _sums(grid: GridProfile, epsilon: float) -> tuple[float, float, float]:
    """``(Σ c̃_j f_j, ‖f‖₂, slack)`` at ε: the norm rounded outward, ``slack`` the relative
    rounding (``S·u``) of the sum, for the caller to widen it."""
    gap = np.minimum(epsilon - grid.loss, 0.0)
    f = np.where(grid.loss > epsilon, -np.expm1(gap), 0.0)
    slack = (len(f) + 4) * U
    return float(np.dot(grid.mass, f)), float(np.sqrt(np.dot(f, f))) * (1 + slack), slack


def delta_upper(grid: GridProfile, epsilon: float) -> float:
    """``δ⁺(ε)`` of the rounded-up grid: at least the exact ``δ_k(ε)``, at most 1."""
    total, norm, slack = _sums(grid, epsilon)
    upper = min(1.0, (grid.infinite + total) * (1 + slack) + grid.error * norm)
    atom = grid.infinite * (1 + max(slack, grid.atom_rtol))
    return min(upper, atom) if epsilon >= grid.top else upper


def delta_lower(grid: GridProfile, epsilon: float) -> float:
    """``δ⁻(ε)`` of the rounded-down grid: at most the exact ``δ_k(ε)``, at least 0."""
    total, norm, slack = _sums(grid, epsilon)
    lower = max(0.0, (grid.infinite + total) * (1 - slack) - 2.0 * grid.error * norm)
    atom = grid.infinite * (1 - max(slack, grid.atom_rtol))
    return max(lower, atom) if epsilon >= grid.top else lower


def delta_bracket(parts: Sequence, epsilon: float, size: int = DEFAULT_SIZE):
    """``(lower, upper)`` containing the exact composed ``δ(ε)`` of one ordered pair."""
    b = pair_bracket(parts, size)
    return delta_lower(b.down, epsilon), delta_upper(b.up, epsilon)


def eps_bracket(parts: Sequence, delta: float, size: int = DEFAULT_SIZE,
                bracket: PairBracket | None = None):
    """``(lower, upper)`` containing the exact composed ``ε(δ)`` of one ordered pair (the least
    ε ≥ 0 with ``δ_k(ε) ≤ δ``); ``upper`` is ``+∞`` where no checked point has ``δ⁺ ≤ δ`` (the
    ``+∞`` atom alone above δ: then ``lower`` is ``+∞`` too)."""
    b = bracket if bracket is not None else pair_bracket(parts, size)
    if b.down.infinite > delta:
        return math.inf, math.inf
    top = max(float(b.up.loss[-1]), 0.0) + b.step
    if delta_upper(b.up, max(b.up.top, 0.0)) <= delta:  # every finite loss below b.up.top
        top = min(top, max(b.up.top, 0.0))
    # lower end: a point where δ⁻ > δ (then δ_k > δ there)
    lo, hi = 0.0, top
    if delta_lower(b.down, 0.0) <= delta:
        lower = 0.0
    else:
        for _ in range(BISECTION_STEPS):
            mid = 0.5 * (lo + hi)
            if delta_lower(b.down, mid) > delta:
                lo = mid
            else:
                hi = mid
        lower = lo
    # upper end: a point where δ⁺ ≤ δ (then δ_k ≤ δ there)
    if delta_upper(b.up, 0.0) <= delta:
        return 0.0, 0.0
    if delta_upper(b.up, top) > delta:
        return lower, math.inf
    lo, hi = 0.0, top
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        if delta_upper(b.up, mid) <= delta:
            hi = mid
        else:
            lo = mid
    return lower, hi


__all__ = ["DEFAULT_SIZE", "GridProfile", "MAX_SIZE", "PairBracket", "checked_size",
           "delta_bracket", "delta_lower", "delta_upper", "eps_bracket", "pair_bracket"]
