"""The outputs layer: run-directory files written from engine results (``summary.json``,
``envelope.csv``, figures) and the audit report. It reads what the engines computed and
verified (their witnesses are saved by the engines); engines never import it.

Output contract (relied on by scripts and the audit):

* ``summary.json``: ``relation``, ``count``, ``seconds``, ``mechanisms_per_second``,
  ``worst_slack``, ``violations`` (witness paths relative to the run directory), ``devices``,
  ``versions``, and more.
* ``envelope.csv``: one row per non-empty (premise bin × parameter bin) cell with columns
  ``x`` (the bin's upper premise edge), ``param`` (upper parameter edge), ``premise``,
  ``parameter``, ``conclusion`` (float64 levels of the cell's best witness), ``bound``
  (the claim at the cell's upper edges), ``slack`` (``bound / conclusion``), ``count``,
  ``witness`` (file relative to the run directory).

Every number written here is a float64 level the engine recomputed from the saved witness.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import platform
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxpriv import registry
from jaxpriv.engines import io

ENVELOPE_COLUMNS = ("x", "param", "premise", "parameter", "conclusion", "bound", "slack", "count",
                    "witness")


def _versions() -> dict[str, str]:
    import matplotlib
    import optax

    from jaxpriv.core.version import __version__
    from jaxpriv.kernels import native
    # Which float32 screen ran: the native and XLA kernels agree to rounding, not bitwise.
    return {"jaxpriv": __version__, "jax": jax.__version__, "numpy": np.__version__,
            "optax": optax.__version__, "matplotlib": matplotlib.__version__,
            "python": platform.python_version(), "native_kernel": native.state()}


def _about(config, relation) -> dict:
    return {"relation": config.relation, "statement": relation.statement,
            "sources": [str(s) for s in relation.sources]}


def _provenance(config) -> dict:
    return {"config": dataclasses.asdict(config), "devices": [str(d) for d in jax.devices()],
            "versions": _versions()}


def write_sweep(out_dir: Path, result, relation) -> dict:
    """Write ``summary.json``, ``envelope.csv`` and ``envelope.png`` for a finished sweep (of
    settings: :func:`write_statistical`)."""
    if relation.kind == "statistical":
        return write_statistical(out_dir, result, relation)
    config = result.config
    rows = result.rows
    write_csv(out_dir / "envelope.csv", ENVELOPE_COLUMNS, rows)
    worst, where = result.worst_slack, result.worst
    summary = {
        **_about(config, relation),
        "count": config.count,
        "evaluated_with_condition": int(result.state.evaluated),
        "seconds": result.seconds,
        "mechanisms_per_second": config.count / result.seconds if result.seconds else None,
        "compile_seconds": result.compile_seconds,
        "worst_slack": worst,
        "worst": where,
        "violation_count": result.violation_count,
        "violations": [v["file"] for v in result.violations if v["file"]],
        "violation_details": result.violations,
        "envelope_kind": "lower bound (random sweep)",
        **_provenance(config),
    }
    write_json(out_dir / "summary.json", summary)
    plot_envelope(out_dir / "envelope.png", rows, config, relation)
    return summary


# --------------------------------------------------------------------------------------------
# searches
# --------------------------------------------------------------------------------------------

SEARCH_COLUMNS = ENVELOPE_COLUMNS + ("certified_slack", "gap", "certified_slack_lower")
"""``envelope.csv`` of a search: the sweep's columns (``x`` is the grid point, ``count`` the
restarts) plus ``certified_slack`` (least possible slack, where a closed form is known) and
``gap`` (``1 − certified_slack/slack``: the search's relative shortfall; 0 = optimal), and
``certified_slack_lower``, the certified least slack's lower end (equal to ``certified_slack``
where the envelope is exact, below it where only a bracket is known)."""


def write_search(out_dir: Path, result, relation,
                 sweep_dir: str | Path | None = None) -> dict:
    """Write ``summary.json``, ``envelope.csv`` and ``envelope.png`` for a finished search (of
    settings: :func:`write_statistical`)."""
    if relation.kind == "statistical":
        return write_statistical(out_dir, result, relation)
    config = result.config
    rows = result.rows
    write_csv(out_dir / "envelope.csv", SEARCH_COLUMNS,
              [{k: ("" if isinstance(v, float) and np.isnan(v) else v) for k, v in row.items()}
               for row in rows])
    slacks = [r["slack"] for r in rows if np.isfinite(r["slack"])]
    slacks += [v["slack"] for v in result.violations]
    gaps = [r["gap"] for r in rows if np.isfinite(r["gap"])]
    restart_steps = result.steps * config.restarts * len(config.grid)
    rate = restart_steps / result.seconds if result.seconds else None
    certified = bool(gaps) and len(gaps) == len(rows)
    bracket = certified and any(
        np.isfinite(r.get("certified_slack_lower", np.nan)) and not np.isclose(
            r["certified_slack_lower"], r["certified_slack"], rtol=1e-9, atol=0.0) for r in rows)
    summary = {
        **_about(config, relation),
        "count": config.restarts * len(config.grid),
        "grid_points": len(config.grid),
        "restarts": config.restarts,
        "steps": result.steps,
        "restart_steps": restart_steps,
        "seconds": result.seconds,
        "restart_steps_per_second": rate,
        "mechanisms_per_second": rate,
        "compile_seconds": result.compile_seconds,
        "worst_slack": min(slacks) if slacks else None,
        "violation_count": len(result.violations),
        "violations": [v["file"] for v in result.violations if v["file"]],
        "violation_details": result.violations,
        "envelope_kind": ("certified bracket: gap reported against its reached end" if bracket
                          else "certified: closed form, search gap reported" if certified
                          else "lower bound (adversarial search)"),
        "max_gap": max(gaps) if gaps else None,
        **_provenance(config),
    }
    write_json(out_dir / "summary.json", summary)
    sweep_rows = read_envelope(Path(sweep_dir)) if sweep_dir is not None else None
    plot_search(out_dir / "envelope.png", rows, config, relation, sweep_rows)
    return summary


def search_writer(sweep_dir: str | Path | None):
    """:func:`write_search` with the sweep directory whose envelope the plot shows beside the
    search's, as a search's ``write`` callback."""
    def write(out_dir: Path, result, relation) -> dict:
        return write_search(out_dir, result, relation, sweep_dir)
    return write


def write_csv(path: Path, columns, rows) -> None:
    """``rows`` (dicts) as a CSV file with ``columns``, written atomically."""
    def write(f):
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    io.atomic_write(path, write, newline="")


def write_json(path: Path, data) -> None:
    """``data`` as indented JSON, written atomically (a kill leaves the old file or none)."""
    io.atomic_write(path, lambda f: f.write(json.dumps(data, indent=1) + "\n"))


def read_envelope(run_dir: Path) -> list[dict]:
    """The rows of a run directory's ``envelope.csv`` (numbers as floats, blanks as NaN)."""
    path = run_dir / "envelope.csv"
    if not path.exists():
        from jaxpriv.core.errors import InputError
        raise InputError(f"{run_dir}: no envelope.csv (is it a finished sweep or search?)")
    try:
        with open(path) as f:
            return [{k: (v if k == "witness" else (np.nan if v == "" else float(v)))
                     for k, v in row.items()} for row in csv.DictReader(f)]
    except (ValueError, TypeError, UnicodeDecodeError, csv.Error) as error:
        from jaxpriv.core.errors import InputError
        raise InputError(f"{path}: not an envelope jaxpriv wrote ({type(error).__name__}: "
                         f"{error})") from None


