"""Adversarial tightness search: optax maximizes a relation's conclusion at a fixed premise level.

For each grid point ``x`` (and condition parameter ``ε``) many restarts each optimize one
mechanism. Data flows one way: **parameterize** (softmax logits) → **retract** onto the feasible
set → **smooth objective** → optax step, all inside one jitted ``lax.scan`` per segment of steps,
vmapped over restarts and grid points and sharded over devices → **re-evaluate** the best restarts
exactly in float64, from scratch → **envelope** of real witnesses and verified violations.

This module is the search's configuration (:class:`SearchConfig`, :func:`make_config`, the
grid), its run (:func:`run`: segments, checkpoints, early stop) and its result
(:class:`SearchResult`). What is optimized — parameters, the feasibility-preserving retraction,
the smoothed objective — is :mod:`jaxpriv.engines.search_objective`; the optimization loop
(optax steps, restarts, the population step) is :mod:`jaxpriv.engines.search_loop`; the float64
re-evaluation that turns the best restarts into witnesses is :mod:`jaxpriv.engines.search_grid`.

The envelope is a lower bound on ``E_R(x)`` (SPEC §4), except where :mod:`jaxpriv.engines.certify`
knows the exact value; there the search reports its optimality gap.

A search is deterministic given its seed and device count. Across device counts the float32
trajectories differ in the last bits (XLA vectorizes a different number of restarts per device),
and the envelopes agree to optimization precision (about 1e-5 relative), not bit for bit.

Examples:
  >>> from jaxpriv.catalog import seed_papers as relations
  >>> from jaxpriv.engines import search
  >>> config = search.make_config(relations.R2.id, n=3, m=3, grid=(0.5,), restarts=8, steps=200)
  >>> result = search.run(config, progress=False)
  >>> row = result.rows[0]
  >>> row["premise"] <= 0.5 + 1e-12, row["gap"] < 0.01  # reaches the certified 2ξ = 1.0
  (True, True)
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import jax
import numpy as np
import optax

from jaxpriv import registry
from jaxpriv.core.errors import InputError
from jaxpriv.core.mechanisms import Records
from jaxpriv.engines import checks, programs, runstate, settings, subject
from jaxpriv.engines.search_grid import (FAIL_VALUE, MAX_WITNESSES, candidate_mechanisms,
                                         evaluate_grid, float64_scores)
from jaxpriv.engines.search_loop import (SearchState, default_optimizer, grid_argument,
                                         initial_params, initial_state, make_segment)
from jaxpriv.engines.search_objective import (Params, SearchSetup, build, log_conclusion,
                                              objective, premise_keep)

__all__ = ["MAX_GRID_POINTS", "SETTING_OPTIONS", "STATE_FILE", "SearchConfig", "SearchResult",
           "clip_grid", "grid_limit", "make_config", "parse_grid", "run", "setup_for",
           # what is optimized, the loop and the float64 re-evaluation, from their modules
           "FAIL_VALUE", "MAX_WITNESSES", "Params", "SearchSetup", "SearchState", "build",
           "candidate_mechanisms", "default_optimizer", "evaluate_grid", "float64_scores",
           "initial_params", "initial_state", "log_conclusion", "make_segment", "objective",
           "premise_keep"]

STATE_FILE = runstate.SEARCH_STATE
SCORE = "log conclusion"
"""What a search checkpoint's best scores hold (:func:`jaxpriv.engines.search_objective.score_of`,
recorded in its progress). A checkpoint without it held the objective (the bound's log
subtracted: jaxpriv before a segment served relations of several claims), a scale the
resumed steps would not share: it is refused."""


# --------------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------------



def setup_for(relation, records: Records | None = None) -> SearchSetup:
    """How ``relation`` is searched; ``records``: the database layout, for relations between
    database-level notions."""
    if subject.engine_for(relation, "search") == subject.SETTINGS:
        raise InputError(f"{relation.id} is a statistical relation: jaxpriv.engines.settings "
                         "searches it")
    if relation.needs_records and records is None:
        raise InputError(f"{relation.id} relates database-level notions: give the layout "
                         "with --k (values per record) and --r (records)")
    premise = registry.notion(relation.premise)
    if premise.retract is None and not premise.post_processing:
        raise InputError(f"{relation.id}: the search cannot hold its premise {premise.key!r} "
                         "at a level: the notion has no retraction and is not flagged "
                         "post_processing=True (non-increasing under post-processing)")
    hints = relation.search
    return SearchSetup(hints.prior, hints.belief, hints.gates, hints.gridded_parameter,
                       records if relation.needs_records else None,
                       rare_starts=registry.notion(relation.conclusion).rare_outputs)


@dataclasses.dataclass(frozen=True)
class SearchConfig:
    """Everything that determines a search's result.

    Attributes:
      relation: registry id.
      n, m: mechanism shape.
      grid: premise levels ``x`` (nats, > 0).
      param: the condition parameter ``ε`` where the relation's bound is claimed at a gridded
        one (its search hint ``gridded_parameter``); 0 elsewhere.
      law: ABP observation law, ``"record"`` or ``"output"`` (the max over the true secret, or
        the output, is part of the smoothed objective).
      prior: ``""`` (the relation's search hint) or ``"uniform"`` (held fixed at ``1/n``: a
        special case of every hint, so the relation's condition still holds).
      restarts: independent optimizations per grid point (rounded up to the device count).
      steps: optimizer steps, run in whole segments (rounded up to a multiple of
        ``segment``); fewer where the search stops early (``patience``).
      segment: steps per compiled call (progress, checkpoints and early stopping happen between).
      patience: stop when, in the second half of the schedule (temperature already low),
        ``patience`` segments in a row improved no grid point's best objective by more than
        ``tol``.
      tol: improvement threshold of the early stop (objective is a log, so relative).
      learning_rate: peak Adam step size (cosine-decayed to 1% over ``steps``).
      clip: gradient clipping (global norm, per restart).
      temperature: log-sum-exp temperature, annealed geometrically from the first value to the
        second over ``steps``.
      top: best restarts per grid point re-evaluated in float64.
      explore: fraction of the steps during which, before every segment, the worst restarts
        restart near the best ones or from a neighbouring grid point's best (see
        :func:`jaxpriv.engines.search_loop._explore`); 0 turns it off.
      seed: PRNG seed.
    """

    ARGUMENTS: ClassVar[tuple[str, ...]] = ("grid",)
    """Fields the compiled programs take as arguments (keyed by their length only,
    :func:`jaxpriv.engines.programs.config_key`)."""

    relation: str
    n: int
    m: int
    grid: tuple[float, ...]
    param: float = 0.0
    law: str = "record"
    prior: str = ""
    restarts: int = 128
    steps: int = 3000
    segment: int = 100
    patience: int = 3
    tol: float = 1e-6
    learning_rate: float = 0.02
    clip: float = 1.0
    temperature: tuple[float, float] = (0.2, 1e-4)
    top: int = 8
    explore: float = 0.5
    seed: int = 0
    k: int = 0
    r: int = 0

    @property
    def records(self) -> Records | None:
        return Records(self.k, self.r) if self.r else None

    @property
    def setup(self) -> SearchSetup:
        setup = setup_for(registry.get(self.relation), self.records)
        return dataclasses.replace(setup, prior=self.prior) if self.prior else setup

    @property
    def options(self) -> dict[str, Any]:
        """The notion parameters: the relation's own, and ``law`` where a notion takes one."""
        relation = registry.get(self.relation)
        options = dict(relation.options)
        if "law" in relation.notion_params:
            options["law"] = self.law
        return options

    def __post_init__(self):
        """The checks of :func:`make_config`, with its messages, on a config built directly
        (and ``n = k^r`` for database-level relations)."""
        relation = registry.get(self.relation)
        checks.database_layout(relation, self.k, self.r, self.n)
        if relation.needs_records:
            _check_databases(self.n, self.m, self.r)
        setup = setup_for(relation, self.records)
        _check_search(relation, setup, self.n, self.m, self.grid, dataclasses.asdict(self))


