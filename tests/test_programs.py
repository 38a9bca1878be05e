"""One compiled program per claim (jaxpriv.registry.programs, jaxpriv.engines.programs): a claim's
instances share their sweep step, float64 screen, search segment and float64 checks, their
parameters passed in — and every result is the one a program of the instance's own gives."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpriv import families, registry
from jaxpriv.core.mechanisms import Mechanism
from jaxpriv.engines import programs, search, sweep
from jaxpriv.registry import programs as claim_programs


def _envelope(result):
    env = result.state.envelope
    return {name: np.asarray(getattr(env, name)) for name in env._fields} | {
        "count": np.asarray(result.state.cell_count),
        "worst": np.asarray(result.state.worst.score)}


def test_instances_of_a_claim_share_one_key_and_pass_their_values():
    a, b = registry.get("D6.a2.d1e-5"), registry.get("D6.a16.d1e-2")
    assert claim_programs.program_key(a) == claim_programs.program_key(b)
    assert claim_programs.traced_values(b) == {"delta": 0.01, "order": 16.0}
    # D6 and D7 have the same notions but not the same bound: two programs
    assert claim_programs.program_key(a) != claim_programs.program_key(
        registry.get("D7.a2.d1e-5"))
    # a claim whose k sets shapes (C1) keeps one program per k; a relation of its own, its own
    c10, c100 = registry.get("C1.k10.d1e-5"), registry.get("C1.k100.d1e-5")
    assert claim_programs.program_key(c10) != claim_programs.program_key(c100)
    assert claim_programs.program_key(registry.get("R1")) == ("relation", registry.get("R1"))
    # the bound bound at b's values is b's bound, to the last bit in float64
    with jax.enable_x64(True):
        x = jnp.asarray([0.0, 0.5, 3.0, 40.0], jnp.float64)
        bound_at = claim_programs.bind(a, claim_programs.traced_values(b, np.float64)).bound
        np.testing.assert_allclose(np.asarray(bound_at(x)), np.asarray(b.bound(x)), rtol=1e-15)


def test_a_relation_with_another_bound_in_its_place_keeps_its_own_program():
    """A test's (or a user's) relation made from an instance with its bound replaced must
    never run the claim's program: that would check the claim, not the bound given."""
    a = registry.get("D6.a2.d1e-5")
    false = dataclasses.replace(a, bound=lambda x, *p: 0.5 * x)
    assert claim_programs.program_key(false) == ("relation", false)
    assert claim_programs.traced_values(false) == {}


def test_a_sweep_run_on_a_shared_program_equals_one_run_on_its_own():
    """Sweep D6.a2.d1e-5, then D6.a16.d1e-2 on the program compiled for the first: the same
    envelope, counts and witnesses as D6.a16.d1e-2 compiled on its own (a constant of the
    first instance left in the program would move them)."""
    kept = {}
    alone, shared = _swept_alone_and_after("D6.a16.d1e-2", "D6.a2.d1e-5",
                                           lambda: kept.setdefault("n", len(programs._PROGRAMS)))
    assert len(programs._PROGRAMS) == kept["n"]  # nothing new was compiled
    assert alone.worst_slack is None or shared.worst_slack == alone.worst_slack


def _swept_alone_and_after(rid, first, between=lambda: None):
    """``rid`` swept on programs of its own, and again after ``first`` in the same process
    (``between()`` called between the two), at 3×3; the two envelopes asserted equal."""
    def config(r):
        return sweep.make_config(r, 3, 3, 6000, seed=3, chunk=2000)

    programs.clear()
    alone = sweep.run(config(rid), progress=False)
    programs.clear()
    sweep.run(config(first), progress=False)
    between()
    shared = sweep.run(config(rid), progress=False)
    a, b = _envelope(alone), _envelope(shared)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    return alone, shared


