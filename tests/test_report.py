"""The figures (jaxpriv.report): the sweep envelope drawn as the running supremum over
premise ≤ x, ratio relations drawn as conclusion/parameter against bound(x, 1), units from the
notions' records, two panels sharing the premise axis. Rows are built by hand: no audit runs."""

import csv
import json
import math
import types

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from jaxpriv import registry, report  # noqa: E402
from jaxpriv.report.axes import _panels, _unit  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


def row(x, conclusion, *, param="", premise=None, parameter=0.0, slack=1.0, witness=None):
    return {"x": x, "param": param, "premise": x - 0.1 if premise is None else premise,
            "parameter": parameter, "conclusion": conclusion, "bound": 0.0, "slack": slack,
            "count": 7, "witness": witness or f"witnesses/bins/x{x:g}.json"}


def lines_by_label(ax) -> dict:
    return {line.get_label(): line for line in ax.get_lines()}


# -- the sweep envelope -------------------------------------------------------------------------

def test_sweep_envelope_is_the_running_supremum_over_premise_at_most_x():
    relation = registry.get("R2")  # ξ-MBP ⇒ 2ξ-LDP: bound 2x
    dips = [0.5, 0.3, 0.8, 0.2, 0.9]
    rows = [row(0.25 * (i + 1), c) for i, c in enumerate(dips)]
    rows.reverse()  # any order in, sorted by x out
    env = report.sweep_envelope(relation, rows, 0.0)
    xs = [r["x"] for r in env]
    values = [r["value"] for r in env]
    assert xs == [0.25, 0.5, 0.75, 1.0, 1.25]
    assert values == [0.5, 0.5, 0.8, 0.8, 0.9]
    assert all(a <= b for a, b in zip(values, values[1:]))
    # witness, premise and the attaining bin point at the row that attains the running max
    assert [r["witness"] for r in env] == [f"witnesses/bins/x{x:g}.json"
                                           for x in (0.25, 0.25, 0.75, 0.75, 1.25)]
    assert [r["cell_x"] for r in env] == [0.25, 0.25, 0.75, 0.75, 1.25]
    assert env[1]["premise"] == pytest.approx(0.15) and env[1]["conclusion"] == 0.5
    # slack: the claim at x over the running supremum (never rising because a bin is sparse)
    for r in env:
        assert r["bound"] == pytest.approx(2 * r["x"])
        assert r["slack"] == pytest.approx(2 * r["x"] / r["value"])


def test_sweep_envelope_takes_cells_at_or_below_the_claims_parameter():
    relation = registry.get("R3")  # ξ-LDP ⇒ (ξ+ε)-MBP when π is ε-close to uniform
    rows = [row(1.0, 0.4, param=0.5), row(1.0, 3.0, param=1.0), row(2.0, 0.6, param=0.5),
            row(2.0, 0.1, param=1.0)]
    env = report.sweep_envelope(relation, rows, 0.5)
    assert [r["value"] for r in env] == [0.4, 0.6]
    assert [r["bound"] for r in env] == pytest.approx([1.5, 2.5])
    assert [r["value"] for r in report.sweep_envelope(relation, rows, 1.0)] == [3.0, 3.0]
    # rows read back from envelope.csv carry NaN for no parameter bin, a result's carry ""
    read_back = [row(1.0, 1.0, param=np.nan)]
    assert len(report.sweep_envelope(registry.get("R2"), read_back, 0.0)) == 1


def test_an_unbounded_cell_makes_the_envelope_unbounded_with_slack_zero():
    relation = registry.get("R12")
    env = report.sweep_envelope(relation, [row(0.5, 0.2), row(1.0, math.inf), row(1.5, 3.0)],
                                0.0)
    assert [r["value"] for r in env] == [0.2, math.inf, math.inf]
    assert [r["slack"] for r in env] == [pytest.approx(2.5), 0.0, 0.0]


# -- relations whose bound scales with the measured parameter -----------------------------------

def ratio_rows():
    # (ξ bin, γ, β): γ/β = 2, 1.5, 6, 4 — the third breaks γ ≤ (1+4ξ)β at ξ = 0.75 (1+4ξ = 4)
    cells = [(0.25, 0.2, 0.1), (0.5, 0.3, 0.2), (0.75, 0.6, 0.1), (1.0, 0.8, 0.2)]
    return [row(x, g, parameter=b, param=0.5, slack=(1 + 4 * x) * b / g) for x, g, b in cells]