MAX_GRID_POINTS = 10_000
"""The most premise levels a search grid may have."""


def parse_grid(text: str) -> tuple[float, ...]:
    """``"a:b:k"`` (``k`` points from ``a`` to ``b ≥ a``) or a comma list ``"0.1,0.5,1"`` of
    premise levels: finite, positive, at most :data:`MAX_GRID_POINTS`."""
    try:
        if ":" in text:
            low, high, count = text.split(":")
            low, high, count = float(low), float(high), int(count)
            if count < 1:
                raise InputError(f"--grid {text!r}: the count must be >= 1, got {count}")
            if high < low:
                raise InputError(f"--grid {text!r}: high ({high:g}) is below low ({low:g}); "
                                 "write 'low:high:count'")
            if count > MAX_GRID_POINTS:
                raise InputError(f"--grid {text!r}: {count} points; at most {MAX_GRID_POINTS}")
            points = np.linspace(low, high, count)
        else:
            points = np.array([float(v) for v in text.split(",") if v.strip()])
    except InputError:
        raise
    except ValueError:
        raise InputError(f"--grid {text!r}: expected 'low:high:count' or a comma list") from None
    if points.size == 0:
        raise InputError(f"--grid {text!r} has no points")
    if points.size > MAX_GRID_POINTS:
        raise InputError(f"--grid {text!r}: {points.size} points; at most {MAX_GRID_POINTS}")
    if not np.all(np.isfinite(points)) or np.any(points <= 0):
        raise InputError(f"--grid {text!r}: grid points must be finite and > 0 (premise levels)")
    return tuple(float(v) for v in points)


