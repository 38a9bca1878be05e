"""Plot LDP, MBP, ABP (record and output laws) and I(D;W) of k-ary randomized response vs ε.

Usage: python scripts/plot_family_levels.py [--k 2 4 16] [--out family_levels.png]

A quick picture of how the notions scale against each other on the textbook mechanism, with the
R2 bound 2·MBP drawn for comparison. Computed in float64.
"""

from __future__ import annotations

import argparse

import jax
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from jaxpriv.core import families, notions  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, nargs="+", default=[2, 4, 16])
    parser.add_argument("--out", default="family_levels.png")
    args = parser.parse_args()

    eps = np.linspace(0.0, 6.0, 241)
    fig, axes = plt.subplots(1, len(args.k), figsize=(4.6 * len(args.k), 4), sharey=True,
                             squeeze=False)
    with jax.enable_x64(True):
        for ax, k in zip(axes[0], args.k):
            lv = jax.jit(notions.levels)(families.k_randomized_response(k, eps))
            ax.plot(eps, lv["ldp"], label="LDP ε_LDP")
            ax.plot(eps, lv["mbp"], label="MBP ξ")
            ax.plot(eps, 2 * np.asarray(lv["mbp"]), ":", color="C1", label="2ξ (R2 bound on LDP)")
            ax.plot(eps, lv["abp"], label="ABP, record law")
            ax.plot(eps, lv["abp_output"], label="ABP, output law")
            ax.plot(eps, lv["mi"], "--", label="I(D;W)")
            ax.set_title(f"{k}-ary randomized response, uniform prior")
            ax.set_xlabel("ε (nats)")
            ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("level (nats)")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out, dpi=130)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
