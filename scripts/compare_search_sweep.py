"""Check that a search envelope dominates a sweep envelope at every common grid point.

Usage: python scripts/compare_search_sweep.py SEARCH_DIR SWEEP_DIR

Both directories are either single runs or ``--relation all`` runs (one sub-directory per
relation). A sweep row at premise edge ``x`` (and condition-parameter edge ``ε``, where the
relation has one) is comparable with the search's grid point ``x`` run at that same ``ε``; for R6
the compared quantity is ``γ/β``, since its bound scales with the measured β. Exit status 1 if
the search falls below the sweep anywhere by more than 1e-5 relative (the search optimizes in
float32: at a certified supremum it can end a few 1e-6 short of a structured witness that attains it).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from jaxpriv import report


def compare(search_dir: Path, sweep_dir: Path) -> tuple[int, int, float]:
    """(points compared, points where the search is below, worst ratio search/sweep)."""
    summary = json.loads((search_dir / "summary.json").read_text())
    param = summary["config"]["param"]
    ratio = summary["relation"] == "R6"
    searched = {round(r["x"], 9): r for r in report.read_envelope(search_dir)}
    compared = below = 0
    worst = np.inf
    for row in report.read_envelope(sweep_dir):
        if np.isfinite(row["param"]) and not ratio and abs(row["param"] - param) > 1e-9:
            continue
        found = searched.get(round(row["x"], 9))
        if found is None or not np.isfinite(found["conclusion"]):
            continue
        value = (lambda r: r["conclusion"] / r["parameter"]) if ratio else (
            lambda r: r["conclusion"])
        if value(row) <= 0:
            continue
        compared += 1
        worst = min(worst, value(found) / value(row))
        below += value(found) < value(row) * (1 - 1e-5)
    return compared, below, worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("search_dir", type=Path)
    parser.add_argument("sweep_dir", type=Path)
    args = parser.parse_args()
    if (args.search_dir / "summary.json").exists():
        pairs = [(args.search_dir, args.sweep_dir)]
    else:
        pairs = [(d, args.sweep_dir / d.name) for d in sorted(args.search_dir.iterdir())
                 if (d / "summary.json").exists() and (args.sweep_dir / d.name).exists()]
    failed = False
    print(f"{'relation':>8} {'points':>7} {'below':>6} {'min search/sweep':>17}")
    for search_dir, sweep_dir in pairs:
        compared, below, worst = compare(search_dir, sweep_dir)
        failed |= below > 0
        print(f"{search_dir.name:>8} {compared:>7} {below:>6} {worst:>17.4f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
