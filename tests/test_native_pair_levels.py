"""The float32 pair levels by the native kernel (jaxpriv/kernels/native/zcdp_orders.cc and
sorted_pairs.cc, through jaxpriv.kernels.pair_levels). zCDP: against the float64 reference
(jaxpriv.core.zcdp) and the 50-digit mpmath oracle, the higher of two local maxima, edge cases,
its derivative (the envelope theorem's at the kernel's order) and the premise retraction that
uses it. ε(δ) and GDP: against the float64 reference and closed forms, edge cases, their
derivatives (the reference's)."""

from __future__ import annotations

import subprocess

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import reference
from jaxpriv.core import pair_notions, retractions
from jaxpriv.core import zcdp as core_zcdp
from jaxpriv.core.mechanisms import Mechanism
from jaxpriv.kernels import native
from jaxpriv.kernels import pair_levels as kernel_levels

pytestmark = pytest.mark.usefixtures("native_built")


def _pairs(rng, count, m, concentration):
    with np.errstate(divide="ignore"):
        return np.log(rng.dirichlet(np.full(m, concentration), size=(count, 2)))


def _float32(logs):
    return jnp.asarray(logs, jnp.float32)


def _reference(log_P, log_Q):
    """The float64 level of the same float32-rounded pairs."""
    with jax.enable_x64(True):
        return np.asarray(jax.jit(core_zcdp.zcdp_pair)(jnp.asarray(np.asarray(log_P), jnp.float64),
                                                        jnp.asarray(np.asarray(log_Q), jnp.float64)))


@pytest.mark.parametrize("m, concentration", [(2, 1.0), (3, 0.05), (4, 0.5), (8, 0.3), (5, 30.0)])
def test_native_level_matches_the_float64_reference(m, concentration):
    """On 3,000 random pairs each (near-deterministic to near-uniform, zeros included): the
    kernel's ρ is the float64 reference's to 2e-6 relative (float32 inputs: their rows sum to 1
    only to ~1e-7, and the reference's log-sum-exp branch reads that normalization differently
    from the kernel's f-divergence form by ~α·1e-7), infinite where it is, 0 where it is."""
    rng = np.random.default_rng(m * 100 + int(concentration * 10))
    logs = _float32(_pairs(rng, 3000, m, concentration))
    value, order = jax.jit(native.zcdp_orders)(logs[:, 0], logs[:, 1])
    value, order = np.asarray(value, np.float64), np.asarray(order)
    expected = _reference(logs[:, 0], logs[:, 1])
    assert not np.isnan(value).any() and not np.isnan(order).any()
    np.testing.assert_array_equal(np.isinf(value), np.isinf(expected))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(value[finite], expected[finite], rtol=2e-6, atol=1e-30)


@pytest.mark.parametrize("K, expected", [
    ([[0.0013, 0.6024, 0.3963], [0.0001, 0.8532, 0.1467]], 0.2102622),
    ([[0.0570942905709429, 0.09419058094190581, 0.8487151284871512], [0.004, 0.4931, 0.5029]],
     None),
])
def test_native_level_finds_the_higher_of_two_local_maxima(K, expected):
    """The two pairs of tests/test_pair_notions.py whose ``D_α/α`` has two local maxima; the
    float32 XLA level (12-point grid, golden section) reads the lower one on the first."""
    want = float(reference.zcdp(*reference._m(K)))  # 50 digits
    if expected is not None:
        assert want == pytest.approx(expected, rel=1e-6)
    logs = _float32(np.log(np.asarray(K)))
    got = float(native.zcdp_orders(logs[0], logs[1])[0])
    assert got == pytest.approx(want, rel=2e-6)


def test_native_level_is_never_below_a_dense_scan_of_orders():
    """8,000 near-deterministic pairs (where two local maxima are most frequent): ρ is at least
    the max of ``D_α/α`` (float64) over 1,301 orders and the KL limit, to 2e-6; the float32 XLA
    level falls below it by more than 1e-4 on some (its grid's best point on the lower peak)."""
    rng = np.random.default_rng(11)
    xla_short = 0
    for m in (3, 8):
        logs = _float32(_pairs(rng, 4000, m, 0.05))
        value = np.asarray(jax.jit(native.zcdp_orders)(logs[:, 0], logs[:, 1])[0], np.float64)
        with jax.enable_x64(True):
            log_P = jnp.asarray(np.asarray(logs[:, 0]), jnp.float64)
            log_Q = jnp.asarray(np.asarray(logs[:, 1]), jnp.float64)
            orders = jnp.asarray(1.0 + np.exp(np.linspace(-14.0, 12.0, 1301)))
            scan = np.asarray(jax.jit(lambda p, q: jnp.max(jax.vmap(
                lambda a: pair_notions.renyi_over_order(p, q, a))(orders), axis=0))(log_P, log_Q))
            best = np.maximum(scan, np.asarray(pair_notions.kl_pair(log_P, log_Q)))
        finite = np.isfinite(best)
        assert np.all(value[finite] >= best[finite] * (1 - 2e-6)), m
        xla = np.asarray(jax.jit(core_zcdp.zcdp_pair)(logs[:, 0], logs[:, 1]), np.float64)
        xla_short += int(np.sum(xla[finite] < best[finite] * (1 - 1e-4)))
    assert xla_short > 0  # what the kernel is for


def test_native_level_edge_cases():
    """``P = Q``: 0; ``Q = 0 < P``: ∞; ``P = 0 < Q`` somewhere: finite; NaN in: NaN out; the
    order is ``−∞`` exactly where the KL limit is the max, and the value there is the KL."""
    ninf = -np.inf
    half = np.log(0.5)
    log_P = _float32([[half, half], [half, half], [ninf, 0.0], [np.log(0.3), np.log(0.7)],
                      [np.nan, 0.0]])
    log_Q = _float32([[half, half], [0.0, ninf], [half, half], [np.log(0.3), np.log(0.7)],
                      [half, half]])
    value, order = (np.asarray(a) for a in native.zcdp_orders(log_P, log_Q))
    assert value[0] == 0.0 and value[3] == 0.0
    # P = (0, 1) against Q = (½, ½): D_α = log 2 for every α, so ρ = sup log 2/α → log 2 (α → 1) = KL
    assert value[2] == pytest.approx(np.log(2.0), rel=1e-6) and order[2] == -np.inf
    assert np.isinf(value[1]) and value[1] > 0
    assert np.isnan(value[4])
    with pytest.raises(TypeError, match="float32"):
        native.zcdp_orders(jnp.zeros(3, jnp.float16), jnp.zeros(3, jnp.float16))
    with pytest.raises(TypeError, match="one shape"):
        native.zcdp_orders(jnp.zeros((2, 3), jnp.float32), jnp.zeros((3,), jnp.float32))


