"""The ``jaxpriv`` command's argument parser: :func:`_parser` assembles one sub-parser per
command (``_eval_parser(sub)``, ``_check_parser(sub)``, ...) from the flag groups they share
(``--plugin`` on every command; the machine, ``--out`` and process-group flags of ``sweep``,
``search`` and ``audit``). A usage error is one line and exit status 2."""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence


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


def _positive(text: str) -> float:
    """argparse type: a finite number > 0."""
    value = _finite(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text!r}")
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
    """The whole command line: ``--version``, and one sub-parser per command."""
    parser = _Parser(prog="jaxpriv", description="Exact privacy notions of finite mechanisms "
                     "and audits of the published relations between them (levels in nats).")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = _commands(parser)
    _eval_parser(sub)
    _check_parser(sub)
    _sweep_parser(sub)
    _search_parser(sub)
    _audit_parser(sub)
    _show_parser(sub)
    _compose_parser(sub)
    _relations_parser(sub)
    _notions_parser(sub)
    return parser


_UNSET = object()


def given_options(argv: Sequence[str]) -> frozenset[str]:
    """The destinations of the options ``argv`` sets itself, not by default (``--lr 0.1``:
    ``"lr"``; abbreviations and ``--flag=value`` as argparse reads them): the command line
    parsed again with every default a marker."""
    parser = _parser()
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    appended = set()  # (an append action's default must be None or a list: None is unset)
    for p in [parser, *(c for a in subparsers for c in a.choices.values())]:
        for action in p._actions:
            if isinstance(action, argparse._AppendAction):
                action.default = None
                appended.add(action.dest)
            elif action.option_strings:
                action.default = _UNSET
    args = parser.parse_args(list(argv))
    return frozenset(k for k, v in vars(args).items()
                     if v is not _UNSET and not (k in appended and v is None))


def _commands(parser: argparse.ArgumentParser):
    """The sub-parsers' action: every command's parser takes :func:`_plugin_flags`."""
    plugins = _plugin_flags()
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    _add = sub.add_parser

    def add_parser(name, **kwargs):
        return _add(name, parents=[plugins], **kwargs)

    sub.add_parser = add_parser
    return sub


def _plugin_flags() -> argparse.ArgumentParser:
    """``--plugin FILE.py`` (repeatable), shared by every command as a parent parser."""
    plugins = argparse.ArgumentParser(add_help=False)
    plugins.add_argument("--plugin", action="append", default=[], metavar="FILE.py",
                         help="load a plugin file that registers notions and relations "
                              "(repeatable; installed 'jaxpriv.plugins' entry points load too)")
    return plugins


# -- the quick commands ------------------------------------------------------------------------


def _eval_parser(sub) -> None:
    p = sub.add_parser("eval", help="every registered notion's level on the mechanism in a JSON "
                       "file (at default parameters; the file's values where a notion has no "
                       "default, e.g. 'mu', 'alpha', 'd_true')")
    p.add_argument("file", help="mechanism JSON (SPEC §4): {\"K\": [[...]], \"prior\": [...], ...}")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _check_parser(sub) -> None:
    p = sub.add_parser("check", help="check one relation (R1, R2, ... or a plugin's) on a "
                       "mechanism")
    p.add_argument("relation", help="relation id, see 'jaxpriv relations'")
    p.add_argument("file", help="mechanism or witness JSON")
    p.add_argument("--parameter", type=_not_nan, default=None,
                   help="condition parameter the bound is claimed at (ε for R3-R5, β for R6); "
                        "default: the file's 'eps'/'beta', else the measured value")
    claim = p.add_argument_group(
        "claim parameters", "a claim with parameters (D5-D10, D13, C1-C7; 'jaxpriv relations' "
        "lists them) is checked at any value: 'jaxpriv check D6 FILE --alpha 3 --delta 1e-7'. "
        "Default: the id's values (D6.a4.d1e-5), else the file's")
    claim.add_argument("--alpha", type=_finite, default=None,
                       help="Rényi order α (D5-D7, C5); for R6, the PAC accuracy α")
    claim.add_argument("--delta", type=_not_nan, default=None, help="δ (D6-D8, D13, C1-C2, C4-C7)")
    claim.add_argument("--epsilon", type=_not_nan, default=None, help="ε (D9, D10; ε' of C3)")
    claim.add_argument("--k", type=_not_nan, default=None, help="number of uses k (C1-C7)")
    p.add_argument("--law", default=None, help="ABP observation law: record (default) or output")
    p.add_argument("--mu", type=_finite, default=None, help="PAC statistic μ (R6)")
    p.add_argument("--d-true", type=int, default=None, help="the true secret (R6)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _compose_parser(sub) -> None:
    p = sub.add_parser("compose", help="the exact privacy of mechanisms used k times "
                       "(composed ε at δ, or δ at ε; SPEC §6)")
    p.add_argument("files", nargs="+", metavar="FILE.json",
                   help="mechanism JSON files on the same secrets (heterogeneous composition)")
    p.add_argument("--k", type=int, nargs="+", required=True, metavar="K",
                   help="uses of each mechanism (one number: the same for every file)")
    given = p.add_mutually_exclusive_group(required=True)
    given.add_argument("--delta", type=_not_nan, help="report the composed ε at this δ")
    given.add_argument("--epsilon", type=_not_nan, help="report the composed δ at this ε")
    p.add_argument("--out", default=None,
                   help="write summary.json and profile.png (δ(ε) beside one use) here")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--accountants", action="store_true",
                   help="also every installed accountant's composed ε for the same mechanism, k "
                        "and δ, with its ratio to the exact value and a verdict (sound or "
                        "UNSOUND); one mechanism, --delta (pip install 'jaxpriv[accountants]')")
    p.add_argument("--method", choices=("auto", "exact", "bracket"), default="auto",
                   help="exact (count vectors), bracket (certified FFT bracket) or auto: exact "
                        "where the count vectors fit in memory, else the bracket")
    p.add_argument("--grid", type=int, default=1 << 20, metavar="N",
                   help="the bracket's FFT size, a power of 2 (default 2^20; its width shrinks "
                        "about as 1/N); not with --method exact")


