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

This module is the sweep's configuration (:class:`SweepConfig`, :func:`make_config`), its run
(:func:`run`: the chunk loop, the float64 verification of candidates, checkpoints) and its
result (:class:`SweepResult`, the envelope's rows, the worst point). The chunk step — sampler,
screen, native or XLA path, block grouping — is :mod:`jaxpriv.engines.sweep_step`; the
device-side accumulator it folds into is :mod:`jaxpriv.engines.sweep_state`.

The accumulator lives on device between chunks; one small transfer per chunk brings back the
candidates. After each chunk the state is checkpointed atomically, so a killed run loses at most
the chunk in flight and ``resume=True`` continues to exactly the result of an uninterrupted run.
Results depend on (seed, chunk size), not on the device count: each block's random numbers are
a counter hash of their index keyed by the block's key (:func:`jaxpriv.kernels.samplers.random_bits`),
and the reductions are max/min with ties broken by the smallest global index. At n, m ≤ 8 the
step is compiled with :func:`jaxpriv.kernels.fused.compiler_options` (BDP–BSP/MP relations, on
the reference notions, sweep 1.25–1.7× faster at k = 2, r = 3). On a CPU with
:mod:`jaxpriv.kernels.native`, mechanisms are drawn by its sampler (the same draws to
float32 rounding; ``make_step(..., sampler="xla")`` keeps JAX's), a device draws a few blocks at
a time (:func:`jaxpriv.engines.sweep_step.block_group`) and each group is reduced by one native pass
(:func:`jaxpriv.kernels.native.group_winners`): the same bits as block by block in XLA. The mesh
spans a group's processes (:mod:`jaxpriv.engines.group`); state and candidates come back whole.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpriv import registry
from jaxpriv.engines import checks, io, programs, runstate, settings, subject
from jaxpriv.engines.sweep_state import Best, Candidates, SweepState, initial_state
from jaxpriv.engines.sweep_verify import (RECORD_FIELDS, checked_records, float64_screen,
                                          mechanism_of, record_mechanism, violated_in_float64,
                                          warm_float64)
from jaxpriv.engines.sweep_step import (GROUP_ENTRIES, Step, block_group, envelope_score,
                                        make_step, sampler_spec, uses_fused_kernel)
from jaxpriv.core.errors import InputError
from jaxpriv.core.mechanisms import Records

__all__ = ["CHECKPOINT", "CHECKPOINT_META", "SETTING_OPTIONS", "STEP_ENTRIES", "SweepConfig",
           "SweepResult", "make_config", "run", "envelope_rows", "worst_point",
           "record_mechanism", "mechanism_of", "float64_screen", "violated_in_float64",
           "save_checkpoint", "load_checkpoint",
           # the step and its state, re-exported from their modules
           "Best", "Candidates", "GROUP_ENTRIES", "Step", "SweepState", "block_group",
           "envelope_score", "initial_state", "make_step", "sampler_spec", "uses_fused_kernel"]

CHECKPOINT = runstate.SWEEP_STATE
CHECKPOINT_META = runstate.RECORD_STATE


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
        where native kernels draw and screen: :func:`jaxpriv.engines.sweep_step.block_group`).
      x_max, x_bins: premise bins ``[0, x_max]``; mechanisms beyond are still checked.
      param_max, param_bins: condition-parameter bins, for relations with a free parameter.
      candidates: lowest-slack mechanisms per chunk sent to float64 verification: the lowest
        of the :data:`jaxpriv.engines.sweep_state.BLOCK_CANDIDATES` each block offers.
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

    def __post_init__(self):
        """The checks of :func:`make_config`, with its messages, on a config built directly
        (and ``n = k^r`` for database-level relations)."""
        relation = registry.get(self.relation)
        checks.database_layout(relation, self.k, self.r, self.n)
        _check_sizes(self.n, self.m, self.count, self.seed)
        _check_chunk(self.chunk)



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
    if subject.engine_for(rel, "sweep") == subject.SETTINGS:
        given = {k: v for k, v in overrides.items() if k not in ("k", "r")}
        return settings.make_config(rel.id, "sweep", count=count, seed=seed,
                                    chunk=chunk, n=n, **given)
    overrides = {k: v for k, v in overrides.items() if k not in SETTING_OPTIONS}
    registry.programs.check_float32(rel)  # before any work: one line
    relation_id = rel.id
    k, r = int(overrides.pop("k", 0) or 0), int(overrides.pop("r", 0) or 0)
    k, r = checks.database_layout(rel, k, r)
    if rel.needs_records:
        n = k**r
    _check_sizes(n, m, count, seed)
    devices = jax.device_count()
    if memory_mb <= 0:
        raise InputError(f"--memory-mb must be positive, got {memory_mb}")
    if chunk is None:
        chunk = max(256, min(STEP_ENTRIES // (n * m), 1 << 20, count))
    _check_chunk(chunk)
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


def _check_sizes(n, m, count, seed) -> None:
    """The mechanism shape, the count and the seed of a sweep."""
    for name, value, low in (("n", n, 2), ("m", m, 2), ("count", count, 1)):
        if int(value) != value or value < low:
            raise InputError(f"--{name} must be an integer >= {low}, got {value}")
    if n * m > 4096:
        raise InputError(f"n*m = {n * m} is above the sweep limit of 4096 entries per mechanism")
    if count >= 2**31 - 2**24:
        raise InputError(f"--count {count} is too large for one sweep (limit 2^31 − 2^24)")
    checks.seed(seed)


def _check_chunk(chunk) -> None:
    if chunk < 1:
        raise InputError(f"--chunk must be positive, got {chunk}")



# --------------------------------------------------------------------------------------------
# host side: checkpoints, reports (the float64 verification: sweep_verify)
# --------------------------------------------------------------------------------------------


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
    if subject.engine_for(config, "sweep") == subject.SETTINGS:
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
    lowest = done.pop("lowest_float64", None)
    began = time.perf_counter()
    compiled = programs.cached("sweep step", relation, config, lambda: make_step(
        config, relation).compile(state, jnp.int32(start), programs.compiler(relation, config))
    ).at(relation)
    screen = float64_screen(config, relation, options)
    warm_float64(config, screen)
    compile_seconds = time.perf_counter() - began
    current = {"state": state, "lowest": lowest}

    def step(chunk_index):
        current["state"], candidates = compiled(current["state"], jnp.int32(chunk_index))
        hits, current["lowest"] = violated_in_float64(config, screen, candidates,
                                                      current["lowest"])
        return [(int(candidates.index[k]), (candidates, k)) for k in hits]

    def verify(index, payload):
        candidates, k = payload
        target = runstate.witness_path(out_dir, f"{config.relation}-{index}")
        found = runstate.verify_witness(relation, record_mechanism(config, candidates, k),
                                        options, target, index)
        return None if found is None else runstate.keep(found, out_dir)

    def save(next_chunk, progress):
        jax.block_until_ready(current["state"])
        if out_dir is not None:
            save_checkpoint(out_dir, config, current["state"], next_chunk,
                            {**progress._asdict(), "lowest_float64": current["lowest"]})

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
        result = result._replace(rows=envelope_rows(out_dir, result, relation, screen),
                                 worst=worst_point(result, relation, out_dir,
                                                   current["lowest"], screen))
        if write is not None:
            write(out_dir, result, relation)
    return result


def envelope_rows(out_dir: Path, result: SweepResult, relation, screen=None) -> list[dict]:
    """Re-check each cell's best mechanism in float64 (all cells in the batches of ``screen``,
    the sweep's :func:`float64_screen`; built here when not given), save it, tabulate the
    envelope."""
    config = result.config
    options = relation.options
    screen = screen or float64_screen(config, relation, options)
    env = jax.tree_util.tree_map(np.asarray, result.state.envelope)
    counts = np.asarray(result.state.cell_count)
    cells = np.flatnonzero(env.score > -np.inf)
    if not cells.size:
        return []
    mechs, checked = checked_records(config, screen, env, cells)
    rows, at = [], []
    for i, cell in enumerate(cells):
        x_bin, p_bin = divmod(int(cell), config.param_bins)
        x_edge = config.x_max * (x_bin + 1) / config.x_bins
        p_edge = config.param_max * (p_bin + 1) / config.param_bins if config.param_bins > 1 \
            else None
        name = f"witnesses/bins/x{x_bin:03d}-p{p_bin:02d}.json"
        io.save_mechanism(out_dir / name, mechs[i], relation=relation.id,
                          index=int(env.index[cell]), **options)
        # the claim at the cell's edges (at the witness's own parameter where the bound scales
        # with it: a bin edge would overstate the room), all cells' in one call below
        measured = p_edge is None or relation.scales_with_parameter
        parameter = float(checked.parameter[i])
        at.append((x_edge, parameter if measured else p_edge))
        rows.append({"x": x_edge, "param": "" if p_edge is None else p_edge,
                     "premise": float(checked.premise[i]), "parameter": parameter,
                     "conclusion": float(checked.conclusion[i]), "bound": np.nan,
                     "slack": np.nan, "count": int(counts[cell]), "witness": name})
    bounds = registry.bound_at(relation, *zip(*at))
    with jax.enable_x64(True):
        slacks = np.asarray(registry.slack(bounds, np.array([r["conclusion"] for r in rows])))
    for row, bound, slack in zip(rows, bounds, slacks):
        row.update(bound=float(bound), slack=float(slack))
    return rows


def worst_point(result: SweepResult, relation, out_dir: Path | None = None,
                lowest: dict | None = None, screen=None) -> dict | None:
    """The lowest **float64** slack the sweep saw (``None`` if none qualified): the float32
    lowest-slack mechanism and ``lowest`` (the candidates' lowest float64 slack, from
    :func:`violated_in_float64`), each re-checked in float64, the lower taken — a float32 level
    that overflows (D16's KL) must not make a mechanism of float64 slack 5 the worst.
    ``{"file", "premise", "parameter", "slack"}`` (with ``out_dir``, the mechanism is saved as
    ``witnesses/worst.json``); a verified violation, if lower, is named instead."""
    worst = jax.tree_util.tree_map(np.asarray, result.state.worst)
    options = relation.options
    records, indices = [], []
    if worst.score[0] > -np.inf:
        records.append({name: getattr(worst, name)[:1] for name in RECORD_FIELDS})
        indices.append(int(worst.index[0]))
    if lowest is not None:
        records.append({name: np.asarray(lowest["record"][name], np.float32)[None]
                        for name in RECORD_FIELDS})
        indices.append(int(lowest["index"]))
    if not records:
        return None
    both = SimpleNamespace(**{name: np.concatenate([r[name] for r in records])
                              for name in RECORD_FIELDS})
    mechs, checks = checked_records(result.config,
                                    screen or float64_screen(result.config, relation, options),
                                    both, np.arange(len(records)))
    slacks = np.where(checks.condition_holds, checks.slack, np.inf)
    pick = int(np.argmin(slacks))
    mech, index = mechs[pick], indices[pick]
    point = {"file": None, "premise": float(checks.premise[pick]),
             "parameter": float(checks.parameter[pick]), "slack": float(checks.slack[pick])}
    if out_dir is not None:
        io.save_mechanism(out_dir / "witnesses" / "worst.json", mech, relation=relation.id,
                          index=index, **options)
        point["file"] = "witnesses/worst.json"
    for found in result.violations:
        if found["slack"] < point["slack"]:
            point = {key: found.get(key) for key in ("file", "premise", "parameter", "slack")}
    return point