def _group_mechanisms(rng, count, n, m, concentration):
    """``count`` random ``n × m`` mechanisms' ordered pairs, float32 ``(count, n, n, m)`` each
    of log P and log Q, as the mechanism level lays them out (the diagonal included)."""
    with np.errstate(divide="ignore"):
        log_K = np.log(rng.dirichlet(np.full(m, concentration), size=(count, n)))
    log_K = _float32(log_K)
    return pair_notions.split_pairs(log_K)


@pytest.mark.parametrize("n, m, concentration", [(2, 2, 1.0), (3, 3, 0.05), (4, 4, 1.0),
                                                 (4, 4, 0.3), (4, 4, 30.0), (6, 8, 0.5)])
def test_grouped_level_keeps_the_max_and_the_pairs_that_attain_it(n, m, concentration):
    """``group = n²`` (one mechanism's pairs): the max over each group is the ungrouped kernel's
    bit for bit, the pairs attaining it and their orders too; every other pair's value is at
    most its ungrouped level (a lower bound) and below the max by more than 1e-6 relative, or is
    its ungrouped value (a searched pair). And the kernel skips searches."""
    rng = np.random.default_rng(n * 1000 + m * 10 + int(concentration * 10))
    log_P, log_Q = _group_mechanisms(rng, 2000, n, m, concentration)
    full_v, full_o = (np.asarray(a) for a in jax.jit(native.zcdp_orders)(log_P, log_Q))
    v, o = (np.asarray(a) for a in jax.jit(lambda p, q: native.zcdp_orders(p, q, n * n))(
        log_P, log_Q))
    full_v, full_o, v, o = (a.reshape(-1, n * n) for a in (full_v, full_o, v, o))
    top = full_v.max(axis=1)
    np.testing.assert_array_equal(v.max(axis=1), top)
    at_top = full_v == top[:, None]
    np.testing.assert_array_equal(v == top[:, None], at_top)
    np.testing.assert_array_equal(o[at_top], full_o[at_top])
    assert np.all(v <= full_v)
    searched = v == full_v
    below = top[:, None].astype(np.float64) * (1 - 5e-7)
    assert np.all(searched | (v.astype(np.float64) < below))
    assert np.all(searched | (o == -np.inf))  # a skipped pair reads its KL, order −∞
    if n >= 4:  # the point of grouping: many pairs are never searched (a skipped pair whose
        # lower bound is its level reads as searched here)
        assert np.mean(~searched[:, ~np.eye(n, dtype=bool).ravel()]) > 0.2


def test_grouped_level_edge_cases():
    """A group with an infinite pair reads ∞ (every other pair skipped), a NaN pair stays NaN,
    a group of equal rows reads 0; ``group`` must divide the pairs."""
    ninf = -np.inf
    half = np.log(0.5)
    rows = [[[half, half], [np.log(0.3), np.log(0.7)]],   # finite
            [[0.0, ninf], [half, half]],                   # Q = 0 < P in one pair: ∞
            [[np.nan, 0.0], [half, half]],                 # NaN
            [[half, half], [half, half]]]                  # equal rows: 0
    log_P, log_Q = pair_notions.split_pairs(_float32(rows))
    v, _ = (np.asarray(a) for a in native.zcdp_orders(log_P, log_Q, 4))
    full, _ = (np.asarray(a) for a in native.zcdp_orders(log_P, log_Q))
    v, full = v.reshape(4, 4), full.reshape(4, 4)
    assert v[0].max() == full[0].max() > 0
    assert v[1].max() == np.inf
    assert np.isnan(v[2]).any() and np.isnan(v[2]).sum() == np.isnan(full[2]).sum()
    assert v[3].max() == 0.0
    for bad in (3, 0, 2.0):
        with pytest.raises(ValueError, match="group"):
            native.zcdp_orders(log_P, log_Q, bad)


def test_grouped_twins_read_alike_and_as_the_ungrouped_kernel():
    """Pairs equal up to a permutation of their outputs (every pair of a randomized response;
    rows that permute one another; the grouped kernel finds them by a hash that ignores the
    order and solves them once) read alike, and the group's max and the pairs attaining it are
    the ungrouped kernel's bit for bit; so for a near twin that is not one."""
    rng = np.random.default_rng(23)
    row = rng.dirichlet(np.ones(5))
    permuted = np.stack([rng.permutation(row) for _ in range(5)])
    rr = np.full((4, 4), 0.1) + np.eye(4) * 0.6
    near = permuted.copy()
    near[1] = near[0][::-1] * (1 + 1e-6 * np.arange(5))  # a pair close to, but not, a twin
    near[1] /= near[1].sum()
    for rows in (permuted, rr, near):
        log_P, log_Q = pair_notions.split_pairs(_float32(np.log(rows))[None])
        size = rows.shape[0] ** 2
        v, o = (np.asarray(a).ravel() for a in native.zcdp_orders(log_P, log_Q, size))
        full_v, full_o = (np.asarray(a).ravel() for a in native.zcdp_orders(log_P, log_Q))
        assert v.max() == full_v.max() > 0
        at_top = full_v == full_v.max()
        np.testing.assert_array_equal(v == v.max(), at_top)
        np.testing.assert_array_equal(o[at_top], full_o[at_top])
    off = ~np.eye(4, dtype=bool).ravel()  # randomized response: its 12 pairs are twins
    log_P, log_Q = pair_notions.split_pairs(_float32(np.log(rr))[None])
    v, o = (np.asarray(a).ravel() for a in native.zcdp_orders(log_P, log_Q, 16))
    assert len(set(v[off].tolist())) == 1 and len(set(o[off].tolist())) == 1


@pytest.mark.parametrize("log_p", [-710.0, -750.0])
def test_grouped_level_bounds_a_pair_whose_probabilities_are_below_double_precision(log_p):
    """A pair whose only outputs with P > 0 have log P below −700 (its P sums to 0 in double,
    its level taken in logs: 0.035 here) is never skipped: its first-pass ceiling was
    ``0/0``, read as its KL (0), and the group's max came out as the other pair's (a review
    found it; at −750 before the first pass was vectorized too)."""
    log_P = _float32([[log_p, -np.inf], np.log([0.52, 0.48])])
    log_Q = _float32([[log_p - 10.0, -np.inf], np.log([0.48, 0.52])])
    alone_v, alone_o = (np.asarray(a) for a in native.zcdp_orders(log_P, log_Q))
    grouped_v, grouped_o = (np.asarray(a) for a in native.zcdp_orders(log_P, log_Q, 2))
    assert alone_v[0] > alone_v[1] > 0
    np.testing.assert_array_equal(grouped_v, alone_v)
    np.testing.assert_array_equal(grouped_o, alone_o)


