"""The ``jaxpriv`` command line.

    jaxpriv eval FILE.json [--json]           every registered notion's level on a mechanism
    jaxpriv check RELATION FILE.json [--json] check one registered relation on a mechanism
    jaxpriv relations [--json]                the registered relations
    jaxpriv notions [--json]                  the registered notions
    jaxpriv sweep --relation R5 ...           random sweep of a relation (see --help)
    jaxpriv search --relation R5 ...          adversarial tightness search (see --help)
    jaxpriv audit [--budget quick] [--out DIR] every relation: sweep, search, certify, report
    jaxpriv show WITNESS.json                 a witness's levels, and its relation re-checked

Every command takes ``--plugin FILE.py`` (repeatable): a file that registers notions and
relations (:mod:`jaxpriv.registry`); installed ``jaxpriv.plugins`` entry points load too.

Exit status: 0 success (for ``check``: the bound holds or its condition does not apply),
1 ``check``, ``show``, ``sweep`` or ``search`` found the bound violated (verified in float64),
2 anything a user can cause — bad input, an unwritable or full disk, a damaged checkpoint, a
locked run directory, a broken plugin (one line on stderr naming it, never a traceback),
3 a bug in jaxpriv (a traceback, and a line asking to report it), 130 interrupted.
Everything is computed in float64.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from jaxpriv.core.errors import InputError


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit status 2."""

    def error(self, message: str):  # noqa: D401 - argparse API
        self.exit(2, f"jaxpriv: error: {message} (see 'jaxpriv --help')\n")


