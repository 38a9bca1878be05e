"""Running an audit: every planned sweep and search run into its directory (one relation at a
time, or several in worker processes), resumed where a killed audit left off, each relation
assessed as it finishes (:mod:`jaxpriv.audit.verdict`) and the audit's ``summary.json``
rewritten after every relation.

The files are written by the layer above, passed in as :class:`Outputs` (the report's writers:
:func:`jaxpriv.report.run_audit` is :func:`run` with them): the audit itself draws nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

from jaxpriv import registry
from jaxpriv.audit.plans import (PLAN, PLAN_VERSION, SUMMARY, Budget, Task, checkpoint_file, plan,
                                  run_dir)
from jaxpriv.audit import schedule
from jaxpriv.audit.verdict import TIGHT_SLACK, assess, format_number
from jaxpriv.engines import checks, group, io, runstate
from jaxpriv.core.errors import InputError


class Outputs(NamedTuple):
    """The writers an audit writes its files with, passed in by the layer above (the report's:
    :data:`jaxpriv.report.AUDIT_OUTPUTS`). Top-level functions, so that they reach the worker
    processes of a parallel audit.

    Attributes:
      sweep: a finished sweep's writer, ``sweep(run_dir, result, relation) -> summary``: the
        ``write`` of :func:`jaxpriv.engines.sweep.run`.
      search: a finished search's writer, ``search(run_dir, result, relation, sweep_dir) ->
        summary``, given the relation's sweep directory (whose envelope its figure shows).
      report: the audit's report, ``report(out, summary)``, written once every relation is
        assessed.
      relation: a finished relation's figures, ``relation(out, relation_id)``, drawn where it
        ran (a worker process of a parallel audit) as soon as its runs are done; ``None``:
        the report draws them.
      ready: called once in each worker process of a parallel audit as it starts, while the
        audit plans (the report's: import the plotting library); ``None``: nothing.
    """

    sweep: Callable[..., dict]
    search: Callable[..., dict]
    report: Callable[[Path, dict], None]
    relation: Callable[[Path, str], None] | None = None
    ready: Callable[[], None] | None = None


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


def run_task(task: Task, out: Path, progress: bool = True, outputs: Outputs | None = None
             ) -> str:
    """Run one sweep or search into its directory unless it is already finished; a checkpoint
    left by a killed run is resumed. Returns ``"done"``, ``"resumed"`` or ``"ran"``.

    ``outputs`` writes the finished run's files (``summary.json``, ``envelope.csv``, ...);
    without it only the engine's own files are written (checkpoint, witnesses), as
    :func:`jaxpriv.engines.sweep.run` without ``write``, and the run never reads as finished."""
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
                      write=None if outputs is None else outputs.sweep)
        else:
            search.run(task.config, directory, resume=resume, progress=progress,
                       write=None if outputs is None else _search_write(
                           outputs, run_dir(out, task._replace(kind="sweep"))))
    return "resumed" if resume else "ran"


def _search_write(outputs: Outputs, sweep_dir: Path) -> Callable[..., dict]:
    """``outputs.search`` with the relation's sweep directory, as a search's ``write``."""
    def write(out_dir: Path, result, relation) -> dict:
        return outputs.search(out_dir, result, relation, sweep_dir)
    return write


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
        if saved.get("plan", 1) != record.get("plan", 1):
            raise InputError(f"{out} holds an audit planned by another jaxpriv (plan "
                             f"{saved.get('plan', 1)}, this one's {record.get('plan', 1)}: its "
                             "searches' levels differ); use a new --out")
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


def _build_native_ahead() -> None:
    """On a CPU, the native kernel's build started in the background
    (:func:`jaxpriv.kernels.native.builder.build_ahead`) while the audit plans and starts its
    workers: with empty caches the first relations (each worker's, or a serial audit's)
    otherwise waited ~8 s for it."""
    import jax

    from jaxpriv.kernels.native import builder

    if jax.default_backend() == "cpu":
        builder.build_ahead()


def _run_relation(tasks: list[Task], out: Path, progress: bool, outputs: Outputs | None = None
                  ) -> list[tuple[str, str, float]]:
    """Run one relation's tasks in order: ``(kind, state, seconds)`` per task."""
    done = []
    for task in tasks:
        began = time.perf_counter()
        state = run_task(task, out, progress, outputs)
        done.append((task.kind, state, time.perf_counter() - began))
    if tasks and outputs is not None and outputs.relation is not None and group.is_writer():
        outputs.relation(out, tasks[0].relation)
    return done


def _relation_worker(jobs: list[list[Task]], out: str, outputs: Outputs | None = None
                     ) -> list[list[tuple[str, str, float]]]:
    """:func:`_run_relation` of each relation's tasks in ``jobs`` (the instances of one claim,
    which share their compiled programs, or one relation) in a worker process (set up by
    :func:`_worker_setup`); a plugin's own exception comes back as the one-line error it would
    be in the parent."""
    try:
        return [_run_relation(tasks, Path(out), progress=False, outputs=outputs)
                for tasks in jobs]
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


def _worker_setup(parent: int, devices: int, plugins: list[str],
                  ready: Callable[[], None] | None = None) -> None:
    """Every worker process, once: ``devices`` CPU devices, the parent's plugins, a longer wait
    for run-directory locks, a watchdog that ends the worker at once when the audit that
    started it is gone (``kill -9`` included), so no orphan keeps writing its directory, and
    the engines imported (and ``ready`` called: :attr:`Outputs.ready`) while the audit plans."""
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
    from jaxpriv.engines import search, sweep  # noqa: F401 - imported before the first job

    if ready is not None:
        ready()


def _started() -> None:
    """A job that does nothing: submitted once per worker, it starts the worker processes of a
    parallel audit (a pool starts them as jobs arrive) before the audit has planned."""


def run(spend: Budget, ids: list[str], out: str | os.PathLike, seed: int = 0,
        progress: bool = True, memory_mb: float = 1024.0, workers: int = 1,
        log: Callable[[str], None] = print, *, outputs: Outputs) -> dict[str, Any]:
    """Audit ``ids`` at budget ``spend`` into ``out``; returns the audit summary (also written to
    ``out/summary.json``, and the report by ``outputs.report``: with the report's writers,
    :func:`jaxpriv.report.run_audit`, to ``out/report.md``, ``out/report.html``).

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
      outputs: the writers of the runs' files and of the report (:class:`Outputs`).

    Returns:
      ``{"budget", "seed", "seconds", "relations": [verdict dicts]}``.
    """
    if int(workers) != workers or workers < 1:
        raise InputError(f"--workers must be a positive integer, got {workers}")
    checks.seed(seed)

    @contextlib.contextmanager
    def opened():
        directory = runstate.writable_directory(out)
        with runstate.lock(directory, f"audit ({spend.name} budget)"):
            _check_plan(directory, {"budget": spend.name, "seed": seed, "relations": ids,
                                    "budget_settings": dataclasses.asdict(spend),
                                    "plan": PLAN_VERSION})
            yield directory

    # in a process group the writer opens (and checks) its directory first; if it cannot, all
    # stop with one line instead of waiting for it
    with group.writer_first(opened, what="open its audit directory") as directory:
        return _run(spend, ids, directory, seed, progress, memory_mb, workers, log, outputs)


def _run(spend: Budget, ids: list[str], out: Path, seed: int, progress: bool, memory_mb: float,
         workers: int, log: Callable[[str], None], outputs: Outputs) -> dict[str, Any]:
    """:func:`run` holding the audit directory's lock, its plan checked. In a process group
    only the writer assesses and reports (the others' directories hold only what they ran)."""
    _build_native_ahead()
    parallel = workers > 1 and len(ids) > 1
    # the workers start (import JAX, the engines, the plotting library) while the audit plans
    pool = _Pool.start(schedule.longest_first(schedule.jobs(ids), spend.name), workers,
                       outputs.ready) if parallel else None
    try:
        return _run_planned(spend, ids, out, seed, progress, memory_mb, pool, log, outputs)
    except BaseException:
        if pool is not None:
            pool.stop()  # a worker left running would keep writing its directory
        raise


def _run_planned(spend: Budget, ids: list[str], out: Path, seed: int, progress: bool,
                 memory_mb: float, pool: "_Pool | None", log: Callable[[str], None],
                 outputs: Outputs) -> dict[str, Any]:
    """:func:`_run` with its workers started (``pool``; ``None``: one relation at a time)."""
    tasks = plan(spend, ids, seed, memory_mb)
    began = time.perf_counter()
    verdicts: dict[str, dict] = _previous_verdicts(out)
    kernels: dict[str, list[str]] = {}  # each relation's runs' kernel states, read once

    took: dict[str, float] = {}

    def finished(rid: str, done: list[tuple[str, str, float]]) -> None:
        if not group.is_writer():
            return
        if done and all(state == "ran" for _, state, _ in done):
            took[rid] = sum(seconds for _, _, seconds in done)
        for kind, state, seconds in done:
            log(f"{rid} {kind:<6} {state:<7} {seconds:6.1f} s  -> {out / rid / kind}")
        search = next(t for t in tasks if t.relation == rid and t.kind == "search")
        verdicts[rid] = assess(rid, out, search.config, search.grid_top)._asdict()
        summary = _summary(spend, seed, verdicts, time.perf_counter() - began, out, kernels)
        io.atomic_write(out / SUMMARY, lambda f: json.dump(summary, f, indent=1))
        log(f"{rid} verdict: {verdicts[rid]['verdict']} (worst slack "
            f"{format_number(verdicts[rid]['worst_slack'])})")

    per_relation = {rid: [t for t in tasks if t.relation == rid] for rid in ids}
    if pool is None:
        for rid, mine in per_relation.items():
            finished(rid, _run_relation(mine, out, progress, outputs))
    else:
        _run_parallel(pool, per_relation, out, progress, finished, outputs)
    summary = _summary(spend, seed, verdicts, time.perf_counter() - began, out, kernels)
    if not group.is_writer():
        return summary
    schedule.remember_seconds(spend.name, took)
    outputs.report(out, summary)
    io.atomic_write(out / SUMMARY, lambda f: json.dump(summary, f, indent=1))
    return summary


class _Pool(NamedTuple):
    """A parallel audit's worker processes and the jobs they take
    (:func:`jaxpriv.audit.schedule.jobs`)."""

    executor: Any
    jobs: list[list[str]]
    workers: int

    @classmethod
    def start(cls, jobs: list[list[str]], workers: int, ready: Callable[[], None] | None = None
              ) -> "_Pool":
        """``min(workers, len(jobs))`` spawned processes (JAX cannot fork), started now."""
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        workers = min(workers, len(jobs))
        devices = max(1, (os.cpu_count() or 1) // workers)
        executor = ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_setup,
            initargs=(os.getpid(), devices, list(registry.LOADED_PLUGINS), ready))
        for _ in range(workers):  # a pool starts a process per job submitted while none is idle
            executor.submit(_started)
        return cls(executor, jobs, workers)

    def stop(self) -> None:
        """Ends the workers at once (a worker left running would keep writing its directory)."""
        for process in (getattr(self.executor, "_processes", None) or {}).values():
            process.terminate()
        self.executor.shutdown(wait=False, cancel_futures=True)


def _run_parallel(pool: _Pool, per_relation: dict[str, list[Task]], out: Path, progress: bool,
                  finished: Callable[[str, list], None], outputs: Outputs) -> None:
    """Relations in the ``pool``'s processes, results as they finish."""
    from concurrent.futures import FIRST_COMPLETED, wait
    from concurrent.futures.process import BrokenProcessPool

    from tqdm.auto import tqdm

    bar = tqdm(total=len(per_relation), unit="relation", disable=not progress,
               desc=f"auditing ({pool.workers} workers)")
    try:
        try:
            pending = {pool.executor.submit(_relation_worker, [per_relation[rid] for rid in job],
                                            str(out), outputs): job for job in pool.jobs}
        except BrokenProcessPool:  # a worker died as it started (out of memory?)
            raise InputError("an audit worker died as it started (out of memory, or killed?); "
                             "run the same audit again") from None
        while pending:
            ready, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in ready:
                job = pending.pop(future)
                try:
                    results = future.result()
                except BrokenProcessPool:
                    raise InputError(f"an audit worker died while auditing {', '.join(job)} (out "
                                     "of memory, or killed?); finished runs are kept: run the "
                                     "same audit again to resume") from None
                for rid, done in zip(job, results):
                    finished(rid, done)
                    bar.update(1)
                    bar.set_postfix_str(rid)
    finally:
        bar.close()
    pool.executor.shutdown()


def _previous_verdicts(out: Path) -> dict[str, dict]:
    path = out / SUMMARY
    if not path.exists():
        return {}
    try:
        rows = io.read_json(path).get("relations", [])
        return {v["relation"]: v for v in rows}
    except (InputError, AttributeError, TypeError, KeyError):
        return {}  # damaged: every verdict is assessed again from the run directories


def _summary(spend: Budget, seed: int, verdicts: dict[str, dict], seconds: float,
             out: Path, kernels: dict[str, list[str]] | None = None) -> dict:
    order = list(registry.REGISTRY)
    rows = sorted(verdicts.values(), key=lambda v: order.index(v["relation"])
                  if v["relation"] in order else len(order))
    versions = io.versions()
    versions["native_kernel"] = _kernel_state(out, rows, versions["native_kernel"], kernels)
    return {"budget": spend.name, "seed": seed, "seconds": seconds,
            "budget_settings": dataclasses.asdict(spend), "tight_slack": TIGHT_SLACK,
            "relations": rows, "versions": versions}


def _kernel_state(out: Path, rows: list[dict], here: str,
                  seen: dict[str, list[str]] | None = None) -> str:
    """The native kernel's state as the relations' runs record it (each run directory's
    ``summary.json``, read once per relation into ``seen``), else this process's: a resumed
    audit whose runs were all done read "not used" though they had run on the kernel (and
    workers run them in other processes)."""
    seen = {} if seen is None else seen
    recorded = []
    for row in rows:
        rid = row["relation"]
        if rid not in seen:
            seen[rid] = []
            for kind in ("sweep", "search"):
                try:
                    state = io.read_json(out / rid / kind / "summary.json").get(
                        "versions", {}).get("native_kernel")
                except (InputError, AttributeError, OSError):
                    continue
                if isinstance(state, str):
                    seen[rid].append(state)
        recorded += seen[rid]
    used = [s for s in recorded if s != "not used"]
    if not used:
        return here
    return used[0] if len(set(used)) == 1 else "; ".join(sorted(set(used)))
