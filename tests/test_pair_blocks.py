"""Pair levels of large mechanisms (issue 35): the max over pairs taken over blocks of rows
equals the one-shot max, and the zCDP level's pruned pairs (a proved upper bound per pair,
:mod:`jaxpriv.core.pair_levels`) give exactly the max over every pair."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpriv import Mechanism, level
from jaxpriv.core import pair_levels, pair_notions, zcdp

KEYS = {"tv": {}, "kl": {}, "chi2": {}, "renyi": {"order": 3.0}, "zcdp": {},
        "delta": {"epsilon": 0.5}, "eps_at_delta": {"delta": 1e-3}, "gdp": {}}


def _mechanisms(n, m, seed, batch=()):
    """Random rows of every sharpness, a row with a zero (infinite divergences), two rows that
    differ by 1e-9 (a tiny pair) and a duplicated row (a pair at 0)."""
    rng = np.random.default_rng(seed)
    K = rng.dirichlet(np.ones(m) * 0.7, size=(*batch, n))
    K[..., 1, :] = rng.dirichlet(np.ones(m) * 200.0, size=batch)
    K[..., 2, 0] = 0.0
    K[..., 2, :] /= K[..., 2, :].sum(-1, keepdims=True)
    K[..., 3, :] = K[..., 4, :] * (1.0 + 1e-9 * np.sign(np.arange(m) - m / 2))
    K[..., 3, :] /= K[..., 3, :].sum(-1, keepdims=True)
    K[..., 5, :] = K[..., 6, :]
    return Mechanism.from_K(K)


@pytest.fixture
def x64():
    with jax.enable_x64(True):
        yield


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of a few rows and zCDP rounds of 5 pairs: every path the large mechanisms take,
    on mechanisms small enough for the all-pairs reference."""
    monkeypatch.setattr(pair_notions, "PAIR_BLOCK_ELEMENTS", 64)
    monkeypatch.setattr(pair_levels, "PAIR_BLOCK_ELEMENTS", 64)
    monkeypatch.setattr(pair_levels, "ROUND", 5)


@pytest.mark.parametrize("key", sorted(KEYS))
def test_levels_over_blocks_equal_the_one_shot_max(x64, monkeypatch, key):
    mechs = _mechanisms(9, 6, seed=1, batch=(2,))
    neighbours = np.ones((9, 9), bool)
    neighbours[0, 1:4] = neighbours[1:4, 0] = False
    expected = [level(key, mechs, **KEYS[key]),
                level(key, mechs, neighbours=neighbours, **KEYS[key])]
    monkeypatch.setattr(pair_notions, "PAIR_BLOCK_ELEMENTS", 64)
    monkeypatch.setattr(pair_levels, "PAIR_BLOCK_ELEMENTS", 64)
    got = [level(key, mechs, **KEYS[key]), level(key, mechs, neighbours=neighbours, **KEYS[key])]
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-13, atol=0.0)
        assert not np.isnan(np.asarray(g)).any()


PRUNED = {"zcdp": (pair_levels.zcdp, {}, zcdp.zcdp_pair),
          "eps_at_delta": (pair_levels.eps_at_delta, {"delta": 1e-3},
                           lambda P, Q: pair_notions.eps_at_delta_pair(P, Q, 1e-3))}


@pytest.mark.parametrize("key", sorted(PRUNED))
@pytest.mark.parametrize("seed", range(3))
def test_pruned_levels_are_the_max_over_every_pair(x64, small_blocks, key, seed):
    """The pruned path (rounds of 5 pairs in order of decreasing bound) against the pair
    quantity on every pair; with a zero (ρ = ∞) and without."""
    fn, params, pair_fn = PRUNED[key]
    mech = _mechanisms(12, 7, seed=seed)
    K = np.exp(np.asarray(mech.log_K))
    finite = np.delete(K, 2, axis=0)  # no zero entry: a finite ρ
    for probs in (K, finite):
        one = Mechanism.from_K(probs)
        d, e = np.nonzero(pair_notions.pair_mask(probs.shape[0]))
        every = pair_fn(one.log_K[d], one.log_K[e])
        got = jax.jit(lambda m: fn(m, **params))(one)  # one compilation, not eager dispatch
        np.testing.assert_allclose(got, jnp.max(every), rtol=1e-13)
    if key == "zcdp":
        assert np.isinf(fn(mech)) and np.isfinite(fn(Mechanism.from_K(finite)))


@pytest.mark.parametrize("key", sorted(PRUNED))
def test_pruned_levels_take_batches_and_a_neighbour_relation(x64, small_blocks, key):
    fn, params, pair_fn = PRUNED[key]
    mechs = _mechanisms(10, 5, seed=7, batch=(3,))
    neighbours = np.zeros((10, 10), bool)
    for i in range(9):
        neighbours[i, i + 1] = neighbours[i + 1, i] = True
    d, e = np.nonzero(pair_notions.pair_mask(10, neighbours))
    got = jax.jit(lambda m: fn(m, neighbours=neighbours, **params))(mechs)
    expected = [jnp.max(pair_fn(mechs.log_K[b, d], mechs.log_K[b, e])) for b in range(3)]
    np.testing.assert_allclose(got, expected, rtol=1e-13)


@pytest.mark.parametrize("sharpness", [1e-3, 0.1, 1.0, 30.0, 1e4])
def test_the_bound_is_above_every_pairs_rho(x64, sharpness):
    """:func:`pair_levels.upper_bound` ≥ the exact ρ of each pair, at every floor, from pairs
    near-deterministic to near-equal (the bound's looseness is reported, never below 1)."""
    rng = np.random.default_rng(int(sharpness * 1000))
    P = rng.dirichlet(np.ones(8) * sharpness, size=400)
    Q = rng.dirichlet(np.ones(8) * sharpness, size=400)
    Q[:50] = P[:50] * np.exp(rng.normal(0, 1e-6, (50, 8)))
    Q[:50] /= Q[:50].sum(-1, keepdims=True)
    with np.errstate(divide="ignore"):
        log_P, log_Q = jnp.log(P), jnp.log(Q)
    exact = jax.jit(zcdp.zcdp_pair)(log_P, log_Q)
    d_inf = pair_notions.ldp_pair(log_P, log_Q)
    for floor in (0.0, float(jnp.median(exact)), float(jnp.max(jnp.where(
            jnp.isfinite(exact), exact, 0.0)))):
        bound = pair_levels.upper_bound(log_P, log_Q, d_inf, jnp.asarray(floor))
        assert bool(jnp.all(bound >= exact)), (floor, float(jnp.min(bound - exact)))
        assert not np.isnan(np.asarray(bound)).any()
