"""Claims with parameters (issue 35): one published claim, its α, δ, ε or k set by the user;
the audit's instances are its default grid, unchanged."""

import json
import math

import jax
import numpy as np
import pytest

from jaxpriv import InputError, cli, registry
from jaxpriv.core import families
from jaxpriv.registry.claims import DELTA, EPSILON, ORDER, USES

KRR = "examples/krr4.json"


@pytest.fixture(autouse=True)
def _x64():
    with jax.enable_x64(True):
        yield


def test_every_claims_grid_is_registered_and_every_instance_belongs_to_a_claim():
    """The audit's instances are the claims' grids (78 of them: 30 of D5–D10 and D13, 48 of C1–C7), each id
    parses back to its own values, and no other registered id looks like an instance."""
    ids = []
    for claim in registry.CLAIMS.values():
        for values in claim.grid:
            rid = claim.instance_id(values)
            relation = registry.REGISTRY[rid]
            assert relation.claim == claim.id and relation.values == values
            assert {k: relation.options[k] for k in values} == values  # the notions' options
            assert registry.claim_of(rid) == (claim, values)
            ids.append(rid)
    from jaxpriv.catalog import accountant_conversions

    library = {c.id: c for c in accountant_conversions.CONVERSIONS if c.available}
    built_in = [rid for rid in ids if rid not in library]
    assert len(ids) == len(set(ids)) and len(built_in) == 78
    assert sorted(c for c in registry.CLAIMS if c.split(".")[0] not in library_names()) == sorted(
        ["D5", "D6", "D7", "D8", "D9", "D10", "D13"] + [f"C{i}" for i in range(1, 8)])
    # the installed accountants' functions with parameters are claims too, but for OpenDP's
    # profile read at ε (an id names one claim: opendp.make_zCDP_to_approxDP reads it at δ)
    assert sorted(set(library) - set(ids)) == sorted(
        rid for rid in library if rid.startswith("opendp.make_zCDP_to_approxDP.e")
        or rid == "opendp.make_pureDP_to_zCDP")
    for rid in registry.REGISTRY:
        if registry.claim_of(rid) is not None:
            assert rid in ids, rid


def library_names():
    from jaxpriv.catalog import accountant_libraries

    return set(accountant_libraries.AVAILABLE)


@pytest.mark.parametrize("parameter, values", [
    (ORDER, [1.0000001, 1.5, 3.25, 16.0, 1e6, 1.2345678901234567]),
    (DELTA, [1e-2, 1e-5, 2.5e-7, 0.123456789, 1e-300, 0.5]),
    (EPSILON, [0.0, 0.7, 1.0, 1e20, 1e-12]),
    (USES, [1, 37, 1000]),
])
def test_an_instance_id_reads_back_its_values_exactly(parameter, values):
    for value in values:
        tag = parameter.tag(value)
        assert tag.startswith(parameter.letter) and "+" not in tag
        assert float(tag[len(parameter.letter):]) == value, tag


def test_old_ids_are_kept():
    assert ORDER.tag(1.5) == "a1.5" and DELTA.tag(1e-2) == "d1e-2" and DELTA.tag(1e-5) == "d1e-5"
    assert EPSILON.tag(0.5) == "e0.5" and USES.tag(10) == "k10"


def test_a_claim_off_its_grid_checks_like_its_formula():
    """Mironov's Prop. 3 at α = 3, δ = 1e-7 (not on the audit's grid): the bound is
    ``D_3 + log(1/δ)/2`` and the conclusion the notion's level at δ = 1e-7."""
    mech, _ = _load()
    relation = registry.resolve("D6", {"order": 3.0, "delta": 1e-7})
    assert relation.id == "D6.a3.d1e-7" and relation.id not in registry.REGISTRY
    assert "α = 3, δ = 1e-07" in relation.statement
    result = relation.check(mech)
    renyi = registry.level("renyi", mech, order=3.0)
    eps = registry.level("eps_at_delta", mech, delta=1e-7)
    np.testing.assert_allclose(result.premise, renyi, rtol=1e-12)
    np.testing.assert_allclose(result.conclusion, eps, rtol=1e-12)
    np.testing.assert_allclose(result.bound, renyi + math.log(1e7) / 2.0, rtol=1e-12)
    # the id alone names the setting; the grid's settings give the registered instance
    assert registry.get("d6.A3.D1E-7").values == {"order": 3.0, "delta": 1e-7}
    assert registry.resolve("D6", {"order": 4, "delta": 1e-5}) is registry.REGISTRY["D6.a4.d1e-5"]
    # an instance id's own values are overridden by the ones given
    assert registry.resolve("D6.a4.d1e-5", {"delta": 1e-9}).id == "D6.a4.d1e-9"


