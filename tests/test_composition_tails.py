"""The binomial-tail evaluation of ``eps_composed`` (jaxpriv/core/composition_tails.py) against
the count-vector sums it replaces for m ≥ 3 outputs, a 50-digit oracle written from the count
vectors at k = 100 (losses of 7.5 nats a use: Q-masses of e^{−750}), the tail tables against
mpmath's binomial sums, and its gradient against finite differences."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest

from jaxpriv.core import composition, composition_tails



@pytest.fixture(autouse=True)
def _float64():
    """Every test here in float64 — within the test only (a module-wide switch would turn the
    float32 sweeps of the tests after it, in the same worker, to float64)."""
    with jax.enable_x64(True):
        yield


def _pair_eps(log_P, log_Q, k, delta, tails):
    m = log_P.shape[-1]
    if tails:
        t = composition_tails.tail_loss(log_P, log_Q, composition.count_vectors(k, m - 1),
                                        composition.log_multinomials(k, m - 1))
        return composition_tails.eps_of_tails(t, delta)
    c = composition.composed_loss(log_P, log_Q, composition.count_vectors(k, m),
                                  composition.log_multinomials(k, m))
    return composition.eps_of_loss(c, delta)


def _random_pairs(rng, count, m):
    """Pairs of rows with spread-out losses, zeros (``+∞`` and ``−∞`` atoms, outputs neither
    row gives) and the inner outputs outside a support."""
    u = rng.normal(size=(count, 2, m)) * rng.uniform(0.1, 3.0, size=(count, 1, 1))
    u = np.where(rng.uniform(size=u.shape) < 0.2, -np.inf, u)
    u[:, :, 0] = np.where(np.isinf(u[:, :, 0]), 0.0, u[:, :, 0])
    u[0, 0, -2:] = -np.inf  # both inner outputs off P's support
    u[1, :, -1] = -np.inf  # an output neither row gives
    u[2, 1, -2] = -np.inf  # an inner output with an +∞ loss
    return u - np.log(np.exp(u).sum(-1, keepdims=True))


@pytest.mark.parametrize("k,m,delta", [(1, 3, 1e-3), (17, 5, 1e-6), (40, 4, 1e-6)])
def test_tails_match_the_count_vector_sums(k, m, delta):
    """The same ε, to rounding, as summing every count vector (which the 50-digit oracle over
    every output sequence checks in test_composition.py): +∞ where the +∞ atom exceeds δ, 0
    where δ_k(0) ≤ δ."""
    log_K = jnp.asarray(_random_pairs(np.random.default_rng(7 * k + m), 24, m))
    got, want = (np.asarray(jax.jit(jax.vmap(
        lambda a: _pair_eps(a[0], a[1], k, delta, tails)))(log_K)) for tails in (True, False))
    assert np.array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-12, atol=1e-13)
    assert not np.isnan(got).any()


def _oracle_eps(P, Q, k, delta):
    """Least ε with δ_k(ε) ≤ δ at 50 digits, from the count vectors of k uses: every atom's loss
    and P- and Q-mass (multinomials), sorted; the crossing's segment solved exactly."""
    mp.mp.dps = 50
    P, Q = [mp.mpf(x) for x in P], [mp.mpf(x) for x in Q]
    atoms = []
    for n in composition.count_vectors(k, len(P)).tolist():
        coef = mp.factorial(k) / mp.fprod(mp.factorial(c) for c in n)
        p = coef * mp.fprod(P[w] ** c for w, c in enumerate(n))
        q = coef * mp.fprod(Q[w] ** c for w, c in enumerate(n))
        atoms.append((mp.log(p) - mp.log(q), p, q))
    atoms.sort(key=lambda a: -a[0])
    A = B = mp.mpf(0)
    for i, (loss, p, q) in enumerate(atoms):
        A, B = A + p, B + q
        below = atoms[i + 1][0] if i + 1 < len(atoms) else -mp.inf
        # on (below, loss]: δ = A − e^ε B
        if A - mp.exp(max(below, 0)) * B > delta or below < 0:
            if A - mp.exp(max(below, 0)) * B > delta:
                return mp.log((A - delta) / B)
    return mp.mpf(0)


def test_losses_of_750_nats_against_a_50_digit_oracle():
    """k = 100 uses with a loss of 7.5 nats on the likely output: ε ≈ 750, where the Q-masses
    above ε are e^{−750}, below float64's smallest number; the comparison is scaled per term
    (a linear sum of Q-masses would lose them and return the largest loss)."""
    P = np.array([0.996, 0.003, 0.001])
    Q = np.array([0.996 * math.exp(-7.5), 0.4, 0.0])
    Q[2] = 1.0 - Q[:2].sum()
    k, delta = 100, 1e-6
    want = float(_oracle_eps(P, Q, k, delta))
    with np.errstate(divide="ignore"):
        log_P, log_Q = jnp.log(jnp.asarray(P)), jnp.log(jnp.asarray(Q))
    got = float(jax.jit(lambda: _pair_eps(log_P, log_Q, k, delta, True))())
    assert 700 < want < 750
    assert got == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("pi", [0.0, 1e-300, 0.3, 0.5, 1.0 - 1e-12, 1.0])