def _finite(text: str) -> float:
    """argparse type: a finite number."""
    value = _not_nan(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def _not_nan(text: str) -> float:
    """argparse type: a number (±inf allowed, NaN not)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if math.isnan(value):
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="jaxpriv", description="Exact privacy notions of finite mechanisms "
                     "and audits of the published relations between them (levels in nats).")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    plugins = argparse.ArgumentParser(add_help=False)
    plugins.add_argument("--plugin", action="append", default=[], metavar="FILE.py",
                         help="load a plugin file that registers notions and relations "
                              "(repeatable; installed 'jaxpriv.plugins' entry points load too)")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    _add = sub.add_parser

    def add_parser(name, **kwargs):
        return _add(name, parents=[plugins], **kwargs)

    sub.add_parser = add_parser

    p = sub.add_parser("eval", help="every registered notion's level on the mechanism in a JSON "
                       "file (at default parameters; the file's values where a notion has no "
                       "default, e.g. 'mu', 'alpha', 'd_true')")
    p.add_argument("file", help="mechanism JSON (SPEC §4): {\"K\": [[...]], \"prior\": [...], ...}")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    p = sub.add_parser("check", help="check one relation (R1, R2, ... or a plugin's) on a "
                       "mechanism")
    p.add_argument("relation", help="relation id, see 'jaxpriv relations'")
    p.add_argument("file", help="mechanism or witness JSON")
    p.add_argument("--parameter", type=_not_nan, default=None,
                   help="condition parameter the bound is claimed at (ε for R3-R5, β for R6); "
                        "default: the file's 'eps'/'beta', else the measured value")
    p.add_argument("--law", default=None, help="ABP observation law: record (default) or output")
    p.add_argument("--mu", type=_finite, default=None, help="PAC statistic μ (R6)")
    p.add_argument("--alpha", type=_finite, default=None, help="PAC accuracy α (R6)")
    p.add_argument("--d-true", type=int, default=None, help="the true secret (R6)")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    p = sub.add_parser("sweep", help="evaluate a relation over many random mechanisms")
    p.add_argument("--relation", required=True, help="relation id, or 'all'")
    p.add_argument("--n", type=int, default=8, help="secrets (default 8)")
    p.add_argument("--m", type=int, default=8, help="outputs (default 8)")
    p.add_argument("--count", type=int, default=1_000_000, help="mechanisms per relation")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--chunk", type=int, default=None,
                   help="mechanisms per step, the unit of checkpoints (default: 2^25 entries "
                   "of K, at most 2^20 mechanisms: 524,288 at n = m = 8)")
    p.add_argument("--memory-mb", type=_finite, default=1024.0,
                   help="device memory budget that sets the block size, what is live at "
                   "once (default 1024)")
    p.add_argument("--bins", type=int, default=40, help="premise bins (default 40)")
    p.add_argument("--k", type=int, default=2,
                   help="values per record, for relations between database-level notions "
                        "(R7-R13; default 2)")
    p.add_argument("--r", type=int, default=None,
                   help="records per database (n = k^r); default: from --n when n is a power "
                        "of k")
    p.add_argument("--t-max", type=int, default=10_000,
                   help="R14: largest sample count T drawn (default 10000)")
    p.add_argument("--draws", type=int, default=2000,
                   help="R14: Monte Carlo draws per checked setting (default 2000)")
    p.add_argument("--out", required=True, help="run directory (one sub-directory per "
                   "relation with --relation all)")
    p.add_argument("--resume", action="store_true", help="continue a killed run in --out")
    p.add_argument("--cpu-devices", type=int, default=None,
                   help="on a CPU, split it into this many JAX devices so every core works "
                        "(default: the number of cores; results do not depend on it)")
    _group_flags(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")

    p = sub.add_parser("search", help="optax search for the mechanisms closest to (or "
                       "beyond) a relation's bound")
    p.add_argument("--relation", required=True, help="relation id, or 'all'")
    p.add_argument("--n", type=int, default=4, help="secrets (default 4)")
    p.add_argument("--m", type=int, default=4, help="outputs (default 4)")
    p.add_argument("--grid", default=None,
                   help="premise levels: 'low:high:count' or '0.1,0.5,1' (default 0.05:3:60; "
                        "a relation with its own range, e.g. R15, uses its own; "
                        "with --relation all each grid is clipped to where its claim is made)")
    p.add_argument("--param", type=_finite, default=None,
                   help="condition parameter ε for R3-R5 (ε_unif or ε_bel; default 0.5)")
    p.add_argument("--law", default="record", help="ABP observation law: record or output")
    p.add_argument("--prior", default="", choices=("", "uniform"), metavar="uniform",
                   help="hold the prior uniform (default: the relation's own setting, e.g. "
                        "free for R5)")
    p.add_argument("--restarts", type=int, default=128, help="restarts per grid point")
    p.add_argument("--steps", type=int, default=3000, help="optimizer steps (at most)")
    p.add_argument("--lr", type=_finite, default=0.02, help="peak Adam step size")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--k", type=int, default=2, help="values per record (R7-R13; default 2)")
    p.add_argument("--r", type=int, default=None,
                   help="records per database (R7-R13; n = k^r); default: from --n")
    p.add_argument("--t-max", type=int, default=10_000,
                   help="R14: largest sample count T searched (default 10000)")
    p.add_argument("--sweep", default=None, help="a sweep run directory to plot beside")
    p.add_argument("--out", required=True, help="run directory (one sub-directory per "
                   "relation with --relation all)")
    p.add_argument("--resume", action="store_true", help="continue a killed run in --out")
    p.add_argument("--cpu-devices", type=int, default=None,
                   help="on a CPU, split it into this many JAX devices (default: one per core)")
    _group_flags(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")

    p = sub.add_parser("audit", help="sweep, search and certify every relation; write a "
                       "report (the main job)")
    p.add_argument("--budget", default="quick",
                   help="quick (< 3 min on 2 CPU cores), standard, or full (overnight / GPU)")
    p.add_argument("--out", default="runs/audit", help="audit directory (default runs/audit; "
                   "an audit already there is resumed)")
    p.add_argument("--relations", default="all", help="comma list of ids or prefixes ending "
                   "in '*', e.g. R1,R5 or 'R1*' (default all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--memory-mb", type=_finite, default=1024.0,
                   help="device memory budget of the sweeps' blocks (default 1024)")
    p.add_argument("--workers", type=int, default=None,
                   help="relations audited at once, each in its own process (default: one per "
                        "CPU core; 1 on a GPU); results do not depend on it")
    p.add_argument("--cpu-devices", type=int, default=None,
                   help="on a CPU, split it into this many JAX devices (default: one per core)")
    _group_flags(p)
    p.add_argument("--quiet", action="store_true", help="no progress bars")

    p = sub.add_parser("show", help="print a witness file's levels and re-check its relation")
    p.add_argument("file", help="witness JSON (has a 'relation' field)")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    p = sub.add_parser("relations", help="list the registered relations")
    p.add_argument("--json", action="store_true", help="print JSON")

    p = sub.add_parser("notions", help="list the registered notions")
    p.add_argument("--json", action="store_true", help="print JSON")
    return parser


def _group_flags(p) -> None:
    """The process-group flags of ``sweep``, ``search`` and ``audit`` (:mod:`jaxpriv.engines.group`)."""
    g = p.add_argument_group(
        "process groups", "run one command over several processes or hosts: start the same "
        "command on each, with the same --coordinator and --num-processes and its own "
        "--process-id (or JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, JAX_PROCESS_ID); process 0 "
        "writes --out")
    g.add_argument("--coordinator", metavar="HOST:PORT", default=None,
                   help="address of process 0, reachable from every process")
    g.add_argument("--num-processes", type=int, default=None, metavar="N",
                   help="processes in the group")
    g.add_argument("--process-id", type=int, default=None, metavar="I",
                   help="this process, 0 .. N-1 (0 writes the run directory)")
    g.add_argument("--coordinator-timeout", type=_finite, default=120.0, metavar="SECONDS",
                   help="how long to wait for the whole group to join (default 120)")
    g.add_argument("--distributed", action="store_true", help=argparse.SUPPRESS)


GROUP_LOCAL = ("process_id", "out", "cpu_devices", "quiet", "coordinator_timeout",
               "distributed", "coordinator")
"""Settings that may differ between the processes of a group; the rest must agree."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; every failure a user can cause is one line on stderr and exit 2.

    Only a bug in jaxpriv shows a traceback, followed by a line asking to report it (exit 3)."""
    try:
        args = _parser().parse_args(argv)
        if args.version:
            from jaxpriv.core.version import __version__
            print(__version__)
            return 0
        if args.command is None:
            _parser().print_usage(sys.stderr)
            return _fail("give a command (eval, check, sweep, search, audit, show, relations, "
                         "notions); see 'jaxpriv --help'")
        from jaxpriv import registry

        for name in ("out", "sweep"):  # '--out=~/x' reaches us unexpanded
            if isinstance(getattr(args, name, None), str):
                setattr(args, name, str(Path(getattr(args, name)).expanduser()))
        registry.load_plugins(args.plugin)
        commands = {"eval": _eval, "check": _check, "sweep": _sweep, "search": _search,
                    "audit": _audit, "show": _show, "relations": _relations,
                    "notions": _notions}
        return commands[args.command](args)
    except InputError as e:
        return _fail(str(e))
    except KeyboardInterrupt:
        print("jaxpriv: interrupted (finished chunks are kept: run again with --resume; an "
              "audit resumes by itself)", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (``jaxpriv eval f.json | head``): not an error; keep Python's
        # final flush of stdout from raising again
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as e:
        return _fail(_os_problem(e))
    except MemoryError:
        return _fail("out of memory: lower --memory-mb or --chunk, or --count")
    except Exception as e:  # noqa: BLE001 - sorted below: a plugin's, the device's, or a bug
        return _unexpected(e)


def _fail(message: str) -> int:
    print(f"jaxpriv: error: {message}", file=sys.stderr)
    return 2


def _os_problem(error: OSError) -> str:
    """One line for a failed file operation: the path, the system's reason, what to do."""
    import errno

    where = f"{error.filename}: " if error.filename else ""
    reason = error.strerror or str(error)
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        advice = ("free some space, then run the same command again, with --resume if the run "
                  "had begun (an audit resumes by itself); finished work is kept")
    elif error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        advice = "choose a path you can write, or fix its permissions"
    else:
        advice = "check the path and the disk"
    return f"{where}{reason}; {advice}"


def _unexpected(error: Exception) -> int:
    """A plugin's own exception (named with its file and line), the device running out of
    memory, or a bug in jaxpriv (traceback and a request to report it)."""
    import traceback

    from jaxpriv import registry

    found = registry.plugin_error(error)
    if found is not None:
        return _fail(str(found))
    text = str(error)
    if "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower():
        return _fail("the device ran out of memory: lower --memory-mb or --chunk")
    from jaxpriv.core.version import __version__

    traceback.print_exception(error)
    print(f"jaxpriv: internal error: this is a bug in jaxpriv {__version__}, not in your input; "
          "please report it with the command line and the traceback above", file=sys.stderr)
    return 3


# -- eval --------------------------------------------------------------------------------------


def _eval(args) -> int:
    import jax

    from jaxpriv.engines import io

    mech, extras = io.load_mechanism(args.file)
    with jax.enable_x64(True), io.about(args.file):
        result: dict[str, Any] = {"n": mech.n, "m": mech.m}
        result.update(evaluate_notions(mech, extras))
    if args.json:
        print(json.dumps(result))
    else:
        _print_levels(result)
    return 0


def evaluate_notions(mech, extras: dict[str, Any]) -> dict[str, Any]:
    """Every registered notion's level on ``mech`` (float64) at its default parameters (the
    file's values for parameters without a default), and its details at the file's parameters:
    notions that need what the file lacks (a records layout, output values, a required
    parameter) are left out."""
    from jaxpriv import registry

    mech = mech.astype(np.float64)
    result: dict[str, Any] = {}
    for key, notion in registry.NOTIONS.items():
        if not notion.show or (notion.needs_records and mech.records is None):
            continue
        given = {name: notion.checked(name, extras[name]) for name in notion.params
                 if extras.get(name) is not None}
        required = {name: value for name, value in given.items()
                    if notion.params[name] is registry.REQUIRED}
        try:
            result[key] = _plain(registry.level(key, mech, **required))
        except InputError:
            pass
        if notion.details is not None:
            try:
                result.update({k: _plain(v) for k, v in notion.details(mech, **given).items()})
            except InputError:
                pass
    return result


def _labels() -> dict[str, str]:
    from jaxpriv import registry

    labels = {}
    for key, notion in registry.NOTIONS.items():
        labels[key] = notion.title
        labels.update({k: v for k, v in _DETAIL_LABELS.items() if k.startswith(key)})
    return labels


_DETAIL_LABELS = {
    "abp_mean": "ABP (record law, π-mean)", "abp_record": "ABP per true secret d*",
    "abp_output": "ABP (output law, max over w)", "abp_output_vector": "ABP per output w",
    "abp_q": "ABP (explicit law q)", "pac_beta_vector": "failure probability β(d)",
    "mp_databases": "MP over whole databases only",
}


def _print_levels(result: dict[str, Any]) -> None:
    from jaxpriv import registry

    print(f"mechanism: {result['n']} secrets × {result['m']} outputs (float64; unit after each "
          "level)")
    labels = {k: v for k, v in _labels().items() if k in result}
    labels.update({k: k for k in result if k not in labels and k not in ("n", "m")})
    width = max(len(v) for v in labels.values())
    for key, label in labels.items():
        unit = registry.NOTIONS[key].unit if key in registry.NOTIONS else ""
        print(f"  {label:<{width}}  {_fmt(result[key])}{'  ' + unit if unit else ''}")


# -- check -------------------------------------------------------------------------------------


def _check(args) -> int:
    from jaxpriv import registry
    from jaxpriv.engines import io

    relation = registry.get(args.relation)
    if relation.kind == "statistical":
        return _check_statistical(relation, args)
    mech, extras = io.load_mechanism(args.file)
    if extras.get("relation") not in (None, relation.id):
        print(f"jaxpriv: note: the file is a witness for {extras['relation']}, "
              f"checking {relation.id}", file=sys.stderr)
    from jaxpriv.engines import certify

    with io.about(args.file):
        parameter, options = certify.witness_check_arguments(extras, relation)
        for key in ("law", "mu", "alpha", "d_true"):
            if getattr(args, key) is not None:
                options[key] = getattr(args, key)
        if args.parameter is not None:
            parameter = args.parameter
        result = relation.check(mech, parameter=parameter, **options)
    return _report_check(relation, result, args.json)


def _check_statistical(relation, args) -> int:
    """A statistical claim: the file holds the setting, ``{"relation": id, **fields}``."""
    from jaxpriv.engines import io

    data = io.read_json(args.file)
    if not isinstance(data, dict):
        raise InputError(f"{args.file}: expected a JSON object with {', '.join(relation.fields)}")
    if data.get("relation") not in (None, relation.id):
        print(f"jaxpriv: note: the file is a witness for {data['relation']}, "
              f"checking {relation.id}", file=sys.stderr)
    return _report_check(relation, relation.check(**data), args.json)


def _report_check(relation, result, as_json: bool) -> int:
    from jaxpriv import registry

    summary = {
        "relation": relation.id,
        "statement": relation.statement,
        "sources": [str(s) for s in relation.sources],
        "premise": _plain(result.premise),
        "parameter": _plain(result.parameter),
        "parameter_used": _plain(result.parameter_used),
        "condition_holds": bool(result.condition_holds),
        "conclusion": _plain(result.conclusion),
        "bound": _plain(result.bound),
        "slack": _plain(result.slack),
        "violated": bool(result.violated),
        "rtol": getattr(relation, "rtol", registry.RTOL),
        "atol": registry.ATOL,
    }
    if as_json:
        print(json.dumps(summary))
    else:
        _print_check(relation, summary)
    return 1 if summary["violated"] else 0


def _print_check(relation, s: dict[str, Any]) -> None:
    print(f"{relation.id}: {relation.statement}")
    print(f"  sources     {', '.join(s['sources'])}")
    print(f"  premise     {relation.premise} = {_fmt(s['premise'])}")
    if relation.parameter is not None:
        print(f"  parameter   {relation.parameter} = {_fmt(s['parameter'])}"
              f" (bound taken at {_fmt(s['parameter_used'])})")
    print(f"  condition   {relation.condition}: {'holds' if s['condition_holds'] else 'does not hold'}")
    print(f"  conclusion  {relation.conclusion} = {_fmt(s['conclusion'])}")
    print(f"  bound       {_fmt(s['bound'])}")
    print(f"  slack       {_fmt(s['slack'])}  (bound / conclusion)")
    if s["violated"]:
        verdict = f"VIOLATED (verified in float64, rtol={s['rtol']:g})"
    elif s["condition_holds"]:
        verdict = "holds"
    else:
        verdict = "not claimed (condition fails)"
    print(f"  verdict     {verdict}")


# -- sweep -------------------------------------------------------------------------------------


def _sweep(args) -> int:
    from jaxpriv import registry
    from jaxpriv.engines import sweep

    _start_jax(args.cpu_devices, args)
    if args.bins < 1:
        raise InputError(f"--bins must be >= 1, got {args.bins}")
    ids = _relation_ids(args.relation)
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
        worst_code = max(worst_code, 1 if result.violation_count else 0)
    return worst_code


def _search(args) -> int:
    from jaxpriv import registry
    from jaxpriv.engines import search

    _start_jax(args.cpu_devices, args)
    grid = search.parse_grid(args.grid or "0.05:3:60")
    ids = _relation_ids(args.relation)
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
        for directory in sweeps:
            if not (directory / "envelope.csv").is_file():
                raise InputError(f"--sweep {args.sweep}: {directory} is not a finished sweep "
                                 "run directory (no envelope.csv)")
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


def _audit(args) -> int:
    from jaxpriv import audit, report
    from jaxpriv.engines import group, runstate

    _start_jax(args.cpu_devices, args)
    spend = audit.budget(args.budget)
    if args.memory_mb <= 0:
        raise InputError(f"--memory-mb must be positive, got {args.memory_mb}")
    if args.seed < 0:
        raise InputError(f"--seed must be a non-negative integer, got {args.seed}")
    ids = audit.relation_ids(args.relations)
    runstate.writable_directory(args.out)
    print(f"jaxpriv audit: budget {spend.name}, {len(ids)} relations -> {args.out}")
    workers = audit.default_workers() if args.workers is None else args.workers
    if group.size() > 1:
        workers = 1  # a group runs one relation at a time, all processes together
    summary = audit.run(spend, ids, args.out, seed=args.seed, progress=not args.quiet,
                        memory_mb=args.memory_mb, workers=workers)
    width = max([4] + [len(v["relation"]) for v in summary["relations"]])
    kinds = {v["relation"]: report.kind_text(v) for v in summary["relations"]}
    column = max([12] + [len(k) for k in kinds.values()])
    print(f"\n{'id':<{width}} {'verdict':<22} {'worst slack':>12}  {'envelope':<{column}} "
          "witness")
    for v in summary["relations"]:
        slack = "n/a" if v["worst_slack"] is None else f"{v['worst_slack']:.4g}"
        print(f"{v['relation']:<{width}} {v['verdict']:<22} {slack:>12}  "
              f"{kinds[v['relation']]:<{column}} {v['witness'] or ''}")
    print(f"report: {args.out}/report.md, {args.out}/report.html "
          f"({summary['seconds']:.0f} s)")
    return 0


def _show(args) -> int:
    """A witness: its levels (mechanisms) or setting (statistical claims), then its relation
    re-checked."""
    from jaxpriv import registry
    from jaxpriv.engines import certify, io

    data = io.read_json(args.file)
    if not isinstance(data, dict) or not data.get("relation"):
        raise InputError(f"{args.file}: not a witness (no 'relation' field); use 'jaxpriv eval' "
                         "for a mechanism, 'jaxpriv check RELATION FILE' to check one")
    relation = registry.get(str(data["relation"]))
    if not args.json and relation.kind == "statistical":
        print("setting: " + ", ".join(f"{k} = {_fmt(_plain(data[k]))}" for k in relation.fields
                                      if k in data))
    elif not args.json:
        _eval(argparse.Namespace(file=args.file, json=False))
        print()
    return _report_check(relation, certify.check_witness(args.file), args.json)


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
    if args.k < 2:
        raise InputError(f"--k must be >= 2, got {args.k}")
    if args.r is not None:
        if args.r < 1:
            raise InputError(f"--r must be >= 1, got {args.r}")
        return {"k": args.k, "r": args.r}
    r = round(math.log(args.n, args.k)) if args.n >= 2 else 0
    if r < 1 or args.k**r != args.n:
        raise InputError(f"n = {args.n} is not a power of k = {args.k}: give --r (and --k) for "
                         "the database-level relations")
    return {"k": args.k, "r": r}


COMPILATION_CACHE = "jax-compilation"
"""The folder of JAX's persistent compilation cache under jaxpriv's cache root (the native
kernel's, :func:`jaxpriv.kernels.native.cache_root`: ``$JAXPRIV_CACHE``, else ``~/.cache/jaxpriv``)."""


def cache_directory() -> Path | None:
    """Where ``sweep``, ``search`` and ``audit`` keep JAX's persistent compilation cache, so a
    second run does not compile again: :data:`COMPILATION_CACHE` under jaxpriv's cache root;
    ``None`` when ``JAXPRIV_COMPILATION_CACHE=off``, or when the user set JAX's own
    ``JAX_COMPILATION_CACHE_DIR`` (then JAX uses that)."""
    import os

    from jaxpriv.kernels import native

    if os.environ.get("JAXPRIV_COMPILATION_CACHE", "").strip().lower() in ("off", "0", "no"):
        return None
    if os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return None
    return native.cache_root() / COMPILATION_CACHE


def _start_jax(devices: int | None, args=None) -> None:
    """Before JAX runs anything: one device per CPU core (:func:`_use_cpu_cores`), the
    persistent compilation cache at :func:`cache_directory` (also for the audit's worker
    processes, through the environment they inherit; a directory that cannot be created is a
    note, and the run compiles as usual), and the process group ``args`` names, if any
    (:func:`_join_group`)."""
    _use_cpu_cores(devices)
    _use_compilation_cache()
    if args is not None:
        _join_group(args)


def _join_group(args) -> None:
    """Join the process group the flags or the environment name (:mod:`jaxpriv.engines.group`); every
    setting but :data:`GROUP_LOCAL` must agree across it. A process other than the writer runs
    quietly, into a scratch directory of its own."""
    import os

    from jaxpriv.engines import group

    found = group.settings(args.coordinator, args.num_processes, args.process_id,
                           args.coordinator_timeout)
    if found is None:
        if args.distributed:
            raise InputError("--distributed needs a process group: give --coordinator HOST:PORT "
                             "--num-processes N --process-id I (or JAX_COORDINATOR_ADDRESS, "
                             "JAX_NUM_PROCESSES, JAX_PROCESS_ID)")
        return
    from jaxpriv.core.version import __version__

    shared = {k: v for k, v in sorted(vars(args).items()) if k not in GROUP_LOCAL}
    group.join(found, json.dumps({"jaxpriv": __version__, **shared}, default=str))
    # the collectives library prints to the process's stdout itself: that goes to stderr (the
    # writer) or nowhere (the others), while Python's own output keeps the real stdout
    sys.stdout.flush()
    kept = os.dup(1)
    os.dup2(2 if found.rank == 0 else os.open(os.devnull, os.O_WRONLY), 1)
    sys.stdout = open(kept if found.rank == 0 else os.devnull, "w",  # noqa: SIM115
                      buffering=1)
    if found.rank != 0:
        args.out = str(group.scratch() / "out")
        args.quiet = True
        print(f"jaxpriv: process {found.rank} of {found.size} joined the group at "
              f"{found.address}; process 0 prints and writes the results", file=sys.stderr)


def _use_compilation_cache() -> None:
    """JAX's persistent compilation cache at :func:`cache_directory`, unless turned off."""
    import os

    import jax

    path = cache_directory()
    if path is None:
        return
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        print(f"jaxpriv: note: no compilation cache ({path}: {error.strerror or error}); set "
              "JAXPRIV_CACHE to a writable directory, or JAXPRIV_COMPILATION_CACHE=off",
              file=sys.stderr)
        return
    os.environ["JAX_COMPILATION_CACHE_DIR"] = str(path)
    # every program, however quick to compile: a run dispatches ~150 small ones (eager
    # float64 checks, initial parameters), ~55 ms each to compile and ~1 ms to load — with a
    # 0.3 s threshold they were compiled again on every run (a warm quick audit of R1: 14 s → 4 s)
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs",
                      float(os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]))
    jax.config.update("jax_persistent_cache_min_entry_size_bytes",
                      int(os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"]))


def _use_cpu_cores(devices: int | None) -> None:
    """One JAX device per core on a CPU host: XLA runs one device's work on one thread, and the
    sweep shards its blocks over devices. Only possible before JAX first runs anything (so not
    when ``main`` is called from a process that already used JAX; it then keeps its devices)."""
    import os

    import jax

    if devices is not None and devices < 1:
        raise InputError(f"--cpu-devices must be >= 1, got {devices}")
    try:
        jax.config.update("jax_num_cpu_devices", devices or os.cpu_count() or 1)
    except RuntimeError:
        if devices is not None and jax.local_device_count("cpu") != devices:
            raise InputError("--cpu-devices must be set before JAX starts; run the jaxpriv "
                             "command in a fresh process") from None


# -- relations ---------------------------------------------------------------------------------


def _relations(args) -> int:
    from jaxpriv import registry

    rows = [{"id": r.id, "kind": r.kind, "statement": r.statement,
             "sources": [str(s) for s in r.sources], "premise": r.premise,
             "conclusion": r.conclusion, "condition": r.condition,
             "certified": getattr(r, "certificate", None) is not None,
             "proof": getattr(r, "proof", "")}
            for r in registry.REGISTRY.values()]
    if args.json:
        print(json.dumps(rows))
        return 0
    width = max(len(row["id"]) for row in rows)
    for row in rows:
        print(f"{row['id']:<{width}} {row['statement']}")
        print(f"{'':<{width}} condition: {row['condition']}; sources: "
              f"{', '.join(row['sources']) or '—'}")
    return 0


def _notions(args) -> int:
    from jaxpriv import registry

    rows = [{"key": n.key, "doc": n.doc, "unit": n.unit, "source": str(n.source or ""),
             "params": {k: (None if v is registry.REQUIRED else v) for k, v in n.params.items()},
             "required": [k for k, v in n.params.items() if v is registry.REQUIRED],
             "needs_records": n.needs_records, "post_processing": n.post_processing,
             "screen": n.screen, "surrogate": n.surrogate is not None,
             "retract": n.retract is not None}
            for n in registry.NOTIONS.values()]
    if args.json:
        print(json.dumps(rows, default=str))
        return 0
    width = max(len(row["key"]) for row in rows)
    for row in rows:
        params = ", ".join(f"{k}={'required' if k in row['required'] else v!r}"
                           for k, v in row["params"].items())
        flags = [f for f, on in (("databases", row["needs_records"]),
                                 ("post-processing", row["post_processing"]),
                                 ("float32 screen", row["screen"]),
                                 ("surrogate", row["surrogate"]),
                                 ("retraction", row["retract"])) if on]
        print(f"{row['key']:<{width}} [{row['unit'] or '—'}] {row['doc']}"
              f"{' (' + params + ')' if params else ''}")
        if flags:
            print(f"{'':<{width}} {', '.join(flags)}")
    return 0


# -- formatting --------------------------------------------------------------------------------


def _plain(v):
    a = np.asarray(v, dtype=np.float64)
    return a.tolist() if a.ndim else float(a)


def _fmt(v) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    if isinstance(v, float) and math.isinf(v):
        return "inf"
    return f"{v:.10g}"


if __name__ == "__main__":
    sys.exit(main())
