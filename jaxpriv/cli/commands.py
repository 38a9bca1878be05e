"""The quick commands of the ``jaxpriv`` command line, each a function of the parsed
arguments that returns the exit status: ``eval`` (every notion's level on a mechanism), ``check``
(one relation on a mechanism or a statistical setting), ``show`` (a witness, re-checked),
``relations`` and ``notions`` (the registries listed), and the formatting they share. The long
runs (``sweep``, ``search``, ``audit``) are in :mod:`jaxpriv.cli.runs`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from jaxpriv.core.errors import BrokenNotionError, InputError


# -- eval --------------------------------------------------------------------------------------


def _file_levels(path) -> tuple[dict[str, Any], list[str], list[str]]:
    """A mechanism file's levels (``eval``'s table: ``n``, ``m`` and every notion's), the
    problems of the file's notion parameters, and the notions that broke their contract."""
    import jax

    from jaxpriv.engines import io

    mech, extras = io.load_mechanism(path)
    # a bar over the notions where they take a while (300×300: ~30 s on 2 cores; a terminal)
    bar = None
    if sys.stderr.isatty() and mech.n * mech.n * mech.m >= 1 << 22:
        from tqdm.auto import tqdm

        bar = tqdm(unit="notion", desc="eval", file=sys.stderr, leave=False)
    problems: list[str] = []
    broken: list[str] = []
    with jax.enable_x64(True), io.about(path):
        result: dict[str, Any] = {"n": mech.n, "m": mech.m}
        result.update(evaluate_notions(mech, extras, bar, problems, broken))
    if bar is not None:
        bar.close()
    return result, problems, broken


def _eval(args) -> int:
    result, problems, broken = _file_levels(args.file)
    if args.json:
        print(json.dumps(result))
    else:
        _print_levels(result)
    # the file set a notion's parameters and they do not fit it: said (one line), not left out
    # in silence; `show` says it through its own check instead. A notion that broke its
    # contract (a NaN level, a level of the wrong shape) is said always: left out of the table
    _say_problems(args.file, broken + ([] if getattr(args, "quiet_problems", False)
                                       else problems))
    return 2 if problems or broken else 0


def _say_problems(path, said: list[str]) -> None:
    """One error line naming the file and its notions' problems (none: nothing)."""
    if said:
        print(f"jaxpriv: error: {path}: {'; '.join(dict.fromkeys(said))}", file=sys.stderr)


# -- compose -----------------------------------------------------------------------------------


def _pair_progress(done: int, total: int) -> None:
    """The bracket's progress over the ordered pairs, on stderr (a terminal only)."""
    if sys.stderr.isatty() and total > 1:
        end = "\n" if done == total else ""
        print(f"\rbracketing ordered pairs: {done}/{total}", end=end, file=sys.stderr, flush=True)


