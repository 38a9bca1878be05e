"""The accountants' conversions as relations (jaxpriv.catalog.accountants): registered when the
library is installed, their bound is the library's own function (through pure_callback, under
jit and vmap), the known envelopes give exact verdicts, and the findings re-check. Each test
skips cleanly without its library (``pip install ".[accountants]"``)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpriv import InputError, audit, registry, report
from jaxpriv.catalog import accountant_conversions, accountant_libraries
from jaxpriv.core import families
from jaxpriv.engines import certify


def _needs(library):
    return pytest.mark.skipif(not accountant_libraries.AVAILABLE[library],
                              reason=f"{library} not installed (pip install '.[accountants]')")


def test_registered_exactly_for_the_installed_libraries():
    for conversion in accountant_conversions.CONVERSIONS:
        assert (conversion.id in registry.REGISTRY) == conversion.available, conversion.id


def test_a_missing_library_names_the_extra(monkeypatch):
    """Selecting an absent library's relations is one clear error naming the extra."""
    from jaxpriv.registry import store  # select() reads the store's table

    from jaxpriv.catalog.accountants import EXTRA

    monkeypatch.setattr(store, "REGISTRY", {k: v for k, v in store.REGISTRY.items()
                                            if not k.startswith("opendp.")})
    # as the catalog registers it where opendp does not import (none where it does)
    monkeypatch.setitem(store.OPTIONAL, "opendp.",
                        f"the opendp conversions need the optional extra: {EXTRA}")
    for pattern in ("opendp.*", "opendp.make_pureDP_to_zCDP"):
        with pytest.raises(InputError, match=r"jaxpriv\[accountants\]"):
            registry.select(pattern)


@_needs("dp_accounting")
def test_library_bound_is_the_library_under_jit_and_vmap():
    """The relation's bound equals the adapter's value in float64 and float32, jitted and
    vmapped; an infinite premise carries no claim (+∞)."""
    rid = "dp_accounting.compute_epsilon.a2.d1e-5"
    relation = registry.get(rid)
    conversion = accountant_conversions.CONVERSIONS_BY_ID[rid]
    x = np.array([0.0, 0.01, 0.7, 3.0, np.inf])
    want = np.array([conversion(v) if np.isfinite(v) else np.inf for v in x])
    with jax.enable_x64(True):
        got = np.asarray(jax.jit(lambda v: relation.bound(v, 0.0))(jnp.asarray(x)))
    np.testing.assert_allclose(got, want, rtol=1e-15)
    got32 = jax.jit(jax.vmap(lambda v: relation.bound(v, 0.0)))(jnp.asarray(x, jnp.float32))
    assert got32.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(got32), want, rtol=1e-6)


def _installed_claims():
    return [claim for claim in registry.CLAIMS.values()
            if claim.id.split(".")[0] in accountant_libraries.AVAILABLE]


def test_a_function_with_parameters_is_one_claim_whose_instances_share_programs():
    """Every installed function with parameters (Rényi order, δ, ε) is one claim: its
    instances key one compiled program per engine and pass their values in; bound inside a
    program at the traced values, each instance's bound is the library's at its own values
    (float64, exactly), for every registered instance."""
    from jaxpriv.registry import programs

    claims = _installed_claims()
    if not claims:
        pytest.skip("no accountant installed (pip install '.[accountants]')")
    x = np.array([0.0, 0.05, 0.9, 4.0, np.inf])
    checked = 0
    for claim in claims:
        ids = [claim.instance_id(values) for values in claim.grid]
        keys = {programs.program_key(registry.get(rid)) for rid in ids}
        assert len(keys) == 1, claim.id
        for rid in ids:
            relation = registry.get(rid)
            conversion = accountant_conversions.CONVERSIONS_BY_ID[rid]
            values = programs.traced_values(relation, np.float64)
            assert values == {k: np.float64(v) for k, v in sorted(conversion.fixed.items())}
            want = np.full(x.shape, np.inf)  # a library's NaN (autodp at ε = 0): no claim
            want[np.isfinite(x)] = conversion.vectorized(nan_ok=True)(x[np.isfinite(x)])
            want = np.where(np.isnan(want), np.inf, want)
            with jax.enable_x64(True):
                got = jax.jit(lambda v, at: programs.bind(relation, at).bound(v))(
                    jnp.asarray(x), values)
            np.testing.assert_array_equal(np.asarray(got), want, err_msg=rid)
            checked += 1
    assert checked == sum(len(claim.grid) for claim in claims)