def test_a_search_run_on_a_shared_program_equals_one_run_on_its_own():
    def config(rid):
        return search.make_config(rid, 2, 3, (1.0, 3.0), restarts=4, steps=100, segment=50)

    # two instances of D6 at another order and δ (its Rényi premise compiles faster than the
    # zCDP one of D8, which this test used to search: what is tested is the sharing)
    programs.clear()
    alone = search.run(config("D6.a2.d1e-2"), progress=False)
    programs.clear()
    search.run(config("D6.a4.d1e-5"), progress=False)
    kept = len(programs._PROGRAMS)
    shared = search.run(config("D6.a2.d1e-2"), progress=False)
    assert len(programs._PROGRAMS) == kept
    for row_alone, row_shared in zip(alone.rows, shared.rows):
        for field in ("premise", "conclusion", "bound", "slack"):
            np.testing.assert_array_equal(row_alone[field], row_shared[field], err_msg=field)
    assert [r["bound"] for r in shared.rows] != [
        r["bound"] for r in search.run(config("D6.a4.d1e-5"), progress=False).rows]


def test_the_float64_check_compiled_once_per_claim_gives_each_instance_its_own_bound():
    from jaxpriv.registry.checks import _compiled_checks

    mech = families.randomized_response(1.5)
    before = len(_compiled_checks)
    results = {rid: registry.get(rid).check(mech)
               for rid in ("D7.a2.d1e-5", "D7.a4.d1e-2", "D7.a16.d1e-5")}
    assert len(_compiled_checks) <= before + 1
    for rid, result in results.items():
        relation = registry.get(rid)
        with jax.enable_x64(True):
            want = float(relation.bound(jnp.float64(result.premise)))
        assert float(result.bound) == pytest.approx(want, rel=1e-15, abs=0)
    bounds = [float(r.bound) for r in results.values()]
    assert len(set(bounds)) == 3


def test_a_check_at_other_options_than_the_instance_is_not_the_shared_program():
    """registry.check with an option set otherwise than the instance's value (a direct call;
    Relation.check refuses it) evaluates the notions there with the instance's own bound."""
    relation = registry.get("D6.a2.d1e-5")
    mech = families.randomized_response(1.0)
    own = registry.check(relation, mech, order=2.0, delta=1e-5)
    other = registry.check(relation, mech, order=2.0, delta=1e-2)
    assert float(own.bound) == float(other.bound)  # the instance's bound, at its own premise
    assert float(other.conclusion) < float(own.conclusion)  # ε(δ) at the larger δ


def test_a_claims_bound_is_named_by_its_function_where_it_is_defined():
    """A NaN bound is one line naming where the bound is defined: for a claim's instance (the
    claim's bound at its values, a functools.partial) the claim's function, file and line."""
    from jaxpriv.registry import where_defined

    where = where_defined(registry.get("D6.a2.d1e-5").bound)
    assert where.split(":")[0].endswith("dp_literature.py") and where.split(":")[1].isdigit()


def test_a_composition_claim_shares_a_program_per_k_and_passes_its_delta():
    """C5/C7 share one program per k (k sets the count vectors' shapes); δ and α are passed
    in: the compiled checks of two δ's equal each instance's own eager arithmetic."""
    key = claim_programs.program_key
    assert key(registry.get("C5.k10.a2.d1e-6")) == key(registry.get("C5.k10.a16.d1e-5"))
    assert key(registry.get("C5.k10.a2.d1e-6")) != key(registry.get("C5.k100.a2.d1e-6"))
    mech = families.randomized_response(0.8)
    for rid in ("C7.k10.d1e-3", "C7.k10.d1e-6"):
        relation = registry.get(rid)
        compiled = registry.check(relation, mech, **relation.options)
        with jax.enable_x64(True):
            eager = registry.evaluate(relation, mech.astype(jnp.float64), **relation.options)
        for field in ("conclusion", "bound", "slack"):
            np.testing.assert_allclose(np.asarray(getattr(compiled, field)),
                                       np.asarray(getattr(eager, field)), rtol=1e-12)


def _claim_pairs():
    """Two registered instances of every claim of the catalog's own (the accountants' call their
    libraries) that share one program."""
    import re

    from jaxpriv.registry.store import CLAIMS, REGISTRY

    pairs = []
    for cid in sorted(c for c in CLAIMS if re.fullmatch(r"[RDC]\d+", c)):
        by_key = {}
        for rid, relation in REGISTRY.items():
            if getattr(relation, "claim", None) == cid and relation.kind == "mechanism":
                by_key.setdefault(claim_programs.program_key(relation), []).append(rid)
        shared = [rids for key, rids in by_key.items() if key[0] == "claim" and len(rids) > 1]
        if shared:
            pairs.append((shared[0][0], shared[0][-1]))
    return pairs