def _show_parser(sub) -> None:
    p = sub.add_parser("show", help="print a witness file's levels and re-check its relation")
    p.add_argument("file", help="witness JSON (has a 'relation' field)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _relations_parser(sub) -> None:
    p = sub.add_parser("relations", help="list the registered relations")
    p.add_argument("--json", action="store_true", help="print JSON")


def _notions_parser(sub) -> None:
    p = sub.add_parser("notions", help="list the registered notions")
    p.add_argument("--json", action="store_true", help="print JSON")


# -- the runs ----------------------------------------------------------------------------------


def _sweep_parser(sub) -> None:
    p = sub.add_parser("sweep", help="evaluate a relation over many random mechanisms")
    p.add_argument("--relation", required=True, help="relation id, or 'all'")
    p.add_argument("--n", type=int, default=8, help="secrets (default 8)")
    p.add_argument("--m", type=int, default=8, help="outputs (default 8)")
    p.add_argument("--count", type=int, default=1_000_000, help="mechanisms per relation")
    p.add_argument("--seed", type=int, default=0, help="PRNG seed, 0 to 2^32 − 1 (default 0)")
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
    _out_flags(p)
    _machine_flags(p, cpu_help="on a CPU, split it into this many JAX devices so every core "
                   "works (default: the number of cores; results do not depend on it)")


def _search_parser(sub) -> None:
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
    p.add_argument("--steps", type=int, default=3000,
                   help="optimizer steps, in whole segments of 100 (rounded up; fewer where the "
                   "search stops early; default 3000)")
    p.add_argument("--lr", type=_finite, default=0.02, help="peak Adam step size")
    p.add_argument("--seed", type=int, default=0, help="PRNG seed, 0 to 2^32 − 1 (default 0)")
    p.add_argument("--k", type=int, default=2, help="values per record (R7-R13; default 2)")
    p.add_argument("--r", type=int, default=None,
                   help="records per database (R7-R13; n = k^r); default: from --n")
    p.add_argument("--t-max", type=int, default=10_000,
                   help="R14: largest sample count T searched (default 10000)")
    p.add_argument("--sweep", default=None, help="a sweep run directory to plot beside")
    _out_flags(p)
    _machine_flags(p)


def _audit_parser(sub) -> None:
    p = sub.add_parser("audit", help="sweep, search and certify every relation; write a "
                       "report (the main job)")
    p.add_argument("--budget", default="quick",
                   help="quick (4–8 min on 2 CPU cores with empty caches, 1–2.5 warm), standard, or "
                   "full (overnight / GPU)")
    p.add_argument("--out", default="runs/audit", help="audit directory (default runs/audit; "
                   "an audit already there is resumed)")
    p.add_argument("--relations", default="all", help="comma list of ids or prefixes ending "
                   "in '*', e.g. R1,R5 or 'R1*' (default all)")
    p.add_argument("--seed", type=int, default=0, help="PRNG seed, 0 to 2^32 − 1 (default 0)")
    p.add_argument("--memory-mb", type=_finite, default=1024.0,
                   help="device memory budget of the sweeps' blocks (default 1024)")
    p.add_argument("--workers", type=int, default=None,
                   help="relations audited at once, each in its own process (default: one per "
                        "CPU core; 1 on a GPU); results do not depend on it")
    _machine_flags(p, quiet_help="no progress bars")


def _out_flags(p) -> None:
    """``--out`` and ``--resume`` of ``sweep`` and ``search``."""
    p.add_argument("--out", required=True, help="run directory (one sub-directory per "
                   "relation with --relation all)")
    p.add_argument("--resume", action="store_true", help="continue a killed run in --out")


def _machine_flags(p, cpu_help: str = "on a CPU, split it into this many JAX devices "
                   "(default: one per core)", quiet_help: str = "no progress bar") -> None:
    """What runs the work, last in ``sweep``, ``search`` and ``audit``: ``--cpu-devices``, the
    process-group flags (:func:`_group_flags`), ``--quiet``."""
    p.add_argument("--cpu-devices", type=int, default=None, help=cpu_help)
    _group_flags(p)
    p.add_argument("--quiet", action="store_true", help=quiet_help)


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
    g.add_argument("--coordinator-timeout", type=_positive, default=120.0, metavar="SECONDS",
                   help="how long to wait for the whole group to join (default 120)")
    g.add_argument("--distributed", action="store_true", help=argparse.SUPPRESS)
