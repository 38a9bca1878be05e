"""Database-level notions (SPEC §2.6, paper 004) on tiny databases, by hand and by brute force."""

import functools
import itertools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpriv import registry
from jaxpriv import report
from jaxpriv.core import databases
from jaxpriv.core.errors import InputError
from jaxpriv.core.mechanisms import Mechanism, Records

RR3 = np.array([[0.75, 0.25], [0.25, 0.75]])  # randomized response with ε = log 3


def mech64(K, prior=None, k=2, r=2):
    with jax.enable_x64(True):
        return Mechanism.from_K(np.asarray(K, float), prior, records=Records(k=k, r=r),
                                dtype=np.float64)


def level(fn, *args):
    """fn(*args) in float64, compiled (op by op, each database level dispatched hundreds of
    small programs: the file took 165 s)."""
    with jax.enable_x64(True):
        return float(_jitted(fn)(*args))


def test_records_layout_neighbours_and_removal():
    records = Records(k=2, r=2)
    np.testing.assert_array_equal(databases.values(records), [[0, 0], [0, 1], [1, 0], [1, 1]])
    E = databases.neighbours(records)
    assert E[0, 1] and E[0, 2] and not E[0, 3] and not E[1, 2] and not E.diagonal().any()
    np.testing.assert_array_equal(databases.without(records, 0), [0, 1, 0, 1])  # x_{-1}
    np.testing.assert_array_equal(databases.without(records, 1), [0, 0, 2, 2])  # x_{-2}


def test_dp_of_per_record_randomized_response_is_its_epsilon():
    mech = mech64(np.kron(RR3, RR3))
    assert level(databases.dp, mech) == pytest.approx(np.log(3), rel=1e-12)


@pytest.mark.parametrize("k,r", [(2, 2), (2, 3), (3, 2)])
def test_bdp_equals_dp_when_records_are_independent(k, r):
    """004 §II: with independent records, conditioning on fewer records mixes K's rows with
    weights that do not depend on x_i, which cannot raise the ratio: BDP = DP."""
    rng = np.random.default_rng(k * 10 + r)
    n = k**r
    for _ in range(5):
        K = rng.dirichlet(np.full(3, 0.7), size=n)
        marginals = [rng.dirichlet(np.ones(k)) for _ in range(r)]
        prior = np.array([np.prod([marginals[j][v[j]] for j in range(r)])
                          for v in itertools.product(range(k), repeat=r)])
        mech = mech64(K, prior, k, r)
        assert level(databases.bdp, mech) == pytest.approx(level(databases.dp, mech), rel=1e-12)


def test_bdp_by_hand_on_correlated_records():
    K = [[0.5, 0.5], [0.9, 0.1], [0.1, 0.9], [0.5, 0.5]]  # rows 00, 01, 10, 11
    # correlated prior, all masses positive: the full known set gives log 5 (K00 vs K10);
    # the empty one P[·|x1=0] = [0.58, 0.42] against [0.42, 0.58], log(0.58/0.42) < log 5
    assert level(databases.bdp, mech64(K, [0.4, 0.1, 0.1, 0.4])) == pytest.approx(np.log(5))
    # perfectly correlated records (mass only on 00 and 11, whose rows agree): nothing to learn
    # about one record that the other does not already reveal, so BDP = 0 while DP = log 5
    mech = mech64(K, [0.5, 0.0, 0.0, 0.5])
    assert level(databases.bdp, mech) == pytest.approx(0.0, abs=1e-15)
    assert level(databases.dp, mech) == pytest.approx(np.log(5))


def test_bdp_is_infinite_when_an_output_rules_out_a_record_value():
    K = [[1.0, 0.0], [0.5, 0.5], [0.5, 0.5], [0.5, 0.5]]
    assert level(databases.bdp, mech64(K)) == np.inf


def test_sp_at_a_two_point_belief_matches_its_closed_form():
    """β = ½ on x = (1, 0) and on z = x_{−1} = (0, 0): game 1's posterior is uniform, game 2's is
    game 0's, so SP at β = max_y |K[x,y]/(K[x,y]+K[z,y]) − ½| (= ½ − 1/(e^ε+1) for RR)."""
    K = np.kron(RR3, RR3)
    mech = mech64(K)
    with jax.enable_x64(True), np.errstate(divide="ignore"):
        belief = np.log(np.array([0.5, 0.0, 0.5, 0.0]))
        got = float(databases.sp_at(mech, belief))
    x, z = K[2], K[0]
    expected = np.max(np.abs(x / (x + z) - 0.5))
    assert got == pytest.approx(expected, rel=1e-12)
    assert got == pytest.approx(0.5 - 1 / (3 + 1), rel=1e-12)


