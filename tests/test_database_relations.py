"""Registry checks of R7–R15 (paper 004; 003/002 for R14, R15): no false alarms, the findings."""

import json
import math
from pathlib import Path

import jax
import numpy as np
import pytest

from jaxpriv import registry
from jaxpriv import cli
from jaxpriv.catalog import seed_papers as relations
from jaxpriv.core import databases, statistical
from jaxpriv.engines import io
from jaxpriv.core.errors import InputError
from jaxpriv.core.mechanisms import Mechanism, Records

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
DATABASE_RELATIONS = ("R7", "R8", "R9", "R10", "R11", "R12", "R13")


def _batch(rng, count, k, r, m, prior_concentration):
    n = k**r
    K = rng.dirichlet(np.full(m, 0.6), size=(count, n))
    prior = rng.dirichlet(np.full(n, prior_concentration), size=count)
    with jax.enable_x64(True):
        return Mechanism.from_K(K, prior, records=Records(k=k, r=r), dtype=np.float64)


def test_registry_holds_r1_to_r15_with_kinds():
    assert list(registry.REGISTRY)[:15] == [f"R{i}" for i in range(1, 16)]
    for rid in DATABASE_RELATIONS:
        assert registry.get(rid).kind == "mechanism"
        assert registry.get(rid).notions <= relations.DATABASE_NOTIONS | {None}
    for rid in ("R14", "R15"):
        assert registry.get(rid).kind == "statistical"
    assert {registry.get(r).conclusion for r in ("R8", "R10", "R11")} == {"bdp", "dp"}


@pytest.mark.parametrize("k,r", [(2, 2), (2, 3), (3, 2)])
@pytest.mark.parametrize("concentration", [0.3, 5.0])
def test_no_false_alarms_on_full_support_priors(k, r, concentration):
    """R7–R11 and R13 are true (certified envelopes in docs/certified.md); R12 is true when the
    prior has full support. None may be reported violated on random full-support mechanisms."""
    mech = _batch(np.random.default_rng(k * 100 + r), 300, k, r, 3, concentration)
    for rid in DATABASE_RELATIONS:
        result = registry.get(rid).check(mech)
        assert not result.violated.any(), rid
        assert not np.isnan(result.slack).any(), rid
        held = result.condition_holds
        assert (result.slack[held] >= 1 - 1e-9).all(), rid


def test_converse_bound_is_two_atanh_of_twice_the_level():
    """004 Thm 1/2: ½ − 1/(e^ε+1) = s ⇔ ε = log((1+2s)/(1−2s))."""
    with jax.enable_x64(True):
        eps = np.array([0.0, 0.3, 2.0, 9.0])
        s = 0.5 - 1 / (np.exp(eps) + 1)
        bound = np.asarray(registry.get("R10").bound(s, 0.0))
        np.testing.assert_allclose(bound, eps, rtol=1e-12, atol=1e-15)
        assert np.asarray(registry.get("R10").bound(np.array([0.5, 0.7]), 0.0)).tolist() == \
            [math.inf, math.inf]


def test_r10_is_tight_as_sp_vanishes_for_one_record_randomized_response():
    """One record (r = 1), binary RR with ε: SP = tanh(ε/4) (sup over beliefs), DP = ε; the
    converse bound gives 2·atanh(2·tanh(ε/4)) → ε as ε → 0 (slack → 1, never below)."""
    for eps in (0.01, 0.5, 2.0):
        K = np.array([[np.exp(eps), 1.0], [1.0, np.exp(eps)]]) / (1 + np.exp(eps))
        with jax.enable_x64(True):
            mech = Mechanism.from_K(K, records=Records(k=2, r=1), dtype=np.float64)
        result = registry.get("R10").check(mech)
        assert float(result.premise) == pytest.approx(math.tanh(eps / 4), rel=1e-12)
        assert float(result.conclusion) == pytest.approx(eps, rel=1e-12)
        expected = 2 * math.atanh(2 * math.tanh(eps / 4)) / eps
        assert float(result.slack) == pytest.approx(expected, rel=1e-9)
        assert float(result.slack) >= 1
        assert eps > 0.5 or float(result.slack) < 1 + eps**2 / 8  # 1 + ε²/16 + O(ε⁴)