def test_tail_tables_are_the_binomial_tails(pi):
    """``t log π + log U_r(t) = log Σ_{j≥t} C(r,j) π^j (1−π)^{r−j}`` at 50 digits, for every
    ``r ≤ k`` and ``t ≤ r + 1`` — deep tails (π = 1e-300: T ≈ 1e-18000) included."""
    k = 60
    with np.errstate(divide="ignore"):
        log_a, log_b = np.log(pi), np.log1p(-pi)
    power, U = composition_tails._scaled_tails(jnp.asarray(log_a), jnp.asarray(log_b), k)
    power, U = np.asarray(power), np.asarray(U)
    mp.mp.dps = 50
    p = mp.mpf(pi)
    for r in range(0, k + 1, 7):
        for t in range(0, r + 2):
            want = mp.fsum(mp.binomial(r, j) * p ** j * (1 - p) ** (r - j) for j in range(t, r + 1))
            got = -math.inf if U[r, t] == 0 else power[t] + math.log(U[r, t])
            if want == 0:
                assert got == -math.inf
            else:
                assert got == pytest.approx(float(mp.log(want)), rel=1e-13, abs=1e-13)


def _check_gradient(fn, u, h=1e-6):
    """``jax.grad(fn)`` at ``u`` against central differences, every perturbation in one
    compiled call."""
    grad = np.asarray(jax.jit(jax.grad(fn))(u))
    steps = np.eye(u.size).reshape((u.size,) + u.shape) * h
    values = np.asarray(jax.jit(jax.vmap(fn))(jnp.concatenate([u + steps, u - steps])))
    fd = (values[: u.size] - values[u.size:]) / (2 * h)
    np.testing.assert_allclose(grad.reshape(-1), fd, rtol=1e-5, atol=1e-7)
    assert np.any(grad != 0)


def test_the_gradient_is_the_segment_formulas():
    """d ε / d log K by autodiff through the search (held constant) and the segment formula,
    against central differences in float64."""
    rng = np.random.default_rng(3)
    u = jnp.asarray(rng.normal(size=(2, 4)))

    def eps(u):
        log_K = u - jax.nn.logsumexp(u, axis=-1, keepdims=True)
        return _pair_eps(log_K[0], log_K[1], 12, 1e-4, True)

    _check_gradient(eps, u)


def _sorted_eps(log_P, log_Q, k, delta):
    """Least ε with δ_k(ε) ≤ δ from every count vector's atom, sorted by loss, with running
    log-sums of the P- and Q-masses above each (float64, no search): an independent second
    reference where 50 digits over 176,851 atoms would be slow."""
    m = len(log_P)
    counts = composition.count_vectors(k, m)
    log_mult = composition.log_multinomials(k, m)
    loss = counts @ (log_P - log_Q)
    order = np.argsort(-loss)
    loss = loss[order]
    log_A = np.logaddexp.accumulate((log_mult + counts @ log_P)[order])
    log_B = np.logaddexp.accumulate((log_mult + counts @ log_Q)[order])
    below = np.maximum(np.append(loss[1:], -np.inf), 0.0)
    i = int(np.argmax(np.exp(log_A) - np.exp(below + log_B) > delta))  # the crossing's segment
    return math.log(math.exp(log_A[i]) - delta) - log_B[i]


def test_losses_of_960_nats_both_paths():
    """A 2×4 pair with losses up to 10 nats a use at k = 100: ε ≈ 962. Both the tail sums and
    the count-vector path (``eps_of_loss``, which served every m before) give the sorted
    reference's ε; the count-vector path returned 962.73 for 962.27 before its comparison was
    scaled per term."""
    K = np.array([[5.81565272e-02, 1.17718063e-02, 2.02740200e-01, 7.27331467e-01],
                  [9.99642728e-01, 5.13786325e-05, 2.71590731e-04, 3.43025530e-05]])
    log_K = np.log(K / K.sum(axis=1, keepdims=True))
    want = _sorted_eps(log_K[0], log_K[1], 100, 1e-6)
    assert 900 < want < 1000
    for tails in (True, False):
        got = float(jax.jit(lambda a: _pair_eps(a[0], a[1], 100, 1e-6, tails))(jnp.asarray(log_K)))
        assert got == pytest.approx(want, rel=1e-12), tails


