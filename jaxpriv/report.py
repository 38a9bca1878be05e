"""Run-directory outputs of a sweep: ``summary.json``, ``envelope.csv``, witnesses, a plot.

Output contract (relied on by scripts and the audit):

* ``summary.json``: ``relation``, ``count``, ``seconds``, ``mechanisms_per_second``,
  ``worst_slack``, ``violations`` (witness paths relative to the run directory), ``devices``,
  ``versions``, and more.
* ``envelope.csv``: one row per non-empty (premise bin × parameter bin) cell with columns
  ``x`` (the bin's upper premise edge), ``param`` (upper parameter edge), ``premise``,
  ``parameter``, ``conclusion`` (float64 levels of the cell's best witness), ``bound``
  (the claim at the cell's upper edges), ``slack`` (``bound / conclusion``), ``count``,
  ``witness`` (file relative to the run directory).

Every number written here is recomputed in float64 from the saved witness.
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

from jaxpriv import io, registry

ENVELOPE_COLUMNS = ("x", "param", "premise", "parameter", "conclusion", "bound", "slack", "count",
                    "witness")


def _versions() -> dict[str, str]:
    import matplotlib
    import optax

    from jaxpriv import __version__, native
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
    """Write ``summary.json``, ``envelope.csv`` and ``envelope.png`` for a finished sweep."""
    config = result.config
    rows = result.rows
    with open(out_dir / "envelope.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=ENVELOPE_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
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
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    plot_envelope(out_dir / "envelope.png", rows, config, relation)
    return summary


def plot_envelope(path: Path, rows: list[dict], config, relation) -> None:
    """Claimed bound vs the sweep envelope (one colour per parameter bin), slack underneath."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6.5), sharex=True,
                                      gridspec_kw={"height_ratios": [2, 1]})
    params = sorted({r["param"] for r in rows}, key=lambda p: -1 if p == "" else p)
    colours = plt.cm.viridis(np.linspace(0, 0.9, max(len(params), 1)))
    grid = np.linspace(0, config.x_max, 200)
    for colour, param in zip(colours, params):
        sel = sorted((r for r in rows if r["param"] == param), key=lambda r: r["x"])
        label = "" if param == "" else f" ({relation.parameter} ≤ {param:.3g})"
        xs = [r["x"] for r in sel]
        top.step(xs, [r["conclusion"] for r in sel], where="pre", color=colour,
                 label=f"sweep envelope{label}")
        with jax.enable_x64(True):
            p = 0.0 if param == "" else param
            curve = np.asarray(relation.bound(jnp.asarray(grid), jnp.float64(p)))
        if param == "":
            top.plot(grid, curve, "--", color="k", label=f"claimed bound ({relation.id})")
        else:
            top.plot(grid, curve, "--", color=colour, alpha=0.7)
        bottom.plot(xs, [r["slack"] for r in sel], "o-", ms=3, color=colour)
    top.set_ylabel(f"{relation.conclusion} (conclusion level)")
    top.set_title(f"{relation.id}: {relation.statement}\n{config.count:,} random "
                  f"{config.n}×{config.m} mechanisms (sweep = lower bound on the envelope)",
                  fontsize=9)
    finite = [r["conclusion"] for r in rows if np.isfinite(r["conclusion"])]
    if finite:
        top.set_ylim(0, 1.15 * max(max(finite), 1e-12))
    _finish(fig, top, bottom, f"{relation.premise} (premise level, nats; bin upper edge)", path)


# --------------------------------------------------------------------------------------------
# searches
# --------------------------------------------------------------------------------------------

SEARCH_COLUMNS = ENVELOPE_COLUMNS + ("certified_slack", "gap")
"""``envelope.csv`` of a search: the sweep's columns (``x`` is the grid point, ``count`` the
restarts) plus ``certified_slack`` (least possible slack, where a closed form is known) and
``gap`` (``1 − certified_slack/slack``: the search's relative shortfall; 0 = optimal)."""


