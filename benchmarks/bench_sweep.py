"""End-to-end sweep throughput (sample + evaluate + accumulate + verify), per relation.

Usage: python benchmarks/bench_sweep.py [--relations R1 R5] [--n 8] [--count 400000]
    [--chunk 65536]

Times the chunk steps after one warm-up (compile) step, so the figure is the steady-state rate;
also times the sampler alone, the usual bottleneck on CPU.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp

from jaxpriv import samplers, sweep


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--relations", nargs="+", default=["R1", "R2", "R3", "R4", "R5", "R6"])
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--count", type=int, default=400_000)
    parser.add_argument("--chunk", type=int, default=65_536)
    args = parser.parse_args()
    print(f"devices: {jax.devices()}; n = m = {args.n}")
    for rid in args.relations:
        config = sweep.make_config(rid, args.n, args.n, args.count, chunk=args.chunk)
        step = sweep.make_step(config)
        state, _ = step(sweep.initial_state(config), jnp.int32(0))
        jax.block_until_ready(state)
        start = time.perf_counter()
        for i in range(1, config.chunks):
            state, _ = step(state, jnp.int32(i))
        jax.block_until_ready(state)
        rate = (config.chunks - 1) * config.chunk / (time.perf_counter() - start)
        spec = sweep.setup_for(rid).sampler(args.n, args.n)
        sample = jax.jit(lambda k: samplers.sample(k, config.chunk, spec))
        jax.block_until_ready(sample(jax.random.key(0)))
        start = time.perf_counter()
        jax.block_until_ready(sample(jax.random.key(1)))
        sampler_rate = config.chunk / (time.perf_counter() - start)
        print(f"{rid}: sweep {rate:,.0f} mech/s; sampler alone {sampler_rate:,.0f} mech/s")


if __name__ == "__main__":
    main()
