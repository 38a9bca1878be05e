"""The native composed ε(δ) (jaxpriv/kernels/native/composed_eps.cc through
:func:`jaxpriv.kernels.composed.eps_composed`, the ``eps_composed`` notion's CPU path in float32
and float64) against the XLA reference (:func:`jaxpriv.core.composition.eps_composed`) on
random mechanisms with zeros, ``+∞`` atoms, rare outputs and several secrets; against a 50-digit
oracle at losses of 750 nats; its gradient against the reference's; NaN, vmap, shard_map and
traced δ. The oracle tests of tests/test_composition.py (every output sequence, 50 digits, and
randomized response's closed form at k up to 100) go through the notion, so through this path."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpriv import level
from jaxpriv.core import composition
from jaxpriv.core.mechanisms import Mechanism
from jaxpriv.kernels import composed, native

pytestmark = pytest.mark.skipif(not native.available(),
                                reason=f"native kernel: {native.unavailable_reason()}")


@pytest.fixture(autouse=True)
def _float64():
    with jax.enable_x64(True):
        yield


def _mechanisms(rng, count, n, m, rare=False):
    """Random n×m log-kernels: spread-out rows, a quarter with zeros (``+∞`` atoms both ways,
    outputs no row gives), equal rows (ε = 0), mirrored rows (pairs whose ε tie), and with
    ``rare`` an output ~600 nats rarer under all rows but one (the kernel's log-space path)."""
    u = rng.normal(size=(count, n, m)) * rng.uniform(0.05, 3.0, size=(count, 1, 1))
    quarter = count // 4
    u[:quarter] = np.where(rng.uniform(size=u[:quarter].shape) < 0.2, -np.inf, u[:quarter])
    u[:, :, 0] = np.where(np.isinf(u[:, :, 0]), 0.0, u[:, :, 0])
    u[-1] = u[-1, :1]
    u[-2, 1] = u[-2, 0, ::-1]
    if rare:
        u[quarter:-2, 1:, -1] -= rng.uniform(50.0, 600.0, size=(count - quarter - 2, 1))
    return u - np.log(np.exp(u).sum(-1, keepdims=True))


def _both(log_K, k, delta, neighbours=None):
    mech = Mechanism.from_log_K(jnp.asarray(log_K), dtype=log_K.dtype)
    got = jax.jit(lambda m: composed.eps_composed(m, k=k, delta=delta,
                                                  neighbours=neighbours))(mech)
    want = jax.jit(lambda m: composition.eps_composed(m, k=k, delta=delta,
                                                      neighbours=neighbours))(mech)
    return np.asarray(got), np.asarray(want)


def _agree(got, want, rtol=1e-12, atol=1e-12):
    assert not np.isnan(got).any()
    assert np.array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=rtol, atol=atol)


@pytest.mark.parametrize("k,n,m,delta,rare", [
    (1, 3, 4, 1e-3, False), (10, 4, 4, 1e-6, False), (10, 4, 4, 1e-5, True),
    (7, 3, 5, 1e-8, True), (30, 2, 3, 1e-2, False), (100, 3, 4, 1e-6, False),
    (12, 4, 2, 1e-4, True)])
def test_the_kernel_is_the_reference(k, n, m, delta, rare):
    """Every mechanism's ε equals the XLA reference's to 1e-12 (both exact in double; only the
    order of the sums differs), ``+∞`` exactly where the reference's is."""
    log_K = _mechanisms(np.random.default_rng(k * 100 + m), 48, n, m, rare)
    assert composed.uses_native_kernel(jnp.asarray(log_K), k)
    got, want = _both(log_K, k, delta)
    _agree(got, want)
    assert got[-1] == 0.0


