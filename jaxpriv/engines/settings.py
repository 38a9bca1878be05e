"""The setting subject: claims about an estimator (their subject is a *setting*, e.g. R14's
``(T, κ₁, ε)``, rather than a mechanism), swept and searched through :func:`jaxpriv.engines.sweep.run`
and :func:`jaxpriv.engines.search.run` with their run-directory contract (``summary.json``,
``envelope.csv``, ``envelope.png``, ``witnesses/``).

What to draw, how to evaluate a chunk of settings, what a witness file holds and how to search
come from the relation's record (:class:`jaxpriv.registry.StatisticalRelation`, its
:class:`jaxpriv.registry.Strategies`: R14's breakpoint search and R15's optax search are strategies); the chunk
loop, checkpoints, resume and the witness round trip are the sweep's own
(:mod:`jaxpriv.engines.runstate`). Nothing here names a relation. The premise level ``x`` is ε; envelope rows are ε bins (sweep) or ε grid points (search),
each holding its lowest-slack setting.

Every reported violation is re-checked from scratch by the registry's check and saved as a
witness file that ``jaxpriv check`` and ``jaxpriv show`` read. Long sweeps checkpoint after every
chunk and resume.

Examples:
  >>> from jaxpriv.catalog import statistical as statistical_relations
  >>> from jaxpriv.engines import settings as sa
  >>> config = sa.make_config(statistical_relations.R14.id, "search", grid=(0.5, 4.0), t_max=2000)
  >>> rows = sa.run(config, progress=False).rows
  >>> [row["slack"] > 1 for row in rows]  # the Chernoff regime holds, ε = 4 does not
  [True, False]
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

import jax
import numpy as np

from jaxpriv import registry
from jaxpriv.core import statistical
from jaxpriv.engines import checks, io, runstate
from jaxpriv.core.errors import InputError

MODES = ("sweep", "search")
CHECKPOINT = runstate.RECORD_STATE


@dataclasses.dataclass(frozen=True)
class StatConfig:
    """Everything that determines a statistical audit's result.

    Attributes:
      relation: the id of a statistical relation. mode: ``"sweep"`` or ``"search"``.
      count, chunk: sweep settings, and settings per compiled step.
      x_max, x_bins: ε bins ``[0, x_max]`` of the sweep envelope.
      grid: ε grid of the search.
      t_max: largest sample count ``T`` (a binomial-tail claim's strategies read it).
      mc_settings, draws: Monte Carlo check of R14's exact tails, on this many settings per
        chunk with this many binomial draws each.
      n: length of the distributions a setting holds (e.g. ``κ₁, κ₂``).
      restarts, steps, learning_rate: the R15 search's optax runs per grid point.
      max_witnesses: violations saved as files (later ones are counted).
      seed: PRNG seed.
    """

    relation: str
    mode: str
    count: int = 100_000
    chunk: int = 1024
    x_max: float = 10.0
    x_bins: int = 40
    grid: tuple[float, ...] = ()
    t_max: int = 10_000
    mc_settings: int = 32
    draws: int = 2000
    n: int = 4
    restarts: int = 64
    steps: int = 1500
    learning_rate: float = 0.05
    max_witnesses: int = 100
    seed: int = 0

    @property
    def chunks(self) -> int:
        return -(-self.count // self.chunk)

    def __post_init__(self):
        """The checks of :func:`make_config`, with its messages, on a config built directly."""
        relation = _statistical(self.relation)
        _check_mode(self.mode)
        _check_numbers(dataclasses.asdict(self))
        if self.mode == "search":
            _check_grid(relation, self.grid)


def _statistical(relation_id: str):
    relation = registry.get(relation_id)
    if relation.kind != "statistical":
        statistical = [r.id for r in registry.REGISTRY.values() if r.kind == "statistical"]
        raise InputError(f"{relation.id} is not a statistical relation "
                         f"({', '.join(statistical)})")
    return relation


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise InputError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")


def _check_numbers(values: dict[str, Any]) -> None:
    """The counts, sizes and rates of a :class:`StatConfig` (``values``: its fields, or the
    options given to :func:`make_config`; one not there is not checked)."""
    for name in ("count", "chunk", "x_bins", "t_max", "mc_settings", "draws", "restarts",
                 "steps", "max_witnesses"):
        value = values.get(name, 1)
        if int(value) != value or value < 1:
            raise InputError(f"--{name.replace('_', '-')} must be a positive integer, got {value}")
    if values.get("n", 2) < 2 or int(values.get("n", 2)) != values.get("n", 2):
        raise InputError(f"--n must be an integer >= 2 (secrets of κ₁, κ₂), got {values['n']}")
    if values.get("t_max", 1) > statistical.MAX_T:
        raise InputError(f"--t-max must be at most {statistical.MAX_T:,}, got "
                         f"{values['t_max']}")
    if values.get("learning_rate", 1.0) <= 0:
        raise InputError(f"--lr must be positive, got {values['learning_rate']}")
    checks.seed(values.get("seed", 0))


def _check_grid(relation, grid: tuple[float, ...]) -> None:
    """A search's ε grid: finite, positive, inside the relation's ``x_range``."""
    if not all(math.isfinite(x) and x > 0 for x in grid):
        raise InputError(f"--grid points must be finite and > 0, got {list(grid)}")
    if relation.x_range is not None and not all(relation.x_range[0] < x < relation.x_range[1]
                                                for x in grid):
        low, high = relation.x_range
        raise InputError(f"{relation.id} is claimed for {low:g} < ε < {high:g}; the grid reaches "
                         f"{min(grid) if min(grid) <= low else max(grid)}")


def make_config(relation: str, mode: str, **overrides) -> StatConfig:
    """A validated :class:`StatConfig` (the relation's own defaults — its ε range, its chunk —
    fill what is not given)."""
    rel = _statistical(relation)
    rid = rel.id
    _check_mode(mode)
    overrides = {k: v for k, v in overrides.items() if v is not None}
    for key, value in rel.strategies.defaults.get(mode, {}).items():
        overrides.setdefault(key, value)
    _check_numbers(overrides)
    grid = overrides.pop("grid", None)
    if mode == "search":
        if grid is None or len(grid) == 0:
            grid = np.linspace(*rel.grid)
        grid = tuple(sorted({float(x) for x in grid}))
        _check_grid(rel, grid)
    else:
        grid = ()
    overrides["chunk"] = min(int(overrides.get("chunk", StatConfig.chunk)),
                             int(overrides.get("count", StatConfig.count)))
    return StatConfig(relation=rid, mode=mode, grid=grid, **overrides)


class StatResult(NamedTuple):
    config: StatConfig
    rows: list[dict[str, Any]]  # envelope rows, see report.ENVELOPE_COLUMNS
    violations: list[dict[str, Any]]
    violation_count: int
    seconds: float
    extra: dict[str, Any]  # what the relation's strategies report (R14: Monte Carlo record)


# --------------------------------------------------------------------------------------------
# sweep driver
# --------------------------------------------------------------------------------------------


def _empty_state(relation) -> dict[str, Any]:
    extra = relation.strategies.initial() if relation.strategies.initial else {}
    return {"next_chunk": 0, "seconds": 0.0, "violation_count": 0, "violations": [],
            "bins": {}, **extra}


def _verify(relation_id: str, fields: dict[str, Any], out_dir: Path | None, name: str
            ) -> dict[str, Any] | None:
    """Re-check a setting from scratch with the registry's check; save it if violated."""
    path = runstate.witness_path(out_dir, name) if out_dir is not None else None
    found = runstate.verify_setting(registry.get(relation_id), fields, path)
    return None if found is None else runstate.keep(found, out_dir)


def _merge_bins(config: StatConfig, fields: Callable, bins: dict, eps, log_slack, settings,
                offset: int) -> None:
    """Keep per ε bin the lowest-slack setting (as witness fields) and the bin's count."""
    cells = np.minimum((np.asarray(eps) / config.x_max * config.x_bins).astype(int),
                       config.x_bins - 1)
    for cell in np.unique(cells):
        members = np.flatnonzero(cells == cell)
        best = members[np.argmin(log_slack[members])]
        entry = bins.setdefault(str(cell), {"count": 0, "log_slack": math.inf, "fields": None,
                                            "index": None})
        entry["count"] += int(members.size)
        if entry["fields"] is None or log_slack[best] < entry["log_slack"]:
            entry.update(log_slack=float(log_slack[best]), index=offset + int(best),
                         fields=fields(tuple(np.asarray(s)[best] for s in settings)))


def run_sweep(config: StatConfig, out_dir: Path | None, resume: bool, progress: bool,
              max_chunks: int | None = None) -> StatResult:
    relation = registry.get(config.relation)
    strategies = relation.strategies
    width = len(relation.fields)
    state = _load_checkpoint(out_dir, config) if resume else _empty_state(relation)
    if resume:
        runstate.note_resumed(f"sweep {config.relation}", out_dir, state["next_chunk"],
                              config.chunks, config.chunk, config.count, "settings",
                              state["violation_count"])
    with jax.enable_x64(True):
        compiled, table = strategies.sweep_step(config)

        def step(chunk_index):
            key = jax.random.fold_in(jax.random.key(config.seed), chunk_index)
            outputs = [np.asarray(a) for a in compiled(key, table)]
            size = min(config.chunk, config.count - chunk_index * config.chunk)
            outputs = [a[:size] if a.ndim and a.shape[0] == config.chunk else a
                       for a in outputs]
            settings, log_y, log_bound = outputs[:width], outputs[width], outputs[width + 1]
            if strategies.on_chunk is not None:
                strategies.on_chunk(state, config, settings, log_y, outputs[width + 2:])
            offset = chunk_index * config.chunk
            _merge_bins(config, strategies.fields, state["bins"], settings[-1],
                        log_bound - log_y, settings, offset)
            return [(offset + int(i), strategies.fields(tuple(a[i] for a in settings)))
                    for i in np.flatnonzero(strategies.violated(log_y, log_bound))]

        def verify(index, fields):
            return _verify(config.relation, fields, out_dir, f"{config.relation}-{index}")

        def save(next_chunk, found):
            state.update(next_chunk=next_chunk, **found._asdict())
            if out_dir is not None:
                _save_checkpoint(out_dir, config, state)

        bar = progress_bar(config, state["next_chunk"] * config.chunk, config.count, progress,
                           "setting")
        stop = config.chunks if max_chunks is None else min(config.chunks,
                                                            state["next_chunk"] + max_chunks)
        found = runstate.run_chunks(
            state["next_chunk"], stop, step, verify, save,
            runstate.Progress(state["violations"], state["violation_count"], state["seconds"]),
            max_witnesses=config.max_witnesses, bar=bar,
            size=lambda chunk_index: min(config.chunk, config.count - chunk_index * config.chunk))
    if state["next_chunk"] < config.chunks:
        return StatResult(config, [], found.violations, found.violation_count, found.seconds, {})
    rows = _envelope_rows(config, state["bins"], out_dir)
    extra = strategies.summary(state, config) if strategies.summary else {}
    return StatResult(config, rows, found.violations, found.violation_count, found.seconds,
                      extra)


def _envelope_rows(config: StatConfig, bins: dict, out_dir: Path | None) -> list[dict]:
    """One row per non-empty ε bin (sweep) or grid point (search): its lowest-slack setting,
    re-checked from scratch in float64 and saved as a witness."""
    relation = registry.get(config.relation)
    rows = []
    for cell in sorted(bins, key=int):
        entry = bins[cell]
        checked = relation.check(**entry["fields"])
        name = ""
        if out_dir is not None:
            name = f"witnesses/bins/x{int(cell):03d}.json"
            target = out_dir / name
            target.parent.mkdir(parents=True, exist_ok=True)
            io.atomic_write(target, lambda f: json.dump(
                {"relation": relation.id, **entry["fields"]}, f, indent=1))
        x = entry.get("x", config.x_max * (int(cell) + 1) / config.x_bins)
        rows.append({"x": x, "param": "", "premise": float(checked.premise),
                     "parameter": float(checked.parameter),
                     "conclusion": float(checked.conclusion), "bound": float(checked.bound),
                     "slack": float(checked.slack), "count": entry["count"], "witness": name,
                     "log_slack": float(entry["log_slack"])})
    return rows


def _save_checkpoint(out_dir: Path, config: StatConfig, state: dict) -> None:
    runstate.save_record(out_dir, CHECKPOINT, dataclasses.asdict(config), state)


def _load_checkpoint(out_dir: Path | None, config: StatConfig) -> dict:
    return runstate.load_record(out_dir, CHECKPOINT, dataclasses.asdict(config))


# --------------------------------------------------------------------------------------------
# search and driver
# --------------------------------------------------------------------------------------------


def run_search(config: StatConfig, out_dir: Path | None, progress: bool) -> StatResult:
    began = time.perf_counter()
    bins = registry.get(config.relation).strategies.search(
        config, lambda total, unit: progress_bar(config, 0, total, progress, unit))
    rows = _envelope_rows(config, bins, out_dir)
    violations, count = [], 0
    for g, row in enumerate(rows):
        found = _verify(config.relation, bins[str(g)]["fields"], out_dir,
                        f"{config.relation}-g{g:03d}")
        if found is not None:
            found["grid_point"] = row["x"]
            violations.append(found)
            count += 1
    return StatResult(config, rows, violations, count, time.perf_counter() - began, {})


def run(config: StatConfig, out: str | os.PathLike | None = None, resume: bool = False,
        progress: bool = True, max_chunks: int | None = None,
        write: Callable | None = None) -> StatResult:
    """Run (or, for a sweep, resume) a statistical audit.

    Args:
      config: from :func:`make_config`.
      out: run directory (checkpoint and ``witnesses/``).
      resume: continue a killed sweep from ``out``'s checkpoint (same config required). A
        search is short and restarts from scratch.
      progress: progress bar on stderr.
      max_chunks: stop a sweep after this many chunks in this call.
      write: the outputs layer's writer, called as ``write(out_dir, result, relation)`` when
        the run is complete and has a directory (e.g. :func:`jaxpriv.report.write_statistical`).

    Returns:
      a :class:`StatResult`; every row is re-checked from scratch in float64.
    """
    if config.mode == "search" and resume:
        raise InputError(f"{config.relation} searches are short and do not resume; run "
                         "again without --resume")
    with runstate.run_directory(out, resume, CHECKPOINT,
                                f"{config.mode} {config.relation}") as out_dir:
        if config.mode == "sweep":
            result = run_sweep(config, out_dir, resume, progress, max_chunks)
            if not result.rows:
                return result
        else:
            result = run_search(config, out_dir, progress)
        if out_dir is not None and write is not None:
            write(out_dir, result, registry.get(config.relation))
        return result


def progress_bar(config: StatConfig, start: int, total: int, enabled: bool, unit: str):
    """The run's progress bar (see :func:`jaxpriv.engines.runstate.progress_bar`)."""
    return runstate.progress_bar(total, start, unit, f"{config.mode} {config.relation}", enabled)
