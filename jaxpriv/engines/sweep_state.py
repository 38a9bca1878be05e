"""A sweep's device-side accumulator: per premise bin × parameter bin the largest conclusion
and the mechanism reaching it (:class:`Best`), the smallest slack overall, the cells' counts
(:class:`SweepState`), and the chunk's lowest-slack candidates (:class:`Candidates`).

Every fold is a max or a min with ties broken by the smallest global index, so folding blocks,
groups of blocks or devices in any order gives the same bits (:mod:`jaxpriv.engines.sweep_step`
folds them; :mod:`jaxpriv.engines.sweep` checkpoints the state between chunks).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpriv.core.mechanisms import Mechanism

_NO_INDEX = np.iinfo(np.int32).max


class Best(NamedTuple):
    """Per cell (or one, for the overall worst slack): a score, its global index, its mechanism."""

    score: jax.Array  # (C,)
    index: jax.Array  # (C,) int32
    log_K: jax.Array  # (C, n, m)
    log_prior: jax.Array  # (C, n)
    log_belief: jax.Array  # (C, n)
    values: jax.Array  # (C, m); zeros when the relation has no values


class SweepState(NamedTuple):
    envelope: Best  # score = conclusion (or conclusion/parameter), maximized per cell
    worst: Best  # score = −slack, maximized (one cell)
    cell_count: jax.Array  # (C,) int32
    evaluated: jax.Array  # () int32: mechanisms whose condition held
    nan_count: jax.Array  # () int32: mechanisms with a NaN level or bound (never a winner)


def _empty_best(cells: int, n: int, m: int, xp=jnp) -> Best:
    """An empty record of ``cells`` entries (``xp``: ``jax.numpy``, or NumPy on the host)."""
    return Best(xp.full((cells,), -np.inf, np.float32), xp.full((cells,), _NO_INDEX, np.int32),
                xp.zeros((cells, n, m), np.float32), xp.zeros((cells, n), np.float32),
                xp.zeros((cells, n), np.float32), xp.zeros((cells, m), np.float32))


def initial_state(config) -> SweepState:
    """The empty accumulator of a :class:`jaxpriv.engines.sweep.SweepConfig`, filled on the host
    and put on the default device: no program (op by op, a dozen small ones per new shape; as
    one jitted closure, traced, lowered and fetched from the cache again by every sweep)."""
    return jax.device_put(SweepState(
        _empty_best(config.cells, config.n, config.m, np), _empty_best(1, config.n, config.m, np),
        np.zeros((config.cells,), np.int32), np.zeros((), np.int32), np.zeros((), np.int32)))


def _merge_best(best: Best, cell, score, index, mech: Mechanism, values) -> Best:
    """Fold ``L`` entries into ``best``: per cell the highest score, ties to the smallest index
    (``index`` need not be contiguous or sorted)."""
    cells, size = best.score.shape[0], score.shape[0]
    chunk_score = jnp.full((cells,), -jnp.inf, score.dtype).at[cell].max(score)
    # (a NaN score leaves its cell without a winner; the sweep masks NaN before)
    winner = (score == chunk_score[cell]) & (score > -jnp.inf)
    chunk_index = jnp.full((cells,), _NO_INDEX, jnp.int32).at[cell].min(
        jnp.where(winner, index, _NO_INDEX))
    chosen = winner & (index == chunk_index[cell])
    position = jnp.full((cells,), size, jnp.int32).at[cell].min(
        jnp.where(chosen, jnp.arange(size, dtype=jnp.int32), size))
    return _keep_better(best, _best_at(jnp.where(position < size, position, -1), score, index,
                                       mech, values))


def _best_at(position, score, index, mech: Mechanism, values) -> Best:
    """``Best`` of the entries at ``position`` (``−1``: none, which never wins a fold):
    :func:`_merge_best`'s result where its winners are ``position``."""
    found = position >= 0
    local = jnp.where(found, position, score.shape[0] - 1)
    return Best(jnp.where(found, score[local], -jnp.inf), jnp.where(found, index[local], _NO_INDEX),
                mech.log_K[local], mech.log_prior[local], mech.log_belief[local], values[local])


def _keep_better(best: Best, other: Best) -> Best:
    """Cell by cell, ``other``'s entry where it beats ``best``'s: a higher score, ties to the
    smaller index (an empty entry, index ``_NO_INDEX``, never wins)."""
    better = (other.score > best.score) | ((other.score == best.score)
                                           & (other.index < best.index))
    better &= other.index != _NO_INDEX
    return jax.tree_util.tree_map(
        lambda old, new: jnp.where(better.reshape((-1,) + (1,) * (old.ndim - 1)), new, old),
        best, other)


BLOCK_CANDIDATES = 16
"""Lowest-slack mechanisms each block offers as candidates: a chunk's ``candidates`` are the
lowest of its blocks' offers (the lowest of the whole chunk when ``candidates`` is at most
this)."""


def _flat(tree):
    """Blocks' results ``(B, k, ...)`` as one list ``(B·k, ...)``."""
    return jax.tree_util.tree_map(lambda a: a.reshape((-1,) + a.shape[2:]), tree)


class Candidates(NamedTuple):
    """The chunk's lowest-slack mechanisms (``score`` = float32 slack)."""

    score: jax.Array  # (k,)
    index: jax.Array  # (k,)
    log_K: jax.Array
    log_prior: jax.Array
    log_belief: jax.Array
    values: jax.Array


def _lowest(found: Candidates, k: int) -> Candidates:
    """The ``k`` lowest-slack entries of a short list, lowest first, ties to the smaller index;
    empty entries (index ``_NO_INDEX``) after every real one."""
    position = jnp.arange(found.score.shape[0], dtype=jnp.int32)
    order = jax.lax.sort((found.index == _NO_INDEX, found.score, found.index, position),
                         num_keys=3, is_stable=True)[3]
    return jax.tree_util.tree_map(lambda a: a[order[:k]], found)


def _no_candidates(k: int, n: int, m: int) -> Candidates:
    """``k`` empty entries (slack +∞, no index), uniform mechanisms: valid, should one ever be
    read."""
    return Candidates(jnp.full((k,), jnp.inf, jnp.float32), jnp.full((k,), _NO_INDEX, jnp.int32),
                      jnp.full((k, n, m), -np.log(m), jnp.float32),
                      jnp.full((k, n), -np.log(n), jnp.float32),
                      jnp.full((k, n), -np.log(n), jnp.float32), jnp.zeros((k, m), jnp.float32))


def _candidate_slack(slack):
    """The slack candidates are ranked by: ``−0`` as ``+0`` (``top_k`` and ``_lowest`` agree
    on ties), a NaN (never expected) as ``−∞``, so the float64 check sees it first."""
    return jnp.where(jnp.isnan(slack), -jnp.inf, jnp.where(slack == 0, 0.0, slack))
