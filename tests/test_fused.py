"""The fused batch-minor kernels agree with the reference notions, edge cases included."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxpriv.core import notions
from jaxpriv.kernels import fused, samplers
from jaxpriv.core.mechanisms import Mechanism
from tests.conftest import random_prior, random_stochastic, sample


def _reference_levels(mech: Mechanism) -> dict[str, jax.Array]:
    return {"ldp": notions.ldp(mech), "mbp": notions.mbp(mech),
            "abp": notions.abp(mech, "record").level, "eps_unif": notions.eps_unif(mech),
            "eps_bel": notions.eps_bel(mech)}


def reference_levels(mech: Mechanism) -> dict[str, np.ndarray]:
    """The reference notions (jaxpriv.core.notions), compiled as one program (op by op they
    dispatched hundreds of small ones per shape)."""
    return jax.jit(_reference_levels)(mech)


def fused_levels(mech: Mechanism, tile: int | None = None,
                 kernel: str = "auto") -> dict[str, np.ndarray]:
    out = jax.jit(fused.record_levels, static_argnames=("tile", "kernel"))(
        mech.log_K, mech.log_prior, mech.log_belief, tile=tile, kernel=kernel)
    return out._asdict()


def assert_same_levels(mech, rtol, atol, tile=None, kernel="auto"):
    assert_levels_close(fused_levels(mech, tile, kernel), reference_levels(mech), rtol, atol)


def assert_levels_close(got, want, rtol, atol):
    """Same shapes, no NaN, infinities in the same places, finite levels within tolerance."""
    for name in want:
        g, w = np.asarray(got[name], np.float64), np.asarray(want[name], np.float64)
        assert g.shape == w.shape, name
        assert not np.isnan(g).any(), name
        np.testing.assert_array_equal(np.isinf(g), np.isinf(w), err_msg=name)
        finite = np.isfinite(w)
        np.testing.assert_allclose(g[finite], w[finite], rtol=rtol, atol=atol, err_msg=name)


def random_batch(seed, count, n, m, zero_fraction=0.0, belief=True):
    rng = np.random.default_rng(seed)
    K = np.stack([random_stochastic(rng, n, m, rng.choice([0.1, 1.0, 10.0]), zero_fraction)
                  for _ in range(count)])
    prior = np.stack([random_prior(rng, n, rng.choice([0.3, 1.0, 30.0])) for _ in range(count)])
    b = np.stack([random_prior(rng, n) for _ in range(count)]) if belief else prior
    return Mechanism.from_K(K, prior, b, dtype=jnp.float64)


@pytest.mark.parametrize("shape", [(2, 2), (3, 7), (8, 8), (16, 2)])
def test_fused_matches_reference_in_float64(x64, shape):
    mech = random_batch(0, 300, *shape, zero_fraction=0.2)
    assert_same_levels(mech, rtol=1e-9, atol=1e-12, tile=128)  # 300 = 2 full tiles + padding


@pytest.mark.parametrize("kernel", ["xla", "native"])
def test_fused_float32_matches_float64_reference(kernel, native_kernel):
    with jax.enable_x64(True):
        mech64 = random_batch(1, 1000, 8, 8)
        want = {k: np.asarray(v) for k, v in reference_levels(mech64).items()}
    got = fused_levels(mech64.astype(jnp.float32), kernel=kernel)
    for name, w in want.items():
        assert got[name].dtype == jnp.float32
        np.testing.assert_allclose(np.asarray(got[name], np.float64), w, rtol=1e-3, atol=2e-6,
                                   err_msg=name)


@pytest.mark.parametrize("kernel", ["xla", "native"])
def test_fused_edge_cases(x64, kernel, native_kernel):
    """Zero entries, an impossible output, a ruled-out secret whose row puts mass on an output
    only it produces, a constant mechanism, and a belief with a zero."""
    K = np.array([
        [[0.5, 0.5, 0.0], [0.25, 0.75, 0.0], [0.0, 0.0, 1.0]],  # secret 2 ruled out below
        [[1 / 3, 1 / 3, 1 / 3]] * 3,  # constant
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],  # identity
        [[0.9, 0.1, 0.0], [0.1, 0.9, 0.0], [0.5, 0.5, 0.0]],  # an output no secret produces
    ])
    prior = np.array([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [0.6, 0.4, 0.0], [1 / 3] * 3])
    belief = np.array([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [0.5, 0.5, 0.0], [0.2, 0.2, 0.6]])
    mech = Mechanism.from_K(K, prior, belief, dtype=jnp.float64)
    assert_same_levels(mech, rtol=1e-12, atol=1e-15)
    assert_same_levels(mech.astype(jnp.float32), rtol=1e-5, atol=1e-7, kernel=kernel)


def test_fused_on_sampler_output_including_extremes():
    """The sweep's own mechanisms: Dirichlet rows down to concentration 1e-2, sharp Gaussian
    logits, k-RR up to ε = 8, sparse rows, ε-close priors and tilted beliefs."""
    spec = samplers.SamplerSpec(8, 8, belief_eps_max=1.0)
    mech32 = sample(jax.random.key(3), 4096, spec)
    with jax.enable_x64(True):
        mech64 = mech32.astype(jnp.float64)
        want = {k: np.asarray(v) for k, v in reference_levels(mech64).items()}
        got64 = {k: np.asarray(v) for k, v in fused_levels(mech64).items()}
    for name, w in want.items():
        np.testing.assert_array_equal(np.isinf(got64[name]), np.isinf(w), err_msg=name)
        finite = np.isfinite(w)
        np.testing.assert_allclose(got64[name][finite], w[finite], rtol=1e-8, atol=1e-11,
                                   err_msg=name)
    assert np.isinf(want["ldp"]).any() and (want["abp"] > 0.5).any()  # the extremes are there


@settings(max_examples=5, deadline=None)
@given(n=st.integers(2, 6), m=st.integers(2, 6), seed=st.integers(0, 2**31 - 1),
       zeros=st.sampled_from([0.0, 0.3]))
def test_fused_property_random_shapes(n, m, seed, zeros):
    with jax.enable_x64(True):
        assert_same_levels(random_batch(seed, 7, n, m, zeros), rtol=1e-9, atol=1e-12, tile=4)


def test_batch_shapes_and_single_mechanism(x64):
    mech = random_batch(5, 6, 3, 4)
    stacked = jax.tree_util.tree_map(lambda a: a.reshape((2, 3) + a.shape[1:]), mech)
    levels = fused_levels(stacked)
    assert levels["abp"].shape == (2, 3)
    one = fused_levels(jax.tree_util.tree_map(lambda a: a[4], mech))
    assert one["mbp"].shape == ()
    np.testing.assert_allclose(one["abp"], levels["abp"][1, 1], rtol=1e-12)


def test_compiler_options_keep_the_levels_and_apply_only_to_short_axes_on_cpu():
    """The sweep compiles its step with fused.compiler_options at n, m <= 8 (XLA's loops
    instead of YNNPACK fusions): a performance choice that must not change the levels."""
    assert fused.compiler_options(8, 8) == {"xla_cpu_experimental_ynn_fusion_type": ""}
    assert fused.compiler_options(9, 4) is None and fused.compiler_options(4, 16) is None
    mech = sample(jax.random.key(11), 2048, samplers.SamplerSpec(8, 8,
                                                                          belief_eps_max=1.0))
    def levels(K, prior, belief):
        return fused.record_levels(K, prior, belief, kernel="xla")._asdict()
    default = jax.jit(levels)(mech.log_K, mech.log_prior, mech.log_belief)
    tuned = jax.jit(levels, compiler_options=fused.compiler_options(8, 8))(
        mech.log_K, mech.log_prior, mech.log_belief)
    for name in default:
        a, b = np.asarray(default[name]), np.asarray(tuned[name])
        np.testing.assert_array_equal(np.isinf(a), np.isinf(b), err_msg=name)
        finite = np.isfinite(a)
        np.testing.assert_allclose(b[finite], a[finite], rtol=2e-6, atol=1e-7, err_msg=name)


def test_one_tile_off_the_cpu_runs_without_a_loop(monkeypatch):
    """On an accelerator the tiles would run one after another; there the default is one
    tile, computed without lax.map. Same levels as the tiled CPU path."""
    mech = sample(jax.random.key(12), 700, samplers.SamplerSpec(5, 6,
                                                                         belief_eps_max=1.0))
    args = (mech.log_K, mech.log_prior, mech.log_belief)
    tiled = fused_levels(mech, tile=64, kernel="xla")
    assert "scan" in str(jax.make_jaxpr(lambda *a: fused.record_levels(*a, tile=64,
                                                                       kernel="xla"))(*args))
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert "scan" not in str(jax.make_jaxpr(fused.record_levels)(*args))
    whole = fused_levels(mech)  # traced after the patch: one tile
    for name in tiled:
        a, b = np.asarray(tiled[name]), np.asarray(whole[name])
        np.testing.assert_array_equal(np.isinf(a), np.isinf(b), err_msg=name)
        # a level is a difference of O(1) logs: a few float32 ulps of those (2.4e-7 measured
        # on a small MBP) apart where XLA fuses the two paths differently
        np.testing.assert_allclose(b[np.isfinite(a)], a[np.isfinite(a)], rtol=1e-6, atol=5e-7,
                                   err_msg=name)
