"""The run-directory files of a finished sweep or search: ``summary.json`` and ``envelope.csv``
written from an engine's result (with its ``envelope.png``, drawn by
:mod:`jaxpriv.report.figures`, except in an audit: :func:`audit_sweep`), and the CSV/JSON
writers they use. It reads what the engines
computed and verified (their witnesses are saved by the engines); engines never import it.

Output contract (relied on by scripts and the audit):

* ``summary.json``: ``relation``, ``count``, ``seconds``, ``mechanisms_per_second``,
  ``worst_slack``, ``violations`` (witness paths relative to the run directory), ``devices``,
  ``versions``, and more.
* ``envelope.csv``: one row per non-empty (premise bin × parameter bin) cell with columns
  ``x`` (the bin's upper premise edge), ``param`` (upper parameter edge), ``premise``,
  ``parameter``, ``conclusion`` (float64 levels of the cell's best witness), ``bound``
  (the claim at the cell's upper edges), ``slack`` (``bound / conclusion``), ``count``,
  ``witness`` (file relative to the run directory); read back by
  :func:`jaxpriv.engines.io.read_envelope`.

Every number written here is a float64 level the engine recomputed from the saved witness.
"""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import jax
import numpy as np

from jaxpriv.engines import io
from jaxpriv.engines.io import read_envelope
from jaxpriv.report.figures import plot_envelope, plot_search, plot_statistical

ENVELOPE_COLUMNS = ("x", "param", "premise", "parameter", "conclusion", "bound", "slack", "count",
                    "witness")


def _about(config, relation) -> dict:
    return {"relation": config.relation, "statement": relation.statement,
            "sources": [str(s) for s in relation.sources]}


def _provenance(config) -> dict:
    return {"config": dataclasses.asdict(config), "devices": [str(d) for d in jax.devices()],
            "versions": io.versions()}


def write_sweep(out_dir: Path, result, relation, figure: bool = True) -> dict:
    """Write ``summary.json``, ``envelope.csv`` and ``envelope.png`` for a finished sweep (of
    settings: :func:`write_statistical`); ``figure=False``: no ``envelope.png`` (an audit draws
    one figure of the relation's two runs instead: :func:`audit_sweep`)."""
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
        "nan_count": int(result.state.nan_count),
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
    if figure:
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
                 sweep_dir: str | Path | None = None, figure: bool = True) -> dict:
    """Write ``summary.json``, ``envelope.csv`` and ``envelope.png`` for a finished search (of
    settings: :func:`write_statistical`); ``figure=False``: no ``envelope.png``
    (:func:`audit_search`)."""
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
    if figure:
        plot_search(out_dir / "envelope.png", rows, config, relation, sweep_rows)
    return summary


def audit_sweep(out_dir: Path, result, relation) -> dict:
    """An audit's sweep writer: :func:`write_sweep` without the run's own figure — the audit
    draws each relation's figure of both runs (``figures/<id>.png`` and its grid cell); the
    runs' two figures more were half of a quick audit's ~100 s of drawing."""
    return write_sweep(out_dir, result, relation, figure=False)


def audit_search(out_dir: Path, result, relation, sweep_dir: str | Path | None = None) -> dict:
    """An audit's search writer: :func:`write_search` without the run's own figure
    (:func:`audit_sweep`)."""
    return write_search(out_dir, result, relation, sweep_dir, figure=False)


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
