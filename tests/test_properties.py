"""Properties that must hold for every mechanism and prior (hypothesis, float64)."""

import math

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jaxpriv import Mechanism
from jaxpriv.core import divergences, notions

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
TOL = 1e-9
levels = jax.jit(notions.levels)


@st.composite
def simplex(draw, k, allow_zeros=True):
    """A point of the k-simplex with a wide spread of magnitudes (and some exact zeros)."""
    logs = draw(st.lists(st.floats(-25.0, 0.0), min_size=k, max_size=k))
    w = np.exp(np.array(logs))
    if allow_zeros:
        zeros = draw(st.lists(st.booleans(), min_size=k, max_size=k))
        keep = draw(st.integers(0, k - 1))
        w = np.where(np.array(zeros) & (np.arange(k) != keep), 0.0, w)
    return w / w.sum()


@st.composite
def mechanisms(draw, full_support_prior=True, zeros=True):
    n = draw(st.sampled_from([2, 3, 5]))
    m = draw(st.sampled_from([2, 4]))
    K = np.stack([draw(simplex(m, zeros)) for _ in range(n)])
    prior = draw(simplex(n, allow_zeros=not full_support_prior))
    belief = draw(simplex(n, allow_zeros=not full_support_prior))
    return K, prior, belief


def _levels(K, prior, belief=None):
    with jax.enable_x64(True):
        return {k: np.asarray(v) for k, v in levels(Mechanism.from_K(K, prior, belief)).items()}


@SETTINGS
@given(mechanisms(full_support_prior=False))
def test_levels_are_never_nan_and_in_range(case):
    lv = _levels(*case)
    for key, value in lv.items():
        assert not np.isnan(value).any(), key
        assert (value >= 0).all(), key
    assert lv["abp"] <= math.sqrt(math.log(2)) + TOL
    assert lv["abp_output"] <= math.sqrt(math.log(2)) + TOL
    assert lv["abp_mean"] <= lv["abp"] + TOL
    n, m = case[0].shape
    assert lv["mi"] <= min(math.log(n), math.log(m)) + TOL


@SETTINGS
@given(mechanisms(full_support_prior=True))
def test_mbp_le_ldp_le_twice_mbp_for_any_prior(case):
    # MBP ≤ LDP: p(w) is a π-mixture of the column, so K[d,w]/p(w) lies within the column's
    # ratio range. LDP ≤ 2·MBP: K[d,w]/K[d',w] = (K[d,w]/p(w))·(p(w)/K[d',w]) ≤ e^ξ·e^ξ.
    lv = _levels(*case)
    assert lv["mbp"] <= lv["ldp"] * (1 + TOL) + TOL
    assert lv["ldp"] <= 2 * lv["mbp"] * (1 + TOL) + TOL


@SETTINGS
@given(mechanisms(full_support_prior=False))
def test_mbp_le_ldp_even_with_zero_prior_mass(case):
    lv = _levels(*case)
    assert lv["mbp"] <= lv["ldp"] * (1 + TOL) + TOL


@SETTINGS
@given(mechanisms(full_support_prior=True), st.data())
def test_post_processing_never_increases_ldp_or_mbp(case, data):
    K, prior, belief = case
    m2 = data.draw(st.sampled_from([2, 3]))
    T = np.stack([data.draw(simplex(m2)) for _ in range(K.shape[1])])
    before, after = _levels(K, prior), _levels(K @ T, prior)
    assert after["ldp"] <= before["ldp"] * (1 + TOL) + TOL
    assert after["mbp"] <= before["mbp"] * (1 + TOL) + TOL
    assert after["mi"] <= before["mi"] * (1 + TOL) + TOL  # data processing inequality


SCALAR_LEVELS = ("ldp", "mbp", "abp", "abp_mean", "abp_output", "mi", "eps_unif", "eps_bel")


def _assert_relabelled(a, b, secret_perm, output_perm):
    """``b`` are the levels of ``a``'s mechanism with secrets/outputs relabelled by the perms."""
    for key in SCALAR_LEVELS:
        np.testing.assert_allclose(b[key], a[key], rtol=1e-9, atol=1e-12, err_msg=key)
    np.testing.assert_allclose(b["abp_record"], a["abp_record"][secret_perm], rtol=1e-9,
                               atol=1e-12)
    np.testing.assert_allclose(b["abp_output_vector"], a["abp_output_vector"][output_perm],
                               rtol=1e-9, atol=1e-12)


@SETTINGS
@given(mechanisms(full_support_prior=False), st.randoms(use_true_random=False))
def test_invariant_under_permuting_outputs(case, rnd):
    K, prior, belief = case
    perm = list(range(K.shape[1]))
    rnd.shuffle(perm)
    _assert_relabelled(_levels(K, prior, belief), _levels(K[:, perm], prior, belief),
                       slice(None), perm)


@SETTINGS
@given(mechanisms(full_support_prior=False), st.randoms(use_true_random=False))
def test_invariant_under_relabelling_secrets_with_prior(case, rnd):
    K, prior, belief = case
    perm = list(range(K.shape[0]))
    rnd.shuffle(perm)
    _assert_relabelled(_levels(K, prior, belief),
                       _levels(K[perm], prior[perm], belief[perm]), perm, slice(None))


@SETTINGS
@given(st.sampled_from([2, 3, 6]).flatmap(lambda k: st.tuples(simplex(k), simplex(k))))
def test_divergence_properties(pair):
    P, Q = pair
    with jax.enable_x64(True):
        js_pq, js_qp = float(divergences.js(P, Q)), float(divergences.js(Q, P))
        kl_pq = float(divergences.kl(P, Q))
        tv = float(divergences.tv(P, Q))
    assert 0.0 <= js_pq <= math.log(2)
    assert js_pq == pytest.approx(js_qp, rel=1e-12, abs=1e-15)
    assert kl_pq >= 0.0 and 0.0 <= tv <= 1.0
    assert js_pq <= math.log(2) * tv * (1 + 1e-12) + 1e-15  # JS ≤ ln2 · TV
    assert tv <= math.sqrt(kl_pq / 2) * (1 + 1e-9) + 1e-12  # Pinsker


@SETTINGS
@given(mechanisms(full_support_prior=True))
def test_batch_equals_one_by_one(case):
    K, prior, belief = case
    K2 = K[:, ::-1]
    with jax.enable_x64(True):
        batch = levels(Mechanism.from_K(np.stack([K, K2]), prior, belief))
    for i, Ki in enumerate((K, K2)):
        single = _levels(Ki, prior, belief)
        for key, value in single.items():
            np.testing.assert_allclose(np.asarray(batch[key])[i], value, rtol=1e-12, atol=1e-15)
