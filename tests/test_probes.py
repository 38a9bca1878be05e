"""The audit's probes (:func:`jaxpriv.audit.plans.probes`): the levels a search visits besides
the budget's premise grid — beyond it, where a claim has no certificate and its premise grows
without bound, and at the edge of where a claim turns vacuous — so that a search, not the
sweep's random extremes, decides whether a claim is tight there (issue 35: verdicts that do not
move with the seed). The verdict's "on the grid" stays the budget's grid."""

import numpy as np
import pytest

from jaxpriv import registry
from jaxpriv.audit import plans

GRID = tuple(float(x) for x in np.linspace(0.1, 3.0, 6))
LADDER = tuple(3.0 * f for f in plans.PROBES)


@pytest.mark.parametrize("key", ["ldp", "kl", "chi2", "renyi", "zcdp", "eps_at_delta", "gdp",
                                 "eps_composed"])
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
    relation = registry.get("D16")  # I ≤ ML: ML ≤ log n, I unbounded (no vacuous edge)
    assert relation.certificate is None
    assert plans.probes(relation, GRID) == ()


@pytest.mark.parametrize("rid", ["D9.e0.5", "D9.e1", "D9.e2", "D11", "D12"])
def test_the_edge_of_where_a_claim_turns_vacuous_is_probed(rid):
    """The last level (to 1e-4) where the bound is still below its conclusion's largest value
    over 1.01: D9's δ(ε) ≤ 1 bound reaches 0.990 at ρ ≈ 5.56 (ε = 1), where the least slack
    over the informative region sits."""
    relation = registry.get(rid)
    most = plans.ceiling(relation)
    edge = [x for x in plans.probes(relation, GRID) if x not in LADDER]
    assert len(edge) == 1, edge
    x = edge[0]
    assert float(registry.bound_at(relation, x)) < most
    assert float(registry.bound_at(relation, x * (1 + 2e-4))) >= most


def test_the_plan_searches_the_probes_and_keeps_the_grid_top():
    tasks = plans.plan(plans.budget("quick"), ["D9.e1", "R1"], seed=0)
    search = {t.relation: t for t in tasks if t.kind == "search"}
    d9, r1 = search["D9.e1"], search["R1"]
    assert d9.grid_top == 3.0 and r1.grid_top == 3.0
    assert d9.config.grid[:6] == pytest.approx(GRID)
    assert d9.config.grid[6:] == tuple(sorted(d9.config.grid[6:]))
    assert max(d9.config.grid) == 24.0 and len(d9.config.grid) == 10
    assert r1.config.grid == pytest.approx(GRID)  # certified: the grid alone