def test_level_keeps_outputs_below_double_precision():
    """An output whose P is 0 in double precision (log P = −800) still carries ``D_∞`` = 200 and
    with it every ``D_α`` of large α: the kernel reads it from log P (it read
    ``P·e^{t(L − D_∞)} = 0`` there, a level of −∞ at large orders), against the float64
    reference, and the grouped max is the ungrouped one."""
    log_P = np.array([np.log(0.5), np.log(0.5), -800.0])
    log_Q = np.array([np.log(0.3), np.log(0.7), -1000.0])
    want = float(_reference(_float32(log_P), _float32(log_Q)))
    got = float(native.zcdp_orders(_float32(log_P), _float32(log_Q))[0])
    assert np.isfinite(got) and got == pytest.approx(want, rel=2e-6)
    rows = _float32([log_P, log_Q, [np.log(0.4), np.log(0.6), -900.0]])
    pair_P, pair_Q = pair_notions.split_pairs(rows)
    grouped = np.asarray(native.zcdp_orders(pair_P, pair_Q, 9)[0])
    alone = np.asarray(native.zcdp_orders(pair_P, pair_Q)[0])
    assert grouped.max() == alone.max() and np.isfinite(alone.max())


def test_mechanism_level_and_gradient_are_the_ungrouped_kernels():
    """``kernel_levels.zcdp`` (the pairs grouped per mechanism) against the max of the ungrouped
    kernel's pair levels: equal values and equal gradients, ties included (equal rows)."""
    _level_equals_the_ungrouped_max(kernel_levels.zcdp, kernel_levels.zcdp_pair, 17)


def _level_equals_the_ungrouped_max(level, pair_level, seed):
    """``level`` of 32 random 4×4 mechanisms (ties included: equal rows, all rows equal)
    against the max of ``pair_level`` over their pairs: equal values and gradients."""
    rng = np.random.default_rng(seed)
    logits = jnp.asarray(rng.normal(size=(32, 4, 4)) * np.array([0.1, 1.0, 3.0, 6.0] * 8)[
        :, None, None], jnp.float32)
    logits = logits.at[0, 1].set(logits[0, 0]).at[1].set(logits[1, 0])

    def ungrouped(mech):
        log_P, log_Q = pair_notions.split_pairs(mech.log_K)
        return pair_notions.max_over_pairs(pair_level(log_P, log_Q), pair_notions.pair_mask(4))

    value, grad = _level_and_grad(level, logits)
    want_value, want_grad = _level_and_grad(ungrouped, logits)
    np.testing.assert_array_equal(np.asarray(value), np.asarray(want_value))
    np.testing.assert_allclose(np.asarray(grad), np.asarray(want_grad), rtol=1e-6, atol=1e-7)


def _level_and_grad(fn, logits):
    n = logits.shape[-2]

    def one(lg):
        mech = Mechanism(jax.nn.log_softmax(lg, -1), jnp.full((n,), -jnp.log(n)),
                         jnp.full((n,), -jnp.log(n)), None, None)
        return fn(mech)
    return jax.jit(jax.vmap(jax.value_and_grad(one)))(logits)


def test_native_level_derivative_is_the_envelope_theorems():
    """The mechanism level's gradient (through the kernel's custom JVP) against central finite
    differences of the float64 reference level, on 3×3 mechanisms from near-uniform to
    near-deterministic; no NaN, also where rows coincide."""
    rng = np.random.default_rng(3)
    scales = np.array([0.05, 0.5, 1.0, 3.0])[:, None, None]
    logits = jnp.asarray(rng.normal(size=(4, 3, 3)) * scales, jnp.float32)
    logits = logits.at[0, 1].set(logits[0, 0])  # two equal rows
    value, grad = _level_and_grad(kernel_levels.zcdp, logits)
    assert jnp.isfinite(grad).all()
    direction = rng.normal(size=(4, 3, 3))
    with jax.enable_x64(True):
        from jaxpriv.core import pair_levels

        def f64(lg):
            return jax.vmap(lambda g: pair_levels.zcdp(Mechanism(
                jax.nn.log_softmax(g, -1), jnp.full((3,), -jnp.log(3.0)),
                jnp.full((3,), -jnp.log(3.0)), None, None)))(lg)
        base = jnp.asarray(np.asarray(logits), jnp.float64)
        h = 1e-5
        numeric = np.asarray((f64(base + h * direction) - f64(base - h * direction)) / (2 * h))
        reference_value = np.asarray(f64(base))
    analytic = np.sum(np.asarray(grad, np.float64) * direction, axis=(1, 2))
    np.testing.assert_allclose(np.asarray(value), reference_value, rtol=2e-5)
    np.testing.assert_allclose(analytic, numeric, rtol=2e-3, atol=1e-6)


def test_native_level_retracts_a_premise_exactly():
    """The search's premise retraction (root finding on the level, implicit gradient) with the
    native level: every retracted mechanism's float64 zCDP level is at most the premise level
    and within 1e-4 of it; gradients are finite."""
    rng = np.random.default_rng(5)
    logits = jnp.asarray(2.0 * rng.normal(size=(64, 3, 3)), jnp.float32)
    x = 0.05

    def retracted(lg):
        log_K0 = jax.nn.log_softmax(lg, -1)
        mech = Mechanism(log_K0, jnp.full((3,), -jnp.log(3.0)), jnp.full((3,), -jnp.log(3.0)),
                         None, None)
        keep = retractions.bisect_keep(kernel_levels.zcdp, mech, x)
        return retractions.mix(log_K0, jnp.full_like(log_K0, -jnp.log(3.0)), keep)

    log_K = jax.jit(jax.vmap(retracted))(logits)
    grads = jax.jit(jax.vmap(jax.grad(lambda lg: jnp.sum(jnp.exp(retracted(lg))[0, 0]))))(logits)
    assert jnp.isfinite(grads).all()
    with jax.enable_x64(True):
        from jaxpriv.core import pair_levels
        K64 = np.exp(np.asarray(log_K, np.float64))
        K64 /= K64.sum(-1, keepdims=True)
        levels = np.asarray(jax.vmap(lambda lk: pair_levels.zcdp(Mechanism(
            lk, jnp.full((3,), -jnp.log(3.0)), jnp.full((3,), -jnp.log(3.0)), None, None)))(
                jnp.log(jnp.asarray(K64))))
    assert np.all(levels <= x * (1 + 1e-5)) and np.all(levels >= x * (1 - 1e-4))


