"""R5's certified envelope (docs/certified.md#r5, jaxpriv.core.abp_envelope) against closed forms in
mpmath, brute force over dense grids of 2×2 mechanisms, random mechanisms that must never exceed
it, and the explicit mechanisms that attain it (re-evaluated by the independent oracle)."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest

from jaxpriv.catalog import seed_papers as relations
from jaxpriv.core import abp_envelope, notions
from jaxpriv.engines import certify, search
from jaxpriv.core.errors import InputError
from jaxpriv.core.mechanisms import Mechanism
from tests import reference as ref

LAWS = abp_envelope.LAWS


def g_mp(t):
    """JS's generator ``g(t) = ½[t log(2t/(1+t)) + log(2/(1+t))]`` at 50 digits."""
    t = mp.mpf(t)
    return (t * mp.log(2 * t / (1 + t)) + mp.log(2 / (1 + t))) / 2


def free_closed_form(xi, law):
    """Theorem 1 at ε = 0 (docs/certified.md#r5-free), in mpmath."""
    a, A = mp.e ** (-mp.mpf(xi)), mp.e ** mp.mpf(xi)
    low, high = (a * (2 - a), A + a - 1) if law == "record" else (a, A)
    return mp.sqrt((g_mp(high) + A * g_mp(low)) / (1 + A))


@pytest.mark.parametrize("law", LAWS)
def test_free_prior_closed_form_matches_mpmath(law):
    xi = np.array([1e-6, 1e-3, 0.05, 0.3, 1.0, 2.5, 6.0])
    for n in (2, 3, 7):
        found = abp_envelope.envelope(xi, 0.0, n=n, law=law, prior="free")
        assert found.exact.all()  # Theorem 1 at ε = 0: one closed form is both ends
        np.testing.assert_array_equal(found.attained, found.upper)  # equal by construction
        expected = np.array([float(free_closed_form(x, law)) for x in xi])
        np.testing.assert_allclose(found.attained, expected, rtol=1e-9)


def test_free_prior_with_belief_slack_matches_mpmath():
    """Theorem 1: θφ(U, e^{−ε}) + ηφ(L, e^ε) + (1−θ−η)φ(L, e^{−ε}), θ = 1/(1+e^ξ), η = 1/(1+e^ε)."""
    def phi(s, v):
        return v * g_mp(s / v)
    for xi, eps in [(0.0, 0.4), (0.2, 0.1), (1.0, 0.5), (2.0, 1.5), (1e-4, 1e-3)]:
        a, A = mp.e ** (-mp.mpf(xi)), mp.e ** mp.mpf(xi)
        B = mp.e ** mp.mpf(eps)
        theta, eta = 1 / (1 + A), 1 / (1 + B)
        for law, (low, high) in (("record", (a * (2 - a), A + a - 1)), ("output", (a, A))):
            value = mp.sqrt(theta * phi(high, 1 / B) + eta * phi(low, B)
                            + (1 - theta - eta) * phi(low, 1 / B))
            found = abp_envelope.envelope(xi, eps, n=3, law=law, prior="free")
            assert float(found.attained) == pytest.approx(float(value), rel=1e-9)
            assert found.exact and found.attained == found.upper  # one value, by construction


def _levels(K, prior, belief=None):
    """float64 MBP, ε_bel and ABP (record, output) of a batch."""
    with jax.enable_x64(True):
        mech = Mechanism.from_K(jnp.asarray(K), jnp.asarray(prior),
                                None if belief is None else jnp.asarray(belief))
        return (np.asarray(notions.mbp(mech)), np.asarray(notions.eps_bel(mech)),
                {law: np.asarray(notions.abp(mech, law).level) for law in LAWS})


def _two_by_two(steps, prior_steps):
    """A dense grid of 2×2 mechanisms ``[[p, 1−p], [q, 1−q]]`` and priors ``(π, 1−π)``."""
    p = np.linspace(0.0, 1.0, steps)
    pi = np.linspace(0.0, 1.0, prior_steps + 2)[1:-1]
    P, Q, PI = np.meshgrid(p, p, pi, indexing="ij")
    K = np.stack([np.stack([P, 1 - P], -1), np.stack([Q, 1 - Q], -1)], -2).reshape(-1, 2, 2)
    return K, np.stack([PI, 1 - PI], -1).reshape(-1, 2)


def _ratio_to_envelope(abp, mbp, prior):
    """Each mechanism's ABP over the envelope at its own MBP level (finite, positive levels)."""
    keep = np.isfinite(mbp) & (mbp > 1e-3) & (mbp < 6)
    bound = abp_envelope.envelope(mbp[keep], 0.0, n=2, law=prior[0], prior=prior[1]).upper
    return abp[keep] / bound


