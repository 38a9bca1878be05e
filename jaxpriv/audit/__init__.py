"""The audit: every registered relation swept, searched, certified where a closed form exists,
and judged — the job ``jaxpriv audit`` runs.

For each relation the audit runs a random sweep (:mod:`jaxpriv.engines.sweep`; for a claim about an
estimator, its relation's strategies) into ``DIR/<id>/sweep`` and an adversarial search
(:mod:`jaxpriv.engines.search`) into ``DIR/<id>/search``, each with the run-directory contract of those
modules; then it evaluates the certified envelope (:mod:`jaxpriv.engines.certify`) on the search grid and
condenses the three into one :class:`Verdict`. Every violation it counts was re-verified in
float64 from the saved witness file by the engine that found it.

Verdict rules (:func:`assess`):

* **violated**: at least one verified witness; the worst slack is the lowest verified one. A
  certified least slack below 1 with no witness at the budget reads "violated (certified)".
* otherwise the worst slack ``s`` is the least slack of any witness the sweep and search kept,
  and of the certified curve on the grid (each is attained by a real mechanism, so ``s`` is an
  upper bound on the true least slack, exact where certified): **tight** if ``s ≤ 1.01``, else
  **loose by ×s**.

Resumable: a run whose ``summary.json`` exists with the same configuration is not run again, a
sweep or search with a checkpoint continues from it, and ``DIR/summary.json`` is rewritten after
every relation, so a killed audit loses at most the run in flight's unfinished chunk.

Examples:
  >>> from jaxpriv import audit
  >>> audit.BUDGETS["quick"].sweep_count
  20000
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

import numpy as np

from jaxpriv import registry, report
from jaxpriv.engines import certify, group, io, runstate
from jaxpriv.core.errors import InputError

TIGHT_SLACK = 1.01
"""A relation whose least slack found is at most this is reported tight."""

SUMMARY = "summary.json"
PLAN = "audit.json"


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
    # under 3 minutes on a 2-core CPU, compile time included (most of it)
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
    """One run of the audit: ``kind`` is ``"sweep"`` or ``"search"``; ``config`` the engine's."""

    relation: str
    kind: str
    config: Any


def budget(name: str) -> Budget:
    if name not in BUDGETS:
        raise InputError(f"--budget must be one of {', '.join(BUDGETS)}, got {name!r}")
    return BUDGETS[name]


def relation_ids(text: str | None) -> list[str]:
    """``None``/``"all"`` → every registered relation; else a comma list of ids or prefixes
    ending in ``*`` (``'R1*'``, ``'opendp.*'``), validated."""
    return registry.select(text)


def plan(spend: Budget, ids: list[str], seed: int = 0, memory_mb: float = 1024.0
         ) -> list[Task]:
    """The sweep and search configurations of every relation in ``ids`` at budget ``spend``."""
    from jaxpriv.engines import search, sweep
    from jaxpriv.core.mechanisms import Records

    grid = tuple(float(v) for v in np.linspace(*spend.grid[:2], spend.grid[2]))
    tasks = []
    for rid in ids:
        relation = registry.get(rid)
        if relation.kind == "statistical":
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
        tasks.append(Task(rid, "sweep", sweep.make_config(
            rid, spend.sweep_n, m, spend.sweep_count, seed, memory_mb=memory_mb, **layout)))
        setup = search.setup_for(relation, Records(**layout) if layout else None)
        param = spend.param if setup.gridded_parameter else 0.0
        m = spend.database_m if database else spend.search_m
        tasks.append(Task(rid, "search", search.make_config(
            rid, spend.search_n, m, search.clip_grid(relation, grid), param=param,
            restarts=spend.restarts, steps=spend.steps, seed=seed, **layout)))
    return tasks


# --------------------------------------------------------------------------------------------
# running
# --------------------------------------------------------------------------------------------


def run_dir(out: Path, task: Task) -> Path:
    return out / task.relation / task.kind


def _finished(directory: Path, config) -> bool:
    path = directory / SUMMARY
    if not path.exists():
        return False
    try:
        saved = io.read_json(path)
    except InputError:  # a damaged summary: the run is finished again from its checkpoint
        return False
    return isinstance(saved, dict) and io.same_config(saved.get("config"),
                                                      dataclasses.asdict(config))


