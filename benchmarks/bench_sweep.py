"""End-to-end sweep throughput (sample + evaluate + accumulate), per relation.

Usage: python benchmarks/bench_sweep.py [--relations R1 R5] [--n 8] [--count 1000000]
    [--chunk 65536] [--cpu-devices N] [--json results.json]

Times the chunk steps after one warm-up (compile) step, so the figure is the steady-state rate,
for the sweep as shipped (fused screening kernel where it covers the relation) and, in the same
run, with the reference notions; also times the sampler alone (sharded and compiled as the
sweep shards and compiles it: :func:`jaxpriv.fused.compiler_options`). On a CPU the process is split into
``--cpu-devices`` JAX devices (default: one per core), as ``jaxpriv sweep`` does.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec

from jaxpriv import fused, registry, samplers, sweep


def steady_rate(config, use_fused):
    step = sweep.make_step(config, use_fused=use_fused)
    state = sweep.initial_state(config)
    for i in range(2):  # the second call compiles again: the state now carries its sharding
        state, _ = step(state, jnp.int32(i))
    jax.block_until_ready(state)
    start = time.perf_counter()
    for i in range(2, config.chunks):
        state, candidates = step(state, jnp.int32(i))
        jax.block_until_ready(candidates)  # as the sweep does: it verifies them on the host
    return (config.chunks - 2) * config.chunk / (time.perf_counter() - start)


def sampler_rate(config, spec):
    """The sampler alone, its blocks sharded over every device as the sweep shards them."""
    mesh = Mesh(np.array(jax.devices()), ("batch",))
    base_key = jax.random.key(config.seed)

    def device_blocks(block_indices):
        return jax.lax.map(lambda i: samplers.sample(jax.random.fold_in(base_key, i),
                                                     config.block, spec).log_K.sum(),
                           block_indices)
    blocks = jax.shard_map(device_blocks, mesh=mesh, in_specs=PartitionSpec("batch"),
                           out_specs=PartitionSpec("batch"))
    per_chunk = config.chunk // config.block
    sample = jax.jit(lambda c: blocks(c * per_chunk + jnp.arange(per_chunk, dtype=jnp.int32)),
                     compiler_options=fused.compiler_options(spec.n, spec.m))
    jax.block_until_ready(sample(jnp.int32(0)))
    best = float("inf")
    for chunk in range(1, 4):
        start = time.perf_counter()
        jax.block_until_ready(sample(jnp.int32(chunk)))
        best = min(best, time.perf_counter() - start)
    return config.chunk / best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--relations", nargs="+", default=["R1", "R2", "R3", "R4", "R5", "R6"])
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--chunk", type=int, default=65_536)
    parser.add_argument("--cpu-devices", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    jax.config.update("jax_num_cpu_devices", args.cpu_devices)
    print(f"devices: {jax.devices()}; n = m = {args.n}")
    rows = []
    for rid in args.relations:
        config = sweep.make_config(rid, args.n, args.n, args.count, chunk=args.chunk)
        relation_fused = sweep.uses_fused_kernel(registry.get(rid))
        row = {"relation": rid, "fused": relation_fused,
               "sweep_per_s": steady_rate(config, None),
               "reference_notions_per_s": steady_rate(config, False),
               "sampler_per_s": sampler_rate(config, sweep.sampler_spec(config))}
        rows.append(row)
        print(f"{rid}: sweep {row['sweep_per_s']:,.0f} mech/s (fused screen: {relation_fused}); "
              f"with the reference notions {row['reference_notions_per_s']:,.0f}/s; "
              f"sampler alone {row['sampler_per_s']:,.0f}/s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"devices": [str(d) for d in jax.devices()], "n": args.n, "rows": rows,
                       "jax": jax.__version__}, f, indent=1)


if __name__ == "__main__":
    main()
