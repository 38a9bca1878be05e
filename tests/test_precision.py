"""float32 fast path against float64, and float64 at the edges of the representable range.

Stated tolerance: on the *same* inputs (a float32 mechanism, recomputed after casting to
float64) every float32 level agrees with float64 within ``rtol=1e-3, atol=1e-7``; JS and KL of
given distribution pairs keep ``rtol=1e-5`` even as they go to 0 (SPEC §2.5). The remaining
float32 error is that of representing ``log K`` itself (``eps·|log K|`` ≈ 1e-7 nats), which no
kernel can undo: a level below ~1e-7 nats is at float32's resolution, hence the ``atol``.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import random_prior, random_stochastic
from jaxpriv import Mechanism
from jaxpriv.core import divergences, families, notions

F32_RTOL, F32_ATOL = 1e-3, 1e-7


levels = jax.jit(notions.levels)


@pytest.mark.parametrize("shape", [(2, 2), (3, 7), (8, 8), (16, 2)])
def test_float32_agrees_with_float64(shape):
    n, m = shape
    rng = np.random.default_rng(n * 100 + m)
    Ks, priors, beliefs = [], [], []
    for concentration in (0.1, 1.0, 10.0, 1e3, 1e6):
        for trial in range(8):
            Ks.append(random_stochastic(rng, n, m, concentration,
                                        zero_fraction=0.3 if trial % 2 else 0.0))
            priors.append(random_prior(rng, n, 2.0))
            beliefs.append(random_prior(rng, n, 50.0) if trial % 3 == 0 else priors[-1])
    mech32 = Mechanism.from_K(np.stack(Ks), np.stack(priors), np.stack(beliefs),
                              dtype=jnp.float32)
    assert mech32.dtype == jnp.float32 and mech32.batch_shape == (40,)
    got = levels(mech32)
    with jax.enable_x64(True):
        want = levels(mech32.astype(jnp.float64))
    for key, value in want.items():
        a = np.asarray(got[key])
        assert a.dtype == np.float32, key
        b = np.asarray(value)
        assert b.dtype == np.float64, key
        np.testing.assert_array_equal(np.isinf(a), np.isinf(b), err_msg=key)
        finite = np.isfinite(b)
        np.testing.assert_allclose(a[finite], b[finite], rtol=F32_RTOL, atol=F32_ATOL,
                                   err_msg=f"{key} for shape {shape}")


@pytest.mark.parametrize("delta", [1e-2, 1e-3, 1e-4, 1e-5, 1e-6])
def test_js_and_kl_near_zero_keep_relative_accuracy_in_float32(delta):
    rng = np.random.default_rng(7)
    P = rng.dirichlet(np.ones(8))
    Q = P * (1 + delta * rng.normal(size=8))
    P32, Q32 = np.float32(P), np.float32(Q / Q.sum())
    js32 = float(divergences.js(jnp.asarray(P32), jnp.asarray(Q32)))
    kl32 = float(divergences.kl(jnp.asarray(P32), jnp.asarray(Q32)))
    with jax.enable_x64(True):
        P64, Q64 = P32.astype(np.float64), Q32.astype(np.float64)
        js64 = float(divergences.js(P64, Q64))
        kl64 = float(divergences.kl(P64, Q64))
    assert js64 > 0
    assert js32 == pytest.approx(js64, rel=1e-5)
    assert kl32 == pytest.approx(kl64, rel=1e-5)
    # and the textbook formula really would have failed here (so this test can fail):
    M = (P32 + Q32) / 2
    naive = 0.5 * np.sum(P32 * np.log(P32 / M)) + 0.5 * np.sum(Q32 * np.log(Q32 / M))
    if delta <= 1e-4:
        assert abs(naive - js64) > 1e-2 * js64


def test_rr_abp_near_zero_float32():
    # ε → 0: ABP ≈ ε²/8·… is tiny; float32 must still give it to 1e-3 relative.
    eps = np.array([1e-1, 1e-2, 1e-3], dtype=np.float32)
    abp = jax.jit(lambda mech: notions.abp(mech, "record").level)  # one program, not op by op
    got = np.asarray(abp(families.randomized_response(eps)))
    with jax.enable_x64(True):
        want = np.asarray(abp(families.randomized_response(eps.astype(np.float64))))
    assert (want > 0).all()
    np.testing.assert_allclose(got, want, rtol=1e-3)


def test_entries_near_1e300_in_float64(x64):
    tiny = 1e-300
    K = np.array([[1 - tiny, tiny], [0.5, 0.5]])
    prior = np.array([1 - 1e-290, 1e-290])
    mech = Mechanism.from_K(K, prior)
    lv = {k: np.asarray(v) for k, v in notions.levels(mech).items()}
    for key, value in lv.items():
        assert not np.isnan(value).any(), key
    assert float(lv["ldp"]) == pytest.approx(np.log(0.5 / tiny), rel=1e-12)
    # p(1) = (1−1e-290)·1e-300 + 1e-290·0.5 ≈ 0.5e-290; secret 1's ratio there is ≈ 1e290.
    assert float(lv["mbp"]) == pytest.approx(np.log(0.5 / (0.5e-290 + 1e-300)), rel=1e-9)


def test_float32_log_space_below_float32_range():
    # K = e^-200 underflows in float32 but log K = -200 does not: LDP stays finite and exact.
    log_K = np.log(np.array([[0.5, 0.5], [1.0, 1.0]]))
    log_K[1] = [0.0, -200.0]
    log_K[1, 0] = np.log1p(-np.exp(-200.0))
    mech = Mechanism.from_log_K(log_K, dtype=jnp.float32)
    assert float(notions.ldp(mech)) == pytest.approx(200.0 + np.log(0.5), rel=1e-6)


def test_js_terms_fast_matches_float64_reference_over_the_whole_range():
    """The fused screen's JS terms (series for t² ≤ 1/16, two logs beyond) against the float64
    reference terms, at both ends (t → 0, t = ±1), around the branch switch (|t| = 1/4) and
    across [−1, 1]; float64 input falls back to the reference itself."""
    t = np.concatenate([np.linspace(-1, 1, 4001), [0.0, 1e-30, -1e-20, 1e-8, 3e-4, 0.2499999,
                                                   0.25, 0.2500001, -0.25, 0.9999999, -1.0]])
    total = np.full_like(t, 0.7)
    fast32 = np.asarray(divergences.js_terms_fast(jnp.float32(total), jnp.float32(total * t)))
    assert fast32.dtype == np.float32 and np.isfinite(fast32).all()
    with jax.enable_x64(True):
        t32 = np.float32(t).astype(np.float64)  # the same float32 inputs, evaluated exactly
        want = np.asarray(divergences.js_terms(np.float32(total).astype(np.float64),
                                               np.float32(total).astype(np.float64) * t32))
        assert np.array_equal(np.asarray(divergences.js_terms_fast(total, total * t)),
                              np.asarray(divergences.js_terms(total, total * t)))
    np.testing.assert_allclose(fast32, want, rtol=2e-6, atol=1e-37)
    assert fast32[t == 0][0] == 0 and (fast32[np.abs(t) > 1e-15] > 0).all()  # t² underflows below


def test_float32_kl_and_mutual_information_stay_finite_where_a_marginal_underflows():
    """A secret of prior 4e-9 whose row puts e^-81 on an output that the others give e^-91 and
    less: the marginal there is ~3e-40, below float32's normal range (XLA flushes it to 0), yet
    positive, so I(D;W) and KL are finite — in float32 they once came out +∞ (KL from exp'd
    values). Found by a quick-audit sweep of D16 (mechanism 5208, seed 0). Against float64."""
    log_K = np.array([[-55.837662, -3.4973621e-03, -183.43863, -5.6574626],
                      [-388.42148, 0.0, -80.905716, -219.379],
                      [-5.3405762e-05, -9.8633537, -191.12793, -195.32605],
                      [-51.958466, -91.564194, -90.952591, 0.0]])
    log_K = log_K - np.logaddexp.reduce(log_K, axis=1, keepdims=True)
    log_prior = np.log(np.array([5.4528672e-02, 4.3344095e-05, 4.3528057e-09, 9.4542783e-01]))
    log_prior -= np.logaddexp.reduce(log_prior)
    with jax.enable_x64(True):
        exact = float(notions.mutual_information(Mechanism(
            jnp.asarray(log_K), jnp.asarray(log_prior), jnp.asarray(log_prior))))
        exact_kl = float(divergences.kl_from_logs(jnp.asarray(log_K[1]), jnp.asarray(log_K[3])))
    mech32 = Mechanism(jnp.asarray(log_K, jnp.float32), jnp.asarray(log_prior, jnp.float32),
                       jnp.asarray(log_prior, jnp.float32))
    mi = float(jax.jit(notions.mutual_information)(mech32))
    assert np.isfinite(mi) and mi == pytest.approx(exact, rel=1e-5)
    kl = float(jax.jit(divergences.kl_from_logs)(mech32.log_K[1], mech32.log_K[3]))
    assert kl == pytest.approx(exact_kl, rel=1e-5)
    # a zero (log −∞) under positive mass is still +∞
    assert float(divergences.kl_from_logs(jnp.array([0.0, -jnp.inf]),
                                          jnp.array([-jnp.inf, 0.0]))) == np.inf