def test_a_composition_claim_at_a_new_k_keeps_its_certificate():
    """C1 at k = 7: basic composition ``7ε``; its envelope is still 7-fold RR_ε's."""
    relation = registry.resolve("C1", {"k": 7, "delta": 1e-5})
    assert relation.certificate is not None and relation.sampling.shape == (3, 3)
    mech = families.randomized_response(np.float64(0.4))
    result = relation.check(mech)
    np.testing.assert_allclose(result.bound, 7 * 0.4, rtol=1e-12)
    sup, _ = relation.certificate(np.array([0.4]), None, n=2)
    np.testing.assert_allclose(sup, result.conclusion, rtol=1e-9)  # RR_ε attains it


@pytest.mark.parametrize("relation_id, values, message", [
    ("D6", {"order": 1.0, "delta": 1e-5}, "D6: α = 1 must be a finite order > 1 (--alpha)"),
    ("D6", {"order": math.inf, "delta": 1e-5}, "α = inf must be a finite order > 1"),
    ("D6", {"order": 2.0, "delta": 0.0}, "D6: δ = 0 must lie in (0, 1) (--delta)"),
    ("D8", {"delta": 1.0}, "δ = 1 must lie in (0, 1)"),
    ("D9", {"epsilon": -1.0}, "D9: ε = -1 must be finite and ≥ 0 (--epsilon)"),
    ("D10", {"epsilon": math.nan}, "D10: ε = nan is NaN"),
    ("C2", {"k": 0, "delta": 1e-5}, "C2: k = 0 must be a number of uses in 1 … 10^6 (--k)"),
    ("C2", {"k": 2.5, "delta": 1e-5}, "C2: k = 2.5 must be an integer (--k)"),
    ("D8", {"order": 2.0, "delta": 1e-5}, "D8 has no parameter --alpha"),
    ("D6", {"order": 2.0}, "D6 is a claim with parameters α (--alpha) audited at 1.5, 2, 4, 16; "
                           "δ (--delta) audited at 0.01, 1e-05: give --delta X"),
])
def test_bad_claim_values_are_one_line_naming_the_claim_and_flag(relation_id, values, message):
    with pytest.raises(InputError) as error:
        registry.resolve(relation_id, values)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_file_that_sets_a_claims_parameter_otherwise_is_refused_not_mixed():
    """Before claims, ``check D6.a4.d1e-2`` on a file with ``"delta": 1e-5`` computed ε at
    δ = 1e-5 against the bound at δ = 1e-2 (slack 1.93 instead of 1.91 against the right δ)."""
    mech, _ = _load()
    relation = registry.get("D6.a4.d1e-2")
    with pytest.raises(InputError, match="D6.a4.d1e-2 is D6 at delta = 0.01, but delta = 1e-05"):
        relation.check(mech, delta=1e-5)
    same = relation.check(mech, delta=0.01)
    np.testing.assert_allclose(same.bound, relation.check(mech).bound)