def test_sp_at_a_belief_brute_force():
    rng = np.random.default_rng(3)
    records = Records(k=2, r=3)
    K = rng.dirichlet(np.ones(4), size=8)
    beta = rng.dirichlet(np.ones(8))
    expected = 0.0
    for i in range(3):
        rows = databases.without(records, i)
        for y in range(4):
            b0 = K[:, y] * beta / np.sum(K[:, y] * beta)
            bi = K[rows, y] * beta / np.sum(K[rows, y] * beta)
            expected = max(expected, 0.5 * np.abs(b0 - bi).sum())
    mech = mech64(K, k=2, r=3)
    with jax.enable_x64(True):
        got = float(databases.sp_at(mech, np.log(beta)))
    assert got == pytest.approx(expected, rel=1e-12)


def test_mp_at_p_is_the_two_point_bayes_computation_and_its_sup_is_dp():
    rng = np.random.default_rng(5)
    records = Records(k=2, r=2)
    K = rng.dirichlet(np.ones(3), size=4)
    mech = mech64(K)
    E = databases.neighbours(records)
    for p in (0.1, 0.5, 0.9):
        expected = 0.0
        for x, z in zip(*np.nonzero(E)):
            posterior_x = p * K[x] / (p * K[x] + (1 - p) * K[z])
            expected = max(expected, np.max(np.log(posterior_x / p)),
                           np.max(np.log((1 - p) / (1 - posterior_x))))
        assert level(databases.mp_at, mech, p) == pytest.approx(expected, rel=1e-12)
        assert level(databases.mp_at, mech, p) <= level(databases.dp, mech)
    near_sup = max(level(databases.mp_at, mech, p) for p in (1e-9, 1 - 1e-9))
    assert near_sup == pytest.approx(level(databases.dp, mech), rel=1e-6)


def test_database_notions_need_a_records_layout():
    with jax.enable_x64(True):
        mech = Mechanism.from_K(np.kron(RR3, RR3))
    with pytest.raises(InputError, match="records layout"):
        databases.dp(mech)


def _random_database_mechanism(rng, k, r, m=3, correlated=True):
    n = k**r
    K = rng.dirichlet(np.full(m, 0.5), size=n)
    prior = rng.dirichlet(np.full(n, 0.7 if correlated else 50.0))
    belief = rng.dirichlet(np.full(n, 0.7))
    with jax.enable_x64(True):
        return Mechanism.from_K(K, prior, belief, records=Records(k=k, r=r), dtype=np.float64)


@pytest.mark.parametrize("k,r", [(2, 2), (2, 3), (3, 2)])
def test_bsp_is_at_least_sp_and_within_theorem_1_of_bdp(k, r):
    """004: Def. 2 with S = [r]∖{i} is Def. 1, so BSP ≥ SP at every belief; and Thm 1 (R7):
    BSP ≤ e^{2·BDP} − 1. Checked on correlated random priors and beliefs."""
    rng = np.random.default_rng(7 * k + r)
    for _ in range(20):
        mech = _random_database_mechanism(rng, k, r)
        bsp, sp, bdp = (level(f, mech) for f in (databases.bsp_at, databases.sp_at,
                                                  databases.bdp))
        assert bsp >= sp - 1e-12
        assert bsp <= np.expm1(2 * bdp) * (1 + 1e-9) + 1e-12, (bsp, bdp)


def test_bsp_by_hand_with_the_empty_known_set():
    """r = 2, k = 2, uniform prior and belief: for i = 1, S = ∅, P[y|x_1] averages K over x_2;
    game 1 uses P[y|⊥ = 0] for both values of x_1."""
    K = np.array([[0.9, 0.1], [0.7, 0.3], [0.2, 0.8], [0.4, 0.6]])
    mech = mech64(K)
    p0, p1 = K[:2].mean(0), K[2:].mean(0)  # P[y | x_1 = 0], P[y | x_1 = 1]
    expected_empty = max(0.5 * (abs(p0[y] / (p0[y] + p1[y]) - 0.5) * 2) for y in range(2))
    got = level(databases.bsp_at, mech)
    assert got >= expected_empty - 1e-12
    sp = level(databases.sp_at, mech)
    assert got == pytest.approx(max(sp, expected_empty, _bsp_empty_i2(K)), rel=1e-12)