def write_search(out_dir: Path, result, relation,
                 sweep_dir: str | Path | None = None) -> dict:
    """Write ``summary.json``, ``envelope.csv`` and ``envelope.png`` for a finished search."""
    config = result.config
    rows = result.rows
    with open(out_dir / "envelope.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=SEARCH_COLUMNS)
        writer.writeheader()
        writer.writerows({k: ("" if isinstance(v, float) and np.isnan(v) else v)
                          for k, v in row.items()} for row in rows)
    slacks = [r["slack"] for r in rows if np.isfinite(r["slack"])]
    slacks += [v["slack"] for v in result.violations]
    gaps = [r["gap"] for r in rows if np.isfinite(r["gap"])]
    restart_steps = result.steps * config.restarts * len(config.grid)
    rate = restart_steps / result.seconds if result.seconds else None
    certified = bool(gaps) and len(gaps) == len(rows)
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
        "envelope_kind": ("certified: closed form, search gap reported" if certified
                          else "lower bound (adversarial search)"),
        "max_gap": max(gaps) if gaps else None,
        **_provenance(config),
    }
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    sweep_rows = read_envelope(Path(sweep_dir)) if sweep_dir is not None else None
    plot_search(out_dir / "envelope.png", rows, config, relation, sweep_rows)
    return summary


def search_writer(sweep_dir: str | Path | None):
    """:func:`write_search` with the sweep directory whose envelope the plot shows beside the
    search's, as a search's ``write`` callback."""
    def write(out_dir: Path, result, relation) -> dict:
        return write_search(out_dir, result, relation, sweep_dir)
    return write


def read_envelope(run_dir: Path) -> list[dict]:
    """The rows of a run directory's ``envelope.csv`` (numbers as floats, blanks as NaN)."""
    path = run_dir / "envelope.csv"
    if not path.exists():
        from jaxpriv.errors import InputError
        raise InputError(f"{run_dir}: no envelope.csv (is it a finished sweep or search?)")
    with open(path) as f:
        return [{k: (v if k == "witness" else (np.nan if v == "" else float(v)))
                 for k, v in row.items()} for row in csv.DictReader(f)]


def _normalized(relation, rows, key="conclusion"):
    """What the plot's top panel shows: the conclusion, or conclusion/parameter where the bound
    scales with the measured parameter (e.g. γ/β)."""
    if relation.scales_with_parameter:
        return [r[key] / r["parameter"] if r["parameter"] else np.nan for r in rows]
    return [r[key] for r in rows]


def sweep_envelope(relation, rows: list[dict], param: float) -> list[dict]:
    """The sweep rows comparable with a claim at condition parameter ``param``: cells whose
    parameter bin lies at or below it (all cells for R6, whose bound scales with the measured
    β), the best one per premise bin, sorted by ``x``, each with its plotted ``value``."""
    ratio = relation.scales_with_parameter
    best: dict[float, dict] = {}
    for r in rows:
        if not (ratio or not np.isfinite(r.get("param", np.nan)) or r["param"] <= param + 1e-12):
            continue
        value = _normalized(relation, [r])[0]
        if np.isfinite(value) and (r["x"] not in best or value > best[r["x"]]["value"]):
            best[r["x"]] = {**r, "value": value}
    return [best[x] for x in sorted(best)]


def claimed_and_certified(relation, grid: np.ndarray, param: float, n: int,
                          r: int | None = None):
    """The claimed bound on ``grid`` and the certified supremum in the same units (``γ/β`` for
    R6), as the figures draw them.

    Returns:
      ``(claim, certified, min_slack)``, each of ``grid``'s shape; ``certified`` and
      ``min_slack`` are ``None`` without a closed form, and ``certified`` is ``inf`` where the
      conclusion is unbounded at that premise (certified least slack 0).
    """
    from jaxpriv import certify

    ratio = relation.scales_with_parameter
    with jax.enable_x64(True):
        claim = np.asarray(relation.bound(jnp.asarray(grid), jnp.float64(1.0 if ratio
                                                                          else param)))
    cert = certify.envelope(relation, grid, param, n=n, r=r)
    if cert is None:
        return claim, None, None
    min_slack = np.asarray(cert.min_slack, np.float64)
    # the certified supremum itself, except where it is not a conclusion level (R6's envelope is
    # the ratio γ/β: claim / least slack there)
    conclusion = np.asarray(cert.conclusion, np.float64)
    as_ratio = np.isnan(conclusion)
    certified = np.divide(claim, min_slack, out=np.where(as_ratio, np.inf, conclusion),
                          where=as_ratio & (min_slack > 0))
    return claim, certified, min_slack


