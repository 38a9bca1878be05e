"""The quick audit's time, relation by relation: compile against run, cold caches and warm.

Usage: python benchmarks/bench_audit.py [--relations all] [--budget quick] [--out DIR]
    [--baseline-tree PATH] [--no-warm] [--json results.json]

Runs ``jaxpriv audit --budget quick`` twice in fresh processes: **cold** with an empty jaxpriv
cache (``JAXPRIV_CACHE`` pointed at a new folder: no persistent compilation cache, the native
kernel built again — what a new user meets) and **warm** with the cache the cold run filled.
Per relation it reads the run directories' summaries: the sweep's and the search's compile
seconds and run seconds, and the relation's whole time in the audit (the rest: float64
re-evaluation, certificates, witnesses, plots). Issue 35's targets, on a 2-core CPU: every
built-in relation ≤ 3 min of audit time cold, ≤ 60 s warm.

``--baseline-tree PATH`` runs the same cold audit from another checkout first (``git worktree add
PATH REV``), in the same session, and prints the two side by side: timings compare only within
one run on one machine. The CPU is named with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from isa import cpu_name  # noqa: E402


def audit(tree: Path, out: Path, cache: Path, relations: str, budget: str) -> dict:
    """One ``jaxpriv audit`` from checkout ``tree`` in a fresh process; its wall time and the
    per-relation figures of its run directory."""
    env = dict(os.environ, JAXPRIV_CACHE=str(cache), PYTHONPATH=str(tree))
    command = [sys.executable, "-m", "jaxpriv", "audit", "--budget", budget, "--out", str(out)]
    if relations != "all":
        command += ["--relations", relations]
    began = time.perf_counter()
    done = subprocess.run(command, cwd=tree, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - began
    if done.returncode not in (0, 1):  # 1: a relation is violated (the audit's own verdict)
        tail = done.stderr.strip().splitlines()[-1:] or ["?"]
        raise SystemExit(f"bench_audit: the audit from {tree} failed: {tail[0]}")
    return {"wall_s": wall, "relations": per_relation(out)}


def per_relation(out: Path) -> dict[str, dict]:
    """``{relation: seconds}`` from an audit directory's summaries."""
    summary = json.loads((out / "summary.json").read_text())
    rows = {}
    for entry in summary["relations"]:
        rid = entry["relation"]
        row = {"total_s": entry.get("seconds"), "verdict": entry.get("verdict")}
        for kind in ("sweep", "search"):
            path = out / rid / kind / "summary.json"
            if path.exists():
                data = json.loads(path.read_text())
                row[f"{kind}_compile_s"] = data.get("compile_seconds")
                row[f"{kind}_run_s"] = data.get("seconds")
        rows[rid] = row
    return rows


def table(results: dict[str, dict]) -> str:
    """A Markdown table of every relation: cold compile/run per engine, cold and warm totals."""
    runs = list(results)
    cold = results[runs[0]]["relations"]
    head = ["relation", "sweep compile", "sweep run", "search compile", "search run"]
    head += [f"{name} total" for name in runs]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def cell(value):
        return "—" if value is None else f"{value:.1f}"

    order = sorted(cold, key=lambda rid: -(cold[rid]["total_s"] or 0.0))
    for rid in order:
        row = cold[rid]
        cells = [rid] + [cell(row.get(k)) for k in ("sweep_compile_s", "sweep_run_s",
                                                     "search_compile_s", "search_run_s")]
        cells += [cell(results[name]["relations"].get(rid, {}).get("total_s")) for name in runs]
        lines.append("| " + " | ".join(cells) + " |")
    sums = ["**sum of relations**", "", "", "", ""]
    sums += [f"**{sum(r.get('total_s') or 0.0 for r in results[n]['relations'].values()):.0f}**"
             for n in runs]
    walls = ["**audit wall time**", "", "", "", ""]
    walls += [f"**{results[n]['wall_s']:.0f}**" for n in runs]
    return "\n".join(lines + ["| " + " | ".join(sums) + " |", "| " + " | ".join(walls) + " |"])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--relations", default="all")
    parser.add_argument("--budget", default="quick")
    parser.add_argument("--out", default=None, help="keep the audits here (default: a temp dir)")
    parser.add_argument("--baseline-tree", default=None,
                        help="another checkout to audit cold first, for a before/after")
    parser.add_argument("--no-warm", action="store_true", help="skip the warm run")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    here = Path(__file__).resolve().parent.parent
    print(f"CPU: {cpu_name()}; jax {__import__('jax').__version__}; budget {args.budget}",
          flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(args.out) if args.out else Path(scratch)
        out.mkdir(parents=True, exist_ok=True)
        results: dict[str, dict] = {}
        if args.baseline_tree:
            tree = Path(args.baseline_tree).resolve()
            results["baseline cold"] = audit(tree, out / "baseline-cold", out / "cache-baseline",
                                             args.relations, args.budget)
            print(f"baseline cold: {results['baseline cold']['wall_s']:.0f} s", flush=True)
        results["cold"] = audit(here, out / "cold", out / "cache", args.relations, args.budget)
        print(f"cold: {results['cold']['wall_s']:.0f} s", flush=True)
        if not args.no_warm:
            results["warm"] = audit(here, out / "warm", out / "cache", args.relations,
                                    args.budget)
            print(f"warm: {results['warm']['wall_s']:.0f} s", flush=True)
        if args.baseline_tree:  # the first column is the current cold run
            results = {"cold": results.pop("cold"), **results}
        print(table(results))
        if args.json:
            Path(args.json).write_text(json.dumps({"cpu": cpu_name(), **results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
