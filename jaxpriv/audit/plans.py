"""The audit's plan: how much work it spends per relation (:class:`Budget`, :data:`BUDGETS`), the
relations it audits (:func:`relation_ids`) and the sweep and search configuration of each
(:func:`plan`, one :class:`Task` per run), and where each run's directory and checkpoint are
(:func:`run_dir`, :func:`checkpoint_file`).

Examples:
  >>> from jaxpriv.audit.plans import budget
  >>> budget("quick").grid
  (0.1, 3.0, 6)
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from jaxpriv import registry
from jaxpriv.core.errors import InputError

SUMMARY = "summary.json"
PLAN = "audit.json"

TIGHT_SLACK = 1.01
"""A relation whose least slack found is at most this is reported tight."""

PROBES = (2.0, 4.0, 8.0)
"""Multiples of the grid's top level that the audit also searches where a claim has no
certificate and its premise grows without bound (:func:`probes`)."""

BOUNDARY_SCAN = 257
"""Premise levels scanned for where a claim turns vacuous (:func:`probes`)."""

PLAN_VERSION = 2
"""What an audit directory's plan (``audit.json``) records of how its runs were planned: 2 since
the searches visit :func:`probes` (a directory of an earlier plan is not resumed: its searches'
levels differ)."""


@dataclasses.dataclass(frozen=True)
class Budget:
    """How much work the audit spends per relation.

    Attributes:
      name: ``quick``, ``standard`` or ``full``.
      sweep_count, sweep_n, sweep_m: random mechanisms per sweep and their shape.
      search_n, search_m: mechanism shape of the searches.
      grid: premise grid ``(low, high, points)`` of the searches (clipped per relation to
        where it is claimed, see :func:`jaxpriv.engines.search.clip_grid`).
      param: condition parameter ``ε`` of the searches for R3–R5.
      restarts, steps: optax restarts per grid point and steps.
      k, r, database_m: database layout (``k^r`` databases) and outputs for R7–R13.
      stat_count, t_max, draws: statistical sweeps' settings, largest ``T``, Monte Carlo draws.
      stat_grid: premise points of a statistical search (a relation with ``fixed_grid`` uses
        its own).
      stat_restarts, stat_steps: optax runs of a statistical search.
    """

    name: str
    sweep_count: int
    sweep_n: int
    sweep_m: int
    search_n: int
    search_m: int
    grid: tuple[float, float, int]
    param: float
    restarts: int
    steps: int
    k: int
    r: int
    database_m: int
    stat_count: int
    t_max: int
    draws: int
    stat_grid: int
    stat_restarts: int
    stat_steps: int


BUDGETS: dict[str, Budget] = {
    # 4 (AVX-512) to 8 (AVX2) minutes on a 2-core CPU with empty caches (compile time most of
    # it), 1–2.5 warm;
    # the target is 3 (issue 35, benchmarks/bench_audit.py)
    "quick": Budget("quick", sweep_count=20_000, sweep_n=4, sweep_m=4, search_n=3, search_m=3,
                    grid=(0.1, 3.0, 6), param=0.5, restarts=16, steps=300, k=2, r=2,
                    database_m=3, stat_count=8_192, t_max=2_000, draws=500, stat_grid=6,
                    stat_restarts=16, stat_steps=300),
    # tens of minutes on a 2-core CPU
    "standard": Budget("standard", sweep_count=1_000_000, sweep_n=4, sweep_m=4, search_n=4,
                       search_m=4, grid=(0.05, 3.0, 30), param=0.5, restarts=64, steps=1500,
                       k=2, r=2, database_m=4, stat_count=100_000, t_max=10_000, draws=2000,
                       stat_grid=30, stat_restarts=64, stat_steps=1500),
    # overnight on a CPU, or a GPU
    "full": Budget("full", sweep_count=10_000_000, sweep_n=8, sweep_m=8, search_n=4, search_m=4,
                   grid=(0.05, 3.0, 60), param=0.5, restarts=512, steps=3000, k=2, r=3,
                   database_m=4, stat_count=1_000_000, t_max=100_000, draws=2000, stat_grid=60,
                   stat_restarts=256, stat_steps=3000),
}


class Task(NamedTuple):
    """One run of the audit: ``kind`` is ``"sweep"`` or ``"search"``; ``config`` the engine's;
    ``grid_top`` (a search of a mechanism) the premise grid's top, below the :func:`probes`."""

    relation: str
    kind: str
    config: Any
    grid_top: float | None = None