def test_a_ratio_relation_is_enveloped_as_conclusion_over_parameter():
    relation = registry.get("R6")  # γ ≤ (1+4ξ)β
    assert relation.scales_with_parameter
    env = report.sweep_envelope(relation, ratio_rows(), 0.0)  # every cell, whatever its β bin
    assert [r["value"] for r in env] == pytest.approx([2.0, 2.0, 6.0, 6.0])
    assert [r["bound"] for r in env] == pytest.approx([2.0, 3.0, 4.0, 5.0])
    assert [r["slack"] for r in env] == pytest.approx([1.0, 1.5, 4 / 6, 5 / 6])
    claim, certified, _, _ = report.claimed_and_certified(relation, np.array([0.25, 0.5]), 0.0,
                                                          3)
    assert claim == pytest.approx([2.0, 3.0])  # bound(x, 1) = 1 + 4ξ
    assert certified == pytest.approx(np.exp(2 * np.array([0.25, 0.5])), rel=1e-9)


def test_a_ratio_relation_is_drawn_as_the_ratio_against_one_plus_four_xi():
    relation = registry.get("R6")
    rows = ratio_rows()
    fig = plt.figure()
    top, bottom = _panels(fig)
    report.draw_mechanism(top, bottom, relation, param=0.0, n=3, sweep_rows=rows,
                          search_rows=rows)
    drawn, slack = lines_by_label(top), lines_by_label(bottom)
    assert top.get_ylabel() == relation.ratio_label
    claim = drawn["claimed bound"]
    np.testing.assert_allclose(claim.get_ydata(), 1 + 4 * claim.get_xdata(), rtol=1e-12)
    certified = drawn["certified supremum (n = 3)"]
    np.testing.assert_allclose(certified.get_ydata(), np.exp(2 * certified.get_xdata()),
                               rtol=1e-9)
    np.testing.assert_allclose(drawn["search envelope"].get_ydata(), [2.0, 1.5, 6.0, 4.0])
    sweep = drawn["sweep envelope (sup over premise ≤ x)"].get_ydata()
    assert list(sweep) == pytest.approx([2.0, 2.0, 6.0, 6.0])
    # slack = (1+4ξ)/(γ/β): the violation at ξ = 0.75 sits below 1
    np.testing.assert_allclose(slack["search slack"].get_ydata(), [1.0, 2.0, 4 / 6, 1.25])
    np.testing.assert_allclose(slack["sweep slack"].get_ydata(), [1.0, 1.5, 4 / 6, 5 / 6])
    least = slack["certified least slack"]
    np.testing.assert_allclose(least.get_ydata(), (1 + 4 * least.get_xdata())
                               / np.exp(2 * least.get_xdata()), rtol=1e-9)
    assert bottom.get_yscale() == "log"
    plt.close(fig)


# -- units ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("rid, premise, conclusion", [
    ("R5", "(nats)", "(√nats)"),          # ξ-MBP ⇒ ABP bound: ABP is in √nats
    ("R9", "(nats)", "(probability)"),    # DP ⇒ SP
    ("R10", "(probability)", "(nats)"),   # SP ⇒ DP
    ("R7", "(nats)", "(probability)"),    # BDP ⇒ BSP
])
def test_axis_labels_carry_the_notions_units(rid, premise, conclusion):
    relation = registry.get(rid)
    assert registry.notion(relation.premise).unit in report.premise_label(relation)
    assert report.premise_label(relation).endswith(premise)
    assert report.value_label(relation).endswith(conclusion)
    assert relation.premise in report.premise_label(relation)
    assert relation.conclusion in report.value_label(relation)


def test_units_come_from_the_notion_record():
    assert _unit("abp") == " (√nats)"
    assert _unit("sp") == _unit("bsp") == " (probability)"
    assert _unit("pac_beta") == " (probability)"
    assert _unit("ldp") == " (nats)"
    # a statistical relation's premise is words, not a notion key
    assert _unit("relative accuracy ε") == ""
    r14 = registry.get("R14")
    assert report.premise_label(r14) == f"premise: {r14.premise}"


# -- the figures on disk ---------------------------------------------------------------------------

def write_run(directory, rows, config, columns=report.SEARCH_COLUMNS):
    directory.mkdir(parents=True)
    (directory / "summary.json").write_text(json.dumps({"config": config}))
    with open(directory / "envelope.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore", restval="")
        writer.writeheader()
        writer.writerows(rows)


@pytest.fixture
def audit_dir(tmp_path):
    """A hand-made audit directory: R2 (certified), R6 (a ratio, violated), R14
    (statistical, log slack)."""
    config = {"param": 0.0, "n": 3, "m": 3, "r": 0, "restarts": 4}
    r2_sweep = [row(0.25 * (i + 1), c, slack=0.5 * (i + 1) / c)
                for i, c in enumerate([0.4, 0.3, 1.1, 0.9, 1.6, 1.2])]
    r2_search = [row(x, 1.9 * x, premise=x, slack=2 / 1.9) for x in (0.1, 0.7, 1.3)]
    write_run(tmp_path / "R2" / "sweep", r2_sweep, config)
    write_run(tmp_path / "R2" / "search", r2_search, config)
    write_run(tmp_path / "R6" / "sweep", ratio_rows(), config)
    write_run(tmp_path / "R6" / "search", ratio_rows(), config)
    stat = [{**row(x, 0.0, premise=x, parameter=10.0 * x, slack=math.exp(-40 * x)),
             "log_slack": -40 * x} for x in (0.5, 2.0, 4.0, 8.0)]
    for kind in ("sweep", "search"):
        write_run(tmp_path / "R14" / kind, stat, {"mode": kind},
                  columns=report.STATISTICAL_COLUMNS)
    return tmp_path