def checkpoint_file(config) -> str | None:
    """The file a killed sweep or search resumes from (``None``: statistical searches are short
    and restart)."""
    from jaxpriv.engines import search, settings, sweep

    if isinstance(config, settings.StatConfig):
        return settings.CHECKPOINT if config.mode == "sweep" else None
    return sweep.CHECKPOINT if isinstance(config, sweep.SweepConfig) else search.STATE_FILE


def run_task(task: Task, out: Path, progress: bool = True) -> str:
    """Run one sweep or search into its directory unless it is already finished; a checkpoint
    left by a killed run is resumed. Returns ``"done"``, ``"resumed"`` or ``"ran"``."""
    from jaxpriv.engines import search, sweep

    directory = runstate.writable_directory(run_dir(out, task))
    with runstate.lock(directory, f"audit {task.kind} {task.relation}"):
        # decided under the lock: a worker of a killed audit may still write its last chunk
        # in a process group the writer's directory decides for every process
        if group.agree(_finished(directory, task.config)):
            return "done"
        checkpoint = checkpoint_file(task.config)
        resume = checkpoint is not None and bool(group.agree(
            io.has_checkpoint(directory / checkpoint)))
        if task.kind == "sweep":
            sweep.run(task.config, directory, resume=resume, progress=progress,
                      write=report.write_sweep)
        else:
            search.run(task.config, directory, resume=resume, progress=progress,
                       write=report.search_writer(run_dir(out, task._replace(kind="sweep"))))
    return "resumed" if resume else "ran"


def _check_plan(out: Path, record: dict[str, Any]) -> None:
    """Refuse to mix budgets in one directory: a resumed audit must be the same audit."""
    path = out / PLAN
    if path.exists():
        saved = io.read_json(path)
        if not isinstance(saved, dict):
            raise InputError(f"{path}: not an audit plan; use a new --out")
        if {k: saved.get(k) for k in ("budget", "seed")} != {k: record[k] for k in
                                                             ("budget", "seed")}:
            raise InputError(f"{out} holds an audit with budget {saved.get('budget')!r}, seed "
                             f"{saved.get('seed')}; use a new --out or the same settings")
        record = {**record, "relations": list(dict.fromkeys(saved.get("relations", []) +
                                                            record["relations"]))}
    out.mkdir(parents=True, exist_ok=True)
    io.atomic_write(path, lambda f: json.dump(record, f, indent=1))


def default_workers() -> int:
    """Relations audited at once: one per CPU core on a CPU host (a quick audit is mostly XLA
    compilation, which is single-threaded), one on an accelerator (processes would compete for
    its memory)."""
    import jax

    if jax.default_backend() != "cpu":
        return 1
    return max(1, min(os.cpu_count() or 1, 8))


def _run_relation(tasks: list[Task], out: Path, progress: bool) -> list[tuple[str, str, float]]:
    """Run one relation's tasks in order: ``(kind, state, seconds)`` per task."""
    done = []
    for task in tasks:
        began = time.perf_counter()
        state = run_task(task, out, progress)
        done.append((task.kind, state, time.perf_counter() - began))
    return done


def _relation_worker(tasks: list[Task], out: str) -> list[tuple[str, str, float]]:
    """:func:`_run_relation` in a worker process (set up by :func:`_worker_setup`); a plugin's
    own exception comes back as the one-line error it would be in the parent."""
    try:
        return _run_relation(tasks, Path(out), progress=False)
    except (InputError, OSError):
        raise  # already what the user is told
    except Exception as error:  # noqa: BLE001 - re-raised unless it is a plugin's
        found = registry.plugin_error(error)
        if found is None:
            raise
        raise found from None


WORKER_LOCK_WAIT = 10.0
"""Seconds an audit worker waits for a run directory's lock: a worker of a killed audit may
still be stopping (it notices within :data:`ORPHAN_POLL` seconds)."""

ORPHAN_POLL = 0.25
"""How often an audit worker checks that the audit that started it is still alive."""