def test_float64_and_other_backends_keep_the_reference():
    """The kernel serves float32 only: a float64 mechanism's level is the reference's."""
    K = np.array([[0.0013, 0.6024, 0.3963], [0.0001, 0.8532, 0.1467]])
    with jax.enable_x64(True):
        log_K = jnp.log(jnp.asarray(K))
        assert not kernel_levels.uses_native_kernel(log_K)
        mech = Mechanism(log_K, jnp.log(jnp.full((2,), 0.5)), jnp.log(jnp.full((2,), 0.5)), None,
                         None)
        from jaxpriv.core import pair_levels
        assert float(kernel_levels.zcdp(mech)) == float(pair_levels.zcdp(mech))
    assert kernel_levels.uses_native_kernel(jnp.asarray(log_K, jnp.float32)) == (
        jax.default_backend() == "cpu")


# -- ε(δ) -------------------------------------------------------------------------------------

@pytest.mark.parametrize("m, concentration", [(2, 1.0), (4, 0.05), (4, 0.5), (8, 5.0)])
@pytest.mark.parametrize("delta", [2.0 ** -17, 2.0 ** -7, 0.25])  # exact in float32
def test_native_eps_at_delta_matches_the_float64_reference(m, concentration, delta):
    """The kernel's closed form in double precision against the float64 reference on the same
    float32 inputs and δ: equal to 1e-9 (the float32 XLA path underflows ``e^{log Q}`` below
    ``e^−87`` and reads some of these ∞)."""
    rng = np.random.default_rng(m * 31 + int(concentration * 100))
    logs = _float32(_pairs(rng, 3000, m, concentration))
    got = np.asarray(jax.jit(native.eps_at_delta)(
        logs[:, 0], logs[:, 1], jnp.full((3000,), delta, jnp.float32)), np.float64)
    with jax.enable_x64(True):
        want = np.asarray(jax.jit(pair_notions.eps_at_delta_pair)(
            jnp.asarray(np.asarray(logs[:, 0]), jnp.float64),
            jnp.asarray(np.asarray(logs[:, 1]), jnp.float64), delta))
    assert not np.isnan(got).any()
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-6, atol=1e-9)


def test_native_eps_at_delta_edge_cases():
    """``P = Q``: 0; more than δ of P's mass where ``Q = 0``: ∞; less: finite; NaN in (a log or
    δ): NaN out; mismatched shapes: a TypeError."""
    ninf, half = -np.inf, np.log(0.5)
    log_P = _float32([[half, half], [half, half], [np.log(1e-7), np.log(1 - 1e-7)], [np.nan, 0.0],
                      [half, half]])
    log_Q = _float32([[half, half], [0.0, ninf], [ninf, 0.0], [half, half], [0.0, ninf]])
    delta = jnp.asarray([1e-5, 1e-5, 1e-5, 1e-5, np.nan], jnp.float32)
    got = np.asarray(native.eps_at_delta(log_P, log_Q, delta))
    assert got[0] == 0.0 and np.isinf(got[1]) and np.isfinite(got[2])
    assert np.isnan(got[3]) and np.isnan(got[4])
    with pytest.raises(TypeError, match="float32|shape"):
        native.eps_at_delta(log_P, log_Q, delta[:2])


def test_native_eps_at_delta_level_and_derivative():
    """The mechanism level (max over ordered pairs) against the float32 reference, and its
    derivative, which is the reference's: equal."""
    from jaxpriv.core import pair_levels
    rng = np.random.default_rng(9)
    logits = jnp.asarray(rng.normal(size=(32, 3, 4)) * 2.0, jnp.float32)

    def level(fn):
        def one(lg):
            return fn(Mechanism(jax.nn.log_softmax(lg, -1), jnp.full((3,), -jnp.log(3.0)),
                                jnp.full((3,), -jnp.log(3.0)), None, None), delta=1e-3)
        return jax.jit(jax.vmap(jax.value_and_grad(one)))(logits)

    value, grad = level(kernel_levels.eps_at_delta)
    ref_value, ref_grad = level(pair_levels.eps_at_delta)
    assert kernel_levels.uses_native_kernel(logits)
    np.testing.assert_allclose(np.asarray(value), np.asarray(ref_value), rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(grad), np.asarray(ref_grad))
    plain = jax.jit(jax.vmap(lambda lg: kernel_levels.eps_at_delta(Mechanism(
        jax.nn.log_softmax(lg, -1), jnp.full((3,), -jnp.log(3.0)), jnp.full((3,), -jnp.log(3.0)),
        None, None), delta=1e-3)))(logits)
    np.testing.assert_allclose(np.asarray(plain), np.asarray(value), rtol=1e-6)


# -- GDP --------------------------------------------------------------------------------------

@pytest.mark.parametrize("m, concentration", [(2, 1.0), (4, 0.02), (4, 0.5), (8, 200.0)])
def test_native_gdp_matches_the_float64_reference(m, concentration):
    """The vertex formula in double precision (Φ⁻¹ by Acklam's approximation and a Halley step)
    against the float64 reference on the same float32 inputs: equal to float32's rounding (the
    float32 XLA path underflows near-deterministic pairs' probabilities: up to 100% off)."""
    rng = np.random.default_rng(m * 7 + int(concentration * 10))
    logs = _float32(_pairs(rng, 3000, m, concentration))
    got = np.asarray(jax.jit(native.gdp)(logs[:, 0], logs[:, 1]), np.float64)
    with jax.enable_x64(True):
        want = np.asarray(jax.jit(pair_notions.gdp_pair)(
            jnp.asarray(np.asarray(logs[:, 0]), jnp.float64),
            jnp.asarray(np.asarray(logs[:, 1]), jnp.float64)))
    assert not np.isnan(got).any()
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=2e-7, atol=1e-12)


def test_native_gdp_closed_form_and_edge_cases():
    """Randomized response's μ = 2Φ⁻¹(e^ε/(1 + e^ε)) (Dong, Roth, Su 2022, §2.3: the (ε, 0)-DP
    trade-off meets G_μ at the middle vertex); ``P = Q``: 0; disjoint supports: ∞; NaN: NaN."""
    from scipy.stats import norm
    eps = 1.3
    p = np.exp(eps) / (1 + np.exp(eps))
    log_P = _float32([[np.log(p), np.log(1 - p)], [np.log(0.5), np.log(0.5)], [0.0, -np.inf],
                      [np.nan, 0.0]])
    log_Q = _float32([[np.log(1 - p), np.log(p)], [np.log(0.5), np.log(0.5)], [-np.inf, 0.0],
                      [0.0, -np.inf]])
    got = np.asarray(native.gdp(log_P, log_Q))
    assert got[0] == pytest.approx(2 * norm.ppf(p), rel=1e-6)
    assert got[1] == 0.0 and np.isinf(got[2]) and np.isnan(got[3])


