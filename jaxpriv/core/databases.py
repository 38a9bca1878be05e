"""Database-level notions (SPEC §2.6, paper 004): secrets are databases of ``r`` records.

A database is ``x = (x_1, …, x_r) ∈ V^r``, ``V = {0, …, k−1}``, with a default value ``⊥``;
the mechanism's rows are the ``n = k^r`` databases in lexicographic order (``x_1`` most
significant) and its prior is the joint prior on databases (correlated records allowed).

Kernels here take a whole mechanism and broadcast over batch axes; the per-(position, known set)
loops are static Python loops (``r`` positions × ``2^{r−1}`` sets), so keep ``r`` small
(:data:`MAX_DATABASES`, :data:`MAX_KNOWN_SETS`).

* **DP** over neighbours (databases differing in one position): :func:`dp`.
* **BDP** (Yang et al., 004 eq. 19): :func:`bdp`.
* **SP** (Kasiviswanathan–Smith, 004 Def. 1): :func:`sp_at` at a given belief, and :func:`sp`,
  the SP level — the sup over *all* beliefs — in closed form (below).
* **BSP** (004 Def. 2, eqs. 9 and 15; the reading is in :func:`bsp_at`): :func:`bsp_at` and the
  sup over beliefs :func:`bsp`.
* **MP** (Li et al., 004 Def. 3) over the family 𝔻_* of two-point priors: :func:`mp_at` at the
  weight ``p`` and :func:`mp`, the sup over ``p`` (see :func:`mp_at` for the family's reading).
* Joint priors on databases, correlated ones included: :func:`product_prior`,
  :func:`markov_prior`, :func:`mixture_prior`.

**The SP and BSP levels in closed form.** Fix a position ``i`` and an output ``y`` and let
``r(x) = K[x,y] / K[x_{−i},y]``. Game ``i``'s posterior is game 0's tilted by ``1/r``: with
``Q = b̄_i[·|y]`` (any distribution, as ``β`` ranges over all beliefs), ``b̄_0[·|y] = Q·r/E_Q r``
and ``SD = E_Q[(r − E_Q r)_+] / E_Q r``. For a fixed mean this is the expectation of a convex
function of ``r``, so it is largest when ``Q`` sits on the two extreme ratios; optimizing the
two weights gives ``sup_β SD = tanh(Λ/4)``, ``Λ = log max_x r(x) − log min_x r(x)``. Hence

    SP(K) = tanh(Λ/4),   Λ = max_{i,y} [max_x log r(x) − min_x log r(x)],

attained by a belief on two databases (approached, when a ratio is 0 or ∞). BSP is the same
over partial databases ``(x_i, x_S)`` with the BDP conditionals. Since ``r = 1`` at ``x_i = ⊥``
and neighbours share ``x_{−i}``: ``DP ≤ Λ ≤ 2·DP``, so ``tanh(DP/4) ≤ SP ≤ tanh(DP/2)`` (and
likewise BSP against BDP); ``docs/certified.md`` turns this into the certified envelopes of
R7–R11. An output that one game can produce and the other cannot is perfectly revealing:
``SD = 1`` (the limit of the formula as the missing probability goes to 0).

Examples:
  >>> import numpy as np
  >>> from jaxpriv import families
  >>> from jaxpriv.core import databases
  >>> from jaxpriv.core.mechanisms import Mechanism, Records
  >>> # randomized response on each of two bits, independently: ε per record
  >>> rr = np.array([[0.75, 0.25], [0.25, 0.75]])
  >>> mech = Mechanism.from_K(np.kron(rr, rr), records=Records(k=2, r=2))
  >>> round(float(databases.dp(mech)), 5), round(float(databases.bdp(mech)), 5)  # log 3
  (1.09861, 1.09861)
"""

from __future__ import annotations

import itertools
from functools import lru_cache

import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp
from jaxtyping import Array, Bool, Float, Int

from jaxpriv.core.errors import InputError
from jaxpriv.core.mechanisms import Mechanism, Records
from jaxpriv.core.notions import NEG_INF, ldp_kernel

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
    """Row of ``x_{−i}``: ``x`` with position ``i`` (0-based) set to the default ``⊥``.

    int32 in every mode: an int64 index traced under ``jax.enable_x64`` and then by the same
    jitted function without it fails in JAX 0.10 (``lax.add`` of int64 and int32)."""
    v = values(records).copy()
    v[:, i] = records.default
    return index_of(records, v).astype(np.int32)