def _bsp_empty_i2(K):
    q0, q1 = K[[0, 2]].mean(0), K[[1, 3]].mean(0)  # P[y | x_2 = 0], P[y | x_2 = 1]
    return max(abs(q0[y] / (q0[y] + q1[y]) - 0.5) for y in range(2))


# -- registry and sweeps ---------------------------------------------------------------------------


@pytest.mark.parametrize("relation_id", ["R7", "R9"])
def test_r7_and_r9_hold_on_random_database_mechanisms(relation_id, tmp_path):
    """004 Thms 1 and 2 (first part): at every belief the sweep draws, BSP (SP) stays below
    e^{2·BDP} − 1 (e^{2·DP} − 1): no verified violation."""
    from jaxpriv.engines import sweep
    config = sweep.make_config(relation_id, 4, 3, 20000, seed=1, chunk=10000, k=2, r=2)
    result = sweep.run(config, tmp_path / "run", progress=False, write=report.write_sweep)
    assert result.violation_count == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["worst_slack"] >= 1


def test_injected_false_database_bound_is_found_and_its_witness_rechecks(tmp_path, capsys):
    from jaxpriv import cli
    from jaxpriv.catalog import seed_papers as relations
    from jaxpriv.engines import sweep
    relation = registry.register(registry.Relation(
        id="TEST-R9-TENTH", statement="ε-DP ⇒ SP ≤ (e^{2ε}−1)/10 (deliberately false)",
        sources=(registry.Source("004", "Thm 2, divided by 10"),), premise="dp",
        conclusion="sp_belief", condition="—", bound=lambda x, eps: jnp.expm1(2 * x) / 10),
        replace=True)
    try:
        config = sweep.make_config(relation.id, 4, 2, 4000, seed=0, chunk=2000, k=2, r=2)
        result = sweep.run(config, tmp_path / "run", progress=False, write=report.write_sweep)
        assert result.violation_count > 0
        summary = json.loads((tmp_path / "run" / "summary.json").read_text())
        witness = tmp_path / "run" / summary["violations"][0]
        assert json.loads(witness.read_text())["records"] == {"k": 2, "r": 2, "default": 0}
        assert cli.main(["check", relation.id, str(witness)]) == 1
        assert cli.main(["check", "R9", str(witness)]) == 0  # the published bound holds on it
        capsys.readouterr()
    finally:
        registry.REGISTRY.pop(relation.id, None)


def test_database_relations_need_a_layout_and_all_skips_them_when_n_is_not_k_to_the_r(
        tmp_path, capsys):
    from jaxpriv import cli
    from jaxpriv.engines import sweep
    with pytest.raises(InputError, match="--k"):
        sweep.make_config("R9", 4, 2, 100)
    code = cli.main(["sweep", "--relation", "R9", "--n", "6", "--m", "2", "--count", "100",
                     "--out", str(tmp_path / "a"), "--quiet"])
    assert code == 2 and "not a power of k = 2" in capsys.readouterr().err


def _lemma1_g(b, eps):
    """004 eq. (26): the largest ratio P[Y|x_i]/P[Y|x̄_i] ε-MP allows at prior mass b."""
    if b <= 1 / (1 + np.exp(eps)):
        return (1 - b) / (np.exp(-eps) - b)
    return (np.exp(eps) - 1 + b) / b


def test_mp_at_p_agrees_with_li_et_al_lemma_1():
    """004 Lemma 1: ε-MP at prior mass p ⇔ every ratio A = K[x,y]/K[x',y] ≤ g_ε(p). The level
    from mp_at satisfies it, and any smaller ε does not."""
    rng = np.random.default_rng(11)
    records = Records(k=2, r=2)
    E = databases.neighbours(records)
    for _ in range(5):
        K = rng.dirichlet(np.ones(3), size=4)
        mech = mech64(K)
        for p in (0.05, 0.3, 0.5, 0.8):
            eps = level(databases.mp_at, mech, p)
            ratios = [K[x, y] / K[z, y] for x, z in zip(*np.nonzero(E)) for y in range(3)]
            assert all(a <= _lemma1_g(p, eps) * (1 + 1e-9) for a in ratios)
            assert any(a > _lemma1_g(p, eps * (1 - 1e-6)) for a in ratios)