@pytest.mark.parametrize("m, concentration", [(3, 1.0), (4, 0.05), (6, 0.3)])
def test_gdp_is_symmetric_and_the_kernel_reads_a_pair_and_its_reverse_alike(m, concentration):
    """``μ(P, Q) = μ(Q, P)``: ``T(Q, P)`` is the reflection of ``T(P, Q)`` in the diagonal and
    ``G_μ`` its own (Dong, Roth, Su 2022, §2). The float64 reference, written for one direction,
    agrees both ways to 1e-9 (zeros, one-sided supports and ∞ included); so the kernel solves each
    pair in one direction and reads a pair and its reverse bit for bit alike, grouped or not."""
    rng = np.random.default_rng(m * 11 + int(concentration * 10))
    logs = np.array(_float32(_pairs(rng, 3000, m, concentration)))  # concentration 0.05: zeros
    logs[:40, 1, 0] = -np.inf  # Q = 0 < P at an output: one-sided
    logs = _float32(logs)
    log_P, log_Q = logs[:, 0], logs[:, 1]
    with jax.enable_x64(True):
        reference_gdp = jax.jit(pair_notions.gdp_pair)
        forward, backward = (np.asarray(reference_gdp(jnp.asarray(np.asarray(a), jnp.float64),
                                                      jnp.asarray(np.asarray(b), jnp.float64)))
                             for a, b in ((log_P, log_Q), (log_Q, log_P)))
    np.testing.assert_array_equal(np.isinf(forward), np.isinf(backward))
    assert np.isinf(forward[:40]).all() and np.isfinite(forward).sum() > 2000
    finite = np.isfinite(forward)
    np.testing.assert_allclose(forward[finite], backward[finite], rtol=1e-9, atol=1e-12)
    one_way = np.asarray(native.gdp(log_P, log_Q))
    np.testing.assert_array_equal(one_way, np.asarray(native.gdp(log_Q, log_P)))
    both = jnp.stack([logs, logs[:, ::-1]], 1)  # groups of 2: a pair, then its reverse
    grouped = np.asarray(native.gdp(both[:, :, 0].reshape(-1, m), both[:, :, 1].reshape(-1, m), 2))
    np.testing.assert_array_equal(grouped.reshape(-1, 2).max(1), one_way)


def test_native_gdp_level_and_derivative():
    """The mechanism level against the float32 reference; its derivative is the reference's."""
    from jaxpriv.core import pair_notions as reference_levels
    rng = np.random.default_rng(4)
    logits = jnp.asarray(rng.normal(size=(32, 3, 4)) * 1.5, jnp.float32)

    def level(fn):
        def one(lg):
            return fn(Mechanism(jax.nn.log_softmax(lg, -1), jnp.full((3,), -jnp.log(3.0)),
                                jnp.full((3,), -jnp.log(3.0)), None, None))
        return jax.jit(jax.vmap(jax.value_and_grad(one)))(logits)

    value, grad = level(kernel_levels.gdp)
    ref_value, ref_grad = level(reference_levels.gdp)
    np.testing.assert_allclose(np.asarray(value), np.asarray(ref_value), rtol=1e-4)
    np.testing.assert_array_equal(np.asarray(grad), np.asarray(ref_grad))


def test_eps_at_delta_where_q_is_subnormal():
    """A mechanism the quick audit drew at seed 1: ``Q = 5.3483e-320`` on the output where
    ``P ≈ 1``. ``e^{log Q}`` is subnormal in float64 and XLA's threads flush it to 0, so ``B``
    read 0 and ``ε(δ)`` read ∞ — in the float32 screen and in the float64 check alike: a false
    violation of D6–D8. With ``log B`` a log-sum-exp both read the closed form
    ``log((1 − δ)/Q)`` (the only prefix with ``A > δ`` before the last)."""
    log_P = np.log(np.array([3.996529368669191e-21, 8.049344123451504e-22, 1.0,
                             2.359115544895959e-77]))
    log_Q = np.log(np.array([6.314496006150485e-41, 4.7192371544636316e-105, 5.3483e-320, 1.0]))
    want = np.log(0.99) - np.log(5.3483e-320)  # 735.1404…
    with jax.enable_x64(True):
        got64 = float(pair_notions.eps_at_delta_pair(jnp.asarray(log_P), jnp.asarray(log_Q), 0.01))
    assert got64 == pytest.approx(want, rel=1e-9)
    got = float(native.eps_at_delta(_float32(log_P), _float32(log_Q), jnp.float32(0.01)))
    xla32 = float(pair_notions.eps_at_delta_pair(_float32(log_P), _float32(log_Q), 0.01))
    assert got == pytest.approx(want, rel=1e-6) and xla32 == pytest.approx(want, rel=1e-5)


# a mechanism the quick audit's sweep drew at seed 1 (its logs as drawn, float32): row 1 puts
# e^−735 (subnormal in float64) on output 2, where row 2 puts almost all its mass
SUBNORMAL_ROWS = np.array([[-34.34284, -21.883728, -102.26891, 0.0],
                           [-92.56314, -240.21979, -735.15045, 0.0],
                           [-46.96886, -48.57128, 0.0, -176.44077],
                           [-29.915852, 0.0, -16.141392, -239.47656]], np.float32)


def test_zcdp_where_p_is_subnormal():
    """The native zCDP level read NaN for the pairs (row 1, row 2) and (row 1, row 3): the KL
    term ``P φ(−L)`` with ``φ(735) = ∞`` and ``P = e^−735`` flushed to 0 on XLA's threads
    (``0·∞``); the sweeps of D8/D9 at seed 1 counted 2 NaN mechanisms. Now ``Q − P + P L``
    there: the level is the float64 reference's, for every ordered pair and the mechanism."""
    logs = SUBNORMAL_ROWS.astype(np.float64)
    logs = (logs - np.log(np.exp(logs).sum(-1, keepdims=True))).astype(np.float32)
    i, j = np.array([(a, b) for a in range(4) for b in range(4) if a != b]).T
    got = np.asarray(native.zcdp_orders(_float32(logs[i]), _float32(logs[j]))[0])
    want = _reference(logs[i], logs[j])
    assert np.all(np.isfinite(got)) and np.all(np.isfinite(want))
    np.testing.assert_allclose(got, want, rtol=1e-5)
    n = 4
    uniform = jnp.full((1, n), -np.log(n), jnp.float32)
    mech = Mechanism(_float32(logs[None]), uniform, uniform, None, None)
    level = float(kernel_levels.zcdp(mech)[0])
    assert level == pytest.approx(float(np.max(want)), rel=1e-5)


def _mp_pair(P, Q):
    """The pair normalized in 500-digit mpmath, and its logs as float64 (what jaxpriv gets)."""
    import mpmath as mp

    P = [mp.mpf(float(x)) for x in P]
    Q = [mp.mpf(float(x)) for x in Q]
    P = [x / mp.fsum(P) for x in P]
    Q = [x / mp.fsum(Q) for x in Q]
    return P, Q, np.array([float(mp.log(x)) for x in P]), np.array([float(mp.log(x)) for x in Q])


