"""The optax search on database-level relations (R7–R13) and their certified envelopes."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpriv import registry
from jaxpriv.catalog import seed_papers as relations
from jaxpriv.core import databases
from jaxpriv.engines import certify, search
from jaxpriv.core.errors import InputError
from jaxpriv.core.mechanisms import Mechanism, Records


@pytest.mark.parametrize("relation_id", ["R8", "R9", "R10", "R12", "R13"])
def test_retraction_meets_the_premise_and_is_the_identity_on_feasible_mechanisms(relation_id):
    relation = registry.get(relation_id)
    records = Records(2, 2)
    setup = search.setup_for(relation, records)
    config = search.make_config(relation_id, 4, 3, (0.3,), k=2, r=2, restarts=6)
    # compiled once each (op by op, the six restarts' float64 builds took 20 s for R8)
    build = jax.jit(lambda p: search.build(p, jnp.float64(0.3), jnp.float64(0.0), relation,
                                           setup))
    premise = jax.jit(registry.NOTIONS[relation.premise].evaluate)
    with jax.enable_x64(True):
        params = jax.tree_util.tree_map(lambda a: jnp.asarray(a[0], jnp.float64),
                                        search.initial_params(config))
        for restart in range(6):
            p = jax.tree_util.tree_map(lambda a: a[restart] * 3.0, params)
            mech = build(p)
            level = float(premise(mech))
            assert level <= 0.3 * (1 + 1e-9) + 1e-12
            # a feasible mechanism is kept as it is
            again = search.Params(mech.log_K, mech.log_prior, p.belief, p.gates)
            kept = build(again)
            np.testing.assert_allclose(np.asarray(kept.log_K), np.asarray(mech.log_K),
                                       atol=1e-9)


@pytest.mark.parametrize("relation_id,grid", [("R9", (0.5, 1.5)), ("R10", (0.1, 0.4)),
                                               ("R7", (0.7,)), ("R8", (0.2,))])
def test_search_reaches_the_certified_envelope(relation_id, grid):
    config = search.make_config(relation_id, 4, 3, grid, k=2, r=2, restarts=16, steps=500)
    result = search.run(config, progress=False)
    cert = certify.envelope(relation_id, np.asarray(grid), n=4, r=2)
    for row, sup in zip(result.rows, cert.conclusion):
        assert row["premise"] <= row["x"] * (1 + 1e-9)
        assert row["conclusion"] <= sup * (1 + 1e-9)  # never above the certified supremum
        assert row["gap"] < 1e-3, row
    assert not result.violations


def test_certified_database_envelopes_bound_random_mechanisms():
    """docs/certified.md: SP ≤ tanh(DP/2) (r ≥ 2), tanh(DP/4) (r = 1); DP ≤ 4·atanh(SP);
    BSP ≤ tanh(BDP/2); BDP ≤ 4·atanh(BSP) with full support; BDP ≤ MP."""
    rng = np.random.default_rng(5)
    for k, r in ((2, 1), (3, 1), (2, 2), (2, 3)):
        n = k**r
        K = rng.dirichlet(np.full(3, 0.4), size=(400, n))
        prior = rng.dirichlet(np.full(n, 0.5), size=400)
        with jax.enable_x64(True):
            mech = Mechanism.from_K(K, prior, records=Records(k, r), dtype=np.float64)
            # one compiled program per layout (op by op, each layout compiled hundreds)
            dp, sp, bdp, bsp, mp = (np.asarray(v) for v in jax.jit(lambda m: tuple(f(m) for f in (
                databases.dp, databases.sp, databases.bdp, databases.bsp, databases.mp)))(mech))
            tight = 1 + 1e-9
            assert (sp <= np.asarray(certify.envelope("R9", dp, n=n, r=r).conclusion) * tight).all()
            assert (bsp <= np.asarray(certify.envelope("R7", bdp, n=n, r=r).conclusion) * tight
                    ).all()
            assert (dp <= np.asarray(certify.envelope("R10", sp, n=n, r=r).conclusion) * tight
                    ).all()
            assert (bdp <= np.asarray(certify.envelope("R8", bsp, n=n, r=r).conclusion) * tight
                    ).all()
            assert (bdp <= mp * tight).all()


def test_r9_envelope_is_attained_on_two_records():
    """K[x, 0] ∝ e^{ε·[exactly one record differs from ⊥]}: DP = ε-ish, and the ratio
    K[x]/K[x_{−i}] reaches e^{+ε} at x = (1, 0) and e^{−ε} at x = (1, 1): Λ = 2ε."""
    eps = 0.8
    a = 0.2
    w = np.array([1.0, math.exp(eps), math.exp(eps), 1.0]) * a  # 00, 01, 10, 11
    K = np.stack([w, 1 - w], axis=1)
    with jax.enable_x64(True):
        mech = Mechanism.from_K(K, records=Records(2, 2), dtype=np.float64)
        dp, sp = float(databases.dp(mech)), float(databases.sp(mech))
    assert sp >= math.tanh(eps / 2) * (1 - 1e-12)
    assert sp == pytest.approx(float(certify.envelope("R9", dp, n=4, r=2).conclusion), rel=1e-9)


def test_database_search_needs_a_layout_and_a_probability_grid():
    with pytest.raises(InputError, match="--k"):
        search.make_config("R9", 4, 3, (0.5,))
    with pytest.raises(InputError, match="bound is infinite at sp = 0.6"):
        search.make_config("R10", 4, 3, (0.2, 0.6), k=2, r=2)
    assert certify.envelope("R9", 1.0, n=4) is None  # no layout, no certificate
