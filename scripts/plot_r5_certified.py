"""R5's true least slack against the MBP level: one figure, every law and prior setting.

The exact envelope ``E(ξ, ε) = sup{ABP : MBP ≤ ξ, ε_bel ≤ ε}`` (docs/certified.md#r5,
:mod:`jaxpriv.core.abp_envelope`) against R5's claimed ``sqrt(½(ξ+ε)(e^{ξ+ε}−1))``. Left: the envelope
and the claim at ``ε = 0`` (the belief equal to the prior, the papers' setting), with ABP's
trivial maximum ``sqrt(ln 2)``; right: the slack ``claim/E`` on a log axis, for ``ε = 0`` (solid)
and ``ε = 0.5`` (dashed, prior free).

Usage:
  python scripts/plot_r5_certified.py [--out docs/r5_certified.png] [--table]
"""

from __future__ import annotations

import argparse

import numpy as np

import jaxpriv
from jaxpriv.core import abp_envelope  # the certificate's own program (docs/certified.md#r5)

SETTINGS = (("free", 3, "prior free"), ("uniform", 2, "uniform, n = 2"),
            ("uniform", 3, "uniform, n = 3"), ("uniform", 8, "uniform, n = 8"))


def curves(xi: np.ndarray, eps: float = 0.0):
    """``{(law, label): (envelope, slack)}`` on ``xi`` at belief closeness ``eps``."""
    import jax.numpy as jnp
    claim = np.asarray(jaxpriv.get("R5").bound(jnp.asarray(xi), jnp.asarray(eps)))
    found = {}
    for law in abp_envelope.LAWS:
        for prior, n, label in SETTINGS:
            bracket = abp_envelope.envelope(xi, eps, n=n, law=law, prior=prior)
            found[law, label] = (bracket.attained, claim / bracket.attained)
    return claim, found


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/r5_certified.png")
    parser.add_argument("--table", action="store_true", help="print the least slacks too")
    args = parser.parse_args(argv)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xi = np.geomspace(0.01, 4.0, 400)
    claim, at_zero = curves(xi)
    _, at_half = curves(xi, 0.5)
    fig, (top, right) = plt.subplots(1, 2, figsize=(11, 4.4), layout="constrained")
    colours = plt.cm.viridis(np.linspace(0, 0.85, len(SETTINGS)))
    top.plot(xi, claim, "k--", lw=1.2, label="R5's claimed bound (ε = 0)")
    top.axhline(np.sqrt(np.log(2)), color="0.5", lw=0.8, ls=":", label="sqrt(ln 2): ABP's maximum")
    for (law, style) in (("record", "-"), ("output", "-.")):
        for colour, (_, _, label) in zip(colours, SETTINGS):
            envelope, slack = at_zero[law, label]
            top.plot(xi, envelope, style, color=colour, lw=1.3, label=f"{law} law, {label}")
            right.plot(xi, slack, style, color=colour, lw=1.3, label=f"{law}, {label}")
        right.plot(xi, at_half[law, "prior free"][1], style, color="tab:red", lw=1.0,
                   alpha=0.7, label=f"{law}, prior free, ε = 0.5")
    top.set(xscale="log", ylim=(0, 1.2), xlabel="MBP level ξ (nats)",
            ylabel="ABP ε_pa (nats)", title="exact envelope sup{ABP : MBP ≤ ξ}, ε = 0")
    right.set(xscale="log", yscale="log", xlabel="MBP level ξ (nats)",
              ylabel="least slack = claim / exact envelope",
              title="R5's true least slack (1 would be tight)")
    right.axhline(2.0, color="0.5", lw=0.8, ls=":")
    top.legend(fontsize=7, loc="upper left")
    right.legend(fontsize=6.5, ncol=2, loc="upper right")
    fig.savefig(args.out, dpi=130)
    print(f"wrote {args.out}")
    if args.table:
        for (law, label), (_, slack) in at_zero.items():
            i = int(np.argmin(slack))
            print(f"{law:6s} {label:15s} least slack {slack[i]:.4f} at ξ = {xi[i]:.3f}")


if __name__ == "__main__":
    main()
