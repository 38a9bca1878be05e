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

from jaxpriv import io, relations

ENVELOPE_COLUMNS = ("x", "param", "premise", "parameter", "conclusion", "bound", "slack", "count",
                    "witness")


def _versions() -> dict[str, str]:
    import matplotlib
    import optax

    from jaxpriv import __version__
    return {"jaxpriv": __version__, "jax": jax.__version__, "numpy": np.__version__,
            "optax": optax.__version__, "matplotlib": matplotlib.__version__,
            "python": platform.python_version()}


def _about(config, relation: relations.Relation) -> dict:
    return {"relation": config.relation, "statement": relation.statement,
            "sources": [str(s) for s in relation.sources]}


def _provenance(config) -> dict:
    return {"config": dataclasses.asdict(config), "devices": [str(d) for d in jax.devices()],
            "versions": _versions()}


def envelope_rows(out_dir: Path, result, relation: relations.Relation) -> list[dict]:
    """Re-check each cell's best mechanism in float64, save it, and tabulate the envelope."""
    from jaxpriv.sweep import record_mechanism, setup_for

    config = result.config
    options = setup_for(config.relation).options
    env = jax.tree_util.tree_map(np.asarray, result.state.envelope)
    counts = np.asarray(result.state.cell_count)
    rows = []
    for cell in np.flatnonzero(env.score > -np.inf):
        x_bin, p_bin = divmod(int(cell), config.param_bins)
        x_edge = config.x_max * (x_bin + 1) / config.x_bins
        p_edge = config.param_max * (p_bin + 1) / config.param_bins if config.param_bins > 1 \
            else None
        mech = record_mechanism(config, env, cell)
        checked = relation.check(mech, **options)
        name = f"witnesses/bins/x{x_bin:03d}-p{p_bin:02d}.json"
        io.save_mechanism(out_dir / name, mech, relation=relation.id,
                          index=int(env.index[cell]), **options)
        with jax.enable_x64(True):
            used = float(checked.parameter) if p_edge is None else p_edge
            bound = float(relation.bound(jnp.float64(x_edge), jnp.float64(used)))
            slack = float(relations.slack(bound, float(checked.conclusion)))
        rows.append({"x": x_edge, "param": "" if p_edge is None else p_edge,
                     "premise": float(checked.premise), "parameter": float(checked.parameter),
                     "conclusion": float(checked.conclusion), "bound": bound, "slack": slack,
                     "count": int(counts[cell]), "witness": name})
    return rows


def worst_slack(result, relation: relations.Relation) -> float | None:
    """Float64 slack of the overall lowest-slack mechanism (``None`` if none qualified)."""
    from jaxpriv.sweep import record_mechanism, setup_for

    worst = jax.tree_util.tree_map(np.asarray, result.state.worst)
    if worst.score[0] == -np.inf:
        return None
    mech = record_mechanism(result.config, worst, 0)
    slack = float(relation.check(mech, **setup_for(result.config.relation).options).slack)
    found = [v["slack"] for v in result.violations]
    return min([slack, *found])


