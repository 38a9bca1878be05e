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

``--baseline-tree PATH`` runs the same cold (and warm) audit from another checkout first (``git worktree add
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
    """``{relation: figures}`` from an audit directory's summaries: each engine's compile and
    run seconds (the audit summary's own ``seconds`` is the two runs' sum, compiles left out)."""
    summary = json.loads((out / "summary.json").read_text())
    rows = {}
    for entry in summary["relations"]:
        rid = entry["relation"]
        row = {"verdict": entry.get("verdict")}
        for kind in ("sweep", "search"):
            path = out / rid / kind / "summary.json"
            if path.exists():
                data = json.loads(path.read_text())
                row[f"{kind}_compile_s"] = data.get("compile_seconds") or 0.0
                row[f"{kind}_run_s"] = data.get("seconds") or 0.0
        row["compile_s"] = row.get("sweep_compile_s", 0.0) + row.get("search_compile_s", 0.0)
        row["run_s"] = row.get("sweep_run_s", 0.0) + row.get("search_run_s", 0.0)
        rows[rid] = row
    return rows


def table(results: dict[str, dict]) -> str:
    """A Markdown table of every relation (slowest first in the first run): per run its engines'
    compile and run seconds (the sweep's and the search's together); then each run's sums
    and the audit's wall time (2 workers: the sums exceed it)."""
    runs = list(results)
    first = results[runs[0]]["relations"]
    head = ["relation"] + [f"{name} {part}" for name in runs for part in ("compile s", "run s")]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]

    def cells(name, rid):
        row = results[name]["relations"].get(rid)
        return ["—", "—"] if row is None else [f"{row['compile_s']:.1f}", f"{row['run_s']:.1f}"]

    for rid in sorted(first, key=lambda r: -(first[r]["compile_s"] + first[r]["run_s"])):
        lines.append("| " + " | ".join([rid] + [c for n in runs for c in cells(n, rid)]) + " |")
    sums = ["**sum**"]
    for name in runs:
        rows = results[name]["relations"].values()
        sums += [f"**{sum(r['compile_s'] for r in rows):.0f}**",
                 f"**{sum(r['run_s'] for r in rows):.0f}**"]
    walls = ["**audit wall time**"] + [c for n in runs for c in (f"**{results[n]['wall_s']:.0f}**", "")]
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
            if not args.no_warm:
                results["baseline warm"] = audit(tree, out / "baseline-warm",
                                                 out / "cache-baseline", args.relations,
                                                 args.budget)
                print(f"baseline warm: {results['baseline warm']['wall_s']:.0f} s", flush=True)
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