def ceiling(relation) -> float | None:
    """The bound at or above which a point of ``relation`` says nothing: its conclusion's
    largest value over :data:`TIGHT_SLACK` (a slack ≤ 1.01 there only says the conclusion is
    near its ceiling), or ``None`` where the conclusion is unbounded."""
    try:
        largest = float(registry.notion(relation.conclusion).maximum)
    except Exception:  # not a registered notion (a statistical claim)
        return None
    return largest / TIGHT_SLACK if np.isfinite(largest) else None


def probes(relation, grid: tuple[float, ...], param: float = 0.0) -> tuple[float, ...]:
    """Premise levels a search of ``relation`` visits besides its ``grid``, where the verdict
    would otherwise rest on what the sweep's random stream happened to reach (issue 35: verdicts
    that do not move with the seed):

    * a claim with no certificate whose premise grows without bound
      (:attr:`jaxpriv.registry.Notion.unbounded`) and no premise limit: the grid's top times
      :data:`PROBES` — whether the claim is approached only as the premise grows is then decided
      by a search, not by the sweep's extremes;
    * a claim whose bound turns vacuous (reaches :func:`ceiling`) within ``(0, top × 8]``: the
      last level before it does (scans refined to 1e-4 relative, rounded down to 4 digits) — the least slack
      over the informative region is often at its edge (D9: δ(ε) ≤ 1 at ρ ≈ 5.56).

    A level where the bound is not finite, or already vacuous, is not searched. A claim's
    instances whose edges differ (D9 at ε = 0.5, 1, 2) compile a search program each.

    Returns:
      levels, sorted, none already in ``grid`` (an empty tuple for a certified claim).

    Examples:
      >>> from jaxpriv import Relation, registry
      >>> _ = registry.register(Relation(id="KL2", statement="KL ⇒ χ² ≤ 2x", premise="kl",
      ...                                conclusion="chi2", bound=lambda x, *p: 2.0 * x))
      >>> probes(registry.get("KL2"), (0.1, 3.0))
      (6.0, 12.0, 24.0)
      >>> registry.unregister("KL2")
    """
    from jaxpriv.engines import search

    if getattr(relation, "certificate", None) is not None or not grid:
        return ()
    top = float(max(grid))
    most = ceiling(relation)

    def informative(xs):  # a finite bound, below the conclusion's ceiling where it has one
        bound = np.asarray(registry.bound_at(relation, np.asarray(xs, np.float64), param))
        return np.isfinite(bound) & (bound < most if most is not None else True)

    levels = set()
    try:
        unbounded = bool(registry.notion(relation.premise).unbounded)
    except Exception:  # a premise that is not a registered notion
        unbounded = False
    limit = search.grid_limit(relation)
    if unbounded and limit is None:
        ladder = [top * f for f in PROBES]
        levels.update(x for x, ok in zip(ladder, informative(ladder)) if ok)
    reach = top * max(PROBES) if limit is None else min(limit, top * max(PROBES))
    if most is not None and reach > min(grid):
        xs = np.geomspace(min(grid), reach, BOUNDARY_SCAN)
        said = informative(xs)
        for i in np.flatnonzero(said[:-1] & ~said[1:])[:2]:  # informative → vacuous
            lo, hi = float(xs[i]), float(xs[i + 1])
            while hi / lo - 1 >= 1e-4:  # rescan [lo, hi] (each scan: ratio^(1/256))
                finer = np.geomspace(lo, hi, BOUNDARY_SCAN)
                j = int(np.argmin(informative(finer)))  # the first vacuous level (finer[-1] is)
                lo, hi = float(finer[j - 1]), float(finer[j])
            # 4 significant digits, rounded down (the same level on every backend)
            digits = math.floor(math.log10(lo)) - 3
            rounded = float(f"{math.floor(lo / 10.0 ** digits)}e{digits}")
            levels.add(rounded if rounded > 0 and informative([rounded])[0] else lo)
    return tuple(sorted(x for x in levels if x not in grid))


