"""The composed notions on an accelerator against the same call on the host CPU (float64).

Usage: python benchmarks/compose_agreement.py [--count 256] [--json agree.json]

Run on a machine with a GPU (or TPU): evaluates ``eps_composed`` at k = 10 and 100 (δ = 1e-6)
and ``delta_composed`` at k = 100 (ε = 5) of ``--count`` random 4×4 mechanisms with LDP level
≤ 1 (``bench_compose.mechanisms``) on the default backend, then the same in a child process
with ``JAX_PLATFORMS=cpu``, and prints the largest relative difference of each. On a CPU-only
machine both sides are the CPU and the differences are 0. Measured on an H200
(benchmarks/README.md): ≤ 1.8e-15.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_compose import as_mechanisms, mechanisms  # noqa: E402

CASES = (("eps_composed", dict(k=10, delta=1e-6)), ("eps_composed", dict(k=100, delta=1e-6)),
         ("delta_composed", dict(k=100, epsilon=5.0)))


def values(count: int) -> dict:
    """Each case's float64 values of ``count`` mechanisms on the default backend."""
    from jaxpriv import level

    mechs = as_mechanisms(mechanisms(count))
    return {f"{name} {params}": np.asarray(level(name, mechs, **params))
            for name, params in CASES}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=256)
    parser.add_argument("--json", help="also write the differences to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        np.savez(args.child, **values(args.count))
        return
    print(f"backend {jax.default_backend()}: {jax.devices()}", flush=True)
    start = time.perf_counter()
    here = values(args.count)
    print(f"{args.count} mechanisms on {jax.default_backend()}: {time.perf_counter() - start:.1f} s "
          "with compile", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cpu.npz")
        subprocess.run([sys.executable, __file__, "--count", str(args.count), "--child", path],
                       env=dict(os.environ, JAX_PLATFORMS="cpu"), check=True)
        host = dict(np.load(path))
    result = {}
    for key, value in here.items():
        ref = host[key]
        rel = float(np.max(np.abs(value - ref) / np.maximum(np.abs(ref), 1e-300)))
        result[key] = rel
        print(f"{key}: largest relative difference to the CPU {rel:.3g} "
              f"(values {ref.min():.6g} … {ref.max():.6g})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
