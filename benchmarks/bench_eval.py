"""Every notion's float64 level of one large mechanism: time and peak memory, notion by notion.

Usage: python benchmarks/bench_eval.py [--n 300] [--m M] [--baseline-n 150] [--seed 0]
    [--notions tv,kl,...] [--json results.json]

A random ``n × m`` mechanism (``m = n`` unless given; ``--n 2000 --m 2``: a tall one) (rows drawn from a flat Dirichlet: entries down to ~1e-6, every
pair distinct) and each notion ``jaxpriv eval`` prints, through the public call
``jaxpriv.level(key, mech)``, each in a fresh process: the first call (compilation included) and
the second (warm), and the process's peak resident memory. Issue 35's limits: ≤ 10 s and
≤ 2 GB per notion at 300×300 on 2 cores.

The baseline is the same code taking every pair at once (no blocks of rows, no pruned pairs,
no rows dropped: what every pair level did before), at ``--baseline-n`` (default 150; at 300 its zCDP needs
more than 24 GB), beside the current code at that size: the ratio is the current code's
speed-up there.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys

_CHILD = r"""
import json, os, resource, sys, time
import jax
jax.config.update("jax_enable_x64", True)
import numpy as np
from jaxpriv import Mechanism, level
from jaxpriv.core import pair_levels, pair_notions
n, m, seed, key = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
if os.environ.get("BENCH_ALL_PAIRS"):
    from jaxpriv.registry import checks
    pair_notions.PAIR_BLOCK_ELEMENTS = pair_levels.PAIR_BLOCK_ELEMENTS = 1 << 62
    checks._rows_needed = lambda record, params, mech: mech
K = np.random.default_rng(seed).dirichlet(np.ones(m or n), size=n)
mech = Mechanism.from_K(K)
start = time.perf_counter(); v = np.asarray(level(key, mech)); cold = time.perf_counter() - start
start = time.perf_counter(); v = np.asarray(level(key, mech)); warm = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
print(json.dumps({"cold_s": cold, "warm_s": warm, "peak_mb": peak, "value": float(v)}))
"""

NOTIONS = ("ldp", "mbp", "abp", "eps_unif", "eps_bel", "mi", "tv", "kl", "chi2", "renyi", "zcdp",
           "delta", "eps_at_delta", "gdp", "max_leakage", "pml")


def run(n: int, seed: int, key: str, all_pairs: bool, timeout: float, m: int = 0) -> dict:
    env = dict(os.environ, BENCH_ALL_PAIRS="1" if all_pairs else "")
    try:
        out = subprocess.run([sys.executable, "-c", _CHILD, str(n), str(m), str(seed), key],
                             env=env,
                             capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout:g} s"}
    if out.returncode != 0:
        return {"error": f"exit {out.returncode}" + (" (killed: out of memory?)"
                                                     if out.returncode < 0 else "")}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _cpu() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--m", type=int, default=0, help="outputs (default: n)")
    parser.add_argument("--baseline-n", type=int, default=150)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--notions", default=",".join(NOTIONS))
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    keys = [k.strip() for k in args.notions.split(",") if k.strip()]
    print(f"CPU: {_cpu()}, {os.cpu_count()} cores; jax {__import__('jax').__version__}")
    m = args.m or args.n
    results = {"cpu": _cpu(), "n": args.n, "m": m, "baseline_n": args.baseline_n,
               "notions": {}}
    print(f"{'':<14}{f'{args.n}×{m} now':>29}   |  "
          f"{f'{args.baseline_n}×{args.m or args.baseline_n}: now vs every pair at once':>52}")
    print(f"{'notion':<14}{'cold s':>12}{'warm s':>8}{'peak MB':>9}   |  {'warm s':>12}"
          f"{'all pairs':>11}{'×':>8}{'peak MB':>10}{'all pairs':>10}")
    for key in keys:
        now = run(args.n, args.seed, key, False, args.timeout, args.m)
        small = run(args.baseline_n, args.seed, key, False, args.timeout, args.m)
        base = run(args.baseline_n, args.seed, key, True, args.timeout, args.m)
        results["notions"][key] = {"current": now, "current_small": small, "all_pairs": base}

        def cell(r, field, fmt):
            return format(r[field], fmt) if field in r else r.get("error", "?")

        ratio = (f"{base['warm_s'] / small['warm_s']:.1f}" if "warm_s" in base and
                 "warm_s" in small and small["warm_s"] > 0 else "—")
        print(f"{key:<14}{cell(now, 'cold_s', '>12.2f')}{cell(now, 'warm_s', '>8.2f')}"
              f"{cell(now, 'peak_mb', '>9.0f')}   |  {cell(small, 'warm_s', '>12.2f')}"
              f"{cell(base, 'warm_s', '>11.2f')}{ratio:>8}{cell(small, 'peak_mb', '>10.0f')}"
              f"{cell(base, 'peak_mb', '>10.0f')}", flush=True)
        if "value" in base and "value" in small and base["value"] != small["value"]:
            rel = abs(base["value"] - small["value"]) / max(abs(base["value"]), 1e-300)
            print(f"  {key}: all pairs {base['value']!r} vs current {small['value']!r} "
                  f"(relative {rel:.1e})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