@lru_cache(maxsize=64)
def known_sets(records: Records) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """Every position ``i`` (0-based) with every known set ``S ⊆ [r]∖{i}``: the partial databases
    ``x_{i+S} = (x_i, x_S)`` of 004 eq. (7), the unknown records ``[r]∖{i}∖S`` marginalised."""
    pairs = []
    for i in range(records.r):
        others = [j for j in range(records.r) if j != i]
        for size in range(len(others) + 1):
            pairs.extend((i, known) for known in itertools.combinations(others, size))
    return tuple(pairs)


# --------------------------------------------------------------------------------------------
# joint priors on databases
# --------------------------------------------------------------------------------------------


def product_prior(records: Records, marginals: Float[Array, "*b r k"]) -> Float[Array, "*b n"]:
    """``log π`` of independent records with the given marginals (rows of ``marginals``)."""
    v = values(records)
    logs = jnp.log(jnp.asarray(marginals))
    return jnp.sum(logs[..., np.arange(records.r), v], axis=-1)


def markov_prior(records: Records, initial: Float[Array, "*b k"],
                 transition: Float[Array, "*b k k"]) -> Float[Array, "*b n"]:
    """``log π`` of a Markov chain over the records: ``x_1 ~ initial``,
    ``x_{j+1} | x_j ~ transition[x_j]`` (correlated neighbours; a sticky chain makes records
    nearly copies of each other)."""
    v = values(records)
    log_initial = jnp.log(jnp.asarray(initial))
    log_transition = jnp.log(jnp.asarray(transition))
    log_p = log_initial[..., v[:, 0]]
    for j in range(records.r - 1):
        log_p = log_p + log_transition[..., v[:, j], v[:, j + 1]]
    return log_p


def mixture_prior(weights: Float[Array, "*b c"], log_components: Float[Array, "*b c n"]
                  ) -> Float[Array, "*b n"]:
    """``log π`` of the mixture ``Σ_c weights[c]·π_c`` of priors given as logs (e.g. a mixture
    of product priors: records independent given a hidden class)."""
    return logsumexp(jnp.log(jnp.asarray(weights))[..., :, None] + log_components, axis=-2)


# --------------------------------------------------------------------------------------------
# DP and BDP
# --------------------------------------------------------------------------------------------


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


def _known_set_conditionals(mech: Mechanism, records: Records, proper: bool = False):
    """For every position ``i`` and known set ``S ⊆ [r]∖{i}`` (only ``S ≠ [r]∖{i}`` when
    ``proper``): ``(i, rest, log P, has_mass)``, where ``rest`` are the marginalised axes,
    ``log P = log P[y | x_i, x_S]`` under the data prior (004 eq. 19; shape ``(*b, k…k, m)``
    with size 1 on ``rest``) and ``has_mass`` marks ``π(x_i, x_S) > 0``."""
    batch = mech.log_prior.ndim - 1
    joint = _as_tensor(mech.log_prior[..., None] + mech.log_K, records, 1)  # (*b, k..k, m)
    prior = _as_tensor(mech.log_prior, records, 0)[..., None]  # (*b, k..k, 1)
    for i, known in known_sets(records):
        rest = tuple(batch + j for j in range(records.r) if j != i and j not in known)
        if proper and not rest:
            continue
        log_num = logsumexp(joint, axis=rest, keepdims=True) if rest else joint
        log_den = logsumexp(prior, axis=rest, keepdims=True) if rest else prior
        has_mass = log_den > NEG_INF
        log_p = jnp.where(has_mass, log_num - jnp.where(has_mass, log_den, 0.0), NEG_INF)
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
    ``max_{y,i} SD(b̄_0[·|y], b̄_i[·|y])``. An output impossible in both games under ``β`` is
    skipped; one possible in exactly one of them reveals which game is played: ``SD = 1``.
    ``β`` defaults to the mechanism's belief. :func:`sp` is the sup over all ``β``.
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