def write_sweep(out_dir: Path, result, relation: relations.Relation) -> dict:
    """Write ``summary.json``, ``envelope.csv`` and ``envelope.png`` for a finished sweep."""
    config = result.config
    rows = envelope_rows(out_dir, result, relation)
    with open(out_dir / "envelope.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=ENVELOPE_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    worst = worst_slack(result, relation)
    summary = {
        **_about(config, relation),
        "count": config.count,
        "evaluated_with_condition": int(result.state.evaluated),
        "seconds": result.seconds,
        "mechanisms_per_second": config.count / result.seconds if result.seconds else None,
        "compile_seconds": result.compile_seconds,
        "worst_slack": worst,
        "violation_count": result.violation_count,
        "violations": [v["file"] for v in result.violations if v["file"]],
        "violation_details": result.violations,
        "envelope_kind": "lower bound (random sweep)",
        **_provenance(config),
    }
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    plot_envelope(out_dir / "envelope.png", rows, config, relation)
    return summary


def plot_envelope(path: Path, rows: list[dict], config, relation: relations.Relation) -> None:
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


def write_search(out_dir: Path, result, relation: relations.Relation,
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
    """What the plot's top panel shows: the conclusion, or γ/β for R6 (whose bound scales with
    the measured β)."""
    if relation.conclusion == "pac_gamma":
        return [r[key] / r["parameter"] if r["parameter"] else np.nan for r in rows]
    return [r[key] for r in rows]


def plot_search(path: Path, rows: list[dict], config, relation: relations.Relation,
                sweep_rows: list[dict] | None = None) -> None:
    """Claimed bound, search envelope, certified curve and (optionally) the sweep envelope;
    slack underneath on a log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from jaxpriv import certify

    ratio = relation.conclusion == "pac_gamma"
    xs = np.array([r["x"] for r in rows])
    grid = np.linspace(0, max(xs.max(), 1e-3), 300)[1:]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6.5), sharex=True,
                                      gridspec_kw={"height_ratios": [2, 1]})
    with jax.enable_x64(True):
        claim = np.asarray(relation.bound(jnp.asarray(grid), jnp.float64(1.0 if ratio
                                                                          else config.param)))
    param = f", {relation.parameter} ≤ {config.param:g}" if config.param else ""
    top.plot(grid, claim, "--", color="k", label=f"claimed bound ({relation.id}{param})")
    cert = certify.envelope(config.relation, grid, config.param, n=config.n,
                           r=getattr(config, "r", None))
    if cert is not None:
        certified = claim / cert.min_slack
        top.plot(grid, certified, "-", color="tab:green", lw=1.2,
                 label=f"certified supremum (n = {config.n})")
        bottom.plot(grid, cert.min_slack, "-", color="tab:green", lw=1.2, label="certified")
    top.plot(xs, _normalized(relation, rows), "o", ms=4, color="tab:blue",
             label=f"search envelope ({config.restarts} restarts/point)")
    bottom.plot(xs, [r["slack"] for r in rows], "o", ms=4, color="tab:blue", label="search")
    if sweep_rows:
        picked = [r for r in sweep_rows if not np.isfinite(r.get("param", np.nan))
                  or r["param"] <= config.param + 1e-12 or ratio]
        picked.sort(key=lambda r: r["x"])
        if ratio:
            best: dict[float, dict] = {}
            for r in picked:
                if r["parameter"] > 0 and (r["x"] not in best or r["conclusion"] / r["parameter"]
                                           > best[r["x"]]["conclusion"] / best[r["x"]]["parameter"]):
                    best[r["x"]] = r
            picked = [best[k] for k in sorted(best)]
        top.step([r["x"] for r in picked], _normalized(relation, picked), where="pre",
                 color="tab:orange", label="sweep envelope")
        bottom.plot([r["x"] for r in picked], [r["slack"] for r in picked], "s", ms=3,
                    color="tab:orange", label="sweep")
    top.set_ylabel("γ / β(d_true)" if ratio else f"{relation.conclusion} (conclusion level)")
    top.set_title(f"{relation.id}: {relation.statement}\nadversarial search, {config.n}×{config.m}"
                  f" mechanisms{', law ' + config.law if relation.conclusion == 'abp' else ''}",
                  fontsize=9)
    _finish(fig, top, bottom, f"{relation.premise} (premise level x, nats)", path)


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
# statistical relations (R14, R15)
# --------------------------------------------------------------------------------------------

STATISTICAL_COLUMNS = ENVELOPE_COLUMNS + ("log_slack",)
"""``envelope.csv`` of an R14/R15 run: ``x`` is the ε bin's upper edge (sweep) or the grid
point (search), ``premise`` the witness's ε, ``parameter`` its ``Tκ₁`` (R14), ``count`` the
settings behind the row, ``log_slack`` the natural log of the slack (R14's slack underflows)."""


def write_statistical(out_dir: Path, result, relation) -> dict:
    """Write ``summary.json``, ``envelope.csv`` and ``envelope.png`` for a finished R14/R15
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
    """Per ε: the worst setting's exact value and the claim (R14: failure probabilities, log
    scale; R15: worst error of Ĉ₁ and the claimed bound); slack underneath."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6.5), sharex=True,
                                      gridspec_kw={"height_ratios": [2, 1]})
    xs = [r["premise"] for r in rows]
    if relation.id == "R14":
        log10 = math.log(10)
        top.plot(xs, [r["log_slack"] / log10 for r in rows], "o", ms=4, color="tab:blue",
                 label="log10 slack of the worst setting")
        top.axhline(0.0, color="r", lw=1)
        top.set_ylabel("log10(claimed / exact failure probability)")
        bottom.plot(xs, [max(r["slack"], 1e-300) for r in rows], "o", ms=3, color="tab:blue")
    else:
        from jaxpriv import statistical
        grid = np.linspace(1e-3, max(max(xs), 1e-2), 300)
        with jax.enable_x64(True):
            top.plot(grid, np.asarray(statistical.r15_bound(jnp.asarray(grid))), "--",
                     color="k", label="claimed bound (R15)")
        top.plot(xs, [r["conclusion"] for r in rows], "o", ms=4, color="tab:blue",
                 label="worst |Ĉ₁ − C₁| found")
        top.set_ylabel("estimation error of C₁")
        bottom.plot(xs, [r["slack"] for r in rows], "o", ms=3, color="tab:blue")
    what = (f"{config.count:,} random settings" if config.mode == "sweep"
            else f"search over {len(rows)} ε points")
    top.set_title(f"{relation.id}: {relation.statement}\n{what}", fontsize=8)
    _finish(fig, top, bottom, "ε (relative accuracy of κ̂₁)", path)
