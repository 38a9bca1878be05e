"""SPEC §1 conventions at the edges: zeros, impossible outputs, ruled-out secrets, gradients."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import reference
from jaxpriv import Mechanism
from jaxpriv.core import families, notions


def levels(mech):
    """Every core level, compiled (op by op each shape dispatched hundreds of small programs)."""
    return jax.jit(notions.levels)(mech)


def test_zero_entry_gives_infinite_ldp_and_mbp(x64):
    mech = Mechanism.from_K([[0.5, 0.5], [1.0, 0.0]])
    lv = levels(mech)
    assert math.isinf(float(lv["ldp"])) and math.isinf(float(lv["mbp"]))
    for value in lv.values():
        assert not np.isnan(np.asarray(value)).any()


def test_all_zero_column_is_not_an_output(x64):
    K = np.array([[0.3, 0.0, 0.7], [0.6, 0.0, 0.4]])
    with_col = levels(Mechanism.from_K(K))
    without = levels(Mechanism.from_K(K[:, [0, 2]]))
    for key in ("ldp", "mbp", "abp", "abp_output", "mi", "abp_mean"):
        assert float(with_col[key]) == pytest.approx(float(without[key]), rel=1e-14), key
    assert float(with_col["abp_output_vector"][1]) == 0.0


def test_zero_prior_secret_is_skipped_by_mbp_and_abp(x64):
    # Secret 2 is ruled out: its all-zero-column behaviour must not make MBP infinite.
    K = np.array([[0.6, 0.4, 0.0], [0.3, 0.7, 0.0], [0.0, 0.0, 1.0]])
    prior = [0.5, 0.5, 0.0]
    lv = levels(Mechanism.from_K(K, prior))
    reduced = levels(Mechanism.from_K(K[:2, :2], [0.5, 0.5]))
    assert math.isinf(float(lv["ldp"]))  # LDP does not look at the prior
    assert float(lv["mbp"]) == pytest.approx(float(reduced["mbp"]), rel=1e-14)
    assert float(lv["abp"]) == pytest.approx(float(reduced["abp"]), rel=1e-14)
    assert math.isinf(float(lv["eps_unif"]))


def test_record_law_of_ruled_out_secret_with_mass_on_impossible_output(x64):
    # d* = 2 has prior 0 and reports only output 2, which cannot occur: its law keeps no mass,
    # so F^A = π and the value is JS(π‖b) = 0 here; the level ignores it anyway.
    K = np.array([[0.6, 0.4, 0.0], [0.3, 0.7, 0.0], [0.0, 0.0, 1.0]])
    res = notions.abp(Mechanism.from_K(K, [0.5, 0.5, 0.0]), "record")
    assert float(res.vector[2]) == 0.0
    assert not np.isnan(np.asarray(res.vector)).any()


@pytest.mark.parametrize("shape", [(3, 7), (16, 2), (1, 4), (4, 1)])
def test_non_square_shapes(x64, shape):
    rng = np.random.default_rng(sum(shape))
    K = rng.dirichlet(np.ones(shape[1]), size=shape[0])
    lv = levels(Mechanism.from_K(K))
    assert np.asarray(lv["abp_record"]).shape == (shape[0],)
    assert np.asarray(lv["abp_output_vector"]).shape == (shape[1],)
    if 1 in shape:  # one secret or one output: nothing can leak
        for key in ("ldp", "mbp", "abp", "abp_output", "mi"):
            assert float(lv[key]) == pytest.approx(0.0, abs=1e-15), key


def test_neighbour_relation_dp_level(x64):
    K = np.array([[0.7, 0.2, 0.1], [0.2, 0.6, 0.2], [0.05, 0.15, 0.8]])
    E = notions.adjacent(3)
    expected = float(reference.ldp(reference._m(K), np.asarray(E).tolist()))
    assert float(notions.ldp(Mechanism.from_K(K), E)) == pytest.approx(expected, rel=1e-13)
    assert float(notions.ldp(Mechanism.from_K(K), E)) < float(notions.ldp(Mechanism.from_K(K)))


def test_gradients_are_finite_at_boundary_points():
    # Zeros in K (−∞ logits), a zero-prior secret, a constant mechanism (all ratios 1, JS at 0)
    # and an identity (JS at ln 2): gradients of every smooth level must be finite.
    def objective(logits, log_prior):
        log_K = jax.nn.log_softmax(logits, axis=-1)
        return (notions.mbp_kernel(log_K, log_prior)
                + jnp.sum(notions.abp_record_kernel(log_K, log_prior, log_prior))
                + jnp.sum(notions.abp_output_kernel(log_K, log_prior, log_prior))
                + notions.mutual_information_kernel(log_K, log_prior))

    cases = [
        (jnp.array([[0.0, -jnp.inf], [0.0, 0.0]]), jnp.log(jnp.array([0.5, 0.5]))),
        (jnp.array([[0.0, 1.0], [2.0, 0.0]]), jnp.log(jnp.array([1.0, 0.0]))),
        (jnp.zeros((3, 3)), jnp.log(jnp.full(3, 1 / 3))),
        (jnp.array([[0.0, -jnp.inf], [-jnp.inf, 0.0]]), jnp.log(jnp.array([0.5, 0.5]))),
    ]
    grad = jax.jit(jax.grad(objective))
    for logits, log_prior in cases:
        g = grad(logits, log_prior)
        assert jnp.isfinite(g).all(), (logits, g)


def test_divergence_gradients_finite_at_zero_and_disjoint():
    from jaxpriv.core import divergences
    P = jnp.array([0.5, 0.5, 0.0])
    for Q in (P, jnp.array([0.0, 0.0, 1.0]), jnp.array([0.25, 0.25, 0.5])):
        for fn in (divergences.js, divergences.tv):
            g = jax.grad(lambda p: fn(p, Q))(P)
            assert jnp.isfinite(g).all(), (fn.__name__, Q, g)


def test_levels_under_jit_and_vmap():
    mech = families.k_randomized_response(3, jnp.array([0.5, 1.0, 2.0]))
    jitted = jax.jit(notions.mbp)(mech)
    vmapped = jax.vmap(notions.mbp)(mech)
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(vmapped), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(notions.mbp(mech)), rtol=1e-6)


def test_abp_vanishes_when_the_posterior_is_the_belief():
    # Secret 1's outputs {0, 1} reveal it exactly, and the belief is a point mass on it: for
    # d* = 1 (record law) and w ∈ {0, 1} (output law) F^A = b ≠ π, so ABP = 0. Forming
    # F^A − b as (F^A − π) + (π − b) cancelled to ~1e−17 and sqrt(JS) made that 3e−9, which also
    # broke the invariance of the mean under relabelling outputs (found by hypothesis).
    K = np.array([[0.0, 0.0, 0.5, 0.5], [0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.5, 0.5]])
    prior, belief = np.full(3, 1 / 3), np.array([0.0, 1.0, 0.0])
    with jax.enable_x64(True):
        base = levels(Mechanism.from_K(K, prior, belief))
        permuted = levels(Mechanism.from_K(K[:, [0, 2, 3, 1]], prior, belief))
    assert float(base["abp_record"][1]) < 1e-15
    assert np.all(np.asarray(base["abp_output_vector"][:2]) < 1e-15)
    np.testing.assert_allclose(permuted["abp_mean"], base["abp_mean"], rtol=1e-13)
    # the other secrets' values: F^A = (1/2, 0, 1/2) against b = (0, 1, 0), disjoint: sqrt(ln 2)
    np.testing.assert_allclose(np.asarray(base["abp_record"])[[0, 2]], np.sqrt(np.log(2)),
                               rtol=1e-12)
