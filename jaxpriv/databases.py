"""Database-level notions (SPEC §2.6, paper 004): secrets are databases of ``r`` records.

A database is ``x = (x_1, …, x_r) ∈ V^r``, ``V = {0, …, k−1}``, with a default value ``⊥``;
the mechanism's rows are the ``n = k^r`` databases in lexicographic order (``x_1`` most
significant) and its prior is the joint prior on databases (correlated records allowed).

Kernels here take a whole mechanism and broadcast over batch axes; the per-(position, known set)
loops are static Python loops (``r`` positions × ``2^{r−1}`` sets), so keep ``r`` small
(:data:`MAX_DATABASES`, :data:`MAX_KNOWN_SETS`).

* **DP** over neighbours (databases differing in one position): :func:`dp`.
* **BDP** (Yang et al., 004 eq. 19): :func:`bdp`.
* **SP at a belief** (Kasiviswanathan–Smith, 004 Def. 1): :func:`sp_at`.
* **BSP at a belief** (004 Def. 2, eqs. 9 and 15; the reading is in :func:`bsp_at`): :func:`bsp_at`.
* **MP at p** over the two-point family 𝔻_* (Li et al., 004 Def. 3): :func:`mp_at`; its sup over
  ``p ∈ (0, 1)`` is the DP level (each of the two terms is monotone in ``p``; see
  :func:`mp_at`).

Not yet here (issue 5): the sup of SP and BSP over beliefs (by search), the registry entries
R7–R15 and their sweeps and searches, PAC robustness at the database level, R14/R15.

Examples:
  >>> import numpy as np
  >>> from jaxpriv import databases, families
  >>> from jaxpriv.mechanisms import Mechanism, Records
  >>> # randomized response on each of two bits, independently: ε per record
  >>> rr = np.array([[0.75, 0.25], [0.25, 0.75]])
  >>> mech = Mechanism.from_K(np.kron(rr, rr), records=Records(k=2, r=2))
  >>> round(float(databases.dp(mech)), 6), round(float(databases.bdp(mech)), 6)  # log 3
  (1.098612, 1.098612)
"""

from __future__ import annotations

import itertools
from functools import lru_cache

import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp
from jaxtyping import Array, Bool, Float, Int

from jaxpriv.errors import InputError
from jaxpriv.mechanisms import Mechanism, Records
from jaxpriv.notions import NEG_INF, ldp_kernel

MAX_DATABASES = 4096
"""Largest ``k^r`` the database kernels accept."""
MAX_KNOWN_SETS = 1024
"""Largest ``2^{r−1}`` (known sets ``S ⊆ [r]∖{i}``) :func:`bdp` enumerates."""


def checked_records(mech: Mechanism) -> Records:
    """The mechanism's records layout, or one clear error."""
    records = mech.records
    if records is None:
        raise InputError("database-level notions need a records layout: give "
                         "'records': {'k': ..., 'r': ...} with the mechanism")
    if records.size > MAX_DATABASES:
        raise InputError(f"k^r = {records.size} databases is above the limit of {MAX_DATABASES}")
    if 2 ** (records.r - 1) > MAX_KNOWN_SETS:
        raise InputError(f"r = {records.r} records give 2^{records.r - 1} known sets, above the "
                         f"limit of {MAX_KNOWN_SETS}")
    return records


@lru_cache(maxsize=64)
def values(records: Records) -> Int[np.ndarray, "n r"]:
    """Row ``x`` of the mechanism as its records ``(x_1, …, x_r)`` (lexicographic order)."""
    return np.array(list(itertools.product(range(records.k), repeat=records.r)), dtype=np.int64)


def index_of(records: Records, database: Int[np.ndarray, "... r"]) -> Int[np.ndarray, "..."]:
    """The row index of database(s) ``(x_1, …, x_r)``."""
    weights = records.k ** np.arange(records.r - 1, -1, -1)
    return np.asarray(database) @ weights


@lru_cache(maxsize=64)
def neighbours(records: Records) -> Bool[np.ndarray, "n n"]:
    """``x ~ x'`` iff they differ in exactly one position."""
    v = values(records)
    return (v[:, None, :] != v[None, :, :]).sum(-1) == 1


@lru_cache(maxsize=64)
def without(records: Records, i: int) -> Int[np.ndarray, "n"]:
    """Row of ``x_{−i}``: ``x`` with position ``i`` (0-based) set to the default ``⊥``."""
    v = values(records).copy()
    v[:, i] = records.default
    return index_of(records, v)


def dp(mech: Mechanism) -> Float[Array, "*b"]:
    """DP level over neighbouring databases (SPEC §2.1 with the §2.6 neighbour relation)."""
    return ldp_kernel(mech.log_K, jnp.asarray(neighbours(checked_records(mech))))