def _compose(args) -> int:
    from jaxpriv.engines import compose, io
    from jaxpriv.report import compose as written

    if args.accountants and (args.delta is None or len(args.files) != 1):
        raise InputError("--accountants compares the libraries' composed ε at --delta for one "
                         "mechanism used k times: give one FILE and --delta")
    mechs = []
    for path in args.files:
        mech, _ = io.load_mechanism(path)
        mechs.append(mech)
    neighbours, over = _composed_pairs(mechs, args.files)
    method, grid = getattr(args, "method", "auto"), getattr(args, "grid", 1 << 20)
    if method == "exact" and "grid" in getattr(args, "given", ()):
        raise InputError("--grid sets the bracket's FFT size, which --method exact does not "
                         "use: drop --grid, or use --method bracket (or auto)")
    result = compose.compose(mechs, args.k, epsilon=args.epsilon, delta=args.delta,
                             method=method, grid=grid, progress=_pair_progress,
                             neighbours=neighbours)
    rows = []
    if args.accountants:
        rows = compose.accountant_rows(mechs[0], result.uses[0], result.at, result.bracket,
                                       neighbours)
        if not rows:
            raise InputError("--accountants: no accountant is installed; pip install "
                             "'jaxpriv[accountants]'")
    status = 1 if any(row.verdict == "UNSOUND" for row in rows) else 0
    data = written.summary(result, args.files, rows, over)
    if args.out:
        written.write(Path(args.out), mechs, result, args.files, rows, grid, over)
    if args.json:
        print(json.dumps(data))
        return status
    uses = " + ".join(f"{k} × {Path(f).name}" for k, f in zip(result.uses, args.files))
    print(f"composition   {uses}")
    how = result.method
    if result.method == "bracket":
        how = (f"certified bracket [{_fmt(result.bracket[0])}, "
               f"{_fmt(result.bracket[1])}], FFT grid of {grid:,} points; the value is "
               f"its upper end")
    if result.measure == "eps":
        print(f"ε(δ = {result.at:g})   {_fmt(result.value)}  ({how})")
    else:
        print(f"δ(ε = {result.at:g})   {_fmt(result.value)}  ({how})")
    print(f"over          {over}")
    print(f"attained by   secrets {result.pair[0]} → {result.pair[1]} (the ordered pair of rows)")
    for i, row in enumerate(rows, 1):
        value = "—" if row.value is None else _fmt(row.value)
        ratio = "" if row.ratio is None else f"  ×{row.ratio:.4g}"
        print(f"#{i:<2} {row.library:<15} {value:>14}{ratio:<12} {row.verdict}")
        print(f"      {row.call}")
        if row.note:
            print(f"      ({row.note})")
    if args.out:
        print(f"written       {Path(args.out) / 'summary.json'}, {Path(args.out) / 'profile.png'}")
    return status


def _composed_pairs(mechs, files) -> tuple[Any, str]:
    """The pairs a composition is over: neighbouring databases where the files give a records
    layout (DP: the same ε as ``eval``'s DP level at k = 1; every pair of secrets was taken,
    non-neighbours too, without a word), else every ordered pair of secrets; and in words."""
    from jaxpriv.core import databases
    from jaxpriv.report import compose as written

    layouts = {m.records for m in mechs}
    if layouts == {None}:
        return None, written.ALL_PAIRS
    if len(layouts) > 1:
        named = ", ".join(f"{Path(f).name}: {'none' if m.records is None else m.records}"
                          for m, f in zip(mechs, files))
        raise InputError(f"the files' records layouts differ ({named}); compose mechanisms "
                         "over the same databases")
    (records,) = layouts
    return (databases.neighbours(records),
            f"neighbouring databases (records: k = {records.k}, r = {records.r})")


