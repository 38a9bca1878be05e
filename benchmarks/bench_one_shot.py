"""Compile and run time of a float64 program run once: a relation's notion levels on a batch of
candidates, compiled at XLA's defaults, at level 2 with the elemental fusion emitters, and at
level 0 with them (:func:`jaxpriv.kernels.fused.one_shot_options` picks level 0 below
``ONE_SHOT_WORK`` entries of K, level 2 above).

Usage: python benchmarks/bench_one_shot.py [--relations D8.d1e-2,D3,C6.k10.d1e-6]
    [--count 64] [--n 4] [--m 4] [--json results.json]

Each setting is compiled from its lowered program (no persistent cache: ``JAX_COMPILATION_CACHE_DIR``
is emptied for the process), then called twice; the second call is the run time. The largest
relative difference of each setting's levels from the defaults' is printed beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ["JAX_COMPILATION_CACHE_DIR"] = ""
sys.path.insert(0, str(Path(__file__).resolve().parent))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from isa import cpu_name  # noqa: E402

SETTINGS = {
    "XLA defaults": None,
    "level 2, elemental": {"xla_backend_optimization_level": 2,
                           "xla_cpu_use_fusion_emitters": False},
    "level 0, elemental": {"xla_backend_optimization_level": 0,
                           "xla_cpu_use_fusion_emitters": False},
}


def measure(rid: str, count: int, n: int, m: int) -> dict:
    """``{setting: {"compile_s", "run_s", "max_rel_diff"}}`` for ``rid``'s float64 levels."""
    from jaxpriv import registry
    from jaxpriv.core.mechanisms import Mechanism
    from jaxpriv.registry import programs

    relation = registry.get(rid)
    values = programs.traced_values(relation, np.float64)
    fixed = {k: v for k, v in relation.options.items() if k not in values}

    def levels_of(mech, at_values):
        at = programs.bind(relation, at_values)
        return registry.notion_levels(at, mech, **fixed, **at_values)

    with jax.enable_x64(True):
        f64 = jnp.float64
        shape = Mechanism(jax.ShapeDtypeStruct((count, n, m), f64),
                          jax.ShapeDtypeStruct((count, n), f64),
                          jax.ShapeDtypeStruct((count, n), f64), None, None)
        rng = np.random.default_rng(0)
        flat = jnp.full((count, n), -np.log(n))
        mech = Mechanism(jnp.asarray(np.log(rng.dirichlet(np.ones(m), size=(count, n)))),
                         flat, flat, None, None)
        results, reference = {}, None
        for name, options in SETTINGS.items():
            lowered = jax.jit(levels_of, compiler_options=options).lower(shape, values)
            start = time.perf_counter()
            compiled = lowered.compile()
            compile_s = time.perf_counter() - start
            jax.block_until_ready(compiled(mech, values))
            start = time.perf_counter()
            out = jax.block_until_ready(compiled(mech, values))
            run_s = time.perf_counter() - start
            leaves = [np.asarray(a, np.float64) for a in jax.tree_util.tree_leaves(out)
                      if np.asarray(a).dtype.kind == "f"]
            reference = reference or leaves
            diff = max((float(np.nanmax(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)))
                        for a, b in zip(leaves, reference) if a.size), default=0.0)
            results[name] = {"compile_s": compile_s, "run_s": run_s, "max_rel_diff": diff}
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--relations", default="D8.d1e-2,D3,C6.k10.d1e-6")
    parser.add_argument("--count", type=int, default=64)
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--m", type=int, default=4)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    print(f"CPU: {cpu_name()}; jax {jax.__version__}; {args.count} mechanisms of "
          f"{args.n}×{args.m}, float64", flush=True)
    everything = {}
    for rid in args.relations.split(","):
        everything[rid] = measure(rid, args.count, args.n, args.m)
        for name, row in everything[rid].items():
            print(f"{rid:16s} {name:20s} compile {row['compile_s']:6.2f} s   run "
                  f"{row['run_s'] * 1e3:7.1f} ms   max rel. diff {row['max_rel_diff']:.1e}",
                  flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"cpu": cpu_name(), **everything}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
