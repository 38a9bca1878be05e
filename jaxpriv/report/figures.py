"""The figures of a relation: what they show (the sweep envelope as a running supremum, the
claimed bound and the certified supremum in plotted units) and how a relation's two panels are
drawn, and each run directory's ``envelope.png`` (sweep, search, statistical run).

Every figure of a relation is two panels sharing the premise axis: on top the levels (the
claimed bound dashed black, the certified supremum green where a closed form is known, the
sweep envelope as an orange step line, the search envelope as blue dots); underneath the
slack on a log axis (the same colours, the certified least slack as a green curve, the red
line slack = 1, violations below it). A relation whose bound scales with the measured
parameter (``scales_with_parameter``: conclusion ≤ f(x)·parameter) is drawn as the ratio
conclusion/parameter against f(x) = bound(x, 1). Axis units come from the notions' records
(the building blocks: :mod:`jaxpriv.report.axes`).
"""

from __future__ import annotations

import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxpriv import registry
from jaxpriv.report.axes import (CERTIFIED, CLAIM, SEARCH, SWEEP, VIOLATION, _at_most, _legend,
                                 _log_axis, _panels, _pyplot, _save, _sizes, _Slack, _style,
                                 _title, _unbounded, _value_axis, premise_label)


def _normalized(relation, rows, key="conclusion"):
    """What the levels panel shows per row: the conclusion, or conclusion/parameter where the
    bound scales with the measured parameter (e.g. γ/β)."""
    if relation.scales_with_parameter:
        return [r[key] / r["parameter"] if r["parameter"] else np.nan for r in rows]
    return [r[key] for r in rows]


def _param_of(row: dict) -> float:
    """A row's parameter bin edge, NaN for none (``""`` in a result's rows, NaN once read)."""
    p = row.get("param", np.nan)
    return np.nan if p == "" or p is None else float(p)


def _claim(relation, x, param: float) -> np.ndarray:
    """The claimed bound at ``x`` in plotted units: ``bound(x, param)``, or ``bound(x, 1)``
    where the bound scales with the measured parameter."""
    return registry.bound_at(relation, x, 1.0 if relation.scales_with_parameter else param)


def _slack(bound: float, value: float) -> float:
    """``bound / value`` in float64, :func:`jaxpriv.registry.slack` itself."""
    import jax

    with jax.enable_x64(True):
        return float(registry.slack(bound, value))


def sweep_envelope(relation, rows: list[dict], param: float) -> list[dict]:
    """The sweep envelope as the figures draw it: per premise bin, the running supremum
    ``E(x) = sup{value : premise ≤ x, condition holds}`` (SPEC §4) over the sweep cells
    comparable with a claim at condition parameter ``param`` (cells whose parameter bin lies
    at or below it; every cell where the bound scales with the measured parameter, whose value
    is then the ratio conclusion/parameter).

    Returns:
      One row per premise bin holding a comparable cell, sorted by ``x`` (the bin's upper
      edge). Each is the row of the cell that attains the running supremum (its ``premise``,
      ``parameter``, ``conclusion``, ``witness``, ``count``), with ``x`` the bin, ``cell_x``
      the attaining cell's bin, ``value`` the running supremum (non-decreasing in ``x``),
      ``bound`` the claim at ``x`` in plotted units and ``slack`` = ``bound / value`` (the
      least slack the sweep shows at ``x``; ``+inf`` where ``value`` is 0, 0 where it is
      unbounded).
    """
    ratio = relation.scales_with_parameter
    per_bin: dict[float, dict] = {}
    for r in rows:
        p = _param_of(r)
        if not (ratio or not np.isfinite(p) or p <= param + 1e-12):
            continue
        value = _normalized(relation, [r])[0]
        if not np.isnan(value) and (r["x"] not in per_bin or value > per_bin[r["x"]]["value"]):
            per_bin[r["x"]] = {**r, "value": float(value)}
    xs = sorted(per_bin)
    if not xs:
        return []
    claim = _claim(relation, xs, param)
    envelope, best = [], None
    for x, bound in zip(xs, claim):
        if best is None or per_bin[x]["value"] > best["value"]:
            best = per_bin[x]
        envelope.append({**best, "x": x, "cell_x": best["x"], "bound": float(bound),
                         "slack": _slack(float(bound), best["value"])})
    return envelope


def certificate_context(relation, config) -> dict:
    """The ``prior`` and ``options`` a run's certified curve is for (a search config, or its
    ``summary.json`` dict; a sweep's priors are free, so the relation's own setting)."""
    get = config.get if isinstance(config, dict) else (lambda key: getattr(config, key, None))
    options = dict(relation.options)
    if "law" in relation.notion_params and isinstance(get("law"), str):
        options["law"] = get("law")
    return {"prior": get("prior") or None, "options": options}