# -- SP and BSP levels: the sup over beliefs in closed form -------------------------------------

# rows 00, 01, 10, 11 (x_1 most significant); column y0 takes e^{±log 2} steps between neighbours
HAND_K = np.array([[0.1, 0.9], [0.2, 0.8], [0.2, 0.8], [0.1, 0.9]])


def test_sp_and_bsp_by_hand():
    """DP = log 2 (column y0). For i = 1 and y0 the ratios r(x) = K[x,y0]/K[x_{-1},y0] are
    1, 1, 2 (x = 10), 1/2 (x = 11): Λ = log 4, SP = tanh(log 4 / 4) = (2 − 1)/(2 + 1) = 1/3.
    The optimal belief puts mass ∝ q/K[x_{−i},y0] on the extreme ratios with q = 1/(1+√t),
    t = 4: uniform on {10, 11}; there game 0's posterior is (2/3, 1/3), game 1's (1/3, 2/3)."""
    mech = mech64(HAND_K)
    assert level(databases.dp, mech) == pytest.approx(np.log(2), rel=1e-14)
    assert level(databases.sp, mech) == pytest.approx(1 / 3, rel=1e-14)
    with jax.enable_x64(True):
        at_best = float(databases.sp_at(mech, np.log([1e-300, 1e-300, 0.5, 0.5])))
    assert at_best == pytest.approx(1 / 3, rel=1e-12)
    # uniform prior: records independent, S = ∅ averages x_2 out and P[y0 | x_1] = 0.15 both ways
    assert level(databases.bsp, mech) == pytest.approx(1 / 3, rel=1e-14)
    assert level(databases.bdp, mech) == pytest.approx(np.log(2), rel=1e-14)
    assert level(databases.mp, mech) == pytest.approx(np.log(2), rel=1e-14)


def _extreme_pair_belief(K, records, i, y):
    """The belief attaining SP's sup at (i, y): mass ∝ q/c(x) on the largest and ∝ (1−q)/c(x)
    on the smallest ratio r = a/c, q = 1/(1 + √t), t = r_max/r_min (module docstring)."""
    a, c = K[:, y], K[databases.without(records, i), y]
    r = a / c
    hi, lo = int(np.argmax(r)), int(np.argmin(r))
    t = r[hi] / r[lo]
    q = 1 / (1 + np.sqrt(t))
    beta = np.full(len(a), 1e-300)
    beta[hi], beta[lo] = q / c[hi], (1 - q) / c[lo]
    return beta / beta.sum(), (np.sqrt(t) - 1) / (np.sqrt(t) + 1)


@pytest.mark.parametrize("k,r", [(2, 2), (2, 3), (3, 2)])
def test_sp_is_attained_by_the_two_point_belief_and_never_exceeded(k, r):
    rng = np.random.default_rng(100 + 10 * k + r)
    records = Records(k=k, r=r)
    n = k**r
    for _ in range(8):
        K = rng.dirichlet(np.full(3, 0.6), size=n)
        mech = mech64(K, k=k, r=r)
        sp = level(databases.sp, mech)
        best = max((_extreme_pair_belief(K, records, i, y) for i in range(r) for y in range(3)),
                   key=lambda pair: pair[1])
        with jax.enable_x64(True):
            attained = float(databases.sp_at(mech, np.log(best[0])))
            beliefs = rng.dirichlet(np.full(n, 0.2), size=3000)
            random = np.asarray(databases.sp_at(mech64(np.broadcast_to(K, (3000, n, 3)),
                                                       None, k, r), np.log(beliefs)))
        assert sp == pytest.approx(best[1], rel=1e-12)
        assert attained == pytest.approx(sp, rel=1e-9)
        assert random.max() <= sp * (1 + 1e-12)
        # tanh(DP/4) ≤ SP ≤ tanh(DP/2): DP ≤ Λ ≤ 2·DP
        dp = level(databases.dp, mech)
        assert np.tanh(dp / 4) * (1 - 1e-12) <= sp <= np.tanh(dp / 2) * (1 + 1e-12)


@functools.lru_cache(maxsize=None)
def _jitted(fn):
    return jax.jit(fn)  # thousands of evaluations: op-by-op dispatch took minutes


