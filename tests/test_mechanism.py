"""Mechanism construction, validation and the SPEC §4 JSON format."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpriv import InputError, Mechanism, Records
from jaxpriv.core import families, notions
from jaxpriv.engines import io


@pytest.mark.parametrize("K, message", [
    ([[0.5, 0.6], [0.5, 0.5]], "sums to 1.1"),
    ([[1.5, -0.5], [0.5, 0.5]], "negative entry"),
    ([[float("nan"), 1.0], [0.5, 0.5]], "NaN"),
    ([[float("inf"), 1.0], [0.5, 0.5]], "infinite"),
    ([0.5, 0.5], "must be a matrix"),
    ([[]], "must not be empty"),
])
def test_bad_matrices_are_rejected_with_a_named_problem(K, message):
    with pytest.raises(InputError, match=message):
        Mechanism.from_K(K)


@pytest.mark.parametrize("kwargs, message", [
    (dict(prior=[0.5, 0.5, 0.0]), "prior has 3 entries but the mechanism has 2 secrets"),
    (dict(prior=[0.7, 0.7]), "prior must sum to 1"),
    (dict(belief=[1.2, -0.2]), "belief has a negative entry"),
    (dict(values=[1.0]), "values has 1 entries but the mechanism has 2 outputs"),
    (dict(values=[1.0, float("nan")]), "values contains NaN"),
    (dict(records=Records(k=2, r=2)), "describe 4 databases but K has 2 rows"),
])
def test_bad_companions_are_rejected(kwargs, message):
    with pytest.raises(InputError, match=message):
        Mechanism.from_K([[0.5, 0.5], [0.25, 0.75]], **kwargs)


def test_rows_within_tolerance_are_renormalized(x64):
    mech = Mechanism.from_K([[0.333333, 0.333333, 0.333333], [0.5, 0.25, 0.25]])
    np.testing.assert_allclose(np.asarray(mech.K)[0], [1 / 3] * 3, rtol=1e-15)


def test_from_log_K_validation():
    with pytest.raises(InputError, match="sums to"):
        Mechanism.from_log_K(np.log([[0.5, 0.6], [0.5, 0.5]]))
    with pytest.raises(InputError, match=r"\+inf"):
        Mechanism.from_log_K([[np.inf, 0.0], [0.0, 0.0]])
    with pytest.raises(InputError, match="all -inf"):
        Mechanism.from_log_K([[-np.inf, -np.inf], [0.0, -np.inf]])


def test_default_prior_uniform_and_belief_prior(x64):
    mech = Mechanism.from_K([[0.5, 0.5], [0.25, 0.75], [1.0, 0.0]], prior=[0.2, 0.3, 0.5])
    np.testing.assert_allclose(np.asarray(mech.belief), [0.2, 0.3, 0.5], rtol=1e-15)
    uniform = Mechanism.from_K([[0.5, 0.5], [0.25, 0.75]])
    np.testing.assert_allclose(np.asarray(uniform.prior), [0.5, 0.5], rtol=1e-15)


def test_batched_mechanism_broadcasts_prior_and_indexes(x64):
    K = np.stack([np.eye(2), np.full((2, 2), 0.5), [[0.9, 0.1], [0.2, 0.8]]])
    mech = Mechanism.from_K(K, prior=[0.3, 0.7])
    assert mech.batch_shape == (3,) and mech.log_prior.shape == (3, 2)
    assert mech[1].batch_shape == ()
    ldp = np.asarray(notions.ldp(mech))
    assert np.isinf(ldp[0]) and ldp[1] == 0.0
    with pytest.raises(IndexError):
        mech[1][0]


def test_mechanism_is_a_pytree_that_survives_jit():
    mech = families.randomized_response(jnp.array([0.5, 1.5]))
    leaves = jax.tree_util.tree_leaves(mech)
    assert len(leaves) == 3  # log_K, log_prior, log_belief (values None, records static)
    np.testing.assert_allclose(np.asarray(jax.jit(notions.ldp)(mech)), [0.5, 1.5], rtol=1e-6)


def test_json_round_trip_with_all_fields(tmp_path, x64):
    mech = Mechanism.from_K(np.full((4, 3), 1 / 3), prior=[0.1, 0.2, 0.3, 0.4],
                            belief=[0.25] * 4, values=[-1.0, 0.0, 2.5], records=Records(2, 2, 1))
    path = io.save_mechanism(tmp_path / "sub" / "w.json", mech, relation="R6", mu=0.0, d_true=2)
    loaded, extras = io.load_mechanism(path)
    assert extras == {"relation": "R6", "mu": 0.0, "d_true": 2}
    assert loaded.records == Records(2, 2, 1)
    for a, b in zip(jax.tree_util.tree_leaves(mech), jax.tree_util.tree_leaves(loaded)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-15)
    assert not list((tmp_path / "sub").glob(".*tmp"))  # atomic write leaves no temp file


def test_json_only_K_required(tmp_path, x64):
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"K": [[0.5, 0.5], [0.1, 0.9]]}))
    mech, extras = io.load_mechanism(path)
    assert extras == {} and mech.dtype == jnp.float64
    np.testing.assert_allclose(np.asarray(mech.prior), [0.5, 0.5])


@pytest.mark.parametrize("content, message", [
    ("{not json", "malformed JSON at line 1"),
    ("[1, 2]", "top level must be an object"),
    ('{"prior": [1]}', "no 'K' field"),
    ('{"K": [[0.5, 0.5], [1.0]]}', "list of rows of equal length"),
    ('{"K": [["a", "b"]]}', "'K' must be an array of numbers"),
    ('{"K": [[1.0]], "records": {"k": "two", "r": 1}}', "must be integers"),
    ('{"K": [[0.5, 0.5]], "prior": [0.5, 0.5]}', "prior has 2 entries"),
    ('{"K": [[0.5, 0.5]], "prior": [NaN]}', "prior contains NaN"),
])
def test_json_errors_name_the_problem(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(InputError, match=message):
        io.load_mechanism(path)


def test_missing_file():
    with pytest.raises(InputError, match="no such file"):
        io.load_mechanism("/nonexistent/mech.json")


def test_family_parameter_errors():
    with pytest.raises(InputError, match="eps must be finite"):
        families.randomized_response(-1.0)
    with pytest.raises(InputError, match="k must be an integer >= 2"):
        families.k_randomized_response(1, 1.0)
    with pytest.raises(InputError, match="above the limit"):
        families.unary_encoding(13, 0.6, 0.4)
    with pytest.raises(InputError, match="scale must be > 0"):
        families.discretized_laplace([0.0, 1.0], [0.0, 1.0], 0.0)
    with pytest.raises(InputError, match="unknown observation law"):
        notions.abp(families.randomized_response(1.0), "marginal")
    with pytest.raises(InputError, match="must be symmetric"):
        notions.ldp(families.identity(2), [[False, True], [False, False]])