def claimed_and_certified(relation, grid: np.ndarray, param: float, n: int,
                          r: int | None = None, context: dict | None = None):
    """The claimed bound on ``grid`` and the certified supremum in the same units (the ratio
    conclusion/parameter where the bound scales with the measured parameter), as the figures
    draw them.

    Args:
      context: ``prior`` and ``options`` for :func:`jaxpriv.engines.certify.envelope`
        (:func:`certificate_context`).

    Returns:
      ``(claim, certified, min_slack, upper)``, each of ``grid``'s shape; ``certified``,
      ``min_slack`` and ``upper`` are ``None`` without a closed form, ``certified`` is ``inf``
      where the conclusion is unbounded at that premise (certified least slack 0), and
      ``upper`` is the certified bracket's upper end where the envelope is only bracketed
      (``None`` where exact everywhere).
    """
    from jaxpriv.engines import certify

    claim = _claim(relation, grid, param)
    cert = certify.envelope(relation, grid, param, n=n, r=r, **(context or {}))
    if cert is None:
        return claim, None, None, None
    min_slack = np.asarray(cert.min_slack, np.float64)
    # the certified supremum itself, except where it is not a conclusion level (a ratio
    # envelope: claim / least slack there)
    conclusion = np.asarray(cert.conclusion, np.float64)
    as_ratio = np.isnan(conclusion)
    certified = np.divide(claim, min_slack, out=np.where(as_ratio, np.inf, conclusion),
                          where=as_ratio & (min_slack > 0))
    upper = None if np.all(cert.exact) or as_ratio.any() else np.asarray(cert.upper, np.float64)
    return claim, certified, min_slack, upper


# -- what a relation's panels show -----------------------------------------------------------

def draw_mechanism(top, bottom, relation, *, param: float, n: int, r: int | None = None,
                   sweep_rows: list[dict] | None = None, search_rows: list[dict] | None = None,
                   compact: bool = False, search_note: str = "",
                   context: dict | None = None) -> None:
    """A mechanism relation's two panels: the claimed bound, the certified supremum where a
    closed form is known, the sweep envelope (running supremum, :func:`sweep_envelope`) and
    the search envelope on ``top``; their slacks on ``bottom`` (log).

    Args:
      top, bottom: the levels and slack axes (sharing x).
      relation: a mechanism :class:`jaxpriv.registry.Relation`.
      param: the condition parameter the claim is drawn at (ignored where the bound scales
        with the measured parameter).
      n, r: the mechanism shape the certified curve is for.
      sweep_rows, search_rows: ``envelope.csv`` rows of a sweep and of a search (either may
        be empty).
      compact: smaller type, for the figure grid.
      search_note: appended to the search's legend entry (e.g. the restarts).
      context: the prior setting and notion options of the certified curve
        (:func:`certificate_context`).
    """
    sizes = _sizes(compact)
    sweep = sweep_envelope(relation, sweep_rows or [], param)
    search = sorted(search_rows or [], key=lambda row: row["x"])
    search_x = np.array([row["x"] for row in search], np.float64)
    search_v = np.array(_normalized(relation, search), np.float64)
    sweep_x = np.array([row["x"] for row in sweep], np.float64)
    sweep_v = np.array([row["value"] for row in sweep], np.float64)
    right = max([*search_x, *sweep_x, 1e-3])
    grid = np.linspace(0, right, 400)[1:]
    claim, sup, min_slack, upper = claimed_and_certified(relation, grid, param, n, r, context)

    condition = (f" ({relation.parameter} ≤ {param:g})" if relation.parameter and param
                 and not relation.scales_with_parameter else "")
    top.plot(grid, claim, **{**CLAIM, "lw": sizes["lw"]}, label=f"claimed bound{condition}")
    certified = []
    if sup is not None:
        finite = np.isfinite(sup)
        certified = list(sup[finite])
        if finite.any():
            top.plot(grid[finite], sup[finite], "-", color=CERTIFIED, lw=sizes["lw"],
                     label=f"certified {'lower end' if upper is not None else 'supremum'} "
                           f"(n = {n})")
        if upper is not None:
            top.fill_between(grid, sup, upper, color=CERTIFIED, alpha=0.2, lw=0,
                             label="certified bracket of the supremum")
            certified += list(upper[np.isfinite(upper)])
    ceiling = _value_axis(top, claim, [*sweep_v, *certified, *search_v])
    if len(sweep):
        top.step(sweep_x, _at_most(sweep_v, ceiling), where="post", color=SWEEP,
                 lw=sizes["lw"], label="sweep envelope (sup over premise ≤ x)")
        _unbounded(top, sweep_x, sweep_v, SWEEP, sizes, "top")
    if len(search):
        top.plot(search_x, search_v, "o", ms=sizes["ms"], color=SEARCH,
                 label="search envelope" + search_note)
        _unbounded(top, search_x, search_v, SEARCH, sizes, "top")
    if np.isposinf(sweep_v).any() or np.isposinf(search_v).any():
        top.annotate("▲ on the edge: unbounded", xy=(0.0, 1.0), xycoords="axes fraction",
                     xytext=(3, -3), textcoords="offset points", ha="left", va="top",
                     fontsize=sizes["text"], color="0.3")
    top.set_xlim(0, right)

    search_slack = [row["slack"] for row in search]
    slack = _Slack(bottom, [min_slack if min_slack is not None else [],
                            [row["slack"] for row in sweep], search_slack], sizes)
    if min_slack is not None:
        slack.curve(grid, min_slack, CERTIFIED, label="certified least slack")
    if len(sweep):
        slack.points(sweep_x, [row["slack"] for row in sweep], "s", SWEEP, alpha=0.8,
                     label="sweep slack")
    if len(search):
        slack.points(search_x, search_slack, "o", SEARCH, label="search slack")
    slack.finish(compact)
    _style(top, bottom, relation, sizes, premise_label(relation))