def plot_search(path: Path, rows: list[dict], config, relation,
                sweep_rows: list[dict] | None = None) -> None:
    """Claimed bound, search envelope, certified curve and (optionally) the sweep envelope;
    slack underneath on a log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ratio = relation.scales_with_parameter
    xs = np.array([r["x"] for r in rows])
    grid = np.linspace(0, max(xs.max(), 1e-3), 300)[1:]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6.5), sharex=True,
                                      gridspec_kw={"height_ratios": [2, 1]})
    claim, certified, min_slack = claimed_and_certified(relation, grid, config.param, config.n,
                                                        getattr(config, "r", None))
    param = f", {relation.parameter} ≤ {config.param:g}" if config.param else ""
    top.plot(grid, claim, "--", color="k", label=f"claimed bound ({relation.id}{param})")
    if certified is not None:
        top.plot(grid, certified, "-", color="tab:green", lw=1.2,
                 label=f"certified supremum (n = {config.n})")
        bottom.plot(grid, min_slack, "-", color="tab:green", lw=1.2, label="certified")
    top.plot(xs, _normalized(relation, rows), "o", ms=4, color="tab:blue",
             label=f"search envelope ({config.restarts} restarts/point)")
    bottom.plot(xs, [r["slack"] for r in rows], "o", ms=4, color="tab:blue", label="search")
    if sweep_rows:
        picked = sweep_envelope(relation, sweep_rows, config.param)
        top.step([r["x"] for r in picked], [r["value"] for r in picked], where="pre",
                 color="tab:orange", label="sweep envelope")
        bottom.plot([r["x"] for r in picked], [r["slack"] for r in picked], "s", ms=3,
                    color="tab:orange", label="sweep")
    top.set_ylabel(relation.ratio_label if ratio else
                   f"{relation.conclusion} (conclusion level{_unit(relation.conclusion)})")
    law = ", law " + config.law if "law" in relation.notion_params else ""
    top.set_title(f"{relation.id}: {relation.statement}\nadversarial search, {config.n}×{config.m}"
                  f" mechanisms{law}", fontsize=9)
    _finish(fig, top, bottom, f"{relation.premise} (premise level x{_unit(relation.premise)})",
            path)


def _unit(key: str) -> str:
    """``", nats"``-style suffix naming a notion's unit (empty for dimensionless ones)."""
    unit = registry.notion(key).unit
    return f", {unit}" if unit in ("nats", "√nats", "bits") else ""


def _finish(fig, top, bottom, xlabel: str, path: Path) -> None:
    """Legends, grids, the slack axis (log scale, violation line at 1) and the file."""
    import matplotlib.pyplot as plt

    top.legend(fontsize=7)
    top.grid(alpha=0.3)
    bottom.axhline(1.0, color="r", lw=1, label="slack = 1 (violation below)")
    bottom.set_yscale("log")
    bottom.set_ylabel("slack = bound / envelope")
    bottom.set_xlabel(xlabel)
    bottom.legend(fontsize=7)
    bottom.grid(alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


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
    sweep or search (:mod:`jaxpriv.statistical_audit`)."""
    config = result.config
    rows = result.rows
    with open(out_dir / "envelope.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=STATISTICAL_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
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
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    plot_statistical(out_dir / "envelope.png", rows, config, relation)
    return summary


def plot_statistical(path: Path, rows: list[dict], config, relation) -> None:
    """Per premise level: the worst setting's log10 slack (where the slack underflows) or its
    exact value against the claimed bound; slack underneath."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6.5), sharex=True,
                                      gridspec_kw={"height_ratios": [2, 1]})
    xs = [r["premise"] for r in rows]
    if relation.log_slack:
        log10 = math.log(10)
        top.plot(xs, [r["log_slack"] / log10 for r in rows], "o", ms=4, color="tab:blue",
                 label="log10 slack of the worst setting")
        top.axhline(0.0, color="r", lw=1)
        top.set_ylabel(f"log10 slack (claimed / exact {relation.conclusion})", fontsize=8)
        bottom.plot(xs, [max(r["slack"], 1e-300) for r in rows], "o", ms=3, color="tab:blue")
    else:
        grid = np.linspace(1e-3, max(max(xs), 1e-2), 300)
        if relation.bound_curve is not None:
            with jax.enable_x64(True):
                top.plot(grid, np.asarray(relation.bound_curve(jnp.asarray(grid))), "--",
                         color="k", label=f"claimed bound ({relation.id})")
        top.plot(xs, [r["conclusion"] for r in rows], "o", ms=4, color="tab:blue",
                 label="worst case found")
        top.set_ylabel(relation.conclusion, fontsize=8)
        bottom.plot(xs, [r["slack"] for r in rows], "o", ms=3, color="tab:blue")
    what = (f"{config.count:,} random settings" if config.mode == "sweep"
            else f"search over {len(rows)} ε points")
    top.set_title(f"{relation.id}: {relation.statement}\n{what}", fontsize=8)
    _finish(fig, top, bottom, f"premise: {relation.premise}", path)