@pytest.fixture(scope="module")
def free_grid():
    """Levels of a ~620k-point grid of 2×2 mechanisms and priors (computed once)."""
    K, prior = _two_by_two(101, 61)
    return _levels(K, prior)


@pytest.fixture(scope="module")
def uniform_grid():
    K, _ = _two_by_two(801, 1)
    return _levels(K, np.full((len(K), 2), 0.5))


@pytest.mark.parametrize("law", LAWS)
def test_dense_two_by_two_grid_reaches_but_never_exceeds_the_free_envelope(law, free_grid):
    """n = 2, ε = 0 is exact (Theorem 1 needs two atoms): over the grid of mechanisms and
    priors, ABP / E(own MBP) never exceeds 1 and comes within 0.5% of it."""
    mbp, _, abp = free_grid
    ratio = _ratio_to_envelope(abp[law], mbp, (law, "free"))
    assert ratio.max() <= 1 + 1e-9
    assert ratio.max() >= 1 - 5e-3


@pytest.mark.parametrize("law", LAWS)
def test_dense_two_by_two_grid_under_the_uniform_prior(law, uniform_grid):
    mbp, _, abp = uniform_grid
    ratio = _ratio_to_envelope(abp[law], mbp, (law, "uniform"))
    assert ratio.max() <= 1 + 1e-9
    assert ratio.max() >= 1 - 1e-3


@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (5, 4)])
def test_random_mechanisms_never_exceed_the_envelope(shape):
    """Random mechanisms, priors and beliefs (some near the extremes): ABP at its own (MBP,
    ε_bel) is below the free envelope's upper end for both laws, and with the prior uniform
    below the uniform one."""
    n, m = shape
    rng = np.random.default_rng(n * 10 + m)
    count = 2500
    sharp = rng.choice([0.2, 1.0, 5.0], size=(count, 1, 1))
    K = rng.dirichlet(np.ones(m), size=(count, n)) ** sharp
    K /= K.sum(-1, keepdims=True)
    prior = rng.dirichlet(np.ones(n), size=count)
    belief = prior * np.exp(rng.uniform(-1, 1, size=(count, n)) * rng.uniform(0, 1, (count, 1)))
    belief /= belief.sum(-1, keepdims=True)
    mbp, eps_bel, abp = _levels(K, prior, belief)
    keep = np.isfinite(mbp) & (mbp < 8)
    for law in LAWS:
        bound = abp_envelope.envelope(mbp[keep], eps_bel[keep], n=n, law=law).upper
        assert np.all(abp[law][keep] <= bound * (1 + 1e-9) + 1e-12)
    uniform = np.full((count, n), 1.0 / n)
    mbp, _, abp = _levels(K, uniform)
    keep = np.isfinite(mbp) & (mbp < 8)
    for law in LAWS:
        bound = abp_envelope.envelope(mbp[keep], 0.0, n=n, law=law, prior="uniform").upper
        assert np.all(abp[law][keep] <= bound * (1 + 1e-9) + 1e-12)


def test_the_record_law_product_means_lie_in_mccormicks_interval():
    """Lemma 1: ``s(d) = F^A(d)/π(d)`` lies in ``[a(2−a), e^ξ + e^{−ξ} − 1]`` for every d."""
    rng = np.random.default_rng(5)
    for _ in range(300):
        n, m = rng.integers(2, 6, size=2)
        K = rng.dirichlet(np.ones(m) * 0.7, size=n)
        prior = rng.dirichlet(np.ones(n))
        p = prior @ K
        xi = np.max(np.abs(np.log(K / p)))
        a = np.exp(-xi)
        for d_star in range(n):
            s = (K * K[d_star] / p).sum(axis=1)  # F^A(d)/π(d) = Σ_w K[d*,w]K[d,w]/p(w)
            assert np.all(s >= a * (2 - a) - 1e-12) and np.all(s <= 1 / a + a - 1 + 1e-12)


CASES = [(law, prior, n, m, xi, eps)
         for law in LAWS for prior in ("free", "uniform")
         for n, m in ((2, 2), (3, 3), (4, 2), (8, 3))
         for xi, eps in ((0.0, 0.3), (1e-7, 1e-6), (0.05, 0.0), (0.4, 0.2), (1.0, 0.0),
                         (2.5, 1.0), (40.0, 0.5))]


