"""Does the optax search reach R5's certified envelope? One search per (law, prior setting, n).

For the record and output laws, the prior free and uniform, and ``n = m`` in {2, 3, 4, 8}, runs
``jaxpriv search --relation R5`` at ``ε = 0`` on a premise grid and prints each run's largest
``gap`` (the relative shortfall of the search's slack from the certified least slack,
docs/certified.md#r5) and its time. Ends non-zero if any gap exceeds ``--tolerance``.

Usage:
  python scripts/r5_search_gaps.py [--restarts 512] [--steps 3000] [--grid 0.1:3:8]
      [--sizes 2,3,4,8] [--out runs/r5-gaps] [--tolerance 1e-3]
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--restarts", type=int, default=512)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--grid", default="0.1:3:8")
    parser.add_argument("--sizes", default="2,3,4,8")
    parser.add_argument("--param", type=float, default=0.0, help="belief closeness ε")
    parser.add_argument("--laws", default="record,output")
    parser.add_argument("--priors", default="free,uniform")
    parser.add_argument("--out", default="runs/r5-gaps")
    parser.add_argument("--tolerance", type=float, default=1e-3)
    args = parser.parse_args(argv)
    from jaxpriv import report
    from jaxpriv.engines import search
    from jaxpriv.cli.jaxsetup import _start_jax

    _start_jax(None)
    print(f"# R5 search vs certified envelope: {args.restarts} restarts, {args.steps} steps, "
          f"grid {args.grid}, ε = {args.param:g}; {platform.processor() or platform.machine()}")
    print("| law | prior | n = m | largest gap | mean gap | seconds |")
    print("|---|---|---|---|---|---|")
    worst = 0.0
    for law in args.laws.split(","):
        for prior in args.priors.split(","):
            for n in (int(v) for v in args.sizes.split(",")):
                config = search.make_config(
                    "R5", n, n, args.grid, param=args.param, law=law,
                    prior="" if prior == "free" else prior, restarts=args.restarts,
                    steps=args.steps)
                out = Path(args.out) / f"{law}-{prior}-{n}"
                start = time.perf_counter()
                result = search.run(config, out, progress=False, write=report.search_writer(None))
                seconds = time.perf_counter() - start
                gaps = [row["gap"] for row in result.rows]
                worst = max(worst, max(gaps))
                print(f"| {law} | {prior} | {n} | {max(gaps):.2e} | "
                      f"{sum(gaps) / len(gaps):.2e} | {seconds:.0f} |", flush=True)
    print(f"largest gap {worst:.2e} (tolerance {args.tolerance:g})")
    return 0 if worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
