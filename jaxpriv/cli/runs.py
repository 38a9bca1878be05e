"""The long-running commands of the ``jaxpriv`` command line: ``sweep`` and ``search`` (one
relation or several, each into its run directory, resumable, in a process group if asked) and
``audit`` (every relation: sweep, search, certify, report), and what they share: the relations
selected, the run directories, ``--out`` locked, the records layout and the premise grid. JAX
is started for them by :mod:`jaxpriv.cli.jaxsetup`."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from jaxpriv.cli.jaxsetup import _start_jax
from jaxpriv.core.errors import InputError


# -- sweep and search --------------------------------------------------------------------------


def _sweep(args) -> int:
    from jaxpriv import registry
    from jaxpriv.engines import sweep

    # before JAX starts: a process of a group refuses on its own (after, the others waited for
    # it and ended in a traceback)
    ids = _relation_ids(args.relation)
    _unused_options(args, ids, "sweep")
    _start_jax(args.cpu_devices, args)
    if args.bins < 1:
        raise InputError(f"--bins must be >= 1, got {args.bins}")
    configs = []
    for rid in ids:
        try:
            layout = _records_layout(args) if registry.get(rid).needs_records else {}
            configs.append(sweep.make_config(rid, args.n, args.m, args.count, args.seed,
                                             args.chunk, args.memory_mb, x_bins=args.bins,
                                             t_max=args.t_max, draws=args.draws, **layout))
        except InputError as error:
            if len(ids) == 1:
                raise
            print(f"{rid}: skipped ({error})", file=sys.stderr)
    if not configs:
        raise InputError(f"--relation {args.relation}: no relation could be swept with these "
                         "settings (see the lines above)")
    with _locked_out(args, "sweep"):
        return _sweep_runs(args, configs)


def _sweep_runs(args, configs) -> int:
    from jaxpriv import registry, report
    from jaxpriv.engines import sweep

    worst_code = 0
    for config, run_dir, resume in _runs(args, configs):
        result = sweep.run(config, run_dir, resume=resume, progress=not args.quiet,
                           write=report.write_sweep)
        summary = json.loads((run_dir / "summary.json").read_text())
        worst = summary["worst_slack"]
        subjects = "mechanisms" if registry.get(config.relation).kind == "mechanism" \
            else "settings"
        print(f"{config.relation}: {config.count:,} {subjects} in {result.seconds:.1f} s "
              f"({summary['mechanisms_per_second']:,.0f}/s); worst slack "
              f"{'n/a' if worst is None else f'{worst:.6g}'}; "
              f"verified violations {result.violation_count} -> {run_dir}")
        if summary.get("nan_count"):
            print(f"{config.relation}: {summary['nan_count']:,} {subjects} had a NaN level or "
                  "bound (not counted as holding; see summary.json 'nan_count')",
                  file=sys.stderr)
        worst_code = max(worst_code, 1 if result.violation_count else 0)
    return worst_code


def _search(args) -> int:
    from jaxpriv import registry
    from jaxpriv.engines import runstate, search

    ids = _relation_ids(args.relation)
    _unused_options(args, ids, "search")  # before JAX starts (see _sweep)
    _start_jax(args.cpu_devices, args)
    if args.grid is not None and not args.grid.strip():
        raise InputError("--grid is empty: give 'low:high:count' or '0.1,0.5,1' (or leave it "
                         "out for 0.05:3:60)")
    grid = search.parse_grid(args.grid or "0.05:3:60")
    configs = []
    for rid in ids:
        relation = registry.get(rid)
        try:
            layout = _records_layout(args) if relation.needs_records else {}
            points = _grid_for(relation, grid, args.grid is not None, len(ids) == 1)
            gridded = relation.kind == "mechanism" and relation.search.gridded_parameter
            param = args.param if args.param is not None else (0.5 if gridded else 0.0)
            if not gridded and len(ids) > 1:
                param = 0.0
            configs.append(search.make_config(rid, args.n, args.m, points, param=param,
                                              law=args.law, prior=args.prior,
                                              restarts=args.restarts,
                                              steps=args.steps, learning_rate=args.lr,
                                              seed=args.seed, t_max=args.t_max, **layout))
        except InputError as error:
            if len(ids) == 1:
                raise
            print(f"{rid}: skipped ({error})", file=sys.stderr)
    if not configs:
        raise InputError(f"--relation {args.relation}: no relation could be searched with these "
                         "settings (see the lines above)")
    if args.sweep is not None:
        sweeps = [Path(args.sweep) / c.relation for c in configs] if len(configs) > 1 \
            else [Path(args.sweep)]
        for directory, config in zip(sweeps, configs):
            if not (directory / "envelope.csv").is_file():
                raise InputError(f"--sweep {args.sweep}: {directory} is not a finished sweep "
                                 "run directory (no envelope.csv)")
            swept = runstate.summary_text(directory, "relation")
            if swept not in (None, config.relation):
                raise InputError(f"--sweep {args.sweep}: {directory} is a sweep of {swept}, "
                                 f"not of {config.relation}")
    with _locked_out(args, "search"):
        return _search_runs(args, configs)


def _search_runs(args, configs) -> int:
    from jaxpriv import report
    from jaxpriv.engines import search

    code = 0
    for config, run_dir, resume in _runs(args, configs):
        sweep_dir = None
        if args.sweep:
            sweep_dir = Path(args.sweep) / config.relation if len(configs) > 1 else Path(args.sweep)
        result = search.run(config, run_dir, resume=resume, progress=not args.quiet,
                            write=report.search_writer(sweep_dir))
        summary = json.loads((run_dir / "summary.json").read_text())
        worst = summary["worst_slack"]
        worst_text = 'n/a' if worst is None else f'{worst:.6g}'
        if summary.get("worst_log_slack") is not None:
            worst_text += f" (log {summary['worst_log_slack']:.6g})"
        gap = summary.get("max_gap")
        rate = summary.get("restart_steps_per_second")
        restarts = f" × {config.restarts} restarts, {result.steps} steps" \
            if hasattr(result, "steps") else ""
        speed = f" ({rate:,.0f} restart-steps/s)" if rate else ""
        print(f"{config.relation}: {len(config.grid)} grid points{restarts} searched in "
              f"{result.seconds:.1f} s{speed}; worst slack {worst_text}"
              f"{'' if gap is None else f'; max gap to certified {gap:.2%}'}; "
              f"verified violations {len(result.violations)} -> {run_dir}")
        code = max(code, 1 if result.violations else 0)
    return code


def _locked_out(args, what: str):
    """``--out`` checked (a writable directory) before any work, and locked for the command."""
    from jaxpriv.engines import group, runstate

    # in a process group the writer opens its --out first; if it cannot, all stop (one line)
    return group.writer_first(lambda: runstate.lock(runstate.writable_directory(args.out),
                                                    f"{what} --relation {args.relation}"),
                              what=f"open --out for the {what}")


def _grid_for(relation, grid, given: bool, alone: bool):
    """The premise grid to search ``relation`` on: where it is claimed (a relation with its own
    grid uses it unless one is given; with several relations each grid is clipped to its claim,
    with one a grid reaching past the claim is an error)."""
    from jaxpriv.engines import search

    if relation.kind == "mechanism":
        return grid if alone else search.clip_grid(relation, grid)
    if not given and relation.fixed_grid:
        return None
    if relation.x_range is None:
        return grid
    low, high = relation.x_range
    inside = tuple(x for x in grid if low < x < high)
    if alone and len(inside) < len(grid):
        raise InputError(f"{relation.id} is claimed for {low:g} < ε < {high:g}; the grid "
                         f"reaches {max(grid)}")
    return inside or None


# -- audit -------------------------------------------------------------------------------------


def _audit(args) -> int:
    from jaxpriv import audit, report
    from jaxpriv.engines import checks, group, runstate

    _start_jax(args.cpu_devices, args)
    spend = audit.budget(args.budget)
    if args.memory_mb <= 0:
        raise InputError(f"--memory-mb must be positive, got {args.memory_mb}")
    checks.seed(args.seed)
    if args.workers is not None and args.workers < 1:  # before the banner and --out
        raise InputError(f"--workers must be a positive integer, got {args.workers}")
    ids = audit.relation_ids(args.relations, spend)
    runstate.writable_directory(args.out)
    print(f"jaxpriv audit: budget {spend.name}, {len(ids)} "
          f"relation{'' if len(ids) == 1 else 's'} -> {args.out}")
    workers = audit.default_workers() if args.workers is None else args.workers
    if group.size() > 1:
        workers = 1  # a group runs one relation at a time, all processes together
    summary = report.run_audit(spend, ids, args.out, seed=args.seed, progress=not args.quiet,
                               memory_mb=args.memory_mb, workers=workers)
    width = max([4] + [len(v["relation"]) for v in summary["relations"]])
    kinds = {v["relation"]: report.kind_text(v) for v in summary["relations"]}
    column = max([12] + [len(k) for k in kinds.values()])
    said = max([7] + [len(v["verdict"]) for v in summary["relations"]])
    grids = {v["relation"]: report.grid_text(v) for v in summary["relations"]}
    wide = max([18] + [len(g) for g in grids.values()])
    print(f"\n{'id':<{width}} {'verdict':<{said}} {'worst slack':>12}  "
          f"{'on the premise grid':<{wide}}  {'envelope':<{column}} witness")
    for v in summary["relations"]:
        slack = "n/a" if v["worst_slack"] is None else f"{v['worst_slack']:.4g}"
        print(f"{v['relation']:<{width}} {v['verdict']:<{said}} {slack:>12}  "
              f"{grids[v['relation']]:<{wide}}  {kinds[v['relation']]:<{column}} "
              f"{v['witness'] or ''}")
    print(f"report: {args.out}/report.md, {args.out}/report.html "
          f"({summary['seconds']:.0f} s)")
    if len(summary["relations"]) > len(ids):
        print(f"(the report covers every relation audited in {args.out}: "
              f"{len(summary['relations'])}, {len(ids)} of them asked for now)")
    return 0


# -- what sweep and search share ---------------------------------------------------------------


def _relation_ids(text: str) -> list[str]:
    """``all`` (every registered relation), one relation id, or ids and prefixes ending in
    ``*`` (``'R1*'``)."""
    from jaxpriv import registry

    return registry.select(text)


def _runs(args, configs):
    """``(config, run directory, resume?)`` per run: one sub-directory per relation when there
    are several; with ``--resume``, a relation the killed run never reached starts afresh (and
    a finished run without a checkpoint, a statistical search, is not run again)."""
    from jaxpriv.engines import group, io
    from jaxpriv.audit import checkpoint_file

    out = Path(args.out)
    for config in configs:
        run_dir = out / config.relation if len(configs) > 1 else out
        checkpoint = checkpoint_file(config)
        # what is on disk is the writer's to say, in a process group (jaxpriv.engines.group)
        if checkpoint is None:
            if not group.agree(args.resume and (run_dir / "summary.json").exists()):
                yield config, run_dir, False
            continue
        resume = args.resume and bool(group.agree(len(configs) == 1 or
                                                  io.has_checkpoint(run_dir / checkpoint)))
        yield config, run_dir, resume


def _records_layout(args) -> dict[str, int]:
    """``k`` and ``r`` for database-level relations: ``--r``, else ``n = k^r`` read off ``--n``."""
    k = args.k
    if k < 2:
        raise InputError(f"--k must be >= 2, got {k}")
    if args.r is not None:
        if args.r < 1:
            raise InputError(f"--r must be >= 1, got {args.r}")
        return {"k": k, "r": args.r}
    r = round(math.log(args.n, k)) if args.n >= 2 else 0
    if r < 1 or k**r != args.n:
        raise InputError(f"n = {args.n} is not a power of k = {k}: give --r (and --k) for "
                         "the database-level relations")
    return {"k": k, "r": r}


# what each option of sweep and search sets, in words (the setting:
# jaxpriv.engines.io.OPTION_SETTINGS)
_OPTIONS = {"n": "a number of secrets", "m": "a number of outputs", "count": "a count",
            "seed": "a seed", "chunk": "a chunk size", "memory_mb": "a memory budget",
            "bins": "premise bins", "grid": "a premise grid", "param": "a condition parameter",
            "restarts": "a number of restarts", "steps": "a number of optimizer steps",
            "lr": "a step size",
            "k": "a records layout (relations between database-level notions)",
            "r": "a records layout (relations between database-level notions)",
            "t_max": "a largest sample count (claims about an estimator)",
            "draws": "Monte Carlo draws (claims about an estimator)",
            "law": "an ABP observation law (relations whose notions take one)"}
_MECHANISM_READS = {"sweep": {"n", "m", "count", "seed", "chunk", "memory_mb", "bins"},
                    "search": {"n", "m", "grid", "restarts", "steps", "lr", "seed"}}
_SETTINGS_READS = {"sweep": {"count", "seed", "chunk", "bins"}, "search": {"grid"}}


def _reads(rel, engine: str, args) -> set[str]:
    """The options of ``engine`` a run of ``rel`` reads: a mechanism's the usual ones (``--k``,
    ``--r`` for a records layout, ``--n`` then only to infer ``r``; ``--law`` where a notion
    takes one; ``--param`` where the search grids it), a claim about an estimator's those its
    strategies declare (:class:`jaxpriv.registry.Strategies` ``reads``)."""
    from jaxpriv.engines import io, subject

    if subject.engine_for(rel, engine) == subject.SETTINGS:
        if rel.strategies.reads is None:  # not declared (a plugin's): refuse nothing
            return set(_OPTIONS) - {"param", "k", "r", "law"}
        fields = set(rel.strategies.reads.get(engine, ()))
        return set(_SETTINGS_READS[engine]) | {option for option in _OPTIONS
                                               if io.OPTION_SETTINGS[option] in fields}
    reads = set(_MECHANISM_READS[engine])
    if rel.needs_records:
        reads |= {"k", "r"}
        if args.r is not None and getattr(args, "n", None) != args.k ** args.r:
            reads.discard("n")  # (an --n that is k^r says the same)
    if engine == "search":
        if "law" in (getattr(rel, "notion_params", None) or ()):
            reads.add("law")
        if rel.search is not None and rel.search.gridded_parameter:
            reads.add("param")
    return reads


def _unused_options(args, ids: list[str], engine: str) -> None:
    """An option that none of the selected relations reads is one error line, not dropped in
    silence (``--restarts`` for R14, whose search reads only its grid and ``--t-max``; ``--k``
    for R2; ``--n`` beside ``--r``, which sets ``n = k^r``)."""
    from jaxpriv import registry
    from jaxpriv.engines import subject

    relations = [registry.get(rid) for rid in ids]
    given = getattr(args, "given", frozenset())
    for name, what in _OPTIONS.items():
        if name not in given or any(name in _reads(rel, engine, args) for rel in relations):
            continue
        if name == "param" and any(subject.engine_for(rel, engine) != subject.SETTINGS
                                   for rel in relations):
            continue  # the search's own check says it, with the relation's condition
        flag = "--" + name.replace("_", "-")
        if name == "n" and any(rel.needs_records for rel in relations):
            raise InputError(f"--n with --r: n is k^r = {args.k ** args.r} for "
                             f"{', '.join(r.id for r in relations if r.needs_records)}; leave "
                             "--n out (or give --k and --n, without --r)")
        which = (f"{relations[0].id} takes none" if len(relations) == 1
                 else f"none of {args.relation} takes one")
        raise InputError(f"{flag} sets {what}, and {which}: leave {flag} out")