def evaluate_notions(mech, extras: dict[str, Any], bar=None, problems: list[str] | None = None,
                     broken: list[str] | None = None) -> dict[str, Any]:
    """Every registered notion's level on ``mech`` (float64) at its default parameters (the
    file's values for parameters without a default), and its details at the file's parameters:
    notions that need what the file lacks (a records layout, output values, a required
    parameter) are left out. ``bar``: a tqdm bar advanced per notion (its total set here).
    ``problems``: where given, a notion left out although the file set its parameters (a ``q``
    of the wrong length, a ``d_true`` that is no secret) appends why, ``"notion: reason"``.
    ``broken``: where given, a notion whose level is NaN or of the wrong shape appends a line
    naming where it is defined and is left out (else a :class:`BrokenNotionError`)."""
    from jaxpriv import registry

    mech = mech.astype(np.float64)
    result: dict[str, Any] = {}
    shown = [(key, notion) for key, notion in registry.NOTIONS.items()
             if notion.show and not (notion.needs_records and mech.records is None)]
    if bar is not None:
        bar.reset(total=len(shown))
    for key, notion in shown:
        if bar is not None:
            bar.set_postfix_str(key)
            bar.update(0)
        given = {name: notion.checked(name, extras[name]) for name in notion.params
                 if extras.get(name) is not None}
        required = {name: value for name, value in given.items()
                    if notion.params[name] is registry.REQUIRED}
        try:
            value = np.asarray(registry.level(key, mech, **required), np.float64)
            if np.isnan(value).any():
                raise BrokenNotionError(f"notion {key!r} (defined at "
                                        f"{registry.where_defined(notion.level)}) returned NaN; "
                                        "a level must lie in [0, ∞]")
            result[key] = _plain(value)
        except BrokenNotionError as error:
            if broken is None:
                raise
            broken.append(str(error))
        except InputError as error:
            if required and problems is not None:
                problems.append(f"{key}: {error}")
        if notion.details is not None:
            try:
                result.update({k: _plain(v) for k, v in notion.details(mech, **given).items()})
            except InputError as error:
                if given and problems is not None:
                    problems.append(f"{key}: {error}")
        if bar is not None:
            bar.update(1)
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

    claimed = {"order": args.alpha, "delta": args.delta, "epsilon": args.epsilon, "k": args.k}
    alpha_is_order = registry.claim_of(args.relation) is not None  # else R6's PAC accuracy
    if registry.claim_of(args.relation) is None:
        relation = registry.get(args.relation)
        _no_claim_parameters(relation, args)
        _unused_check_options(relation, args)
        if relation.kind == "statistical":
            return _check_statistical(relation, args)
        mech, extras = io.load_mechanism(args.file)
    else:
        mech, extras = io.load_mechanism(args.file)
        relation = registry.resolve(args.relation, claimed, fallback=extras)
        _unused_check_options(relation, args)
    if extras.get("relation") not in (None, relation.id):
        print(f"jaxpriv: note: the file is a witness for {extras['relation']}, "
              f"checking {relation.id}", file=sys.stderr)
    from jaxpriv.engines import certify

    with io.about(args.file):
        parameter, options = certify.witness_check_arguments(extras, relation)
        for key, fixed in relation.values.items():  # the claim's setting, not the file's
            if options.get(key) is not None and float(options[key]) != fixed:
                print(f"jaxpriv: note: the file sets {key} = {options[key]!r}; checking "
                      f"{relation.id} at {key} = {fixed:g}", file=sys.stderr)
            options.pop(key, None)
        for key in ("law", "mu", "alpha", "d_true"):
            if getattr(args, key) is not None and not (key == "alpha" and alpha_is_order):
                options[key] = getattr(args, key)
        if args.parameter is not None:
            parameter = args.parameter
        result = relation.check(mech, parameter=parameter, **options)
    return _report_check(relation, result, args.json)


def _no_claim_parameters(relation, args) -> None:
    """A relation without claim parameters given one: one line naming the claims that have it."""
    from jaxpriv import registry

    for name, flag in (("delta", "--delta"), ("epsilon", "--epsilon"), ("k", "--k"),
                       ("order", "--alpha")):
        value = getattr(args, "alpha" if name == "order" else name)
        if value is None or (name == "order" and "alpha" in _relation_fields(relation)):
            continue
        having = [c.id for c in registry.CLAIMS.values()
                  if any(p.name == name for p in c.parameters)]
        raise InputError(f"{relation.id} has no parameter {flag}; the claims with it: "
                         f"{', '.join(having)}")


def _unused_check_options(relation, args) -> None:
    """An option the relation's check does not read is one line, not dropped in silence:
    ``--law``, ``--mu``, ``--d-true`` where its notions take no such option (a statistical
    claim reads its file alone), ``--parameter`` where the relation has no free condition
    parameter (none, or a fixed limit: R1's and R2's uniform prior)."""
    for key in ("law", "mu", "d_true"):
        if getattr(args, key, None) is not None and key not in _relation_fields(relation):
            flag = "--" + key.replace("_", "-")
            raise InputError(f"{relation.id} takes no {flag} (no notion of it has that "
                             f"option): leave {flag} out")
    has = relation.parameter is not None  # (a statistical claim: None)
    if args.parameter is not None and not (has and relation.parameter_limit is None):
        raise InputError(f"{relation.id} has no free condition parameter to set with "
                         f"--parameter ({'its condition fixes it' if has else 'it has none'}): "
                         "leave --parameter out")


