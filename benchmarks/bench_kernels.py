"""Throughput of LDP + MBP + ABP(record law, all d*) over batches of random mechanisms.

Compares, in the same run and on the same mechanisms:
  * jaxpriv's broadcasting kernels, float32, jitted at the edge;
  * the naive ``jax.vmap`` of a straightforward per-mechanism function (float32);
  * a straightforward vectorized NumPy float64 implementation (the baseline).

Usage:
  python benchmarks/bench_kernels.py [--sizes 2 4 8 16 32] [--batch 200000] [--repeats 3]
      [--json results.json]

Reports mechanisms per second for each and the ratio jaxpriv / NumPy, and the peak resident
memory of the process. Throughput is measured here, never in tests.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxpriv import notions


def jaxpriv_core(log_K, log_prior):
    return (notions.ldp_kernel(log_K), notions.mbp_kernel(log_K, log_prior),
            jnp.max(notions.abp_record_kernel(log_K, log_prior, log_prior), axis=-1))


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


def bench(n, batch, repeats, seed=0):
    rng = np.random.default_rng(seed)
    K64 = rng.dirichlet(np.ones(n), size=(batch, n))
    prior64 = rng.dirichlet(np.ones(n), size=batch)
    log_K = jnp.asarray(np.log(K64), jnp.float32)
    log_prior = jnp.asarray(np.log(prior64), jnp.float32)
    K32, prior32 = jnp.exp(log_K), jnp.exp(log_prior)

    fast = jax.jit(jaxpriv_core)
    naive = jax.jit(jax.vmap(naive_single))
    t_fast = timed(lambda: jax.block_until_ready(fast(log_K, log_prior)), repeats)
    t_naive = timed(lambda: jax.block_until_ready(naive(K32, prior32)), repeats)
    np_batch = min(batch, 50_000)
    t_numpy = timed(lambda: numpy_core(K64[:np_batch], prior64[:np_batch]), repeats) * batch / np_batch

    got = np.asarray(fast(log_K[:1000], log_prior[:1000])[2], np.float64)
    want = numpy_core(K64[:1000], prior64[:1000])[2]
    return {
        "n": n, "m": n, "batch": batch,
        "jaxpriv_per_s": batch / t_fast, "naive_vmap_per_s": batch / t_naive,
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
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()

    rows = []
    print(f"devices: {jax.devices()}  ({platform.processor() or platform.machine()})")
    print(f"{'n=m':>4} {'batch':>8} {'jaxpriv/s':>12} {'vmap/s':>12} {'numpy64/s':>12} "
          f"{'×numpy':>7} {'×vmap':>6}")
    for n in args.sizes:
        batch = args.batch if n <= 8 else max(1000, int(args.batch * (8 / n) ** 2))
        row = bench(n, batch, args.repeats)
        rows.append(row)
        print(f"{n:>4} {batch:>8} {row['jaxpriv_per_s']:>12.3e} {row['naive_vmap_per_s']:>12.3e} "
              f"{row['numpy_f64_per_s']:>12.3e} {row['ratio_vs_numpy']:>7.1f} "
              f"{row['ratio_vs_naive_vmap']:>6.2f}")
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory: {peak_mib:.0f} MiB")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"devices": [str(d) for d in jax.devices()], "rows": rows,
                       "peak_rss_mib": peak_mib, "jax": jax.__version__}, f, indent=1)


if __name__ == "__main__":
    main()