# --------------------------------------------------------------------------------------------
# statistical relations (subject: a setting of an estimator)
# --------------------------------------------------------------------------------------------

STATISTICAL_COLUMNS = ENVELOPE_COLUMNS + ("log_slack",)
"""``envelope.csv`` of a statistical run: ``x`` is the premise bin's upper edge (sweep) or the
grid point (search), ``premise`` the witness's level, ``parameter`` its parameter (e.g. ``Tκ₁``),
``count`` the settings behind the row, ``log_slack`` the natural log of the slack (which can
underflow float64)."""


def write_statistical(out_dir: Path, result, relation) -> dict:
    """Write ``summary.json``, ``envelope.csv`` and ``envelope.png`` for a finished statistical
    sweep or search (:mod:`jaxpriv.engines.settings`)."""
    config = result.config
    rows = result.rows
    write_csv(out_dir / "envelope.csv", STATISTICAL_COLUMNS, rows)
    slacks = [r["slack"] for r in rows] + [v["slack"] for v in result.violations]
    settings = config.count if config.mode == "sweep" else sum(r["count"] for r in rows)
    summary = {
        **_about(config, relation),
        "mode": config.mode,
        "count": settings,
        "seconds": result.seconds,
        "settings_per_second": settings / result.seconds if result.seconds else None,
        "mechanisms_per_second": settings / result.seconds if result.seconds else None,
        "worst_slack": min(slacks) if slacks else None,
        "worst_log_slack": min(r["log_slack"] for r in rows) if rows else None,
        "violation_count": result.violation_count,
        "violations": [v["file"] for v in result.violations if v["file"]],
        "violation_details": result.violations,
        "envelope_kind": ("lower bound on the worst case (random sweep)" if config.mode == "sweep"
                          else "lower bound on the worst case (search)"),
        **result.extra,
        **_provenance(config),
    }
    write_json(out_dir / "summary.json", summary)
    plot_statistical(out_dir / "envelope.png", rows, config, relation)
    return summary