def sp(mech: Mechanism) -> Float[Array, "*b"]:
    """The SP level: the sup of :func:`sp_at` over every belief ``β`` on databases, exactly.

    ``tanh(Λ/4)`` with ``Λ = max_{i,y} [max_x log r(x) − min_x log r(x)]``,
    ``r(x) = K[x,y]/K[x_{−i},y]`` (see the module docstring for the proof). In ``[0, 1]``;
    1 when some ratio is 0 or ∞ (then approached or attained by a belief on two databases).
    """
    return jnp.tanh(0.25 * sp_spread(mech))


def sp_spread(mech: Mechanism) -> Float[Array, "*b"]:
    """``Λ`` of :func:`sp` (nats, in ``[DP, 2·DP]``): ``SP = tanh(Λ/4)``."""
    records = checked_records(mech)
    log_K = mech.log_K
    spread = jnp.zeros(log_K.shape[:-2], log_K.dtype)
    for i in range(records.r):
        column = _ratio_spread(log_K, log_K[..., without(records, i), :])
        spread = jnp.maximum(spread, jnp.max(column, axis=-1))
    return spread


def _ratio_spread(log_a, log_c, allowed=None):
    """Per column: ``max_x log(a/c) − min_x log(a/c)`` over the candidates ``x`` (axis −2) with
    ``allowed`` and ``a + c > 0``; ``+∞`` where a ratio is 0 or ∞ or where exactly one of ``a``,
    ``c`` is positive somewhere (one game produces the output, the other cannot); 0 where
    neither is."""
    a_pos = log_a > NEG_INF
    c_pos = log_c > NEG_INF
    if allowed is not None:
        a_pos &= allowed
        c_pos &= allowed
    both = a_pos & c_pos
    log_ratio = jnp.where(both, log_a - jnp.where(both, log_c, 0.0),
                          jnp.where(a_pos, jnp.inf, -jnp.inf))
    counted = a_pos | c_pos
    top = jnp.max(jnp.where(counted, log_ratio, -jnp.inf), axis=-2)
    bottom = jnp.min(jnp.where(counted, log_ratio, jnp.inf), axis=-2)
    has_a, has_c = jnp.any(a_pos, axis=-2), jnp.any(c_pos, axis=-2)
    game = has_a & has_c  # then top > −∞ and bottom < +∞: no ∞ − ∞
    spread = jnp.where(game, jnp.where(game, top, 0.0) - jnp.where(game, bottom, 0.0), 0.0)
    return jnp.where(has_a != has_c, jnp.inf, spread)


def _reset_games(mech: Mechanism, records: Records):
    """BSP's two games for every position ``i`` and known set ``S`` (004 eqs. 9 and 15), under
    the data prior: ``(rest, log P[y|x_i,x_S], log P[y|⊥,x_S], has_game)``, all shaped
    ``(*b, k…k, ·)`` with size 1 on the marginalised axes ``rest``; ``has_game`` marks partial
    databases with ``π(x_i, x_S) > 0`` and ``π(⊥, x_S) > 0``."""
    batch = mech.log_prior.ndim - 1
    reset = jnp.array([records.default])
    for i, rest, log_p, has_mass in _known_set_conditionals(mech, records):
        has_game = has_mass & jnp.take(has_mass, reset, axis=batch + i)
        log_reset = jnp.broadcast_to(jnp.take(log_p, reset, axis=batch + i), log_p.shape)
        yield rest, log_p, log_reset, has_game


