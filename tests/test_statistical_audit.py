"""Sweeps and searches of R14 and R15 (jaxpriv.engines.settings): contract, resume, findings."""

import csv
import json
import math

import numpy as np
import pytest

from jaxpriv import registry
from jaxpriv import cli, report
from jaxpriv.catalog import seed_papers as relations
from jaxpriv.core import statistical
from jaxpriv.engines import settings as sa
from jaxpriv.catalog import statistical as sr
from jaxpriv.core.errors import InputError


@pytest.mark.parametrize("t_max", [1, 7, 300, 10_000])
def test_r14_stratified_tails_equal_the_whole_table_sums(t_max):
    """The sweep sums each stratum's tails only up to its largest possible T: same values as
    summing the whole table (terms beyond T are zero), and every drawn T within its width."""
    import jax

    import functools

    with jax.enable_x64(True):  # compiled, as the sweep runs them (op by op: 67 s for four)
        log_fact = sr.log_factorials(t_max)
        T, kappa, eps = jax.jit(sr.draw_r14_settings, static_argnums=(1, 2, 3, 4))(
            jax.random.key(t_max), 4096, t_max, 10.0, sr.R14_STRATA)
        whole = jax.jit(sr.r14_log_terms)(log_fact, T, kappa, eps)
        strata = jax.jit(functools.partial(sr.r14_stratified_log_terms, t_max=t_max))(
            log_fact, T, kappa, eps)
    widths = sr.r14_stratum_widths(t_max)
    by_stratum = np.asarray(T).reshape(-1, sr.R14_STRATA)
    assert all(by_stratum[:, s].max() < widths[s] <= t_max + 1 for s in range(sr.R14_STRATA))
    assert 1 <= np.asarray(T).min() and np.asarray(T).max() <= t_max
    for a, b in zip(whole, strata):
        a, b = np.asarray(a), np.asarray(b)
        np.testing.assert_array_equal(np.isneginf(a), np.isneginf(b))
        # log-probabilities: 1e-14 absolute is 1e-14 relative in the probability; 1e-12
        # relative: two float64 summation orders (1.2e-13 apart once, compiled at XLA -O0)
        np.testing.assert_allclose(b[np.isfinite(a)], a[np.isfinite(a)], rtol=1e-12, atol=1e-14)
    if t_max == 10_000:  # the strata are equally likely under log-uniform T
        shares = np.bincount(np.minimum((np.log(np.asarray(T) + 0.5) / np.log(t_max + 1.0)
                                         * sr.R14_STRATA).astype(int), 7), minlength=8)
        assert shares.min() > 0.8 * 4096 / 8


def test_r14_sweep_finds_the_large_epsilon_failure_and_monte_carlo_agrees(tmp_path):
    config = sa.make_config("R14", "sweep", count=3000, chunk=1000, t_max=3000, seed=4)
    result = sa.run(config, tmp_path, progress=False, write=report.write_statistical)
    assert result.violation_count > 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    mc = summary["monte_carlo"]
    assert mc["settings"] == 3 * config.mc_settings and mc["disagreements"] == 0
    assert mc["max_ratio"] < 1
    for name in summary["violations"]:
        data = json.loads((tmp_path / name).read_text())
        assert data["relation"] == "R14"
        fields = {k: v for k, v in data.items() if k != "relation"}
        assert registry.get("R14").check(**fields).violated
        assert data["eps"] > 1  # the Chernoff form it comes from needs ε ≤ 1
    with open(tmp_path / "envelope.csv") as f:
        rows = list(csv.DictReader(f))
    assert rows and all(float(r["premise"]) <= float(r["x"]) for r in rows)
    low = [r for r in rows if float(r["x"]) <= 1.0]
    assert low and all(float(r["slack"]) > 1 for r in low)  # the claim holds for ε ≤ 1
    assert (tmp_path / "envelope.png").stat().st_size > 10_000


