"""Inputs at the edges of what floats hold, each found by a hunt through the command line for
tracebacks, NaN and wrong numbers (2026-11-30): every one is a value or one clear InputError."""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest

from jaxpriv import InputError
from jaxpriv.catalog import statistical as statistical_claims
from jaxpriv.core import gaussian, notions, statistical
from jaxpriv.engines import io
from jaxpriv.registry import claims


def test_a_number_beyond_float64_in_a_file_is_one_line(tmp_path):
    path = tmp_path / "big.json"
    path.write_text('{"K": [[' + "9" * 400 + ', 0.5], [0.5, 0.5]]}')
    with pytest.raises(InputError, match="too large for a float64"):
        io.load_mechanism(path)
    path.write_text('{"K": [[0.5, 0.5], [0.5, 0.5]], "prior": [' + "9" * 400 + ', 1]}')
    with pytest.raises(InputError, match="too large for a float64"):
        io.load_mechanism(path)


def test_json_nested_too_deeply_is_one_line(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"K": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(InputError, match="nested too deeply"):
        io.read_json(path)


def test_records_of_a_huge_r_are_refused_without_computing_k_to_the_r():
    with pytest.raises(InputError, match="more than 2 databases"):
        io.mechanism_from_dict({"K": [[0.5, 0.5], [0.5, 0.5]],
                                "records": {"k": 2, "r": 1_000_000_000}})


def test_r14_at_a_huge_epsilon_is_a_value():
    """2·exp(−ε²Tκ₁/3) at ε = 1e200 is 0 (−∞ in logs): no OverflowError from ε ** 2."""
    result = statistical_claims.r14_check(1000, 0.5, 1e200)
    assert result is not None


def test_r15_bound_keeps_its_digits_at_small_epsilon(x64):
    """log((1+ε)/(1−ε)) rounded away the bound at small ε (29% at 1e-17): against mpmath at
    enough digits for 1 + ε to be exact."""
    for eps in (1e-300, 1e-17, 1e-12, 1e-6, 0.5):
        with mpmath.workdps(700):
            e = mpmath.mpf(eps)
            exact = mpmath.sqrt((1 + e) * mpmath.log((1 + e) / (1 - e)) / 2
                                + (e + max(mpmath.log1p(e), -mpmath.log1p(-e))) / 2)
        assert float(statistical.r15_bound(jnp.float64(eps))) == pytest.approx(float(exact),
                                                                               rel=1e-13)


def test_gaussian_delta_at_a_huge_epsilon_is_zero(x64):
    """δ_μ(ε) → 0 as ε → ∞ (Dong, Roth, Su 2022, Cor. 2.13's curve): at ε = 1e308 it read NaN."""
    for dtype, eps in ((jnp.float64, 1e308), (jnp.float32, 3e38)):
        value = gaussian.gaussian_delta(jnp.asarray([0.001, 1.0, 1000.0], dtype), dtype(eps))
        assert not np.isnan(np.asarray(value)).any()
        assert (np.asarray(value) == 0.0).all()


def test_a_subnormal_delta_is_refused_in_one_line():
    """XLA reads a subnormal δ as 0 (log δ = −∞): D6 at δ = 1e-310 printed a bound of ∞."""
    with pytest.raises(InputError, match="subnormal"):
        claims.DELTA.value("D6", 1e-310)
    assert claims.DELTA.value("D6", 1e-300) == 1e-300


def test_a_negative_condition_parameter_or_pac_accuracy_is_one_line():
    """R3 at ε = −1 and R6 at a PAC accuracy α = −1 were taken (verdict "holds", exit 0)."""
    from jaxpriv import registry
    from jaxpriv.core import families

    mech = families.randomized_response(1.0)
    with pytest.raises(InputError, match=r"condition parameter \(eps_unif\) must lie in \[0, ∞\)"):
        registry.check(registry.get("R3"), mech, parameter=-1.0)
    assert registry.check(registry.get("R3"), mech, parameter=2.0) is not None
    valued = dataclasses.replace(mech, values=jnp.asarray([0.0, 1.0]))
    with pytest.raises(InputError, match="accuracy 'alpha' >= 0"):
        notions.failure_probabilities(valued, 0.5, -1.0)
    assert np.isfinite(np.asarray(notions.failure_probabilities(valued, 0.5, 0.25))).all()


def test_r14_takes_no_booleans():
    with pytest.raises(InputError, match="not true/false"):
        statistical_claims.r14_check(True, 0.5, 0.1)


def test_d5_bound_near_order_one_against_mpmath(x64):
    """Steinke 2024 Thm 4's bound as α → 1 (the cosh form's two terms meet: 1.25 for 0.9527 at
    α = 1 + 2e-16, ε = 1.5): within 1e-14 of 80-digit mpmath from α = 1 + 2e-16 to 1e3 and ε
    from 1e-8 to 700."""
    from jaxpriv.catalog.dp_literature import _d5_bound

    with mpmath.workdps(80):
        for alpha in (1 + 2.220446049250313e-16, 1 + 1e-12, 1 + 1e-6, 1.1, 1.4999, 1.5, 2.0, 1e3):
            for eps in (1e-8, 1e-3, 0.5, 1.5, 50.0, 700.0):
                a, e = mpmath.mpf(alpha), mpmath.mpf(eps)
                exact = mpmath.log((mpmath.exp(a * e) + mpmath.exp((1 - a) * e))
                                   / (1 + mpmath.exp(e))) / (a - 1)
                got = float(_d5_bound(jnp.float64(alpha))(jnp.float64(eps)))
                assert got == pytest.approx(float(exact), rel=1e-14), (alpha, eps)


def _abp_output_mp(K, prior):
    """The output law's ABP level from SPEC §2.3 in 60-digit mpmath: max over outputs w with
    p(w) > 0 of sqrt(JS(posterior(·|w) ‖ prior)) (the belief is the prior)."""
    mpmath.mp.dps = 60
    K = [[mpmath.mpf(x) for x in row] for row in K]
    prior = [mpmath.mpf(x) for x in prior]
    n, m = len(K), len(K[0])
    best = mpmath.mpf(0)
    for w in range(m):
        p_w = mpmath.fsum(prior[d] * K[d][w] for d in range(n))
        if p_w == 0:
            continue
        post = [prior[d] * K[d][w] / p_w for d in range(n)]
        mid = [(a + b) / 2 for a, b in zip(post, prior)]
        js = mpmath.fsum(a * mpmath.log(a / c) for a, c in zip(post, mid) if a > 0) / 2 + \
            mpmath.fsum(b * mpmath.log(b / c) for b, c in zip(prior, mid) if b > 0) / 2
        best = max(best, mpmath.sqrt(max(js, 0)))
    return float(best)


@pytest.mark.parametrize("tiny", [1e-300, 1e-310, 1e-320, 5e-324])
def test_a_subnormal_probability_counts_in_every_level(tiny, x64):
    """A probability below float64's smallest normal number (2.2e-308) is flushed to 0 by XLA's
    CPU arithmetic: with P = (½, ½, 1e-310), Q = (½, ½, 0), χ² read 0 beside KL = ∞ (χ² ≥
    e^KL − 1), and the output law's ABP level read 0 beside its own vector's 0.4645. Which
    entries are positive is now read from the logs: χ² = ∞, and the level is the vector's max
    and mpmath's."""
    K = [[0.5, 0.5, tiny], [0.5, 0.5, 0.0]]
    mech = io.mechanism_from_dict({"K": K})[0]
    pairs = notions.levels(mech)
    from jaxpriv.core import pair_notions
    assert float(pair_notions.chi2(mech)) == math.inf
    assert float(pair_notions.kl(mech)) == math.inf
    output = notions.abp(mech, "output")
    assert float(output.level) == float(jnp.max(output.vector))
    assert float(output.level) == pytest.approx(_abp_output_mp(K, [0.5, 0.5]), rel=1e-12)
    assert float(pairs["abp_output"]) == float(output.level)
    # with a prior that is not uniform (the vector's entries then differ)
    prior = [0.9, 0.1]
    mech = io.mechanism_from_dict({"K": K, "prior": prior})[0]
    output = notions.abp(mech, "output")
    assert float(output.level) == pytest.approx(_abp_output_mp(K, prior), rel=1e-12)


def test_chi2_from_logs_is_the_textbook_sum_on_ordinary_pairs(x64):
    """The log-read χ² against Σ (P − Q)²/Q in mpmath on random pairs, near-equal pairs and
    pairs with zeros (both branches of the term: L < 1 and L ≥ 1)."""
    from jaxpriv.core import pair_notions
    rng = np.random.default_rng(7)
    P = rng.dirichlet(np.full(5, 0.3), size=200)
    Q = rng.dirichlet(np.full(5, 0.3), size=200)
    Q[:50] = P[:50] * (1 + 1e-6 * rng.standard_normal((50, 5)))
    Q[:50] /= Q[:50].sum(-1, keepdims=True)
    P[60:70, 0] = 0.0
    P[60:70] /= P[60:70].sum(-1, keepdims=True)
    with np.errstate(divide="ignore"):
        log_P, log_Q = np.log(P), np.log(Q)
    got = np.asarray(pair_notions.chi2_pair(jnp.asarray(log_P), jnp.asarray(log_Q)))
    mpmath.mp.dps = 50
    for i in range(len(P)):  # of the pair the logs are (what the level is given)
        want = mpmath.fsum((mpmath.exp(lp) - mpmath.exp(lq)) ** 2 / mpmath.exp(lq)
                           for lp, lq in zip(log_P[i], log_Q[i]))
        assert got[i] == pytest.approx(float(want), rel=1e-12, abs=1e-300), i