def _columns(a, batch: int, last: int):
    """``(*b, k…k, last)`` → ``(*b, N, last)``: the partial databases as one axis."""
    return a.reshape(a.shape[:batch] + (-1, last))


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
    have no game and are left out (see :func:`bsp_games_defined`); outputs are treated as in
    :func:`sp_at`; ``b = π`` by default. :func:`bsp` is the sup over all ``b``.
    """
    records = checked_records(mech)
    log_belief = mech.log_belief if log_belief is None else log_belief
    batch = mech.log_prior.ndim - 1
    belief = _as_tensor(log_belief, records, 0)[..., None]
    level = jnp.zeros(mech.log_prior.shape[:-1], mech.log_K.dtype)
    for rest, log_a, log_c, has_game in _reset_games(mech, records):
        weight = logsumexp(belief, axis=rest, keepdims=True) if rest else belief
        weight = jnp.where(has_game, weight, NEG_INF)
        game0 = jnp.where(has_game, log_a, NEG_INF) + weight
        game_i = jnp.where(has_game, log_c, NEG_INF) + weight
        level = jnp.maximum(level, jnp.max(_posterior_distance(
            _columns(game0, batch, mech.m), _columns(game_i, batch, mech.m)), axis=-1))
    return level


def bsp(mech: Mechanism) -> Float[Array, "*b"]:
    """The BSP level: the sup of :func:`bsp_at` over every belief, exactly: ``tanh(Λ/4)`` with
    ``Λ`` the largest ratio spread ``max_u log r(u) − min_u log r(u)``,
    ``r(u) = P[y|x_i,x_S] / P[y|⊥,x_S]``, over positions, known sets, outputs and the partial
    databases ``u = (x_i, x_S)`` that have a game (as :func:`sp`; see the module docstring)."""
    return jnp.tanh(0.25 * bsp_spread(mech))


def bsp_spread(mech: Mechanism) -> Float[Array, "*b"]:
    """``Λ`` of :func:`bsp` (nats): ``BSP = tanh(Λ/4)``."""
    records = checked_records(mech)
    batch = mech.log_prior.ndim - 1
    spread = jnp.zeros(mech.log_prior.shape[:-1], mech.log_K.dtype)
    for _, log_a, log_c, has_game in _reset_games(mech, records):
        allowed = _columns(jnp.broadcast_to(has_game, log_a.shape[:-1] + (1,)), batch, 1)
        column = _ratio_spread(_columns(log_a, batch, mech.m), _columns(log_c, batch, mech.m),
                               allowed)
        spread = jnp.maximum(spread, jnp.max(column, axis=-1))
    return spread


def bsp_games_defined(mech: Mechanism) -> Bool[Array, "*b"]:
    """Whether every partial database ``(x_i, x_S)`` the prior allows has its ``⊥``-reset
    ``(⊥, x_S)`` allowed too, so that BSP's game ``i`` (004 eq. 13) exists wherever BDP
    compares two partial databases. 004's proof of the converse (R8) plays game ``i``; a prior
    that rules out the reset leaves BDP free there while BSP cannot see it. True for every
    full-support prior."""
    records = checked_records(mech)
    batch = mech.log_prior.ndim - 1
    reset = jnp.array([records.default])
    defined = jnp.ones(mech.log_prior.shape[:-1], bool)
    for i, _, _, has_mass in _known_set_conditionals(mech, records):
        ok = ~has_mass | jnp.take(has_mass, reset, axis=batch + i)
        defined &= jnp.all(ok, axis=tuple(range(batch, ok.ndim)))
    return defined


def _posterior_distance(log_a, log_b):
    """``SD`` of the columns of ``a`` and ``b`` normalized over axis −2; 1 where exactly one of
    them is all 0 (the output reveals the game), 0 where both are."""
    norm_a = logsumexp(log_a, axis=-2, keepdims=True)
    norm_b = logsumexp(log_b, axis=-2, keepdims=True)
    has_a, has_b = norm_a > NEG_INF, norm_b > NEG_INF
    both = has_a & has_b
    pa = jnp.exp(log_a - jnp.where(both, norm_a, 0.0))
    pb = jnp.exp(log_b - jnp.where(both, norm_b, 0.0))
    distance = jnp.where(both, 0.5 * jnp.sum(jnp.abs(pa - pb), axis=-2, keepdims=True),
                         jnp.where(has_a != has_b, 1.0, 0.0))
    return distance[..., 0, :]


# --------------------------------------------------------------------------------------------
# membership privacy
# --------------------------------------------------------------------------------------------

MP_FAMILIES = ("004", "databases")


def bsp_games(mech: Mechanism) -> Float[Array, "*b"]:
    """:func:`bsp_games_defined` as a level: 1.0 where BSP's games exist, else 0.0 (the
    mechanism's dtype)."""
    return bsp_games_defined(mech).astype(mech.log_K.dtype)