def test_r14_rows_are_the_exact_check_of_their_witness(tmp_path):
    config = sa.make_config("R14", "sweep", count=1000, t_max=500, seed=1)
    result = sa.run(config, tmp_path, progress=False, write=report.write_statistical)
    for row in result.rows:
        data = json.loads((tmp_path / row["witness"]).read_text())
        checked = registry.get("R14").check(T=data["T"], kappa1=data["kappa1"], eps=data["eps"])
        assert row["slack"] == float(checked.slack)
        log_failure = float(statistical.log_failure_probability(data["T"], data["kappa1"],
                                                                data["eps"]))
        claimed = math.log(2) - data["eps"] ** 2 * data["T"] * data["kappa1"] / 3
        assert row["log_slack"] == pytest.approx(claimed - log_failure, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("relation", ["R14", "R15"])
def test_a_killed_sweep_resumes_to_the_same_result(relation, tmp_path):
    overrides = dict(count=2400, chunk=800, seed=3, t_max=400, n=3)
    whole = sa.run(sa.make_config(relation, "sweep", **overrides), tmp_path / "a",
                   progress=False, write=report.write_statistical)
    config = sa.make_config(relation, "sweep", **overrides)
    partial = sa.run(config, tmp_path / "b", progress=False, max_chunks=1, write=report.write_statistical)
    assert partial.rows == []
    with pytest.raises(InputError, match="already holds"):
        sa.run(config, tmp_path / "b", progress=False, write=report.write_statistical)
    with pytest.raises(InputError, match="different settings"):
        sa.run(sa.make_config(relation, "sweep", **{**overrides, "seed": 9}), tmp_path / "b",
               resume=True, progress=False, write=report.write_statistical)
    resumed = sa.run(config, tmp_path / "b", resume=True, progress=False, write=report.write_statistical)
    strip = [{k: v for k, v in r.items()} for r in whole.rows]
    assert [{k: v for k, v in r.items()} for r in resumed.rows] == strip
    assert resumed.violation_count == whole.violation_count


def test_r14_search_holds_in_the_chernoff_regime_and_fails_beyond():
    result = sa.run(sa.make_config("R14", "search", grid=(0.5, 4.0), t_max=1000),
                    progress=False)
    held, failed = result.rows
    assert held["slack"] > 1.5
    assert failed["slack"] < 1e-10 and result.violation_count == 1
    assert result.violations[0]["grid_point"] == 4.0


def test_r15_search_reaches_the_sweep_and_stays_below_the_bound(tmp_path):
    swept = sa.run(sa.make_config("R15", "sweep", count=4000, n=3, seed=2, x_bins=4),
                   progress=False)
    searched = sa.run(sa.make_config("R15", "search", grid=(0.25, 0.5, 0.75, 0.95), n=3,
                                     restarts=16, steps=400), tmp_path, progress=False, write=report.write_statistical)
    assert searched.violation_count == 0
    assert all(row["slack"] >= 1 for row in searched.rows)
    for sweep_row, search_row in zip(swept.rows[:3], searched.rows[:3]):
        # the search at the bin's upper edge is at least as bad as any swept pair in the bin
        # (the slack falls with ε below 0.9, so the edge is the bin's worst point)
        assert search_row["slack"] <= sweep_row["slack"] * (1 + 1e-6)
    data = json.loads((tmp_path / searched.rows[0]["witness"]).read_text())
    checked = registry.get("R15").check(kappa1=data["kappa1"], kappa2=data["kappa2"],
                                         eps=data["eps"])
    assert float(checked.conclusion) == pytest.approx(searched.rows[0]["conclusion"], rel=1e-12)


def test_r15_gradient_is_finite_where_the_estimate_can_match():
    import jax
    import jax.numpy as jnp
    with jax.enable_x64(True):
        logits = jnp.zeros((2, 3))  # κ₁ = κ₂: C₁ = 0 and the least Ĉ₁ = 0
        grad = jax.grad(sr._r15_objective)(logits, 0.5)
        assert np.isfinite(np.asarray(grad)).all()


def test_cli_sweep_and_search_of_statistical_relations(tmp_path, capsys):
    assert cli.main(["sweep", "--relation", "R14", "--count", "500", "--t-max", "300",
                     "--out", str(tmp_path / "s"), "--quiet"]) in (0, 1)
    summary = json.loads((tmp_path / "s" / "summary.json").read_text())
    assert summary["relation"] == "R14" and summary["count"] == 500
    assert cli.main(["search", "--relation", "R14", "--grid", "6", "--t-max", "500",
                     "--out", str(tmp_path / "q"), "--quiet"]) == 1
    witness = json.loads((tmp_path / "q" / "summary.json").read_text())["violations"][0]
    assert cli.main(["check", "R14", str(tmp_path / "q" / witness)]) == 1
    assert cli.main(["search", "--relation", "R15", "--grid", "0.5:1.5:3",
                     "--out", str(tmp_path / "r"), "--quiet"]) == 2
    assert "0 < ε < 1" in capsys.readouterr().err
    assert cli.main(["sweep", "--relation", "R14", "--count", "10", "--t-max", "0",
                     "--out", str(tmp_path / "t"), "--quiet"]) == 2
    assert "--t-max" in capsys.readouterr().err


def test_cli_r15_search_without_a_grid_uses_its_own(tmp_path, capsys):
    assert cli.main(["search", "--relation", "R15", "--n", "2", "--restarts", "2", "--steps",
                     "100", "--out", str(tmp_path), "--quiet"]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    grid = summary["config"]["grid"]
    assert len(grid) == 19 and max(grid) < 1 and summary["worst_slack"] > 1
    capsys.readouterr()


def test_settings_run_through_the_sweep_and_search_engines(tmp_path):
    """One sweep engine and one search engine for every subject: a claim about an estimator
    is configured and run by jaxpriv.engines.sweep / jaxpriv.engines.search (its strategies plugged into the
    shared chunk loop), with the same results as its strategies run directly."""
    from jaxpriv.engines import search, sweep

    config = sweep.make_config("R15", 3, 3, 3000, seed=4, chunk=1000, x_bins=4, t_max=100)
    assert config == sa.make_config("R15", "sweep", count=3000, seed=4, chunk=1000, x_bins=4,
                                    n=3, t_max=100)
    via_sweep = sweep.run(config, tmp_path / "a", progress=False, write=report.write_sweep)
    direct = sa.run(config, tmp_path / "b", progress=False)
    assert [r["slack"] for r in via_sweep.rows] == [r["slack"] for r in direct.rows]
    assert json.loads((tmp_path / "a" / "summary.json").read_text())["mode"] == "sweep"
    searched = search.make_config("R14", 4, 4, "0.5,4", t_max=500, law="record", param=0.0)
    assert searched.mode == "search" and searched.grid == (0.5, 4.0)
    result = search.run(searched, progress=False)
    assert [row["slack"] > 1 for row in result.rows] == [True, False]
