"""Re-draw a sweep's figure from its run directory (envelope.csv + summary.json).

Usage: python scripts/plot_sweep.py RUN_DIR [--out FIGURE.png]
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import jaxpriv
from jaxpriv import report


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    summary = json.loads((args.run_dir / "summary.json").read_text())
    config = jaxpriv.SweepConfig(**summary["config"])
    with open(args.run_dir / "envelope.csv") as f:
        rows = [{k: (v if k == "witness" else ("" if v == "" else float(v)))
                 for k, v in row.items()} for row in csv.DictReader(f)]
    out = args.out or args.run_dir / "envelope.png"
    report.plot_envelope(out, rows, config, jaxpriv.get(summary["relation"]))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
