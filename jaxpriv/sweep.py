"""Sweeps: evaluate one relation over millions of random mechanisms, chunk by chunk.

Data flows one way: **sample** (on device, from ``fold_in(key(seed), chunk_index)``) →
**evaluate** (float32, :func:`jaxpriv.relations.evaluate`, with the levels from the fused batch
kernel :mod:`jaxpriv.fused` where it covers the relation's notions) → **accumulate** (a binned
envelope on device: per premise bin × parameter bin, the largest conclusion and the mechanism
reaching it; the smallest per-mechanism slack overall; the lowest-slack candidates of the chunk) →
**verify** (on the host, every candidate recomputed from scratch in float64 and saved as a
witness JSON only if the violation survives, then re-read and re-checked) → **report**.

The accumulator lives on device between chunks; one small transfer per chunk brings back the
candidates. After each chunk the state is checkpointed atomically, so a killed run loses at most
the chunk in flight and ``resume=True`` continues to exactly the result of an uninterrupted run.
Results depend on (seed, chunk size), not on the device count: each block's random numbers are
a counter hash of their index keyed by the block's key (:func:`jaxpriv.samplers.random_bits`),
and the reductions are max/min with ties broken by the smallest global index. At n, m ≤ 8 the
step is compiled with :func:`jaxpriv.fused.compiler_options` where the fused screen applies.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec

from jaxpriv import certify, fused, io, relations, samplers
from jaxpriv.errors import InputError
from jaxpriv.mechanisms import Mechanism, Records

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
      block: mechanisms drawn and evaluated together; the unit of randomness and arithmetic,
        so results do not depend on the device count (each device loops over whole blocks).
      x_max, x_bins: premise bins ``[0, x_max]``; mechanisms beyond are still checked.
      param_max, param_bins: condition-parameter bins, for relations with a free parameter.
      candidates: lowest-slack mechanisms per chunk sent to float64 verification.
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


class RelationSetup(NamedTuple):
    """How a relation is swept: what to sample and the options its notions need."""

    sampler: Callable[[int, int], samplers.SamplerSpec]
    options: dict[str, Any]
    x_max: float = 10.0
    param_max: float = 0.0
    param_bins: int = 1


SETUPS: dict[str, RelationSetup] = {
    "R1": RelationSetup(lambda n, m: samplers.SamplerSpec(n, m, prior="uniform"), {}),
    "R2": RelationSetup(lambda n, m: samplers.SamplerSpec(n, m, prior="uniform"), {}),
    "R3": RelationSetup(lambda n, m: samplers.SamplerSpec(n, m, prior="close"), {},
                        param_max=3.0, param_bins=6),
    "R4": RelationSetup(lambda n, m: samplers.SamplerSpec(n, m, prior="close"), {},
                        param_max=3.0, param_bins=6),
    "R5": RelationSetup(lambda n, m: samplers.SamplerSpec(n, m, belief_eps_max=1.0), {},
                        param_max=2.0, param_bins=4),
    "R6": RelationSetup(lambda n, m: samplers.SamplerSpec(n, m, values=True),
                        {"mu": 0.0, "alpha": 1.0, "d_true": 0}, x_max=1.0,
                        param_max=1.0, param_bins=4),
    # SP and BSP are exact sups over beliefs: no belief to draw. The converse relations' premise
    # (B)SP lives in [0, 1] and their bound is infinite from ½ on; R11 is claimed up to 0.225.
    "R8": RelationSetup(lambda n, m: samplers.SamplerSpec(n, m), {}, x_max=0.5),
    "R10": RelationSetup(lambda n, m: samplers.SamplerSpec(n, m, prior="uniform"), {},
                         x_max=0.5),
    "R11": RelationSetup(lambda n, m: samplers.SamplerSpec(n, m, prior="uniform"), {},
                         x_max=0.225),
    # BDP only constrains databases the prior allows, MP over 𝔻_* sees them all: priors with
    # zeros are where R12 can fail
    "R12": RelationSetup(lambda n, m: samplers.SamplerSpec(n, m, prior_zero_fraction=0.3), {}),
}


def setup_for(relation_id: str) -> RelationSetup:
    relation = relations.get(relation_id)
    if relation.id in SETUPS:
        return SETUPS[relation.id]
    belief = 1.0 if relation.parameter == "eps_bel" else 0.0
    prior = "close" if relation.parameter == "eps_unif" and relation.parameter_limit is None \
        else "dirichlet"
    return RelationSetup(lambda n, m: samplers.SamplerSpec(n, m, prior=prior,
                                                           belief_eps_max=belief), {},
                         param_max=3.0 if relation.parameter else 0.0,
                         param_bins=6 if relation.parameter and relation.parameter_limit is None
                         else 1)


def needs_records(relation: relations.Relation) -> bool:
    """Whether the relation's notions are defined on databases (a records layout is needed)."""
    return bool(relation.notions & relations.DATABASE_NOTIONS)