def assert_png(path):
    data = path.read_bytes()
    assert data[:8] == PNG and len(data) > 10_000


@pytest.mark.parametrize("rid", ["R2", "R6", "R14"])
def test_a_relation_is_two_panels_sharing_the_premise_axis(audit_dir, rid):
    fig = plt.figure()
    top, bottom = report.draw_relation(fig, audit_dir, rid)
    assert len(fig.axes) == 2 and top.get_shared_x_axes().joined(top, bottom)
    assert top.get_position().y0 > bottom.get_position().y1  # levels over slack
    assert bottom.get_yscale() == "log" and bottom.get_xlabel().startswith("premise")
    assert top.get_legend() is not None and not top.get_xlabel()
    plt.close(fig)
    assert_png(report.plot_relation(audit_dir, rid, audit_dir / "figures" / f"{rid}.png"))


def test_the_sweep_envelope_drawn_in_an_audit_figure_is_monotone(audit_dir):
    fig = plt.figure()
    top, bottom = report.draw_relation(fig, audit_dir, "R2")
    sweep = lines_by_label(top)["sweep envelope (sup over premise ≤ x)"].get_ydata()
    assert list(sweep) == [0.4, 0.4, 1.1, 1.1, 1.6, 1.6]
    slack = lines_by_label(bottom)["sweep slack"]
    np.testing.assert_allclose(slack.get_ydata(), 2 * slack.get_xdata() / sweep, rtol=1e-12)
    plt.close(fig)


def test_the_grid_is_two_panel_cells_with_one_key(audit_dir):
    path = report.plot_grid(audit_dir, audit_dir / "grid.png", columns=2)
    assert_png(path)
    fig = plt.figure()
    cells = fig.subfigures(1, 3)
    for cell, rid in zip(cells, ["R2", "R6", "R14"]):
        top, bottom = report.draw_relation(cell, audit_dir, rid, compact=True)
        assert top.get_shared_x_axes().joined(top, bottom) and top.get_legend() is None
    assert len(fig.axes) == 6
    plt.close(fig)
    labels = [h.get_label() for h in report.grid_legend()]
    assert "claimed bound" in labels and "slack = 1" in labels
    # the grid tiles the relations' cells (3 cells in 2 columns: 2 rows) above one key strip
    from matplotlib import image

    from jaxpriv.report import grid
    cell = image.imread(grid.cell_path(audit_dir, "R2"))
    tiled = image.imread(path)
    assert tiled.shape[1] == 2 * cell.shape[1]
    assert 2 * cell.shape[0] < tiled.shape[0] <= 2 * cell.shape[0] + grid.GRID_DPI
    np.testing.assert_array_equal(tiled[:cell.shape[0], :cell.shape[1], :3], cell[..., :3])


def test_a_relations_figures_drawn_when_it_finishes_are_kept_until_its_runs_change(audit_dir):
    """An audit's worker draws a finished relation's figure and grid cell at once
    (draw_finished); the report reuses them while they are newer than the runs, and draws them
    again once a run has changed."""
    import os

    from jaxpriv.report import grid
    figure = audit_dir / "figures" / "R6.png"
    grid.draw_finished(audit_dir, "R6")
    assert_png(figure) and assert_png(grid.cell_path(audit_dir, "R6"))
    assert grid.is_fresh(figure, audit_dir, "R6")
    later = figure.stat().st_mtime + 5
    os.utime(audit_dir / "R6" / "search" / "summary.json", (later, later))
    assert not grid.is_fresh(figure, audit_dir, "R6")
    assert not grid.is_fresh(figure, audit_dir, "NOSUCH")


def test_single_run_figures_are_two_panels(tmp_path):
    relation = registry.get("R6")
    config = types.SimpleNamespace(param=0.0, n=3, m=3, r=0, restarts=4, count=1000)
    report.plot_search(tmp_path / "search.png", ratio_rows(), config, relation, ratio_rows())
    report.plot_envelope(tmp_path / "sweep.png", ratio_rows(), config, relation)
    binned = [row(1.0, 0.4, param=0.5), row(1.0, 3.0, param=1.0), row(2.0, 0.6, param=0.5)]
    report.plot_envelope(tmp_path / "bins.png", binned, config, registry.get("R3"))
    for name in ("search", "sweep", "bins"):
        assert_png(tmp_path / f"{name}.png")
