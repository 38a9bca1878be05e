"""The audit's figures: one relation's two panels drawn from an audit directory (its sweep and
search run directories), as ``figures/<id>.png``, and every audited relation in one grid
(``figures/grid.png``: the relations' compact cells, ``figures/cells/<id>.png``, tiled) with a
shared key. An audit's workers draw a relation's figure and cell as soon as it is finished
(:func:`draw_finished`); the report draws only those missing or older than their runs."""

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


CELL_INCHES = (4.1, 4.0)
"""One relation's cell of the figure grid (compact: small type, a short title, no legend)."""
GRID_DPI = 130


def cell_path(out: Path, rid: str) -> Path:
    """Where an audit keeps a relation's grid cell (``figures/cells/<id>.png``)."""
    return Path(out) / FIGURES / "cells" / f"{rid}.png"


def plot_cell(out: Path, rid: str, path: Path | None = None) -> Path:
    """One relation's cell of the figure grid, written to ``path`` (default
    :func:`cell_path`): every cell has the same size in pixels, so :func:`plot_grid` tiles
    them."""
    plt = _pyplot()
    fig = plt.figure(figsize=CELL_INCHES, layout="constrained")
    draw_relation(fig, Path(out), rid, compact=True)
    return _save(fig, path or cell_path(out, rid), dpi=GRID_DPI)


def _runs(out: Path, rid: str) -> list[Path] | None:
    """``rid``'s two run summaries, or ``None`` while a run is not finished."""
    runs = [Path(out) / rid / kind / "summary.json" for kind in ("sweep", "search")]
    return runs if all(run.exists() for run in runs) else None


def is_fresh(figure: Path, out: Path, rid: str) -> bool:
    """Whether ``figure`` was drawn from ``rid``'s finished runs as they are now (newer than
    both runs' ``summary.json``)."""
    figure, runs = Path(figure), _runs(out, rid)
    return runs is not None and figure.exists() and \
        figure.stat().st_mtime >= max(run.stat().st_mtime for run in runs)


def kept_or_drawn(figure: Path, out: Path, rid: str, draw) -> Path:
    """``figure`` as it is where :func:`is_fresh`, else drawn again by ``draw(out, rid,
    figure)``."""
    return Path(figure) if is_fresh(figure, out, rid) else draw(out, rid, figure)


def draw_finished(out: Path, rid: str) -> None:
    """A finished relation's report figure and grid cell, drawn as soon as its runs are done
    (in an audit's worker process, beside the other relations' runs, instead of one by one at
    the end: the report of a 63-relation audit spent 27 s drawing them); nothing while a run is
    not finished, or where they are drawn already (a resumed audit)."""
    if _runs(out, rid) is None:
        return
    kept_or_drawn(Path(out) / FIGURES / f"{rid}.png", out, rid, plot_relation)
    kept_or_drawn(cell_path(out, rid), out, rid, plot_cell)


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
    import numpy as np
    from PIL import Image

    columns = min(columns, len(ids))
    rows = -(-len(ids) // columns)
    # the cells drawn one by one (or kept from the audit's workers) and tiled: one figure of
    # 2 × 63 axes spent 11 s in matplotlib's constrained layout alone. Tiled as 8-bit RGB and
    # written by Pillow: matplotlib's imread/imsave round trip through floats spent 2.3 of the
    # 3.4 s this took for 63 cells, at the end of an audit, when nothing else runs
    def rgb(path: Path) -> np.ndarray:
        with Image.open(path) as opened:
            return np.asarray(opened.convert("RGB"))

    tiles = [rgb(kept_or_drawn(cell_path(out, rid), out, rid, plot_cell)) for rid in ids]
    height, width = tiles[0].shape[:2]
    blank = np.full((height, width, 3), 255, np.uint8)
    tiles += [blank] * (rows * columns - len(tiles))
    mosaic = np.concatenate([np.concatenate(tiles[i * columns:(i + 1) * columns], axis=1)
                             for i in range(rows)], axis=0)
    key = grid_legend()
    # the key drawn at the cells' resolution, as wide as the mosaic (to a pixel of rounding)
    fig = plt.figure(figsize=(mosaic.shape[1] / GRID_DPI, 0.5), dpi=GRID_DPI)
    fig.legend(handles=key, loc="center", ncol=len(key) // 2 if columns < 4 else len(key),
               fontsize=8, frameon=False)
    fig.canvas.draw()
    legend = np.asarray(fig.canvas.buffer_rgba())[:, :mosaic.shape[1], :3]
    plt.close(fig)
    legend = np.pad(legend, ((0, 0), (0, mosaic.shape[1] - legend.shape[1]), (0, 0)),
                    constant_values=255)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.concatenate([mosaic, legend], axis=0)).save(path, dpi=(GRID_DPI,) * 2)
    return path