def test_gdp_where_a_sum_is_subnormal():
    """The same mechanism: the last vertex's ``Q(Sᶜ) = 5.3e-320`` is subnormal, XLA flushed it
    to 0 and ``Φ⁻¹(1 − Q(Sᶜ))`` read +∞, so μ read ∞ (float64 reference, XLA float32 and the
    native kernel alike) for a finite 47.566 (the 2^m-subset mpmath oracle at 500 digits). Now
    every sum is a log-sum-exp and every probit is taken from a log."""
    import mpmath as mp

    P = [3.996529368669191e-21, 8.049344123451504e-22, 1.0, 2.359115544895959e-77]
    Q = [6.314496006150485e-41, 4.7192371544636316e-105, 5.3483e-320, 1.0]
    with mp.workdps(500):
        Pm, Qm, log_P, log_Q = _mp_pair(P, Q)
        want = float(reference.gdp(Pm, Qm))
    assert want == pytest.approx(47.5656501852548, rel=1e-12)
    with jax.enable_x64(True):
        got64 = float(pair_notions.gdp_pair(jnp.asarray(log_P), jnp.asarray(log_Q)))
    assert got64 == pytest.approx(want, rel=1e-9)
    got = float(native.gdp(_float32(log_P), _float32(log_Q)))
    xla32 = float(pair_notions.gdp_pair(_float32(log_P), _float32(log_Q)))
    assert got == pytest.approx(want, rel=1e-6) and xla32 == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize("seed", [0, 1])
def test_gdp_with_entries_far_below_the_normal_range(seed):
    """Pairs with entries between e^−760 and e^−701 (sums that are subnormal or nearly):
    the float64 reference against the mpmath oracle on a few, the native kernel against the
    float64 reference on many; never ∞ where no entry is zero."""
    import mpmath as mp

    rng = np.random.default_rng(seed)
    count, m = 400, 4
    logs = _pairs(rng, count, m, 1.0)
    tiny = rng.random(logs.shape) < 0.3
    logs = np.where(tiny, rng.uniform(-760.0, -701.0, logs.shape), logs)
    logs -= np.logaddexp.reduce(logs, axis=-1, keepdims=True)  # rows sum to 1 again
    with jax.enable_x64(True):
        ref = np.asarray(jax.jit(pair_notions.gdp_pair)(jnp.asarray(logs[:, 0]),
                                                         jnp.asarray(logs[:, 1])))
    assert np.isfinite(ref).all()
    with mp.workdps(500):
        for i in range(3):  # 6 pairs over the two seeds: 500-digit mpmath is slow
            P = [mp.exp(mp.mpf(float(x))) for x in logs[i, 0]]
            Q = [mp.exp(mp.mpf(float(x))) for x in logs[i, 1]]
            want = float(reference.gdp([x / mp.fsum(P) for x in P], [x / mp.fsum(Q) for x in Q]))
            assert ref[i] == pytest.approx(want, rel=1e-9, abs=1e-9)
    rounded = np.asarray(_float32(logs), np.float64)
    with jax.enable_x64(True):
        ref32 = np.asarray(jax.jit(pair_notions.gdp_pair)(jnp.asarray(rounded[:, 0]),
                                                           jnp.asarray(rounded[:, 1])))
    got = np.asarray(native.gdp(_float32(logs[:, 0]), _float32(logs[:, 1])), np.float64)
    np.testing.assert_allclose(got, ref32, rtol=2e-6, atol=1e-5)


def test_gdp_reference_nan_in_nan_out_and_a_lowest_number_log():
    """NaN in, NaN out (as the native kernel): a NaN entry is not read as a zero; a log written
    as the dtype's lowest number (a "zero" by floor) gives a number, not NaN."""
    log_P = np.log(np.array([0.5, 0.3, 0.2]))
    log_Q = np.array([np.log(0.6), np.log(0.4), np.nan])
    for dtype in (jnp.float32, jnp.float64):
        with jax.enable_x64(dtype == jnp.float64):
            got = float(pair_notions.gdp_pair(jnp.asarray(log_P, dtype), jnp.asarray(log_Q, dtype)))
            assert np.isnan(got)
            floor = float(jnp.finfo(dtype).min)
            low = jnp.asarray([np.log(0.6), np.log(0.4), floor], dtype)
            value = float(pair_notions.gdp_pair(jnp.asarray(log_P, dtype), low))
            assert not np.isnan(value) and value > 0
    assert np.isnan(float(native.gdp(_float32(log_P), _float32(log_Q))))


_FAST_MATH_CHECK = r"""
#include "zcdp_orders.cc"
#include <cstdio>
#include <random>
int main() {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> wide(-700, 700), unit(-1, 1), decade(-30, 2),
      exponent(-300, 300), small(0, 10);
  double expm1_worst = 0, log1p_worst = 0, exp_worst = 0;
  auto exp_at = [&](double x) {
    const double want = std::exp(x), got = fast_exp(x);
    const double error = want == 0 ? std::fabs(got) : std::fabs(got - want) / std::fabs(want);
    exp_worst = std::max(exp_worst, error);
  };
  auto expm1_at = [&](double x) {
    const double want = std::expm1(x), got = fast_expm1(x);
    const double error = want == 0 ? std::fabs(got) : std::fabs(got - want) / std::fabs(want);
    expm1_worst = std::max(expm1_worst, error);
  };
  auto log1p_at = [&](double s) {
    const double want = std::log1p(s), got = fast_log1p(s);
    const double error = want == 0 ? std::fabs(got) : std::fabs(got - want) / std::fabs(want);
    log1p_worst = std::max(log1p_worst, error);
  };
  for (int i = 0; i < 1000000; ++i) {
    const double y = std::pow(10.0, decade(rng));
    expm1_at(wide(rng)), expm1_at(unit(rng)), expm1_at(y), expm1_at(-y);
    exp_at(wide(rng)), exp_at(unit(rng)), exp_at(y), exp_at(-y);
    log1p_at(std::pow(10.0, exponent(rng))), log1p_at(small(rng)), log1p_at(y);
  }
  for (int k = -2019; k <= 2019; ++k)  // the seams of the reduction, k ln2 / 2, to |x| = 700
    for (double nudge : {1.0 - 1e-15, 1.0, 1.0 + 1e-15})
      expm1_at(k * 0.34657359027997264 * nudge), exp_at(k * 0.34657359027997264 * nudge);
  const double below = fast_exp(-700.5), none = fast_exp(-INFINITY);  // 0 below -700 and at -inf
  if (below != 0.0 || none != 0.0) exp_worst = 1.0;
  for (double s : {0.0, 5e-324, 1e-310, 0.41421356237309503, 0.41421356237309515, 1.0, 3.0})
    log1p_at(s);
  std::printf("%.17g %.17g %.17g\n", expm1_worst, log1p_worst, exp_worst);
}
"""