# --------------------------------------------------------------------------------------------
# figures
# --------------------------------------------------------------------------------------------
#
# Every figure of a relation is two panels sharing the premise axis: on top the levels (the
# claimed bound dashed black, the certified supremum green where a closed form is known, the
# sweep envelope as an orange step line, the search envelope as blue dots); underneath the
# slack on a log axis (the same colours, the certified least slack as a green curve, the red
# line slack = 1, violations below it). A relation whose bound scales with the measured
# parameter (``scales_with_parameter``: conclusion ≤ f(x)·parameter) is drawn as the ratio
# conclusion/parameter against f(x) = bound(x, 1). Axis units come from the notions' records.

CLAIM = {"color": "k", "ls": "--", "lw": 1.3}
CERTIFIED = "tab:green"
SWEEP = "tab:orange"
SEARCH = "tab:blue"
VIOLATION = "tab:red"
PANELS = {"height_ratios": [2, 1]}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _unit(key: str) -> str:
    """``" (nats)"``-style suffix naming a notion's unit (``" (probability)"``, ``" (√nats)"``);
    empty for a dimensionless notion and for a premise or conclusion that is not a notion key
    (a statistical relation's, given in words)."""
    notion = registry.NOTIONS.get(key)
    return f" ({notion.unit})" if notion is not None and notion.unit else ""


def premise_label(relation) -> str:
    """The premise axis label: ``premise: mbp level x (nats)``."""
    if relation.kind == "statistical":
        return f"premise: {relation.premise}"
    return f"premise: {relation.premise} level x{_unit(relation.premise)}"


def value_label(relation) -> str:
    """The levels axis label: the conclusion and its unit, or the ratio a relation whose bound
    scales with its parameter is drawn as (``relation.ratio_label``)."""
    if relation.scales_with_parameter:
        return relation.ratio_label or f"{relation.conclusion} / {relation.parameter}"
    if relation.kind == "statistical":
        return relation.conclusion
    return f"conclusion: {relation.conclusion} level{_unit(relation.conclusion)}"


SLACK_LABEL = "slack = bound / value"


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
    with jax.enable_x64(True):
        p = 1.0 if relation.scales_with_parameter else param
        return np.asarray(relation.bound(jnp.asarray(np.asarray(x, np.float64)),
                                         jnp.float64(p)), np.float64)


def _slack(bound: float, value: float) -> float:
    """``bound / value`` in float64 as :func:`jaxpriv.registry.slack` defines it (``x/0`` and
    an infinite bound: ``+inf``; a finite bound over an unbounded value: 0)."""
    if value <= 0 or math.isinf(bound):
        return math.inf
    return bound / value


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


# -- axes ------------------------------------------------------------------------------------

def _panels(container):
    """Two stacked axes sharing the premise axis (levels 2 : slack 1) on a figure or subfigure."""
    top, bottom = container.subplots(2, 1, sharex=True, gridspec_kw=PANELS)
    top.tick_params(labelbottom=False)
    return top, bottom


