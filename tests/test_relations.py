"""The relation registry: checks, conditions, tolerances, and the R6 finding."""

import re
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import random_prior
from jaxpriv import registry
from jaxpriv import InputError, Mechanism
from jaxpriv.catalog import seed_papers as relations
from jaxpriv.core import families
from jaxpriv.catalog.seed_papers import Source


def test_registry_has_r1_to_r6_with_sources():
    assert [r for r in registry.REGISTRY if r in {f"R{i}" for i in range(1, 7)}] == \
        [f"R{i}" for i in range(1, 7)]
    for relation in registry.REGISTRY.values():
        if not re.fullmatch(r"R\d+", relation.id):
            continue  # a plugin's relation may cite any paper
        assert relation.sources, relation.id
        for source in relation.sources:
            assert source.paper in registry.PAPERS
    assert registry.get("r5") is registry.REGISTRY["R5"]
    with pytest.raises(InputError, match="unknown relation 'R99'"):
        registry.get("R99")


def test_an_unknown_id_names_the_claims_parameters_or_the_closest_ids_not_the_registry():
    """``D10`` is a claim with a parameter: the error names it, its flag and the values the
    audit takes; an id that is no prefix lists the closest ids; neither lists the whole
    registry (issue 35)."""
    with pytest.raises(InputError) as error:
        registry.get("d10")
    assert str(error.value) == ("D10 is a claim with parameter ε (--epsilon) audited at 0.5, 1, "
                                "2: give --epsilon X, or an instance id like D10.e0.5")
    with pytest.raises(InputError) as error:
        registry.get("C2")
    text = str(error.value)
    assert "k (--k) audited at 1, 10, 100" in text and "C2.k1.d1e-5" in text
    assert "C3" not in text and "D6" not in text
    with pytest.raises(InputError) as error:
        registry.get("R55")
    text = str(error.value)
    assert "did you mean R5, R15?" in text and "R1," not in text and "jaxpriv relations" in text


def test_binary_rr_slack_closed_form():
    # Binary RR, uniform prior: LDP = ε and MBP = log((1+e^ε)/2), so R1's slack is ε/MBP and
    # R2's is 2·MBP/ε.
    eps = np.array([0.1, 1.0, 4.0])
    mech = families.randomized_response(eps)
    mbp = np.log((1 + np.exp(eps)) / 2)
    r1, r2 = registry.get("R1").check(mech), registry.get("R2").check(mech)
    assert r1.condition_holds.all() and not r1.violated.any()
    np.testing.assert_allclose(r1.slack, eps / mbp, rtol=1e-6)
    np.testing.assert_allclose(r2.slack, 2 * mbp / eps, rtol=1e-6)


def test_uniform_condition_fails_for_skewed_prior(x64):
    mech = families.randomized_response(1.0, prior=np.array([0.3, 0.7]))
    result = registry.get("R1").check(mech)
    assert not result.condition_holds and not result.violated
    assert result.parameter == pytest.approx(math.log(0.7 / 0.3), rel=1e-12)


def test_parameter_given_below_measured_means_no_claim():
    mech = families.k_randomized_response(3, 2.0, prior=np.array([0.2, 0.3, 0.5]))
    measured = registry.get("R3").check(mech)
    assert measured.condition_holds and measured.parameter_used == measured.parameter
    below = registry.get("R3").check(mech, parameter=0.5 * float(measured.parameter))
    assert not below.condition_holds and not below.violated
    above = registry.get("R3").check(mech, parameter=10.0)
    assert above.condition_holds and above.bound == pytest.approx(float(above.premise) + 10.0)


def test_r5_uses_belief_distance():
    rng = np.random.default_rng(5)
    mech = Mechanism.from_K(rng.dirichlet(np.ones(4), size=4), random_prior(rng, 4),
                            random_prior(rng, 4))
    result = registry.get("R5").check(mech)
    assert result.parameter > 0 and result.condition_holds and not result.violated
    x, e = float(result.premise), float(result.parameter)
    assert float(result.bound) == pytest.approx(math.sqrt(0.5 * (x + e) * math.expm1(x + e)))