def test_cli_check_takes_claim_parameters(tmp_path, capsys):
    code = cli.main(["check", "D6", KRR, "--alpha", "3", "--delta", "1e-7", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["relation"] == "D6.a3.d1e-7"
    np.testing.assert_allclose(out["bound"], out["premise"] + math.log(1e7) / 2, rtol=1e-12)
    # a witness of another setting: the flags decide, the file's own value is noted, not used
    data = json.load(open(KRR))
    path = tmp_path / "w.json"
    path.write_text(json.dumps({**data, "order": 4.0, "delta": 1e-5}))
    assert cli.main(["check", "D6", str(path), "--json"]) == 0  # the file's setting
    assert json.loads(capsys.readouterr().out)["relation"] == "D6.a4.d1e-5"
    assert cli.main(["check", "D6.a4.d1e-2", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    assert "the file sets delta = 1e-05; checking D6.a4.d1e-2 at delta = 0.01" in captured.err
    expected = registry.get("D6.a4.d1e-2").check(_load()[0])
    np.testing.assert_allclose(json.loads(captured.out)["conclusion"], expected.conclusion)


@pytest.mark.parametrize("args, message", [
    (["check", "D6", KRR], "D6 is a claim with parameters"),
    (["check", "R1", KRR, "--delta", "1e-3"],
     "R1 has no parameter --delta; the claims with it: D6, D7, D8, D13, C1"),
    (["check", "R1", KRR, "--alpha", "2"], "R1 has no parameter --alpha"),
    (["check", "C3", KRR, "--k", "3", "--epsilon", "-0.5"], "C3: ε = -0.5 must be finite"),
])
def test_cli_claim_errors_are_one_line_exit_2(capsys, args, message):
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_relations_lists_each_claim_once_with_its_parameters(capsys):
    assert cli.main(["relations"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert any(line.startswith("D6 ") for line in lines)
    assert not any(line.startswith("D6.") for line in lines)
    assert "parameters α (--alpha) audited at 1.5, 2, 4, 16; δ (--delta) audited at 0.01, " \
           "1e-05" in out
    assert cli.main(["relations", "--json"]) == 0
    rows = {row["id"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["D6.a4.d1e-5"]["claim"] == "D6"
    assert rows["D6.a4.d1e-5"]["values"] == {"order": 4.0, "delta": 1e-5}
    assert rows["R1"]["claim"] is None


def _load():
    from jaxpriv.engines import io

    return io.load_mechanism(KRR)


@pytest.mark.parametrize("rid", ["D6.a2.d1e-5", "D9.e0.5", "D10.e1", "C2.k10.d1e-6", "R5"])
def test_bound_at_is_the_bound_op_by_op(rid):
    """``registry.bound_at`` (one compiled program per claim, the parameters its arguments)
    gives the relation's own bound evaluated op by op, at many points at once."""
    relation = registry.get(rid)
    x = np.array([0.0, 1e-6, 0.3, 1.0, 2.5, 7.0, np.inf])
    used = np.full_like(x, 0.5)
    got = registry.bound_at(relation, x, used)
    with jax.enable_x64(True):
        want = np.array([float(np.asarray(relation.bound(np.float64(a), np.float64(b))))
                         for a, b in zip(x, used)])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
    assert registry.bound_at(relation, 1.0, 0.5).shape == ()



def test_a_setting_float32_cannot_hold_is_refused_by_the_float32_engines():
    """Sweeps and searches screen in float32, where δ = 1e-50 reads 0 (D6's bound +∞: the screen
    ranked nothing and a sweep reported a least slack of 1.28 where δ = 1e-37 gives 1.005): one
    line naming the value, before any work; ``check`` (float64) takes it."""
    from jaxpriv.engines import search, sweep

    for rid in ("D6.a2.d1e-50", "D6.a1.00000001.d1e-5", "D9.e1e50"):
        with pytest.raises(InputError, match="beyond float32"):
            sweep.make_config(rid, 3, 3, 1024)
        with pytest.raises(InputError, match="beyond float32"):
            search.make_config(rid, 3, 3, "0.1,1")
    assert sweep.make_config("D6.a2.d1e-37", 3, 3, 1024).relation == "D6.a2.d1e-37"
    relation = registry.get("D6.a2.d1e-50")
    assert np.isfinite(float(relation.check(families.randomized_response(1.0)).bound))


def test_a_mistyped_claim_id_suggests_the_claim_not_five_of_its_instances():
    """`check D66` suggested D16 alone, and `dp_accounting.compute_epsilonn` (with the extra)
    five instance ids of one claim: the claims' own ids are among the suggestions now."""
    from jaxpriv import registry

    with pytest.raises(InputError) as error:
        registry.get("D66")
    assert "did you mean D6, D16?" in str(error.value)
    with pytest.raises(InputError) as error:
        registry.get("D6x")
    assert "D6.a" not in str(error.value) and "D6" in str(error.value)
