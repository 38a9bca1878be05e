"""The figures' building blocks: colours and styles, axis labels in the notions' units, the two
panels sharing the premise axis (levels over slack), the log slack panel with its violation band,
the shared legend, titles and saving (matplotlib, Agg backend)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from jaxpriv import registry

CLAIM = {"color": "k", "ls": "--", "lw": 1.3}
CERTIFIED = "tab:green"
SWEEP = "tab:orange"
SEARCH = "tab:blue"
VIOLATION = "tab:red"
PANELS = {"height_ratios": [2, 1]}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _unit(key: str) -> str:
    """``" (nats)"``-style suffix naming a notion's unit (``" (probability)"``, ``" (√nats)"``);
    empty for a dimensionless notion and for a premise or conclusion that is not a notion key
    (a statistical relation's, given in words)."""
    notion = registry.NOTIONS.get(key)
    return f" ({notion.unit})" if notion is not None and notion.unit else ""


def premise_label(relation) -> str:
    """The premise axis label: ``premise: mbp level x (nats)``."""
    if relation.kind == "statistical":
        return f"premise: {relation.premise}"
    return f"premise: {relation.premise} level x{_unit(relation.premise)}"


def value_label(relation) -> str:
    """The levels axis label: the conclusion and its unit, or the ratio a relation whose bound
    scales with its parameter is drawn as (``relation.ratio_label``)."""
    if relation.scales_with_parameter:
        return relation.ratio_label or f"{relation.conclusion} / {relation.parameter}"
    if relation.kind == "statistical":
        return relation.conclusion
    return f"conclusion: {relation.conclusion} level{_unit(relation.conclusion)}"


SLACK_LABEL = "slack = bound / value"


# -- axes ------------------------------------------------------------------------------------

def _panels(container):
    """Two stacked axes sharing the premise axis (levels 2 : slack 1) on a figure or subfigure."""
    top, bottom = container.subplots(2, 1, sharex=True, gridspec_kw=PANELS)
    top.tick_params(labelbottom=False)
    return top, bottom


def _sizes(compact: bool) -> dict:
    return ({"tick": 6, "label": 7, "text": 6, "ms": 3.0, "lw": 1.1} if compact else
            {"tick": 8, "label": 9, "text": 8, "ms": 4.0, "lw": 1.3})


def _value_axis(ax, bound_values, found_values) -> float | None:
    """Linear from 0, unless the claimed bound and what was found differ by decades (then log,
    so both stay readable). Returns the top of the axis (``None`` with nothing to show)."""
    bound = [v for v in bound_values if np.isfinite(v) and v > 0]
    found = [v for v in found_values if np.isfinite(v) and v > 0]
    if not bound and not found:
        return None
    top = max(bound + found)
    if bound and found and max(max(bound) / max(found), max(found) / max(bound)) > 20:
        ax.set_yscale("log")
        ax.set_ylim(max(min(bound + found), top * 1e-12) / 2, 2 * top)
        return 2 * top
    ax.set_ylim(0, 1.12 * top)
    return 1.12 * top


def _at_most(values, ceiling: float | None) -> np.ndarray:
    """``values`` with ``+inf`` (an unbounded level) drawn on the axis top, so a step line
    runs along the panel's edge there (with :func:`_unbounded`'s marks) instead of breaking."""
    values = np.asarray(values, np.float64)
    return values if ceiling is None else np.where(np.isposinf(values), ceiling, values)


def _unbounded(ax, x, values, colour: str, sizes: dict, where: str) -> None:
    """Mark the ``x`` where ``values`` are ``+inf`` (``where="top"``: an unbounded level) or 0
    (``"bottom"``: slack 0) on the panel's top or bottom edge, pointing off the panel."""
    x = np.asarray(x, np.float64)
    hit = np.isposinf(values) if where == "top" else np.asarray(values) == 0
    if hit.any():
        ax.plot(x[hit], np.full(hit.sum(), 1.0 if where == "top" else 0.0),
                "^" if where == "top" else "v", color=colour, ms=sizes["ms"] * 1.1, ls="",
                transform=ax.get_xaxis_transform(), clip_on=False, zorder=5)


def _nice_ticks(low: float, high: float) -> list[float]:
    """A few round log-axis ticks between ``low`` and ``high`` (an axis of under two decades)."""
    for mantissas in ((1, 2, 5), (1, 1.5, 2, 3, 5, 7), (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9)):
        ticks = [m * 10.0 ** e for e in range(math.floor(math.log10(low)) - 1,
                                                math.ceil(math.log10(high)) + 1)
                 for m in mantissas if low <= m * 10.0 ** e <= high]
        if len(ticks) >= 3:
            return ticks
    return ticks


def _log_axis(ax) -> None:
    """Log scale; plain-number tick labels at a few round values when the axis spans less
    than two decades."""
    import matplotlib.ticker as ticker

    ax.set_yscale("log")
    low, high = ax.get_ylim()
    if high / max(low, 1e-300) < 100:
        ax.yaxis.set_major_locator(ticker.FixedLocator(_nice_ticks(low, high)))
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(ticker.NullFormatter())


class _Slack:
    """The slack panel: a log axis covering every finite positive slack, 1 and the band below
    it where the claim is violated; a slack of 0 (an unbounded conclusion under a finite claim)
    is marked on the panel's bottom edge, an infinite one (a vacuous claim) not at all."""

    def __init__(self, ax, series, sizes: dict):
        values = [float(v) for s in series for v in np.ravel(np.asarray(s, np.float64))]
        positive = [v for v in values if np.isfinite(v) and v > 0]
        low, high = min(positive + [1.0]), max(positive + [1.0])
        self.ax, self.sizes = ax, sizes
        self.zero = any(v == 0 for v in values)
        high = max(high * 1.5, 2.0)
        # the band below 1 takes at least an eighth of the panel
        self.limits = (min(low / 1.5, 0.5, high ** (-1 / 7)), high)

    def points(self, x, slack, marker: str, colour: str, **style) -> None:
        slack = np.asarray(slack, np.float64)
        self.ax.plot(x, np.where(slack > 0, slack, np.nan), marker, ls="", color=colour,
                     ms=self.sizes["ms"] * 0.85, **style)
        _unbounded(self.ax, x, slack, colour, self.sizes, "bottom")

    def curve(self, x, slack, colour: str, **style) -> None:
        slack = np.asarray(slack, np.float64)
        self.ax.plot(x, np.where(slack > 0, slack, np.nan), "-", color=colour,
                     lw=self.sizes["lw"], **style)
        if (slack == 0).any():
            self.ax.plot(x, np.where(slack == 0, 0.0, np.nan), "-", color=colour,
                         lw=3 * self.sizes["lw"], transform=self.ax.get_xaxis_transform(),
                         clip_on=False, zorder=4)

    def finish(self, compact: bool) -> None:
        ax, sizes = self.ax, self.sizes
        ax.set_yscale("log")
        ax.set_ylim(*self.limits)
        ax.axhspan(self.limits[0], 1.0, color=VIOLATION, alpha=0.07, lw=0)
        ax.axhline(1.0, color=VIOLATION, lw=1.0)
        ax.annotate("violated below" + ("; on the edge: slack 0" if self.zero else ""),
                    xy=(0.0, 1.0), xycoords=("axes fraction", "data"), xytext=(3, -2),
                    textcoords="offset points", ha="left", va="top", fontsize=sizes["text"],
                    color=VIOLATION)
        _log_axis(ax)
        ax.set_ylabel("slack (log)" if compact else SLACK_LABEL,
                      fontsize=sizes["label"])
        ax.grid(alpha=0.3, which="major")


def _style(top, bottom, relation, sizes: dict, xlabel: str) -> None:
    for ax in (top, bottom):
        ax.tick_params(labelsize=sizes["tick"])
    top.grid(alpha=0.3)
    top.set_ylabel(value_label(relation), fontsize=sizes["label"])
    bottom.set_xlabel(xlabel, fontsize=sizes["label"])


def _legend(top, bottom, sizes: dict) -> None:
    """One legend for both panels, outside the data (above the levels panel)."""
    handles, labels = top.get_legend_handles_labels()
    more = bottom.get_legend_handles_labels()
    seen = dict(zip(labels + more[1], handles + more[0]))
    top.legend(seen.values(), seen.keys(), fontsize=sizes["text"], ncol=2, frameon=False,
               loc="lower left", bbox_to_anchor=(0.0, 1.01, 1.0, 0.0), mode="expand",
               borderaxespad=0.0)


def _title(relation, detail: str = "") -> str:
    import textwrap

    sources = "; ".join(str(s) for s in relation.sources)
    return "\n".join(textwrap.wrap(f"{relation.id}: {relation.statement}", 90)
                     + textwrap.wrap(" — ".join(t for t in (sources, detail) if t), 100))


def _save(fig, path: Path, dpi: int = 130) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    engine = fig.get_layout_engine()
    if engine is not None:
        # laid out once, at the saved resolution, then fixed: ``savefig`` otherwise lays out a
        # constrained figure twice (its layout draw and its real one), ~10% of a relation's
        # figures; the same pixels
        import matplotlib

        fig.set_dpi(dpi)
        engine.execute(fig)
        # no engine at all (``"none"`` keeps a placeholder, and savefig's layout draw with it);
        # ``None`` reads these two settings, which must not bring one back
        with matplotlib.rc_context({"figure.autolayout": False,
                                    "figure.constrained_layout.use": False}):
            fig.set_layout_engine(None)
    fig.savefig(path, dpi=dpi)
    _pyplot().close(fig)
    return path