def _sizes(compact: bool) -> dict:
    return ({"tick": 6, "label": 7, "text": 6, "ms": 3.0, "lw": 1.1} if compact else
            {"tick": 8, "label": 9, "text": 8, "ms": 4.0, "lw": 1.3})


def _value_axis(ax, bound_values, found_values) -> float | None:
    """Linear from 0, unless the claimed bound and what was found differ by decades (then log,
    so both stay readable). Returns the top of the axis (``None`` with nothing to show)."""
    bound = [v for v in bound_values if np.isfinite(v) and v > 0]
    found = [v for v in found_values if np.isfinite(v) and v > 0]
    if not bound and not found:
        return None
    top = max(bound + found)
    if bound and found and max(max(bound) / max(found), max(found) / max(bound)) > 20:
        ax.set_yscale("log")
        ax.set_ylim(max(min(bound + found), top * 1e-12) / 2, 2 * top)
        return 2 * top
    ax.set_ylim(0, 1.12 * top)
    return 1.12 * top


def _at_most(values, ceiling: float | None) -> np.ndarray:
    """``values`` with ``+inf`` (an unbounded level) drawn on the axis top, so a step line
    runs along the panel's edge there (with :func:`_unbounded`'s marks) instead of breaking."""
    values = np.asarray(values, np.float64)
    return values if ceiling is None else np.where(np.isposinf(values), ceiling, values)


def _unbounded(ax, x, values, colour: str, sizes: dict, where: str) -> None:
    """Mark the ``x`` where ``values`` are ``+inf`` (``where="top"``: an unbounded level) or 0
    (``"bottom"``: slack 0) on the panel's top or bottom edge, pointing off the panel."""
    x = np.asarray(x, np.float64)
    hit = np.isposinf(values) if where == "top" else np.asarray(values) == 0
    if hit.any():
        ax.plot(x[hit], np.full(hit.sum(), 1.0 if where == "top" else 0.0),
                "^" if where == "top" else "v", color=colour, ms=sizes["ms"] * 1.1, ls="",
                transform=ax.get_xaxis_transform(), clip_on=False, zorder=5)


def _nice_ticks(low: float, high: float) -> list[float]:
    """A few round log-axis ticks between ``low`` and ``high`` (an axis of under two decades)."""
    for mantissas in ((1, 2, 5), (1, 1.5, 2, 3, 5, 7), (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9)):
        ticks = [m * 10.0 ** e for e in range(math.floor(math.log10(low)) - 1,
                                                math.ceil(math.log10(high)) + 1)
                 for m in mantissas if low <= m * 10.0 ** e <= high]
        if len(ticks) >= 3:
            return ticks
    return ticks


def _log_axis(ax) -> None:
    """Log scale; plain-number tick labels at a few round values when the axis spans less
    than two decades."""
    import matplotlib.ticker as ticker

    ax.set_yscale("log")
    low, high = ax.get_ylim()
    if high / max(low, 1e-300) < 100:
        ax.yaxis.set_major_locator(ticker.FixedLocator(_nice_ticks(low, high)))
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(ticker.NullFormatter())


