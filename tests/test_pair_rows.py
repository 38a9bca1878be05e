"""A pair level from the rows it needs (jaxpriv.core.pair_rows, used by jaxpriv.registry.level):
repeated rows dropped for every notion that is a max over pairs, rows inside the hull of the
others for the jointly quasi-convex ones (two outputs: the two ends of the segment). Each level
of the reduced mechanism against the same level over every pair of the full one (the notion's
own function, which reads every row), float64."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from jaxpriv import Mechanism, level
from jaxpriv.core.pair_rows import rows_for_pair_max
from jaxpriv.registry import checks, notion

HULL = ("tv", "kl", "chi2", "renyi", "zcdp", "delta", "eps_at_delta", "gdp")
RTOL = 1e-12


def _mech(K):
    with jax.enable_x64(True):
        return Mechanism.from_K(K, dtype=np.float64)


def _every_pair(key, K, **params):
    """The level over every ordered pair of ``K``'s rows: the notion's function, not
    :func:`jaxpriv.level` (which drops rows first)."""
    record = notion(key)
    with jax.enable_x64(True):
        return float(record.level(_mech(K), **record.resolve(params)))


def _tall_cases():
    rng = np.random.default_rng(35)
    p = np.concatenate([rng.uniform(0.02, 0.98, size=40), [0.0, 0.0, 0.99]])
    cases = {"tall-2": np.stack([p, 1 - p], axis=1)}  # the lower end a zero, twice
    q = rng.uniform(0.2, 0.8, size=25)
    cases["unused-output"] = np.stack([q, np.zeros_like(q), 1 - q], axis=1)
    counts = np.arange(6)  # a counting query's rows: each database's row depends on its count
    noisy = np.exp(-np.abs(counts[:, None] - np.arange(6)[None, :]))
    noisy /= noisy.sum(axis=1, keepdims=True)
    cases["count-query"] = noisy[rng.integers(0, 6, size=40)]
    return cases


CASES = _tall_cases()


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_level_from_the_rows_it_needs_is_the_level_over_every_pair(case, monkeypatch):
    K = CASES[case]
    with np.errstate(divide="ignore"):
        rows = rows_for_pair_max(np.log(K), hull=True)
    assert len(rows) == {"tall-2": 2, "unused-output": 2, "count-query": 6}[case]
    read = []  # the rows each compiled level was given
    compiled = checks._compiled_level
    monkeypatch.setattr(checks, "_compiled_level", lambda record, params, options: (
        lambda mech: (read.append(mech.n), compiled(record, params, options)(mech))[1]))
    for key in HULL:
        want = _every_pair(key, K)
        got = float(level(key, _mech(K)))
        assert got == pytest.approx(want, rel=RTOL, abs=1e-300), (key, got, want)
    assert read == [len(rows)] * len(HULL)


def test_composed_levels_drop_only_repeated_rows(monkeypatch):
    """``P ↦ P^⊗k`` is not linear: the composed levels keep every distinct row."""
    p = np.array([0.9, 0.6, 0.5, 0.3, 0.9, 0.6])
    K = np.stack([p, 1 - p], axis=1)
    assert rows_for_pair_max(np.log(K), hull=False).tolist() == [0, 1, 2, 3]
    read = []
    compiled = checks._compiled_level
    monkeypatch.setattr(checks, "_compiled_level", lambda record, params, options: (
        lambda mech: (read.append(mech.n), compiled(record, params, options)(mech))[1]))
    for key in ("delta_composed", "eps_composed"):
        want = _every_pair(key, K, k=3)
        got = float(level(key, _mech(K), k=3))
        assert got == pytest.approx(want, rel=RTOL), key
    assert read == [4, 4]


def test_a_mechanism_with_nan_keeps_every_row():
    """(An unvalidated one: no ends to take; the rows all go to the level, as before.)"""
    log_K = np.log(np.array([[0.5, 0.5], [0.2, 0.8], [0.7, 0.3]]))
    log_K[1, 0] = np.nan
    assert rows_for_pair_max(log_K, hull=True).tolist() == [0, 1, 2]


def test_a_neighbour_relation_keeps_every_row():
    """Over the pairs of a neighbour relation the middle row counts: TV over (0, 1) and (1, 2)
    is 0.4, over every pair 0.7 (rows 0 and 2)."""
    K = np.array([[0.9, 0.1], [0.5, 0.5], [0.2, 0.8]])
    path = np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], bool)
    mech = _mech(K)
    assert float(level("tv", mech, neighbours=path)) == pytest.approx(0.4, rel=1e-14)
    assert float(level("tv", mech)) == pytest.approx(0.7, rel=1e-14)


def test_identical_rows_leave_one_row_and_level_0():
    K = np.tile([[0.25, 0.75]], (7, 1))
    assert rows_for_pair_max(np.log(K), hull=True).tolist() == [0]
    for key in HULL:
        assert float(level(key, _mech(K))) == 0.0, key