@pytest.mark.parametrize("a, b", _claim_pairs())
def test_a_claims_search_segment_holds_none_of_its_instances_values(a, b):
    """The search segment lowered for two instances of a claim is the same program, to the text:
    an instance's α or δ read as a constant anywhere in it (the population step once read the
    unbound relation: D6.a2's segment carried the order 2 into D6.a4's searches) would differ."""
    assert _segment_text(a, (1.0, 2.0)) == _segment_text(b, (1.0, 2.0))


def _segment_text(rid, grid):
    """The text of ``rid``'s search segment lowered at 2×2 on ``grid``, its claim's values as
    arguments (database notions at k = 2, r = 1)."""
    from jaxpriv.engines.search_loop import (default_optimizer, grid_argument, initial_state,
                                             make_segment)

    relation = registry.get(rid)
    layout = {"k": 2, "r": 1} if relation.needs_records else {}
    config = search.make_config(rid, 2, 2, grid, restarts=4, steps=20, segment=10, **layout)
    optimizer = default_optimizer(config)
    values = claim_programs.traced_values(relation, np.float32)
    lowered = make_segment(config, optimizer).lower(initial_state(config, optimizer), values,
                                                    grid_argument(config, np.float32))
    return lowered.as_text(debug_info=False)


def _objective_pairs():
    """Per pair of notions whose search segment relations of different claims (or of none)
    share, the first two such relations of the registry."""
    from jaxpriv.registry.store import REGISTRY

    by_key, pairs, notions = {}, [], set()
    for rid, relation in REGISTRY.items():
        if relation.kind == "mechanism":
            by_key.setdefault(claim_programs.objective_key(relation), []).append(rid)
    for key, rids in by_key.items():
        first = claim_programs.program_key(registry.get(rids[0]))
        other = next((r for r in rids if claim_programs.program_key(registry.get(r)) != first),
                     None)
        if other is not None and key[1][0] not in notions:
            notions.add(key[1][0])
            pairs.append((rids[0], other))
    return pairs


@pytest.mark.parametrize("a, b", _objective_pairs())
def test_relations_with_the_same_notions_share_one_search_segment_whatever_their_bound(a, b):
    """A search's segment never reads the bound (it maximizes the conclusion; the bound at a
    grid point is a constant there), so relations of different claims with the same notions,
    options and hints — D6 and D7, C1 and C2 — are one program: lowered for each, the same
    text, and one key (D6 and D7 still keep their own sweeps and checks)."""
    ra, rb = registry.get(a), registry.get(b)
    assert claim_programs.objective_key(ra) == claim_programs.objective_key(rb)
    assert claim_programs.program_key(ra) != claim_programs.program_key(rb)
    assert _segment_text(a, (0.1, 0.2)) == _segment_text(b, (0.1, 0.2))  # R11: sp ≤ 0.225


def test_a_search_on_another_claims_segment_equals_one_on_its_own():
    """D12 searched on the segment compiled for D11 (KL ⇒ TV, two bounds): nothing new is
    compiled for the segment, and every grid point's witness, conclusion, bound and slack is
    the one D12's search on a segment of its own gives; the bound is D12's. And D12 after D11
    in one process takes D11's finished search as it is (the same program, settings and
    values end the same), with the same rows, running no step."""
    def config(rid):
        return search.make_config(rid, 2, 3, (0.5, 2.0), restarts=4, steps=60, segment=30)

    def segments():
        return _kept("search segment")

    programs.clear()
    alone = search.run(config("D12"), progress=False)
    programs.clear()
    other = search.run(config("D11"), progress=False)
    assert segments() == 1
    programs._RESULTS.clear()  # run D12's steps, on D11's program
    shared = search.run(config("D12"), progress=False)
    assert segments() == 1 and shared.seconds > 0
    _same_rows(alone, shared)
    assert [r["bound"] for r in shared.rows] != [r["bound"] for r in other.rows]
    assert [r["conclusion"] for r in shared.rows] == [r["conclusion"] for r in other.rows]
    programs._RESULTS.clear()
    search.run(config("D11"), progress=False)
    taken = search.run(config("D12"), progress=False)  # D11's finished search, as it is
    assert taken.seconds == 0 and taken.steps == alone.steps
    _same_rows(alone, taken)


def _kept(name):
    """How many programs named ``name`` this process keeps."""
    return sum(key[0] == name for key in programs._PROGRAMS)


