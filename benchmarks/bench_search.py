"""Adversarial search throughput (restart-steps per second) and time to reach 1% of a known
optimum.

Usage: python benchmarks/bench_search.py [--sizes 2 4 8] [--restarts 512] [--grid 16]
    [--cpu-devices N] [--compile R5 D6.a2.d1e-5 ...] [--repeat 3] [--json results.json]

Throughput: the jitted segments (``segment`` optimizer steps on every restart of every grid
point) after one warm-up segment, for R2 (LDP/MBP only) and R5 (ABP, record law), n = m in
``--sizes``. Time to 1%: wall time, compile excluded, until every grid point's best float32
objective is within 1% of the certified supremum (:mod:`jaxpriv.engines.certify`) for R1, R2, R4, R6
(n = m = 4); the float64 re-evaluation that follows a search is timed separately.

``--compile RELATION ...`` times only what a search costs before its first step: tracing and
lowering, then compiling its segment (3×3, 8 restarts, 2 grid points, 100 steps a segment: a
quick audit's searches are this size), ``--repeat`` times each, in one process (JAX's persistent
cache is not on here), the program's HLO size beside it. Compare two checkouts by running it in
each (``PYTHONPATH=TREE``), alternating: on a 2-core machine one compile varies by ±20%.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import numpy as np


def _values(config):
    """What a segment takes besides its state: the claim's parameters and the grid."""
    from jaxpriv import registry
    from jaxpriv.engines.search_loop import grid_argument
    return (registry.programs.traced_values(registry.get(config.relation), np.float32),
            grid_argument(config, np.float32))


def throughput(relation, n, restarts, grid_points, segments=5):
    from jaxpriv.engines import search
    grid = tuple(np.linspace(0.1, 3.0, grid_points))
    config = search.make_config(relation, n, n, grid, restarts=restarts, steps=100_000,
                                param=0.5 if relation == "R5" else 0.0)
    optimizer = search.default_optimizer(config)
    state = search.initial_state(config, optimizer)
    segment, values = search.make_segment(config, optimizer), _values(config)
    state = segment(state, *values)
    jax.block_until_ready(state)
    start = time.perf_counter()
    for _ in range(segments):
        state = segment(state, *values)
    jax.block_until_ready(state)
    seconds = time.perf_counter() - start
    return segments * config.segment * config.restarts * len(grid) / seconds


def time_to_one_percent(relation, n, restarts, grid_points, param):
    from jaxpriv.engines import certify, search
    grid = tuple(np.linspace(0.05, 1.0 if relation == "R6" else 3.0, grid_points))
    config = search.make_config(relation, n, n, grid, restarts=restarts, steps=3000,
                                param=param, segment=50)
    optimizer = search.default_optimizer(config)
    state = search.initial_state(config, optimizer)
    values = _values(config)
    began = time.perf_counter()
    segment = search.make_segment(config, optimizer).lower(state, *values).compile()
    compile_seconds = time.perf_counter() - began
    target = 1.0 / certify.envelope(relation, np.asarray(grid), param, n=n).min_slack
    seconds, steps = 0.0, 0
    while steps < config.steps:
        start = time.perf_counter()
        state = segment(state, *values)
        best = np.exp(np.max(np.asarray(state.best_score, np.float64), axis=1))
        seconds += time.perf_counter() - start
        steps += config.segment
        if np.all(best >= 0.99 * target):
            break
    gap = float(np.max(1 - best / target))
    start = time.perf_counter()
    rows, _ = search.evaluate_grid(config, state, None)
    verify_seconds = time.perf_counter() - start
    final_gap = max(r["gap"] for r in rows)
    return {"relation": relation, "n": n, "grid_points": grid_points, "restarts": restarts,
            "steps": steps, "seconds": seconds, "compile_seconds": compile_seconds,
            "float32_gap": gap, "float64_gap": final_gap, "verify_seconds": verify_seconds}


def compile_cost(relation, repeat):
    """Seconds to trace and lower, and to compile, one search segment of ``relation`` (3×3, a
    quick audit's size), ``repeat`` times; the compiled program's HLO size."""
    from jaxpriv.engines import search
    config = search.make_config(relation, 3, 3, (0.5, 1.0), restarts=8, steps=200,
                                segment=100, param=0.5 if relation == "R5" else 0.0)
    optimizer = search.default_optimizer(config)
    state = search.initial_state(config, optimizer)
    values = _values(config)
    lower, compile_, lines = [], [], 0
    for _ in range(repeat):
        began = time.perf_counter()
        lowered = search.make_segment(config, optimizer).lower(state, *values)
        lowered_at = time.perf_counter()
        compiled = lowered.compile()
        lower.append(lowered_at - began)
        compile_.append(time.perf_counter() - lowered_at)
        lines = compiled.as_text().count("\n")
    return {"relation": relation, "lower_s": lower, "compile_s": compile_, "hlo_lines": lines}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--restarts", type=int, default=512)
    parser.add_argument("--grid", type=int, default=16, help="grid points")
    parser.add_argument("--cpu-devices", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--compile", nargs="+", metavar="RELATION",
                        help="time only tracing, lowering and compiling these relations' "
                             "segments")
    parser.add_argument("--repeat", type=int, default=3, help="compiles per relation")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    jax.config.update("jax_num_cpu_devices", args.cpu_devices)
    print(f"devices: {jax.devices()}")
    if args.compile:
        rows = [compile_cost(relation, args.repeat) for relation in args.compile]
        print(f"{'relation':>16} {'trace+lower s (median)':>23} {'compile s (median)':>19} "
              f"{'HLO lines':>10}")
        for r in rows:
            print(f"{r['relation']:>16} {np.median(r['lower_s']):>23.2f} "
                  f"{np.median(r['compile_s']):>19.2f} {r['hlo_lines']:>10,}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"devices": [str(d) for d in jax.devices()], "compile": rows}, f,
                          indent=1)
        return
    results = {"devices": [str(d) for d in jax.devices()], "throughput": [], "to_1pct": []}
    print("\nrestart-steps per second (grid points × restarts × steps / s)")
    print(f"{'relation':>8} {'n=m':>4} {'restarts':>9} {'grid':>5} {'restart-steps/s':>16}")
    for relation in ("R2", "R5"):
        for n in args.sizes:
            rate = throughput(relation, n, args.restarts, args.grid)
            results["throughput"].append({"relation": relation, "n": n, "rate": rate,
                                          "restarts": args.restarts, "grid": args.grid})
            print(f"{relation:>8} {n:>4} {args.restarts:>9} {args.grid:>5} {rate:>16,.0f}")
    print("\ntime until every grid point is within 1% of the certified supremum (n = m = 4)")
    print(f"{'relation':>8} {'steps':>6} {'seconds':>8} {'compile':>8} {'gap f32':>9} "
          f"{'gap f64':>9} {'f64 re-eval s':>13}")
    for relation, param in (("R1", 0.0), ("R2", 0.0), ("R4", 0.5), ("R6", 0.0)):
        r = time_to_one_percent(relation, 4, 128, args.grid, param)
        results["to_1pct"].append(r)
        print(f"{relation:>8} {r['steps']:>6} {r['seconds']:>8.2f} {r['compile_seconds']:>8.1f} "
              f"{r['float32_gap']:>9.2e} {r['float64_gap']:>9.2e} {r['verify_seconds']:>13.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
