"""Closed-form values, each with its derivation or citation beside it."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpriv import Mechanism
from jaxpriv.core import divergences, families, notions


def levels(mech):
    """Every core level, compiled (op by op each shape dispatched hundreds of small programs)."""
    return jax.jit(notions.levels)(mech)


@pytest.mark.parametrize("eps", [0.0, 0.1, 1.0, 3.0, 10.0])
def test_binary_rr_levels(x64, eps):
    # Uniform prior: p(w) = 1/2. The high ratio is 2e^ε/(1+e^ε), the low one 2/(1+e^ε); the low
    # one dominates since (1+e^ε)^2 >= 4e^ε, so ξ = log((1+e^ε)/2).
    mech = families.randomized_response(eps)
    assert float(notions.ldp(mech)) == pytest.approx(eps, abs=1e-12)
    assert float(notions.mbp(mech)) == pytest.approx(math.log((1 + math.exp(eps)) / 2), rel=1e-12,
                                                     abs=1e-15)


@pytest.mark.parametrize("k", [2, 3, 5, 16])
@pytest.mark.parametrize("eps", [0.2, 1.0, 4.0])
def test_k_ary_rr_levels(x64, k, eps):
    # K = e^ε/(e^ε+k−1) on the diagonal, 1/(e^ε+k−1) off it; uniform prior gives p(w) = 1/k.
    # log(K/p) is ε − B on the diagonal and −B off it with B = log((e^ε+k−1)/k), so
    # ξ = max(ε − B, B). For k = 2 this is B (test above); for k ≫ e^ε it is ε − B.
    mech = families.k_randomized_response(k, eps)
    B = math.log((math.exp(eps) + k - 1) / k)
    assert float(notions.ldp(mech)) == pytest.approx(eps, rel=1e-12)
    assert float(notions.mbp(mech)) == pytest.approx(max(eps - B, B), rel=1e-12)


def test_k_ary_rr_mbp_switches_branch(x64):
    # With k = 16, ε = 1: B = log((e+15)/16) ≈ 0.1028 < ε − B, so the diagonal dominates.
    mech = families.k_randomized_response(16, 1.0)
    B = math.log((math.e + 15) / 16)
    assert float(notions.mbp(mech)) == pytest.approx(1.0 - B, rel=1e-12)


def test_binary_rr_abp_and_mi(x64):
    # Binary RR, uniform prior, truth w.p. a = e^ε/(1+e^ε). Record law with d* = 0:
    # F^A(0) = a·a + (1−a)(1−a) (posterior of 0 after w=0 is a, after w=1 is 1−a).
    eps = 1.3
    a = math.exp(eps) / (1 + math.exp(eps))
    f = a * a + (1 - a) ** 2
    P, Q = [f, 1 - f], [0.5, 0.5]
    M = [(x + y) / 2 for x, y in zip(P, Q)]
    js = 0.5 * sum(x * math.log(x / z) for x, z in zip(P, M)) + \
        0.5 * sum(y * math.log(y / z) for y, z in zip(Q, M))
    res = notions.abp(families.randomized_response(eps), "record")
    np.testing.assert_allclose(np.asarray(res.vector), [math.sqrt(js)] * 2, rtol=1e-12)
    # Output law: F^A = (a, 1−a).
    P = [a, 1 - a]
    M = [(x + 0.5) / 2 for x in P]
    js_out = 0.5 * sum(x * math.log(x / z) for x, z in zip(P, M)) + \
        0.5 * sum(0.5 * math.log(0.5 / z) for z in M)
    assert float(notions.abp(families.randomized_response(eps), "output").level) == \
        pytest.approx(math.sqrt(js_out), rel=1e-12)
    # I(D;W) = ln 2 − H(a) for a symmetric binary channel with uniform input.
    h = -a * math.log(a) - (1 - a) * math.log(1 - a)
    assert float(notions.mutual_information(families.randomized_response(eps))) == \
        pytest.approx(math.log(2) - h, rel=1e-12)


def test_marginal_law_trap(x64):
    # SPEC §2.3: q = p gives F^A = π, so ε_pa = 0 when b = π, for any mechanism.
    mech = families.k_randomized_response(4, 2.0, prior=np.array([0.1, 0.2, 0.3, 0.4]))
    p = np.asarray(jnp.exp(notions.log_marginal_kernel(mech.log_K, mech.log_prior)))
    assert float(notions.abp(mech, p).level) == pytest.approx(0.0, abs=1e-15)


def test_divergences_hand_computed(x64):
    P = jnp.array([0.5, 0.5])
    Q = jnp.array([0.25, 0.75])
    # KL = ½ln2 + ½ln(2/3) = ½ ln(4/3)
    assert float(divergences.kl(P, Q)) == pytest.approx(0.5 * math.log(4 / 3), rel=1e-14)
    # M = (3/8, 5/8): JS = ½[½ln(4/3) + ½ln(4/5)] + ½[¼ln(2/3) + ¾ln(6/5)]
    js = 0.5 * (0.5 * math.log(4 / 3) + 0.5 * math.log(4 / 5)) + \
        0.5 * (0.25 * math.log(2 / 3) + 0.75 * math.log(6 / 5))
    assert float(divergences.js(P, Q)) == pytest.approx(js, rel=1e-14)
    assert float(divergences.tv(P, Q)) == pytest.approx(0.25, rel=1e-15)
    # Disjoint supports: JS = ln 2, KL = ∞, TV = 1.
    A, B = jnp.array([1.0, 0.0]), jnp.array([0.0, 1.0])
    assert float(divergences.js(A, B)) == pytest.approx(math.log(2), rel=1e-15)
    assert math.isinf(float(divergences.kl(A, B)))
    assert float(divergences.tv(A, B)) == 1.0
    # KL(P‖Q) with P = 0 where Q > 0 is finite: KL((1,0)‖(½,½)) = ln 2.
    assert float(divergences.kl(A, jnp.array([0.5, 0.5]))) == pytest.approx(math.log(2), rel=1e-15)


def test_truncated_geometric_is_eps_dp_for_adjacent_counts(x64):
    # Ghosh et al.: neighbouring counts' rows differ by a factor exactly e^ε on each column.
    for eps in (0.3, 1.0, 2.5):
        mech = families.truncated_geometric(6, eps)
        np.testing.assert_allclose(np.asarray(mech.K).sum(axis=1), 1.0, rtol=1e-14)
        assert float(notions.ldp(mech, notions.adjacent(6))) == pytest.approx(eps, rel=1e-12)
        assert float(notions.ldp(mech)) == pytest.approx(5 * eps, rel=1e-12)


@pytest.mark.parametrize("family", ["symmetric", "optimized"])
def test_unary_encoding_ldp(x64, family):
    # ε_LDP = log(p(1−q)/(q(1−p))): the worst output flips the two differing bits' likelihoods.
    eps = 1.7
    build = {"symmetric": families.symmetric_unary_encoding,
             "optimized": families.optimized_unary_encoding}[family]
    mech = build(4, eps)
    assert mech.m == 16
    assert float(notions.ldp(mech)) == pytest.approx(eps, rel=1e-12)


def test_exponential_mechanism_respects_eps(x64):
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(5, 7))
    for eps in (0.5, 2.0):
        assert float(notions.ldp(families.exponential_mechanism(scores, eps))) <= eps + 1e-12


def test_discretized_laplace_ldp(x64):
    # Secrets at 0 and 1, scale b: each column's log ratio is (|y−1| − |y|)/b ∈ [−1/b, 1/b],
    # reached for y outside (0, 1).
    mech = families.discretized_laplace([0.0, 1.0], np.linspace(-3, 4, 29), 0.5)
    assert float(notions.ldp(mech)) == pytest.approx(2.0, rel=1e-12)
    assert mech.values is not None and mech.values.shape == (29,)


def test_discretized_gaussian_normalized(x64):
    mech = families.discretized_gaussian(np.arange(4.0), np.linspace(-2, 5, 15), 1.2)
    np.testing.assert_allclose(np.asarray(mech.K).sum(axis=1), 1.0, rtol=1e-14)


def test_identity_and_constant(x64):
    ident = levels(families.identity(3))
    assert math.isinf(float(ident["ldp"])) and math.isinf(float(ident["mbp"]))
    assert float(ident["mi"]) == pytest.approx(math.log(3), rel=1e-14)
    const = levels(families.constant(3, 5))
    assert float(const["ldp"]) == 0.0  # a difference of equal logs: exactly 0
    # the others add XLA's and NumPy's logs (log π + log K − log p): 0 up to an ulp of either,
    # whose last bit depends on the CPU's vector width
    for key in ("mbp", "abp", "abp_output", "mi"):
        assert float(const[key]) == pytest.approx(0.0, abs=1e-12), key


def test_batched_family_parameters(x64):
    eps = jnp.linspace(0.0, 5.0, 11)
    mech = families.randomized_response(eps)
    assert mech.batch_shape == (11,)
    np.testing.assert_allclose(np.asarray(notions.ldp(mech)), np.asarray(eps), atol=1e-12)
    expected = np.log((1 + np.exp(np.asarray(eps))) / 2)
    np.testing.assert_allclose(np.asarray(notions.mbp(mech)), expected, rtol=1e-12, atol=1e-15)


def test_mechanism_from_log_K_matches_from_K(x64):
    K = np.array([[0.2, 0.8], [0.6, 0.4]])
    a = Mechanism.from_K(K, prior=[0.3, 0.7])
    b = Mechanism.from_log_K(np.log(K), np.log([0.3, 0.7]))
    for key, va in levels(a).items():
        np.testing.assert_allclose(np.asarray(va), np.asarray(levels(b)[key]), rtol=1e-14)


def test_tv_of_disjoint_supports_is_exactly_one(x64):
    # Found by hypothesis: the sum of |P−Q| rounded to 1 + 2^-52 for these disjoint laws.
    P = jnp.array([0.0, 0.0, 0.0, 0.0, 0.73105858, 0.26894142])
    Q = jnp.array([0.47628706, 0.02371294, 0.02371294, 0.47628706, 0.0, 0.0])
    assert float(divergences.tv(P / P.sum(), Q / Q.sum())) <= 1.0
