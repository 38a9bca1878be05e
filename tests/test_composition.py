"""Composition (SPEC §6): ``delta_composed`` and ``eps_composed`` against the 50-digit oracle
written from the definition (every one of the ``m^k`` output sequences, tests/reference.py), SPEC
§6's closed form for randomized response (Kairouz, Oh, Viswanath 2015, Thm 3.3) at k up to 100,
the single-shot notions at k = 1, the ``+∞`` atom, neighbour relations and bad input."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest

import reference
from jaxpriv import InputError, Mechanism, level
from jaxpriv.core import composition, families

RTOL = 1e-9


def _cases():
    rng = np.random.default_rng(34)
    zeros = np.array([[0.5, 0.3, 0.2, 0.0], [0.2, 0.0, 0.3, 0.5], [0.25, 0.25, 0.25, 0.25]])
    return {
        "random-2x3": rng.dirichlet(np.full(3, 0.7), size=2),
        "random-3x3": rng.dirichlet(np.full(3, 0.7), size=3),
        "random-2x4": rng.dirichlet(np.full(4, 1.5), size=2),
        "zeros-3x4": zeros,  # +∞ atoms both ways and an output one row never gives
        "near-constant": np.array([[0.5 + 1e-7, 0.5 - 1e-7], [0.5, 0.5]]),
    }


CASES = _cases()


def mech64(K):
    """The mechanism of ``K`` in float64 (built outside x64 it would be rounded to float32)."""
    with jax.enable_x64(True):
        return Mechanism.from_K(np.asarray(K, np.float64), dtype=np.float64)
DEPTH = {"random-2x3": 6, "random-3x3": 4, "random-2x4": 5, "zeros-3x4": 4, "near-constant": 8}


def _oracle(fn, K, *args):
    return float(reference.pair_level(lambda P, Q: fn(P, Q, *args), K))


def _close(got, want, rtol=RTOL, atol=0.0):
    if math.isinf(want):
        assert got == want
    else:
        assert got == pytest.approx(want, rel=rtol, abs=atol)


@pytest.mark.parametrize("name", sorted(CASES))
def test_delta_composed_matches_the_oracle_over_every_sequence(name):
    K, k = CASES[name], DEPTH[name]
    mech = mech64(K)
    for eps in (0.0, 0.3, 1.5):
        want = _oracle(reference.composed_delta, K, k, eps)
        got = float(level("delta_composed", mech, k=k, epsilon=eps))
        _close(got, want, atol=1e-15)


@pytest.mark.parametrize("name", sorted(CASES))
def test_eps_composed_matches_the_oracle_over_every_sequence(name):
    K, k = CASES[name], DEPTH[name]
    mech = mech64(K)
    for delta in (1e-2, 1e-5):
        want = _oracle(reference.composed_eps, K, k, delta)
        got = float(level("eps_composed", mech, k=k, delta=delta))
        _close(got, want, atol=1e-12)  # ε = 0 exactly where δ_k(0) ≤ δ


@pytest.mark.parametrize("k", [1, 10, 100])
def test_randomized_response_matches_the_closed_form(k):
    """k uses of RR_ε: the notion, SPEC §6's closed form in jaxpriv and in mpmath agree."""
    eps = np.array([0.1, 0.5, 1.0, 2.0])
    with jax.enable_x64(True):
        mech = families.randomized_response(eps)
    for eps_prime in (0.0, 3.0):
        want = np.array([float(reference.rr_composed_delta(e, k, eps_prime)) for e in eps])
        got = level("delta_composed", mech, k=k, epsilon=eps_prime)
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=1e-300)
        with jax.enable_x64(True):
            closed = np.asarray(composition.rr_delta_composed(eps, k, eps_prime))
        np.testing.assert_allclose(closed, want, rtol=RTOL, atol=1e-300)
    for delta in (1e-5, 1e-10):
        want = np.array([float(reference.rr_composed_eps(e, k, delta)) for e in eps])
        got = level("eps_composed", mech, k=k, delta=delta)
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=1e-12)
        assert (got <= k * eps * (1 + 1e-12)).all()  # basic composition (Dwork et al. 2006)