def test_no_false_alarms_for_true_bounds_on_many_mechanisms_including_extreme_ones():
    # R1–R5 hold (R1, R3: K/p is a mixture ratio; R2, R4: ratio of two such; R5 checked here
    # empirically). Extreme mechanisms: near-deterministic rows, 1e-300 entries, tiny priors.
    rng = np.random.default_rng(11)
    with jax.enable_x64(True):
        for n, m in ((2, 2), (3, 5), (6, 6)):
            for concentration in (0.005, 0.5, 50.0):
                K = rng.dirichlet(np.full(m, concentration), size=(3000, n))
                K = np.maximum(K, 1e-300)
                K /= K.sum(-1, keepdims=True)
                prior = rng.dirichlet(np.full(n, 0.3), size=3000)
                belief = rng.dirichlet(np.full(n, 0.3), size=3000)
                for rid, p, b in (("R1", None, None), ("R2", None, None), ("R3", prior, None),
                                  ("R4", prior, None), ("R5", prior, belief)):
                    result = registry.get(rid).check(Mechanism.from_K(K, p, b))
                    assert not result.violated.any(), (rid, n, m, concentration)
                    assert not np.isnan(result.slack).any()
                    assert (result.slack[result.condition_holds] >= 1.0 - 1e-9).all()


def test_tolerance_prevents_rounding_alarms():
    # A conclusion exactly at its bound (R2 is tight when the bound is attained) is not a
    # violation, even when rounding puts it a hair above.
    relation = registry.Relation(
        id="TEST-EXACT", statement="LDP ≤ LDP", sources=(Source("003", "none"),),
        premise="ldp", conclusion="ldp", condition="none", bound=lambda x, e: x * (1 - 1e-13))
    result = relation.check(families.randomized_response(np.linspace(0.1, 5, 50)))
    assert not result.violated.any()


def test_injected_false_bound_is_reported_violated(too_tight_relation):
    result = registry.get(too_tight_relation.id).check(families.randomized_response(1.0))
    assert result.violated and result.slack < 1


def r6_witness(xi: float, s: float = 0.05, p0: float = 0.01) -> Mechanism:
    """MBP exactly ξ with failure probabilities β(1)/β(0) = e^{2ξ} (the LDP extreme).

    Secrets 0, 1 have prior s each and report the 'far' output 0 with probabilities e^{−ξ}p0
    and e^{ξ}p0; secret 2 (prior 1−2s) puts c·p0 there with c chosen so that p(0) = p0. Every
    ratio K/p is then within [e^{−ξ}, e^{ξ}] (output 1's ratios are ≈ 1).
    """
    c = (1 - 2 * s * math.cosh(xi)) / (1 - 2 * s)
    K = [[math.exp(-xi) * p0, 1 - math.exp(-xi) * p0],
         [math.exp(xi) * p0, 1 - math.exp(xi) * p0],
         [c * p0, 1 - c * p0]]
    with jax.enable_x64(True):
        return Mechanism.from_K(K, [s, s, 1 - 2 * s], values=[10.0, 0.0])


@pytest.mark.parametrize("xi", [0.7, 0.8, 0.9, 1.0])
def test_r6_is_false_for_xi_above_0_628(xi):
    # FINDING (002 Thm IV.7 / A.9): the proof's step e^{2ξ} ≤ 1 + 2ξ + 4ξ² ≤ 1 + 4ξ needs
    # ξ ≤ ½ for the second inequality; the claim itself fails once e^{2ξ} > 1 + 4ξ, ξ > 0.6282.
    result = registry.get("R6").check(r6_witness(xi), mu=0.0, alpha=1.0, d_true=0)
    assert result.premise == pytest.approx(xi, rel=1e-12)
    assert result.condition_holds and result.violated
    assert result.conclusion / result.parameter == pytest.approx(math.exp(2 * xi), rel=1e-12)
    assert result.slack == pytest.approx((1 + 4 * xi) / math.exp(2 * xi), rel=1e-12)


@pytest.mark.parametrize("xi", [0.1, 0.4, 0.6])
def test_r6_holds_below_the_crossover_for_the_extreme_witness(xi):
    result = registry.get("R6").check(r6_witness(xi), mu=0.0, alpha=1.0, d_true=0)
    assert result.condition_holds and not result.violated
    assert result.slack == pytest.approx((1 + 4 * xi) / math.exp(2 * xi), rel=1e-12)