def draw_statistical(top, bottom, relation, sweep_rows: list[dict] | None = None,
                     search_rows: list[dict] | None = None, compact: bool = False) -> None:
    """A statistical relation's two panels, per premise level. Where its slack underflows
    (``relation.log_slack``): log10 slack of the worst setting found on top (claimed bound =
    0), that setting's parameter (``relation.parameter_label``) underneath. Otherwise the worst
    value found against the claimed bound (``relation.bound_curve`` over ``relation.x_range``)
    on top, the slack underneath."""
    sizes = _sizes(compact)
    log10 = math.log(10)
    runs = [(rows, marker, name, colour) for rows, marker, name, colour in
            ((sweep_rows, "s", "sweep", SWEEP), (search_rows, "o", "search", SEARCH)) if rows]
    xs_all = [row["premise"] for rows, *_ in runs for row in rows]
    if relation.log_slack:
        for rows, marker, name, colour in runs:
            rows = sorted(rows, key=lambda row: row["premise"])
            xs = [row["premise"] for row in rows]
            top.plot(xs, [row["log_slack"] / log10 for row in rows], marker, ms=sizes["ms"],
                     color=colour, alpha=0.8 if name == "sweep" else 1.0,
                     label=f"{name}: worst setting")
            bottom.plot(xs, [max(row["parameter"], 1e-300) for row in rows], marker,
                        ms=sizes["ms"] * 0.85, mfc="none", color=colour,
                        label=f"{name}: its {relation.parameter_label}")
        low, high = top.get_ylim()
        top.axhspan(min(low, -1.0), 0.0, color=VIOLATION, alpha=0.06, lw=0)
        top.axhline(0.0, **{**CLAIM, "lw": sizes["lw"]}, label="claimed bound (log10 slack 0)")
        top.annotate("violated below", xy=(1.0, 0.0), xycoords=("axes fraction", "data"),
                     xytext=(-3, -2), textcoords="offset points", ha="right", va="top",
                     fontsize=sizes["text"], color=VIOLATION)
        top.set_ylim(min(low, -1.0), max(high, 0) + 0.06 * (max(high, 0) - min(low, -1.0)))
        _style(top, bottom, relation, sizes, premise_label(relation))
        top.set_ylabel("log10 slack" if compact else
                       f"log10 slack = log10(claimed / exact)\n{relation.conclusion}",
                       fontsize=sizes["label"])
        _log_axis(bottom)
        bottom.set_ylabel(f"{relation.parameter_label}\n(worst setting, log)",
                          fontsize=sizes["label"])
        bottom.grid(alpha=0.3)
        return
    high = relation.x_range[1] if relation.x_range else max(xs_all + [1.0])
    grid = np.linspace(1e-3, 0.99 * high, 300)
    if relation.bound_curve is not None:
        with jax.enable_x64(True):
            claim = np.asarray(relation.bound_curve(jnp.asarray(grid)), np.float64)
        top.plot(grid, claim, **{**CLAIM, "lw": sizes["lw"]}, label="claimed bound")
    for rows, marker, name, colour in runs:
        rows = sorted(rows, key=lambda row: row["premise"])
        top.plot([row["premise"] for row in rows], [row["conclusion"] for row in rows], marker,
                 ms=sizes["ms"], color=colour, alpha=0.8 if name == "sweep" else 1.0,
                 label=f"{name}: worst case")
    top.set_ylim(bottom=0)
    slack = _Slack(bottom, [[row["slack"] for row in rows] for rows, *_ in runs], sizes)
    for rows, marker, name, colour in runs:
        slack.points([row["premise"] for row in rows], [row["slack"] for row in rows], marker,
                     colour, alpha=0.8 if name == "sweep" else 1.0, label=f"{name} slack")
    slack.finish(compact)
    _style(top, bottom, relation, sizes, premise_label(relation))