_CEILING_CHECK = r"""
#include "zcdp_orders.cc"
#include <cstdio>
#include <random>
int main() {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> unit(0, 1);
  double worst = 0.0, worst_grid = 0.0;
  long checked = 0;
  Scratch scratch;
  scratch.sorted.resize(64), scratch.index.resize(16);
  for (int trial = 0; trial < 200000; ++trial) {
    const int m = 2 + trial % 7;
    const double concentration = std::pow(10.0, -2.0 + 4.0 * unit(rng));
    std::gamma_distribution<double> gamma(concentration, 1.0);
    float rows[2][16];
    for (auto& row : rows) {  // a Dirichlet row, normalized in float32 (its sum is not 1)
      double draw[16], sum = 0.0;
      for (int i = 0; i < m; ++i) sum += draw[i] = gamma(rng);
      for (int i = 0; i < m; ++i) row[i] = std::log(static_cast<float>(draw[i] / sum));
    }
    if (trial % 5 == 0) rows[1][0] = rows[0][0];  // pairs that share outputs
    Terms terms;
    terms.resize(m);
    output_terms(rows[0], rows[1], m, terms);
    Summary summary;
    if (summarize(terms, 0, m, summary) != Settled::kNo) continue;
    Pair pair;
    canonical_order(rows[0], rows[1], m, scratch.index.data());
    prepare(terms, 0, scratch.index.data(), rows[0], rows[1], m, pair, nullptr, nullptr, nullptr);
    Search s;
    grid_points(pair, s);
    const double grid = grid_ceiling(pair, s);
    float order;
    const double level = searched_level(pair, s, &order);
    if (!(level > 1e-30)) continue;
    worst = std::max(worst, level / ceiling_of(summary));
    worst_grid = std::max(worst_grid, level / grid);
    ++checked;
  }
  std::printf("%.17g %.17g %ld\n", worst, worst_grid, checked);
}
"""


def _compile_and_run(tmp_path, source_text):
    """A C++ program that includes the kernel's sources, built as the library is (its flags and
    ``-march``), run once: its standard output."""
    from jaxpriv.kernels.native import builder

    compiler = builder._compiler()
    if compiler is None:
        pytest.skip("no C++ compiler")
    source = tmp_path / "check.cc"
    source.write_text(source_text)
    program = tmp_path / "check"
    native_dir = builder.SOURCES[0].parent
    flags = [f for f in builder.FLAGS if f not in ("-shared", "-fPIC")]
    subprocess.run([compiler, *flags, f"-march={builder.march()}", f"-I{native_dir}",
                    f"-I{jax.ffi.include_dir()}", str(source), "-o", str(program)],
                   check=True, capture_output=True)
    return subprocess.run([str(program)], check=True, capture_output=True, text=True).stdout


def test_the_zcdp_ceilings_are_above_the_searched_level(tmp_path):
    """The grouped kernel skips a pair whose ceiling, raised by 1e-6, is below the best level:
    so each ceiling must be above the level the search would find. Both of them — the first
    pass's (Hoeffding's lemma with ``D_∞``, from the outputs in the order given) and the first
    grid's (its chord bounds) — on 200,000 random pairs, m = 2 to 8, Dirichlet concentrations 1e-2 to
    1e2 (near-deterministic to near-uniform), rows normalized in float32 (their sums are not 1),
    a fifth sharing an output: never below the searched level by more than double's rounding."""
    worst, worst_grid, checked = _compile_and_run(tmp_path, _CEILING_CHECK).split()
    assert int(checked) > 150_000
    assert float(worst) <= 1 + 1e-12 and float(worst_grid) <= 1 + 1e-12, (worst, worst_grid)


def test_the_kernels_own_expm1_log1p_and_exp_agree_with_the_c_library(tmp_path):
    """zcdp_orders.cc evaluates the grid's orders, the Newton steps and a group's first pass
    with its own branch-free expm1, log1p and exp (they vectorize; the C library's do not):
    within 1e-15 relative of the C library's on 11 million points over their ranges (|x| <= 700,
    where the kernel clamps; exp is 0 below −700 and at −∞), near 0 and at the argument
    reduction's seams."""
    expm1_worst, log1p_worst, exp_worst = map(float, _compile_and_run(
        tmp_path, _FAST_MATH_CHECK).split())
    assert expm1_worst < 1e-15 and log1p_worst < 1e-15 and exp_worst < 1e-15, (
        expm1_worst, log1p_worst, exp_worst)


@pytest.mark.parametrize("n, m, concentration, delta", [(2, 2, 1.0, 1e-2), (3, 3, 0.05, 1e-5),
                                                        (4, 4, 1.0, 1e-5), (4, 4, 0.3, 1e-2),
                                                        (4, 4, 30.0, 1e-6), (6, 8, 0.5, 1e-5)])
def test_grouped_eps_at_delta_keeps_the_max(n, m, concentration, delta):
    """``ε(δ)`` with ``group = n²`` (one mechanism's pairs): each group's max is the ungrouped
    kernel's bit for bit, every pair reads its own value or 0 (skipped: its ``D_∞``, an upper
    bound of its ε, was below the max), and the kernel skips pairs."""
    rng = np.random.default_rng(n * 1000 + m * 10 + int(concentration * 10) + 7)
    log_P, log_Q = _group_mechanisms(rng, 2000, n, m, concentration)
    d = jnp.full(log_P.shape[:-1], delta, jnp.float32)
    full = np.asarray(jax.jit(native.eps_at_delta)(log_P, log_Q, d)).reshape(-1, n * n)
    got = np.asarray(jax.jit(lambda p, q, d: native.eps_at_delta(p, q, d, n * n))(
        log_P, log_Q, d)).reshape(-1, n * n)
    np.testing.assert_array_equal(got.max(axis=1), full.max(axis=1))
    assert np.all((got == full) | (got == 0.0))
    if n >= 3:
        assert np.mean((got == 0.0) & (full > 0.0)) > 0.1  # the point: pairs never solved


def _edge_groups():
    """Four 2×2 mechanisms' pairs (groups of 4): finite; Q = 0 < P in one pair (a level of ∞);
    a NaN entry; equal rows (0)."""
    ninf, half = -np.inf, np.log(0.5)
    rows = [[[half, half], [np.log(0.3), np.log(0.7)]],
            [[0.0, ninf], [half, half]],
            [[np.nan, 0.0], [half, half]],
            [[half, half], [half, half]]]
    return pair_notions.split_pairs(_float32(rows))