@_needs("dp_accounting")
def test_a_claims_bound_takes_its_parameters_batched_with_the_levels():
    """Parameters that vary along a vmapped axis (several settings in one call) reach the
    library setting by setting, in float64 exactly and in float32 to its rounding; an infinite
    level is +∞ whatever the setting."""
    claim = registry.CLAIMS["dp_accounting.compute_epsilon"]
    function = accountant_conversions.CONVERSIONS_BY_ID[
        "dp_accounting.compute_epsilon.a2.d1e-5"].function
    x = np.array([0.3, 0.3, 2.0, np.inf, 1.0])
    order = np.array([2.0, 4.0, 2.0, 2.0, 16.0])
    delta = np.array([1e-5, 1e-5, 1e-2, 1e-5, 1e-7])
    want = np.array([function(a, order=o, delta=d) if np.isfinite(a) else np.inf
                     for a, o, d in zip(x, order, delta)])
    with jax.enable_x64(True):
        got = jax.jit(jax.vmap(lambda a, o, d: claim.bound(a, order=o, delta=d)))(
            jnp.asarray(x), jnp.asarray(order), jnp.asarray(delta))
    np.testing.assert_array_equal(np.asarray(got), want)
    got32 = jax.vmap(lambda a, o, d: claim.bound(a, order=o, delta=d))(
        *(jnp.asarray(v, jnp.float32) for v in (x, order, delta)))
    assert got32.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(got32), want, rtol=1e-5)


@_needs("prv_accountant")
def test_a_claims_id_selects_its_instances_only():
    """``prv_accountant.rdp`` names a claim: its four orders, not the
    ``prv_accountant.RDP.compute_epsilon.*`` ids it prefixes (ids match in any case)."""
    chosen = registry.select("prv_accountant.rdp")
    assert sorted(chosen) == sorted(f"prv_accountant.rdp.a{a}" for a in ("1.5", "2", "4", "16"))


def test_a_float32_program_hands_the_library_the_setting_itself():
    """A sweep's float32 screen rounds the claim's values (δ = 1e-5 to 9.99999975e-6): the
    callback's host reads each back as the setting the claim was built at, so the library sees
    1e-5 itself; a value no setting rounds to (or several do) is passed as it came."""
    from jaxpriv.catalog import accountants

    seen = []
    host = accountants._host(lambda x, *, delta: seen.append(delta) or x,
                             {"delta": {1e-5, 1e-2}})
    rounded = np.float64(np.float32(1e-5))
    assert rounded != 1e-5
    out = host(("delta",), True, np.array([0.5, 0.7, np.inf]), np.full(3, rounded))
    assert seen == [1e-5, 1e-5] and out.tolist() == [0.5, 0.7, np.inf]
    seen.clear()
    host(("delta",), True, np.array([0.5]), np.array([0.125]))
    host(("delta",), False, np.array([0.6]), np.array([rounded]))  # a float64 program: as is
    assert seen == [0.125, rounded]