def test_k_equal_one_is_the_single_shot_profile():
    rng = np.random.default_rng(1)
    mech = mech64(rng.dirichlet(np.full(5, 0.5), size=(16, 4)))
    for eps in (0.0, 0.5, 2.0):
        np.testing.assert_allclose(level("delta_composed", mech, k=1, epsilon=eps),
                                   level("delta", mech, epsilon=eps), rtol=1e-12, atol=1e-15)
    for delta in (1e-3, 1e-6):
        np.testing.assert_allclose(level("eps_composed", mech, k=1, delta=delta),
                                   level("eps_at_delta", mech, delta=delta), rtol=1e-10,
                                   atol=1e-12)


def test_the_infinite_atom_counts_at_every_epsilon():
    """An output only row 0 gives, of mass a: ``δ_k(ε) ≥ 1 − (1 − a)^k`` at every ε, and
    ``ε_k(δ) = ∞`` exactly when that mass exceeds δ."""
    a = 1e-3
    K = np.array([[a, 0.5 - a, 0.5], [0.0, 0.5, 0.5]])
    mech = mech64(K)
    for k in (1, 50):
        floor = -math.expm1(k * math.log1p(-a))
        assert float(level("delta_composed", mech, k=k, epsilon=50.0)) == pytest.approx(
            floor, rel=1e-12)
        assert float(level("eps_composed", mech, k=k, delta=floor * 0.999)) == math.inf
        assert math.isfinite(float(level("eps_composed", mech, k=k, delta=floor * 1.001)))


def test_the_levels_never_rise_when_the_mechanism_is_used_fewer_times():
    rng = np.random.default_rng(2)
    mech = mech64(rng.dirichlet(np.full(3, 0.8), size=(32, 3)))
    eps = [level("eps_composed", mech, k=k, delta=1e-6) for k in (1, 3, 20)]
    for fewer, more in zip(eps, eps[1:]):
        assert (fewer <= more * (1 + 1e-12)).all()
    delta = [level("delta_composed", mech, k=k, epsilon=1.0) for k in (1, 3, 20)]
    for fewer, more in zip(delta, delta[1:]):
        assert (fewer <= more * (1 + 1e-12) + 1e-15).all()


def test_eps_composed_is_where_the_profile_crosses_delta():
    """δ_k at ε_k(δ) is at most δ, and just below it exceeds δ (the least such ε): the pair's
    profile with ε traced (one program, not one per value)."""
    from jaxpriv.engines import compose

    rng = np.random.default_rng(3)
    mech = mech64(rng.dirichlet(np.full(4, 0.7), size=(6, 3)))
    eps = level("eps_composed", mech, k=30, delta=1e-6)
    for i, e in enumerate(eps):
        pairs = compose.pair_values([mech[i]], [30], delta=1e-6)
        d, f = np.unravel_index(np.nanargmax(pairs), pairs.shape)
        at, below = compose.profile_curve([mech[i]], [30], (d, f), [e, e * (1 - 1e-9)])
        assert pairs[d, f] == pytest.approx(e, rel=1e-12)
        assert at <= 1e-6 * (1 + 1e-9) and below > 1e-6 * (1 - 1e-9)


def test_a_neighbour_relation_restricts_the_pairs():
    K = np.array([[0.9, 0.1], [0.6, 0.4], [0.1, 0.9]])
    mech = mech64(K)
    chain = np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], bool)
    want = max(_oracle(reference.composed_delta, K[[0, 1]], 4, 0.2),
               _oracle(reference.composed_delta, K[[1, 2]], 4, 0.2))
    got = float(level("delta_composed", mech, k=4, epsilon=0.2, neighbours=chain))
    assert got == pytest.approx(want, rel=RTOL)
    assert got < float(level("delta_composed", mech, k=4, epsilon=0.2))  # 0 vs 2 is further