# --------------------------------------------------------------------------------------------
# the audit report (jaxpriv audit)
# --------------------------------------------------------------------------------------------

FIGURES = "figures"


def _run(out: Path, rid: str, kind: str) -> tuple[dict, list[dict]]:
    directory = out / rid / kind
    return json.loads((directory / "summary.json").read_text()), read_envelope(directory)


def draw_relation(ax, out: Path, rid: str, compact: bool = False) -> None:
    """Draw one relation's audit figure on ``ax``: the claimed bound, the sweep and search
    envelopes, the certified curve where one exists, and the slack on a second (log) axis.

    Args:
      ax: a matplotlib ``Axes``.
      out: the audit directory (``out/<rid>/sweep``, ``out/<rid>/search``).
      rid: relation id.
      compact: smaller type and no title, for the figure grid.
    """
    relation = registry.get(rid)
    sweep_summary, sweep_rows = _run(out, rid, "sweep")
    search_summary, search_rows = _run(out, rid, "search")
    slack_ax = ax.twinx()
    if relation.kind == "statistical":
        _draw_statistical(ax, slack_ax, relation, sweep_rows, search_rows)
    else:
        _draw_mechanism(ax, slack_ax, relation, search_summary["config"], sweep_rows,
                        search_rows)
    if not getattr(relation, "log_slack", False):
        slack_ax.axhline(1.0, color="r", lw=0.8, ls=":", label="slack 1 (violated below)")
        slack_ax.set_ylabel("slack = bound / value (log scale)", color="tab:purple",
                            fontsize=7 if compact else 9)
    _log_axis(slack_ax)
    slack_ax.tick_params(axis="y", which="both", colors="tab:purple",
                         labelsize=6 if compact else 8)
    ax.grid(alpha=0.3)
    size = 6 if compact else 8
    ax.tick_params(labelsize=size)
    if compact:
        ax.set_title(f"{rid} ({relation.sources[0]})", fontsize=8)
        for axis in (ax.xaxis, ax.yaxis, slack_ax.yaxis):
            axis.label.set_size(7)
        return
    handles = ax.get_legend_handles_labels()
    extra = slack_ax.get_legend_handles_labels()
    ax.legend(handles[0] + extra[0], handles[1] + extra[1], fontsize=size - 1,
              loc="upper left", framealpha=0.85)
    ax.set_title(f"{rid}: {relation.statement}\n{'; '.join(str(x) for x in relation.sources)}",
                 fontsize=8)


def _log_axis(ax) -> None:
    """Log scale; plain-number tick labels when the axis spans less than a decade."""
    import matplotlib.ticker as ticker

    ax.set_yscale("log")
    low, high = ax.get_ylim()
    plain = ticker.FuncFormatter(lambda v, _: f"{v:g}")
    if high / max(low, 1e-300) < 10:
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain)
    else:
        ax.yaxis.set_minor_formatter(ticker.NullFormatter())