@pytest.mark.parametrize("law,prior,n,m,xi,eps", CASES)
def test_witnesses_attain_the_envelope_by_the_oracle(law, prior, n, m, xi, eps):
    """Each value is attained: the witness mechanism's MBP ≤ ξ, ε_bel ≤ ε and its ABP, by the
    50-digit oracle, equals the envelope's lower end (and, where exact, the envelope)."""
    found = abp_envelope.envelope(xi, eps, n=n, law=law, prior=prior)
    w = abp_envelope.witness(xi, eps, n=n, m=m, law=law, prior=prior)
    assert w.K.shape == (n, m) and np.allclose(w.K.sum(axis=1), 1.0) and (w.K >= 0).all()
    if prior == "uniform":
        np.testing.assert_allclose(w.prior, 1.0 / n)
    K, pi, b = ref._m(w.K), ref._m(w.prior), ref._m(w.belief)
    assert ref.mbp(K, pi) <= xi * (1 + 1e-9) + 1e-12
    assert ref.eps_bel(b, pi) <= eps * (1 + 1e-9) + 1e-12
    oracle = ref.abp_record(K, pi, b) if law == "record" else ref.abp_output(K, pi, b)
    value = float(max(oracle))
    assert value == pytest.approx(float(found.attained), rel=1e-9, abs=1e-15)
    assert found.attained <= found.upper
    bracket_case = prior == "free" and n == 2 and eps > 0 and xi > 0
    # exact wherever proved (Theorem 1) or the best relaxation vertex is reached (Theorem 3);
    # then the upper end is the attained value itself, not a second computation of it, whose
    # last bit would depend on the CPU's vector width (NumPy dispatches log/atanh by ISA)
    assert bool(found.exact) == (not bracket_case)
    if found.exact:
        assert found.attained == found.upper


def test_uniform_record_relaxation_is_reached_everywhere_tested():
    """Theorem 3's two ends agree: the relaxation's best vertex has s(d*) = S."""
    xi, eps = np.meshgrid([0.01, 0.1, 0.4, 0.9, 1.6, 3.0, 7.0], [0.0, 0.05, 0.5, 2.0])
    for n in range(2, 13):
        for law in LAWS:
            found = abp_envelope.envelope(xi, eps, n=n, law=law, prior="uniform")
            assert found.exact.all(), (n, law)


def test_uniform_record_law_against_vertex_enumeration_of_two_output_mechanisms():
    """An independent brute force for n = 3 (uniform prior, ε = 0): every mechanism whose
    outputs' posterior ratio vectors are vertices of {r ∈ [a, A]^n : Σ r/n = 1}, with ≤ n
    outputs (basic solutions of Σ p(w) r_w = 1), evaluated by the library's ABP."""
    n = 3
    for xi in (0.25, 0.5, 1.0, 2.0):
        a, A = np.exp(-xi), np.exp(xi)
        vertices = []
        for free in range(n):
            for mask in itertools.product((a, A), repeat=n - 1):
                r = np.insert(np.array(mask), free, 0.0)
                r[free] = n - r.sum()
                if a - 1e-12 <= r[free] <= A + 1e-12:
                    vertices.append(r)
        best = 0.0
        for chosen in itertools.combinations(vertices, n):
            R = np.array(chosen).T  # (n secrets, n outputs)
            try:
                p = np.linalg.solve(R, np.ones(n))
            except np.linalg.LinAlgError:
                continue
            if (p < -1e-12).any():
                continue
            K = R * np.clip(p, 0, None)
            _, _, abp = _levels(K[None], np.full((1, n), 1.0 / n))
            best = max(best, float(abp["record"][0]))
        found = abp_envelope.envelope(xi, 0.0, n=n, law="record", prior="uniform")
        assert best <= found.upper * (1 + 1e-9)
        assert best == pytest.approx(float(found.attained), rel=1e-9)


def test_terms_are_the_library_js_terms():
    """The certificate's NumPy φ is the same stable term the kernels use (float64)."""
    from jaxpriv.core import divergences
    rng = np.random.default_rng(0)
    s, v = rng.uniform(-0.99, 5, 1000), rng.uniform(-0.99, 5, 1000)
    s[:10] = v[:10] + 1e-9  # near-equal rows
    with jax.enable_x64(True):
        expected = np.asarray(divergences.js_terms(jnp.asarray(2 + s + v), jnp.asarray(s - v)))
    np.testing.assert_allclose(abp_envelope._terms(s, v), expected, rtol=1e-12, atol=1e-300)


def test_large_levels_keep_relative_accuracy():
    """At ξ = 20 the terms are near |t| = 1, where 2t·atanh(t) + log1p(−t²) cancels; the
    envelope still agrees with the 50-digit closed form."""
    for xi in (15.0, 20.0, 35.0):
        for law in LAWS:
            found = abp_envelope.envelope(xi, 0.0, n=3, law=law, prior="free")
            assert float(found.attained) == pytest.approx(float(free_closed_form(xi, law)),
                                                          rel=1e-12)