def test_neighbour_relations_and_the_notion_take_the_kernel():
    """A neighbour relation restricts the pairs as in the reference; ``level`` is the kernel's."""
    n = 4
    line = np.abs(np.subtract.outer(np.arange(n), np.arange(n))) == 1
    log_K = _mechanisms(np.random.default_rng(3), 24, n, 3)
    _agree(*_both(log_K, 9, 1e-5, line))
    mech = Mechanism.from_log_K(jnp.asarray(log_K), dtype=np.float64)
    np.testing.assert_array_equal(np.asarray(level("eps_composed", mech, k=9, delta=1e-5)),
                                  _both(log_K, 9, 1e-5)[0])


def test_losses_of_750_nats_against_the_50_digit_oracle():
    """k = 100 uses, a loss of 7.5 nats on the likely output: ε ≈ 750, where Q-masses above ε
    are e^−750 (the kernel's log-space path), against 50-digit mpmath from the count vectors."""
    from test_composition_tails import _oracle_eps

    P = np.array([0.996, 0.003, 0.001])
    Q = np.array([0.996 * math.exp(-7.5), 0.4, 0.0])
    Q[2] = 1.0 - Q[:2].sum()
    want = float(_oracle_eps(P, Q, 100, 1e-6))
    with np.errstate(divide="ignore"):
        log_K = jnp.log(jnp.asarray(np.stack([P, Q])))[None]
    got = float(composed._native(100, composed._Pairs(np.array([[0, 1]])), log_K,
                                 jnp.asarray(1e-6))[0])
    assert 700 < want < 750
    assert got == pytest.approx(want, rel=1e-12)


def test_the_infinite_atom_is_exact():
    """``P > 0 = Q`` on an output of mass p: the ``+∞`` atom has mass ``1 − (1 − p)^k``; ε is
    ``+∞`` exactly when that exceeds δ."""
    p, k = 1e-3, 10
    K = np.array([[0.5 - p, 0.5, p], [0.5, 0.5, 0.0]])
    mech = Mechanism.from_K(K, dtype=np.float64)
    floor = -math.expm1(k * math.log1p(-p))
    assert float(composed.eps_composed(mech, k=k, delta=floor * 0.999)) == math.inf
    assert math.isfinite(float(composed.eps_composed(mech, k=k, delta=floor * 1.001)))


def test_float32_is_the_float64_kernel_on_the_rounded_input():
    """In float32 the kernel computes in double on the float32 inputs: the float64 value of
    those inputs, rounded (the sweep's screen is exact up to its input's rounding)."""
    log_K = _mechanisms(np.random.default_rng(8), 32, 3, 4).astype(np.float32)
    with jax.enable_x64(False):
        mech = Mechanism.from_log_K(jnp.asarray(log_K), dtype=np.float32)
        got = np.asarray(jax.jit(lambda m: composed.eps_composed(m, k=10, delta=1e-5))(mech))
        inputs = np.asarray(mech.log_K)  # as the mechanism holds them (normalized in float32)
    assert got.dtype == np.float32
    pairs = composition._pair_indices(3, None)
    delta = np.full(32, np.float32(1e-5), np.float64)  # δ as float32 holds it
    want = np.asarray(native.composed_eps(jnp.asarray(inputs, np.float64), jnp.asarray(delta),
                                          10, pairs)[0])  # the same values, not renormalized
    _agree(got.astype(np.float64), want.astype(np.float32).astype(np.float64), rtol=0, atol=0)


