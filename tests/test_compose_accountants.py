"""The accountants' composition (``jaxpriv compose --accountants``), each call path as a user
calls it, against the exact composed ε of k uses (the 50-digit oracle of SPEC §6's closed form
for randomized response, Kairouz, Oh, Viswanath 2015 Thm 3.3): the finding (dp-accounting's
PLDAccountant ignores the count of a randomized-response event composed by count or
SelfComposedDpEvent), the sound paths, the optimistic estimate's direction, and the command's
output contract. Each library's tests skip where it is not installed (CI installs none: `pip
install '.[accountants]'` runs them)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

import reference
from jaxpriv import Mechanism
from jaxpriv.catalog import accountant_composition as library
from jaxpriv.core import families
from jaxpriv.engines import compose

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "dp_accounting_pld_rr_count.json"


def _rr(eps):
    with jax.enable_x64(True):
        return families.randomized_response(eps)


def _call(text):
    return next(c for c in library.CALLS if text in c.call)


def test_every_call_path_names_its_library_and_kind():
    assert {c.library for c in library.CALLS} == {"dp_accounting", "prv_accountant", "autodp",
                                                  "opendp"}
    assert {c.kind for c in library.CALLS} == {"ldp", "pair"}
    assert len({c.call for c in library.CALLS}) == len(library.CALLS) == 14
    assert [c.upper for c in library.CALLS].count(False) == 1  # the optimistic PLD only


@pytest.mark.parametrize("eps, k", [(0.5, 20), (1.0, 10), (0.1, 100)])
def test_dp_accounting_pld_ignores_the_count_of_a_randomized_response_event(eps, k):
    """The finding: PLDAccountant.compose(RR, k) and .compose(SelfComposedDpEvent(RR, k)) give
    one use's ε (≈ ε), far below k uses' exact ε; the same event listed k times
    (ComposedDpEvent) and the RdpAccountant's three routes are sound."""
    pytest.importorskip("dp_accounting")
    exact = float(reference.rr_composed_eps(eps, k, 1e-5))
    rows = compose.accountant_rows(_rr(eps), k, 1e-5, exact)
    by_call = {row.call: row for row in rows}
    for route in (", k).get_epsilon", "SelfComposedDpEvent("):
        row = next(r for c, r in by_call.items() if "PLDAccountant" in c and route in c)
        assert row.verdict == "UNSOUND"
        assert row.value == pytest.approx(eps, rel=2e-3)  # one use's ε
        assert row.ratio < 0.2
    listed = next(r for c, r in by_call.items() if "PLDAccountant" in c and "ComposedDpEvent([" in c)
    assert listed.verdict == "sound" and 1.0 <= listed.ratio < 1.01
    for row in (r for c, r in by_call.items() if "RdpAccountant" in c):
        assert row.verdict == "sound" and row.ratio >= 1.0


def test_the_pld_of_the_mechanisms_own_rows_brackets_the_exact_value():
    """from_two_probability_mass_functions on every ordered pair of a random 3×3 mechanism with
    zeros (+∞ losses): the pessimistic estimate is at least the exact ε, the optimistic one at
    most (up to 1e-9)."""
    pytest.importorskip("dp_accounting")
    rng = np.random.default_rng(5)
    K = rng.dirichlet(np.full(3, 0.8), size=3)
    with jax.enable_x64(True):
        mech = Mechanism.from_K(K, dtype=np.float64)
    result = compose.compose([mech], [10], delta=1e-4)
    rows = [r for r in compose.accountant_rows(mech, 10, 1e-4, result.value)
            if "from_two_probability_mass_functions" in r.call]
    assert [r.verdict for r in rows] == ["sound", "lower estimate"]
    assert rows[1].value <= result.value * (1 + 1e-9) <= rows[0].value * (1 + 2e-9)
    assert rows[0].ratio < 1.01


def test_prv_accountant_and_autodp_are_sound_on_randomized_response():
    pytest.importorskip("prv_accountant")
    pytest.importorskip("autodp")
    exact = float(reference.rr_composed_eps(0.5, 20, 1e-5))
    rows = compose.accountant_rows(_rr(0.5), 20, 1e-5, exact)
    prv = next(r for r in rows if r.library == "prv_accountant")
    lower, estimate, upper = library.prv_triple(0.5, 20, 1e-5)
    assert prv.value == upper and lower <= exact <= upper and prv.verdict == "sound"
    autodp = [r for r in rows if r.library == "autodp"]
    assert autodp[0].verdict == "sound"
    assert autodp[1].verdict == "no value" and "TypeError" in autodp[1].note  # ComposeAFA
    assert autodp[2].verdict == "sound" and autodp[2].value < 0.5 * 20 * 1.01  # its RDP route