def _as_tensor(a, records: Records, trailing: int):
    """``(*b, n, *t)`` → ``(*b, k, …, k, *t)``."""
    batch = a.shape[:a.ndim - 1 - trailing]
    return a.reshape(batch + (records.k,) * records.r + a.shape[a.ndim - trailing:])


def bdp(mech: Mechanism) -> Float[Array, "*b"]:
    """BDP level (Yang et al., 004 eq. 19; SPEC §2.6).

    ``P[y | x_i, x_S] = Σ_rest K[(x_i, x_S, rest), y]·π(rest | x_i, x_S)``; the level is the max
    over positions ``i``, known sets ``S ⊆ [r]∖{i}``, values ``x_i, x_i', x_S`` with positive
    prior mass, and outputs ``y`` of ``log(P[y|x_i,x_S] / P[y|x_i',x_S])``.
    """
    records = checked_records(mech)
    batch = mech.log_prior.ndim - 1
    level = jnp.zeros(mech.log_prior.shape[:-1], mech.log_K.dtype)
    for i, _, log_p, has_mass in _known_set_conditionals(mech, records):
        level = jnp.maximum(level, _spread_over(log_p, has_mass, batch + i, batch))
    return level


def _known_set_conditionals(mech: Mechanism, records: Records):
    """For every position ``i`` and known set ``S ⊆ [r]∖{i}``: ``(i, rest, log P, has_mass)``,
    where ``rest`` are the marginalised axes, ``log P = log P[y | x_i, x_S]`` under the data
    prior (004 eq. 19; shape ``(*b, k…k, m)`` with size 1 on ``rest``) and ``has_mass`` marks
    ``π(x_i, x_S) > 0``."""
    batch = mech.log_prior.ndim - 1
    joint = _as_tensor(mech.log_prior[..., None] + mech.log_K, records, 1)  # (*b, k..k, m)
    prior = _as_tensor(mech.log_prior, records, 0)[..., None]  # (*b, k..k, 1)
    for i in range(records.r):
        others = [j for j in range(records.r) if j != i]
        for size in range(len(others) + 1):
            for known in itertools.combinations(others, size):
                rest = tuple(batch + j for j in others if j not in known)
                log_num = logsumexp(joint, axis=rest, keepdims=True) if rest else joint
                log_den = logsumexp(prior, axis=rest, keepdims=True) if rest else prior
                has_mass = log_den > NEG_INF
                log_p = jnp.where(has_mass, log_num - jnp.where(has_mass, log_den, 0.0),
                                  NEG_INF)
                yield i, rest, log_p, has_mass


def _spread_over(log_p, possible, axis: int, batch: int):
    """``max log P − min log P`` along ``axis`` over entries with positive mass, then the max
    over every non-batch axis; a zero ``P`` beside a positive one is ``+∞``."""
    top = jnp.max(log_p, axis=axis)
    bottom = jnp.min(jnp.where(possible, log_p, jnp.inf), axis=axis)
    occurs = top > NEG_INF
    spread = jnp.where(occurs, top - jnp.where(occurs, bottom, 0.0), 0.0)
    return jnp.max(spread, axis=tuple(range(batch, spread.ndim)))


def sp_at(mech: Mechanism, log_belief: Float[Array, "*b n"] | None = None) -> Float[Array, "*b"]:
    """SP level of the mechanism at the belief ``β`` (004 Def. 1; SPEC §2.6), exact.

    ``b̄_0[x|y] ∝ K[x,y]·β(x)``, ``b̄_i[x|y] ∝ K[x_{−i},y]·β(x)``; the level is
    ``max_{y,i} SD(b̄_0[·|y], b̄_i[·|y])``. An output impossible in game 0 or in game ``i`` under
    ``β`` has no posterior there and is skipped. ``β`` defaults to the mechanism's belief.
    """
    records = checked_records(mech)
    log_belief = mech.log_belief if log_belief is None else log_belief
    log_K = mech.log_K
    level = jnp.zeros(log_K.shape[:-2], log_K.dtype)
    game0 = log_belief[..., :, None] + log_K
    for i in range(records.r):
        game_i = log_belief[..., :, None] + log_K[..., without(records, i), :]
        level = jnp.maximum(level, jnp.max(_posterior_distance(game0, game_i), axis=-1))
    return level


