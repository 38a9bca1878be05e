"""A publication-style grid of every audited relation, two panels per relation, one shared key.

Per relation, sharing the premise axis: the claimed bound, certified supremum, sweep envelope
(running supremum over premise <= x) and search envelope on top; their slack on a log axis below.

Usage: python scripts/plot_audit_grid.py AUDIT_DIR [--out grid.pdf] [--columns 4]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from jaxpriv import InputError, report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("audit_dir", type=Path)
    parser.add_argument("--out", type=Path, default=None,
                        help="figure file, PNG or PDF (default AUDIT_DIR/figures/grid.png)")
    parser.add_argument("--columns", type=int, default=4)
    parser.add_argument("--relations", default=None, help="comma list (default: all audited)")
    args = parser.parse_args()
    out = args.out or args.audit_dir / report.FIGURES / "grid.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    ids = [r.strip() for r in args.relations.split(",")] if args.relations else None
    try:
        print(f"wrote {report.plot_grid(args.audit_dir, out, ids, max(1, args.columns))}")
    except (InputError, OSError) as error:
        print(f"plot_audit_grid: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