def _best_two_point(fn, mech, n, grid=801):
    """max of fn(mech, β) over two-point beliefs, dense in log-odds then golden-refined (every
    pair of secrets at once: one call per step)."""
    fn = _jitted(fn)
    pairs = np.array(list(itertools.combinations(range(n), 2)))

    def values(logits):  # logits: (pairs, points) -> fn at those two-point beliefs
        w = 1 / (1 + np.exp(-logits))
        beliefs = np.full(logits.shape + (n,), 1e-300)
        for i, (a, b) in enumerate(pairs):
            beliefs[i, :, a], beliefs[i, :, b] = w[i], 1 - w[i]
        flat = np.log(beliefs).reshape(-1, n)
        with jax.enable_x64(True):
            return np.asarray(fn(_repeat(mech, len(flat)), flat)).reshape(logits.shape)

    logits = np.linspace(-12, 12, grid)
    on_grid = values(np.broadcast_to(logits, (len(pairs), grid)).copy())
    j = np.argmax(on_grid, axis=1)
    lo, hi = logits[np.maximum(j - 1, 0)], logits[np.minimum(j + 1, grid - 1)]
    for _ in range(60):  # golden section on the bracket around each pair's grid best
        m1, m2 = hi - 0.618 * (hi - lo), lo + 0.618 * (hi - lo)
        f1, f2 = values(np.stack([m1, m2], axis=1)).T
        lo, hi = np.where(f1 > f2, lo, m1), np.where(f1 > f2, m2, hi)
    refined = values(((lo + hi) / 2)[:, None])[:, 0]
    return float(max(on_grid.max(), refined.max()))


def _repeat(mech, count):
    return jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (count,) + x.shape), mech)


@pytest.mark.parametrize("stick", [0.5, 0.97])
def test_bsp_closed_form_is_the_sup_over_beliefs(stick):
    """BSP's sup (closed form) against the best two-point belief found numerically and
    against random beliefs, on priors from independent records to sticky Markov chains (where
    BSP exceeds SP: the empty known set mixes rows with x_i-dependent weights)."""
    rng = np.random.default_rng(int(stick * 100))
    records = Records(k=2, r=3)
    transition = np.array([[stick, 1 - stick], [1 - stick, stick]])
    with jax.enable_x64(True):
        prior = np.exp(np.asarray(databases.markov_prior(records, np.array([0.5, 0.5]),
                                                         transition)))
    above_sp = 0
    for _ in range(6):
        K = rng.dirichlet(np.full(2, 0.7), size=8)
        mech = mech64(K, prior, 2, 3)
        bsp = level(databases.bsp, mech)
        found = _best_two_point(databases.bsp_at, mech, 8)
        assert found <= bsp * (1 + 1e-12)
        assert found == pytest.approx(bsp, rel=1e-7)
        bdp = level(databases.bdp, mech)
        assert np.tanh(bdp / 4) * (1 - 1e-12) <= bsp <= np.tanh(bdp / 2) * (1 + 1e-12)
        above_sp += bsp > level(databases.sp, mech) + 1e-9
    assert stick < 0.9 or above_sp > 0  # sticky chains make the partial games matter


def test_an_output_only_one_game_can_produce_reveals_the_game():
    """r = 1, k = 3, ⊥ = 0: output y is produced only by x = 2, so game 1 (which always runs
    the mechanism on ⊥) never shows it: SD = 1 at any belief on x = 2, and SP = BSP = 1. The
    skip-it convention would give SP = tanh(log 2 / 4) here while DP = ∞, and R10 would fail."""
    K = np.array([[1.0, 0.0], [1.0, 0.0], [0.5, 0.5]])
    mech = mech64(K, k=3, r=1)
    assert level(databases.dp, mech) == np.inf
    assert level(databases.sp, mech) == 1.0
    assert level(databases.bsp, mech) == 1.0
    with jax.enable_x64(True):
        assert float(databases.sp_at(mech, np.log([0.5, 0.25, 0.25]))) == 1.0
        # a belief that rules out x = 2 makes output 1 impossible in both games: skipped
        with np.errstate(divide="ignore"):
            assert float(databases.sp_at(mech, np.log([0.5, 0.5, 0.0]))) < 1.0
        # any mass on x = 2, however small, shows output 1 in game 0 only: SD = 1
        assert float(databases.sp_at(mech, np.log([0.5, 0.5, 1e-300]))) == 1.0


