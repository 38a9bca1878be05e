"""Float64 kernels and `jaxpriv eval` against the independent mpmath oracle, to 1e-9 relative."""

import json
import math

import jax
import numpy as np
import pytest

import reference
from conftest import random_prior, random_stochastic
from jaxpriv import Mechanism, cli
from jaxpriv.core import notions
from jaxpriv.engines import io

RTOL = 1e-9


def _cases():
    rng = np.random.default_rng(20261122)
    cases = {}
    for k, eps in ((2, 0.5), (3, 1.0), (5, 2.5), (8, 0.05)):
        e = math.exp(eps)
        K = np.full((k, k), 1.0 / (e + k - 1))
        np.fill_diagonal(K, e / (e + k - 1))
        cases[f"rr{k}"] = (K, None, None)
        cases[f"rr{k}-skewed-prior"] = (K, random_prior(rng, k, 0.5), None)
    cases["3x7"] = (random_stochastic(rng, 3, 7), random_prior(rng, 3), None)
    cases["16x2"] = (random_stochastic(rng, 16, 2), random_prior(rng, 16), None)
    cases["32x32"] = (random_stochastic(rng, 32, 32, 0.5), random_prior(rng, 32), None)
    cases["zeros"] = (random_stochastic(rng, 5, 6, zero_fraction=0.4), random_prior(rng, 5), None)
    cases["zero-column"] = (np.array([[0.5, 0.0, 0.5], [0.25, 0.0, 0.75]]), [0.4, 0.6], None)
    prior = random_prior(rng, 4)
    prior[2] = 0.0
    cases["zero-prior"] = (random_stochastic(rng, 4, 5), prior / prior.sum(), None)
    cases["belief"] = (random_stochastic(rng, 4, 4), random_prior(rng, 4), random_prior(rng, 4))
    cases["near-constant"] = (np.full((4, 6), 1 / 6) + 1e-5 * (random_stochastic(rng, 4, 6) - 1 / 6),
                              random_prior(rng, 4), None)
    return cases


CASES = _cases()


def _assert_close(actual, expected, key, name):
    actual = np.atleast_1d(np.asarray(actual, dtype=np.float64))
    expected = np.atleast_1d(np.asarray(expected, dtype=np.float64))
    assert actual.shape == expected.shape, (name, key)
    assert not np.isnan(actual).any(), (name, key)
    inf = np.isinf(expected)
    np.testing.assert_array_equal(np.isinf(actual), inf, err_msg=f"{name}: {key}")
    np.testing.assert_allclose(actual[~inf], expected[~inf], rtol=RTOL, atol=1e-14,
                               err_msg=f"{name}: {key}")


@pytest.mark.parametrize("name", sorted(CASES))
def test_kernels_match_oracle(x64, name):
    K, prior, belief = CASES[name]
    expected = reference.levels(K, prior, belief)
    # compiled, as every caller runs it (op by op, one small program per operation: 5-10 s)
    got = jax.jit(notions.levels)(Mechanism.from_K(K, prior, belief))
    for key, value in expected.items():
        _assert_close(got[key], value, key, name)


# two cases: the command's path is the same for every shape (each compiles ~25 programs), and
# every case's levels are checked against the oracle above
@pytest.mark.parametrize("name", ["zeros", "zero-prior"])
def test_cli_eval_json_matches_oracle(tmp_path, capsys, name):
    K, prior, belief = CASES[name]
    path = tmp_path / "mech.json"
    data = {"K": np.asarray(K).tolist()}
    if prior is not None:
        data["prior"] = np.asarray(prior).tolist()
    path.write_text(json.dumps(data))
    assert cli.main(["eval", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key, value in reference.levels(K, prior, belief).items():
        _assert_close(out[key], value, key, name)


def test_divergences_match_oracle(x64):
    from jaxpriv.core import divergences
    rng = np.random.default_rng(3)
    for _ in range(20):
        P, Q = rng.dirichlet(np.ones(6)), rng.dirichlet(np.ones(6))
        Q[rng.integers(6)] = 0.0
        Q /= Q.sum()
        mp = [reference.mp.mpf(x) for x in P], [reference.mp.mpf(x) for x in Q]
        _assert_close(divergences.js(P, Q), float(reference.js(*mp)), "js", "pair")
        _assert_close(divergences.kl(P, Q), float(reference.kl(*mp)), "kl", "pair")
        _assert_close(divergences.kl(Q, P), float(reference.kl(mp[1], mp[0])), "kl", "pair")
        _assert_close(divergences.tv(P, Q), float(reference.tv(*mp)), "tv", "pair")


def test_saved_then_loaded_mechanism_keeps_levels(tmp_path, x64):
    K, prior, belief = CASES["belief"]
    mech = Mechanism.from_K(K, prior, belief)
    io.save_mechanism(tmp_path / "m.json", mech)
    loaded, _ = io.load_mechanism(tmp_path / "m.json")
    for key, value in notions.levels(mech).items():
        np.testing.assert_allclose(np.asarray(notions.levels(loaded)[key]), np.asarray(value),
                                   rtol=1e-14)


def test_second_order_levels_of_a_nearly_constant_mechanism(x64):
    # ABP and MI of K = uniform + 1e-5·noise are O(1e-11): second order in the deviation, so a
    # 1e-16 change of the input (e.g. renormalizing rows that sum to 1 ± 1e-16) moves them by
    # ~1e-5 relative. Compared with the oracle on the mechanism jaxpriv actually holds (exp of
    # the stored log K, rows renormalized at 50 digits), they agree to 1e-8 with no atol.
    K, prior, _ = CASES["near-constant"]
    mech = Mechanism.from_K(K, prior)
    mp = reference.mp
    Km = [[mp.e ** mp.mpf(float(x)) for x in row] for row in np.asarray(mech.log_K)]
    Km = [[x / mp.fsum(row) for x in row] for row in Km]
    pm = [mp.e ** mp.mpf(float(x)) for x in np.asarray(mech.log_prior)]
    pm = [x / mp.fsum(pm) for x in pm]
    got = notions.levels(mech)
    want_record = [float(v) for v in reference.abp_record(Km, pm, pm)]
    assert max(want_record) < 1e-9
    np.testing.assert_allclose(np.asarray(got["abp_record"]), want_record, rtol=1e-8, atol=0)
    np.testing.assert_allclose(float(got["mi"]), float(reference.mutual_information(Km, pm)),
                               rtol=1e-8, atol=0)
    np.testing.assert_allclose(np.asarray(got["abp_output_vector"]),
                               [float(v) for v in reference.abp_output(Km, pm, pm)],
                               rtol=1e-8, atol=0)
