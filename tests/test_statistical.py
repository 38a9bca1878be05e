"""R14 (003 Lemma C.1; 002 Lemma A.10): exact binomial tails against mpmath and Monte Carlo,
the Chernoff regime ε ≤ 1 holds, and the finding that the claim fails for large ε."""

import jax
import mpmath
import numpy as np
import pytest

from jaxpriv.core import statistical
from jaxpriv.core.errors import InputError


def mp_failure(T, kappa, eps):
    """P(|X − Tκ| > εTκ), X ~ Binomial(T, κ), with 60-digit arithmetic."""
    mpmath.mp.dps = 60
    k = mpmath.mpf(kappa)
    total = mpmath.mpf(0)
    for j in range(T + 1):
        if abs(j - T * k) > eps * T * k:
            total += mpmath.binomial(T, j) * k**j * (1 - k) ** (T - j)
    return total


@pytest.mark.parametrize("T,kappa,eps", [(20, 0.5, 0.9), (1000, 0.01, 1.0), (1000, 0.001, 0.5),
                                         (1000, 0.01, 3.0), (1000, 0.01, 4.0), (300, 0.2, 2.5)])
def test_exact_failure_probability_matches_mpmath(T, kappa, eps):
    exact = float(mp_failure(T, kappa, eps))
    got = float(statistical.failure_probability(T, kappa, eps))
    assert got == pytest.approx(exact, rel=1e-9)


def test_monte_carlo_agrees_with_the_exact_sum_within_its_standard_error():
    kappa = np.array([0.05, 0.2, 0.5])
    eps = np.array([0.3, 0.2, 0.1])
    estimate, stderr = statistical.monte_carlo_failure(jax.random.key(0), 200, kappa, eps,
                                                       200_000)
    exact = statistical.failure_probability(200, kappa, eps)
    assert np.all(np.abs(estimate - exact) <= 4 * stderr + 1e-12), (estimate, exact, stderr)


def test_r14_holds_in_the_chernoff_regime():
    """ε ≤ 1 is the multiplicative Chernoff bound's range: no violation anywhere on the grid."""
    result = statistical.audit([1, 5, 20, 100, 1000, 5000], np.geomspace(1e-3, 0.99, 15),
                               np.linspace(0.05, 1.0, 12))
    assert not result.violated.any()
    assert np.min(result.log_slack) > 0


def test_finding_r14_fails_for_large_epsilon():
    """The lemma states no range for ε. At T = 1000, κ₁ = 0.01, ε = 4 it claims a failure
    probability ≤ 2e^{−160/3} ≈ 1.38e−23, while P(X ≥ 51) = 1.56e−20 (60-digit check)."""
    claimed = mpmath.mpf(2) * mpmath.exp(-mpmath.mpf(16) * 1000 * mpmath.mpf("0.01") / 3)
    exact = mp_failure(1000, 0.01, 4.0)
    assert exact > 1000 * claimed
    result = statistical.audit([1000], [0.01], [4.0])
    assert result.violated.all()
    assert float(result.log_slack[0, 0, 0]) == pytest.approx(float(mpmath.log(claimed / exact)),
                                                             rel=1e-9)


def test_bad_arguments_are_named():
    with pytest.raises(InputError, match="κ₁"):
        statistical.failure_probability(10, 1.5, 0.5)
    with pytest.raises(InputError, match="positive integer"):
        statistical.failure_probability(0, 0.5, 0.5)
    # a witness's numbers as text ("T": "100") were read as the numbers
    from jaxpriv import registry

    with pytest.raises(InputError, match="R14: 'T' must be a number"):
        registry.get("R14").check(T="100", kappa1=0.1, eps=0.5)
    with pytest.raises(InputError, match="R15: 'kappa1' must be a number"):
        registry.get("R15").check(kappa1=["0.5", 0.5], kappa2=[0.5, 0.5], eps=0.1)
    assert not registry.get("R14").check(T=100, kappa1=0.1, eps=0.5).violated


# -- R15 -------------------------------------------------------------------------------------------


def test_c1_is_sqrt_js_for_distributions():
    from jaxpriv.core import divergences
    rng = np.random.default_rng(1)
    a, b = rng.dirichlet(np.ones(5), size=(2, 100))
    with jax.enable_x64(True):
        np.testing.assert_allclose(statistical.c1(a, b), np.sqrt(divergences.js(a, b)),
                                   rtol=1e-10)


def test_r15_extremes_match_brute_force_over_perturbations():
    """Vertices of the box give the max (each term is convex); a dense grid finds the min."""
    rng = np.random.default_rng(2)
    for _ in range(10):
        a, b = rng.dirichlet(np.full(2, 0.5), size=2)
        eps = rng.uniform(0.05, 0.9)
        t = np.linspace(1 - eps, 1 + eps, 401)
        r1, r2 = np.meshgrid(t, t, indexing="ij")
        estimates = np.stack([r1 * a[0], r2 * a[1]], -1)
        with jax.enable_x64(True):
            values = np.asarray(statistical.c1(estimates, np.broadcast_to(b, estimates.shape)))
            least, most = (float(v) for v in statistical.r15_extremes(a, b, eps))
        assert most == pytest.approx(values.max(), rel=1e-12)  # attained at a grid corner
        assert values.min() >= least - 1e-12 and values.min() <= least + 1e-3


def test_r15_holds_and_is_loose():
    result = statistical.r15_audit(jax.random.key(0), 3, [0.01, 0.1, 0.5, 0.9], 50_000)
    assert (result.slack > 1).all()
    assert result.slack.min() > 3  # loose by at least 3x everywhere found


def test_monte_carlo_estimates_are_float64_fractions():
    """A Monte Carlo estimate is a count over the draws in float64: the mean of booleans was
    float32 (100/500 read 0.20000000298 in summary.json's R14 record)."""
    import jax

    from jaxpriv.catalog import statistical as catalog
    from jaxpriv.engines import settings

    p, _ = statistical.monte_carlo_failure(jax.random.key(0), 100, 0.3, 0.1, 500)
    assert p.dtype == np.float64 and float(p * 500) == round(float(p * 500))
    config = settings.make_config("R14", "sweep", count=64, chunk=64, t_max=50, draws=500)
    with jax.enable_x64(True):
        step = catalog._r14_chunk(config)
        *_, p_hat = step(jax.random.key(1), catalog.log_factorials(config.t_max))
    p_hat = np.asarray(p_hat)
    assert p_hat.dtype == np.float64
    np.testing.assert_array_equal(p_hat * 500, np.round(p_hat * 500))