def _same_rows(a, b):
    """Two searches' rows are the same: every grid point's witness and float64 figures."""
    for row_a, row_b in zip(a.rows, b.rows, strict=True):
        for field in ("x", "premise", "conclusion", "bound", "slack", "witness"):
            np.testing.assert_array_equal(row_a.get(field), row_b.get(field), err_msg=field)


def test_searches_on_grids_of_one_length_share_programs_not_results():
    """The premise grid is an argument of a search's programs (D9's instances cut their grids
    at different levels): D11 on one grid, then on another of the same length, compiles one
    segment and one float64 program of the best candidates; the second search runs its own
    steps (a finished search on another grid is not taken) and its rows are those of a search
    on programs of its own. D12 after it (KL ⇒ TV too) compiles only its small float64 check:
    the candidates and their levels are D11's program's."""
    def config(rid, grid):
        return search.make_config(rid, 2, 3, grid, restarts=4, steps=60, segment=30)

    programs.clear()
    alone = search.run(config("D11", (0.4, 1.5)), progress=False)
    programs.clear()
    first = search.run(config("D11", (0.5, 2.0)), progress=False)
    again = search.run(config("D11", (0.4, 1.5)), progress=False)
    assert _kept("search segment") == 1 and _kept("float64 best of the search") == 1
    assert again.seconds > 0 and [r["x"] for r in again.rows] == [0.4, 1.5]
    assert [r["x"] for r in first.rows] == [0.5, 2.0]
    _same_rows(alone, again)
    d12 = search.run(config("D12", (0.4, 1.5)), progress=False)
    assert _kept("float64 best of the search") == 1 and _kept("float64 check of the best") == 2
    assert [r["conclusion"] for r in d12.rows] == [r["conclusion"] for r in again.rows]
    assert [r["bound"] for r in d12.rows] != [r["bound"] for r in again.rows]


def test_a_sweeps_float64_levels_serve_every_claim_with_its_notions():
    """D7's sweep after D6's (Rényi ⇒ ε(δ), two bounds): the float64 levels of the screened
    candidates are D6's program's, and only the small check of D7's bound is compiled; D7's
    envelope, counts, least slack and witnesses are those of D7 swept on programs of its own."""
    def after_d6():
        assert _kept("float64 levels") == 1 and _kept("float64 screen") == 1

    alone, shared = _swept_alone_and_after("D7.a2.d1e-5", "D6.a2.d1e-5", after_d6)
    assert _kept("float64 levels") == 1 and _kept("float64 screen") == 2
    assert shared.worst_slack == alone.worst_slack


def test_one_shot_float64_programs_compile_cheaply_and_agree_with_long_runs():
    """A float64 program run once on a few mechanisms (a witness, a sweep's candidates) is
    compiled at XLA's level 0, one over many at level 2 (kernels.fused.one_shot_options):
    the same levels either way, to float64 rounding."""
    from jaxpriv.kernels import fused
    from jaxpriv.registry import checks

    assert fused.one_shot_options(4, 4, work=64 * 16)["xla_backend_optimization_level"] == 0
    assert fused.one_shot_options(4, 4, work=10**6)["xla_backend_optimization_level"] == 2
    rng = np.random.default_rng(5)
    count = -(-fused.ONE_SHOT_WORK // 9)  # 3×3 mechanisms: just enough for level 2
    with jax.enable_x64(True):
        log_K = jnp.asarray(np.log(rng.dirichlet(np.ones(3), size=(count, 3))))
        flat = jnp.full((count, 3), -np.log(3.0))
        many = Mechanism(log_K, flat, flat)
        few = Mechanism(log_K[:4], flat[:4], flat[:4])
    assert dict(checks._options_for(few.log_K))["xla_backend_optimization_level"] == 0
    assert dict(checks._options_for(many.log_K))["xla_backend_optimization_level"] == 2
    for key in ("kl", "tv"):
        np.testing.assert_allclose(registry.level(key, few), registry.level(key, many)[:4],
                                   rtol=1e-14, atol=0)
    relation = registry.get("D3")
    small, large = relation.check(few), relation.check(many)
    for field in ("premise", "conclusion", "bound", "slack"):
        np.testing.assert_allclose(getattr(small, field), getattr(large, field)[:4],
                                   rtol=1e-14, atol=0, err_msg=field)
