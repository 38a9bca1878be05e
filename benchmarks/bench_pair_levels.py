"""Throughput of the costly pair levels on the sweep's own mechanisms: the zCDP level, the
composed ε(δ), ε(δ) and the GDP level, one jitted call per batch, one CPU device, float32 (the
sweep's screen).

Usage: python benchmarks/bench_pair_levels.py [--n 4] [--m 4] [--count 131072] [--k 10]
    [--batch N] [--baseline-tree PATH] [--repeat 3] [--json results.json]

Each level is called on ``--batch`` mechanisms at a time (default: what a sweep's native call
gets, a group of blocks: 16,384 at 4×4; one call on all 131,072 would take the pair levels'
blocked path, which a sweep of this size never takes). The mechanisms are the sweep sampler's
(``jaxpriv.kernels.samplers.sample_log_K``: its mixture of Dirichlet rows, sparse rows and
randomized-response-like structures), drawn once. Each level is compiled, called once, then
timed over ``--repeat`` passes. Alongside: the raw zCDP kernel on the mechanism's split pairs
(all n² of them, in one call), per pair (``group = 1``) and per mechanism (``group = n²``: the
pairs that cannot attain the max skipped, twins solved once).

``--baseline-tree PATH`` (``git worktree add PATH REV``) runs the same measurement from that
checkout first, in a child process with ``PYTHONPATH=PATH``, and prints both, alternating
``--rounds`` times (timings compare only within one run on one machine). The CPU is named.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

LEVELS = (("zcdp", {}), ("eps_composed", {"k": None, "delta": 1e-6}),
          ("eps_at_delta", {"delta": 1e-2}), ("gdp", {}))


def measure(n: int, m: int, count: int, k: int, repeat: int, batch: int | None = None
            ) -> dict[str, float]:
    """Mechanisms per second of each level (and of the raw zCDP kernel) in this process; each
    level over ``batch`` mechanisms a call (default: what one native call of a sweep gets)."""
    import jax
    import jax.numpy as jnp

    from jaxpriv import registry
    from jaxpriv.core import pair_notions
    from jaxpriv.core.mechanisms import Mechanism
    from jaxpriv.engines.sweep_step import GROUP_ENTRIES
    from jaxpriv.kernels import native, samplers

    log_K = jax.jit(lambda key: samplers.sample_log_K(key, count, n, m))(jax.random.key(0))
    log_prior = jnp.full((count, n), -jnp.log(float(n)))

    def rate(fn, *args) -> float:
        jax.block_until_ready(fn(*args))
        began = time.perf_counter()
        for _ in range(repeat):
            jax.block_until_ready(fn(*args))
        return repeat * count / (time.perf_counter() - began)

    # as a sweep calls them: a group of blocks, GROUP_ENTRIES entries, a call (a whole batch of
    # 131,072 would take the pair levels' blocked path, past PAIR_BLOCK_ELEMENTS, which a sweep
    # at this size never takes)
    batch = min(count, batch or max(1, GROUP_ENTRIES // (n * m)))
    slices = [Mechanism(log_K[i:i + batch], log_prior[i:i + batch], log_prior[i:i + batch],
                        None, None) for i in range(0, count - batch + 1, batch)]

    def in_slices(level):
        def run(_):
            return [level(part) for part in slices]
        return run

    out = {}
    for name, params in LEVELS:
        params = {key: (k if value is None else value) for key, value in params.items()}
        record = registry.notion(name)
        level = jax.jit(lambda mc, r=record, p=params: r.level(mc, **p))
        out[name] = rate(in_slices(level), None) * len(slices) * batch / count
    if native.available():
        log_P, log_Q = jax.jit(lambda lk: [a + 0.0 for a in pair_notions.split_pairs(lk)])(log_K)
        out["zcdp kernel, every pair"] = rate(jax.jit(native.zcdp_orders), log_P, log_Q)
        try:
            grouped = jax.jit(lambda p, q: native.zcdp_orders(p, q, n * n))
            out["zcdp kernel, per mechanism"] = rate(grouped, log_P, log_Q)
        except TypeError:  # a checkout before the grouped kernel
            pass
    return out


def child(tree: Path, argv: list[str]) -> dict[str, float]:
    """:func:`measure` from checkout ``tree`` in a fresh process."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), *argv, "--print-json"],
                          cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"bench_pair_levels: the run from {tree} failed: "
                         f"{(done.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--m", type=int, default=4)
    parser.add_argument("--count", type=int, default=131072)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch", type=int, default=None,
                        help="mechanisms a level call (default: a sweep's native call's, "
                             "16,384 at 4x4)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--baseline-tree", default=None)
    parser.add_argument("--json", default=None)
    parser.add_argument("--print-json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.print_json:  # a child: one line of JSON
        print(json.dumps(measure(args.n, args.m, args.count, args.k, args.repeat,
                                 args.batch)))
        return 0
    from isa import cpu_name

    shared = ["--n", str(args.n), "--m", str(args.m), "--count", str(args.count), "--k",
              str(args.k), "--repeat", str(args.repeat)]
    if args.batch:
        shared += ["--batch", str(args.batch)]
    here = Path(__file__).resolve().parent.parent
    trees = {"this tree": here}
    if args.baseline_tree:
        trees = {"baseline": Path(args.baseline_tree).resolve(), **trees}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            runs[name].append(child(tree, shared))
    print(f"CPU: {cpu_name()}; one device; n = {args.n}, m = {args.m}, {args.count} mechanisms "
          f"of the sweep's sampler, the levels {args.batch or 'a sweep call'}'s worth a call; "
          f"k = {args.k}; mechanisms/s, best of {args.rounds} rounds")
    keys = list(dict.fromkeys(key for results in runs.values() for r in results for key in r))
    print("| level | " + " | ".join(trees) + " |")
    print("|---|" + "---:|" * len(trees))
    for key in keys:
        cells = [f"{max(r.get(key, 0.0) for r in runs[name]):,.0f}" if any(key in r for r in
                                                                              runs[name])
                 else "—" for name in trees]
        print(f"| {key} | " + " | ".join(cells) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps({"cpu": cpu_name(), "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