def _value_axis(ax, bound_values, found_values) -> None:
    """Linear from 0, unless the claimed bound and what was found differ by decades (then log,
    so both stay readable)."""
    bound = [v for v in bound_values if np.isfinite(v) and v > 0]
    found = [v for v in found_values if np.isfinite(v) and v > 0]
    if not bound and not found:
        return
    top = max(bound + found)
    if bound and found and max(max(bound) / max(found), max(found) / max(bound)) > 20:
        ax.set_yscale("log")
        ax.set_ylim(max(min(bound + found), top * 1e-12) / 2, 2 * top)
    else:
        ax.set_ylim(0, 1.1 * top)


def _draw_mechanism(ax, slack_ax, relation, config: dict, sweep_rows, search_rows) -> None:
    ratio = relation.scales_with_parameter
    param = float(config.get("param", 0.0))
    search_x = np.array([r["x"] for r in search_rows])
    sweep = sweep_envelope(relation, sweep_rows, param)
    sweep_x = [r["x"] for r in sweep]
    top = max([*search_x, *sweep_x, 1e-3])
    grid = np.linspace(0, top, 400)[1:]
    claim, sup, min_slack = claimed_and_certified(relation, grid, param, config["n"],
                                                  config.get("r") or None)
    condition = f", {relation.parameter} = {param:g}" if param else ""
    ax.plot(grid, claim, "--", color="k", lw=1.2, label=f"claimed bound{condition}")
    if sup is not None:
        finite = np.isfinite(sup)
        if finite.any():
            ax.plot(grid[finite], sup[finite], "-", color="tab:green", lw=1.2,
                    label=f"certified supremum (n={config['n']})")
        slack_ax.plot(grid, np.maximum(min_slack, 1e-3), "-", color="tab:purple", lw=0.8,
                      alpha=0.6, label="certified slack")
    else:
        sup = np.array([])
    if sweep:
        ax.step(sweep_x, [r["value"] for r in sweep], where="pre", color="tab:orange",
                lw=1.2, label="sweep envelope")
        slack_ax.plot(sweep_x, [max(r["slack"], 1e-3) for r in sweep], "s", ms=2.5,
                      color="tab:purple", alpha=0.5, label="sweep slack")
    if len(search_x):
        ax.plot(search_x, _normalized(relation, search_rows), "o", ms=3.5, color="tab:blue",
                label="search envelope")
        slack_ax.plot(search_x, [max(r["slack"], 1e-3) for r in search_rows], "^", ms=3,
                      color="tab:purple", label="search slack")
    _value_axis(ax, claim, [*(r["value"] for r in sweep), *sup,
                            *_normalized(relation, search_rows)])
    ax.set_xlim(0, top)
    ax.set_xlabel(f"premise: {relation.premise} level x{_unit(relation.premise)}")
    ax.set_ylabel(relation.ratio_label if ratio else
                  f"conclusion: {relation.conclusion}{_unit(relation.conclusion)}")


def _draw_statistical(ax, slack_ax, relation, sweep_rows, search_rows) -> None:
    """A relation whose slack underflows (``log_slack``): log10 slack of the worst setting per ε
    on the main axis, its parameter on the second; otherwise the worst value found against the
    claim, slack on the second axis."""
    log10 = math.log(10)
    for rows, marker, name in ((sweep_rows, "s", "sweep"), (search_rows, "o", "search")):
        rows = sorted(rows, key=lambda r: r["premise"])
        xs = [r["premise"] for r in rows]
        colour = "tab:blue" if name == "search" else "tab:orange"
        if relation.log_slack:
            ax.plot(xs, [r["log_slack"] / log10 for r in rows], marker, ms=3, color=colour,
                    label=f"log10 slack, worst setting ({name})")
            slack_ax.plot(xs, [max(r["parameter"], 1e-3) for r in rows], marker, ms=2.5,
                          mfc="none", color="tab:purple",
                          label=f"its {relation.parameter_label} ({name})")
        else:
            ax.plot(xs, [r["conclusion"] for r in rows], marker, ms=3, color=colour,
                    label=f"worst case ({name})")
            slack_ax.plot(xs, [max(r["slack"], 1e-300) for r in rows], marker, ms=2.5,
                          color="tab:purple", alpha=0.6 if name == "sweep" else 1.0,
                          label=f"{name} slack")
    if relation.log_slack:
        ax.axhline(0.0, color="k", ls="--", lw=1.2, label="claimed bound (slack 1)")
        ax.set_ylabel(f"log10 slack = log10(claimed / exact {relation.conclusion})", fontsize=7)
        slack_ax.set_ylabel(f"{relation.parameter_label} of the worst setting (log scale)",
                            color="tab:purple")
    else:
        high = relation.x_range[1] if relation.x_range else 10.0
        grid = np.linspace(1e-3, 0.99 * high, 300)
        if relation.bound_curve is not None:
            with jax.enable_x64(True):
                ax.plot(grid, np.asarray(relation.bound_curve(jnp.asarray(grid))), "--",
                        color="k", lw=1.2, label="claimed bound")
        ax.set_ylabel(relation.conclusion, fontsize=7)
    ax.set_xlabel(f"premise: {relation.premise}")


