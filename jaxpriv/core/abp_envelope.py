"""The exact supremum of ABP at a fixed MBP level (R5's envelope), with or without belief slack.

``E(ξ, ε) = sup{ε_pa : MBP ≤ ξ, ε_bel(b, π) ≤ ε}`` over ``n × m`` mechanisms (``m ≥ 2``), for the
``record`` and ``output`` observation laws (SPEC §2.3), with the prior free (any ``π`` on ``n``
secrets) or uniform. The proofs are in ``docs/certified.md#r5``; in short, write
``s(d) = F^A(d)/π(d)`` and ``v(d) = b(d)/π(d)``, so that
``ε_pa² = JS(F^A‖b) = Σ_d π(d)·φ(s(d), v(d))`` with ``φ(s, v) = v·g(s/v)`` jointly convex
(the perspective of JS's generator) and submodular, and ``Σ π s = Σ π v = 1``:

* ``output`` law: ``s`` is one output's posterior ratio vector, any point of
  ``[e^{−ξ}, e^{ξ}]^n`` with ``Σ π s = 1``;
* ``record`` law: ``s(d) = Σ_w p(w)·x(w)·r_w(d)`` with ``x = r(d*)``; every such product mean lies
  in ``[e^{−ξ}(2 − e^{−ξ}), e^{ξ} + e^{−ξ} − 1]`` (McCormick's bounds for ``XY`` on
  ``[a, A]²`` at means 1), and ``s(d*) = E x² ∈ [1, lo + hi − lo·hi]``.

A convex function of ``(s, v)`` is largest at a vertex of the region, which gives a finite
program: with the prior free the two marginals are two-point and the optimal coupling is
anti-monotone (a closed form, attained with three secrets, two for ``ε = 0``); with a uniform
prior the vertices are enumerated by type and paired anti-monotonically. Every value returned as
``attained`` is reached by the explicit mechanism :func:`witness` builds; ``upper`` is the proved
upper bound. They agree (the envelope is exact) except for ``n = 2`` with the prior free and
``ε > 0``, and wherever a uniform-prior ``record`` relaxation vertex is not reachable (not seen in
tests); there the pair is a certified bracket.

Everything is float64 NumPy and works with offsets ``s − 1``, ``v − 1`` (``expm1``), so the
envelope keeps its relative accuracy as ``ξ, ε → 0``.

Examples:
  >>> from jaxpriv.core import abp_envelope
  >>> lo, hi, exact = abp_envelope.envelope(1.0, 0.0, n=3, law="record", prior="free")
  >>> round(float(lo), 6), bool(exact)
  (0.211396, True)
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np

from jaxpriv.core import notions
from jaxpriv.core.errors import InputError
from jaxpriv.core.mechanisms import Mechanism

__all__ = ["LAWS", "PRIORS", "Bracket", "Witness", "envelope", "witness"]

LAWS = ("record", "output")
PRIORS = ("free", "uniform")
MAX_UNIFORM_N = 256
"""The uniform-prior program enumerates ``O(n²)`` vertex pairs of ``n`` terms each."""


class Bracket(NamedTuple):
    """``attained ≤ E(ξ, ε) ≤ upper`` (float64 arrays), and where the envelope is exact.

    Where ``exact`` is set, ``upper`` is ``attained`` itself (equal by construction, not by
    float equality of two computations: the two ends come from different vertices of the
    program, whose last bits depend on the CPU's vector width)."""

    attained: np.ndarray
    upper: np.ndarray
    exact: np.ndarray


class Witness(NamedTuple):
    """A mechanism attaining :attr:`Bracket.attained`: ``K`` (n × m), ``prior``, ``belief``."""

    K: np.ndarray
    prior: np.ndarray
    belief: np.ndarray


def _terms(s_off, v_off):
    """``φ(s, v) = v·g(s/v)`` from the offsets ``s − 1`` and ``v − 1``: JS's stable term
    ``¼(P+Q)·G(t)``, ``t = (P−Q)/(P+Q)``, ``G(t) = (1+t)log(1+t) + (1−t)log(1−t)``, in NumPy float64
    (op-by-op JAX would compile every new shape). ``G = 2t·atanh(t) + log1p(−t²)`` for ``|t| < ½``
    (as :func:`jaxpriv.core.divergences.js_terms`); beyond, the two ``log`` terms directly, which keep
    their relative accuracy as ``|t| → 1`` (large ξ), where ``atanh`` amplifies rounding."""
    s_off, v_off = np.asarray(s_off, np.float64), np.asarray(v_off, np.float64)
    total = 2.0 + s_off + v_off
    u = np.clip(np.abs(s_off - v_off) / total, 0.0, 1.0)  # G is even in t
    small = u < 0.5
    us = np.where(small, u, 0.0)
    ub = np.where(small, 0.75, u)
    rest = 1.0 - ub
    rest_log = np.where(rest > 0, rest * np.log(np.where(rest > 0, rest, 1.0)), 0.0)
    gap = np.where(small, 2.0 * us * np.arctanh(us) + np.log1p(-us * us),
                   (1.0 + ub) * np.log1p(ub) + rest_log)
    return 0.25 * total * gap


def _check(law: str, prior: str, n: int):
    if law not in LAWS:
        raise InputError(f"ABP law must be one of {', '.join(LAWS)} for the certified "
                         f"envelope, got {law!r}")
    if prior not in PRIORS:
        raise InputError(f"prior setting must be one of {', '.join(PRIORS)}, got {prior!r}")
    if int(n) != n or n < 2:
        raise InputError(f"n must be an integer >= 2, got {n}")
    if prior == "uniform" and n > MAX_UNIFORM_N:
        raise InputError(f"the uniform-prior envelope is computed for n <= {MAX_UNIFORM_N}")


def _belief_range(eps):
    """Offsets ``v − 1`` of the belief ratios: ``[e^{−ε} − 1, e^{ε} − 1]``."""
    return np.expm1(-eps), np.expm1(eps)


def _free_range(xi, law):
    """Offsets ``s − 1`` of every secret's ratio with the prior free: ``[a − 1, A − 1]``
    (output) or McCormick's ``[−(1−a)², (A−1)(1−a)]`` (record), ``a = e^{−ξ}``, ``A = e^ξ``."""
    down, up = -np.expm1(-xi), np.expm1(xi)  # 1 − a, A − 1
    if law == "output":
        return -down, up
    return -down * down, up * down


def _two_point(lo, hi):
    """The weight on ``hi`` of the two-point law on ``{lo, hi}`` (offsets) with mean 0 (0 when
    the interval is the point 0: one atom)."""
    width = hi - lo
    return np.where(width > 0, -lo / np.where(width > 0, width, 1.0), 0.0)


def _coupling(theta, eta):
    """Anti-monotone coupling of Bernoulli(θ) (high ``s``) and Bernoulli(η) (high ``v``):
    weights of (high s, high v), (high s, low v), (low s, high v), (low s, low v), last axis."""
    both = np.maximum(0.0, theta + eta - 1.0)
    return np.stack([both, theta - both, eta - both, 1.0 - theta - eta + both], axis=-1)


def _free(xi, eps, law, n):
    """Theorem 1 on arrays of points: ``(attained, upper)`` of ``ε_pa²``."""
    s_lo, s_hi = _free_range(xi, law)
    v_lo, v_hi = _belief_range(eps)
    weights = _coupling(_two_point(s_lo, s_hi), _two_point(v_lo, v_hi))
    terms = _terms(np.stack([s_hi, s_hi, s_lo, s_lo], -1), np.stack([v_hi, v_lo, v_hi, v_lo], -1))
    upper = np.sum(weights * terms, axis=-1)
    attained = upper.copy()
    exact = np.ones(upper.shape, bool)
    if n == 2:
        # two secrets and three atoms: the best two-secret mechanism is not known in closed
        # form; the lower end is what the two-atom candidates really reach (ABP from scratch)
        for i in np.flatnonzero(np.count_nonzero(weights > 0, axis=-1) > 2):
            attained[i] = max(_abp_squared(c, law)
                              for c in _free_candidates(xi[i], eps[i], law, n))
            exact[i] = False
    return attained, upper, exact


def _abp_squared(candidate, law):
    """``ε_pa²`` of a candidate ``(K, π, v)`` (float64, :func:`jaxpriv.core.notions.abp`)."""
    K, pi, v = candidate
    with jax.enable_x64(True):
        mech = Mechanism.from_K(K, pi, pi * (1.0 + v))
        return float(notions.abp(mech, law).level) ** 2


def _two_atom_beliefs(theta, v_lo, v_hi):
    """The ends of ``{v1 ∈ [v_lo, v_hi] : v2 = −θ·v1/(1−θ) ∈ [v_lo, v_hi]}``."""
    ratio = (1.0 - theta) / theta
    return max(v_lo, -ratio * v_hi), min(v_hi, -ratio * v_lo)


def _fits(value, lo, hi):
    """``lo ≤ value ≤ hi`` up to rounding, and the value clipped into the interval."""
    slack = 1e-12 * (np.abs(lo) + np.abs(hi))
    return (value >= lo - slack) & (value <= hi + slack), np.clip(value, lo, hi)


def _symmetric_vertices(n, lo, hi):
    """Vertices of ``{y ∈ [lo, hi]^n : Σ y = 0}`` up to permutation, for arrays of intervals:
    ``k`` coordinates at ``hi``, one free, the rest at ``lo``. Returns ``(rows, valid)``,
    shapes ``(P, n, n)`` and ``(P, n)``."""
    rows, valid = [], []
    for k in range(n):
        ok, c = _fits(-(k * hi + (n - 1 - k) * lo), lo, hi)
        rows.append(np.stack([hi] * k + [c] + [lo] * (n - 1 - k), -1))
        valid.append(ok)
    return np.stack(rows, -2), np.stack(valid, -1)


def _record_vertices(n, first, rest):
    """Vertices of ``{y : y₀ ∈ first, y_d ∈ rest (d ≥ 1), Σ y = 0}`` up to permuting the
    ``n − 1`` others: ``y₀`` at an end and one other free, or ``y₀`` free and every other at an
    end (``k`` of them high). Arrays of intervals; returns ``(rows, valid, top)``, ``top`` where
    ``y₀`` is the first interval's upper end (by construction, or free and equal to it)."""
    (lo1, hi1), (lo, hi) = first, rest
    rows, valid, top = [], [], []
    for k in range(n):
        others = [hi] * k + [lo] * (n - 1 - k)
        ok, y0 = _fits(-sum(others), lo1, hi1)
        rows.append(np.stack([y0] + others, -1))
        valid.append(ok)
        top.append(y0 >= hi1 - 1e-9 * np.abs(hi1))
        if k <= n - 2:
            for end, is_top in ((lo1, False), (hi1, True)):
                others = [hi] * k + [lo] * (n - 2 - k)
                ok, c = _fits(-end - sum(others), lo, hi)
                rows.append(np.stack([end, c] + others, -1))
                valid.append(ok)
                top.append(np.full_like(ok, is_top))
    return np.stack(rows, -2), np.stack(valid, -1), np.stack(top, -1)


def _uniform_parts(xi, law, n):
    """Under the uniform prior (arrays of ξ): the offset interval of ``s − 1`` for the true
    secret ``d*`` (record law) and for every other secret, ``S − 1`` (the largest
    ``s(d*) − 1``) and the range ``(lo − 1, hi − 1)`` of ``x = r(d*)``; the output law's
    coordinates all share ``[a − 1, A − 1]`` (first, ``S`` and the range ``None``)."""
    down, up = -np.expm1(-xi), np.expm1(xi)  # 1 − a, A − 1
    if law == "output":
        return None, (-down, up), None, None
    share = n - 1.0  # (1 − π*)/π* with π* = 1/n
    lo = np.maximum(-down, -share * up)  # lo − 1: the least x = r(d*) any output can have
    hi = np.minimum(up, share * down)  # hi − 1
    s_star = -lo * hi  # S − 1 = (1 − lo)(hi − 1) = max E x² − 1
    rest_hi = np.minimum(hi * down, up * -lo)  # McCormick's bounds on E[x·r(d)] − 1
    rest_lo = -np.minimum(-lo * down, hi * up)
    return (np.zeros_like(s_star), s_star), (rest_lo, rest_hi), s_star, (lo, hi)


SAME_VERTEX_RTOL = 1e-12
"""The uniform-prior program lists some vertices twice (``y₀`` solved for and landing on an end
of its interval, and ``y₀`` set to that end with another coordinate solved for): equal in exact
arithmetic, their values differ by the rounding of ``n ≤ 256`` terms (≤ ~256 ulps, 6e-14), and by
which log/atanh NumPy dispatches for the CPU. A reached best within this of the relaxation's
best is that vertex: the envelope is exact there."""

CHUNK_TERMS = 1 << 22
"""Terms evaluated at once by the uniform-prior program (bounds its memory)."""


def _uniform(xi, eps, law, n, *, argmax=False):
    """Theorems 2–3 on arrays of points: ``(attained, upper)`` of ``ε_pa²`` (or, with
    ``argmax``, the best reached ``(s, v)`` offsets and ``x``'s range for point 0)."""
    first, rest, s_star, x_range = _uniform_parts(xi, law, n)
    if law == "output":
        s_rows, s_valid = _symmetric_vertices(n, *rest)  # (P, T, n), (P, T)
        reached = s_valid
    else:  # the relaxation's vertices; those with s(d*) = S are reached (Theorem 3)
        s_rows, s_valid, top = _record_vertices(n, first, rest)
        reached = s_valid & top
    v_rows, v_valid = _symmetric_vertices(n, *_belief_range(eps))  # (P, V, n), (P, V)
    s_order = np.argsort(-s_rows, axis=-1, kind="stable")  # s descending, v ascending: φ is
    s_sorted = np.take_along_axis(s_rows, s_order, axis=-1)  # submodular
    v_sorted = np.sort(v_rows, axis=-1)
    points = len(xi)
    step = max(1, CHUNK_TERMS // (s_rows.shape[1] * v_rows.shape[1] * n))
    values = np.empty(s_rows.shape[:2] + v_rows.shape[1:2])
    for i in range(0, points, step):
        part = slice(i, i + step)
        values[part] = _terms(s_sorted[part, :, None, :], v_sorted[part, None, :, :]).mean(-1)
    values = np.where(s_valid[:, :, None] & v_valid[:, None, :], values, -np.inf)
    best = values.max(axis=-1)  # (P, T)
    attained = np.where(reached, best, -np.inf).max(axis=-1)
    if argmax:
        t = int(np.argmax(np.where(reached[0], best[0], -np.inf)))
        v = np.empty(n)
        v[s_order[0, t]] = v_sorted[0, int(np.argmax(values[0, t]))]
        ends = (rest[0][0], rest[1][0])
        return s_rows[0, t], v, (ends,) if x_range is None else (
            x_range[0][0], x_range[1][0], ends)
    upper = best.max(axis=-1)
    exact = attained >= upper * (1.0 - SAME_VERTEX_RTOL)
    return np.maximum(attained, 0.0), upper, exact


def envelope(x, eps=0.0, *, n: int, law: str = "record", prior: str = "free") -> Bracket:
    """``attained ≤ sup{ε_pa : MBP ≤ x, ε_bel ≤ ε} ≤ upper`` over ``n × m`` mechanisms.

    Args:
      x: MBP level(s) ``ξ ≥ 0``.
      eps: belief closeness ``ε ≥ 0`` (``ε_bel(b, π) ≤ ε``; 0 is ``b = π``), broadcast with x.
      n: number of secrets (``≥ 2``).
      law: ABP observation law, ``"record"`` or ``"output"``.
      prior: ``"free"`` (the sup over every prior on ``n`` secrets too) or ``"uniform"``.

    Returns:
      a :class:`Bracket` of float64 arrays shaped like ``broadcast(x, eps)``, in nats of
      ``ε_pa = sqrt(JS)``, and the boolean ``exact`` (there ``upper`` is ``attained``).

    References:
      docs/certified.md#r5 (proofs); 003 Def. 4.1 (ABP), Def. 4.2 (MBP).
    """
    _check(law, prior, n)
    x, eps = np.broadcast_arrays(np.asarray(x, np.float64), np.asarray(eps, np.float64))
    if np.any(~np.isfinite(x)) or np.any(x < 0) or np.any(~np.isfinite(eps)) or np.any(eps < 0):
        raise InputError("the ABP envelope needs finite levels ξ >= 0 and ε >= 0")
    solve = _free if prior == "free" else _uniform
    attained, upper, exact = solve(x.ravel(), eps.ravel(), law, int(n))
    attained = np.maximum(attained, 0.0)
    upper = np.sqrt(np.maximum(upper, attained))
    attained = np.sqrt(attained)
    upper = np.where(exact, attained, upper)
    return Bracket(attained.reshape(x.shape), upper.reshape(x.shape), exact.reshape(x.shape))


def witness(x: float, eps: float = 0.0, *, n: int, m: int = 2, law: str = "record",
            prior: str = "free") -> Witness:
    """A mechanism, prior and belief that attain :func:`envelope`'s ``attained`` value.

    Its MBP level is ``x`` (at most), ``ε_bel ≤ eps``, and its ABP level under ``law`` equals
    the envelope (the record law's maximum is at secret 0; the output law's at output 0).

    Args:
      x, eps: scalar levels ``ξ ≥ 0``, ``ε ≥ 0``.
      n, m: the shape (``n ≥ 2``, ``m ≥ 2``; extra outputs split the last one evenly).
      law, prior: as in :func:`envelope`.

    Returns:
      a :class:`Witness` (float64 arrays).
    """
    _check(law, prior, n)
    if int(m) != m or m < 2:
        raise InputError(f"m must be an integer >= 2, got {m}")
    xi, eps = float(x), float(eps)
    if prior == "free":
        candidates = _free_candidates(xi, eps, law, n)
        K, pi, v = max(candidates, key=lambda c: _abp_squared(c, law))
    else:
        s, v, parts = _uniform(np.array([xi]), np.array([eps]), law, n, argmax=True)
        pi = np.full(n, 1.0 / n)
        K = _output_witness(s, xi, *parts) if law == "output" else _record_witness(s, xi, *parts)
    if m > 2:
        K = np.concatenate([K[:, :1], np.repeat(K[:, 1:] / (m - 1), m - 1, axis=1)], axis=1)
    belief = pi * (1.0 + v)
    return Witness(K, pi, belief / belief.sum())


def _free_candidates(xi, eps, law, n):
    """Mechanisms ``(K, π, v)`` on the optimal atoms (``s`` high: ratios ``A`` then ``a``, i.e.
    copies of the true secret; ``s`` low: ``a`` then ``a + 1 − a²``), two outputs with
    ``p(0) = 1/(1+A)``: one, or for two secrets and three atoms the two ends of the segment of
    two-atom beliefs."""
    s_lo, s_hi = _free_range(xi, law)
    v_lo, v_hi = _belief_range(eps)
    theta, eta = _two_point(s_lo, s_hi), _two_point(v_lo, v_hi)
    weights = _coupling(theta, eta)
    atoms = [(w, high, v) for w, high, v in zip(weights, (True, True, False, False),
                                                 (v_hi, v_lo, v_hi, v_lo)) if w > 0]
    if n == 2 and len(atoms) > 2:
        choices = [[(theta, True, e), (1 - theta, False, -theta * e / (1 - theta))]
                   for e in _two_atom_beliefs(theta, v_lo, v_hi)]
    else:
        choices = [atoms]
    a, A = np.exp(-xi), np.exp(xi)
    p0 = 1.0 / (1.0 + A)
    found = []
    for atoms in choices:
        atoms = sorted(atoms, key=lambda atom: not atom[1])  # secret 0 high: the record d*
        while len(atoms) < n:  # more secrets: split the heaviest atom in two equal halves
            i = max(range(len(atoms)), key=lambda j: atoms[j][0])
            w, high, v = atoms[i]
            atoms[i:i + 1] = [(w / 2, high, v), (w / 2, high, v)]
        high = np.array([atom[1] for atom in atoms])
        # high rows (A, a)·p: [A/(1+A), 1/(1+A)]; low rows [a/(1+A), 1 − a/(1+A)], no cancellation
        K = np.stack([np.where(high, A * p0, a * p0), np.where(high, p0, 1.0 - a * p0)], axis=1)
        found.append((K, np.array([atom[0] for atom in atoms]),
                      np.array([atom[2] for atom in atoms])))
    return found


def _ratios(s, lo, hi, low_value, high_value):
    """``1 + s`` with the coordinates at an end of ``[lo, hi]`` (offsets) replaced by the exact
    ratio there (``1 + (a − 1)`` would lose ``a`` to rounding at large ξ)."""
    return np.where(s == lo, low_value, np.where(s == hi, high_value, 1.0 + s))


def _output_witness(s, xi, ends):
    """Output 0 carries the posterior ratio vector ``1 + s`` with half the largest mass ``t``
    that keeps output 1's ratios ``(1 − t·r)/(1 − t)`` in ``[a, A]`` (half: output 1 stays
    inside, and ``1 − t·r`` never cancels to nothing at large ξ)."""
    a, A = np.exp(-xi), np.exp(xi)
    r = _ratios(s, *ends, a, A)
    t = 1.0
    for rd in r:
        if rd > 1.0:
            t = min(t, (1.0 - a) / (rd - a))
        elif rd < 1.0:
            t = min(t, (A - 1.0) / (A - rd))
    t /= 2.0
    return np.stack([t * r, 1.0 - t * r], axis=1)


def _record_witness(s, xi, lo, hi, rest):
    """Two outputs (uniform prior): ``x = r(d*)`` is ``1 + hi`` on output 0, of mass
    ``p_H = −lo/(hi − lo)``, and ``1 + lo`` on output 1; another secret's ratio on output 0 is
    ``1 + s(d)/(−lo)``, which makes ``E[x·r(d)] = 1 + s(d)``, and on output 1 what keeps its
    row a distribution (ratios at an end of ``[a, A]`` taken exactly)."""
    if hi - lo <= 0:  # ξ = 0: nothing to learn
        return np.full((len(s), 2), 0.5)
    n = len(s)
    a, A = np.exp(-xi), np.exp(xi)
    x_lo, x_hi = max(a, 1.0 - (n - 1) * (A - 1.0)), min(A, 1.0 + (n - 1) * (1.0 - a))
    p_high = -lo / (hi - lo)
    # a rest secret at McCormick's ends: ratio max(a, ·) or min(A, ·) on output 0
    low0 = max(a, 1.0 - hi * (A - 1.0) / -lo)
    high0 = min(A, 1.0 + hi * (1.0 - a) / -lo)
    r0 = np.concatenate([[x_hi], _ratios(s[1:] / -lo, rest[0] / -lo, rest[1] / -lo, low0,
                                         high0)])
    K0 = p_high * r0
    K1 = np.concatenate([[(1.0 - p_high) * x_lo], 1.0 - K0[1:]])
    return np.stack([K0, K1], axis=1)