class _Slack:
    """The slack panel: a log axis covering every finite positive slack, 1 and the band below
    it where the claim is violated; a slack of 0 (an unbounded conclusion under a finite claim)
    is marked on the panel's bottom edge, an infinite one (a vacuous claim) not at all."""

    def __init__(self, ax, series, sizes: dict):
        values = [float(v) for s in series for v in np.ravel(np.asarray(s, np.float64))]
        positive = [v for v in values if np.isfinite(v) and v > 0]
        low, high = min(positive + [1.0]), max(positive + [1.0])
        self.ax, self.sizes = ax, sizes
        self.zero = any(v == 0 for v in values)
        high = max(high * 1.5, 2.0)
        # the band below 1 takes at least an eighth of the panel
        self.limits = (min(low / 1.5, 0.5, high ** (-1 / 7)), high)

    def points(self, x, slack, marker: str, colour: str, **style) -> None:
        slack = np.asarray(slack, np.float64)
        self.ax.plot(x, np.where(slack > 0, slack, np.nan), marker, ls="", color=colour,
                     ms=self.sizes["ms"] * 0.85, **style)
        _unbounded(self.ax, x, slack, colour, self.sizes, "bottom")

    def curve(self, x, slack, colour: str, **style) -> None:
        slack = np.asarray(slack, np.float64)
        self.ax.plot(x, np.where(slack > 0, slack, np.nan), "-", color=colour,
                     lw=self.sizes["lw"], **style)
        if (slack == 0).any():
            self.ax.plot(x, np.where(slack == 0, 0.0, np.nan), "-", color=colour,
                         lw=3 * self.sizes["lw"], transform=self.ax.get_xaxis_transform(),
                         clip_on=False, zorder=4)

    def finish(self, compact: bool) -> None:
        ax, sizes = self.ax, self.sizes
        ax.set_yscale("log")
        ax.set_ylim(*self.limits)
        ax.axhspan(self.limits[0], 1.0, color=VIOLATION, alpha=0.07, lw=0)
        ax.axhline(1.0, color=VIOLATION, lw=1.0)
        ax.annotate("violated below" + ("; on the edge: slack 0" if self.zero else ""),
                    xy=(0.0, 1.0), xycoords=("axes fraction", "data"), xytext=(3, -2),
                    textcoords="offset points", ha="left", va="top", fontsize=sizes["text"],
                    color=VIOLATION)
        _log_axis(ax)
        ax.set_ylabel("slack (log)" if compact else SLACK_LABEL,
                      fontsize=sizes["label"])
        ax.grid(alpha=0.3, which="major")


def _style(top, bottom, relation, sizes: dict, xlabel: str) -> None:
    for ax in (top, bottom):
        ax.tick_params(labelsize=sizes["tick"])
    top.grid(alpha=0.3)
    top.set_ylabel(value_label(relation), fontsize=sizes["label"])
    bottom.set_xlabel(xlabel, fontsize=sizes["label"])


def _legend(top, bottom, sizes: dict) -> None:
    """One legend for both panels, outside the data (above the levels panel)."""
    handles, labels = top.get_legend_handles_labels()
    more = bottom.get_legend_handles_labels()
    seen = dict(zip(labels + more[1], handles + more[0]))
    top.legend(seen.values(), seen.keys(), fontsize=sizes["text"], ncol=2, frameon=False,
               loc="lower left", bbox_to_anchor=(0.0, 1.01, 1.0, 0.0), mode="expand",
               borderaxespad=0.0)


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


def _title(relation, detail: str = "") -> str:
    import textwrap

    sources = "; ".join(str(s) for s in relation.sources)
    return "\n".join(textwrap.wrap(f"{relation.id}: {relation.statement}", 90)
                     + textwrap.wrap(" — ".join(t for t in (sources, detail) if t), 100))


def _save(fig, path: Path, dpi: int = 130) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    _pyplot().close(fig)
    return path


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


# --------------------------------------------------------------------------------------------
# the audit report (jaxpriv audit)
# --------------------------------------------------------------------------------------------

FIGURES = "figures"


def _run(out: Path, rid: str, kind: str) -> tuple[dict, list[dict]]:
    directory = out / rid / kind
    return json.loads((directory / "summary.json").read_text()), read_envelope(directory)


def draw_relation(container, out: Path, rid: str, compact: bool = False):
    """Draw one relation's audit figure on ``container`` (a matplotlib ``Figure`` or
    ``SubFigure``) as two panels sharing the premise axis: the claimed bound, the certified
    supremum where one exists, the sweep envelope (running supremum) and the search envelope on
    top; their slacks on a log axis below (:func:`draw_mechanism`, :func:`draw_statistical`).

    Args:
      container: where the two axes are added.
      out: the audit directory (``out/<rid>/sweep``, ``out/<rid>/search``).
      rid: relation id.
      compact: smaller type, a short title and no legend, for the figure grid.

    Returns:
      The ``(top, bottom)`` axes.
    """
    relation = registry.get(rid)
    _, sweep_rows = _run(out, rid, "sweep")
    search_summary, search_rows = _run(out, rid, "search")
    top, bottom = _panels(container)
    if relation.kind == "statistical":
        draw_statistical(top, bottom, relation, sweep_rows, search_rows, compact=compact)
    else:
        config = search_summary["config"]
        draw_mechanism(top, bottom, relation, param=float(config.get("param") or 0.0),
                       n=config["n"], r=config.get("r") or None, sweep_rows=sweep_rows,
                       search_rows=search_rows, compact=compact,
                       context=certificate_context(relation, config))
    if compact:
        container.suptitle(f"{rid} ({relation.sources[0]})" if relation.sources else rid,
                           fontsize=8)
    else:
        _legend(top, bottom, _sizes(False))
        container.suptitle(_title(relation), fontsize=9)
    return top, bottom