def grid_limit(relation) -> float | None:
    """The largest premise level the relation is searched at: its ``premise_limit`` and its
    search hint's ``grid_limit``, whichever is lower (``None``: no limit)."""
    limits = [v for v in (relation.premise_limit, relation.search.grid_limit) if v is not None]
    return min(limits) if limits else None


def clip_grid(relation, grid) -> tuple[float, ...]:
    """The part of ``grid`` where ``relation`` is claimed (see :func:`grid_limit`). If fewer
    than half the points are left, as many points evenly spaced up to the limit instead."""
    grid = tuple(float(x) for x in grid)
    limit = grid_limit(relation)
    if limit is None:
        return grid
    kept = tuple(x for x in grid if x <= limit)
    if 2 * len(kept) >= len(grid):
        return kept
    count = max(len(grid), 2)
    top = limit * (1 - 1e-9)  # a witness retracted to the limit may round just above it
    return tuple(float(v) for v in np.linspace(top / count, top, count))


SETTING_OPTIONS = ("t_max",)
"""Options only a search of settings takes (ignored for mechanisms)."""


def make_config(relation: str, n: int, m: int, grid, **overrides):
    """A validated :class:`SearchConfig` (``grid``: a sequence or a :func:`parse_grid` string),
    or, for a claim about an estimator, the setting subject's
    :class:`jaxpriv.engines.settings.StatConfig` (its own grid where ``grid`` is ``None``)."""
    rel = registry.get(relation)
    if subject.engine_for(rel, "search") == subject.SETTINGS:
        if isinstance(grid, str):
            grid = parse_grid(grid)
        if overrides.get("prior"):
            raise InputError(f"--prior: {rel.id} is a claim about an estimator, not a "
                             "mechanism; it has no prior to hold")
        given = {k: v for k, v in overrides.items()
                    if k not in ("k", "r", "param", "law", "prior")}
        return settings.make_config(rel.id, "search", grid=grid, n=n, **given)
    overrides = {k: v for k, v in overrides.items() if k not in SETTING_OPTIONS}
    registry.programs.check_float32(rel)  # before any work: one line
    k, r = int(overrides.pop("k", 0) or 0), int(overrides.pop("r", 0) or 0)
    k, r = checks.database_layout(rel, k, r)
    records = None
    if rel.needs_records:
        records = Records(k, r)
        n = k**r
        _check_databases(n, m, r)
    setup = setup_for(rel, records)
    grid = parse_grid(grid) if isinstance(grid, str) else tuple(float(v) for v in grid)
    grid = tuple(sorted(set(grid)))  # neighbours in the grid share starting points
    _check_search(rel, setup, n, m, grid, overrides)
    prior = overrides.get("prior", "") or ""
    overrides["prior"] = "" if prior == setup.prior else prior
    devices = jax.device_count()
    restarts = int(overrides.pop("restarts", SearchConfig.restarts))
    restarts = -(-restarts // devices) * devices
    top = min(int(overrides.pop("top", SearchConfig.top)), restarts)
    return SearchConfig(relation=rel.id, n=int(n), m=int(m), grid=grid, restarts=restarts,
                        top=top, k=k, r=r, **overrides)


def _check_databases(n, m, r) -> None:
    """The retraction compares every pair of the ``n = k^r`` databases: not too many."""
    if 2 ** (r - 1) * n * n * m > 1 << 20:
        raise InputError(f"k^r = {n} databases is too many for the search (the retraction "
                         "compares every pair of databases)")


def _check_search(rel, setup: SearchSetup, n, m, grid, values: dict[str, Any]) -> None:
    """The shape, the grid, the parameter, the law, the prior and the optimizer's settings of a
    search (``values``: a :class:`SearchConfig`'s fields, or the options given to
    :func:`make_config`; one not there takes its default)."""
    for name, value, low in (("n", n, 2), ("m", m, 2)):
        if int(value) != value or value < low:
            raise InputError(f"--{name} must be an integer >= {low}, got {value}")
    if n * m > 1024:
        raise InputError(f"n*m = {n * m} is above the search limit of 1024 entries")
    if not grid or not all(math.isfinite(x) and x > 0 for x in grid):
        raise InputError(f"--grid points must be finite and > 0, got {list(grid)}")
    if rel.premise_limit is not None and max(grid) > rel.premise_limit:
        raise InputError(f"{rel.id} is claimed only for {rel.premise} ≤ {rel.premise_limit}; "
                         f"the grid reaches {max(grid)}")
    param = float(values.get("param", 0.0))
    if not math.isfinite(param) or param < 0:
        raise InputError(f"--param must be finite and >= 0, got {param}")
    at_top = float(registry.bound_at(rel, max(grid), param))
    if math.isnan(at_top):
        raise InputError(f"{rel.id}'s bound is NaN at {rel.premise} = {max(grid)} (the bound is "
                         f"defined at {registry.where_defined(rel.bound)}); a bound must be a "
                         "number or ±inf")
    if not math.isfinite(at_top):
        raise InputError(f"{rel.id}'s bound is infinite at {rel.premise} = {max(grid)} (nothing "
                         f"to search there): keep the grid below "
                         f"{grid_limit(rel) or max(grid)}")
    if param > 0 and not setup.gridded_parameter:
        raise InputError(f"{rel.id} has no condition parameter to set; leave --param out")
    law = values.get("law", "record")
    if law not in ("record", "output"):
        raise InputError(f"--law must be 'record' or 'output', got {law!r}")
    prior = values.get("prior", "") or ""
    if prior not in ("", "uniform", setup.prior):
        raise InputError(f"--prior {prior!r}: {rel.id} is searched with the prior "
                         f"{setup.prior!r} (its condition: {rel.condition}); give 'uniform' "
                         "(a special case) or leave --prior out")
    for name in ("restarts", "steps", "segment", "patience", "top"):
        value = values.get(name, 1)
        if int(value) != value or value < 1:
            raise InputError(f"--{name} must be a positive integer, got {value}")
    if values.get("learning_rate", 1.0) <= 0:
        raise InputError(f"--lr must be positive, got {values['learning_rate']}")
    checks.seed(values.get("seed", 0))


class SearchResult(NamedTuple):
    config: SearchConfig
    rows: list[dict[str, Any]]  # one per grid point, see report.SEARCH_COLUMNS
    violations: list[dict[str, Any]]
    seconds: float
    compile_seconds: float
    steps: int  # steps actually run (early stop)


# --------------------------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------------------------


def run(config: SearchConfig, out: str | os.PathLike | None = None, resume: bool = False,
        progress: bool = True, optimizer: optax.GradientTransformation | None = None,
        max_segments: int | None = None, write=None) -> SearchResult:
    """Run (or resume) a search; with ``out``, checkpoint after every segment.

    Args:
      config: from :func:`make_config`.
      out: run directory (checkpoint, ``witnesses/``; the outputs layer adds ``summary.json``,
        ``envelope.csv``, ``envelope.png``).
      resume: continue from ``out``'s checkpoint (same config required).
      progress: show a progress bar (restart-steps/s, ETA) on stderr.
      optimizer: an optax ``GradientTransformation`` (default
        :func:`jaxpriv.engines.search_loop.default_optimizer`);
        applied per restart.
      max_segments: stop after this many segments in this call (resumable).
      write: the outputs layer's writer, ``write(out_dir, result, relation)``, called when the
        search is complete and has a directory (e.g. :func:`jaxpriv.report.write_search`).

    A search of settings (a claim about an estimator) runs its relation's search strategy
    (:func:`jaxpriv.engines.settings.run`) with the same run directory and witness round trip.

    Returns:
      a :class:`SearchResult`; ``rows`` hold float64 levels of real witnesses.
    """
    if subject.engine_for(config, "search") == subject.SETTINGS:
        return settings.run(config, out, resume=resume, progress=progress, write=write)
    with runstate.run_directory(out, resume, STATE_FILE,
                                f"search {config.relation}") as out_dir:
        return _run(config, out_dir, resume, progress, optimizer, max_segments, write)


def _run(config: SearchConfig, out_dir: Path | None, resume: bool, progress: bool,
         optimizer: optax.GradientTransformation | None, max_segments: int | None, write
         ) -> SearchResult:
    """:func:`run` in its prepared (and locked) run directory (``optimizer`` ``None``: the
    default one, whose compiled segment is kept for the claim's other instances)."""
    shared = optimizer is None
    optimizer = optimizer or default_optimizer(config)
    began = time.perf_counter()
    state = initial_state(config, optimizer)
    done = {"seconds": 0.0, "quiet_segments": 0, "history": []}
    if resume:
        state, done = _load(out_dir, config, state)
        runstate.note(f"resuming search {config.relation} in {out_dir} at step "
                      f"{int(state.step)} of {config.steps}")
    relation = registry.get(config.relation)
    values = registry.programs.traced_values(relation, np.float32)
    grid = grid_argument(config, np.float32)

    # a whole search this process already ran on the same program, settings and values (D6's
    # at D7's α and δ: the bound is no part of a search's steps) ends the same: taken as it is
    whole = shared and not resume and max_segments is None
    objective = registry.programs.objective_key(relation)
    memo = ("search", objective, programs.config_key(config), config.grid,
            tuple((k, float(v)) for k, v in sorted(values.items()))) if whole else None
    found = programs.remembered(memo) if whole else None
    if found is not None:
        compiled = None
        state, done = found[0], {**done, "quiet_segments": found[1], "history": list(found[2])}
    elif shared:  # the default optimizer's program: kept on disk, shared by relations
        compiled = programs.kept("search segment", relation, config,
                                 lambda: make_segment(config, optimizer), state, values, grid,
                                 program=objective)
    else:
        compiled = make_segment(config, optimizer).lower(state, values, grid).compile()
    compile_seconds = time.perf_counter() - began
    seconds, quiet, history = done["seconds"], done["quiet_segments"], done["history"]
    total = -(-config.steps // config.segment)
    start = total if found is not None else int(state.step) // config.segment
    per_segment = config.segment * config.restarts * len(config.grid)
    bar = runstate.progress_bar(total * per_segment, start * per_segment, "step",
                                f"search {config.relation}", progress)
    stop = total if max_segments is None else min(total, start + max_segments)
    previous = np.max(np.asarray(state.best_score), axis=1)
    for _ in range(start, stop):
        if quiet >= config.patience:
            break
        began = time.perf_counter()
        state = compiled(state, values, grid)
        current = np.max(np.asarray(state.best_score), axis=1)
        improved = np.any(current > previous + config.tol)
        late = int(state.step) >= config.steps // 2
        quiet = 0 if improved or not late else quiet + 1
        previous = current
        history.append(float(np.mean(current[np.isfinite(current)])) if np.isfinite(current).any()
                       else None)
        seconds += time.perf_counter() - began
        if out_dir is not None:
            _save(out_dir, config, state, {"seconds": seconds, "quiet_segments": quiet,
                                           "history": history})
        if bar is not None:
            bar.update(per_segment)
    if bar is not None:
        bar.close()
    finished = quiet >= config.patience or int(state.step) >= total * config.segment
    steps = int(state.step)
    if not finished:
        return SearchResult(config, [], [], seconds, compile_seconds, steps)
    if found is not None and out_dir is not None:
        _save(out_dir, config, state, {"seconds": seconds, "quiet_segments": quiet,
                                       "history": history})
    elif whole:
        programs.remember(memo, (jax.tree_util.tree_map(lambda a: np.array(a, copy=True), state),
                                 quiet, tuple(history)))
    rows, violations = evaluate_grid(config, state, out_dir)
    result = SearchResult(config, rows, violations, seconds, compile_seconds, steps)
    if out_dir is not None and write is not None:
        write(out_dir, result, registry.get(config.relation))
    return result


def _save(out: Path, config: SearchConfig, state: SearchState, progress: dict) -> None:
    runstate.save(out, STATE_FILE, state, dataclasses.asdict(config), {**progress, "score": SCORE})


def _load(out: Path, config: SearchConfig, like: SearchState) -> tuple[SearchState, dict]:
    state, progress = runstate.load(out, STATE_FILE, like, dataclasses.asdict(config))
    if progress.pop("score", None) != SCORE:
        raise InputError(f"{out}: a search checkpoint whose best scores held the bound (written "
                         "by an earlier jaxpriv): finish it with the version that started it, "
                         "or start a new --out")
    return state, progress