def _worker_setup(parent: int, devices: int, plugins: list[str]) -> None:
    """Every worker process, once: ``devices`` CPU devices, the parent's plugins, a longer wait
    for run-directory locks, and a watchdog that ends the worker at once when the audit that
    started it is gone (``kill -9`` included), so no orphan keeps writing its directory."""
    import threading

    import jax

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(ORPHAN_POLL)
        os._exit(3)

    threading.Thread(target=watch, name="jaxpriv-orphan-watch", daemon=True).start()
    jax.config.update("jax_num_cpu_devices", devices)
    runstate.LOCK_WAIT = WORKER_LOCK_WAIT
    registry.load_plugins(plugins)


def run(spend: Budget, ids: list[str], out: str | os.PathLike, seed: int = 0,
        progress: bool = True, memory_mb: float = 1024.0, workers: int = 1,
        log: Callable[[str], None] = print) -> dict[str, Any]:
    """Audit ``ids`` at budget ``spend`` into ``out``; returns the audit summary (also written to
    ``out/summary.json``, and the report to ``out/report.md``, ``out/report.html``).

    Args:
      spend: a :class:`Budget` (see :data:`BUDGETS`).
      ids: relation ids (see :func:`relation_ids`).
      out: the audit directory; an existing audit there is resumed (same budget and seed).
      seed: PRNG seed of every sweep and search.
      progress: progress bars on stderr (per run with one worker, per relation with several).
      memory_mb: device memory budget of the sweeps' chunks.
      workers: relations audited at once, each in its own process (see
        :func:`default_workers`); the results do not depend on it.
      log: where one line per finished run goes.

    Returns:
      ``{"budget", "seed", "seconds", "relations": [verdict dicts]}``.
    """
    if int(workers) != workers or workers < 1:
        raise InputError(f"--workers must be a positive integer, got {workers}")
    @contextlib.contextmanager
    def opened():
        directory = runstate.writable_directory(out)
        with runstate.lock(directory, f"audit ({spend.name} budget)"):
            _check_plan(directory, {"budget": spend.name, "seed": seed, "relations": ids,
                                    "budget_settings": dataclasses.asdict(spend)})
            yield directory

    # in a process group the writer opens (and checks) its directory first; if it cannot, all
    # stop with one line instead of waiting for it
    with group.writer_first(opened, what="open its audit directory") as directory:
        return _run(spend, ids, directory, seed, progress, memory_mb, workers, log)


def _run(spend: Budget, ids: list[str], out: Path, seed: int, progress: bool, memory_mb: float,
         workers: int, log: Callable[[str], None]) -> dict[str, Any]:
    """:func:`run` holding the audit directory's lock, its plan checked. In a process group
    only the writer assesses and reports (the others' directories hold only what they ran)."""
    tasks = plan(spend, ids, seed, memory_mb)
    began = time.perf_counter()
    verdicts: dict[str, dict] = _previous_verdicts(out)

    def finished(rid: str, done: list[tuple[str, str, float]]) -> None:
        if not group.is_writer():
            return
        for kind, state, seconds in done:
            log(f"{rid} {kind:<6} {state:<7} {seconds:6.1f} s  -> {out / rid / kind}")
        search_config = next(t.config for t in tasks if t.relation == rid and t.kind == "search")
        verdicts[rid] = assess(rid, out, search_config)._asdict()
        summary = _summary(spend, seed, verdicts, time.perf_counter() - began)
        io.atomic_write(out / SUMMARY, lambda f: json.dump(summary, f, indent=1))
        log(f"{rid} verdict: {verdicts[rid]['verdict']} (worst slack "
            f"{report.format_number(verdicts[rid]['worst_slack'])})")

    per_relation = {rid: [t for t in tasks if t.relation == rid] for rid in ids}
    if workers == 1 or len(ids) == 1:
        for rid, mine in per_relation.items():
            finished(rid, _run_relation(mine, out, progress))
    else:
        _run_parallel(per_relation, out, workers, progress, finished)
    summary = _summary(spend, seed, verdicts, time.perf_counter() - began)
    if not group.is_writer():
        return summary
    report.write_audit(out, summary)
    io.atomic_write(out / SUMMARY, lambda f: json.dump(summary, f, indent=1))
    return summary