def test_r6_needs_its_options():
    # Relation.check evaluates at the relation's own options (R6: μ = 0, α = 1, d_true = 0)
    own = registry.get("R6").check(r6_witness(0.5))
    given = registry.get("R6").check(r6_witness(0.5), mu=0.0, alpha=1.0, d_true=0)
    assert own.slack == given.slack
    # the registry's check takes only what it is given
    with pytest.raises(InputError, match="needs 'd_true'"):
        registry.check(registry.get("R6"), r6_witness(0.5), mu=0.0, alpha=1.0)
    with pytest.raises(InputError, match="need output values"):
        registry.get("R6").check(families.randomized_response(0.5), mu=0.0, alpha=1.0, d_true=0)


def test_slack_conventions():
    s = np.asarray(registry.slack(np.array([1.0, np.inf, 2.0, 0.0, 1.0]),
                                   np.array([0.0, 1.0, np.inf, 0.0, 2.0])))
    np.testing.assert_array_equal(s, [np.inf, np.inf, 0.0, np.inf, 0.5])
    # "0 ≤ 0" up to rounding (D16 at a constant mechanism: ML = 0, I = 1e-17) is 0/0, not 0;
    # a conclusion above the tolerance over a zero bound still reads 0 (R12's violation)
    s = np.asarray(registry.slack(np.array([0.0, 0.0, 1e-13, 2e-12, 1e-13]),
                                  np.array([1e-17, 1e-3, 1e-14, 1e-13, 2e-12])))
    np.testing.assert_allclose(s, [np.inf, 0.0, np.inf, 20.0, 0.05], rtol=1e-6)
    # a bound below −atol is no zero: below 1, as the check's violation (autodp's pure-DP RDP,
    # bound −1.3e-8 over a Rényi divergence of 8.6e-18, read slack +inf beside VIOLATED)
    bound = np.array([-1.3e-8, -1.0, -np.inf, -1e-13, -1.0, -5e-13, -1e-12, -np.inf, 1.0])
    conclusion = np.array([8.6e-18, 0.5, 1.0, 0.0, 0.0, 1e-12, 0.0, np.inf, np.inf])
    with jax.enable_x64(True):  # (in float32, 1 + rtol rounds to 1)
        s = np.asarray(registry.slack(bound, conclusion))
    np.testing.assert_array_equal(s, [-np.inf, -2.0, -np.inf, np.inf, -np.inf, -np.inf, -np.inf,
                                      -np.inf, 0.0])
    # below 1 exactly where the check's violation test fires (within atol of 0 too)
    violated = conclusion > bound * (1 + registry.RTOL) + registry.ATOL
    np.testing.assert_array_equal(s < 1, violated)


def test_r2_is_attained_by_4ary_rr_at_eps_2ln3_and_not_reported_violated(x64):
    # 4-RR: ξ = max(B, ε − B), B = log((e^ε+3)/4). The branches meet where e^{ε/2} = 3
    # (x² − 4x + 3 = 0), i.e. ε = 2 ln 3, where ξ = ε/2 and LDP = ε = 2ξ: R2 holds with equality.
    mech = families.k_randomized_response(4, 2 * math.log(3))
    result = registry.get("R2").check(mech)
    assert result.slack == pytest.approx(1.0, abs=1e-12)
    assert result.condition_holds and not result.violated


