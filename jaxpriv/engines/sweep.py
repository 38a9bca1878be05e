"""Sweeps: evaluate one relation over millions of random mechanisms, chunk by chunk.

Data flows one way: **sample** (on device, from ``fold_in(key(seed), chunk_index)``) →
**evaluate** (float32, :func:`jaxpriv.registry.evaluate`, with the levels from the fused batch
kernels :mod:`jaxpriv.kernels.fused` where every notion of the relation has a screen there: the record
notions', and the database notions' (DP, BDP, SP, BSP, MP)) → **accumulate** (a binned
envelope on device: per premise bin × parameter bin, the largest conclusion and the mechanism
reaching it; the smallest per-mechanism slack overall; the lowest-slack candidates of the chunk —
each block reduced where it is drawn, then the blocks folded) →
**verify** (on the host, every candidate recomputed from scratch in float64 and saved as a
witness JSON only if the violation survives, then re-read and re-checked) → **report**.

The accumulator lives on device between chunks; one small transfer per chunk brings back the
candidates. After each chunk the state is checkpointed atomically, so a killed run loses at most
the chunk in flight and ``resume=True`` continues to exactly the result of an uninterrupted run.
Results depend on (seed, chunk size), not on the device count: each block's random numbers are
a counter hash of their index keyed by the block's key (:func:`jaxpriv.kernels.samplers.random_bits`),
and the reductions are max/min with ties broken by the smallest global index. At n, m ≤ 8 the
step is compiled with :func:`jaxpriv.kernels.fused.compiler_options` (also where the reference notions
screen: relations between BDP and BSP or MP sweep 1.25–1.7× faster at k = 2, r = 3).
On a CPU with :mod:`jaxpriv.kernels.native`, mechanisms are drawn by its sampler (the same draws to
float32 rounding; ``make_step(..., sampler="xla")`` keeps JAX's), a device draws a few blocks at
a time (:func:`block_group`) and each group is reduced by one native pass
(:func:`jaxpriv.kernels.native.group_winners`): the same bits as block by block in XLA. The mesh spans every process
of a group (:mod:`jaxpriv.engines.group`); state and candidates come back whole on each.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxpriv import registry
from jaxpriv.engines import io, runstate, settings
from jaxpriv.kernels import fused, native, samplers
from jaxpriv.core.errors import InputError
from jaxpriv.core.mechanisms import Mechanism, Records

CHECKPOINT = "checkpoint.npz"
CHECKPOINT_META = "checkpoint.json"
_NO_INDEX = np.iinfo(np.int32).max


@dataclasses.dataclass(frozen=True)
class SweepConfig:
    """Everything that determines a sweep's result (saved in the checkpoint).

    Attributes:
      relation: registry id.
      n, m: mechanism shape.
      count: mechanisms to evaluate (< 2^31).
      seed: PRNG seed.
      chunk: mechanisms per compiled step (a multiple of ``block`` × device count).
      block: mechanisms drawn together; the unit of randomness and of candidates, so results
        do not depend on the device count (each device loops over whole blocks, a few at a time
        where native kernels draw and screen: :func:`block_group`).
      x_max, x_bins: premise bins ``[0, x_max]``; mechanisms beyond are still checked.
      param_max, param_bins: condition-parameter bins, for relations with a free parameter.
      candidates: lowest-slack mechanisms per chunk sent to float64 verification: the lowest
        of the :data:`BLOCK_CANDIDATES` each block offers.
      candidate_slack: a float32 slack below this makes a mechanism a candidate.
      max_witnesses: verified violations saved as files: each is re-checked eagerly, saved,
        re-read and re-checked; later ones are counted on the compiled float64 recomputation.
      k, r: database layout (``n = k^r``) for relations between database-level notions; 0 if
        the secrets are not databases.
    """

    relation: str
    n: int
    m: int
    count: int
    seed: int = 0
    chunk: int = 16384
    block: int = 1024
    x_max: float = 10.0
    x_bins: int = 40
    param_max: float = 0.0
    param_bins: int = 1
    candidates: int = 16
    candidate_slack: float = 1.01
    max_witnesses: int = 100
    k: int = 0
    r: int = 0

    @property
    def cells(self) -> int:
        return self.x_bins * self.param_bins

    @property
    def chunks(self) -> int:
        return -(-self.count // self.chunk)

    @property
    def records(self) -> Records | None:
        return Records(self.k, self.r) if self.r else None


def sampler_spec(config: SweepConfig, relation=None) -> samplers.SamplerSpec:
    """What the sweep draws: the relation's sampling hint, with the records layout where it has
    one."""
    hint = (relation or registry.get(config.relation)).sampling
    return samplers.SamplerSpec(config.n, config.m, prior=hint.prior,
                                belief_eps_max=hint.belief_eps_max, values=hint.values,
                                prior_zero_fraction=hint.prior_zero_fraction,
                                records=config.records)


SETTING_OPTIONS = ("t_max", "draws", "mc_settings")
"""Options only a sweep of settings takes (ignored for mechanisms)."""


STEP_ENTRIES = 1 << 25
"""Entries of K a chunk holds by default (524,288 mechanisms at n = m = 8; at most 2^20
mechanisms): a step's fixed cost (its collectives, the host's round trip) stays a few percent
(R1 at n = m = 8 on a 2-core CPU: 5.2e6/s with 65,536 per chunk, 6.4–7.0e6/s with 262,144,
7.4e6/s with 524,288; R5 4.3 → 4.6e6/s from 262,144 to 524,288), and a killed run loses a
fraction of a second."""


def make_config(relation: str, n: int, m: int, count: int, seed: int = 0,
                chunk: int | None = None, memory_mb: float = 1024.0, **overrides):
    """A validated configuration for a sweep of ``relation``'s subject: a :class:`SweepConfig`
    (mechanisms: the relation's default bins, :data:`STEP_ENTRIES` per chunk, blocks that fit
    ``memory_mb`` at about 64 float32 words per entry of K per mechanism, 16 candidates per
    65,536 mechanisms), or, for a claim about an estimator, the
    setting subject's :class:`jaxpriv.engines.settings.StatConfig` (``n`` secrets, ``x_bins``,
    ``t_max``, ``draws``, … as that subject takes them)."""
    rel = registry.get(relation)
    if rel.kind != "mechanism":
        given = {k: v for k, v in overrides.items() if k not in ("k", "r")}
        return settings.make_config(rel.id, "sweep", count=count, seed=seed,
                                    chunk=chunk, n=n, **given)
    overrides = {k: v for k, v in overrides.items() if k not in SETTING_OPTIONS}
    relation_id = rel.id
    k, r = int(overrides.pop("k", 0) or 0), int(overrides.pop("r", 0) or 0)
    if rel.needs_records:
        if k < 2 or r < 1:
            raise InputError(f"{relation_id} relates database-level notions: give the layout "
                             f"with --k (values per record, >= 2) and --r (records, >= 1)")
        n = k**r
    else:
        k = r = 0
    for name, value, low in (("n", n, 2), ("m", m, 2), ("count", count, 1)):
        if int(value) != value or value < low:
            raise InputError(f"--{name} must be an integer >= {low}, got {value}")
    if n * m > 4096:
        raise InputError(f"n*m = {n * m} is above the sweep limit of 4096 entries per mechanism")
    if count >= 2**31 - 2**24:
        raise InputError(f"--count {count} is too large for one sweep (limit 2^31 − 2^24)")
    if seed < 0 or int(seed) != seed:
        raise InputError(f"--seed must be a non-negative integer, got {seed}")
    devices = jax.device_count()
    if memory_mb <= 0:
        raise InputError(f"--memory-mb must be positive, got {memory_mb}")
    if chunk is None:
        chunk = max(256, min(STEP_ENTRIES // (n * m), 1 << 20, count))
    if chunk < 1:
        raise InputError(f"--chunk must be positive, got {chunk}")
    # what is live at once is one block per device: about 64 float32 words per entry of K
    fit = max(1, int(memory_mb * 2**20 / (4 * 64 * n * m)))
    block = int(overrides.pop("block", min(1024, chunk, fit)))
    unit = block * devices
    chunk = -(-int(chunk) // unit) * unit
    hint = rel.sampling
    fields = dict(relation=relation_id, n=int(n), m=int(m), count=int(count), seed=int(seed),
                  chunk=chunk, block=block, x_max=hint.x_max, param_max=hint.param_max,
                  param_bins=hint.param_bins, k=k, r=r)
    fields.update(overrides)
    # as many candidates per mechanism as 16 per 65,536 (at least 16); a chunk smaller than the
    # candidate count sends all of it to the float64 check
    candidates = fields.get("candidates", max(SweepConfig.candidates, chunk // 4096))
    fields["candidates"] = min(int(candidates), chunk)
    return SweepConfig(**fields)


# --------------------------------------------------------------------------------------------
# the device-side accumulator
# --------------------------------------------------------------------------------------------


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


def _empty_best(cells: int, n: int, m: int) -> Best:
    return Best(jnp.full((cells,), -jnp.inf, jnp.float32), jnp.full((cells,), _NO_INDEX, jnp.int32),
                jnp.zeros((cells, n, m), jnp.float32), jnp.zeros((cells, n), jnp.float32),
                jnp.zeros((cells, n), jnp.float32), jnp.zeros((cells, m), jnp.float32))


def initial_state(config: SweepConfig) -> SweepState:
    return SweepState(_empty_best(config.cells, config.n, config.m),
                      _empty_best(1, config.n, config.m),
                      jnp.zeros((config.cells,), jnp.int32), jnp.zeros((), jnp.int32))


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


def uses_fused_kernel(relation, options: dict[str, Any] | None = None) -> bool:
    """Whether the fused kernels (:func:`jaxpriv.kernels.fused.screen_levels`) compute every level the
    relation needs: each of its notions has a ``screen`` (a field of those kernels) that
    applies at ``options`` (default: the relation's own)."""
    options = relation.options if options is None else options
    return all(registry.notion(key).screens(options) for key in relation.notions)


def screened_levels(relation, mech: Mechanism) -> dict[str, jax.Array]:
    """The relation's levels by the fused kernels (:func:`jaxpriv.kernels.fused.screen_levels`), keyed
    by its notion keys."""
    screens = {key: registry.notion(key).screen for key in relation.notions}
    levels = fused.screen_levels(mech.log_K, mech.log_prior, mech.log_belief, mech.records,
                                 set(screens.values()))
    return {key: levels[screen] for key, screen in screens.items()}


def envelope_score(relation, conclusion, parameter):
    """What a premise cell keeps the largest of: the conclusion level, or, for a relation whose
    bound scales with the measured parameter (``bound = f(x, 1)·parameter``), the ratio
    ``conclusion / parameter`` (``+∞`` for a positive conclusion at parameter 0, 0 for 0/0):
    the mechanism with the largest conclusion is not the one with the least slack there."""
    if not relation.scales_with_parameter:
        return conclusion
    positive = parameter > 0
    ratio = conclusion / jnp.where(positive, parameter, 1.0)
    return jnp.where(positive, ratio, jnp.where(conclusion > 0, jnp.inf, 0.0))


class Step(NamedTuple):
    """A sweep's chunk step, ``step(state, chunk_index) -> (state, candidates)``: ``core``
    (jitted, ``(state, chunk_index, seeds)``) draws, screens and folds the chunk's blocks;
    ``seeds`` (jitted, ``(key_data, chunk_index)``; ``None`` with JAX's sampler, which derives
    each block's key inside ``core``) draws every block's seed words for the native sampler.

    The seed words are a separate program because drawing them is threefry — rolled loops that
    XLA compiles one by one, ~1–1.7 s of a 1.5–2 s step compile at n = m = 8 — and that program
    does not depend on the relation (:func:`jaxpriv.kernels.samplers.draw_all_seeds`): one compile, or
    one persistent-cache hit, serves every relation of an audit."""

    core: Any
    seeds: Any
    key_data: np.ndarray

    def __call__(self, state: SweepState, chunk_index):
        seeds = None if self.seeds is None else self.seeds(self.key_data, chunk_index)
        return self.core(state, chunk_index, seeds)

    def compile(self, state: SweepState, chunk_index) -> Step:
        """Both programs compiled ahead of time for these arguments' shapes and shardings."""
        if self.seeds is None:
            return Step(self.core.lower(state, chunk_index, None).compile(), None, self.key_data)
        seeds = self.seeds.lower(self.key_data, chunk_index).compile()
        example = seeds(self.key_data, chunk_index)  # its sharding is what the core is given
        return Step(self.core.lower(state, chunk_index, example).compile(), seeds, self.key_data)


GROUP_ENTRIES = 1 << 18
"""Entries of K a device draws and evaluates at once (:func:`block_group`): 4,096 mechanisms at
n = m = 8, four blocks of 1,024."""


def block_group(config: SweepConfig, devices: int) -> int:
    """Blocks a device draws and evaluates together where native kernels draw and screen: the
    most, up to :data:`GROUP_ENTRIES` entries of K, that divide its blocks of a chunk. Each
    block keeps its own seeds and its own candidates, so results do not depend on it (R5 at
    n = m = 8, 2-core Xeon: 5.51 → 5.76e6/s with four blocks of 1,024; R1 unchanged). Memory:
    on that path a group holds a few float32 words per entry of K (log K, the sampler's and
    the screen's per-mechanism outputs), well inside the 64 words per entry of one block that
    ``make_config``'s ``memory_mb`` budgets for XLA's paths."""
    per_device = config.chunk // config.block // devices
    group = max(1, min(per_device, GROUP_ENTRIES // (config.block * config.n * config.m)))
    while per_device % group:
        group -= 1
    return group


@functools.cache
def _block_seeds(devices: tuple, blocks: int):
    """The jitted ``(key_data, chunk_index) -> NativeSeeds`` of a chunk's ``blocks`` blocks
    (block ``i``'s key is ``fold_in(key, i)``), whole on every device of ``devices``."""
    mesh = Mesh(np.array(devices), ("batch",))

    def seeds(key_data, chunk_index):
        base_key = jax.random.wrap_key_data(key_data)
        indices = chunk_index * blocks + jnp.arange(blocks, dtype=jnp.int32)
        return jax.vmap(lambda i: samplers.draw_all_seeds(jax.random.fold_in(base_key, i)))(
            indices)
    return jax.jit(seeds, out_shardings=NamedSharding(mesh, PartitionSpec()),
                   compiler_options=fused.integer_program_options())


def make_step(config: SweepConfig, relation=None,
              use_fused: bool | None = None, sampler: str = "auto") -> Step:
    """The chunk step ``(state, chunk_index) -> (state, candidates)`` (a :class:`Step`).

    ``use_fused``: screen with :mod:`jaxpriv.kernels.fused` (default: wherever it covers the relation);
    ``False`` evaluates with the reference notions (the benchmark's baseline).
    ``sampler``: :func:`jaxpriv.kernels.samplers.sample_log_K`'s kernel — ``"auto"`` (default) draws
    with the native sampler on a CPU where it is available (the same draws to float32
    rounding), ``"xla"`` with JAX's.
    """
    relation = relation or registry.get(config.relation)
    spec = sampler_spec(config, relation)
    options = relation.options
    mesh = Mesh(np.array(jax.devices()), ("batch",))
    base_key = jax.random.key(config.seed)
    blocks_per_chunk = config.chunk // config.block
    screen_fused = uses_fused_kernel(relation, options) if use_fused is None else use_fused

    candidates_per_block = min(config.candidates, config.block, BLOCK_CANDIDATES)
    # blocks drawn together where native kernels draw and screen (bit for bit the same results,
    # whatever the group; what XLA computes there is elementwise). Where XLA samples or screens,
    # its values can move by an ulp with the shape it is compiled for, so blocks stay one by one
    all_native = screen_fused and samplers.draws_natively(sampler)
    group = block_group(config, jax.device_count()) if all_native else 1
    # the group's reduction by the native kernel where there is one (bit for bit XLA's)
    reduce_natively = (jax.default_backend() == "cpu" and native.available()
                       and candidates_per_block >= 1)

    def draw_block(seeds):
        mech = samplers.sample_seeded(seeds, config.block, spec, kernel=sampler)
        values = mech.values if mech.values is not None else jnp.zeros(
            (config.block, config.m), jnp.float32)
        return mech.log_K, mech.log_prior, mech.log_belief, values

    def evaluate_block(block_indices, seeds):
        """``group`` blocks, each drawn from its own seeds (the unit of randomness), evaluated
        and reduced together (the unit of arithmetic: XLA's per-operation cost is paid once per
        group): identical shapes and program on every device, hence identical bits.
        The group is reduced where it is drawn — its best mechanism per cell, its lowest-slack
        mechanism, each block's candidates, its counts — and folded into its device's running
        results, so its mechanisms never leave it (folding groups, then devices in
        :func:`step`, gives what one fold over the whole chunk gives: maxima, minima and top-k
        with ties to the smallest index)."""
        size = group * config.block
        drawn = jax.vmap(draw_block)(seeds)
        log_K, log_prior, log_belief, values = jax.tree_util.tree_map(
            lambda a: a.reshape((size,) + a.shape[2:]), drawn)
        mech = Mechanism(log_K, log_prior, log_belief, values if spec.values else None,
                         spec.records)
        levels = None
        if screen_fused:
            levels = screened_levels(relation, mech)
        result = registry.evaluate(relation, mech, levels=levels, **options)
        x, param = result.premise, result.parameter
        index = (block_indices[:, None] * config.block
                 + jnp.arange(config.block, dtype=jnp.int32)).reshape(size)
        valid = result.condition_holds & (index < config.count)

        x_bin = jnp.clip(jnp.floor(x / config.x_max * config.x_bins), 0, config.x_bins - 1)
        in_range = valid & (x <= config.x_max)
        if config.param_bins > 1:
            p_bin = jnp.clip(jnp.floor(param / config.param_max * config.param_bins), 0,
                             config.param_bins - 1)
            in_range &= param <= config.param_max
        else:
            p_bin = jnp.zeros_like(x_bin)
        cell = (x_bin * config.param_bins + p_bin).astype(jnp.int32)
        # a NaN level (a float32 kernel's bug) must not erase its block's or group's bests (a
        # max propagates NaN): it never wins a cell or the worst point, and goes first to the
        # float64 check as a candidate (_candidate_slack)
        score = jnp.where(in_range, envelope_score(relation, result.conclusion, param), -jnp.inf)
        score = jnp.where(jnp.isnan(score), -jnp.inf, score)
        slack = jnp.where(valid, result.slack, jnp.inf)
        worst_score = jnp.where(jnp.isnan(slack), -jnp.inf, -slack)
        order = _candidate_slack(slack)
        if reduce_natively:  # the same winners in one pass (index grows with the position)
            winner, counts, worst_at, top = native.group_winners(
                jnp.where(in_range, cell, -1), score, worst_score, order, config.cells,
                config.block, candidates_per_block)
            envelope = _best_at(winner, score, index, mech, values)
            worst = _best_at(worst_at[None], worst_score, index, mech, values)
        else:
            envelope = _merge_best(_empty_best(config.cells, config.n, config.m), cell, score,
                                   index, mech, values)
            worst = _merge_best(_empty_best(1, config.n, config.m), jnp.zeros_like(cell),
                                worst_score, index, mech, values)
            counts = jnp.zeros((config.cells,), jnp.int32).at[cell].add(
                in_range.astype(jnp.int32))
            # each block's own offers; top_k keeps the earlier of equal slacks, i.e. the
            # smaller index, as _lowest does
            top = jax.lax.top_k(-order.reshape(group, config.block), candidates_per_block)[1]
            top = top + config.block * jnp.arange(group, dtype=jnp.int32)[:, None]
        top = top.reshape(-1)
        candidates = Candidates(order[top], index[top], mech.log_K[top],
                                mech.log_prior[top], mech.log_belief[top], values[top])
        return envelope, worst, counts, jnp.sum(valid, dtype=jnp.int32), candidates

    def device_blocks(block_indices, seeds):
        """A device's blocks, in index order, folded as they come: the running bests and counts
        are the loop's carry, so the device's memory does not grow with the chunk; each block's
        few lowest-slack mechanisms are stacked (a few per block) and the device's candidates
        picked from them after the loop (merging them into the carry block by block cost 7% at
        64 candidates, 31% at 256)."""
        def fold_block(carry, block):
            envelope, worst, counts, evaluated = carry
            more = evaluate_block(*block)
            return (_keep_better(envelope, more[0]), _keep_better(worst, more[1]),
                    counts + more[2], evaluated + more[3]), more[4]

        empty = (_empty_best(config.cells, config.n, config.m),
                 _empty_best(1, config.n, config.m), jnp.zeros((config.cells,), jnp.int32),
                 jnp.zeros((), jnp.int32))
        empty = jax.tree_util.tree_map(  # the carry varies over the devices' axis
            lambda a: jax.lax.pcast(a, ("batch",), to="varying"), empty)
        # every block's seed words at once (one by one, a few hundred tiny integer operations
        # per block: R1 at n = m = 8 6.62 -> 6.74e6/s, R5 3.99 -> 4.12e6/s); for the native
        # sampler drawn by Step.seeds, outside this program
        if seeds is None:
            seeds = jax.vmap(lambda i: samplers.draw_seeds(jax.random.fold_in(base_key, i),
                                                           spec, sampler))(block_indices)
        else:
            seeds = samplers.seeds_for(seeds, spec)
        carry, found = jax.lax.scan(fold_block, empty, jax.tree_util.tree_map(
            lambda a: a.reshape((-1, group) + a.shape[1:]), (block_indices, seeds)))
        found = _flat(found)
        if found.score.shape[0] < config.candidates:  # too few offers: pad with empty entries
            found = jax.tree_util.tree_map(
                lambda a, b: jnp.concatenate([a, b]), found,
                _no_candidates(config.candidates - found.score.shape[0], config.n, config.m))
        found = _lowest(found, config.candidates)
        return jax.tree_util.tree_map(lambda a: a[None], carry + (found,))

    sample_and_evaluate = jax.shard_map(device_blocks, mesh=mesh,
                                        in_specs=(PartitionSpec("batch"), PartitionSpec("batch")),
                                        out_specs=PartitionSpec("batch"))

    def fold(best: Best, blocks: Best) -> Best:
        """The blocks' bests ``(B, cells, ...)`` into ``best`` (block b's entry c is cell c)."""
        flat = _flat(blocks)
        cell = jnp.tile(jnp.arange(blocks.score.shape[1], dtype=jnp.int32), blocks.score.shape[0])
        return _merge_best(best, cell, flat.score, flat.index,
                           Mechanism(flat.log_K, flat.log_prior, flat.log_belief), flat.values)

    def step(state: SweepState, chunk_index, seeds):
        block_indices = chunk_index * blocks_per_chunk + jnp.arange(blocks_per_chunk,
                                                                    dtype=jnp.int32)
        envelope, worst, counts, evaluated, found = sample_and_evaluate(block_indices, seeds)
        candidates = _lowest(_flat(found), config.candidates)
        return SweepState(fold(state.envelope, envelope), fold(state.worst, worst),
                          state.cell_count + jnp.sum(counts, axis=0),
                          state.evaluated + jnp.sum(evaluated)), candidates

    # level 1 (fused.program_options; for a short sweep also the cheaper-to-compile fusion
    # emitters, bit for bit the same here) where native kernels draw and screen (what is left to
    # XLA is small); JAX's own sampler runs a third slower at level 1 (R1 at n = m = 8: 2.9 ->
    # 1.9e6/s) and the reference database notions half as fast (R7 0.47 -> 0.25e6/s)
    xla_options = (fused.program_options(config.n, config.m, config.count * config.n * config.m)
                   if all_native else fused.compiler_options(config.n, config.m))
    # state and candidates whole on every device (and every process of a group)
    core = jax.jit(step, donate_argnums=0, compiler_options=xla_options,
                   out_shardings=NamedSharding(mesh, PartitionSpec()))
    seeds = (_block_seeds(tuple(jax.devices()), blocks_per_chunk)
             if samplers.draws_natively(sampler) else None)
    return Step(core, seeds, np.asarray(jax.random.key_data(base_key)))


# --------------------------------------------------------------------------------------------
# host side: verification, checkpoints, reports
# --------------------------------------------------------------------------------------------


def record_mechanism(config: SweepConfig, best: Best, i: int) -> Mechanism:
    """Entry ``i`` of a device-side record, as a float64 mechanism."""
    spec = sampler_spec(config)
    return mechanism_of(best.log_K[i], best.log_prior[i], best.log_belief[i], best.values[i],
                        spec.values, spec.records)


def mechanism_of(log_K, log_prior, log_belief, values, has_values: bool,
                 records: Records | None = None) -> Mechanism:
    """A float64 mechanism from one record's float32 arrays (validated and renormalized)."""
    with jax.enable_x64(True):
        return Mechanism.from_log_K(np.asarray(log_K, np.float64), np.asarray(log_prior, np.float64),
                                    np.asarray(log_belief, np.float64),
                                    np.asarray(values, np.float64) if has_values else None,
                                    records=records, dtype=np.float64)


def float64_screen(config: SweepConfig, relation, options) -> Callable[[Mechanism], jax.Array]:
    """``registry.evaluate(...).violated`` on a float64 batch of ``config.candidates``
    mechanisms, compiled ahead of the timed loop: the eager float64 check costs ~150 ms per
    batch at n = m = 8, the compiled one ~1 ms. Only a screen:
    :func:`jaxpriv.engines.runstate.verify_witness` re-checks each hit eagerly before it counts."""
    k, n, m = config.candidates, config.n, config.m
    spec = sampler_spec(config)
    has_values = spec.values
    with jax.enable_x64(True):
        f64 = jnp.float64
        shape = Mechanism(jax.ShapeDtypeStruct((k, n, m), f64), jax.ShapeDtypeStruct((k, n), f64),
                          jax.ShapeDtypeStruct((k, n), f64),
                          jax.ShapeDtypeStruct((k, m), f64) if has_values else None,
                          spec.records)
        return jax.jit(lambda mech: registry.evaluate(relation, mech, **options).violated
                       ).lower(shape).compile()


def violated_in_float64(config: SweepConfig, screen, candidates: Candidates) -> list[int]:
    """The candidates whose float32 slack is below ``candidate_slack`` and that violate the
    relation when recomputed in float64. All are checked in one call of a fixed shape (a tight
    bound sends a full set of candidates every chunk; one call per candidate, or a new shape
    per chunk, made this the sweep's bottleneck)."""
    slack = np.asarray(candidates.score)
    index = np.asarray(candidates.index)
    picked = (slack < config.candidate_slack) & (index < config.count)
    if not picked.any():
        return []
    spec = sampler_spec(config)
    mech = mechanism_of(candidates.log_K, candidates.log_prior, candidates.log_belief,
                        candidates.values, spec.values, spec.records)
    with jax.enable_x64(True):
        violated = np.asarray(screen(mech))
    return [int(k) for k in np.flatnonzero(picked & violated)]


def save_checkpoint(out: Path, config: SweepConfig, state: SweepState, next_chunk: int,
                    progress: dict[str, Any]) -> None:
    """State and progress record in one atomic file (:func:`jaxpriv.engines.runstate.save`);
    ``checkpoint.json`` is a readable copy of the record, never read back."""
    record = {"next_chunk": next_chunk, **progress}
    runstate.save(out, CHECKPOINT, state, dataclasses.asdict(config), record)
    io.atomic_write(out / CHECKPOINT_META, lambda f: json.dump(
        {"config": dataclasses.asdict(config), **record}, f, indent=1))


def load_checkpoint(out: Path, config: SweepConfig) -> tuple[SweepState, int, dict[str, Any]]:
    state, record = runstate.load(out, CHECKPOINT, initial_state(config),
                                  dataclasses.asdict(config))
    next_chunk = record.pop("next_chunk")
    return state, next_chunk, record


class SweepResult(NamedTuple):
    """A sweep's outcome.

    Attributes:
      config, state: the configuration and the device accumulator.
      violations: verified violations saved as witnesses (their levels and files).
      violation_count: every verified violation (past ``max_witnesses`` counted, not saved).
      seconds: sampling, evaluation, verification and checkpoints, summed over chunks.
      compile_seconds: of this process's compilation, not included in ``seconds``.
      rows: the envelope, one row per non-empty cell, each cell's best mechanism re-checked in
        float64 and saved as a witness (complete runs with a directory; else empty).
      worst: the overall lowest-slack point ``{"file", "premise", "parameter", "slack"}``
        re-checked in float64 (a verified violation, if lower, is named instead), or ``None``.
    """

    config: SweepConfig
    state: SweepState
    violations: list[dict[str, Any]]
    violation_count: int
    seconds: float
    compile_seconds: float
    rows: list[dict[str, Any]] = []
    worst: dict[str, Any] | None = None

    @property
    def worst_slack(self) -> float | None:
        return None if self.worst is None else self.worst["slack"]


def run(config: SweepConfig, out: str | os.PathLike | None = None, resume: bool = False,
        progress: bool = True, relation=None, max_chunks: int | None = None,
        write: Callable | None = None) -> SweepResult:
    """Run (or resume) a sweep; with ``out``, checkpoint after every chunk.

    One engine for every subject: a sweep of settings (a claim about an estimator) runs its
    relation's strategies through the same chunk loop (:func:`jaxpriv.engines.runstate.run_chunks`),
    run directory, checkpoint and witness round trip (:func:`jaxpriv.engines.settings.run`).

    Args:
      config: from :func:`make_config`.
      out: run directory (checkpoint, ``witnesses/``; the outputs layer adds ``summary.json``,
        ``envelope.csv``, ``envelope.png``).
      resume: continue from ``out``'s checkpoint (same config required).
      progress: show a progress bar (mechanisms/s, ETA) on stderr.
      relation: override the registry entry (tests inject deliberately false bounds this way).
      max_chunks: stop after this many chunks in this call (the checkpoint allows resuming);
        the envelope is re-checked only when the sweep is complete.
      write: the outputs layer's writer, ``write(out_dir, result, relation)``, called when the
        sweep is complete and has a directory (e.g. :func:`jaxpriv.report.write_sweep`).
    """
    if isinstance(config, settings.StatConfig):
        return settings.run(config, out, resume=resume, progress=progress,
                                     max_chunks=max_chunks, write=write)
    relation = relation or registry.get(config.relation)
    with runstate.run_directory(out, resume, CHECKPOINT, f"sweep {config.relation}") as out_dir:
        return _run(config, out_dir, resume, progress, relation, max_chunks, write)


def _run(config: SweepConfig, out_dir: Path | None, resume: bool, progress: bool, relation,
         max_chunks: int | None, write: Callable | None) -> SweepResult:
    """:func:`run` in its prepared (and locked) run directory."""
    options = relation.options
    state, start, done = initial_state(config), 0, {"violations": [], "violation_count": 0,
                                                    "seconds": 0.0}
    if resume:
        state, start, done = load_checkpoint(out_dir, config)
        runstate.note_resumed(f"sweep {config.relation}", out_dir, start, config.chunks,
                              config.chunk, config.count, "mechanisms", done["violation_count"])
    began = time.perf_counter()
    compiled = make_step(config, relation).compile(state, jnp.int32(start))
    screen = float64_screen(config, relation, options)
    compile_seconds = time.perf_counter() - began
    current = {"state": state}

    def step(chunk_index):
        current["state"], candidates = compiled(current["state"], jnp.int32(chunk_index))
        return [(int(candidates.index[k]), (candidates, k))
                for k in violated_in_float64(config, screen, candidates)]

    def verify(index, payload):
        candidates, k = payload
        target = runstate.witness_path(out_dir, f"{config.relation}-{index}")
        found = runstate.verify_witness(relation, record_mechanism(config, candidates, k),
                                        options, target, index)
        return None if found is None else runstate.keep(found, out_dir)

    def save(next_chunk, progress):
        jax.block_until_ready(current["state"])
        if out_dir is not None:
            save_checkpoint(out_dir, config, current["state"], next_chunk, progress._asdict())

    bar = runstate.progress_bar(config.count, min(start * config.chunk, config.count), "mech",
                                f"sweep {config.relation}", progress)
    stop = config.chunks if max_chunks is None else min(config.chunks, start + max_chunks)
    found = runstate.run_chunks(
        start, stop, step, verify, save, runstate.Progress(**done),
        max_witnesses=config.max_witnesses, bar=bar,
        size=lambda chunk_index: min(config.chunk, config.count - chunk_index * config.chunk))
    result = SweepResult(config, current["state"], found.violations, found.violation_count,
                         found.seconds, compile_seconds)
    if out_dir is not None and stop == config.chunks:
        result = result._replace(rows=envelope_rows(out_dir, result, relation),
                                 worst=worst_point(result, relation, out_dir))
        if write is not None:
            write(out_dir, result, relation)
    return result


def envelope_rows(out_dir: Path, result: SweepResult, relation) -> list[dict]:
    """Re-check each cell's best mechanism in float64, save it, and tabulate the envelope."""
    config = result.config
    options = relation.options
    env = jax.tree_util.tree_map(np.asarray, result.state.envelope)
    counts = np.asarray(result.state.cell_count)
    rows = []
    for cell in np.flatnonzero(env.score > -np.inf):
        x_bin, p_bin = divmod(int(cell), config.param_bins)
        x_edge = config.x_max * (x_bin + 1) / config.x_bins
        p_edge = config.param_max * (p_bin + 1) / config.param_bins if config.param_bins > 1 \
            else None
        mech = record_mechanism(config, env, cell)
        checked = relation.check(mech, **options)
        name = f"witnesses/bins/x{x_bin:03d}-p{p_bin:02d}.json"
        io.save_mechanism(out_dir / name, mech, relation=relation.id,
                          index=int(env.index[cell]), **options)
        with jax.enable_x64(True):
            # the claim at the cell's edges; a bound that scales with the parameter is claimed
            # at the witness's own (a bin edge would overstate the room)
            measured = p_edge is None or relation.scales_with_parameter
            used = float(checked.parameter) if measured else p_edge
            bound = float(relation.bound(jnp.float64(x_edge), jnp.float64(used)))
            slack = float(registry.slack(bound, float(checked.conclusion)))
        rows.append({"x": x_edge, "param": "" if p_edge is None else p_edge,
                     "premise": float(checked.premise), "parameter": float(checked.parameter),
                     "conclusion": float(checked.conclusion), "bound": bound, "slack": slack,
                     "count": int(counts[cell]), "witness": name})
    return rows


def worst_point(result: SweepResult, relation, out_dir: Path | None = None) -> dict | None:
    """The overall lowest-slack mechanism re-checked in float64 (``None`` if none qualified):
    ``{"file", "premise", "parameter", "slack"}`` (with ``out_dir``, the mechanism is saved as
    ``witnesses/worst.json``); a verified violation, if lower, is named instead."""
    worst = jax.tree_util.tree_map(np.asarray, result.state.worst)
    if worst.score[0] == -np.inf:
        return None
    mech = record_mechanism(result.config, worst, 0)
    options = relation.options
    checked = relation.check(mech, **options)
    point = {"file": None, "premise": float(checked.premise),
             "parameter": float(checked.parameter), "slack": float(checked.slack)}
    if out_dir is not None:
        io.save_mechanism(out_dir / "witnesses" / "worst.json", mech, relation=relation.id,
                          index=int(worst.index[0]), **options)
        point["file"] = "witnesses/worst.json"
    for found in result.violations:
        if found["slack"] < point["slack"]:
            point = {key: found.get(key) for key in ("file", "premise", "parameter", "slack")}
    return point
