"""Conversions of the wider differential-privacy literature (SPEC §5), as relation records
D1–D16, with their certified envelopes where the envelope is known.

Each claim is about a pair notion (the max over ordered pairs of rows ``P = K[d], Q = K[d']``)
or a channel notion (:mod:`jaxpriv.core.pair_notions`). A claim with an order ``α``, a ``δ`` or an
``ε`` is a :class:`~jaxpriv.registry.claims.Claim`: its instances at the audited values are
registered, their ids the claim's id and the values (``D5.a2``: α = 2; ``D6.a4.d1e-5``: α = 4,
δ = 1e-5; ``D9.e1``: ε = 1), and any other value is built on demand (``D6.a3.d1e-7``);
``--relations D6`` selects every registered instance of D6, ``'D*'`` every claim here.

Certificates (proofs in ``docs/certified.md#d-relations``):

* **ε-LDP premise, pair conclusion (D1–D5).** Every pair ``(P, Q)`` with
  ``e^{−ε} ≤ P/Q ≤ e^ε`` is a post-processing of binary randomized response ``RR_ε`` (Kairouz,
  Oh, Viswanath 2015, Thm 2.5 at δ = 0), and every pair notion here obeys data processing, so the
  supremum over ε-LDP mechanisms is the notion's value at ``RR_ε`` — a real two-secret
  mechanism: TV ``tanh(x/2)``, KL = ρ ``x·tanh(x/2)``, ``D_α`` Steinke's Thm 4 itself.
* **D13.** The (ε, δ) privacy region is dominated by Kairouz–Oh–Viswanath's four-output
  mechanism, whose total variation is ``(e^ε − 1 + 2δ)/(e^ε + 1)``: the bound is the envelope.
* **D10.** ``T(P, Q) ≥ G_μ`` bounds the profile by the Gaussian's (Dong, Roth, Su 2022,
  Cor. 2.13); quantizing ``N(0,1)`` vs ``N(μ,1)`` into finer bins (a post-processing) approaches
  it: the bound is the supremum (not attained by a finite mechanism).
* **D14.** ``Σ_w max_d K[d,w] ≤ n e^ε/(e^ε + n − 1)`` over ``n`` secrets (each column's max is
  ``e^ε`` times at most every other entry, rows sum to 1), attained by n-ary randomized response.
* **D15.** Pointwise maximal leakage ``≤ ε`` is approached by ``RR_ε`` with the prior's mass on
  one secret going to 0 (free prior); under a uniform prior the sup is D14's.
* D6–D9, D11, D12, D16: no certificate (the audit's envelope is a lower bound).

Examples:
  >>> from jaxpriv import families
  >>> from jaxpriv import registry
  >>> result = registry.get("D1").check(families.randomized_response(1.0))
  >>> round(float(result.slack), 12)  # binary RR attains KOV's bound
  1.0
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp

from jaxpriv.catalog import notions as catalog  # noqa: F401  (the notions the relations use)
from jaxpriv.core.gaussian import gaussian_delta
from jaxpriv.registry import Relation, Source, register
from jaxpriv.registry.claims import DELTA, EPSILON, ORDER, Claim, register_claim, settings

ORDERS = (1.5, 2.0, 4.0, 16.0)
"""The Rényi orders α every α-claim is registered at."""
DELTAS = (1e-2, 1e-5)
"""The δ every δ-claim is registered at."""
EPSILONS = (0.5, 1.0, 2.0)
"""The ε every δ(ε)-claim is registered at."""
CERTIFIED = "docs/certified.md#d-relations"


# --------------------------------------------------------------------------------------------
# certificates
# --------------------------------------------------------------------------------------------


def at_randomized_response(value_at_rr, what: str):
    """ε-LDP premise: the sup of a pair notion obeying data processing is its value at binary
    randomized response ``RR_x`` (KOV 2015 Thm 2.5), exact and attained, for every prior; given
    in closed form (a float64 ``RR_x`` itself is too coarse near 0: its rows differ by ~x/2,
    rounded to 1e-16 absolute, so a divergence ∝ x² loses half its digits at x = 1e-9).
    ``tests/test_dp_relations.py`` checks each closed form against the notion at ``RR_x``."""
    def certificate(x, eps, *, n, r=None, prior="free"):
        return value_at_rr(jnp.asarray(x)), None

    certificate.__doc__ = f"sup {what} at LDP ≤ x: its value at binary randomized response RR_x."
    return certificate


def ldp_envelope(premise: str, conclusion: str, options: dict | None = None):
    """The certificate of "ε-LDP ⇒ conclusion ≤ …" where its envelope is known in closed form
    (the conclusion's value at ``RR_x``): ``tv``, ``kl``, ``zcdp``, ``renyi`` at a finite order;
    ``None`` for any other pair (any claim with that premise and conclusion may use it, e.g. a
    library's conversion in :mod:`jaxpriv.catalog.accountants`)."""
    options = options or {}
    if premise != "ldp":
        return None
    if conclusion == "tv":
        return at_randomized_response(_tanh_half, "tv")
    if conclusion in ("kl", "zcdp"):
        return at_randomized_response(_kl_of_rr, conclusion)
    order = options.get("order", 2.0)
    if conclusion == "renyi" and isinstance(order, (int, float)) and 1.0 < order < math.inf:
        return at_randomized_response(_d5_bound(float(order)), "renyi")
    return None


def _tanh_half(x):
    """TV of ``RR_x``: ``tanh(x/2) = (e^x − 1)/(e^x + 1)``."""
    return jnp.tanh(x / 2.0)


def _kl_of_rr(x):
    """KL of ``RR_x``, ``x·tanh(x/2)``, which is also its zCDP level (the sup over α is the
    α → 1 limit: Steinke 2024, Thm 5)."""
    return x * jnp.tanh(x / 2.0)


def _bound_is_envelope(bound):
    """The claimed bound is the exact supremum (min slack 1)."""
    def certificate(x, eps, *, n, r=None, prior="free"):
        return bound(jnp.asarray(x), eps), jnp.ones_like(jnp.asarray(x))
    return certificate


def _leakage_of_ldp(x, eps, *, n, r=None, prior="free"):
    """D14: ``sup max_leakage`` over n-secret ε-LDP mechanisms ``= log(n e^x/(e^x + n − 1))``
    (n-ary randomized response), for every prior with full support."""
    x = jnp.asarray(x)
    return x - jnp.log1p(jnp.expm1(x) / n), None


def _pml_of_ldp(x, eps, *, n, r=None, prior="free"):
    """D15: ``sup pml = x`` over priors (approached, not attained); under a uniform prior the
    column maxima argument of D14 gives ``log(n e^x/(e^x + n − 1))``, attained by n-ary RR."""
    if prior == "uniform":
        return _leakage_of_ldp(x, eps, n=n)
    if prior != "free":
        return None
    x = jnp.asarray(x)
    return x, jnp.ones_like(x)


# --------------------------------------------------------------------------------------------
# bounds
# --------------------------------------------------------------------------------------------


def log_cosh(y):
    """``log cosh(y)`` to full relative accuracy: ``log1p(2 sinh²(y/2))`` (no cancellation near
    0), ``|y| + log1p(e^{−2|y|}) − log 2`` beyond ``|y| = 1`` (no overflow)."""
    a = jnp.abs(y)
    small = a <= 1.0
    s = jnp.sinh(jnp.where(small, a, 0.0) / 2.0)
    big = jnp.where(small, 1.0, a)
    return jnp.where(small, jnp.log1p(2.0 * s * s),
                     big + jnp.log1p(jnp.exp(-2.0 * big)) - math.log(2.0))


def _d5_bound(order):
    """Steinke 2024 Thm 4: ``(α−1)⁻¹ log((e^{αε} + e^{(1−α)ε})/(1 + e^ε))``, the RR value,
    as ``(α−1)⁻¹ [log cosh((α−½)ε) − log cosh(ε/2)]`` (the two sums are ``2e^{ε/2}·cosh``):
    both terms are O(ε²) near 0 and their ratio is (2α−1)², so nothing cancels for α away from 1
    (the textbook form loses every digit at ε = 1e-7). As α → 1 the two terms meet: where
    ``h = α − 1 < ½`` and ``hε ≤ 1``, ``h⁻¹ log1p(2 sinh²(hε/2) + tanh(ε/2) sinh(hε))`` (the
    same sum over ``1 + e^ε``, two positive terms), which tends to ``ε·tanh(ε/2)`` (at
    α = 1 + 2e-16 the cosh form read 1.25 for 0.9527 at ε = 1.5)."""
    def bound(x, *p):  # ∞ − ∞ at x = ∞: there RR_∞'s D_α is ∞
        finite = jnp.isfinite(x)
        y = jnp.where(finite, x, 1.0)
        h = order - 1.0
        near = (h < 0.5) & (h * y <= 1.0)
        value = (log_cosh((order - 0.5) * y) - log_cosh(0.5 * y)) / h
        hy = jnp.where(near, h * y, 0.0)
        half = jnp.sinh(hy / 2.0)
        close = jnp.log1p(2.0 * half * half + jnp.tanh(y / 2.0) * jnp.sinh(hy)) / jnp.where(
            near, h, 1.0)
        return jnp.where(finite, jnp.where(near, close, value), jnp.inf)
    return bound


def _d9_bound(x, *p, epsilon):
    """Canonne, Kamath, Steinke 2020, Cor. 13: ``δ = inf_{α>1} e^{(α−1)(αρ−ε)}(1−1/α)^α/(α−1)``.

    The log of the objective, ``f(α) = (α−1)(αρ−ε) + α·log(1 − 1/α) − log(α−1)``, is convex
    in α: ``f'(α) = (2α − 1)ρ − ε + log(1 − 1/α)`` increases (``f'' = 2ρ + 1/(α(α−1)) > 0``),
    so the infimum over ``u = log(α−1) ∈ [−12, 12]`` is where ``f'`` changes sign, or an end.
    Found by Newton's steps on ``f'`` in u (its u-derivative ``2ρt + 1/(1+t)``, ``t = e^u``;
    8 in float32, 10 in float64), kept inside the bracket of the signs seen (a step that leaves
    it bisects; one past an end that has not moved goes to that end), from ``α₀`` solving
    ``f' = 0`` with ``log(1 − 1/α) ≈ −1/α`` (``2ρα² − (ρ + ε)α − 1 = 0``): within 5e-14 of the
    infimum of ``log δ`` wherever ``δ > e^−100`` over ρ in [1e-6, 1e4] and ε in [1e-6, 1e3] (a
    golden-section search of 200 steps as reference); within 5e-14 relative of the 72 golden
    steps before in float64, within float32's rounding of them in float32 (8e-6 at ε ≤ 30).
    Every value taken is the objective at some order, never below the true infimum (up to its
    rounding: float32's can sit ~1e-5 below, as before), so the bound used is never smaller
    than the claimed one (no false alarm); clipped to 1. No derivative flows through the
    starting point. (Before: 36 golden-section steps in float32, 72 in float64, one evaluation
    each: 7% of D9's sweep, now a quarter of that; before that a 400-point grid and 60 golden
    steps.)
    """
    rho = jnp.asarray(x)

    def at(u):
        # f at α = 1 + t, t = e^u: t((1 + t)ρ − ε) + (α log(1 − 1/α) − log(α − 1)), the latter
        # (α−1) log(α−1) − α log α written without α (whose rounding near 1 cost float32 1% of
        # δ: an infimum read 0.9976 for 1 at ρ = 19, ε = 1) and without cancellation: t u
        # (u < 0) or −u (u >= 0), less (1 + t) log1p(e^−|u|), e^−|u| from t (t or 1/t): one
        # exponential an evaluation; f'(α) = (2t + 1)ρ − ε + log(t/(1 + t)), the log being
        # min(u, 0) − log1p(e^−|u|)
        t = jnp.exp(u)
        negative = u < 0.0
        tail = jnp.log1p(jnp.where(negative, t, 1.0 / t))
        value = t * ((1.0 + t) * rho - epsilon) + jnp.where(negative, t * u, -u) - (1.0 + t) * tail
        slope = (2.0 * t + 1.0) * rho - epsilon + jnp.minimum(u, 0.0) - tail
        return value, slope, 2.0 * t * rho + 1.0 / (1.0 + t)

    low, high = -12.0, 12.0
    spread = epsilon + rho
    start = jnp.log((spread + jnp.sqrt(spread * spread + 8.0 * rho)) / (4.0 * rho) - 1.0)
    # NaN where α₀ ≤ 1 (large ρ: the infimum is near α = 1) or ρ = ∞: from the low end. Only
    # a starting point: no derivative through it (at ρ = 0 its own is infinite, and 0·∞ made
    # the bound's gradient NaN)
    u = jax.lax.stop_gradient(jnp.clip(jnp.where(jnp.isnan(start), low, start), low, high))

    def newton_step(_, state):
        u, a, b, best = state
        value, slope, curvature = at(u)
        best = jnp.minimum(best, value)
        a = jnp.where(slope < 0.0, u, a)  # the infimum is right of u
        b = jnp.where(slope > 0.0, u, b)  # left of u
        step = u - slope / curvature
        u = jnp.where((step > a) & (step < b), step,
                      jnp.where((step <= a) & (a == low), low,
                                jnp.where((step >= b) & (b == high), high, 0.5 * (a + b))))
        return u, a, b, best

    # a loop, not unrolled steps: traced once (in every program and every eager call of the
    # audit's verdicts, envelopes and figures)
    state = (u, jnp.full_like(rho, low), jnp.full_like(rho, high), jnp.full_like(rho, jnp.inf))
    steps = 10 if rho.dtype == jnp.float64 else 8
    u, _, _, best = jax.lax.fori_loop(0, steps, newton_step, state)
    log_delta = jnp.minimum(best, at(u)[0])
    return jnp.minimum(jnp.exp(log_delta), 1.0)


def _d10_bound(x, *p, epsilon):
    """Dong, Roth, Su 2022, Cor. 2.13: ``Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)``; 0 at μ = 0
    (:func:`jaxpriv.core.gaussian.gaussian_delta`, accurate to 1e-300); 1 at μ = ∞ (where
    ``gaussian_delta`` gives NaN: ``Φ(∞) − e^ε Φ(−∞)``)."""
    finite = jnp.isfinite(x)
    return jnp.where(finite, gaussian_delta(jnp.where(finite, x, 1.0), epsilon), 1.0)


def _d5_claim_bound(x, *p, order):
    """D5's bound as its claim's (the order a keyword, possibly traced)."""
    return _d5_bound(order)(x)


def _d6_bound(x, *p, order, delta):
    """Mironov 2017, Prop. 3: ``r + log(1/δ)/(α−1)``."""
    return x - jnp.log(delta) / (order - 1.0)


def _d7_bound(x, *p, order, delta):
    """Balle et al. 2020, Thm 21: ``r + log(1−1/α) − (log δ + log α)/(α−1)``."""
    return x + jnp.log1p(-1.0 / order) - (jnp.log(delta) + jnp.log(order)) / (order - 1.0)


def _d8_bound(x, *p, delta):
    """Bun, Steinke 2016, Prop. 1.3: ``ρ + 2·sqrt(ρ log(1/δ))``."""
    return x + 2.0 * jnp.sqrt(x * -jnp.log(delta))


def _d13_bound(x, *p, delta):
    """``(e^ε − 1 + 2δ)/(e^ε + 1) = tanh(ε/2) + 2δ/(1 + e^ε)``: no ∞/∞ at ε ≥ 710 (the limit
    1)."""
    return jnp.tanh(0.5 * x) + 2.0 * delta * jnp.exp(-jnp.logaddexp(0.0, x))


# --------------------------------------------------------------------------------------------
# the relations
# --------------------------------------------------------------------------------------------

KOV = Source("Kairouz, Oh, Viswanath 2015 (ICML; IEEE TIT 2017)",
             "derived from Thm 2.1/2.5 (dominance by the four-output mechanism)")
STEINKE = "Steinke 2024, 'Tight RDP & zCDP bounds from pure DP' (differentialprivacy.org)"
IWK = "Issa, Wagner, Kamath 2020 (IEEE TIT 66(3)), arXiv 1807.07878"
SAEIDIAN = "Saeidian, Cervia, Oechtering, Skoglund 2023 (IEEE TIT), arXiv 2205.04935"

D_RELATIONS: list[Relation] = []


def _add(**fields) -> Relation:
    # check_bound=False: tests/test_relations.py checks every built-in bound's shape (tracing
    # these 39 here cost 1.2 s of every import)
    relation = register(Relation(**fields), replace=True, check_bound=False)
    D_RELATIONS.append(relation)
    return relation


def _claim(claim: Claim) -> Claim:
    """Register a claim with parameters; its grid's instances join :data:`D_RELATIONS`."""
    register_claim(claim, replace=True, check_bound=False)
    from jaxpriv.registry import REGISTRY

    D_RELATIONS.extend(REGISTRY[claim.instance_id(values)] for values in claim.grid)
    return claim


def _g(v) -> str:
    return f"{v:.10g}"


_add(id="D1", statement="ε-LDP ⇒ TV ≤ (e^ε−1)/(e^ε+1)", sources=(KOV,),
     premise="ldp", conclusion="tv", bound=lambda x, *p: jnp.tanh(x / 2.0),
     certificate=ldp_envelope("ldp", "tv"), proof=CERTIFIED)
_add(id="D2", statement="ε-LDP ⇒ KL ≤ ε(e^ε−1)",
     sources=(Source("Dwork, Rothblum, Vadhan 2010 (FOCS)", "Lemma III.2"),),
     premise="ldp", conclusion="kl", bound=lambda x, *p: x * jnp.expm1(x),
     certificate=ldp_envelope("ldp", "kl"), proof=CERTIFIED)
_add(id="D3", statement="ε-LDP ⇒ ρ-zCDP with ρ = ε²/2",
     sources=(Source("Bun, Steinke 2016 (TCC), arXiv 1605.02065", "Prop. 1.4 (= Prop. 3.3)"),),
     premise="ldp", conclusion="zcdp", bound=lambda x, *p: 0.5 * x * x,
     certificate=ldp_envelope("ldp", "zcdp"), proof=CERTIFIED)
_add(id="D4", statement="ε-LDP ⇒ ρ-zCDP with ρ = ε·tanh(ε/2)",
     sources=(Source(STEINKE, "Thm 5"),),
     premise="ldp", conclusion="zcdp", bound=lambda x, *p: x * jnp.tanh(x / 2.0),
     certificate=ldp_envelope("ldp", "zcdp"), proof=CERTIFIED)
MIRONOV = Source("Mironov 2017 (CSF), arXiv 1702.07476", "Prop. 3")
BBGHS = (Source("Balle, Barthe, Gaboardi, Hsu, Sato 2020 (AISTATS), arXiv 1905.09982", "Thm 21"),
         Source("Canonne, Kamath, Steinke 2020 (NeurIPS), arXiv 2004.00010", "Prop. 12"))


def _d5(rid, order):
    return Relation(
        id=rid, statement=f"ε-LDP ⇒ D_α ≤ (α−1)⁻¹ log((e^{{αε}}+e^{{(1−α)ε}})/(1+e^ε)) at "
                          f"α = {_g(order)}",
        sources=(Source(STEINKE, "Thm 4"),), premise="ldp", conclusion="renyi",
        options={"order": order}, bound=functools.partial(_d5_claim_bound, order=order),
        certificate=ldp_envelope("ldp", "renyi", {"order": order}), proof=CERTIFIED)


def _d6(rid, order, delta):
    return Relation(
        id=rid, statement=f"D_α ≤ r ⇒ ε(δ) ≤ r + log(1/δ)/(α−1) at α = {_g(order)}, "
                          f"δ = {_g(delta)}",
        sources=(MIRONOV,), premise="renyi", conclusion="eps_at_delta",
        options={"order": order, "delta": delta},
        bound=functools.partial(_d6_bound, order=order, delta=delta))


def _d7(rid, order, delta):
    return Relation(
        id=rid, statement=f"D_α ≤ r ⇒ ε(δ) ≤ r + log(1−1/α) − (log δ + log α)/(α−1) at "
                          f"α = {_g(order)}, δ = {_g(delta)}",
        sources=BBGHS, premise="renyi", conclusion="eps_at_delta",
        options={"order": order, "delta": delta},
        bound=functools.partial(_d7_bound, order=order, delta=delta))


def _d8(rid, delta):
    return Relation(
        id=rid, statement=f"ρ-zCDP ⇒ ε(δ) ≤ ρ + 2·sqrt(ρ log(1/δ)) at δ = {_g(delta)}",
        sources=(Source("Bun, Steinke 2016 (TCC), arXiv 1605.02065", "Prop. 1.3"),),
        premise="zcdp", conclusion="eps_at_delta", options={"delta": delta},
        bound=functools.partial(_d8_bound, delta=delta))


def _d9(rid, epsilon):
    return Relation(
        id=rid, statement=f"ρ-zCDP ⇒ δ(ε) ≤ inf_α e^{{(α−1)(αρ−ε)}}(1−1/α)^α/(α−1) at "
                          f"ε = {_g(epsilon)}",
        sources=(Source("Canonne, Kamath, Steinke 2020 (NeurIPS), arXiv 2004.00010",
                        "Cor. 13"),),
        premise="zcdp", conclusion="delta", options={"epsilon": epsilon},
        bound=functools.partial(_d9_bound, epsilon=epsilon))


def _d10(rid, epsilon):
    bound = functools.partial(_d10_bound, epsilon=epsilon)
    return Relation(
        id=rid, statement=f"μ-GDP ⇒ δ(ε) ≤ Φ(−ε/μ+μ/2) − e^ε Φ(−ε/μ−μ/2) at ε = {_g(epsilon)}",
        sources=(Source("Dong, Roth, Su 2022 (JRSS-B), arXiv 1905.02383",
                        "Cor. 2.13 (Cor. 1 in the journal version)"),),
        premise="gdp", conclusion="delta", options={"epsilon": epsilon}, bound=bound,
        certificate=_bound_is_envelope(bound), proof=CERTIFIED)


def _d13(rid, delta):
    bound = functools.partial(_d13_bound, delta=delta)
    return Relation(
        id=rid, statement=f"(ε, δ)-DP ⇒ TV ≤ (e^ε − 1 + 2δ)/(e^ε + 1) at δ = {_g(delta)}",
        sources=(KOV,), premise="eps_at_delta", conclusion="tv", options={"delta": delta},
        bound=bound, certificate=_bound_is_envelope(bound), proof=CERTIFIED)


_claim(Claim("D5", "ε-LDP ⇒ D_α ≤ (α−1)⁻¹ log((e^{αε}+e^{(1−α)ε})/(1+e^ε))", (ORDER,), _d5,
             settings(order=ORDERS), bound=_d5_claim_bound))
_claim(Claim("D6", "D_α ≤ r ⇒ ε(δ) ≤ r + log(1/δ)/(α−1)", (ORDER, DELTA), _d6,
             settings(order=ORDERS, delta=DELTAS), bound=_d6_bound))
_claim(Claim("D7", "D_α ≤ r ⇒ ε(δ) ≤ r + log(1−1/α) − (log δ + log α)/(α−1)", (ORDER, DELTA),
             _d7, settings(order=ORDERS, delta=DELTAS), bound=_d7_bound))
_claim(Claim("D8", "ρ-zCDP ⇒ ε(δ) ≤ ρ + 2·sqrt(ρ log(1/δ))", (DELTA,), _d8, settings(delta=DELTAS),
             bound=_d8_bound))
_claim(Claim("D9", "ρ-zCDP ⇒ δ(ε) ≤ inf_α e^{(α−1)(αρ−ε)}(1−1/α)^α/(α−1)", (EPSILON,), _d9,
             settings(epsilon=EPSILONS), bound=_d9_bound))
_claim(Claim("D10", "μ-GDP ⇒ δ(ε) ≤ Φ(−ε/μ+μ/2) − e^ε Φ(−ε/μ−μ/2)", (EPSILON,), _d10,
             settings(epsilon=EPSILONS), bound=_d10_bound))
_add(id="D11", statement="KL ≤ x ⇒ TV ≤ sqrt(x/2) (Pinsker)",
     sources=(Source("Pinsker 1964; Csiszár 1967"),), premise="kl", conclusion="tv",
     bound=lambda x, *p: jnp.sqrt(0.5 * x))
_add(id="D12", statement="KL ≤ x ⇒ TV ≤ sqrt(1 − e^{−x}) (Bretagnolle–Huber)",
     sources=(Source("Bretagnolle, Huber 1979 (Z. Wahrsch.)"),), premise="kl", conclusion="tv",
     bound=lambda x, *p: jnp.sqrt(-jnp.expm1(-x)))
_claim(Claim("D13", "(ε, δ)-DP ⇒ TV ≤ (e^ε − 1 + 2δ)/(e^ε + 1)", (DELTA,), _d13,
             settings(delta=DELTAS), bound=_d13_bound))
_add(id="D14", statement="ε-LDP ⇒ maximal leakage ≤ ε", sources=(Source(IWK),),
     premise="ldp", conclusion="max_leakage", bound=lambda x, *p: x,
     certificate=_leakage_of_ldp, proof=CERTIFIED)
_add(id="D15", statement="ε-LDP ⇒ pointwise maximal leakage ≤ ε", sources=(Source(SAEIDIAN),),
     premise="ldp", conclusion="pml", bound=lambda x, *p: x,
     certificate=_pml_of_ldp, proof=CERTIFIED)
_add(id="D16", statement="maximal leakage ≤ x ⇒ I(D;W) ≤ x", sources=(Source(IWK),),
     premise="max_leakage", conclusion="mi", bound=lambda x, *p: x)