def sampler_spec(config: SweepConfig) -> samplers.SamplerSpec:
    """What the sweep draws: the relation's sampler, with the records layout where it has one."""
    spec = setup_for(config.relation).sampler(config.n, config.m)
    return dataclasses.replace(spec, records=config.records)


def make_config(relation: str, n: int, m: int, count: int, seed: int = 0,
                chunk: int | None = None, memory_mb: float = 1024.0, **overrides) -> SweepConfig:
    """A validated :class:`SweepConfig` with the relation's default bins and a chunk size
    derived from ``memory_mb`` (about 64 float32 words per entry of K per mechanism)."""
    relation_id = relations.get(relation).id
    k, r = int(overrides.pop("k", 0) or 0), int(overrides.pop("r", 0) or 0)
    if needs_records(relations.get(relation_id)):
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
    if chunk is None:
        if memory_mb <= 0:
            raise InputError(f"--memory-mb must be positive, got {memory_mb}")
        chunk = int(memory_mb * 2**20 / (4 * 64 * n * m))
        chunk = max(256, min(chunk, 1 << 17, count))
    if chunk < 1:
        raise InputError(f"--chunk must be positive, got {chunk}")
    block = int(overrides.pop("block", min(1024, chunk)))
    unit = block * devices
    chunk = -(-int(chunk) // unit) * unit
    setup = setup_for(relation_id)
    fields = dict(relation=relation_id, n=int(n), m=int(m), count=int(count), seed=int(seed),
                  chunk=chunk, block=block, x_max=setup.x_max, param_max=setup.param_max,
                  param_bins=setup.param_bins, k=k, r=r)
    fields.update(overrides)
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
    envelope: Best  # score = conclusion, maximized per cell
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
    """Fold a chunk into ``best``: per cell the highest score, ties to the smallest index."""
    cells = best.score.shape[0]
    chunk_score = jnp.full((cells,), -jnp.inf, score.dtype).at[cell].max(score)
    winner = (score == chunk_score[cell]) & (score > -jnp.inf)
    chunk_index = jnp.full((cells,), _NO_INDEX, jnp.int32).at[cell].min(
        jnp.where(winner, index, _NO_INDEX))
    local = jnp.clip(chunk_index - index[0], 0, score.shape[0] - 1)
    better = (chunk_score > best.score) | ((chunk_score == best.score)
                                           & (chunk_index < best.index))
    better &= chunk_index != _NO_INDEX

    def pick(old, new):
        return jnp.where(better.reshape((-1,) + (1,) * (old.ndim - 1)), new, old)

    return Best(pick(best.score, chunk_score), pick(best.index, chunk_index),
                pick(best.log_K, mech.log_K[local]), pick(best.log_prior, mech.log_prior[local]),
                pick(best.log_belief, mech.log_belief[local]), pick(best.values, values[local]))


class Candidates(NamedTuple):
    """The chunk's lowest-slack mechanisms (``score`` = float32 slack)."""

    score: jax.Array  # (k,)
    index: jax.Array  # (k,)
    log_K: jax.Array
    log_prior: jax.Array
    log_belief: jax.Array
    values: jax.Array


FUSED_NOTIONS = frozenset(fused.RecordLevels._fields)


def uses_fused_kernel(relation: relations.Relation, options: dict[str, Any]) -> bool:
    """Whether :func:`jaxpriv.fused.record_levels` computes every level the relation needs
    (ABP only under the record law)."""
    needed = relation.notions
    record_law = options.get("q") is None and (options.get("law") or "record") == "record"
    return needed <= FUSED_NOTIONS and ("abp" not in needed or record_law)


def make_step(config: SweepConfig, relation: relations.Relation | None = None,
              use_fused: bool | None = None):
    """The jitted chunk step ``(state, chunk_index) -> (state, candidates)``.

    ``use_fused``: screen with :mod:`jaxpriv.fused` (default: wherever it covers the relation);
    ``False`` evaluates with the reference notions (the benchmark's baseline).
    """
    relation = relation or relations.get(config.relation)
    setup = setup_for(config.relation)
    spec = sampler_spec(config)
    options = setup.options
    mesh = Mesh(np.array(jax.devices()), ("batch",))
    base_key = jax.random.key(config.seed)
    blocks_per_chunk = config.chunk // config.block
    screen_fused = uses_fused_kernel(relation, options) if use_fused is None else use_fused

    def block(block_index):
        """One block: identical shapes and program on every device, hence identical bits."""
        mech = samplers.sample(jax.random.fold_in(base_key, block_index), config.block, spec)
        values = mech.values if mech.values is not None else jnp.zeros(
            (config.block, config.m), jnp.float32)
        levels = None
        if screen_fused:
            levels = fused.record_levels(mech.log_K, mech.log_prior, mech.log_belief)._asdict()
        result = relations.evaluate(relation, mech, levels=levels, **options)
        return (mech.log_K, mech.log_prior, mech.log_belief, values, result.premise,
                result.parameter, result.conclusion, result.slack, result.condition_holds)

    def device_blocks(block_indices):
        out = jax.lax.map(block, block_indices)
        return jax.tree_util.tree_map(lambda a: a.reshape((-1,) + a.shape[2:]), out)

    sample_and_evaluate = jax.shard_map(device_blocks, mesh=mesh, in_specs=PartitionSpec("batch"),
                                        out_specs=PartitionSpec("batch"))

    def step(state: SweepState, chunk_index):
        block_indices = chunk_index * blocks_per_chunk + jnp.arange(blocks_per_chunk,
                                                                    dtype=jnp.int32)
        (log_K, log_prior, log_belief, values, x, param, y, result_slack,
         holds) = sample_and_evaluate(block_indices)
        mech = Mechanism(log_K, log_prior, log_belief, values)
        index = chunk_index * config.chunk + jnp.arange(config.chunk, dtype=jnp.int32)
        valid = holds & (index < config.count)

        x_bin = jnp.clip(jnp.floor(x / config.x_max * config.x_bins), 0, config.x_bins - 1)
        in_range = valid & (x <= config.x_max)
        if config.param_bins > 1:
            p_bin = jnp.clip(jnp.floor(param / config.param_max * config.param_bins), 0,
                             config.param_bins - 1)
            in_range &= param <= config.param_max
        else:
            p_bin = jnp.zeros_like(x_bin)
        cell = (x_bin * config.param_bins + p_bin).astype(jnp.int32)
        envelope = _merge_best(state.envelope, cell, jnp.where(in_range, y, -jnp.inf), index,
                               mech, values)
        slack = jnp.where(valid, result_slack, jnp.inf)
        worst = _merge_best(state.worst, jnp.zeros_like(cell), -slack, index, mech, values)
        counts = state.cell_count.at[cell].add(in_range.astype(jnp.int32))
        evaluated = state.evaluated + jnp.sum(valid, dtype=jnp.int32)

        neg, top = jax.lax.top_k(-slack, config.candidates)
        candidates = Candidates(-neg, index[top], mech.log_K[top], mech.log_prior[top],
                                mech.log_belief[top], values[top])
        return SweepState(envelope, worst, counts, evaluated), candidates

    xla_options = fused.compiler_options(config.n, config.m) if screen_fused else None
    return jax.jit(step, donate_argnums=0, compiler_options=xla_options)


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
    """``relations.evaluate(...).violated`` on a float64 batch of ``config.candidates``
    mechanisms, compiled ahead of the timed loop: the eager float64 check costs ~150 ms per
    batch at n = m = 8, the compiled one ~1 ms. Only a screen: :func:`jaxpriv.certify.verify_witness`
    re-checks each hit eagerly before it counts."""
    k, n, m = config.candidates, config.n, config.m
    spec = sampler_spec(config)
    has_values = spec.values
    with jax.enable_x64(True):
        f64 = jnp.float64
        shape = Mechanism(jax.ShapeDtypeStruct((k, n, m), f64), jax.ShapeDtypeStruct((k, n), f64),
                          jax.ShapeDtypeStruct((k, n), f64),
                          jax.ShapeDtypeStruct((k, m), f64) if has_values else None,
                          spec.records)
        return jax.jit(lambda mech: relations.evaluate(relation, mech, **options).violated
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
    """State and progress record in one atomic file (:func:`jaxpriv.io.save_state`);
    ``checkpoint.json`` is a readable copy of the record, never read back."""
    record = {"next_chunk": next_chunk, **progress}
    io.save_state(out / CHECKPOINT, state, dataclasses.asdict(config), record)
    io.atomic_write(out / CHECKPOINT_META, lambda f: json.dump(
        {"config": dataclasses.asdict(config), **record}, f, indent=1))


def load_checkpoint(out: Path, config: SweepConfig) -> tuple[SweepState, int, dict[str, Any]]:
    state, record = io.load_state(out / CHECKPOINT, initial_state(config),
                                  dataclasses.asdict(config))
    next_chunk = record.pop("next_chunk")
    return state, next_chunk, record


class SweepResult(NamedTuple):
    config: SweepConfig
    state: SweepState
    violations: list[dict[str, Any]]
    violation_count: int
    seconds: float  # sampling, evaluation, verification and checkpoints, summed over chunks
    compile_seconds: float  # of this process's compilation, not included in ``seconds``


def run(config: SweepConfig, out: str | os.PathLike | None = None, resume: bool = False,
        progress: bool = True, relation: relations.Relation | None = None,
        max_chunks: int | None = None) -> SweepResult:
    """Run (or resume) a sweep; with ``out``, checkpoint after every chunk and write the report.

    Args:
      config: from :func:`make_config`.
      out: run directory (``summary.json``, ``envelope.csv``, ``envelope.png``, ``witnesses/``).
      resume: continue from ``out``'s checkpoint (same config required).
      progress: show a progress bar (mechanisms/s, ETA) on stderr.
      relation: override the registry entry (tests inject deliberately false bounds this way).
      max_chunks: stop after this many chunks in this call (the checkpoint allows resuming);
        the report is written only when the sweep is complete.
    """
    relation = relation or relations.get(config.relation)
    options = setup_for(config.relation).options
    out_dir = Path(out) if out is not None else None
    if out_dir is not None:
        (out_dir / "witnesses").mkdir(parents=True, exist_ok=True)
    state, start, done = initial_state(config), 0, {"violations": [], "violation_count": 0,
                                                    "seconds": 0.0}
    if resume:
        if out_dir is None:
            raise InputError("--resume needs --out DIR")
        state, start, done = load_checkpoint(out_dir, config)
    elif out_dir is not None and (out_dir / CHECKPOINT).exists():
        raise InputError(f"{out_dir} already holds a sweep; use --resume, or a new --out")
    began = time.perf_counter()
    step = make_step(config, relation).lower(state, jnp.int32(start)).compile()
    screen = float64_screen(config, relation, options)
    compile_seconds = time.perf_counter() - began
    violations: list[dict[str, Any]] = list(done["violations"])
    violation_count = int(done["violation_count"])
    seconds = float(done["seconds"])
    bar = _progress_bar(config, start, progress)
    stop = config.chunks if max_chunks is None else min(config.chunks, start + max_chunks)
    for chunk_index in range(start, stop):
        began = time.perf_counter()
        state, candidates = step(state, jnp.int32(chunk_index))
        for k in violated_in_float64(config, screen, candidates):
            if len(violations) >= config.max_witnesses:
                # past the files' cap the compiled float64 recomputation is the verification
                # (an eager check, save and re-read per violation made violation-dense sweeps
                # crawl: R12 at 22k mechanisms/s)
                violation_count += 1
                continue
            index = int(candidates.index[k])
            mech = record_mechanism(config, candidates, k)
            target = (out_dir or Path(tempfile.gettempdir())) / "witnesses" / \
                f"{config.relation}-{index}.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            found = certify.verify_witness(relation, mech, options, target, index)
            if found is None:
                continue
            violation_count += 1
            if out_dir is None:
                Path(found["file"]).unlink()
                found["file"] = None
            else:
                found["file"] = str(Path(found["file"]).relative_to(out_dir))
            violations.append(found)
        jax.block_until_ready(state)
        if out_dir is not None:
            save_checkpoint(out_dir, config, state, chunk_index + 1,
                            {"violations": violations, "violation_count": violation_count,
                             "seconds": seconds + time.perf_counter() - began})
        seconds += time.perf_counter() - began
        if bar is not None:
            bar.update(min(config.chunk, config.count - chunk_index * config.chunk))
            bar.set_postfix(violations=violation_count)
    if bar is not None:
        bar.close()
    result = SweepResult(config, state, violations, violation_count, seconds, compile_seconds)
    if out_dir is not None and stop == config.chunks:
        from jaxpriv import report
        report.write_sweep(out_dir, result, relation)
    return result


def _progress_bar(config: SweepConfig, start: int, enabled: bool):
    if not enabled:
        return None
    from tqdm.auto import tqdm
    return tqdm(total=config.count, initial=min(start * config.chunk, config.count),
                unit="mech", unit_scale=True, desc=f"sweep {config.relation}", smoothing=0.1,
                dynamic_ncols=True)