def plot_relation(out: Path, rid: str, path: Path) -> Path:
    """One relation's report figure, written to ``path``."""
    plt = _pyplot()
    fig = plt.figure(figsize=(7, 6.2), layout="constrained")
    draw_relation(fig, Path(out), rid)
    return _save(fig, path, dpi=120)


def grid_legend() -> list:
    """The figure grid's shared key."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    return [Line2D([], [], **CLAIM, label="claimed bound"),
            Line2D([], [], color=CERTIFIED, label="certified supremum / least slack"),
            Line2D([], [], color=SWEEP, marker="s", ms=4, mfc=SWEEP,
                   label="sweep: envelope = sup over premise ≤ x (line), slack (■)"),
            Line2D([], [], ls="", marker="o", color=SEARCH, label="search: envelope, slack"),
            Line2D([], [], color=VIOLATION, label="slack = 1"),
            Patch(color=VIOLATION, alpha=0.12, label="violated (slack < 1)")]


def plot_grid(out: Path, path: Path, ids: list[str] | None = None, columns: int = 4) -> Path:
    """Every audited relation in one publication-style figure: a grid of two-panel cells
    (levels over slack, sharing the premise axis), one shared key."""
    plt = _pyplot()
    out = Path(out)
    ids = ids or [rid for rid in registry.REGISTRY if (out / rid / "search" / "summary.json")
                  .exists() and (out / rid / "sweep" / "summary.json").exists()]
    if not ids:
        from jaxpriv.core.errors import InputError
        raise InputError(f"{out}: no finished audit runs (DIR/<id>/sweep, DIR/<id>/search)")
    columns = min(columns, len(ids))
    rows = -(-len(ids) // columns)
    fig = plt.figure(figsize=(4.1 * columns, 4.0 * rows + 0.5), layout="constrained")
    cells = fig.subfigures(rows, columns, squeeze=False, wspace=0.02, hspace=0.02)
    for cell, rid in zip(cells.flat, ids):
        draw_relation(cell, out, rid, compact=True)
    key = grid_legend()
    fig.legend(handles=key, loc="outside lower center", ncol=len(key) // 2 if columns < 4
               else len(key), fontsize=8, frameon=False)
    return _save(fig, path, dpi=130)


def _slack_text(v: dict) -> str:
    if v["worst_slack"] == 0 and v.get("worst_log_slack") is not None:
        return f"0 (log {v['worst_log_slack']:.4g})"
    return format_number(v["worst_slack"])


def _where_text(v: dict) -> str:
    where = v.get("where") or {}
    parts = []
    if where.get("premise") is not None:
        parts.append(f"x = {where['premise']:.4g}")
    if where.get("parameter") is not None and where["parameter"] != 0:
        parts.append(f"param = {where['parameter']:.4g}")
    return ", ".join(parts) or "—"


def audit_table(summary: dict) -> tuple[list[str], list[list[str]]]:
    """The report's summary table: header and one row of text cells per relation."""
    header = ["relation", "source", "condition", "worst slack", "where", "verdict",
              "envelope", "witness"]
    rows = []
    for v in summary["relations"]:
        rows.append([v["relation"], "; ".join(v["sources"]), v["condition"], _slack_text(v),
                     _where_text(v), v["verdict"], kind_text(v), v["witness"] or "—"])
    return header, rows


def kind_text(v: dict) -> str:
    """The envelope's kind, with the certified bracket of the least slack where it is one."""
    lower, _, upper = v.get("slack_bracket") or (None, None, None)
    if v["kind"] == "certified bracket" and lower is not None and upper is not None:
        return f"certified bracket [{lower:.4g}, {upper:.4g}]"
    return v["kind"]


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


