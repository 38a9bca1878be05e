"""Re-draw one relation's figure of an audit report from the audit directory.

Usage: python scripts/plot_audit_figure.py AUDIT_DIR R6 [--out FIGURE.png]
       python scripts/plot_audit_figure.py AUDIT_DIR all      (every figure of the report)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from jaxpriv import InputError, report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("audit_dir", type=Path)
    parser.add_argument("relation", help="relation id, or 'all'")
    parser.add_argument("--out", type=Path, default=None,
                        help="figure file (default AUDIT_DIR/figures/<id>.png)")
    args = parser.parse_args()
    try:
        summary = json.loads((args.audit_dir / "summary.json").read_text())
        audited = [v["relation"] for v in summary["relations"]]
        ids = audited if args.relation == "all" else [args.relation]
        for rid in ids:
            if rid not in audited:
                raise InputError(f"{rid} is not in the audit at {args.audit_dir} "
                                 f"({', '.join(audited)})")
            out = args.out if args.out and len(ids) == 1 else \
                args.audit_dir / report.FIGURES / f"{rid}.png"
            print(f"wrote {report.plot_relation(args.audit_dir, rid, out)}")
    except (InputError, OSError, KeyError, json.JSONDecodeError) as error:
        print(f"plot_audit_figure: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
