"""The exact composed ε(δ) of a batch of mechanisms (SPEC §6) against dp-accounting's PLD.

Usage: python benchmarks/bench_compose.py [--count 64] [--k 100] [--delta 1e-6]
    [--library-count 8] [--json results.json]

Random 4×4 mechanisms with LDP level ≤ 1 (``log K[d,w] = u[d,w] − logsumexp_w u[d,w]`` with
``u ∈ [−¼, ¼]``): jaxpriv's float64 ``eps_composed`` at ``k`` and ``δ`` on the whole batch through
the public call ``jaxpriv.level("eps_composed", mechs, k=k, delta=δ)`` (one compiled program,
timed after a warm-up call, compile time reported apart), against dp-accounting's
privacy-loss distribution of each ordered pair of rows
(``from_two_probability_mass_functions(log P, log Q, pessimistic_estimate=True).self_compose(k)
.get_epsilon_for_delta(δ)``, the max over the 12 pairs) on the first ``--library-count`` of them.
Both give mechanisms per second on this machine (its CPU named); the ratio is jaxpriv's over
dp-accounting's. The values are compared too: the pessimistic PLD must be at least the exact ε
(dp-accounting discretizes losses to 1e-4, so it may exceed it by about k·1e-4).
"""

from __future__ import annotations

import argparse
import json
import time

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)


def mechanisms(count: int, seed: int = 0) -> np.ndarray:
    """``(count, 4, 4)`` log-kernels with LDP level ≤ 1."""
    rng = np.random.default_rng(seed)
    u = rng.uniform(-0.25, 0.25, size=(count, 4, 4))
    return u - np.log(np.exp(u).sum(axis=-1, keepdims=True))


def as_mechanisms(log_K: np.ndarray):
    """The batch as a :class:`jaxpriv.Mechanism` (flat prior and belief: the composed notions
    do not read them)."""
    import jax.numpy as jnp

    from jaxpriv import Mechanism

    batch = jnp.asarray(log_K)
    flat = jnp.zeros(batch.shape[:-1])
    return Mechanism(batch, flat, flat)


def jaxpriv_rate(log_K: np.ndarray, k: int, delta: float):
    """The public call a user makes on a batch: ``jaxpriv.level("eps_composed", mechs, k=k,
    delta=δ)`` (compiled once per shape and parameters, cached), timed on its second call."""
    from jaxpriv import level

    mechs = as_mechanisms(log_K)
    start = time.perf_counter()
    level("eps_composed", mechs, k=k, delta=delta)
    compile_seconds = time.perf_counter() - start
    start = time.perf_counter()
    values = np.asarray(level("eps_composed", mechs, k=k, delta=delta))
    seconds = time.perf_counter() - start
    return values, len(log_K) / seconds, compile_seconds


def library_rate(log_K: np.ndarray, k: int, delta: float):
    from dp_accounting.pld import privacy_loss_distribution as pld

    values = []
    start = time.perf_counter()
    for lk in log_K:
        best = 0.0
        for d in range(4):
            for e in range(4):
                if d == e:
                    continue
                upper = {w: float(v) for w, v in enumerate(lk[d])}
                lower = {w: float(v) for w, v in enumerate(lk[e])}
                dist = pld.from_two_probability_mass_functions(upper, lower,
                                                               pessimistic_estimate=True)
                best = max(best, float(dist.self_compose(k).get_epsilon_for_delta(delta)))
        values.append(best)
    seconds = time.perf_counter() - start
    return np.asarray(values), len(log_K) / seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=64, help="mechanisms for jaxpriv")
    parser.add_argument("--library-count", type=int, default=8,
                        help="mechanisms for dp-accounting (the first of the same batch)")
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    from isa import cpu_name

    log_K = mechanisms(args.count)
    exact, rate, compile_seconds = jaxpriv_rate(log_K, args.k, args.delta)
    backend = jax.default_backend()
    device = cpu_name() if backend == "cpu" else f"{jax.devices()[0].device_kind} ({backend})"
    result = {"cpu": cpu_name(), "jaxpriv_device": device, "k": args.k, "delta": args.delta,
              "count": args.count,
              "jaxpriv_mechanisms_per_second": rate, "jaxpriv_compile_seconds": compile_seconds}
    print(f"{result['cpu']}: {args.count} random 4×4 mechanisms (LDP ≤ 1), k = {args.k}, "
          f"δ = {args.delta:g}")
    print(f"  jaxpriv exact eps_composed (float64)  {rate:10.2f} mechanisms/s  "
          f"(compile {compile_seconds:.1f} s; on {device})")
    try:
        library, library_per_second = library_rate(log_K[:args.library_count], args.k,
                                                   args.delta)
    except ImportError:
        print("  dp-accounting is not installed (pip install 'jaxpriv[accountants]'): no ratio")
    else:
        gap = library - exact[:args.library_count]
        result.update(library_mechanisms_per_second=library_per_second,
                      ratio=rate / library_per_second, library_minus_exact_min=float(gap.min()),
                      library_minus_exact_max=float(gap.max()))
        print(f"  dp-accounting PLD, 12 pairs each       {library_per_second:10.2f} mechanisms/s  "
              f"(on the host CPU, one core)")
        print(f"  ratio jaxpriv / dp-accounting          {rate / library_per_second:10.2f}×")
        print(f"  dp-accounting − exact ε: [{gap.min():.3g}, {gap.max():.3g}] "
              f"(≥ 0: its pessimistic estimate is an upper bound here)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