def bsp_at(mech: Mechanism, log_belief: Float[Array, "*b n"] | None = None) -> Float[Array, "*b"]:
    """BSP level of the mechanism at the belief ``b`` (004 Def. 2, eqs. 9 and 15), exact.

    For a position ``i`` and a known set ``S ⊆ [r]∖{i}`` the adversary's games run on partial
    databases ``(x_i, x_S)`` with the unknown records drawn from the **data prior** π, exactly
    as in BDP (004 eq. 19: ``P[y | x_i, x_S]``), and weighted by the belief's marginal
    ``b(x_i, x_S)``: ``b̄_0 ∝ P[y | x_i, x_S]·b(x_i, x_S)`` and, with position ``i`` reset to
    ``⊥`` in game ``i``, ``b̄_i ∝ P[y | ⊥, x_S]·b(x_i, x_S)``. The level is the max over ``i``,
    ``S`` and outputs of their statistical difference. This is the reading under which 004's
    proof of Thm 1 goes through (it bounds ``P[y|x_i,x_S]/P[y|⊥,x_S]`` by BDP); with
    ``S = [r]∖{i}`` it is SP at ``b`` (004: Def. 2 reduces to Def. 1), so BSP ≥ SP at every
    belief. Partial databases the prior rules out (``π(x_i, x_S) = 0`` or ``π(⊥, x_S) = 0``)
    have no game and are left out; ``b = π`` by default.
    """
    records = checked_records(mech)
    log_belief = mech.log_belief if log_belief is None else log_belief
    batch = mech.log_prior.ndim - 1
    belief = _as_tensor(log_belief, records, 0)[..., None]
    level = jnp.zeros(mech.log_prior.shape[:-1], mech.log_K.dtype)
    reset = jnp.array([records.default])
    for i, rest, log_p, has_mass in _known_set_conditionals(mech, records):
        has_game = has_mass & jnp.take(has_mass, reset, axis=batch + i)
        weight = logsumexp(belief, axis=rest, keepdims=True) if rest else belief
        weight = jnp.where(has_game, weight, NEG_INF)
        game0 = jnp.where(has_game, log_p, NEG_INF) + weight
        game_i = jnp.where(has_game, jnp.take(log_p, reset, axis=batch + i), NEG_INF) + weight
        columns = game0.shape[:batch] + (-1, mech.m)
        level = jnp.maximum(level, jnp.max(_posterior_distance(
            game0.reshape(columns), jnp.broadcast_to(game_i, game0.shape).reshape(columns)),
            axis=-1))
    return level


def _posterior_distance(log_a, log_b):
    """``SD`` of the columns of ``a`` and ``b`` normalized over axis −2; 0 where one is all 0."""
    norm_a = logsumexp(log_a, axis=-2, keepdims=True)
    norm_b = logsumexp(log_b, axis=-2, keepdims=True)
    both = (norm_a > NEG_INF) & (norm_b > NEG_INF)
    pa = jnp.exp(log_a - jnp.where(both, norm_a, 0.0))
    pb = jnp.exp(log_b - jnp.where(both, norm_b, 0.0))
    return jnp.where(both[..., 0, :], 0.5 * jnp.sum(jnp.abs(pa - pb), axis=-2), 0.0)


def mp_at(mech: Mechanism, p) -> Float[Array, "*b"]:
    """MP level at ``p`` over the two-point family 𝔻_* (Li et al., 004 Def. 3; SPEC §2.6).

    For neighbours ``x, x'`` with weight ``p`` on ``x``: the least ``ε`` with
    ``P[x|y] ≤ e^ε p`` and ``P[x'|y] ≥ e^{−ε}(1−p)`` for every output (single outputs suffice,
    mediant inequality), i.e. the max over ordered neighbour pairs and outputs of
    ``log(K_x/(pK_x + (1−p)K_x'))`` and ``log((pK_x + (1−p)K_x')/K_x')``. The first falls and
    the second rises with ``p`` (when ``K_x > K_x'``), so the sup over ``p`` is the DP level.
    """
    records = checked_records(mech)
    E = jnp.asarray(neighbours(records))
    log_x = mech.log_K[..., :, None, :]  # (*b, n, 1, m): K_x
    log_z = mech.log_K[..., None, :, :]  # (*b, 1, n, m): K_x'
    log_mix = jnp.logaddexp(jnp.log(p) + log_x, jnp.log1p(-p) + log_z)
    occurs = E[:, :, None] & (log_mix > NEG_INF)
    safe_mix = jnp.where(occurs, log_mix, 0.0)
    first = jnp.where(occurs, log_x - safe_mix, 0.0)  # −∞ when K_x = 0: no constraint
    second = jnp.where(occurs, safe_mix - jnp.where(occurs & (log_z > NEG_INF), log_z, -jnp.inf),
                       0.0)
    level = jnp.maximum(jnp.max(first, axis=(-3, -2, -1)), jnp.max(second, axis=(-3, -2, -1)))
    return jnp.maximum(level, 0.0)
