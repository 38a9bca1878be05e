"""A sweep's chunk step: what it draws (:func:`sampler_spec`), how it screens
(:func:`choose_screen`), which path it takes — native kernels drawing and screening groups of
blocks, or XLA block by block (:func:`plan_step`, :func:`block_group`) — and the compiled step
those choices build (:func:`make_step`: draw → evaluate → reduce each block where it is drawn →
fold the blocks into the device-side accumulator of :mod:`jaxpriv.engines.sweep_state`).

Results depend on (seed, chunk size), not on the device count or the grouping: each block's
random numbers are a counter hash of their index keyed by the block's key
(:func:`jaxpriv.kernels.samplers.random_bits`), and the reductions are max/min with ties broken
by the smallest global index. At n, m ≤ 8 the step is compiled with
:func:`jaxpriv.kernels.fused.compiler_options`. On a CPU with :mod:`jaxpriv.kernels.native`,
mechanisms are drawn by its sampler (the same draws to float32 rounding;
``make_step(..., sampler="xla")`` keeps JAX's), a device draws a few blocks at a time
(:func:`block_group`) and each group is reduced by one native pass
(:func:`jaxpriv.kernels.native.group_winners`): the same bits as block by block in XLA.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxpriv import registry
from jaxpriv.core.mechanisms import Mechanism
from jaxpriv.engines import program_cache, programs
from jaxpriv.engines.sweep_state import (BLOCK_CANDIDATES, Best, Candidates, SweepState,
                                         _best_at, _candidate_slack, _empty_best, _flat,
                                         _keep_better, _lowest, _merge_best, _no_candidates)
from jaxpriv.kernels import fused, native, samplers


def sampler_spec(config, relation=None) -> samplers.SamplerSpec:
    """What the sweep draws: the relation's sampling hint, with the records layout where it has
    one, and a quarter of the mechanisms with a rare output where its conclusion's extremes sit
    there (:attr:`jaxpriv.registry.Notion.rare_outputs`, :func:`samplers.with_rare_output`)."""
    relation = relation or registry.get(config.relation)
    hint = relation.sampling
    rare = registry.notion(relation.conclusion).rare_outputs
    return samplers.SamplerSpec(config.n, config.m, prior=hint.prior,
                                belief_eps_max=hint.belief_eps_max, values=hint.values,
                                prior_zero_fraction=hint.prior_zero_fraction,
                                records=config.records,
                                rare_fraction=samplers.RARE_SHARE if rare else 0.0)


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
    values: dict = {}

    def __call__(self, state: SweepState, chunk_index):
        seeds = None if self.seeds is None else self.seeds(self.key_data, chunk_index)
        return self.core(state, chunk_index, seeds, self.values)

    def compile(self, state: SweepState, chunk_index, compile_program=None) -> Step:
        """Both programs compiled ahead of time for these arguments' shapes and shardings, by
        ``compile_program(name, jitted, *args)`` (default: ``jitted.lower(*args).compile()``;
        the sweep's keeps them on disk, :func:`jaxpriv.engines.programs.aot`); the seed
        words' program, which reads no relation, by :func:`_compiled_seeds`."""
        if compile_program is None:
            def compile_program(name, jitted, *args):
                return jitted.lower(*args).compile()
        if self.seeds is None:
            return self._replace(core=compile_program("sweep step", self.core, state,
                                                      chunk_index, None, self.values))
        seeds = _compiled_seeds(self.seeds, self.key_data, chunk_index)
        example = seeds(self.key_data, chunk_index)  # its sharding is what the core is given
        return self._replace(core=compile_program("sweep step", self.core, state, chunk_index,
                                                  example, self.values), seeds=seeds)

    def at(self, relation) -> Step:
        """This step (compiled for another instance of ``relation``'s claim) at ``relation``'s
        values (:mod:`jaxpriv.registry.programs`)."""
        return self._replace(values=registry.programs.traced_values(relation, np.float32))


GROUP_ENTRIES = 1 << 18
"""Entries of K a device draws and evaluates at once (:func:`block_group`): 4,096 mechanisms at
n = m = 8, four blocks of 1,024."""


def block_group(config, devices: int) -> int:
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


class _BlockSeeds(NamedTuple):
    """A chunk's seed-word function (:func:`_block_seeds`) and what its program is built from
    beyond its arguments' signature: the blocks (they set its output) and the devices."""
    jitted: Callable
    made_of: tuple

    def __call__(self, key_data, chunk_index):
        return self.jitted(key_data, chunk_index)


@functools.cache
def _block_seeds(devices: tuple, blocks: int) -> _BlockSeeds:
    """The jitted ``(key_data, chunk_index) -> NativeSeeds`` of a chunk's ``blocks`` blocks
    (block ``i``'s key is ``fold_in(key, i)``), whole on every device of ``devices``: one
    function for every sweep (of any relation) with these, compiled once a process
    (:func:`_compiled_seeds`)."""
    mesh = Mesh(np.array(devices), ("batch",))

    def seeds(key_data, chunk_index):
        base_key = jax.random.wrap_key_data(key_data)
        indices = chunk_index * blocks + jnp.arange(blocks, dtype=jnp.int32)
        return jax.vmap(lambda i: samplers.draw_all_seeds(jax.random.fold_in(base_key, i)))(
            indices)
    jitted = jax.jit(seeds, out_shardings=NamedSharding(mesh, PartitionSpec()),
                     compiler_options=fused.integer_program_options())
    return _BlockSeeds(jitted, (blocks, tuple((d.platform, d.id) for d in devices)))


def _compiled_seeds(block_seeds: _BlockSeeds, key_data, chunk_index):
    """``block_seeds`` compiled for these arguments: once a process
    (:func:`jaxpriv.engines.programs.shared`), and on disk once for every relation
    (:func:`jaxpriv.engines.program_cache.compile_shared`), keyed by its blocks and devices
    besides its arguments."""
    made_of = block_seeds.made_of
    key = ("sweep seeds", made_of, program_cache.signature((key_data, chunk_index)))
    return programs.shared(key, lambda: program_cache.compile_shared(
        "sweep seeds", block_seeds.jitted, key_data, chunk_index, extra=made_of))


def choose_screen(relation, use_fused: bool | None = None) -> bool:
    """Whether the step screens with :mod:`jaxpriv.kernels.fused` (``use_fused``; by default
    wherever it covers the relation at its own options, :func:`uses_fused_kernel`) rather than
    with the reference notions."""
    return uses_fused_kernel(relation, relation.options) if use_fused is None else use_fused


class StepPlan(NamedTuple):
    """What a sweep's step does, decided before anything is traced (:func:`plan_step`).

    Attributes:
      spec: what is drawn (:func:`sampler_spec`); sampler: the kernel that draws it.
      screen_fused: levels from the fused kernels (:func:`choose_screen`), else the reference
        notions.
      all_native: native kernels draw and screen: blocks go in groups, and the step is
        compiled with :func:`jaxpriv.kernels.fused.program_options` (:func:`xla_options`).
      group: blocks a device draws and evaluates together (:func:`block_group`; 1 on XLA's
        paths).
      reduce_natively: a group is reduced by :func:`jaxpriv.kernels.native.group_winners`,
        else by XLA's scatters and ``top_k``.
      candidates_per_block: the lowest-slack mechanisms each block offers.
    """

    spec: samplers.SamplerSpec
    sampler: str
    screen_fused: bool
    all_native: bool
    group: int
    reduce_natively: bool
    candidates_per_block: int


def plan_step(config, relation, use_fused: bool | None = None,
              sampler: str = "auto") -> StepPlan:
    """The sampler, the screen, native or XLA path and the block grouping of ``config``'s step
    (arguments as :func:`make_step`'s)."""
    screen_fused = choose_screen(relation, use_fused)
    candidates_per_block = min(config.candidates, config.block, BLOCK_CANDIDATES)
    # blocks drawn together where native kernels draw and screen (bit for bit the same results,
    # whatever the group; what XLA computes there is elementwise). Where XLA samples or screens,
    # its values can move by an ulp with the shape it is compiled for, so blocks stay one by one
    all_native = screen_fused and samplers.draws_natively(sampler)
    group = block_group(config, jax.device_count()) if all_native else 1
    # the group's reduction by the native kernel where there is one (bit for bit XLA's)
    reduce_natively = (jax.default_backend() == "cpu" and native.available()
                       and candidates_per_block >= 1)
    return StepPlan(sampler_spec(config, relation), sampler, screen_fused, all_native, group,
                    reduce_natively, candidates_per_block)


def xla_options(config, plan: StepPlan) -> dict[str, Any]:
    """The step's XLA compiler options: level 2
    (:func:`jaxpriv.kernels.fused.program_options`; for a short sweep also the
    cheaper-to-compile fusion emitters, bit for bit the same here) where native kernels draw
    and screen (what is left to XLA is small), else :func:`jaxpriv.kernels.fused.compiler_options`:
    JAX's own sampler runs a third slower at level 1 (R1 at n = m = 8: 2.9 -> 1.9e6/s) and the
    reference database notions half as fast (R7 0.47 -> 0.25e6/s)."""
    return (fused.program_options(config.n, config.m, config.count * config.n * config.m)
            if plan.all_native else fused.compiler_options(config.n, config.m))


def block_evaluator(config, relation, plan: StepPlan) -> Callable:
    """``evaluate_block(block_indices, seeds, claim_values)``: a group of blocks drawn, evaluated and
    reduced to ``(envelope, worst, counts, evaluated, candidates)``; ``evaluated`` is ``(2,)``:
    the mechanisms whose condition held, and those with a NaN level or bound (counted, so a
    sweep reports them: never a winner, never silently skipped). ``claim_values``: the claim's traced
    parameters (:func:`jaxpriv.registry.programs.bind`; ``{}`` for a relation of its own)."""
    spec, sampler, group = plan.spec, plan.sampler, plan.group
    candidates_per_block = plan.candidates_per_block

    def draw_block(seeds):
        mech = samplers.sample_seeded(seeds, config.block, spec, kernel=sampler)
        values = mech.values if mech.values is not None else jnp.zeros(
            (config.block, config.m), jnp.float32)
        return mech.log_K, mech.log_prior, mech.log_belief, values

    def evaluate_block(block_indices, seeds, claim_values):
        """``group`` blocks, each drawn from its own seeds (the unit of randomness), evaluated
        and reduced together (the unit of arithmetic: XLA's per-operation cost is paid once per
        group): identical shapes and program on every device, hence identical bits.
        The group is reduced where it is drawn — its best mechanism per cell, its lowest-slack
        mechanism, each block's candidates, its counts — and folded into its device's running
        results, so its mechanisms never leave it (folding groups, then devices in
        :func:`chunk_step`, gives what one fold over the whole chunk gives: maxima, minima and top-k
        with ties to the smallest index)."""
        size = group * config.block
        drawn = jax.vmap(draw_block)(seeds)
        log_K, log_prior, log_belief, values = jax.tree_util.tree_map(
            lambda a: a.reshape((size,) + a.shape[2:]), drawn)
        mech = Mechanism(log_K, log_prior, log_belief, values if spec.values else None,
                         spec.records)
        levels = None
        at = registry.programs.bind(relation, claim_values)
        if plan.screen_fused:
            levels = screened_levels(at, mech)
        result = registry.evaluate(at, mech, levels=levels, **at.options)
        x, param = result.premise, result.parameter
        index = (block_indices[:, None] * config.block
                 + jnp.arange(config.block, dtype=jnp.int32)).reshape(size)
        valid = result.condition_holds & (index < config.count)
        # a NaN level anywhere, a NaN bound where it is claimed (R6's (1 + 4ξ)β at ξ = ∞,
        # β = 0 is ∞·0 outside its condition ξ ≤ 1: not a claim, not counted)
        nan = (index < config.count) & (
            jnp.isnan(x) | jnp.isnan(result.conclusion) | jnp.isnan(param)
            | (result.condition_holds & jnp.isnan(result.bound)))

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
        if plan.reduce_natively:  # the same winners in one pass (index grows with the position)
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
        evaluated = jnp.stack([jnp.sum(valid, dtype=jnp.int32), jnp.sum(nan, dtype=jnp.int32)])
        return envelope, worst, counts, evaluated, candidates

    return evaluate_block


def device_reducer(config, plan: StepPlan, evaluate_block: Callable, base_key) -> Callable:
    """``device_blocks(block_indices, seeds, claim_values)``: a device's blocks, in groups of ``plan.group``,
    folded by ``evaluate_block`` (:func:`block_evaluator`), and its candidates."""
    spec, sampler, group = plan.spec, plan.sampler, plan.group

    def device_blocks(block_indices, seeds, claim_values):
        """A device's blocks, in index order, folded as they come: the running bests and counts
        are the loop's carry, so the device's memory does not grow with the chunk; each block's
        few lowest-slack mechanisms are stacked (a few per block) and the device's candidates
        picked from them after the loop (merging them into the carry block by block cost 7% at
        64 candidates, 31% at 256)."""
        def fold_block(carry, block):
            envelope, worst, counts, evaluated = carry
            more = evaluate_block(*block, claim_values)
            return (_keep_better(envelope, more[0]), _keep_better(worst, more[1]),
                    counts + more[2], evaluated + more[3]), more[4]

        empty = (_empty_best(config.cells, config.n, config.m),
                 _empty_best(1, config.n, config.m), jnp.zeros((config.cells,), jnp.int32),
                 jnp.zeros((2,), jnp.int32))
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

    return device_blocks


def chunk_step(config, sample_and_evaluate: Callable) -> Callable:
    """``step(state, chunk_index, seeds, values) -> (state, candidates)``: the chunk's blocks by
    ``sample_and_evaluate`` (every device's, :func:`device_reducer` mapped over the mesh),
    folded into the accumulator."""
    blocks_per_chunk = config.chunk // config.block

    def fold(best: Best, blocks: Best) -> Best:
        """The blocks' bests ``(B, cells, ...)`` into ``best`` (block b's entry c is cell c)."""
        flat = _flat(blocks)
        cell = jnp.tile(jnp.arange(blocks.score.shape[1], dtype=jnp.int32), blocks.score.shape[0])
        return _merge_best(best, cell, flat.score, flat.index,
                           Mechanism(flat.log_K, flat.log_prior, flat.log_belief), flat.values)

    def step(state: SweepState, chunk_index, seeds, values):
        block_indices = chunk_index * blocks_per_chunk + jnp.arange(blocks_per_chunk,
                                                                    dtype=jnp.int32)
        envelope, worst, counts, evaluated, found = sample_and_evaluate(block_indices, seeds,
                                                                        values)
        candidates = _lowest(_flat(found), config.candidates)
        return SweepState(fold(state.envelope, envelope), fold(state.worst, worst),
                          state.cell_count + jnp.sum(counts, axis=0),
                          state.evaluated + jnp.sum(evaluated[:, 0]),
                          state.nan_count + jnp.sum(evaluated[:, 1])), candidates

    return step


def make_step(config, relation=None,
              use_fused: bool | None = None, sampler: str = "auto") -> Step:
    """The chunk step ``(state, chunk_index) -> (state, candidates)`` (a :class:`Step`).

    ``use_fused``: screen with :mod:`jaxpriv.kernels.fused` (default: wherever it covers the relation);
    ``False`` evaluates with the reference notions (the benchmark's baseline).
    ``sampler``: :func:`jaxpriv.kernels.samplers.sample_log_K`'s kernel — ``"auto"`` (default) draws
    with the native sampler on a CPU where it is available (the same draws to float32
    rounding), ``"xla"`` with JAX's.
    """
    relation = relation or registry.get(config.relation)
    plan = plan_step(config, relation, use_fused, sampler)
    mesh = Mesh(np.array(jax.devices()), ("batch",))
    base_key = jax.random.key(config.seed)
    blocks_per_chunk = config.chunk // config.block
    device_blocks = device_reducer(config, plan, block_evaluator(config, relation, plan),
                                   base_key)
    sample_and_evaluate = jax.shard_map(device_blocks, mesh=mesh,
                                        in_specs=(PartitionSpec("batch"), PartitionSpec("batch"),
                                                  PartitionSpec()),
                                        out_specs=PartitionSpec("batch"))
    # state and candidates whole on every device (and every process of a group)
    core = jax.jit(chunk_step(config, sample_and_evaluate), donate_argnums=0,
                   compiler_options=xla_options(config, plan),
                   out_shardings=NamedSharding(mesh, PartitionSpec()))
    seeds = (_block_seeds(tuple(jax.devices()), blocks_per_chunk)
             if samplers.draws_natively(sampler) else None)
    return Step(core, seeds, np.asarray(jax.random.key_data(base_key)),
                registry.programs.traced_values(relation, np.float32))