def test_finding_r12_fails_for_a_prior_with_zero_mass():
    """004 Thm 3 (R12) is false as stated: with records perfectly correlated (prior on 00 and
    11 only), no partial database separates a record's values, so BDP = 0, while 𝔻_* still
    holds whole databases (no prior), where MP = DP = log 5. The proof applies the BDP ratio
    to conditionals the prior does not define."""
    mech, extras = io.load_mechanism(EXAMPLES / "r12_counterexample.json")
    assert extras["relation"] == "R12"
    result = registry.get("R12").check(mech)
    assert result.condition_holds and result.violated
    assert float(result.premise) == 0.0
    assert float(result.conclusion) == pytest.approx(math.log(5), rel=1e-12)
    # the same mechanism with a full-support prior obeys R12
    with jax.enable_x64(True):
        full = Mechanism.from_K(np.exp(np.asarray(mech.log_K)), np.array([0.4, 0.1, 0.1, 0.4]),
                                records=mech.records, dtype=np.float64)
    assert not registry.get("R12").check(full).violated


def test_r12_counterexample_via_the_cli(capsys):
    assert cli.main(["check", "R12", str(EXAMPLES / "r12_counterexample.json")]) == 1
    assert "VIOLATED" in capsys.readouterr().out
    assert cli.main(["check", "R13", str(EXAMPLES / "r12_counterexample.json")]) == 0
    capsys.readouterr()


def test_r13_holds_in_004s_family_and_fails_under_the_whole_database_reading():
    """004 §III-B: ε-MP ⇒ ε-BDP needs 𝔻_* to hold the partial databases (unknown records drawn
    from the prior). Reading MP over whole databases only makes MP = DP, and with correlated
    records BDP exceeds DP: the converse then fails (here by a factor 1.47)."""
    K = np.array([[0.8, 0.2], [0.5, 0.5], [0.5, 0.5], [0.2, 0.8]])
    with jax.enable_x64(True):
        mech = Mechanism.from_K(K, np.array([0.49, 0.01, 0.01, 0.49]),
                                records=Records(k=2, r=2), dtype=np.float64)
        narrow = float(databases.mp(mech, "databases"))
        bdp = float(databases.bdp(mech))
    assert narrow == pytest.approx(math.log(2.5), rel=1e-12)
    assert bdp > 1.4 * narrow
    result = registry.get("R13").check(mech)
    assert not result.violated and float(result.premise) == pytest.approx(bdp, rel=1e-12)


def test_r8_is_not_claimed_where_a_game_is_undefined():
    """BSP's game i resets record i to ⊥ inside the prior; with mass only on 01 and 10 the reset
    database 00 has prior 0, so 004's proof of Thm 1 (second part) cannot start: no claim."""
    K = np.array([[0.5, 0.5], [0.9, 0.1], [0.1, 0.9], [0.5, 0.5]])
    with jax.enable_x64(True):
        mech = Mechanism.from_K(K, np.array([0.0, 0.5, 0.5, 0.0]), records=Records(k=2, r=2),
                                dtype=np.float64)
    result = registry.get("R8").check(mech)
    assert not result.condition_holds and not result.violated


# -- statistical relations ------------------------------------------------------------------


def test_r14_check_exact_and_its_finding():
    held = registry.get("R14").check(T=1000, kappa1=0.3, eps=0.2)
    assert held.condition_holds and not held.violated and float(held.slack) > 1
    assert float(held.conclusion) == pytest.approx(
        float(statistical.failure_probability(1000, 0.3, 0.2)), rel=1e-12)
    false = registry.get("R14").check(T=1000, kappa1=0.01, eps=4.0)
    assert false.violated
    assert float(false.conclusion) == pytest.approx(1.556e-20, rel=1e-3)
    assert float(false.bound) == pytest.approx(2 * math.exp(-16 * 10 / 3), rel=1e-12)


def test_r15_check_and_its_condition():
    rng = np.random.default_rng(3)
    k1, k2 = rng.dirichlet(np.ones(4)), rng.dirichlet(np.ones(4))
    result = registry.get("R15").check(kappa1=k1, kappa2=k2, eps=0.5)
    assert result.condition_holds and not result.violated and float(result.slack) > 1
    outside = registry.get("R15").check(kappa1=k1, kappa2=k2, eps=1.5)
    assert not outside.condition_holds and not outside.violated
    with pytest.raises(InputError, match="kappa2"):
        registry.get("R15").check(kappa1=k1, eps=0.5)


def test_statistical_witness_via_the_cli(tmp_path, capsys):
    path = tmp_path / "r14.json"
    path.write_text(json.dumps({"relation": "R14", "T": 1000, "kappa1": 0.01, "eps": 4.0}))
    assert cli.main(["check", "R14", str(path), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["violated"] and out["slack"] < 1e-2
    path.write_text(json.dumps({"relation": "R14", "T": 1000, "kappa1": 0.01}))
    assert cli.main(["check", "R14", str(path)]) == 2
    assert "'eps'" in capsys.readouterr().err