def test_every_certificate_links_to_its_proof():
    """A relation with a certified envelope names the section of docs/certified.md that proves
    it, and that section exists."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "certified.md").read_text()
    anchors = set(re.findall(r"\{#([a-z0-9-]+)\}", text))
    for relation in registry.REGISTRY.values():
        if getattr(relation, "certificate", None) is None:
            continue
        page, _, anchor = relation.proof.partition("#")
        assert page == "docs/certified.md" and anchor in anchors, (relation.id, relation.proof)


def test_every_built_in_bound_returns_one_number_per_x():
    """The catalog registers its relations without tracing their bounds (that cost 1.2 s of
    every import): the check a plugin's bound gets at registration is made here for every
    built-in one, and it does refuse a bound of the wrong shape."""
    from jaxpriv.registry.store import check_bound_shape

    mechanism_relations = [r for r in registry.REGISTRY.values() if r.kind == "mechanism"]
    assert len(mechanism_relations) >= 50
    for relation in mechanism_relations:
        check_bound_shape(relation)
    import dataclasses
    wrong = dataclasses.replace(mechanism_relations[0], bound=lambda x, p: jnp.stack([x, x]))
    with pytest.raises(InputError, match="must return one number per x"):
        check_bound_shape(wrong)


def test_check_is_one_compiled_program_and_falls_back_op_by_op():
    """registry.check compiles a relation's float64 arithmetic once per relation and options
    (the same numbers as op by op); a bound that only runs op by op (here: it reads its
    argument with NumPy) is checked op by op, with the same result, and stays so."""
    import dataclasses

    from jaxpriv import registry
    from jaxpriv.registry.checks import _check_key, _not_compiled
    mech = Mechanism.from_K(families.randomized_response(0.7).K[None].repeat(3, 0)
                            * np.array([1.0, 1.0, 1.0])[:, None, None])
    compiled = registry.check(relations.R2, mech)
    with jax.enable_x64(True):
        eager = registry.evaluate(relations.R2, mech.astype(np.float64))
    for got, want in zip(compiled[1:], eager[1:]):
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-12)

    premise = registry.notion(relations.R2.premise)

    def premise_by_numpy(mech):  # a plugin's notion that runs op by op only
        return jnp.asarray(np.asarray(premise.evaluate(mech)))

    registry.register(registry.Notion("ldp_numpy", premise_by_numpy, doc="via NumPy",
                                      source="test"))
    by_hand = dataclasses.replace(relations.R2, id="R2NUMPY", premise="ldp_numpy")
    registry.register(by_hand)
    try:
        for _ in range(2):
            result = registry.check(by_hand, mech)
            for got, want in zip(result[1:], compiled[1:]):
                np.testing.assert_allclose(got, want, rtol=1e-12)
        assert _check_key(("relation", by_hand), True, registry.RTOL, registry.ATOL,
                          {}) in _not_compiled
    finally:
        registry.unregister("R2NUMPY")
        registry.unregister("ldp_numpy")


def test_a_required_notion_parameter_nobody_gives_is_one_error():
    """A notion parameter with no default (the PAC notions' μ) that neither the options nor the
    relation give is refused by name; a relation's own options fill what a file leaves out."""
    with pytest.raises(InputError, match="needs 'mu'"):
        registry.notion("pac_gamma").resolve({"alpha": 1.0, "d_true": 0})
    assert registry.notion("pac_gamma").resolve({"mu": 0.0, "alpha": 1.0, "d_true": 0})["mu"] == 0.0


def test_no_built_in_bound_is_nan_anywhere_on_the_premise_axis():
    """A bound is a number or ±∞ at every premise level 0 … ∞ (a NaN bound reads "holds", and
    C3's bound of 0 at ε-LDP = ∞ was a false alarm): the limits at ∞ are values — D5 ∞, D10
    and D13 1 (they were NaN), C3 1 (it was 0)."""
    import numpy as np

    xs = np.array([0.0, 1e-300, 1e-8, 0.5, 3.0, 50.0, 1e3, np.inf])
    with jax.enable_x64(True):
        for relation in registry.REGISTRY.values():
            if relation.kind != "mechanism":
                continue
            # a condition parameter at 0.5: (1 + 4ξ)β at ξ = ∞, β = 0 has no limit
            for parameter in (0.0 if relation.parameter is None else 0.5,):
                values = np.broadcast_to(np.asarray(relation.bound(
                    jnp.asarray(xs), jnp.float64(parameter)), np.float64), xs.shape)
                assert not np.isnan(values).any(), (relation.id, parameter, values)
    assert float(registry.get("D5.a2").bound(np.float64(np.inf), 0.0)) == np.inf
    assert float(registry.get("D10.e1").bound(np.float64(np.inf), 0.0)) == 1.0
    assert float(registry.get("D13.d1e-5").bound(np.float64(np.inf), 0.0)) == 1.0
    assert float(registry.get("C3.k10.e0.7").bound(np.float64(np.inf), 0.0)) == 1.0
