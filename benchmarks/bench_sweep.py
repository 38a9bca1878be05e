"""End-to-end sweep throughput (sample + evaluate + accumulate), per relation.

Usage: python benchmarks/bench_sweep.py [--relations R1 R5] [--n 8] [--count 4000000]
    [--chunk N] [--k 2 --r 3] [--cpu-devices N] [--isa native avx2] [--json results.json]

Times the chunk steps after the warm-up (compile) steps, so the figure is the steady-state rate
(the median chunk's, as the screen's figure is the median of its timed calls),
for the sweep as shipped (fused screening kernel where it covers the relation) and, in the same
run, with the reference notions; also times the sampler alone (sharded and compiled as the
sweep shards and compiles it: :func:`jaxpriv.kernels.fused.compiler_options`). On a CPU the process is split into
``--cpu-devices`` JAX devices (default: one per core), as ``jaxpriv sweep`` does.

Two baselines in the same run, for the relations the fused screen covers: the **screen alone**
(LDP + MBP + record-law ABP of pre-drawn mechanisms, sharded and compiled as in
``bench_kernels.py``) and a **vectorized NumPy float64 sweep** that samples too (Dirichlet rows
with a log-uniform concentration per mechanism, Dirichlet priors, the three levels as in
``bench_kernels.numpy_core``, and a binned envelope of ABP over MBP), chunk by chunk like the
sweep. Ratios: sweep / screen and sweep / NumPy.

Each instruction-set level of ``--isa`` (default ``native avx2``: the CPU's full width, and
NumPy, XLA and the native kernel capped at AVX2 as on most users' CPUs; ``benchmarks/isa.py``)
runs in its own process, baselines included, and the levels are tabled side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec

from jaxpriv import registry
from jaxpriv.engines import sweep
from jaxpriv.kernels import fused, samplers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_kernels import fused_core, numpy_core, sharded  # noqa: E402
from isa import add_argument as add_isa_argument, cpu_name, needs_children, run_levels  # noqa: E402


def screen_rate(n, batch=200_000, repeats=7):
    """The fused screen alone on pre-drawn mechanisms (as bench_kernels.py measures it): the
    median of ``repeats`` timed calls, as the sweep's rate is the median of its chunks'."""
    rng = np.random.default_rng(0)
    log_K = jnp.asarray(np.log(rng.dirichlet(np.ones(n), size=(batch, n))), jnp.float32)
    log_prior = jnp.asarray(np.log(rng.dirichlet(np.ones(n), size=batch)), jnp.float32)
    fast, sharding = sharded(lambda k, p: fused_core(k, p), fused.compiler_options(n, n))
    log_K, log_prior = jax.device_put(log_K, sharding), jax.device_put(log_prior, sharding)
    jax.block_until_ready(fast(log_K, log_prior))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fast(log_K, log_prior))
        times.append(time.perf_counter() - start)
    return batch / float(np.median(times))


def numpy_sweep_rate(n, count=200_000, chunk=25_000, bins=40, x_max=10.0, seed=0):
    """A vectorized NumPy float64 sweep, sampling included: mechanisms/s."""
    rng = np.random.default_rng(seed)
    envelope = np.full(bins, -np.inf)
    start = time.perf_counter()
    for _ in range(count // chunk):
        alpha = np.exp(rng.uniform(np.log(1e-2), np.log(1e2), (chunk, 1, 1)))
        gamma = rng.standard_gamma(np.broadcast_to(alpha, (chunk, n, n)))
        K = np.maximum(gamma, 1e-300)
        K /= K.sum(-1, keepdims=True)
        prior = rng.dirichlet(np.ones(n), size=chunk)
        _, mbp, abp = numpy_core(K, prior)
        cell = np.clip((mbp / x_max * bins).astype(np.int64), 0, bins - 1)
        np.maximum.at(envelope, cell[mbp <= x_max], abp[mbp <= x_max])
    return (count // chunk) * chunk / (time.perf_counter() - start)


def steady_rate(config, use_fused, sampler="auto"):
    if config.chunks < 3:
        raise SystemExit(f"--count {config.count} is {config.chunks} chunk(s): the rate is timed "
                         f"after two warm-up chunks, so give at least 3 (--count or --chunk)")
    step = sweep.make_step(config, use_fused=use_fused, sampler=sampler)
    state = sweep.initial_state(config)
    for i in range(2):  # the second call compiles again: the state now carries its sharding
        state, _ = step(state, jnp.int32(i))
    jax.block_until_ready(state)
    times = []
    for i in range(2, config.chunks):
        start = time.perf_counter()
        state, candidates = step(state, jnp.int32(i))
        jax.block_until_ready(candidates)  # as the sweep does: it verifies them on the host
        times.append(time.perf_counter() - start)
    return config.chunk / float(np.median(times))  # the median chunk: robust to a stray pause


def sampler_rate(config, spec, kernel="auto"):
    """The sampler alone, its blocks sharded over every device as the sweep shards them."""
    mesh = Mesh(np.array(jax.devices()), ("batch",))
    base_key = jax.random.key(config.seed)

    def device_blocks(block_indices):
        return jax.lax.map(lambda i: samplers.sample(jax.random.fold_in(base_key, i),
                                                     config.block, spec,
                                                     kernel).log_K.sum(),
                           block_indices)
    blocks = jax.shard_map(device_blocks, mesh=mesh, in_specs=PartitionSpec("batch"),
                           out_specs=PartitionSpec("batch"))
    per_chunk = config.chunk // config.block
    sample = jax.jit(lambda c: blocks(c * per_chunk + jnp.arange(per_chunk, dtype=jnp.int32)),
                     compiler_options=fused.compiler_options(spec.n, spec.m))
    jax.block_until_ready(sample(jnp.int32(0)))
    times = []
    for chunk in range(1, 6):
        start = time.perf_counter()
        jax.block_until_ready(sample(jnp.int32(chunk)))
        times.append(time.perf_counter() - start)
    return config.chunk / float(np.median(times))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--relations", nargs="+", default=["R1", "R2", "R3", "R4", "R5", "R6"])
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--count", type=int, default=4_000_000)
    parser.add_argument("--chunk", type=int, default=None,
                        help="mechanisms per step (default: the sweep's, sweep.STEP_ENTRIES)")
    parser.add_argument("--cpu-devices", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--k", type=int, default=2, help="database relations: values per "
                        "record (n = k^r secrets; default 2)")
    parser.add_argument("--r", type=int, default=3, help="database relations: records "
                        "(default 3)")
    parser.add_argument("--json", help="also write the results to this file")
    add_isa_argument(parser)
    args = parser.parse_args()
    if needs_children(args):
        return side_by_side(args, run_levels(args, sys.argv[1:]))
    jax.config.update("jax_num_cpu_devices", args.cpu_devices)
    chunk = args.chunk or "the sweep's default"
    print(f"{cpu_name()}; devices: {jax.devices()}; n = m = {args.n}; chunk: {chunk}")
    screen = screen_rate(args.n)
    numpy_rate = numpy_sweep_rate(args.n)
    print(f"fused screen alone {screen:,.0f} mech/s; NumPy float64 sweep (sampling included) "
          f"{numpy_rate:,.0f} mech/s")
    rows = []
    for rid in args.relations:
        layout = dict(k=args.k, r=args.r) if registry.get(rid).needs_records else {}
        config = sweep.make_config(rid, args.n, args.n, args.count, chunk=args.chunk, **layout)
        relation_fused = sweep.uses_fused_kernel(registry.get(rid))
        row = {"relation": rid, "fused": relation_fused,
               "sweep_per_s": steady_rate(config, None),
               "sweep_xla_sampler_per_s": steady_rate(config, None, "xla"),
               "reference_notions_per_s": steady_rate(config, False),
               "sampler_per_s": sampler_rate(config, sweep.sampler_spec(config)),
               "xla_sampler_per_s": sampler_rate(config, sweep.sampler_spec(config), "xla")}
        row["sweep_over_screen"] = row["sweep_per_s"] / screen
        row["sweep_over_numpy"] = row["sweep_per_s"] / numpy_rate
        rows.append(row)
        print(f"{rid}: sweep {row['sweep_per_s']:,.0f} mech/s (fused screen: {relation_fused}); "
              f"with JAX's sampler {row['sweep_xla_sampler_per_s']:,.0f}/s; "
              f"with the reference notions {row['reference_notions_per_s']:,.0f}/s; "
              f"sampler alone {row['sampler_per_s']:,.0f}/s (JAX's "
              f"{row['xla_sampler_per_s']:,.0f}/s); sweep/screen "
              f"{row['sweep_over_screen']:.2f}, sweep/NumPy {row['sweep_over_numpy']:.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpu": cpu_name(), "isa": args.isa[0], "devices": [str(d) for d in jax.devices()],
                       "n": args.n, "screen_per_s": screen, "numpy_sweep_per_s": numpy_rate,
                       "rows": rows, "jax": jax.__version__}, f, indent=1)



def side_by_side(args, results):
    """One table of every level's figures (the ratios are each level's own: its sweep against
    its screen and its NumPy, NumPy capped the same way)."""
    levels = list(results)
    first = results[levels[0]]
    print(f"\n{first['cpu']}; n = m = {first['n']}; {len(first['devices'])} devices")
    print("level: screen alone, NumPy sweep  " + "; ".join(
        f"{lv}: {results[lv]['screen_per_s']:.3e}/s, {results[lv]['numpy_sweep_per_s']:.3e}/s"
        + (f" (= {results[lv]['same_as']})" if "same_as" in results[lv] else "")
        for lv in levels))
    header = "| relation | " + " | ".join(f"{lv} sweep | {lv} / screen | {lv} / NumPy"
                                           for lv in levels) + " |"
    print(header)
    print("|---|" + "---:|" * (3 * len(levels)))
    for i, row in enumerate(first["rows"]):
        cells = []
        for lv in levels:
            r = results[lv]["rows"][i]
            screen = f"{r['sweep_over_screen']:.2f}" if r["fused"] else ""
            cells += [f"{r['sweep_per_s'] / 1e6:.2f}e6", screen, f"{r['sweep_over_numpy']:.1f}"]
        print(f"| {row['relation']} | " + " | ".join(cells) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpu": first["cpu"], "levels": results}, f, indent=1)


if __name__ == "__main__":
    main()
