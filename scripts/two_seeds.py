"""Are the audit's verdicts stable across seeds? Compare two audits of the same relations at
different seeds, verdict by verdict (issue 35: the same verdict class for every relation, and
every uncertified "loose by ×k" within 2% between the two).

Usage:
  python scripts/two_seeds.py RUN_A RUN_B [--json out.json]     compare two finished audits
  python scripts/two_seeds.py --run DIR [--budget quick] [--relations IDS] [--seeds 0 1]
                                                               run both (DIR/seed0, DIR/seed1)

A verdict's class is its label without the number ("loose", "tight", "tight only …",
"violated", ...). Beside the least slack anywhere ("moved"), the least slack over the premise
grid ("on grid", :attr:`jaxpriv.audit.Verdict.grid_slack`) and how far it moved. Exit status 0
when every relation agrees (class, ×k within 2% for a loose verdict, and a certified relation's
certified least slack within 1e-6: it is exact — a point found off the certified grid and below
it is held to the 2% like any found one) and neither run counted a NaN point, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

TOLERANCE = 0.02


def verdict_class(label: str) -> str:
    """``loose by ×1.69`` → ``loose``; ``tight only towards large ldp (≥ 331.6)`` → ``tight
    only towards large``; ``tight only as kl → 0`` stays; others as they are."""
    if label.startswith("loose by"):
        return "loose"
    if label.startswith("tight only towards large"):
        return "tight only towards large"
    if label.startswith("vacuous"):
        return "vacuous"
    return label


def load(run: Path) -> dict[str, dict]:
    data = json.loads((run / "summary.json").read_text())
    return {row["relation"]: row for row in data["relations"]}


def compare(a: dict[str, dict], b: dict[str, dict]) -> list[dict]:
    rows = []
    for rid in [r for r in a if r in b]:
        x, y = a[rid], b[rid]
        cx, cy = verdict_class(x["verdict"]), verdict_class(y["verdict"])
        certified = x.get("kind") == "certified" and y.get("kind") == "certified"
        sx, sy = x.get("worst_slack"), y.get("worst_slack")
        moved = None
        if sx is not None and sy is not None and sx not in (0.0, float("inf")):
            moved = abs(sy - sx) / abs(sx)
        agree = cx == cy
        if agree and cx == "loose" and moved is not None:
            agree = moved <= TOLERANCE
        if agree and certified:  # the certified least slack is exact: the same in both
            exact_a, exact_b = x.get("certified_slack"), y.get("certified_slack")
            if exact_a is not None and exact_b is not None:
                agree = abs(exact_b - exact_a) <= 1e-6 * abs(exact_a)
        gx, gy = x.get("grid_slack"), y.get("grid_slack")
        grid_moved = (abs(gy - gx) / abs(gx) if gx not in (None, 0.0, float("inf"))
                      and gy is not None else None)
        nan = int(x.get("nan_count") or 0) + int(y.get("nan_count") or 0)
        rows.append({"relation": rid, "a": x["verdict"], "b": y["verdict"],
                     "kind": x.get("kind"), "slack_a": sx, "slack_b": sy, "moved": moved,
                     "grid_a": gx, "grid_b": gy, "grid_moved": grid_moved, "agree": agree,
                     "nan": nan})
    return rows


def run_audit(out: Path, seed: int, budget: str, relations: str | None) -> None:
    cmd = [sys.executable, "-m", "jaxpriv", "audit", "--budget", budget, "--seed", str(seed),
           "--out", str(out)]
    if relations:
        cmd += ["--relations", relations]
    print("running:", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", type=Path)
    parser.add_argument("--run", type=Path, default=None)
    parser.add_argument("--budget", default="quick")
    parser.add_argument("--relations", default=None)
    parser.add_argument("--seeds", type=int, nargs=2, default=(0, 1))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.run is not None:
        runs = [args.run / f"seed{s}" for s in args.seeds]
        for seed, out in zip(args.seeds, runs):
            if not (out / "summary.json").exists():
                run_audit(out, seed, args.budget, args.relations)
    elif len(args.runs) == 2:
        runs = args.runs
    else:
        parser.error("give two audit directories, or --run DIR")
    rows = compare(load(runs[0]), load(runs[1]))
    width = max(len(r["relation"]) for r in rows)
    print(f"{'relation':<{width}}  {'verdict, ' + runs[0].name:<42} {'verdict, ' + runs[1].name:<42}"
          f" {'moved':>7} {'on grid':>9}")
    for r in rows:
        moved = "" if r["moved"] is None else f"{100 * r['moved']:.2f}%"
        grid = "" if r["grid_moved"] is None else f"{100 * r['grid_moved']:.2f}%"
        flag = ("" if r["agree"] else "  <-- differs") + (
            f"  <-- {r['nan']} NaN point(s)" if r["nan"] else "")
        print(f"{r['relation']:<{width}}  {r['a']:<42} {r['b']:<42} {moved:>7} {grid:>9}{flag}")
    differ = [r for r in rows if not r["agree"]]
    print(f"\n{len(rows) - len(differ)} of {len(rows)} relations agree (verdict class; "
          f"found ×k within {TOLERANCE:.0%}, certified least slack within 1e-6)")
    nan = [r for r in rows if r["nan"]]
    if nan:  # a NaN level is a bug, whatever the verdicts say
        print(f"NaN points in {len(nan)} relation(s): "
              + ", ".join(f"{r['relation']} ({r['nan']})" for r in nan))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 1 if differ or nan else 0


if __name__ == "__main__":
    raise SystemExit(main())