def budget(name: str) -> Budget:
    if name not in BUDGETS:
        raise InputError(f"--budget must be one of {', '.join(BUDGETS)}, got {name!r}")
    return BUDGETS[name]


def relation_ids(text: str | None, spend: Budget | None = None) -> list[str]:
    """``None``/``"all"`` → every registered relation (at the quick budget, those whose record
    has ``quick``: a claim registered at many parameter values keeps a few instances); else a
    comma list of ids or prefixes ending in ``*`` (``'R1*'``, ``'opendp.*'``), validated, every
    instance."""
    ids = registry.select(text)
    if spend is not None and spend.name == "quick" and (text is None or
                                                         text.strip().lower() == "all"):
        ids = [rid for rid in ids if getattr(registry.get(rid), "quick", True)]
    return ids


def capped_shape(relation, n: int, m: int) -> tuple[int, int]:
    """The budget's shape ``(n, m)``, capped by the relation's sampling hint ``shape``."""
    hint = getattr(getattr(relation, "sampling", None), "shape", None)
    return (n, m) if hint is None else (min(n, hint[0]), min(m, hint[1]))


def plan(spend: Budget, ids: list[str], seed: int = 0, memory_mb: float = 1024.0
         ) -> list[Task]:
    """The sweep and search configurations of every relation in ``ids`` at budget ``spend``."""
    from jaxpriv.core.mechanisms import Records
    from jaxpriv.engines import search, subject, sweep

    grid = tuple(float(v) for v in np.linspace(*spend.grid[:2], spend.grid[2]))
    tasks = []
    for rid in ids:
        relation = registry.get(rid)
        if subject.engine_for(relation, "sweep") == subject.SETTINGS:
            # a setting subject keeps its own shape (n secrets of κ₁, κ₂): None leaves it
            tasks.append(Task(rid, "sweep", sweep.make_config(
                rid, None, None, spend.stat_count, seed, t_max=spend.t_max,
                draws=spend.draws)))
            stat_grid = None if relation.fixed_grid else np.linspace(*relation.grid[:2],
                                                                      spend.stat_grid)
            tasks.append(Task(rid, "search", search.make_config(
                rid, None, None, stat_grid, t_max=spend.t_max, seed=seed,
                restarts=spend.stat_restarts, steps=spend.stat_steps)))
            continue
        database = relation.needs_records
        layout = {"k": spend.k, "r": spend.r} if database else {}
        m = spend.database_m if database else spend.sweep_m
        n, m = capped_shape(relation, spend.sweep_n, m)
        tasks.append(Task(rid, "sweep", sweep.make_config(
            rid, n, m, spend.sweep_count, seed, memory_mb=memory_mb, **layout)))
        setup = search.setup_for(relation, Records(**layout) if layout else None)
        param = spend.param if setup.gridded_parameter else 0.0
        m = spend.database_m if database else spend.search_m
        n, m = capped_shape(relation, spend.search_n, m)
        levels = search.clip_grid(relation, grid)
        tasks.append(Task(rid, "search", search.make_config(
            rid, n, m, levels + probes(relation, levels, param), param=param,
            restarts=spend.restarts, steps=spend.steps, seed=seed, **layout), max(levels)))
    return tasks


def run_dir(out: Path, task: Task) -> Path:
    """A task's run directory in the audit directory ``out``: ``out/<relation>/<kind>``."""
    return out / task.relation / task.kind


def checkpoint_file(config) -> str | None:
    """The file a killed sweep or search resumes from (``None``: statistical searches are short
    and restart)."""
    from jaxpriv.engines import search, settings, sweep

    if isinstance(config, settings.StatConfig):
        return settings.CHECKPOINT if config.mode == "sweep" else None
    return sweep.CHECKPOINT if isinstance(config, sweep.SweepConfig) else search.STATE_FILE
