"""Relations D1–D16 (jaxpriv.catalog.dp_literature): their bounds against mpmath and the papers' closed
forms, their certificates against the notions at the attaining mechanisms and against random
mechanisms (no mechanism may exceed a certified envelope), the attaining mechanisms themselves
(KOV's four-output mechanism, n-ary randomized response, quantized Gaussians), selection of a
claim's instances, and a small audit."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest
from scipy.stats import norm

from jaxpriv import Mechanism, audit, level, registry, report
from jaxpriv.core import families
from jaxpriv.engines import certify, search
from jaxpriv.catalog import dp_literature as dp_relations

mp.mp.dps = 40
D_IDS = [rid for rid in registry.REGISTRY if rid.startswith("D")]


def _bound(rid, x):
    with jax.enable_x64(True):
        return np.asarray(registry.get(rid).bound(jnp.asarray(x, jnp.float64), 0.0))


def test_the_claims_and_their_instances_are_registered():
    assert len(D_IDS) == 4 + 4 + 8 + 8 + 2 + 3 + 3 + 2 + 2 + 3
    assert registry.select("D6") == [f"D6.a{a:g}.d{d}" for a in dp_relations.ORDERS
                                     for d in ("1e-2", "1e-5")]
    assert registry.select("D*") == D_IDS
    for rid in D_IDS:
        relation = registry.get(rid)
        assert relation.sources and relation.statement
        for key, value in relation.options.items():  # every option is some notion's parameter
            assert key in relation.notion_params, (rid, key)


XS = [1e-9, 1e-4, 0.1, 1.0, 3.0, 20.0]


@pytest.mark.parametrize("order", dp_relations.ORDERS)
def test_d5_bound_matches_steinke_theorem_4(order):
    """Steinke 2024 Thm 4, in mpmath straight from the statement, to 1e-13 even at ε = 1e-9."""
    got = _bound(_id("D5", order=order), XS)
    a = mp.mpf(order)
    want = [mp.log((mp.exp(a * x) + mp.exp((1 - a) * x)) / (1 + mp.exp(x))) / (a - 1)
            for x in map(mp.mpf, XS)]
    np.testing.assert_allclose(got, [float(w) for w in want], rtol=1e-13)


@pytest.mark.parametrize("epsilon", dp_relations.EPSILONS)
def test_d9_bound_is_the_infimum_over_orders(epsilon):
    """Canonne, Kamath, Steinke 2020 Cor. 13: the infimum over α > 1, against mpmath's
    minimization (the bound must not be below it — that would invent violations — and is within
    1e-10 of it)."""
    rid = _id("D9", epsilon=epsilon)
    rhos = [1e-3, 0.05, 0.3, 1.0, 4.0]
    got = _bound(rid, rhos)
    for rho, value in zip(rhos, got):
        rho = mp.mpf(rho)

        def f(u, rho=rho):
            a = 1 + mp.exp(u)
            return (a - 1) * (a * rho - epsilon) + a * mp.log(1 - 1 / a) - mp.log(a - 1)
        us = [mp.mpf(-12) + 24 * mp.mpf(i) / 4000 for i in range(4001)]
        i = min(range(len(us)), key=lambda j: f(us[j]))
        best = mp.findroot(lambda u: mp.diff(f, u), us[i])
        want = min(mp.mpf(1), mp.exp(min(f(best), f(us[i]))))
        assert value >= float(want) * (1 - 1e-12)
        np.testing.assert_allclose(value, float(want), rtol=1e-10)


@pytest.mark.parametrize("epsilon", dp_relations.EPSILONS)
def test_d9_bound_in_float32_is_never_below_the_float64_infimum(epsilon):
    """The sweep evaluates D9's bound in float32: from ρ = 1e-4 (the infimum at large orders) to
    1e3 (orders near 1), it is never below the float64 infimum by more than 1e-5 relative (the
    rounding of its terms, and of log δ: 2e-7 of it; below float32's range it reads 0), and
    within that of it. (Written with ``α = 1 + e^u`` rounded, it read 0.9976 for an infimum of 1
    at ρ = 19, ε = 1.)"""
    rid = _id("D9", epsilon=epsilon)
    rhos = np.geomspace(1e-4, 1e3, 400)
    want = _bound(rid, rhos)
    got = np.asarray(registry.get(rid).bound(jnp.asarray(rhos, jnp.float32), 0.0), np.float64)
    representable = want > 1e-37
    slack = 1e-5 + 2e-7 * np.abs(np.log(np.where(representable, want, 1.0)))
    off = np.log(np.where(representable, got, 1.0) / np.where(representable, want, 1.0))
    assert not (representable & (off < -slack)).any(), rhos[representable & (off < -slack)]
    assert np.all(np.abs(off[representable]) <= slack[representable])


@pytest.mark.parametrize("epsilon", dp_relations.EPSILONS)
def test_d10_bound_matches_dong_roth_su(epsilon):
    rid = _id("D10", epsilon=epsilon)
    mus = [1e-3, 0.1, 0.5, 1.0, 3.0, 10.0]
    got = _bound(rid, mus)
    e = mp.mpf(epsilon)
    want = [mp.ncdf(-e / mu + mu / 2) - mp.exp(e) * mp.ncdf(-e / mu - mu / 2)
            for mu in map(mp.mpf, mus)]
    np.testing.assert_allclose(got, [float(w) for w in want], rtol=1e-10, atol=1e-300)
    assert float(_bound(rid, [0.0])[0]) == 0.0


def test_other_bounds_are_the_papers_formulas():
    x = np.array([0.01, 0.5, 2.0])
    np.testing.assert_allclose(_bound("D1", x), np.tanh(x / 2), rtol=1e-14)
    np.testing.assert_allclose(_bound("D2", x), x * np.expm1(x), rtol=1e-14)
    np.testing.assert_allclose(_bound("D4", x), x * np.tanh(x / 2), rtol=1e-14)
    for a in dp_relations.ORDERS:
        for d in dp_relations.DELTAS:
            np.testing.assert_allclose(_bound(_id("D6", order=a, delta=d), x),
                                       x + np.log(1 / d) / (a - 1), rtol=1e-14)
            np.testing.assert_allclose(_bound(_id("D7", order=a, delta=d), x),
                                       x + np.log((a - 1) / a) - (np.log(d) + np.log(a)) / (a - 1),
                                       rtol=1e-13)
    np.testing.assert_allclose(_bound("D8.d1e-5", x), x + 2 * np.sqrt(x * np.log(1e5)),
                               rtol=1e-14)
    np.testing.assert_allclose(_bound("D12", x), np.sqrt(1 - np.exp(-x)), rtol=1e-14)
    np.testing.assert_allclose(_bound("D13.d1e-2", x), (np.exp(x) - 1 + 0.02) / (np.exp(x) + 1),
                               rtol=1e-14)


@pytest.mark.parametrize("rid", ["D1", "D2", "D3", "D4", "D5.a1.5", "D5.a2", "D5.a4", "D5.a16"])
def test_ldp_certificates_are_the_notions_at_randomized_response(x64, rid):
    """The closed form each certificate returns is the conclusion notion at RR_x, attained."""
    x = np.array([0.01, 0.3, 1.0, 2.5, 6.0])
    relation = registry.get(rid)
    cert = certify.envelope(relation, x, 0.0, n=3)
    at_rr = level(relation.conclusion, families.randomized_response(x), **relation.options)
    np.testing.assert_allclose(cert.conclusion, at_rr, rtol=1e-9)
    assert cert.exact.all()


def _ldp_mechanisms(seed, batch=4000, n=3, m=4):
    """Random mechanisms of every LDP level up to ~4 (Dirichlet rows, some sharpened)."""
    rng = np.random.default_rng(seed)
    K = rng.dirichlet(np.ones(m), size=(batch, n)) ** rng.uniform(0.2, 2.0, (batch, 1, 1))
    K /= K.sum(-1, keepdims=True)
    return Mechanism.from_K(K, rng.dirichlet(np.ones(n), size=batch))


@pytest.mark.parametrize("rid", ["D1", "D2", "D4", "D5.a1.5", "D5.a16", "D13.d1e-2",
                                 "D13.d1e-5", "D14", "D15", "D10.e1"])
def test_no_mechanism_exceeds_a_certified_envelope(x64, rid):
    """Random mechanisms (n = 3): the conclusion never exceeds the certified sup at the
    mechanism's own premise level (the envelope is non-decreasing in x)."""
    relation = registry.get(rid)
    mech = _ldp_mechanisms(sum(map(ord, rid)), batch=800 if "zcdp" in (
        relation.premise, relation.conclusion) else 4000)
    result = relation.check(mech)
    finite = np.isfinite(result.premise)
    cert = certify.envelope(relation, result.premise[finite], 0.0, n=3)
    assert (result.conclusion[finite] <= cert.conclusion * (1 + 1e-9) + 1e-14).all()
    assert not result.violated.any()


def test_kov_four_output_mechanism_attains_d13(x64):
    """Kairouz–Oh–Viswanath's mechanism: P = (δ, (1−δ)e^ε/(1+e^ε), (1−δ)/(1+e^ε), 0), Q
    reversed, has ε(δ) = ε and TV = (e^ε − 1 + 2δ)/(e^ε + 1): slack exactly 1."""
    for delta in dp_relations.DELTAS:
        for eps in (0.2, 1.0, 3.0):
            e = np.exp(eps)
            d = delta * (1 - 1e-12)  # exactly δ would round to δ + 1 ulp: ε(δ) = +∞
            P = np.array([d, (1 - d) * e / (1 + e), (1 - d) / (1 + e), 0.0])
            mech = Mechanism.from_K(np.stack([P, P[::-1]]))
            result = registry.get(_id("D13", delta=delta)).check(mech)
            np.testing.assert_allclose(result.premise, eps, rtol=1e-9)
            np.testing.assert_allclose(result.slack, 1.0, rtol=1e-9)


def test_n_ary_randomized_response_attains_d14_and_d15_under_a_uniform_prior(x64):
    for n in (2, 3, 5):
        for eps in (0.1, 1.0, 4.0):
            mech = families.k_randomized_response(n, eps)
            cert = certify.envelope("D14", eps, 0.0, n=n)
            np.testing.assert_allclose(level("max_leakage", mech), cert.conclusion, rtol=1e-12)
            cert = certify.envelope("D15", eps, 0.0, n=n, prior="uniform")
            np.testing.assert_allclose(level("pml", mech), cert.conclusion, rtol=1e-12)


def test_d15_sup_is_approached_as_a_prior_mass_vanishes(x64):
    """PML of RR_ε under the prior (t, 1−t) tends to ε as t → 0 (the certificate's sup)."""
    for t in (1e-2, 1e-4, 1e-8):
        value = float(level("pml", families.randomized_response(1.0, prior=[t, 1 - t])))
        assert value < 1.0
        np.testing.assert_allclose(value, 1.0, atol=3 * t)


def test_quantized_gaussians_approach_d10(x64):
    """N(0,1) vs N(μ,1) quantized into 400 bins is μ-GDP at most (post-processing) and its
    privacy profile comes within 1% of the Gaussian's (the certificate's supremum)."""
    mu = 1.0
    edges = np.concatenate([[-np.inf], np.linspace(-8, 9, 399), [np.inf]])

    def bins(shift):  # each bin's mass from the tail it lies in: no zero bins from rounding
        lo, hi = edges[:-1] - shift, edges[1:] - shift
        return np.where(hi <= 0, norm.cdf(hi) - norm.cdf(lo), norm.sf(lo) - norm.sf(hi))
    P, Q = bins(0.0), bins(mu)
    mech = Mechanism.from_K(np.stack([P, Q]))
    assert float(level("gdp", mech)) <= mu * (1 + 1e-9)
    for eps in dp_relations.EPSILONS:
        bound = float(_bound(_id("D10", epsilon=eps), [mu])[0])
        got = float(level("delta", mech, epsilon=eps))
        assert bound * 0.99 <= got <= bound


@pytest.mark.parametrize("rid", ["D6.a2.d1e-5", "D8.d1e-5", "D10.e1", "D11", "D13.d1e-5",
                                 "D16"])
def test_the_bisection_retraction_lands_in_the_premise(x64, rid):
    """Premises without a closed-form retraction (Rényi, zCDP, GDP, KL, ε(δ), maximal leakage)
    are held by bisection on the mixing weight: in float64 the built mechanism's premise is at
    most x, and lands within 1e-4 of it from an infeasible start."""
    relation = registry.get(rid)
    setup = search.setup_for(relation)
    rng = np.random.default_rng(sum(map(ord, rid)))
    build = jax.jit(lambda params, x: search.build(params, x, jnp.float64(0.0), relation, setup))
    on_boundary = 0
    for x in (0.02, 0.05, 0.7, 2.5):
        params = search.Params(*(jnp.asarray(3.0 * rng.standard_normal(shape))
                                 for shape in ((3, 4), (3,), (3,), (4,))))
        level_of = registry.notion(relation.premise)
        premise = float(level_of.evaluate(build(params, jnp.float64(x)), relation.options))
        assert premise <= x * (1 + 1e-9) + 1e-12, (rid, x, premise)
        on_boundary += premise >= x * (1 - 1e-4)
    assert on_boundary  # where the start was infeasible, it lands on the premise level


SMALL = dataclasses.replace(audit.BUDGETS["quick"], name="small-test", sweep_count=4096,
                            restarts=8, steps=200)


def test_small_audit_verdicts(tmp_path):
    """D1 certified tight; D14 certified, least slack n/(n−1) as x → 0 at the largest n the
    audit drew (the sweep's n = 4: 4/3; the search's n = 3 alone read 3/2); no violation."""
    summary = report.run_audit(SMALL, ["D1", "D14"], tmp_path, progress=False)
    v = {r["relation"]: r for r in summary["relations"]}
    assert v["D1"]["verdict"] == "tight" and v["D1"]["kind"] == "certified"
    assert v["D14"]["kind"] == "certified" and v["D14"]["verdict"].startswith("loose")
    assert SMALL.sweep_n == 4 and SMALL.search_n == 3
    assert v["D14"]["certified_slack"] == pytest.approx(4 / 3, rel=1e-5)
    assert all(r["violation_count"] == 0 for r in v.values())


def test_a_file_without_the_instances_values_is_checked_at_the_instances_own():
    """`jaxpriv check D6.a4.d1e-2 FILE` on a plain mechanism file (no 'order', no 'delta'): the
    check is at α = 4, δ = 1e-2 — the file's missing values once overrode them with the notions'
    defaults (α = 2, δ = 1e-5), so the numbers printed were D6.a2.d1e-5's."""
    from pathlib import Path

    from jaxpriv import level
    from jaxpriv.engines import certify, io

    relation = registry.get("D6.a4.d1e-2")
    mech, extras = io.load_mechanism(Path(__file__).resolve().parents[1] / "examples" /
                                     "krr4.json")
    parameter, options = certify.witness_check_arguments(extras, relation)
    assert options["order"] is None and options["delta"] is None
    result = relation.check(mech, parameter=parameter, **options)
    assert float(result.premise) == pytest.approx(float(level("renyi", mech, order=4.0)),
                                                  rel=1e-12)
    assert float(result.conclusion) == pytest.approx(
        float(level("eps_at_delta", mech, delta=1e-2)), rel=1e-12)
    assert float(result.premise) != pytest.approx(float(level("renyi", mech, order=2.0)))


def _id(base, **values):
    """The id of claim ``base`` at ``values`` (``D6.a4.d1e-5``)."""
    return registry.CLAIMS[base].instance_id(values)