def test_count_vectors():
    for k, m in ((1, 1), (3, 3), (7, 2), (5, 4)):
        counts = composition.count_vectors(k, m)
        assert counts.shape == (math.comb(k + m - 1, m - 1), m)
        assert (counts.sum(axis=1) == k).all() and (counts >= 0).all()
        assert len({tuple(row) for row in counts}) == len(counts)


@pytest.mark.parametrize("key, params, message", [
    ("delta_composed", {"k": 0}, "k must be an integer ≥ 1"),
    ("delta_composed", {"k": 2.5}, "k must be an integer ≥ 1"),
    ("eps_composed", {"k": True}, "'k' must be a number"),
    ("delta_composed", {"epsilon": -0.1}, "'epsilon' must be ≥ 0"),
    ("delta_composed", {"epsilon": float("nan")}, "must be a number"),
    ("eps_composed", {"delta": 0.0}, "'delta' must be in (0, 1)"),
    ("eps_composed", {"delta": 1.0}, "'delta' must be in (0, 1)"),
    ("eps_composed", {"k": 10_000}, "count vectors"),
])
def test_bad_parameters_are_one_clear_error(key, params, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        level(key, families.k_randomized_response(4, 1.0), **params)


# -- heterogeneous composition and `jaxpriv compose` ----------------------------------------------


def _mixed_oracle(rows, uses, eps):
    """δ(ε) of ``(P_i, Q_i)`` used ``uses[i]`` times each, from the joint sequences themselves."""
    P, Q = [reference.mp.mpf(1)], [reference.mp.mpf(1)]
    for (p, q), k in zip(rows, uses):
        p, q = reference.product(p, k), reference.product(q, k)
        P = [a * b for a in P for b in p]
        Q = [a * b for a in Q for b in q]
    return float(reference.hockey_stick(P, Q, reference.mp.mpf(eps)))


def test_heterogeneous_composition_matches_the_joint_sequences():
    from jaxpriv.engines import compose

    rng = np.random.default_rng(5)
    A = rng.dirichlet(np.full(3, 0.8), size=3)
    B = np.array([[0.7, 0.3], [0.2, 0.8], [0.0, 1.0]])  # a +∞ atom for the pairs of row 2
    mechs = [mech64(A), mech64(B)]
    values = compose.pair_values(mechs, [3, 2], epsilon=0.4)
    for d in range(3):
        for e in range(3):
            if d == e:
                assert np.isnan(values[d, e])
                continue
            want = _mixed_oracle([(A[d], A[e]), (B[d], B[e])], [3, 2], 0.4)
            assert values[d, e] == pytest.approx(want, rel=RTOL, abs=1e-15), (d, e)
    result = compose.compose(mechs, [3, 2], epsilon=0.4)
    assert result.value == np.nanmax(values) and values[result.pair] == result.value
    assert result.method == "exact" and result.bracket == (result.value, result.value)
    # one mechanism used twice as two files is the same mechanism with k = 2
    same = compose.compose([mechs[0], mechs[0]], [1, 1], delta=1e-3).value
    assert same == pytest.approx(float(level("eps_composed", mechs[0], k=2, delta=1e-3)),
                                 rel=1e-12)


def test_compose_command(tmp_path, capsys):
    import json

    from jaxpriv import cli

    path = tmp_path / "rr.json"
    path.write_text(json.dumps({"K": [[0.75, 0.25], [0.25, 0.75]]}))  # RR with ε = log 3
    assert cli.main(["compose", str(path), "--k", "20", "--delta", "1e-6", "--json",
                     "--out", str(tmp_path / "out")]) == 0
    data = json.loads(capsys.readouterr().out)
    want = float(reference.rr_composed_eps(math.log(3), 20, 1e-6))
    assert data["eps"] == pytest.approx(want, rel=RTOL)
    assert data["bracket"] == [data["eps"], data["eps"]] and data["method"] == "exact"
    assert data["pair"] in ([0, 1], [1, 0]) and data["uses"] == [20]
    assert data["accountants"] == []
    assert json.loads((tmp_path / "out" / "summary.json").read_text()) == data
    assert (tmp_path / "out" / "profile.png").stat().st_size > 10_000
    assert cli.main(["compose", str(path), str(path), "--k", "10", "--epsilon", "1.0"]) == 0
    text = capsys.readouterr().out
    assert "δ(ε = 1)" in text and "exact" in text
    value = float(text.split("δ(ε = 1)")[1].split()[0])
    assert value == pytest.approx(float(reference.rr_composed_delta(math.log(3), 20, 1.0)),
                                  rel=RTOL)


def test_compose_of_a_mechanism_over_databases_takes_neighbouring_databases(tmp_path, capsys):
    """With a records layout the composition is over neighbouring databases (DP), as ``eval``'s
    DP level: every pair of secrets was taken, 11 vs 00 too, without a word (1.609, the LDP
    level, where DP is 0.916)."""
    import json

    from jaxpriv import cli

    K = [[0.7, 0.2, 0.1], [0.5, 0.3, 0.2], [0.5, 0.3, 0.2], [0.2, 0.3, 0.5]]
    path = tmp_path / "rec.json"
    path.write_text(json.dumps({"K": K, "records": {"k": 2, "r": 2}}))
    assert cli.main(["compose", str(path), "--k", "1", "--epsilon", "0.9", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["over"].startswith("neighbouring databases") and data["pair"] in ([1, 3], [3, 1])
    # δ(0.9) of the worst neighbouring pair, 01 vs 11 (rows 1 and 3): Σ max(0, P − e^0.9 Q)
    P, Q = np.array(K[1]), np.array(K[3])
    want = max(np.maximum(P - np.exp(0.9) * Q, 0).sum(), np.maximum(Q - np.exp(0.9) * P, 0).sum())
    assert data["delta"] == pytest.approx(want, rel=1e-12)
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"K": K}))
    assert cli.main(["compose", str(plain), "--k", "1", "--epsilon", "0.9", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["over"] == "every ordered pair of secrets" and data["pair"] in ([0, 3], [3, 0])
    assert cli.main(["compose", str(path), str(plain), "--k", "1", "1", "--delta", "1e-5"]) == 2
    err = capsys.readouterr().err
    assert "records layouts differ" in err and err.count("\n") == 1


@pytest.mark.parametrize("args, message", [
    (["--k", "0", "--delta", "1e-5"], "k must be an integer ≥ 1"),
    (["--k", "3", "--delta", "1.5"], "delta must be in (0, 1)"),
    (["--k", "3", "--epsilon", "-1"], "epsilon must be ≥ 0"),
    (["--k", "3", "4", "--delta", "1e-5"], "one number of uses per mechanism"),
    (["THREE", "--k", "3", "--delta", "1e-5"], "must share their secrets"),
])
def test_bad_compose_input_is_one_line_and_exit_2(tmp_path, capsys, args, message):
    import json

    from jaxpriv import cli

    two = tmp_path / "two.json"
    two.write_text(json.dumps({"K": [[0.75, 0.25], [0.25, 0.75]]}))
    three = tmp_path / "three.json"
    three.write_text(json.dumps({"K": [[0.5, 0.5], [0.2, 0.8], [0.9, 0.1]]}))
    files = [str(two)] + [str(three) if a == "THREE" else a for a in args if a == "THREE"]
    code = cli.main(["compose", *files, *[a for a in args if a != "THREE"]])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1


def test_compose_needs_delta_or_epsilon(tmp_path, capsys):
    from jaxpriv import cli

    with pytest.raises(SystemExit) as stop:  # argparse's usage error: one line, exit 2
        cli.main(["compose", "x.json", "--k", "3"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "one of the arguments --delta --epsilon is required" in err
    assert err.count("\n") == 1