def plot_relation(out: Path, rid: str, path: Path) -> Path:
    """One relation's report figure, written to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    draw_relation(ax, Path(out), rid)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_grid(out: Path, path: Path, ids: list[str] | None = None, columns: int = 4) -> Path:
    """Every audited relation in one publication-style figure grid."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    ids = ids or [rid for rid in registry.REGISTRY if (out / rid / "search" / "summary.json")
                  .exists() and (out / rid / "sweep" / "summary.json").exists()]
    if not ids:
        from jaxpriv.errors import InputError
        raise InputError(f"{out}: no finished audit runs (DIR/<id>/sweep, DIR/<id>/search)")
    rows = -(-len(ids) // columns)
    fig, axes = plt.subplots(rows, min(columns, len(ids)), squeeze=False,
                             figsize=(4.2 * min(columns, len(ids)), 3.3 * rows))
    for ax, rid in zip(axes.flat, ids):
        draw_relation(ax, out, rid, compact=True)
    for ax in list(axes.flat)[len(ids):]:
        ax.axis("off")
    from matplotlib.lines import Line2D
    key = [Line2D([], [], ls="--", color="k", label="claimed bound"),
           Line2D([], [], color="tab:green", label="certified supremum"),
           Line2D([], [], color="tab:orange", label="sweep envelope"),
           Line2D([], [], ls="", marker="o", color="tab:blue", label="search envelope"),
           Line2D([], [], ls="", marker="^", color="tab:purple",
                  label="slack (right axis, log)"),
           Line2D([], [], ls=":", color="r", label="slack 1")]
    fig.legend(handles=key, loc="lower center", ncol=len(key), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


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
                     _where_text(v), v["verdict"], v["kind"], v["witness"] or "—"])
    return header, rows


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
             f"in closed form (docs/certified.md); *lower bound*: the envelope found is a lower "
             f"bound on the true one, so the true least slack is at most the one shown. "
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
    (out / "report.md").write_text("\n".join(md))
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
             "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;"
             "padding:3px 6px;text-align:left}tr.violated td{background:#fde2e2}"
             "img{max-width:100%}")
    (out / "report.html").write_text(
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>jaxpriv audit</title>"
        f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n")


def _details(v: dict) -> list[str]:
    lines = [f"sources: {'; '.join(v['sources'])}; condition: {v['condition']}",
             f"verdict: {v['verdict']}; worst slack {_slack_text(v)} at {_where_text(v)} "
             f"({v['kind']})"]
    if v.get("certified_slack") is not None:
        lines.append(f"certified least slack on the search grid: {v['certified_slack']:.6g}"
                     + ("" if v.get("search_max_gap") is None else
                        f"; the search reaches it to {v['search_max_gap']:.2%}"))
    lines.append(f"sweep worst slack {format_number(v['sweep_worst_slack'])}, "
                 f"search worst slack {format_number(v['search_worst_slack'])}; "
                 f"verified violations {v['violation_count']:,}")
    if v.get("witness"):
        lines.append(f"witness: {v['witness']} (jaxpriv show {v['witness']})")
    return lines


def format_number(x) -> str:
    """A level for a sentence: 4 significant digits, "n/a" for None."""
    return "n/a" if x is None else f"{x:.4g}"
