"""The audit report: the summary table, ``report.md`` and the self-contained ``report.html``
with the figures (:mod:`jaxpriv.report.grid`), and :func:`run_audit`, the audit run with these
writers (:func:`jaxpriv.audit.run` with :data:`AUDIT_OUTPUTS`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

from jaxpriv import audit
from jaxpriv.audit.verdict import format_number
from jaxpriv.engines import io
from jaxpriv.report.files import audit_search, audit_sweep
from jaxpriv.report.grid import FIGURES, draw_finished, kept_or_drawn, plot_grid, plot_relation


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


def grid_text(v: dict) -> str:
    """The least slack over the audit's premise grid (:attr:`Verdict.grid_slack`), or "same"
    where it equals the least slack anywhere to the 4 digits shown (it lies inside the grid)."""
    top, slack = v.get("grid_top"), v.get("grid_slack")
    if top is None:
        return "—"
    if slack is None:
        return f"no point found at x ≤ {top:.4g}"
    if v["worst_slack"] is not None and abs(slack - v["worst_slack"]) <= 1e-4 * abs(slack):
        return "same"
    return f"{format_number(slack)} at x = {v['grid_premise']:.4g} (x ≤ {top:.4g})"


def audit_table(summary: dict) -> tuple[list[str], list[list[str]]]:
    """The report's summary table: header and one row of text cells per relation."""
    header = ["relation", "source", "condition", "worst slack", "where", "verdict",
              "on the premise grid", "envelope", "witness"]
    rows = []
    for v in summary["relations"]:
        rows.append([v["relation"], "; ".join(v["sources"]), v["condition"], _slack_text(v),
                     _where_text(v), v["verdict"], grid_text(v), kind_text(v),
                     v["witness"] or "—"])
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
        figures[v["relation"]] = kept_or_drawn(out / FIGURES / f"{v['relation']}.png", out,
                                               v["relation"], plot_relation)
    plot_grid(out, out / FIGURES / "grid.png", [v["relation"] for v in summary["relations"]])
    header, rows = audit_table(summary)
    intro = (f"Budget **{summary['budget']}**, seed {summary['seed']}, "
             f"{summary['seconds']:.0f} s. Slack = claimed bound / attained value; below 1 is "
             f"a violation (every one re-verified in float64 from its witness file), at most "
             f"{summary['tight_slack']} reads *tight*. *on the premise grid*: the least slack over "
             f"premise levels up to the search grid's largest (the region a claim is read in), "
             f"beside the least anywhere the sweep drew (\"same\" where it lies inside). "
             f"*certified*: the exact envelope is known "
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
    if v.get("vacuous"):
        lines.append(v["vacuous"])
    if v.get("grid_top") is not None:
        lines.append(f"least slack on the audit's premise grid (premise ≤ {v['grid_top']:.4g}): "
                     + ("none found" if v.get("grid_slack") is None else
                        f"{v['grid_slack']:.6g} at premise {v['grid_premise']:.4g}")
                     + f"; anywhere: {_slack_text(v)}")
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
    if v.get("nan_count"):
        lines.append(f"NaN: {v['nan_count']:,} mechanisms of the sweep had a NaN level or bound "
                     "(not counted as holding)")
    if v.get("witness"):
        lines.append(f"witness: {v['witness']} (jaxpriv show {v['witness']})")
    return lines


def _plotting_ready() -> None:
    """An audit worker's start: matplotlib imported with its backend (~0.4 s) while the audit
    plans, not on its first finished relation."""
    from jaxpriv.report.axes import _pyplot

    _pyplot()


AUDIT_OUTPUTS = audit.Outputs(sweep=audit_sweep, search=audit_search, report=write_audit,
                              relation=draw_finished, ready=_plotting_ready)
"""The report's writers of an audit's files (:class:`jaxpriv.audit.Outputs`): each run's
``summary.json`` and ``envelope.csv`` (a statistical run's ``envelope.png`` too), each finished
relation's figures (``figures/<id>.png``: the sweep's and the search's envelopes together, and
its grid cell), and the audit's ``report.md``, ``report.html`` and ``figures/``; each worker of
a parallel audit imports matplotlib as it starts."""


def run_audit(spend: audit.Budget, ids: list[str], out: str | os.PathLike, seed: int = 0,
              progress: bool = True, memory_mb: float = 1024.0, workers: int = 1,
              log: Callable[[str], None] = print) -> dict[str, Any]:
    """Audit ``ids`` at budget ``spend`` into ``out`` with the report's writers
    (:data:`AUDIT_OUTPUTS`): :func:`jaxpriv.audit.run`, whose arguments these are, writing
    every run's files and the report (``out/report.md``, ``out/report.html``, ``out/figures/``).

    Returns:
      The audit summary, ``{"budget", "seed", "seconds", "relations": [verdict dicts]}`` (also
      written to ``out/summary.json``).
    """
    return audit.run(spend, ids, out, seed=seed, progress=progress, memory_mb=memory_mb,
                     workers=workers, log=log, outputs=AUDIT_OUTPUTS)