def mp_at(mech: Mechanism, p, family: str = "004") -> Float[Array, "*b"]:
    """MP level at ``p`` over the two-point family 𝔻_* (Li et al., 004 Def. 3; SPEC §2.6).

    A member ``𝒟_{i,K}`` (004 §III-B) puts weight ``p`` on the partial database
    ``(x_i, x_K)`` and ``1 − p`` on ``(x_i', x_K)``, ``K ⊆ [r]∖{i}``; the records outside
    ``K`` are drawn from the data prior given the known ones, exactly as in BDP (004 eqs.
    24–25), so ``P[y | x_i, x_K]`` is BDP's conditional. With ``K = [r]∖{i}`` the member is a
    two-point prior on two neighbouring databases and needs nothing from the data prior; with
    ``K`` smaller it exists when both partial databases have prior mass.

    Args:
      mech: a database mechanism.
      p: the weight on the first point, in ``(0, 1)``.
      family: ``"004"`` (every ``K``, the default) or ``"databases"`` (whole databases only:
        SPEC §2.6's two-point priors on neighbouring databases ``x, x'``).

    The level is the least ``ε`` with ``P[x|y] ≤ e^ε p`` and ``P[x'|y] ≥ e^{−ε}(1−p)`` for every
    member and output (single outputs suffice, mediant inequality): the max over ordered pairs
    and outputs of ``log(P_x/(pP_x + (1−p)P_x'))`` and ``log((pP_x + (1−p)P_x')/P_x')``. The first
    falls and the second rises with ``p`` (when ``P_x > P_x'``), so the sup over ``p`` is
    :func:`mp`.
    """
    records = _checked_family(mech, family)
    E = jnp.asarray(neighbours(records))
    level = _mp_terms(mech.log_K[..., :, None, :], mech.log_K[..., None, :, :],
                      E[:, :, None], p, batch=mech.log_K.ndim - 2)
    if family == "004":
        batch = mech.log_prior.ndim - 1
        for i, _, log_p, has_mass in _known_set_conditionals(mech, records, proper=True):
            axis = batch + i
            pair = ~jnp.eye(records.k, dtype=bool).reshape(
                (records.k, records.k) + (1,) * (log_p.ndim - axis - 1))
            valid = jnp.expand_dims(has_mass, axis + 1) & jnp.expand_dims(has_mass, axis) & pair
            level = jnp.maximum(level, _mp_terms(jnp.expand_dims(log_p, axis + 1),
                                                 jnp.expand_dims(log_p, axis), valid, p, batch))
    return level


def _mp_terms(log_x, log_z, valid, p, batch: int):
    """``max(log(P_x/(pP_x + (1−p)P_z)), log((pP_x + (1−p)P_z)/P_z))`` over the valid pairs and
    outputs (every non-batch axis), at least 0."""
    log_mix = jnp.logaddexp(jnp.log(p) + log_x, jnp.log1p(-p) + log_z)
    occurs = valid & (log_mix > NEG_INF)
    safe_mix = jnp.where(occurs, log_mix, 0.0)
    first = jnp.where(occurs, log_x - safe_mix, 0.0)  # −∞ when P_x = 0: no constraint
    second = jnp.where(occurs, safe_mix - jnp.where(occurs & (log_z > NEG_INF), log_z, -jnp.inf),
                       0.0)
    axes = tuple(range(batch, first.ndim))
    level = jnp.maximum(jnp.max(first, axis=axes), jnp.max(second, axis=axes))
    return jnp.maximum(level, 0.0)


def mp(mech: Mechanism, family: str = "004") -> Float[Array, "*b"]:
    """The MP level: the sup of :func:`mp_at` over ``p ∈ (0, 1)``: the largest
    ``|log(P[y|x_i,x_K] / P[y|x_i',x_K])|`` over the family's members and outputs.

    Over whole databases (``family="databases"``) it is the DP level. Over 𝔻_* (``"004"``) it
    is ``max(DP, BDP over K ≠ [r]∖{i})``: at least the BDP level, and equal to it when the prior
    has full support (BDP's own ``S = [r]∖{i}`` term is DP over the databases with mass).
    """
    records = _checked_family(mech, family)
    level = dp(mech)
    if family == "004":
        batch = mech.log_prior.ndim - 1
        for i, _, log_p, has_mass in _known_set_conditionals(mech, records, proper=True):
            level = jnp.maximum(level, _spread_over(log_p, has_mass, batch + i, batch))
    return level


def _checked_family(mech: Mechanism, family: str) -> Records:
    if family not in MP_FAMILIES:
        raise InputError(f"unknown MP family {family!r}; use one of {', '.join(MP_FAMILIES)}")
    return checked_records(mech)