def test_prv_accountant_composition_is_unsound_where_its_rdp_sizes_the_domain_too_small():
    """Finding (prv-accountant 0.2.0): PRVAccountant over PureDPMechanism(1.5), 100 uses,
    δ = 1e-6, returns (lower, estimate, upper) ≈ (95.99, 96.00, 96.01) where the exact composed ε
    of binary RR_1.5 — the privacy loss PureDPMechanism's cdf describes, and the worst case of
    every 1.5-DP mechanism (KOV Thm 3.3) — is 140.82 (the mpmath oracle): ×0.68, UNSOUND.
    Cause: the accountant sizes its domain by ``PureDPMechanism.rdp``, ``(α−1)ε/α``, below the
    Rényi divergence of randomized response (this module's other prv finding); with the true
    divergence in its place the same call brackets the exact value. ``jaxpriv show
    examples/prv_accountant_pure_dp_composition.json`` re-checks it (exit 1)."""
    pytest.importorskip("prv_accountant")
    from prv_accountant import PRVAccountant
    from prv_accountant.privacy_random_variables import PureDPMechanism

    eps, k, delta = 1.5, 100, 1e-6
    exact = float(reference.rr_composed_eps(eps, k, delta))
    assert abs(exact - 140.8177) < 1e-3
    lower, estimate, upper = library.prv_triple(eps, k, delta)
    assert upper < 0.7 * exact  # not an upper bound, by far
    rows = compose.accountant_rows(_rr(eps), k, delta, exact)
    prv = next(r for r in rows if r.library == "prv_accountant")
    assert prv.value == upper and prv.verdict == "UNSOUND"

    class TrueRenyi(PureDPMechanism):
        def rdp(self, alpha):  # D_α of binary RR_ε
            return math.log((math.sinh(alpha * eps) - math.sinh((alpha - 1) * eps)) /
                            math.sinh(eps)) / (alpha - 1)

    fixed = PRVAccountant(prvs=[TrueRenyi(eps)], max_self_compositions=[k],
                          eps_error=library.PRV_EPS_ERROR, delta_error=library.PRV_DELTA_ERROR)
    low, _, high = fixed.compute_epsilon(delta=delta, num_self_compositions=[k])
    assert low <= exact <= high
    witness = json.loads((EXAMPLE.parent / "prv_accountant_pure_dp_composition.json")
                         .read_text())
    assert witness["compose"] == {"k": k, "delta": delta}
    np.testing.assert_allclose(witness["K"], np.asarray(_rr(eps).K), rtol=1e-12)


@pytest.mark.parametrize("eps, k", [(0.5, 20), (1.0, 100)])
def test_opendp_composition_is_sound_basic_for_pure_dp_and_bounded_for_zcdp(eps, k):
    """OpenDP's make_composition of k randomized-response measurements: pure DP composes
    basically (kε, valid at every δ: Dwork, Roth 2014 Thm 3.16), rounded up; the zCDP route
    (ρ = kε²/2, Bun, Steinke 2016 Prop 1.4 and Lemma 2.3) converts below the classic
    ρ + 2√(ρ log(1/δ)) (Bun, Steinke 2016 Prop 1.3) and above the exact value."""
    pytest.importorskip("opendp")
    exact = float(reference.rr_composed_eps(eps, k, 1e-5))
    rows = [r for r in compose.accountant_rows(_rr(eps), k, 1e-5, exact) if r.library == "opendp"]
    pure, zcdp = rows
    assert pure.verdict == zcdp.verdict == "sound"
    assert k * eps <= pure.value <= k * eps * (1 + 1e-12)
    rho = k * eps ** 2 / 2
    assert exact < zcdp.value <= rho + 2 * math.sqrt(rho * math.log(1e5))


def test_an_unsound_call_is_judged_against_the_mechanisms_exact_value():
    """A call given only the LDP level claims a bound for every ε-LDP mechanism, so it is
    judged against this mechanism's exact value: a value below it by more than the tolerance
    is UNSOUND, at it (or above) sound."""
    fake = library.ComposeCall("math", "k·ε/2", "ldp", True, lambda e, k, d: k * e / 2)
    exact = float(reference.rr_composed_eps(0.5, 10, 1e-5))
    import unittest.mock as mock
    with mock.patch.object(library, "CALLS", (fake,)):
        (row,) = compose.accountant_rows(_rr(0.5), 10, 1e-5, exact)
    assert row.verdict == "UNSOUND" and row.value == 2.5
    assert row.ratio == pytest.approx(2.5 / exact)


def _cli(*args):
    done = subprocess.run([sys.executable, "-m", "jaxpriv.cli", "compose", *map(str, args)],
                          capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout, done.stderr


def test_compose_accountants_json_contract_and_exit_code(tmp_path):
    """The example file is RR_0.5: with dp-accounting installed the command exits 1 (UNSOUND
    rows) and its JSON has one object per installed call path."""
    pytest.importorskip("dp_accounting")
    code, out, err = _cli(EXAMPLE, "--k", 20, "--delta", 1e-5, "--accountants", "--json",
                          "--out", tmp_path)
    assert code == 1, err
    data = json.loads(out)
    assert data["eps"] == pytest.approx(float(reference.rr_composed_eps(0.5, 20, 1e-5)),
                                        rel=1e-9)
    assert data["bracket"] == [data["eps"], data["eps"]] and data["method"] == "exact"
    rows = data["accountants"]
    assert {"library", "call", "value", "ratio", "verdict", "note"} <= set(rows[0])
    assert sum(r["verdict"] == "UNSOUND" for r in rows) == 2
    assert json.loads((tmp_path / "summary.json").read_text())["accountants"] == rows
    assert (tmp_path / "profile.png").stat().st_size > 10_000


def test_compose_accountants_needs_delta_and_one_file():
    code, out, err = _cli(EXAMPLE, "--k", 20, "--epsilon", 1.0, "--accountants")
    assert code == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("jaxpriv: error: --accountants compares")


def _show(path):
    done = subprocess.run([sys.executable, "-m", "jaxpriv.cli", "show", str(path)],
                          capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout, done.stderr


def test_show_rechecks_the_composition_witness():
    """The finding's witness file carries its k and δ (``"compose"``): ``jaxpriv show`` runs the
    accountants on it (exit 1, the UNSOUND rows); without any accountant installed it says what
    to install, in one line (exit 2)."""
    import importlib.util
    code, out, err = _show(EXAMPLE)
    if importlib.util.find_spec("dp_accounting") is None:
        assert code == 2 and "no accountant is installed" in err.strip().splitlines()[-1]
        return
    assert code == 1, err
    assert out.count("UNSOUND") == 2 and "9.859411024" in out