# -- single-run figures (a run directory's envelope.png) -------------------------------------

def plot_envelope(path: Path, rows: list[dict], config, relation) -> None:
    """A sweep's figure: claimed bound and sweep envelope (running supremum over premise ≤ x),
    one colour per condition-parameter bin where the sweep bins the parameter; slack below."""
    plt = _pyplot()
    fig = plt.figure(figsize=(7, 6.2), layout="constrained")
    top, bottom = _panels(fig)
    params = sorted({_param_of(r) for r in rows if np.isfinite(_param_of(r))})
    detail = (f"{config.count:,} random {config.n}×{config.m} mechanisms "
              f"(a sweep: lower bound on the envelope)")
    if relation.scales_with_parameter or len(params) <= 1:
        param = params[0] if params and not relation.scales_with_parameter else \
            float(relation.parameter_limit or 0.0)
        draw_mechanism(top, bottom, relation, param=param, n=config.n,
                       r=getattr(config, "r", None) or None, sweep_rows=rows)
    else:
        sizes = _sizes(False)
        colours = plt.cm.viridis(np.linspace(0, 0.85, len(params)))
        curves = [(p, sweep_envelope(relation, rows, p)) for p in params]
        right = max([row["x"] for _, env in curves for row in env] + [1e-3])
        grid = np.linspace(0, right, 300)[1:]
        claims = {p: _claim(relation, grid, p) for p in params}
        ceiling = _value_axis(top, np.concatenate(list(claims.values())),
                              [row["value"] for _, env in curves for row in env])
        slack = _Slack(bottom, [[row["slack"] for row in env] for _, env in curves], sizes)
        for colour, (p, env) in zip(colours, curves):
            top.plot(grid, claims[p], "--", color=colour, lw=1.0)
            if env:
                values = [row["value"] for row in env]
                top.step([row["x"] for row in env], _at_most(values, ceiling), where="post",
                         color=colour, lw=1.3, label=f"{relation.parameter} ≤ {p:.3g}")
                _unbounded(top, [row["x"] for row in env], values, colour, sizes, "top")
                slack.points([row["x"] for row in env], [row["slack"] for row in env], "s",
                             colour)
        top.plot([], [], **CLAIM, label="claimed bound (dashed, per bin)")
        top.set_xlim(0, right)
        slack.finish(False)
        _style(top, bottom, relation, sizes, premise_label(relation))
        detail += "; sweep envelope per parameter bin"
    _legend(top, bottom, _sizes(False))
    fig.suptitle(_title(relation, detail), fontsize=9)
    _save(fig, path, dpi=120)


def plot_search(path: Path, rows: list[dict], config, relation,
                sweep_rows: list[dict] | None = None) -> None:
    """A search's figure: claimed bound, search envelope, certified curve and (optionally) the
    sweep envelope; slack underneath on a log scale."""
    plt = _pyplot()
    fig = plt.figure(figsize=(7, 6.2), layout="constrained")
    top, bottom = _panels(fig)
    draw_mechanism(top, bottom, relation, param=config.param, n=config.n,
                   r=getattr(config, "r", None) or None, sweep_rows=sweep_rows,
                   search_rows=rows, search_note=f" ({config.restarts} restarts/point)",
                   context=certificate_context(relation, config))
    _legend(top, bottom, _sizes(False))
    law = ", law " + config.law if "law" in relation.notion_params else ""
    fig.suptitle(_title(relation, f"adversarial search, {config.n}×{config.m} mechanisms{law}"),
                 fontsize=9)
    _save(fig, path, dpi=120)


def plot_statistical(path: Path, rows: list[dict], config, relation) -> None:
    """A statistical run's figure (:func:`draw_statistical` with one run's rows)."""
    plt = _pyplot()
    fig = plt.figure(figsize=(7, 6.2), layout="constrained")
    top, bottom = _panels(fig)
    sweep = config.mode == "sweep"
    draw_statistical(top, bottom, relation, rows if sweep else None, None if sweep else rows)
    _legend(top, bottom, _sizes(False))
    what = (f"{config.count:,} random settings" if sweep else f"search over {len(rows)} ε points")
    fig.suptitle(_title(relation, what), fontsize=9)
    _save(fig, path, dpi=120)