def _run_parallel(per_relation: dict[str, list[Task]], out: Path, workers: int, progress: bool,
                  finished: Callable[[str, list], None]) -> None:
    """Relations in ``workers`` spawned processes (JAX cannot fork), results as they finish."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    from tqdm.auto import tqdm

    workers = min(workers, len(per_relation))
    devices = max(1, (os.cpu_count() or 1) // workers)
    bar = tqdm(total=len(per_relation), unit="relation", disable=not progress,
               desc=f"auditing ({workers} workers)")
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_worker_setup,
                               initargs=(os.getpid(), devices, list(registry.LOADED_PLUGINS)))
    try:
        pending = {pool.submit(_relation_worker, mine, str(out)): rid
                   for rid, mine in per_relation.items()}
        while pending:
            ready, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in ready:
                rid = pending.pop(future)
                try:
                    done = future.result()
                except BrokenProcessPool:
                    raise InputError(f"an audit worker died while auditing {rid} (out of memory, "
                                     "or killed?); finished runs are kept: run the same audit "
                                     "again to resume") from None
                finished(rid, done)
                bar.update(1)
                bar.set_postfix_str(rid)
    except BaseException:
        # stop the workers too: a worker left running would keep writing its directory
        for process in (getattr(pool, "_processes", None) or {}).values():
            process.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        bar.close()
    pool.shutdown()


def _previous_verdicts(out: Path) -> dict[str, dict]:
    path = out / SUMMARY
    if not path.exists():
        return {}
    try:
        rows = io.read_json(path).get("relations", [])
        return {v["relation"]: v for v in rows}
    except (InputError, AttributeError, TypeError, KeyError):
        return {}  # damaged: every verdict is assessed again from the run directories


def _summary(spend: Budget, seed: int, verdicts: dict[str, dict], seconds: float) -> dict:
    order = list(registry.REGISTRY)
    rows = sorted(verdicts.values(), key=lambda v: order.index(v["relation"])
                  if v["relation"] in order else len(order))
    return {"budget": spend.name, "seed": seed, "seconds": seconds,
            "budget_settings": dataclasses.asdict(spend), "tight_slack": TIGHT_SLACK,
            "relations": rows, "versions": report._versions()}


# --------------------------------------------------------------------------------------------
# verdicts
# --------------------------------------------------------------------------------------------


class Verdict(NamedTuple):
    """What the audit concludes about one relation (all paths relative to the audit directory).

    Attributes:
      relation, statement, sources, condition: from the registry.
      verdict: ``"violated"``, ``"violated (certified)"``, ``"tight"``, ``"loose by ×k"`` or
        ``"undetermined (certified bracket straddles 1)"`` (no witness, and a certified bracket
        of the least slack whose lower end is below 1 and upper end above).
      worst_slack: the least slack found (verified witness, envelope, or certified curve).
      where: ``{"premise", "parameter"}`` of the worst point.
      witness: the file behind the worst slack (``None`` if it is the certified curve).
      kind: ``"certified"`` (closed-form envelope: the least slack on the certified region is
        exact), ``"certified bracket"`` (a proved upper bound on the envelope and a reached
        lower one: the least slack lies in ``slack_bracket``) or ``"lower bound"`` (the
        envelope found is a lower bound on the true one, so the least slack found is an upper
        bound on the true least slack, and nothing bounds it from below).
      certified_slack: least certified slack on the certified region (:func:`certified_region`:
        the search grid, extended towards 0, across the parameter's range), reached by a real
        mechanism, or ``None``.
      slack_bracket: ``[lower, estimate, upper]`` of the least slack, in the manner of
        prv_accountant: with a certificate, ``lower`` and ``upper`` its proved and reached ends
        over the certified region's points; ``estimate`` the verdict's ``worst_slack`` (the
        least found or certified anywhere); without a certificate ``[None, found, found]``.
      violation_count: verified violations, sweep + search.
      violations: witness files of verified violations (at most 20 listed).
      worst_log_slack: natural log of the least slack, where the runs report it (a statistical
        claim's slack can underflow float64).
      sweep_worst_slack, search_worst_slack: each run's own worst slack.
      search_max_gap: the search's largest relative shortfall from the certified value.
      seconds: sweep + search time (excluding compilation).
    """

    relation: str
    statement: str
    sources: list[str]
    condition: str
    verdict: str
    worst_slack: float | None
    where: dict[str, float | None]
    witness: str | None
    kind: str
    certified_slack: float | None
    slack_bracket: list[float | None]
    violation_count: int
    violations: list[str]
    worst_log_slack: float | None
    sweep_worst_slack: float | None
    search_worst_slack: float | None
    search_max_gap: float | None
    seconds: float


def _candidates(out: Path, rid: str, kind: str) -> tuple[dict, list[dict]]:
    """A run's summary and every (slack, premise, parameter, witness) point it reports."""
    directory = out / rid / kind
    summary = io.read_json(directory / SUMMARY)
    prefix = f"{rid}/{kind}/"
    points = [{"slack": v["slack"], "premise": v.get("premise"),
               "parameter": v.get("parameter"),
               "witness": prefix + v["file"] if v.get("file") else None, "violation": True}
              for v in summary.get("violation_details", [])]
    for row in report.read_envelope(directory):
        if np.isfinite(row["slack"]):
            points.append({"slack": row["slack"], "premise": row["premise"],
                           "parameter": row["parameter"], "x": row["x"],
                           "witness": prefix + row["witness"] if row["witness"] else None,
                           "violation": False})
    worst = summary.get("worst")  # a sweep's lowest-slack mechanism, at its own levels
    if worst and worst.get("slack") is not None and not any(
            p["violation"] and p["witness"] == prefix + str(worst.get("file")) for p in points):
        points.append({"slack": worst["slack"], "premise": worst["premise"],
                       "parameter": worst["parameter"],
                       "witness": prefix + worst["file"] if worst.get("file") else None,
                       "violation": False})
    return summary, points


def assess(rid: str, out: str | os.PathLike, search_config) -> Verdict:
    """Condense a relation's sweep and search run directories (and its certified envelope on
    the search grid) into a :class:`Verdict`; see the module docstring for the rules."""
    out = Path(out)
    relation = registry.get(rid)
    sweep_summary, points = _candidates(out, rid, "sweep")
    search_summary, more = _candidates(out, rid, "search")
    points += more
    violations = [p for p in points if p["violation"]]
    count = int(sweep_summary.get("violation_count", 0)) + \
        int(search_summary.get("violation_count", 0))
    certified = certified_lower = cert_point = None
    certified_over = False
    exact = True
    if relation.kind == "mechanism":
        premise, param = certified_region(relation, search_config)
        cert = certify.envelope(relation, premise, param, n=search_config.n,
                                r=search_config.r or None, prior=search_config.setup.prior,
                                options=search_config.options)
        if cert is not None:
            # a certified violation is judged like a witness: by more than the tolerance
            # (a ratio certificate, NaN conclusion, by its least slack)
            over = np.where(np.isnan(cert.conclusion), cert.min_slack < 1 - registry.RTOL,
                            cert.conclusion > cert.bound * (1 + registry.RTOL) + registry.ATOL)
            i = int(np.argmin(cert.min_slack))
            certified = float(cert.min_slack[i])
            certified_over = bool(np.any(over))
            certified_lower = float(np.min(cert.min_slack_lower))
            exact = bool(np.all(cert.exact))
            gridded = relation.search.gridded_parameter
            cert_point = {"slack": certified, "premise": float(premise[i]),
                          "parameter": float(param[i]) if gridded else
                          float(search_config.param), "witness": None, "violation": False}
    if violations or count:
        worst = _worst_violation(out, points)
        verdict = "violated"
    else:
        worst = min(points, key=lambda p: p["slack"]) if points else None
        if cert_point and (worst is None or cert_point["slack"] < worst["slack"] * (1 - 1e-6)):
            # the exact least slack: name the search's witness at that grid point
            worst = cert_point
            # the search's witness at that grid point, if the search ran at that parameter
            same_parameter = not relation.search.gridded_parameter or abs(
                cert_point["parameter"] - float(search_config.param)) < 1e-12
            at = [p for p in more if same_parameter and not p["violation"]
                  and p.get("x") is not None and abs(p["x"] - cert_point["premise"]) < 1e-9]
            if at:
                worst = {**cert_point, "witness": min(at, key=lambda p: p["slack"])["witness"]}
        if certified is not None and certified_over:
            verdict = "violated (certified)"
        elif certified_lower is not None and certified_lower < 1 - registry.RTOL:
            verdict = "undetermined (certified bracket straddles 1)"
        elif worst is None:
            verdict = "no data"
        elif worst["slack"] <= TIGHT_SLACK:
            verdict = "tight"
        else:
            verdict = f"loose by ×{worst['slack']:.3g}"
    return Verdict(
        relation=rid, statement=relation.statement, sources=[str(s) for s in relation.sources],
        condition=relation.condition, verdict=verdict,
        worst_slack=None if worst is None else _finite(worst["slack"]),
        where={} if worst is None else {"premise": _finite(worst["premise"]),
                                        "parameter": _finite(worst["parameter"])},
        witness=None if worst is None else worst["witness"],
        kind=("lower bound" if certified is None else "certified" if exact
              else "certified bracket"),
        certified_slack=certified,
        slack_bracket=_bracket(certified_lower, worst, certified),
        violation_count=count,
        violations=[p["witness"] for p in sorted(violations, key=lambda p: p["slack"])
                    if p["witness"]][:20],
        worst_log_slack=_least(s.get("worst_log_slack") for s in (sweep_summary, search_summary)),
        sweep_worst_slack=sweep_summary.get("worst_slack"),
        search_worst_slack=search_summary.get("worst_slack"),
        search_max_gap=search_summary.get("max_gap"),
        seconds=float(sweep_summary.get("seconds", 0.0)) + float(search_summary.get("seconds",
                                                                                    0.0)))


CERTIFIED_TOWARDS_ZERO = 6
"""Decades below the search grid's least premise level the certified region reaches."""
CERTIFIED_PARAMETERS = 25
"""Condition-parameter points of the certified region (besides 0 and the search's own)."""


def certified_region(relation, search_config) -> tuple[np.ndarray, np.ndarray]:
    """Where the audit evaluates a relation's certified envelope: ``(premise, parameter)``
    arrays (flattened grid). The premise levels are the search grid and, towards 0, one point
    per decade for :data:`CERTIFIED_TOWARDS_ZERO` decades (a least slack can be an infimum
    approached as the level goes to 0); for a relation claimed at a gridded parameter, every
    premise level is paired with 0, the search's parameter and a geometric grid up to the
    largest parameter the sweep draws (its ``param_max``), so the least slack is over the
    audited region of ``(x, ε)``, not one ε."""
    grid = np.asarray(search_config.grid, np.float64)
    low = float(grid.min())
    premise = np.unique(np.concatenate(
        [grid, low * 10.0 ** -np.arange(1, CERTIFIED_TOWARDS_ZERO + 1)]))
    if not relation.search.gridded_parameter:
        return premise, np.full_like(premise, float(search_config.param))
    top = max(float(search_config.param), float(relation.sampling.param_max or 0.0))
    params = np.unique(np.concatenate([[0.0, float(search_config.param)], np.geomspace(
        top * 1e-6, top, CERTIFIED_PARAMETERS) if top > 0 else []]))
    x, eps = np.meshgrid(premise, params, indexing="ij")
    return x.ravel(), eps.ravel()


def _bracket(certified_lower, worst, certified) -> list[float | None]:
    """``[lower, estimate, upper]`` of the least slack (see :class:`Verdict`): with a
    certificate, its two ends on the certified region's points (``lower ≤ upper`` there; a
    mechanism found off those points may sit lower, and is the estimate); without one, only
    what was found (``None`` below)."""
    estimate = None if worst is None else _finite(worst["slack"])
    if certified is None:
        return [None, estimate, estimate]
    return [_finite(certified_lower), estimate, _finite(certified)]


def _worst_violation(out: Path, points: list[dict]) -> dict | None:
    """The lowest-slack point that is a verified violation: a listed one, or an envelope point
    below 1 whose witness file re-checks as violated (the engines save only the first
    violations as files, so the worst one may be an envelope point)."""
    for point in sorted(points, key=lambda p: p["slack"]):
        if point["violation"]:
            return point
        if point["slack"] < 1 and point["witness"] and bool(
                certify.check_witness(out / point["witness"]).violated):
            return {**point, "violation": True}
    return None


def _least(values) -> float | None:
    finite = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    return min(finite) if finite else None


def _finite(v) -> float | None:
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None
