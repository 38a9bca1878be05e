"""The audit's probes (:func:`jaxpriv.audit.plans.probes`): the levels a search visits besides
the budget's premise grid — beyond it, where a claim has no certificate and its premise grows
without bound, and at the edge of where a claim turns vacuous — so that a search, not the
sweep's random extremes, decides whether a claim is tight there (issue 35: verdicts that do not
move with the seed). The verdict's "on the grid" stays the budget's grid."""

import jax.numpy as jnp
import numpy as np
import pytest

from jaxpriv import registry
from jaxpriv.audit import plans

GRID = tuple(float(x) for x in np.linspace(0.1, 3.0, 6))
LADDER = tuple(3.0 * f for f in plans.PROBES)


@pytest.mark.parametrize("key", ["ldp", "dp", "bdp", "mp", "kl", "chi2", "renyi", "zcdp",
                                 "eps_at_delta", "gdp", "eps_composed"])
def test_levels_that_grow_without_bound_say_so(key):
    assert registry.notion(key).unbounded


@pytest.mark.parametrize("key", ["tv", "delta", "delta_composed", "mbp", "abp", "max_leakage",
                                 "mi"])
def test_bounded_levels_do_not(key):
    # maximal leakage and mutual information are at most log n on n secrets
    assert not registry.notion(key).unbounded


def test_an_uncertified_claim_with_an_unbounded_premise_is_searched_beyond_its_grid():
    # D8 (Bun–Steinke zCDP → (ε, δ)): its slack falls as ρ grows; the sweep alone reached
    # ρ ≈ 190 in one seed and 320 in another
    assert plans.probes(registry.get("D8.d1e-2"), GRID) == LADDER == (6.0, 12.0, 24.0)


def test_a_certified_claim_is_not_probed():
    relation = registry.get("R1")
    assert relation.certificate is not None
    assert plans.probes(relation, GRID) == ()


def test_a_claim_on_a_bounded_premise_is_not_probed_beyond_its_grid():
    relation = registry.get("D16")  # I ≤ ML: both at most log n; I has no finite maximum
    # in its record (it depends on n), so there is no vacuous edge either
    assert relation.certificate is None
    assert plans.probes(relation, GRID) == ()


@pytest.mark.parametrize("rid", ["D9.e0.5", "D9.e1", "D9.e2", "D11", "D12"])
def test_the_edge_of_where_a_claim_turns_vacuous_is_probed(rid):
    """The last level (to 1e-4, then rounded down to 4 digits: within 1.1e-3) where the bound is
    still below its conclusion's largest value over 1.01: D9's δ(ε) ≤ 1 bound reaches 0.990 at ρ ≈ 5.56 (ε = 1), where the least slack
    over the informative region sits."""
    relation = registry.get(rid)
    most = plans.ceiling(relation)
    edge = [x for x in plans.probes(relation, GRID) if x not in LADDER]
    assert len(edge) == 1, edge
    x = edge[0]
    assert float(registry.bound_at(relation, x)) < most
    assert float(registry.bound_at(relation, x * (1 + 1.1e-3))) >= most


def test_the_plan_searches_the_probes_and_keeps_the_grid_top():
    tasks = plans.plan(plans.budget("quick"), ["D9.e1", "D8.d1e-2", "R1"], seed=0)
    search = {t.relation: t for t in tasks if t.kind == "search"}
    d9, d8, r1 = search["D9.e1"], search["D8.d1e-2"], search["R1"]
    assert d9.grid_top == d8.grid_top == r1.grid_top == 3.0
    assert d9.config.grid[:6] == pytest.approx(GRID)
    # D9 at ε = 1: the edge (4 digits, rounded down); its bound at 6, 12, 24 is vacuous
    assert d9.config.grid[6:] == (5.56,)
    assert d8.config.grid[6:] == LADDER
    assert r1.config.grid == pytest.approx(GRID)  # certified: the grid alone


def test_levels_where_the_bound_is_not_finite_are_not_searched():
    """A plugin's bound may overflow beyond the grid (``e^{e^x}`` is ∞ from x ≈ 6.6 on): the
    plan must not stop the audit there, only skip those levels."""
    from jaxpriv import Relation
    registry.register(Relation(id="KLEXP", statement="KL ⇒ χ² ≤ exp(exp(x))", premise="kl",
                               conclusion="chi2", bound=lambda x, *p: jnp.exp(jnp.exp(x))))
    try:
        assert plans.probes(registry.get("KLEXP"), GRID) == (6.0,)
        tasks = plans.plan(plans.budget("quick"), ["KLEXP"], seed=0)
        search = next(t for t in tasks if t.kind == "search")
        assert max(search.config.grid) == 6.0
    finally:
        registry.unregister("KLEXP")


def test_an_audit_directory_of_an_earlier_plan_is_not_resumed(tmp_path):
    """Its searches ran at other levels: one line, not a checkpoint mismatch deep inside."""
    import json

    from jaxpriv.audit import runner
    from jaxpriv.core.errors import InputError
    (tmp_path / plans.PLAN).write_text(json.dumps({"budget": "quick", "seed": 0,
                                                   "relations": ["D8.d1e-2"]}))
    with pytest.raises(InputError, match="planned by another jaxpriv .plan 1, this one's 2"):
        runner._check_plan(tmp_path, {"budget": "quick", "seed": 0, "relations": ["D8.d1e-2"],
                                      "plan": plans.PLAN_VERSION})
