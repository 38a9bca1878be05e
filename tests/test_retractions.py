"""The generic premise retraction (jaxpriv.core.retractions.bisect_keep) and its root finder
(bracketed_root): the retracted mechanism sits inside the premise, as close to it as bisection
got (60 steps in float64, 32 in float32), for the premises of the DP claims without a closed
form (zCDP, Rényi, GDP, ε(δ), δ(ε) in float64; zCDP and GDP in float32); the
root finder's invariants on awkward functions (infinite values, flat zero regions, kinks); and
zCDP's envelope-theorem derivative against finite differences of the float64 level."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpriv import registry
from jaxpriv.core import retractions, zcdp
from jaxpriv.core.mechanisms import Mechanism

PREMISES = [("zcdp", {}), ("renyi", {"order": 16.0}), ("kl", {}), ("gdp", {}),
            ("eps_at_delta", {"delta": 1e-5}), ("delta", {"epsilon": 0.5})]


def _bisection(level, mech, x, steps, margin=retractions.MARGIN):
    """The retraction as it was: plain bisection on u = log(1 − t) over [−40, 0]."""
    target = x * (1.0 - margin)

    def body(_, bracket):
        low, high = bracket
        mid = 0.5 * (low + high)
        ok = level(retractions.mix_constant(mech, mid)) <= target
        return jnp.where(ok, mid, low), jnp.where(ok, high, mid)

    zero = jnp.zeros((), mech.log_K.dtype)
    low, _ = jax.lax.fori_loop(0, steps, body, (zero - 40.0, zero))
    return jnp.where(level(mech) <= x, zero, low)


def _mechanisms(dtype, count=48, n=3, m=3, seed=7):
    key_scale, key_logits = jax.random.split(jax.random.key(seed))
    scale = jnp.exp(jax.random.uniform(key_scale, (count, 1, 1), dtype, np.log(0.3), np.log(8.0)))
    return jax.nn.log_softmax(scale * jax.random.normal(key_logits, (count, n, m), dtype), -1)


# float64 where bisection's 60 steps were the reference of every float64 witness; float32 on the
# two premises whose level is itself a search (zCDP over orders, GDP over output prefixes)
CASES = [(key, options, True) for key, options in PREMISES if key != "kl"] + [
    (key, options, False) for key, options in PREMISES if key in ("zcdp", "gdp")]


@pytest.mark.parametrize("key,options,wide", CASES,
                         ids=[f"{k}-{'float64' if w else 'float32'}" for k, _, w in CASES])
def test_root_found_retraction_matches_bisection(key, options, wide):
    """At premise levels 0.1, 1 and 3 the retracted level never exceeds x and is within 1e-14
    (float64) / 5e-5 (float32) relative of what bisection reaches."""
    notion = registry.notion(key)
    params = notion.resolve(options)

    def level(candidate):
        return notion.level(candidate, **params)

    with jax.enable_x64(wide):
        dtype = jnp.float64 if wide else jnp.float32
        # the float64 zCDP level is a search over orders, inside 60 bisection steps: fewer
        # mechanisms there (it was 40 s of the suite on a 2-core AVX2 machine)
        log_K = _mechanisms(dtype, count=8 if (key, wide) == ("zcdp", True) else 48)
        log_prior = jnp.full((3,), -np.log(3.0), dtype)

        def both(lk, x):
            mech = Mechanism(lk, log_prior, log_prior, None, None)
            new = level(retractions.mix_constant(mech, retractions.bisect_keep(level, mech, x)))
            old = level(retractions.mix_constant(
                mech, _bisection(level, mech, x, 60 if wide else 32)))
            return new, old

        for x in (0.1, 1.0, 3.0):
            new, old = jax.jit(jax.vmap(both, in_axes=(0, None)))(log_K, jnp.asarray(x, dtype))
            new, old = np.asarray(new, np.float64), np.asarray(old, np.float64)
            assert np.all(np.isfinite(new)), (key, x)
            assert np.all(new <= x), (key, x, new.max())
            shortfall = (old - new) / x  # > 0: the new retraction left more of the premise unused
            assert shortfall.max() <= (1e-14 if wide else 5e-5), (key, x, shortfall.max())


def _root(h, low, high, steps):
    h_high = h(jnp.asarray(high, jnp.float64))
    return float(retractions.bracketed_root(h, jnp.float64(low), jnp.float64(high), h_high,
                                            steps))


def test_bracketed_root_linear_quadratic_and_kinked():
    with jax.enable_x64(True):
        # nearly linear (a divergence's log level): machine precision in a few steps
        root = _root(lambda u: 2.0 * u + 3.0, -40.0, 0.0, 8)
        assert -1.5 - 1e-12 <= root <= -1.5
        # a kink (the max over pairs switching) and a curved branch
        def kinked(u):
            return jnp.maximum(3.0 * (u + 2.0), jnp.expm1(u + 1.7))
        root = _root(kinked, -40.0, 0.0, 24)
        assert float(kinked(root)) <= 0 and root > -2.0 - 1e-12
        # the feasible end is returned whatever the step budget
        for steps in range(1, 12):
            assert float(kinked(_root(kinked, -40.0, 0.0, steps))) <= 0


def test_bracketed_root_evaluates_the_top_itself():
    """``h_high=None``: the top's value is the loop's first evaluation (the level's program
    traced once in :func:`bisect_keep`, not twice) and its aux comes back with the root; the
    root is the one the given value leads to, bit for bit, for every step budget."""
    with jax.enable_x64(True):
        def kinked(u):
            return jnp.maximum(3.0 * (u + 2.0), jnp.expm1(u + 1.7))
        for h in (kinked, lambda u: 2.0 * u + 3.0,
                  lambda u: jnp.where(u >= -1e-3, jnp.inf, 2.0 * u + 1.0)):
            for steps in (1, 5, 24):
                low, aux = retractions.bracketed_root(
                    lambda u: (h(u), 7.0 * h(u)), jnp.float64(-40.0), jnp.float64(0.0), None,
                    steps)
                assert float(aux) == 7.0 * float(h(jnp.float64(0.0)))
                assert float(low) == _root(h, -40.0, 0.0, steps)


@pytest.mark.parametrize("key", ["renyi", "gdp", "eps_at_delta"])
def test_the_unmixed_mechanism_is_kept_exactly_where_its_level_is_at_most_x(key):
    """``bisect_keep`` returns the identity where ``level(K) ≤ x`` and a retraction to ``≤ x``
    where the level is one unit in the last place above: the test is on the level itself (a
    test on its log read a level 1–4 ulps above x as feasible)."""
    notion = registry.notion(key)
    params = notion.resolve({})

    def level(candidate):
        return notion.level(candidate, **params)

    for wide in (True, False):
        with jax.enable_x64(wide):
            dtype = jnp.float64 if wide else jnp.float32
            log_K = _mechanisms(dtype, count=16)
            log_prior = jnp.full((3,), -np.log(3.0), dtype)

            def keep_and_level(lk, x):
                mech = Mechanism(lk, log_prior, log_prior, None, None)
                u = retractions.bisect_keep(level, mech, x)
                return u, level(retractions.mix_constant(mech, u))

            own = jax.jit(jax.vmap(lambda lk: level(Mechanism(lk, log_prior, log_prior,
                                                                 None, None))))(log_K)
            run = jax.jit(jax.vmap(keep_and_level))
            u_at, _ = run(log_K, own)
            below = jnp.nextafter(own, jnp.zeros_like(own))
            u_below, level_below = run(log_K, below)
            assert np.all(np.asarray(u_at) == 0.0), (key, wide)
            assert np.all(np.asarray(u_below) < 0.0), (key, wide)
            assert np.all(np.asarray(level_below) <= np.asarray(below)), (key, wide)


def test_bracketed_root_handles_infinite_and_flat_values():
    with jax.enable_x64(True):
        # −∞ (level 0) on a whole region below the root, +∞ above a point: bisection's fallback
        def stepped(u):
            return jnp.where(u < -5.0, -jnp.inf, jnp.where(u > -1.0, jnp.inf, u + 3.0))
        root = _root(stepped, -40.0, 0.0, 40)
        assert -3.0 - 1e-9 <= root <= -3.0
        assert float(stepped(root)) <= 0
        # h = +∞ at the top of the bracket (a zero entry: infinite divergence at t = 0)
        def top_infinite(u):
            return jnp.where(u >= -1e-3, jnp.inf, 2.0 * u + 1.0)
        h_high = jnp.float64(jnp.inf)
        root = float(retractions.bracketed_root(top_infinite, jnp.float64(-40.0),
                                                jnp.float64(0.0), h_high, 30))
        assert -0.5 - 1e-9 <= root <= -0.5


def test_zcdp_derivative_is_the_envelope_theorems():
    """∂ρ/∂θ of the float64 zCDP level of a pair against central differences (the level is the
    max over orders: its derivative is that of D_α/α at the maximizing order)."""
    with jax.enable_x64(True):
        rng = np.random.default_rng(3)
        for concentration in (0.5, 3.0):
            logits = jnp.asarray(rng.normal(size=(2, 4)) * concentration)

            def rho(z):
                log_K = jax.nn.log_softmax(z, axis=-1)
                return zcdp.zcdp_pair(log_K[0], log_K[1])

            grad = np.asarray(jax.grad(rho)(logits))
            h = 1e-6
            numeric = np.zeros_like(grad)
            for index in np.ndindex(grad.shape):
                step = np.zeros(grad.shape)
                step[index] = h
                numeric[index] = (float(rho(logits + step)) - float(rho(logits - step))) / (2 * h)
            np.testing.assert_allclose(grad, numeric, rtol=1e-4, atol=1e-7)