def _mechanisms(rng, count, n, m):
    """Random n×m log-kernels: spread-out, some with zeros, some near-symmetric (pairs whose ε
    tie), one with equal rows (ε = 0)."""
    u = rng.normal(size=(count, n, m)) * rng.uniform(0.05, 2.0, size=(count, 1, 1))
    u[: count // 4] = np.where(rng.uniform(size=u[: count // 4].shape) < 0.2, -np.inf,
                               u[: count // 4])
    u[:, :, 0] = np.where(np.isinf(u[:, :, 0]), 0.0, u[:, :, 0])
    u[-1] = u[-1, :1]  # equal rows: every pair has ε = 0
    u[-2, 1] = u[-2, 0, ::-1]  # rows that are each other's mirror
    return u - np.log(np.exp(u).sum(-1, keepdims=True))


def test_the_renyi_bound_is_above_every_pairs_epsilon():
    """The pruning is exact only if the bound holds: Canonne–Kamath–Steinke's conversion of the
    k-fold Rényi divergence is at least the exact ε on every pair (+∞ where Q = 0 < P)."""
    rng = np.random.default_rng(11)
    for k, m, delta in [(1, 3, 1e-3), (10, 4, 1e-5), (40, 3, 1e-8)]:
        log_K = jnp.asarray(_random_pairs(rng, 48, m))
        eps = np.asarray(jax.jit(jax.vmap(
            lambda a: _pair_eps(a[0], a[1], k, delta, True)))(log_K))
        bound = np.asarray(composition_tails.renyi_bound(log_K[:, 0], log_K[:, 1], k, delta))
        assert np.all(bound >= eps), (k, m)
        only_p = np.any(np.isfinite(log_K[:, 0]) & np.isinf(log_K[:, 1]), axis=-1)
        assert np.all(np.isinf(bound[only_p])) and np.all(np.isfinite(bound[~only_p]))


@pytest.mark.parametrize("k,n,m,delta,neighbours", [
    (7, 4, 4, 1e-5, None), (25, 3, 3, 1e-6, "line")])
def test_pruned_pairs_give_the_max_over_every_pair(k, n, m, delta, neighbours):
    """``eps_over_pairs`` (pairs in order of the Rényi bound, stopped once no bound exceeds the
    best) equals the max over every counted pair of its own exact ε, whatever the chunking."""
    log_K = jnp.asarray(_mechanisms(np.random.default_rng(k + n), 40, n, m))
    nb = None
    if neighbours == "line":
        nb = np.abs(np.subtract.outer(np.arange(n), np.arange(n))) == 1
    pairs = composition._pair_indices(n, nb)
    each = jax.jit(jax.vmap(jax.vmap(lambda p, q: _pair_eps(p, q, k, delta, True),
                                     in_axes=(0, 0)), in_axes=(0, 0)))
    want = np.asarray(each(log_K[:, pairs[:, 0]], log_K[:, pairs[:, 1]])).max(axis=1)
    for chunk in (1, 7):
        got = np.asarray(jax.jit(lambda x, c=chunk: composition._eps_by_tails(
            x, k, delta, nb, chunk=c))(log_K))
        assert np.array_equal(np.isinf(got), np.isinf(want))
        finite = np.isfinite(want)
        np.testing.assert_allclose(got[finite], want[finite], rtol=1e-12, atol=1e-13)
    assert want[-1] == 0.0


def test_the_gradient_of_the_pruned_max_is_its_pairs():
    """``d eps_composed / d log K`` through the pruned max: the attaining pair's segment formula,
    against central differences (and zero on the rows no attaining pair uses)."""
    rng = np.random.default_rng(5)
    u = jnp.asarray(rng.normal(size=(3, 3)))

    def eps(u):
        log_K = u - jax.nn.logsumexp(u, axis=-1, keepdims=True)
        return composition._eps_by_tails(log_K[None], 9, 1e-4, None)[0]

    _check_gradient(eps, u)


def test_the_search_runs_under_shard_map():
    """The search engine evaluates conclusions under ``shard_map`` over its restarts (float32):
    every loop carry must vary like the data there (a constant first row of the tail tables made
    the quick audit's C-relation searches fail with a scan-carry type error)."""
    from jax.sharding import Mesh, PartitionSpec

    mesh = Mesh(np.array(jax.devices()[:1]), ("restarts",))  # as search_loop builds it
    log_K = _mechanisms(np.random.default_rng(2), 4, 3, 3).astype(np.float32)
    sharded = jax.jit(jax.shard_map(
        lambda x: composition._eps_by_tails(x, 6, 1e-3, None), mesh=mesh,
        in_specs=PartitionSpec("restarts"), out_specs=PartitionSpec("restarts")))
    with jax.enable_x64(False):
        got = np.asarray(sharded(jnp.asarray(log_K)))
    want = np.asarray(jax.jit(lambda x: composition._eps_by_tails(x, 6, 1e-3, None))(
        jnp.asarray(log_K, jnp.float64)))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