def test_bsp_games_defined_needs_the_reset_in_the_prior():
    # π(0,1) = 0 but π(1,1) > 0: for i = 1, S = {2}, the partial database (1, 1) has no reset
    mech = mech64(HAND_K, [0.4, 0.0, 0.3, 0.3])
    with jax.enable_x64(True):
        assert bool(databases.bsp_games_defined(mech64(HAND_K)))
        assert not bool(databases.bsp_games_defined(mech))


# -- MP over 𝔻_* and the priors -----------------------------------------------------------------


def test_mp_over_the_004_family_is_max_of_dp_and_bdp_and_its_sup_over_p():
    rng = np.random.default_rng(21)
    records = Records(k=2, r=3)
    transition = np.array([[0.9, 0.1], [0.2, 0.8]])
    with jax.enable_x64(True):
        prior = np.exp(np.asarray(databases.markov_prior(records, np.array([0.3, 0.7]),
                                                         transition)))
    for _ in range(5):
        mech = mech64(rng.dirichlet(np.full(3, 0.8), size=8), prior, 2, 3)
        mp, dp, bdp = (level(f, mech) for f in (databases.mp, databases.dp, databases.bdp))
        assert mp == pytest.approx(max(dp, bdp), rel=1e-12)
        assert mp == pytest.approx(bdp, rel=1e-12)  # full support: BDP already covers DP
        assert level(lambda m: databases.mp(m, "databases"), mech) == pytest.approx(dp, rel=1e-12)
        for p in (0.01, 0.3, 0.9):
            assert level(databases.mp_at, mech, p) <= mp * (1 + 1e-12)
            assert level(databases.mp_at, mech, p) >= level(
                lambda m, q: databases.mp_at(m, q, "databases"), mech, p) - 1e-15
        near = max(level(databases.mp_at, mech, p) for p in (1e-10, 1 - 1e-10))
        assert near == pytest.approx(mp, rel=1e-6)


def test_mp_at_p_of_a_partial_member_by_hand():
    """r = 2, K = ∅ for i = 1: 𝒟 puts p on x_1 = 1 and 1 − p on x_1 = 0, x_2 drawn from the
    prior given x_1. Perfectly correlated prior (00, 11 only): P[y|x_1=0] = K_00, P[y|x_1=1] =
    K_11; equal rows make this member harmless, and MP at p comes from whole databases."""
    K = np.array([[0.5, 0.5], [0.9, 0.1], [0.1, 0.9], [0.5, 0.5]])
    mech = mech64(K, [0.5, 0.0, 0.0, 0.5])
    p = 0.3
    whole = level(lambda m, q: databases.mp_at(m, q, "databases"), mech, p)
    assert level(databases.mp_at, mech, p) == pytest.approx(whole, rel=1e-14)
    # a prior that makes the partial member informative: mass on 01 and 10 only
    mech = mech64(K, [0.0, 0.5, 0.5, 0.0])
    A = K[2] / K[1]  # P[y | x_1 = 1] = K_10 against P[y | x_1 = 0] = K_01
    partial = max(max(np.log(a / (p * a + 1 - p)), np.log(p * a + 1 - p)) for a in
                  np.concatenate([A, 1 / A]))
    assert level(databases.mp_at, mech, p) == pytest.approx(max(whole, partial), rel=1e-12)


def test_prior_constructors():
    records = Records(k=2, r=2)
    with jax.enable_x64(True):
        product = np.exp(np.asarray(databases.product_prior(records, np.array(
            [[0.3, 0.7], [0.6, 0.4]]))))
        np.testing.assert_allclose(product, [0.18, 0.12, 0.42, 0.28], rtol=1e-14)
        markov = np.exp(np.asarray(databases.markov_prior(
            records, np.array([0.3, 0.7]), np.array([[0.9, 0.1], [0.2, 0.8]]))))
        np.testing.assert_allclose(markov, [0.27, 0.03, 0.14, 0.56], rtol=1e-14)
        mixture = np.exp(np.asarray(databases.mixture_prior(
            np.array([0.25, 0.75]), np.log(np.stack([product, markov])))))
        np.testing.assert_allclose(mixture, 0.25 * product + 0.75 * markov, rtol=1e-14)
        # batched: leading axes broadcast
        batch = databases.product_prior(records, np.full((5, 2, 2), 0.5))
        assert batch.shape == (5, 4)
    with pytest.raises(InputError, match="MP family"):
        databases.mp(mech64(HAND_K), "pairs")