def _relation_fields(relation) -> frozenset:
    """The option names a relation's check takes (``alpha`` for R6's PAC accuracy)."""
    if relation.kind == "statistical":
        return frozenset(relation.fields)
    return relation.notion_params


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


def _report_check(relation, result, as_json: bool, extra: dict | None = None) -> int:
    """Print a check (``extra``: more keys of its JSON object, first); exit 1 if violated."""
    from jaxpriv import registry
    from jaxpriv.registry.checks import nan_problem

    problem = nan_problem(relation, result)
    if problem:  # a NaN compares false: it would read "holds"
        raise InputError(problem)

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
        print(json.dumps({**(extra or {}), **summary}))
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
    # 0/0 reads inf (never "tight" at a point that says nothing), and says why here
    how = ("bound = conclusion = 0: nothing to compare" if s["bound"] == 0 == s["conclusion"]
           else "bound / conclusion")
    print(f"  slack       {_fmt(s['slack'])}  ({how})")
    if s["violated"]:
        verdict = f"VIOLATED (verified in float64, rtol={s['rtol']:g})"
    elif s["condition_holds"]:
        verdict = "holds"
    else:
        verdict = "not claimed (condition fails)"
    print(f"  verdict     {verdict}")


# -- show --------------------------------------------------------------------------------------


def _show(args) -> int:
    """A witness: its levels (mechanisms) or setting (statistical claims), then its relation
    re-checked."""
    from jaxpriv import registry
    from jaxpriv.engines import certify, io

    data = io.read_json(args.file)
    if isinstance(data, dict) and isinstance(data.get("compose"), dict) and not data.get(
            "relation"):
        return _show_composition(args, data["compose"])
    if not isinstance(data, dict) or not data.get("relation"):
        raise InputError(f"{args.file}: not a witness (no 'relation' field); use 'jaxpriv eval' "
                         "for a mechanism, 'jaxpriv check RELATION FILE' to check one")
    relation = certify.witness_relation(data)
    # re-checked first: a witness its relation refuses is one error line, no table before it
    result = certify.check_witness(args.file)
    if relation.kind == "statistical":
        setting = {k: _plain(data[k]) for k in relation.fields if k in data}
        if not args.json:
            print("setting: " + ", ".join(f"{k} = {_fmt(v)}" for k, v in setting.items()))
        return _report_check(relation, result, args.json, {"setting": setting})
    if not args.json:
        _eval(argparse.Namespace(file=args.file, json=False, quiet_problems=True))
        print()
        return _report_check(relation, result, False)
    # --json: the levels the text shows too, under "levels" (the check's keys as before; a
    # broken notion is said as eval says it, and left out)
    levels, _, broken = _file_levels(args.file)
    _say_problems(args.file, broken)
    return _report_check(relation, result, True, {"levels": levels})


def _show_composition(args, given: dict) -> int:
    """A composition witness (``{"K": …, "compose": {"k": K, "delta": D}}``): the exact
    composed ε of its mechanism beside every installed accountant's, as ``jaxpriv compose FILE
    --k K --delta D --accountants`` prints them (exit 1 where one is UNSOUND)."""
    from jaxpriv.core import composition

    k = composition.checked_uses(given.get("k"))
    delta = composition.checked_number("compose", "delta", given.get("delta"))
    return _compose(argparse.Namespace(files=[args.file], k=[k], delta=delta, epsilon=None,
                                       json=args.json, out=None, accountants=True))


# -- formatting --------------------------------------------------------------------------------


def _plain(v):
    a = np.asarray(v, dtype=np.float64)
    return a.tolist() if a.ndim else float(a)


def _fmt(v) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    return f"{v:.10g}"  # inf, -inf and nan as such (-inf used to print as "inf")
