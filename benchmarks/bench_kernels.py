"""Throughput of LDP + MBP + ABP(record law, all d*) over batches of random mechanisms.

Compares, in the same run and on the same mechanisms:
  * jaxpriv's fused batch kernel (:func:`jaxpriv.kernels.fused.record_levels`), float32, the batch
    sharded over all local devices (on a CPU: one JAX device per core, ``--cpu-devices``), as
    the sweep runs it: on a CPU that is the native kernel (:mod:`jaxpriv.kernels.native`) where it
    builds;
  * the same with ``kernel="xla"`` (its XLA kernel), to show what the native kernel adds;
  * jaxpriv's reference kernels (:mod:`jaxpriv.core.notions`), float32, one device;
  * the naive ``jax.vmap`` of a straightforward per-mechanism function (float32);
  * a straightforward vectorized NumPy float64 implementation (the baseline).

Usage:
  python benchmarks/bench_kernels.py [--sizes 2 4 8 16 32] [--batch 200000] [--repeats 3]
      [--cpu-devices N] [--isa native avx2] [--json results.json]

Each instruction-set level of ``--isa`` (default ``native avx2``: the CPU's full width, and
NumPy, XLA and the native kernel capped at AVX2 as on most users' CPUs; ``benchmarks/isa.py``)
runs in its own process, the NumPy baseline included, and the levels are tabled side by side.

Reports mechanisms per second for each and the ratio jaxpriv / NumPy, and the peak resident
memory of the process. Throughput is measured here, never in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxpriv.core import notions
from jaxpriv.kernels import fused

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from isa import add_argument as add_isa_argument, cpu_name, needs_children, run_levels  # noqa: E402


def jaxpriv_core(log_K, log_prior):
    return (notions.ldp_kernel(log_K), notions.mbp_kernel(log_K, log_prior),
            jnp.max(notions.abp_record_kernel(log_K, log_prior, log_prior), axis=-1))


def fused_core(log_K, log_prior, tile=None, kernel="auto"):
    levels = fused.record_levels(log_K, log_prior, log_prior, tile=tile, kernel=kernel)
    return levels.ldp, levels.mbp, levels.abp


def sharded(fn, compiler_options=None):
    """``fn`` on the batch split over every local device (one block per device)."""
    mesh = Mesh(np.array(jax.devices()), ("batch",))
    spec = PartitionSpec("batch")
    return jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=(spec, spec), out_specs=spec),
                   compiler_options=compiler_options), NamedSharding(mesh, spec)


def naive_single(K, prior):
    """One mechanism, written the obvious way (probabilities, explicit posterior)."""
    ldp = jnp.max(jnp.log(K[:, None, :] / K[None, :, :]))
    p = prior @ K
    mbp = jnp.max(jnp.abs(jnp.log(K / p)))
    posterior = prior[:, None] * K / p
    FA = K @ posterior.T  # F^A for each d*
    M = 0.5 * (FA + prior)
    js = 0.5 * jnp.sum(FA * jnp.log(FA / M), -1) + 0.5 * jnp.sum(prior * jnp.log(prior / M), -1)
    return ldp, mbp, jnp.max(jnp.sqrt(jnp.maximum(js, 0.0)))


def numpy_core(K, prior):
    """Vectorized NumPy float64 over the batch (the baseline)."""
    logK = np.log(K)
    ldp = np.max(logK.max(axis=1) - logK.min(axis=1), axis=-1)
    p = np.einsum("bd,bdw->bw", prior, K)
    ratio = K / p[:, None, :]
    mbp = np.max(np.abs(np.log(ratio)), axis=(1, 2))
    posterior = prior[:, :, None] * ratio
    FA = np.einsum("bsw,bdw->bsd", K, posterior)
    P = prior[:, None, :]
    M = 0.5 * (FA + P)
    js = 0.5 * np.sum(FA * np.log(FA / M), -1) + 0.5 * np.sum(P * np.log(P / M), -1)
    return ldp, mbp, np.sqrt(np.maximum(js, 0.0)).max(axis=-1)


def timed(fn, repeats):
    fn()  # compile / warm up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def bench(n, batch, repeats, tile=None, seed=0):
    rng = np.random.default_rng(seed)
    K64 = rng.dirichlet(np.ones(n), size=(batch, n))
    prior64 = rng.dirichlet(np.ones(n), size=batch)
    log_K = jnp.asarray(np.log(K64), jnp.float32)
    log_prior = jnp.asarray(np.log(prior64), jnp.float32)
    K32, prior32 = jnp.exp(log_K), jnp.exp(log_prior)

    # compiled as the sweep compiles it (fused.compiler_options: XLA's loops, not YNNPACK, for
    # the short reductions at n = m <= 8)
    fast, sharding = sharded(lambda log_K, log_prior: fused_core(log_K, log_prior, tile),
                             fused.compiler_options(n, n))
    fast_xla, _ = sharded(lambda log_K, log_prior: fused_core(log_K, log_prior, tile, "xla"),
                          fused.compiler_options(n, n))
    log_K_sharded = jax.device_put(log_K, sharding)
    log_prior_sharded = jax.device_put(log_prior, sharding)
    reference = jax.jit(jaxpriv_core)
    naive = jax.jit(jax.vmap(naive_single))
    t_fast = timed(lambda: jax.block_until_ready(fast(log_K_sharded, log_prior_sharded)),
                   repeats)
    t_xla = timed(lambda: jax.block_until_ready(fast_xla(log_K_sharded, log_prior_sharded)),
                  repeats)
    t_reference = timed(lambda: jax.block_until_ready(reference(log_K, log_prior)), repeats)
    t_naive = timed(lambda: jax.block_until_ready(naive(K32, prior32)), repeats)
    np_batch = min(batch, 50_000)
    t_numpy = timed(lambda: numpy_core(K64[:np_batch], prior64[:np_batch]), repeats) * batch / np_batch

    got = np.asarray(fast(log_K_sharded, log_prior_sharded)[2][:1000], np.float64)
    want = numpy_core(K64[:1000], prior64[:1000])[2]
    return {
        "n": n, "m": n, "batch": batch,
        "devices": jax.device_count(),
        "kernel": "native" if fused.uses_native_kernel(log_K) else "xla",
        "fused_per_s": batch / t_fast, "fused_xla_per_s": batch / t_xla,
        "reference_kernels_per_s": batch / t_reference,
        "naive_vmap_per_s": batch / t_naive,
        "numpy_f64_per_s": batch / t_numpy, "ratio_vs_numpy": t_numpy / t_fast,
        "ratio_vs_naive_vmap": t_naive / t_fast,
        "abp_max_rel_err_vs_numpy": float(np.max(np.abs(got - want) / np.maximum(want, 1e-12))),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2, 4, 8, 16, 32])
    parser.add_argument("--batch", type=int, default=200_000,
                        help="mechanisms per call (scaled down by (n/8)^2 above n=8)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cpu-devices", type=int, default=os.cpu_count() or 1,
                        help="JAX devices to split a CPU into (default: one per core)")
    parser.add_argument("--tile", type=int, help="fused kernel's mechanisms per tile "
                        "(default: fused.default_tile)")
    parser.add_argument("--json", help="also write the results to this file")
    add_isa_argument(parser)
    args = parser.parse_args()
    if needs_children(args):
        return side_by_side(args, run_levels(args, sys.argv[1:]))
    jax.config.update("jax_num_cpu_devices", args.cpu_devices)

    rows = []
    print(f"devices: {jax.devices()}  ({cpu_name()}, isa {args.isa[0]})")
    print(f"{'n=m':>4} {'batch':>8} {'fused/s':>10} {'kernel':>6} {'xla/s':>10} "
          f"{'notions/s':>10} {'vmap/s':>10} {'numpy64/s':>10} {'×numpy':>7} {'×vmap':>6} "
          f"{'×xla':>5}")
    for n in args.sizes:
        batch = args.batch if n <= 8 else max(1000, int(args.batch * (8 / n) ** 2))
        batch -= batch % jax.device_count()
        row = bench(n, batch, args.repeats, args.tile)
        rows.append(row)
        print(f"{n:>4} {batch:>8} {row['fused_per_s']:>10.3e} {row['kernel']:>6} "
              f"{row['fused_xla_per_s']:>10.3e} "
              f"{row['reference_kernels_per_s']:>10.3e} {row['naive_vmap_per_s']:>10.3e} "
              f"{row['numpy_f64_per_s']:>10.3e} {row['ratio_vs_numpy']:>7.1f} "
              f"{row['ratio_vs_naive_vmap']:>6.2f} "
              f"{row['fused_per_s'] / row['fused_xla_per_s']:>5.2f}")
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory: {peak_mib:.0f} MiB")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpu": cpu_name(), "isa": args.isa[0],
                       "devices": [str(d) for d in jax.devices()], "rows": rows,
                       "peak_rss_mib": peak_mib, "jax": jax.__version__}, f, indent=1)



def side_by_side(args, results):
    """One table of every level's fused kernel against its own NumPy (capped the same way)."""
    levels = list(results)
    first = results[levels[0]]
    print(f"\n{first['cpu']}; {len(first['devices'])} devices; "
          + "; ".join(f"{lv} = {results[lv]['same_as']}" for lv in levels
                      if "same_as" in results[lv]))
    print("| n = m | " + " | ".join(f"{lv} fused/s | {lv} kernel | {lv} NumPy/s | {lv} ×NumPy"
                                     for lv in levels) + " |")
    print("|---:|" + "---:|" * (4 * len(levels)))
    for i, row in enumerate(first["rows"]):
        cells = []
        for lv in levels:
            r = results[lv]["rows"][i]
            cells += [f"{r['fused_per_s']:.3e}", r["kernel"], f"{r['numpy_f64_per_s']:.3e}",
                      f"{r['ratio_vs_numpy']:.1f}"]
        print(f"| {row['n']} | " + " | ".join(cells) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpu": first["cpu"], "levels": results}, f, indent=1)


if __name__ == "__main__":
    main()