def test_small_levels_keep_relative_accuracy():
    """Offsets via expm1: at ξ = 1e-8 the output-law envelope is ξ/(2√2)·(1 + O(ξ))."""
    found = abp_envelope.envelope(1e-8, 0.0, n=3, law="output", prior="free")
    assert float(found.attained) == pytest.approx(1e-8 / (2 * np.sqrt(2)), rel=1e-7)
    assert float(abp_envelope.envelope(0.0, 0.0, n=3).attained) == 0.0


def test_bad_arguments_are_one_clear_error():
    with pytest.raises(InputError, match="law"):
        abp_envelope.envelope(1.0, law="explicit", n=3)
    with pytest.raises(InputError, match="prior"):
        abp_envelope.envelope(1.0, prior="close", n=3)
    with pytest.raises(InputError, match="n must"):
        abp_envelope.envelope(1.0, n=1)
    with pytest.raises(InputError, match="finite"):
        abp_envelope.envelope(np.nan, n=3)
    with pytest.raises(InputError, match="m must"):
        abp_envelope.witness(1.0, n=3, m=1)


def test_r5_certificate_follows_the_law_and_the_prior_setting():
    x = np.array([0.3, 1.0])
    record = certify.envelope(relations.R5, x, 0.5, n=3)
    output = certify.envelope(relations.R5, x, 0.5, n=3, options={"law": "output"})
    uniform = certify.envelope(relations.R5, x, 0.0, n=4, prior="uniform")
    np.testing.assert_allclose(record.conclusion, abp_envelope.envelope(x, 0.5, n=3).attained)
    assert np.all(output.conclusion > record.conclusion) and np.all(record.exact)
    np.testing.assert_allclose(uniform.conclusion, abp_envelope.envelope(
        x, 0.0, n=4, prior="uniform").attained)
    bound = np.asarray(relations.R5.bound(jnp.asarray(x), jnp.asarray(0.5)))
    np.testing.assert_allclose(record.min_slack, bound / record.conclusion)
    # two secrets, prior free, ε > 0: a bracket, least slack between its ends
    bracket = certify.envelope(relations.R5, x, 0.5, n=2)
    assert np.all(bracket.upper > bracket.conclusion) and not np.any(bracket.exact)
    assert np.all(bracket.min_slack_lower < bracket.min_slack)
    # an explicit observation law has no certificate
    assert certify.envelope(relations.R5, x, 0.5, n=3, options={"law": [0.5, 0.5]}) is None


def test_a_certificate_taking_any_keyword_gets_the_prior_and_options(scratch_relation):
    seen = {}

    def certificate(x, eps, *, n, r=None, **context):
        seen.update(context)
        return x, None

    relation = scratch_relation(certificate)
    assert certify.envelope(relation, 1.0, 0.2, n=3, prior="uniform",
                            options={"law": "output"}) is not None
    assert seen == {"prior": "uniform", "law": "output"}


@pytest.fixture
def scratch_relation():
    """A copy of R5 registered under a scratch id with a given certificate."""
    import dataclasses

    from jaxpriv import registry
    made = []

    def make(certificate):
        relation = dataclasses.replace(relations.R5, id="SCRATCH5", certificate=certificate)
        registry.register(relation)
        made.append(relation.id)
        return relation
    yield make
    for rid in made:
        registry.unregister(rid)


def test_other_certificates_follow_the_prior_setting():
    """A uniform prior makes R3's ε-close-to-uniform certificate R1's; R6's attaining prior is
    not uniform, so it has none there."""
    r3 = certify.envelope(relations.R3, 1.0, 0.7, n=4, prior="uniform")
    r1 = certify.envelope(relations.R1, 1.0, 0.0, n=4)
    assert float(r3.conclusion) == pytest.approx(float(r1.conclusion), rel=1e-12)
    assert certify.envelope(relations.R6, 1.0, 0.5, n=4, prior="uniform") is None


def test_search_prior_setting_is_validated():
    config = search.make_config("R5", 3, 3, "0.5,1", prior="uniform")
    assert config.setup.prior == "uniform" and config.prior == "uniform"
    assert search.make_config("R5", 3, 3, "0.5,1", prior="free").prior == ""
    with pytest.raises(InputError, match="--prior 'free'"):
        search.make_config("R3", 3, 3, "0.5,1", prior="free")


def test_search_reaches_the_uniform_record_envelope():
    """The search under --prior uniform reaches Theorem 3's envelope (n = m = 3, two points)."""
    config = search.make_config("R5", 3, 3, "0.5,1.5", law="record", prior="uniform",
                                restarts=32, steps=800)
    result = search.run(config, None, progress=False)
    gaps = [row["gap"] for row in result.rows]
    assert max(gaps) < 1e-3 and min(gaps) > -1e-9
