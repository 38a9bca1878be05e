"""The audit's figures: one relation's two panels drawn from an audit directory (its sweep and
search run directories), as ``figures/<id>.png``, and every audited relation in one grid
(``figures/grid.png``) with a shared key."""

from __future__ import annotations

import json
from pathlib import Path

from jaxpriv import registry
from jaxpriv.engines.io import read_envelope
from jaxpriv.report.axes import (CERTIFIED, CLAIM, SEARCH, SWEEP, VIOLATION, _legend, _panels,
                                 _pyplot, _save, _sizes, _title)
from jaxpriv.report.figures import certificate_context, draw_mechanism, draw_statistical


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

