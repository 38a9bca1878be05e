"""``jaxpriv compose``'s outputs: the JSON object it prints (and writes with ``--out``) and the
figure of the privacy-profile curve ``δ(ε)`` (log δ) of the composition beside one use, for the
pair of secrets that attains the composed value."""

from __future__ import annotations

import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxpriv.core import pair_notions
from jaxpriv.engines import compose as engine
from jaxpriv.report.axes import _pyplot, _save
from jaxpriv.report.files import write_json


ALL_PAIRS = "every ordered pair of secrets"


def summary(result: engine.ComposeResult, files=(), accountants=(), over: str = ALL_PAIRS
            ) -> dict:
    """The JSON object of a composition: ``eps``/``delta``, ``bracket``, ``method``, ``pair``,
    the uses and files, every ordered pair's value, ``accountants``: one object per call
    path (``library``, ``call``, ``value``, ``ratio``, ``verdict``, ``note``; empty unless
    ``--accountants``), and ``over``: the pairs, in words (neighbouring databases where the
    mechanisms have a records layout)."""
    def plain(x):  # infinities as JSON's Infinity, like `eval --json`; NaN (no pair) as null
        return None if math.isnan(x) else x

    given = "delta" if result.measure == "eps" else "epsilon"
    return {
        result.measure: plain(result.value),
        given: result.at,
        "bracket": [plain(result.bracket[0]), plain(result.bracket[1])],
        "method": result.method,
        "pair": list(result.pair),
        "uses": list(result.uses),
        "files": [str(f) for f in files],
        "per_pair": [[plain(float(v)) for v in row] for row in result.per_pair],
        "accountants": [{"library": row.library, "call": row.call, "value": row.value,
                         "ratio": row.ratio, "verdict": row.verdict, "note": row.note}
                        for row in accountants],
        "over": over,
    }


def profile_figure(mechs, result: engine.ComposeResult, path: Path, accountants=(),
                   grid_size: int = engine.composition_bracket.DEFAULT_SIZE) -> Path:
    """``δ(ε)`` of the attaining pair under the composition and under one use of each mechanism
    (log δ against ε), with the reported point marked, and each accountant's ε at the same δ (a
    point left of the curve claims less than the exact privacy loss)."""
    plt = _pyplot()
    single = [1] * len(result.uses)
    eps_max = _eps_axis(mechs, result)
    grid = np.linspace(0.0, eps_max, 400)
    bracketed = result.method == "bracket"
    composed = engine.profile_curve(mechs, result.uses, result.pair, grid, bracket=bracketed,
                                    grid=grid_size)
    once = engine.profile_curve(mechs, single, result.pair, grid)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    uses = "+".join(str(k) for k in result.uses)
    d, e = result.pair
    floor = 1e-300
    if bracketed:
        low, composed = composed
        ax.fill_between(grid, np.maximum(low, floor), np.maximum(composed, floor),
                        color="tab:blue", alpha=0.25, label=f"{uses} uses (bracket)")
        ax.semilogy(grid, np.maximum(composed, floor), color="tab:blue", lw=1)
    else:
        ax.semilogy(grid, np.maximum(composed, floor), color="tab:blue",
                    label=f"{uses} uses (exact)")
    ax.semilogy(grid, np.maximum(once, floor), color="tab:orange", ls="--", label="one use")
    if result.measure == "eps" and math.isfinite(result.value):
        ax.plot([result.value], [result.at], "o", color="tab:red",
                label=f"ε = {result.value:.4g} at δ = {result.at:g}")
    elif result.measure == "delta" and result.value > 0:
        ax.plot([result.at], [result.value], "o", color="tab:red",
                label=f"δ = {result.value:.4g} at ε = {result.at:g}")
    shown = [(i, row) for i, row in enumerate(accountants)
             if row.value is not None and math.isfinite(row.value)]
    for i, row in shown:
        unsound = row.verdict == "UNSOUND"
        ax.plot([row.value], [result.at], "x" if unsound else "+", ms=9,
                color="tab:red" if unsound else "tab:green", alpha=0.85,
                label=f"{row.library} #{i + 1}: {row.value:.4g} ({row.verdict})")
    marked = [result.at if result.measure == "eps" else result.value]
    positive = np.concatenate([composed[composed > 0], once[once > 0],
                               [v for v in marked if v > 0]])
    if positive.size:
        ax.set_ylim(max(positive.min(), 1e-30) / 3, 1.5)
    ax.set_xlabel("ε (nats)")
    ax.set_ylabel("δ(ε) (log scale)")
    ax.set_title(f"privacy profile of secrets ({d}, {d if d == e else e}), {uses} uses",
                 fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def _eps_axis(mechs, result) -> float:
    """The ε axis: to a little past the reported ε (or given ε), at least the single-use LDP
    level of the pair where finite."""
    d, e = result.pair
    with jax.enable_x64(True):  # the pair's one-use LDP level, where finite
        levels = [float(pair_notions.ldp_pair(jnp.asarray(m.log_K[d], jnp.float64),
                                              jnp.asarray(m.log_K[e], jnp.float64)))
                  for m in mechs]
    ldp = max([v for v in levels if math.isfinite(v)], default=0.0)
    point = result.value if result.measure == "eps" else result.at
    point = point if math.isfinite(point) else 0.0
    return max(1.25 * point, ldp * 1.25, 1.0)


def write(out: Path, mechs, result: engine.ComposeResult, files=(), accountants=(),
          grid_size: int = engine.composition_bracket.DEFAULT_SIZE,
          over: str = ALL_PAIRS) -> dict:
    """``summary.json`` and ``profile.png`` in ``out``; returns the summary."""
    out = Path(out)
    data = summary(result, files, accountants, over)
    profile_figure(mechs, result, out / "profile.png", accountants, grid_size)
    write_json(out / "summary.json", data)
    return data


__all__ = ["profile_figure", "summary", "write"]