@_needs("dp_accounting")
def test_a_claim_of_a_library_at_a_setting_the_audit_does_not_take():
    """``jaxpriv check dp_accounting.compute_epsilon FILE --alpha 3 --delta 1e-7``: the
    library's function at those values, with a statement saying them; a bad value is one
    line naming the parameter; an unknown setting's id builds the instance."""
    relation = registry.resolve("dp_accounting.compute_epsilon", {"order": 3.0, "delta": 1e-7})
    assert relation.id == "dp_accounting.compute_epsilon.a3.d1e-7"
    assert "1e-07" in relation.statement and "D_3" in relation.statement
    conversion = accountant_conversions.CONVERSIONS_BY_ID["dp_accounting.compute_epsilon.a2.d1e-5"]
    with jax.enable_x64(True):
        got = float(relation.bound(jnp.float64(1.25)))
    assert got == conversion.function(1.25, order=3.0, delta=1e-7)
    assert registry.resolve("dp_accounting.compute_epsilon.a3.d1e-7").id == relation.id
    with pytest.raises(InputError, match="--delta"):
        registry.resolve("dp_accounting.compute_epsilon", {"order": 3.0, "delta": 2.0})


@_needs("prv_accountant")
def test_prv_accountant_pure_dp_rdp_is_below_randomized_response():
    """Finding: ``PureDPMechanism(ε).rdp(α) = (α−1)ε/α`` is below the Rényi divergence of RR_ε,
    a mechanism that is ε-DP: at ε = 1, α = 2 it claims 0.5 where D_2 = 0.7353."""
    relation = registry.get("prv_accountant.rdp.a2")
    result = relation.check(families.randomized_response(1.0))
    assert bool(result.violated)
    np.testing.assert_allclose(result.bound, 0.5, rtol=1e-12)
    np.testing.assert_allclose(result.conclusion, np.log(np.cosh(1.5) / np.cosh(0.5)),
                               rtol=1e-12)
    cert = certify.envelope(relation, np.array([0.1, 1.0, 3.0]), 0.0, n=2)
    assert cert.exact.all() and (cert.min_slack[1:] < 1).all() and cert.min_slack[0] > 1


@_needs("autodp")
def test_autodp_pure_dp_rdp_is_exact_except_near_zero(x64):
    """``autodp.puredp_to_rdp`` is the RR value (least slack 1) for moderate ε, but its
    cancellation (``log`` of a difference of ``sinh``) makes it negative for small ε: at
    ε ≈ 1e-9 it claims D_2 ≤ −5e-8 at some levels, far beyond the 1e-12 absolute tolerance."""
    relation = registry.get("autodp.puredp_to_rdp.a2")
    cert = certify.envelope(relation, np.array([0.01, 1.0, 3.0]), 0.0, n=2)
    np.testing.assert_allclose(cert.min_slack, 1.0, rtol=1e-6)
    result = relation.check(families.randomized_response(np.logspace(-10, -6, 200)))
    bad = result.violated
    assert bad.sum() >= 3  # the error is erratic in ε: some levels fail, not all
    assert (result.bound[bad] < 0).all() and result.bound.min() < -1e-9


SMALL = dataclasses.replace(audit.BUDGETS["quick"], name="small-test", sweep_count=2048,
                            restarts=4, steps=100)


@_needs("opendp")
def test_small_audit_of_a_library(tmp_path):
    """OpenDP's ε-DP ⇒ ρ = ε²/2 holds: certified, least slack → 1 as ε → 0 (D3's envelope)."""
    summary = report.run_audit(SMALL, ["opendp.make_pureDP_to_zCDP"], tmp_path, progress=False)
    (verdict,) = summary["relations"]
    assert verdict["kind"] == "certified" and verdict["violation_count"] == 0
    assert verdict["verdict"] == "tight"


def test_an_unknown_id_of_a_library_says_install_only_where_it_is_missing():
    """`check opendp.make_zCDP_to_approxDP.e0.7 FILE` with opendp installed said "the opendp
    conversions need the optional extra: pip install ...": an unknown id of an installed
    library is an unknown id, with the closest ones."""
    from jaxpriv import InputError, registry
    from jaxpriv.catalog import accountant_conversions as conversions

    installed = {c.library for c in conversions.CONVERSIONS if c.available}
    for library in {c.library for c in conversions.CONVERSIONS}:
        with pytest.raises(InputError) as error:
            registry.get(f"{library}.no_such_conversion.e0.7")
        if library in installed:
            assert "unknown relation" in str(error.value) and "pip" not in str(error.value)
        else:
            assert "need the optional extra" in str(error.value)