def test_grouped_eps_at_delta_edge_cases_and_mechanism_level():
    """A group with a pair of Q = 0 < P (ε = ∞) reads ∞, a NaN pair stays NaN, equal rows read
    0; ``group`` must divide the pairs. The mechanism level (the pairs grouped) equals the max of
    the ungrouped pair levels, with the same gradient (the reference's), ties included."""
    log_P, log_Q = _edge_groups()
    d = jnp.full(log_P.shape[:-1], 1e-3, jnp.float32)
    got = np.asarray(native.eps_at_delta(log_P, log_Q, d, 4)).reshape(4, 4)
    full = np.asarray(native.eps_at_delta(log_P, log_Q, d)).reshape(4, 4)
    assert got[0].max() == full[0].max() > 0
    assert got[1].max() == np.inf
    assert np.isnan(got[2]).any()
    assert got[3].max() == 0.0
    for bad in (3, 0, 2.0):
        with pytest.raises(ValueError, match="group"):
            native.eps_at_delta(log_P, log_Q, d, bad)

    _level_equals_the_ungrouped_max(lambda m: kernel_levels.eps_at_delta(m, delta=1e-5),
                                    lambda p, q: kernel_levels.eps_at_delta_pair(p, q, 1e-5), 29)


@pytest.mark.parametrize("n, m, concentration", [(2, 2, 1.0), (3, 3, 0.05), (4, 4, 1.0),
                                                 (4, 4, 0.3), (4, 4, 30.0), (6, 8, 0.5)])
def test_grouped_gdp_keeps_the_max(n, m, concentration):
    """GDP with ``group = n²``: each group's max is the ungrouped kernel's bit for bit, every
    pair reads its own value or 0 (skipped: randomized response's μ at its symmetric ``D_∞``, an
    upper bound of its μ, was below the max; or its best vertex before refinement was clearly
    below the best level solved), and pairs are skipped."""
    rng = np.random.default_rng(n * 1000 + m * 10 + int(concentration * 10) + 11)
    log_P, log_Q = _group_mechanisms(rng, 2000, n, m, concentration)
    full = np.asarray(jax.jit(native.gdp)(log_P, log_Q)).reshape(-1, n * n)
    got = np.asarray(jax.jit(lambda p, q: native.gdp(p, q, n * n))(log_P, log_Q)).reshape(
        -1, n * n)
    np.testing.assert_array_equal(got.max(axis=1), full.max(axis=1))
    assert np.all((got == full) | (got == 0.0))
    if n >= 3:
        assert np.mean((got == 0.0) & (full > 0.0)) > 0.05


def test_grouped_gdp_keeps_no_skipped_level_for_the_next_group():
    """A pair skipped in one group (its unrefined μ below that group's best: it reads 0) that
    the next group solves first is solved there, not read from the last solve (a review found
    the next group's max read 0 for 0.886)."""
    def pair(p1, d):
        P = np.array([p1, 1 - p1])
        Q = np.array([p1 * np.exp(-d), 1 - p1 * np.exp(-d)])
        return np.log(P), np.log(Q)

    a, x = pair(0.3, 3.0), pair(0.02, 2.5)
    log_P = _float32([a[0], x[0], x[0], x[0]])
    log_Q = _float32([a[1], x[1], x[1], x[1]])
    alone = np.asarray(native.gdp(log_P, log_Q))
    grouped = np.asarray(native.gdp(log_P, log_Q, 2)).reshape(2, 2)
    assert alone[0] > alone[1] > 0 and grouped[0, 1] == 0.0  # skipped in the first group
    np.testing.assert_array_equal(grouped.max(1), alone.reshape(2, 2).max(1))


def test_grouped_gdp_edge_cases_and_mechanism_level():
    """GDP grouped: ∞, NaN and equal rows as the ungrouped kernel; ``group`` must divide the
    pairs; the mechanism level equals the max of the ungrouped pair levels, with the same
    gradient (the reference's), ties included."""
    log_P, log_Q = _edge_groups()
    got = np.asarray(native.gdp(log_P, log_Q, 4)).reshape(4, 4)
    full = np.asarray(native.gdp(log_P, log_Q)).reshape(4, 4)
    assert got[0].max() == full[0].max() > 0
    assert got[1].max() == np.inf == full[1].max()
    assert np.isnan(got[2]).any()
    assert got[3].max() == 0.0
    for bad in (3, 0, 2.0):
        with pytest.raises(ValueError, match="group"):
            native.gdp(log_P, log_Q, bad)

    _level_equals_the_ungrouped_max(kernel_levels.gdp, kernel_levels.gdp_pair, 31)


def test_grouped_levels_without_a_derivative_and_by_blocks():
    """The mechanism levels as a sweep evaluates them (no derivative asked: the grouped kernel
    itself), against the max of the ungrouped pair kernel, bit for bit: 4×4 mechanisms and
    64×64 ones whose pairs go in blocks of rows (``_pair_level``); and the ε(δ) kernel with δ
    varying within a group, NaN and negative δ (solved, never skipped)."""
    rng = np.random.default_rng(41)
    for n, count in ((4, 256), (64, 32)):
        log_K = _float32(np.log(rng.dirichlet(np.full(n, 0.7), size=(count, n))))
        mechs = Mechanism(log_K, jnp.full((count, n), -np.log(n), jnp.float32),
                          jnp.full((count, n), -np.log(n), jnp.float32), None, None)
        log_P, log_Q = pair_notions.split_pairs(log_K)
        mask = pair_notions.pair_mask(n)
        d = jnp.full(log_P.shape[:-1], 1e-5, jnp.float32)
        for grouped, pairs in (
                (lambda m: kernel_levels.eps_at_delta(m, delta=1e-5),
                 lambda: native.eps_at_delta(log_P, log_Q, d)),
                (kernel_levels.gdp, lambda: native.gdp(log_P, log_Q))):
            got = np.asarray(jax.jit(grouped)(mechs))
            want = np.asarray(pair_notions.max_over_pairs(pairs(), mask))
            np.testing.assert_array_equal(got, want)
    log_P = _float32([[np.log(0.9), np.log(0.1)], [np.log(0.01), np.log(0.99)]])
    log_Q = _float32([[np.log(0.1), np.log(0.9)], [np.log(0.01), np.log(0.99)]])
    for deltas in ([1e-3, 0.5], [-0.5, -0.5], [0.2, np.nan], [np.nan, 0.2]):
        d = _float32(deltas)
        full = np.asarray(native.eps_at_delta(log_P, log_Q, d))
        got = np.asarray(native.eps_at_delta(log_P, log_Q, d, 2))
        np.testing.assert_array_equal(np.nanmax(got), np.nanmax(full))
        assert np.isnan(got).sum() == np.isnan(full).sum()