def write_audit(out: Path, summary: dict) -> None:
    """Write ``out/report.md``, the self-contained ``out/report.html`` and ``out/figures/``."""
    import base64
    import html

    out = Path(out)
    figures = {}
    for v in summary["relations"]:
        figures[v["relation"]] = plot_relation(out, v["relation"],
                                               out / FIGURES / f"{v['relation']}.png")
    plot_grid(out, out / FIGURES / "grid.png", [v["relation"] for v in summary["relations"]])
    header, rows = audit_table(summary)
    intro = (f"Budget **{summary['budget']}**, seed {summary['seed']}, "
             f"{summary['seconds']:.0f} s. Slack = claimed bound / attained value; below 1 is "
             f"a violation (every one re-verified in float64 from its witness file), at most "
             f"{summary['tight_slack']} reads *tight*. *certified*: the exact envelope is known "
             f"(docs/certified.md) and the least slack shown is exact over the certified region "
             f"(the search grid, extended towards 0 and across the condition parameter's "
             f"range); *certified bracket [l, u]*: the true least slack is proved to lie in "
             f"[l, u]; *lower bound*: the envelope found is a lower bound on the true one, so "
             f"the true least slack is at most the one shown and nothing bounds it from below. "
             f"Re-check any witness with `jaxpriv show DIR/WITNESS.json`.")
    md = ["# jaxpriv audit report", "", intro, "",
          "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    md += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    md += ["", f"![all relations]({FIGURES}/grid.png)", ""]
    body = [f"<h1>jaxpriv audit report</h1><p>{html.escape(intro).replace('**', '')}</p>",
            "<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>"]
    for row in rows:
        cls = " class='violated'" if row[5].startswith("violated") else ""
        body.append(f"<tr{cls}>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>")
    body.append("</table>")
    for v in summary["relations"]:
        details = _details(v)
        md += [f"## {v['relation']}: {v['statement']}", "", *[f"- {line}" for line in details],
               "", f"![{v['relation']}]({FIGURES}/{v['relation']}.png)", ""]
        image = base64.b64encode(figures[v["relation"]].read_bytes()).decode()
        body.append(f"<h2>{html.escape(v['relation'])}: {html.escape(v['statement'])}</h2><ul>"
                    + "".join(f"<li>{html.escape(line)}</li>" for line in details) + "</ul>"
                    f"<img alt='{v['relation']}' src='data:image/png;base64,{image}'>")
    grid = base64.b64encode((out / FIGURES / "grid.png").read_bytes()).decode()
    body.append(f"<h2>All relations</h2><img alt='grid' src='data:image/png;base64,{grid}'>")
    io.atomic_write(out / "report.md", lambda f: f.write("\n".join(md)))
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
             "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;"
             "padding:3px 6px;text-align:left}tr.violated td{background:#fde2e2}"
             "img{max-width:100%}")
    html = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>jaxpriv audit</title>"
            f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n")
    io.atomic_write(out / "report.html", lambda f: f.write(html))


def _details(v: dict) -> list[str]:
    lines = [f"sources: {'; '.join(v['sources'])}; condition: {v['condition']}",
             f"verdict: {v['verdict']}; worst slack {_slack_text(v)} at {_where_text(v)} "
             f"({v['kind']})"]
    if v.get("certified_slack") is not None:
        lines.append(f"certified least slack on the certified region: "
                     f"{v['certified_slack']:.6g}"
                     + ("" if v.get("search_max_gap") is None else
                        f"; on the search grid the search reaches the certified envelope to "
                        f"{v['search_max_gap']:.2%}"))
    lower, estimate, upper = v.get("slack_bracket") or (None, None, None)
    lines.append("least slack (lower, estimate, upper): "
                 f"({'not bounded below: no certificate' if lower is None else f'{lower:.6g}'}, "
                 f"{format_number(estimate)}, {format_number(upper)})")
    lines.append(f"sweep worst slack {format_number(v['sweep_worst_slack'])}, "
                 f"search worst slack {format_number(v['search_worst_slack'])}; "
                 f"verified violations {v['violation_count']:,}")
    if v.get("witness"):
        lines.append(f"witness: {v['witness']} (jaxpriv show {v['witness']})")
    return lines


def format_number(x) -> str:
    """A level for a sentence: 4 significant digits, "n/a" for None."""
    return "n/a" if x is None else f"{x:.4g}"