@pytest.mark.parametrize("k,m", [(20, 4), (100, 3), (100, 4)])
def test_the_gradient_is_the_segment_formulas(k, m):
    """``d ε / d log K`` (through a row normalization): the attaining pair's segment formula at
    the kernel's segment; in float64 the reference's and central differences', in float32 within
    1e-4 of the float64 one on every mechanism (the reference's own float32 search, clipping to
    its bracket, reads 0 on some at k = 100; the seed here has such mechanisms)."""
    rng = np.random.default_rng(7 + k + m)
    u = rng.normal(size=(24, 3, m)) * rng.uniform(0.1, 2.0, size=(24, 1, 1))

    def grad(fn, dtype):
        def total(u):
            log_K = u - jax.nn.logsumexp(u, axis=-1, keepdims=True)
            return fn(Mechanism.from_log_K(log_K, dtype=dtype), k=k, delta=1e-5).sum()
        return jax.jit(jax.grad(total)), jax.jit(total)

    native64, value = grad(composed.eps_composed, np.float64)
    got = np.asarray(native64(jnp.asarray(u)))
    want = np.asarray(grad(composition.eps_composed, np.float64)[0](jnp.asarray(u)))
    scale = np.abs(want).max(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(got / scale, want / scale, atol=1e-10)
    x, h = jnp.asarray(u[:2]), 1e-5
    for idx in list(np.ndindex(x.shape))[::3]:
        e = np.zeros(x.shape)
        e[idx] = h
        central = (float(value(x + e)) - float(value(x - e))) / (2 * h)
        assert central == pytest.approx(float(got[:2][idx]), rel=1e-4, abs=1e-4)
    with jax.enable_x64(False):
        g32 = np.asarray(grad(composed.eps_composed, np.float32)[0](jnp.asarray(u, np.float32)))
    np.testing.assert_allclose(g32 / scale, want / scale, atol=1e-4)


def test_nan_vmap_and_traced_delta():
    """NaN in, NaN out (never a number); ``vmap`` over mechanisms and a δ traced by ``jit``
    give the unbatched values."""
    log_K = _mechanisms(np.random.default_rng(4), 6, 3, 3)
    bad = log_K.copy()
    bad[2, 1, 1] = np.nan  # a Mechanism refuses NaN: the kernel itself
    pairs = composition._pair_indices(3, None)
    for dtype in (np.float64, np.float32):
        got = np.asarray(native.composed_eps(jnp.asarray(bad, dtype), jnp.full(6, 1e-4, dtype),
                                             5, pairs)[0])
        assert np.isnan(got[2]) and not np.isnan(np.delete(got, 2)).any()
    want = _both(log_K, 5, 1e-4)[0]
    mapped = jax.vmap(lambda x: composed.eps_composed(Mechanism.from_log_K(x, dtype=np.float64),
                                                      k=5, delta=1e-4))(jnp.asarray(log_K))
    np.testing.assert_allclose(np.asarray(mapped), want, rtol=1e-14)  # vmap's normalization
    traced = jax.jit(lambda x, d: composed.eps_composed(Mechanism.from_log_K(x, dtype=np.float64),
                                                        k=5, delta=d))(jnp.asarray(log_K), 1e-4)
    np.testing.assert_allclose(np.asarray(traced), want, rtol=1e-14)


def test_under_shard_map():
    """The sweeps evaluate levels under ``shard_map`` over the batch (float32)."""
    from jax.sharding import Mesh, PartitionSpec

    mesh = Mesh(np.array(jax.devices()[:1]), ("batch",))
    log_K = _mechanisms(np.random.default_rng(2), 8, 3, 3).astype(np.float32)
    sharded = jax.jit(jax.shard_map(
        lambda x: composed.eps_composed(Mechanism.from_log_K(x, dtype=np.float32), k=6,
                                        delta=1e-3),
        mesh=mesh, in_specs=PartitionSpec("batch"), out_specs=PartitionSpec("batch")))
    with jax.enable_x64(False):
        got = np.asarray(sharded(jnp.asarray(log_K)))
    want, _ = _both(log_K.astype(np.float64), 6, 1e-3)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_where_the_kernel_does_not_apply():
    """One output, too many outer count vectors, k above the tail tables' range: the
    reference's path (and its errors)."""
    x = jnp.zeros((2, 3, 4))
    assert composed.uses_native_kernel(x, 10)
    assert not composed.uses_native_kernel(jnp.zeros((2, 3, 1)), 10)
    assert not composed.uses_native_kernel(x, composition.MAX_TAIL_USES + 1)
    assert not composed.uses_native_kernel(jnp.zeros((2, 3, 9), np.float64), 900)
