"""The accountant adapters return what each library's conversion computes.

Every adapter is compared with the closed form its library implements, evaluated independently
with mpmath (40 digits), to 1e-9 relative; the documented special values (+∞, NaN raised, invalid
claims returned as is) are pinned. Each library's tests skip where it is not installed.

The adapters (``accountant_adapters``), what they share (``accountant_libraries``) and the
conversion records (``accountant_conversions``) import nothing from jaxpriv but each other; they
are loaded here by path, as submodules of a stand-in package (``jaxpriv.catalog``'s
``__init__`` is not run), so these tests run in an environment that has the accounting
libraries but not jaxpriv's dependencies::

    python -m pytest -q tests/test_accountant_adapters.py -p no:cacheprovider --noconftest

(``--noconftest``: the suite's conftest imports jax.)
"""

import importlib
import importlib.util
import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest

_CATALOG = Path(__file__).resolve().parents[1] / "jaxpriv" / "catalog"
_PACKAGE = "_jaxpriv_catalog_under_test"


def _load(name):
    """``jaxpriv/catalog/<name>.py`` as ``_jaxpriv_catalog_under_test.<name>``: the stand-in
    package has the catalog's folder as its path but runs none of its ``__init__``."""
    if _PACKAGE not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            _PACKAGE, _CATALOG / "__init__.py", submodule_search_locations=[str(_CATALOG)])
        sys.modules[_PACKAGE] = importlib.util.module_from_spec(spec)  # not executed
    return importlib.import_module(f"{_PACKAGE}.{name}")


al = _load("accountant_libraries")
aa = _load("accountant_adapters")
ac = _load("accountant_conversions")

ORDERS = (1.5, 2.0, 4.0, 16.0)
DELTAS = (1e-2, 1e-5)
EPSILONS = (0.5, 1.0, 2.0)
NOTIONS = {"ldp", "renyi", "zcdp", "delta", "eps_at_delta", "kl", "tv", "gdp"}


def close(got, want, rel=1e-9):
    want = float(want)
    return got == want or abs(got - want) <= rel * abs(want)


# -- mpmath references -------------------------------------------------------------------------


def _mp():
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 40
    return mp


def _bisect(mp, f, lo, hi, steps=160):
    """The root of an increasing ``f`` in ``[lo, hi]``."""
    lo, hi = mp.mpf(lo), mp.mpf(hi)
    for _ in range(steps):
        mid = (lo + hi) / 2
        if f(mid) < 0:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def cks_epsilon(mp, r, alpha, delta):
    """``r + log(1 − 1/α) − log(δα)/(α − 1)`` (CKS 2020 Prop. 12 / BBGHS Thm 21)."""
    r, alpha, delta = mp.mpf(r), mp.mpf(alpha), mp.mpf(delta)
    return r + mp.log(1 - 1 / alpha) - mp.log(delta * alpha) / (alpha - 1)


def cks_log_delta(mp, r, alpha, epsilon):
    """``(α − 1)(r − ε + log(1 − 1/α)) − log α`` (CKS 2020 Prop. 12, solved for δ)."""
    r, alpha, epsilon = mp.mpf(r), mp.mpf(alpha), mp.mpf(epsilon)
    return (alpha - 1) * (r - epsilon + mp.log(1 - 1 / alpha)) - mp.log(alpha)


def zcdp_epsilon(mp, rho, delta, alpha_min=None):
    """``max(0, min_α ε_α)`` of the curve ``ρα``: α is the root of ``ρ(α−1)² + log(δα)``."""
    rho, delta = mp.mpf(rho), mp.mpf(delta)
    alpha = _bisect(mp, lambda a: rho * (a - 1) ** 2 + mp.log(delta * a),
                    1, 2 + mp.sqrt(mp.log(1 / delta) / rho))
    if alpha_min is not None:
        alpha = max(alpha, mp.mpf(alpha_min))
    return max(mp.mpf(0), cks_epsilon(mp, rho * alpha, alpha, delta))


def zcdp_delta(mp, rho, epsilon, alpha_min=None):
    """``min(1, min_α δ_α)`` of the curve ``ρα``: α is the root of ``(2α−1)ρ − ε + log(1−1/α)``."""
    rho, epsilon = mp.mpf(rho), mp.mpf(epsilon)
    alpha = _bisect(mp, lambda a: (2 * a - 1) * rho - epsilon + mp.log(1 - 1 / a),
                    1, (epsilon + 1) / (2 * rho) + 2)
    if alpha_min is not None:
        alpha = max(alpha, mp.mpf(alpha_min))
    return min(mp.mpf(1), mp.exp(cks_log_delta(mp, rho * alpha, alpha, epsilon)))


def rr_renyi(mp, eps, alpha):
    """``D_α`` of binary randomized response with ratio ``e^ε``."""
    eps, alpha = mp.mpf(eps), mp.mpf(alpha)
    return mp.log((mp.sinh(alpha * eps) - mp.sinh((alpha - 1) * eps)) / mp.sinh(eps)) / (alpha - 1)


# -- the module itself (no library needed) -----------------------------------------------------


def test_records_are_well_formed():
    assert set(al.AVAILABLE) == {"dp_accounting", "autodp", "opendp", "prv_accountant"}
    assert all(isinstance(v, bool) for v in al.AVAILABLE.values())
    ids = [c.id for c in ac.CONVERSIONS]
    assert len(ids) == len(set(ids)) == len(ac.CONVERSIONS_BY_ID)
    for c in ac.CONVERSIONS:
        assert re.fullmatch(r"[A-Za-z][A-Za-z0-9_.\-]*", c.id), c.id
        assert c.id.startswith(c.conversion) and c.conversion.startswith(c.library + ".")
        assert c.library in al.AVAILABLE and c.available == al.AVAILABLE[c.library]
        assert {c.premise, c.conclusion} <= NOTIONS
        assert callable(c.function) and c.function.__module__ == aa.__name__
        assert al.VERIFIED_VERSIONS[c.library] in c.source
        options = {**c.premise_options, **c.conclusion_options}
        assert sorted(options.values()) == sorted(c.fixed.values())
        assert ("order" in c.premise_options) == (c.premise == "renyi")
        assert ("order" in c.conclusion_options) == (c.conclusion == "renyi")
        assert ("epsilon" in c.conclusion_options) == (c.conclusion == "delta")
        assert ("delta" in c.conclusion_options) == (c.conclusion == "eps_at_delta")
    assert "dp_accounting.compute_epsilon.a2.d1e-5" in ac.CONVERSIONS_BY_ID
    assert "opendp.make_pureDP_to_zCDP" in ac.CONVERSIONS_BY_ID
    assert {c.conversion for c in ac.CONVERSIONS} >= {
        "dp_accounting.compute_epsilon", "dp_accounting.compute_delta",
        "autodp.rdp_to_approxdp", "autodp.puredp_to_rdp", "opendp.make_pureDP_to_zCDP",
        "opendp.make_zCDP_to_approxDP", "prv_accountant.rdp"}


def test_vectorized_caches_and_keeps_the_shape():
    calls = []

    def fn(x, *, k):
        calls.append(x)
        if x == 3.0:
            raise al.LibraryNaNError("nan")
        return k * x

    f = al.vectorized(fn, k=2.0)
    out = f(np.array([[0.5, 1.0], [0.5, np.inf]]))
    assert out.dtype == np.float64 and out.shape == (2, 2)
    assert out.tolist() == [[1.0, 2.0], [1.0, np.inf]]
    f(np.float64(1.0))
    assert calls == [0.5, 1.0, np.inf]
    with pytest.raises(al.LibraryNaNError):
        f(np.array([3.0]))
    assert np.isnan(al.vectorized(fn, nan_ok=True, k=2.0)(np.array([3.0, 1.0])))[0]


def test_levels_are_checked():
    for adapter, fixed in [(aa.dp_accounting_compute_epsilon, {"order": 2.0, "delta": 1e-5}),
                           (aa.autodp_puredp_to_rdp, {"order": 2.0}),
                           (aa.opendp_make_pureDP_to_zCDP, {}),
                           (aa.prv_accountant_rdp, {"order": 2.0})]:
        for bad in (-1.0, math.nan):
            with pytest.raises(ValueError, match="premise level"):
                adapter(bad, **fixed)


# -- dp_accounting -----------------------------------------------------------------------------


def test_dp_accounting_compute_epsilon():
    pytest.importorskip("dp_accounting")
    mp = _mp()
    for alpha in ORDERS:
        for delta in DELTAS:
            for r in (0.05, 0.3, 1.0, 7.5):
                got = aa.dp_accounting_compute_epsilon(r, order=alpha, delta=delta)
                if delta ** 2 > 1 - math.exp(-r):  # the TV bound already gives ε = 0
                    assert got == 0.0
                else:
                    assert close(got, max(0, cks_epsilon(mp, r, alpha, delta))), (alpha, delta, r)
            assert aa.dp_accounting_compute_epsilon(math.inf, order=alpha, delta=delta) == math.inf
            assert aa.dp_accounting_compute_epsilon(0.0, order=alpha, delta=delta) == 0.0
    # the TV branch: δ = 0.5 > √(1 − e^{−0.2}) = 0.4258
    assert aa.dp_accounting_compute_epsilon(0.2, order=16.0, delta=0.5) == 0.0
    # 1 ≤ α ≤ 1.01 outside the TV branch: no bound
    assert aa.dp_accounting_compute_epsilon(0.5, order=1.005, delta=1e-5) == math.inf
    with pytest.raises(ValueError):
        aa.dp_accounting_compute_epsilon(0.5, order=0.5, delta=1e-5)


def test_dp_accounting_compute_delta():
    pytest.importorskip("dp_accounting")
    mp = _mp()
    for alpha in ORDERS:
        for epsilon in EPSILONS:
            for r in (0.05, 0.3, 1.0, 7.5):
                log_delta = min(mp.log(1 - mp.exp(-mp.mpf(r))) / 2,
                                cks_log_delta(mp, r, alpha, epsilon))
                want = min(mp.mpf(1), mp.exp(log_delta))
                got = aa.dp_accounting_compute_delta(r, order=alpha, epsilon=epsilon)
                assert close(got, want), (alpha, epsilon, r, got, want)
            assert aa.dp_accounting_compute_delta(math.inf, order=alpha, epsilon=epsilon) == 1.0
            assert aa.dp_accounting_compute_delta(0.0, order=alpha, epsilon=epsilon) == 0.0
            # below 2^−53 the library raises "math domain error" on a valid level: no claim
            assert aa.dp_accounting_compute_delta(1e-300, order=alpha, epsilon=epsilon) == math.inf
            assert aa.dp_accounting_compute_delta(1e-15, order=alpha, epsilon=epsilon) < 1e-7


# -- autodp ------------------------------------------------------------------------------------


def test_autodp_rdp_to_approxdp():
    pytest.importorskip("autodp")
    mp = _mp()
    for delta in DELTAS:
        for rho in (0.01, 0.1, 0.5, 3.0, 40.0):
            got = aa.autodp_rdp_to_approxdp(rho, delta=delta)
            assert close(got, zcdp_epsilon(mp, rho, delta)), (rho, delta, got)
        assert aa.autodp_rdp_to_approxdp(math.inf, delta=delta) == math.inf
        assert aa.autodp_rdp_to_approxdp(0.0, delta=delta) == 0.0
    assert aa.autodp_rdp_to_approxdp(0.5, delta=0.0) == math.inf  # rdp(∞)
    assert aa.autodp_rdp_to_approxdp(0.0, delta=0.0) == 0.0
    with pytest.raises(ValueError, match="delta"):
        aa.autodp_rdp_to_approxdp(0.5, delta=1.5)  # autodp itself only prints


def test_autodp_rdp_to_delta():
    pytest.importorskip("autodp")
    mp = _mp()
    for epsilon in EPSILONS:
        for rho in (0.001, 0.01, 0.1, 0.5):  # ρ < (ε + log 4)/2: the search succeeds
            got = aa.autodp_rdp_to_delta(rho, epsilon=epsilon)
            assert close(got, zcdp_delta(mp, rho, epsilon)), (rho, epsilon, got)
        assert aa.autodp_rdp_to_delta(math.inf, epsilon=epsilon) == 1.0
    # ρ ≥ (ε + log 4)/2: Brent's bracket from (1, 2) is flat at 1, autodp answers 1
    assert float(zcdp_delta(mp, 1.0, 0.5)) < 0.63
    assert aa.autodp_rdp_to_delta(1.0, epsilon=0.5) == 1.0


def test_autodp_puredp_to_rdp():
    pytest.importorskip("autodp")
    mp = _mp()
    for alpha in ORDERS:
        for eps in (0.1, 0.5, 1.0, 3.0, 20.0):
            got = aa.autodp_puredp_to_rdp(eps, order=alpha)
            assert close(got, rr_renyi(mp, eps, alpha)), (alpha, eps, got)
        with pytest.raises(al.LibraryNaNError):
            aa.autodp_puredp_to_rdp(0.0, order=alpha)
        assert aa.autodp_puredp_to_rdp(math.inf, order=alpha) == -math.inf  # returned as is
    # the cancellation for small ε: below the exact value (an invalid claim), even negative
    assert aa.autodp_puredp_to_rdp(1e-5, order=2.0) < 0.99 * float(rr_renyi(mp, 1e-5, 2.0))
    assert any(aa.autodp_puredp_to_rdp(eps, order=2.0) < 0 for eps in np.logspace(-8, -6, 9))
    with pytest.raises(ValueError, match="order"):
        aa.autodp_puredp_to_rdp(1.0, order=1.0)


# -- OpenDP ------------------------------------------------------------------------------------


def test_opendp_make_pureDP_to_zCDP():
    pytest.importorskip("opendp")
    mp = _mp()
    for eps in (0.0, 1e-3, 0.1, 0.7, 1.0, 3.0, 1e100):
        got = aa.opendp_make_pureDP_to_zCDP(eps)
        want = mp.mpf(eps) ** 2 / 2
        assert close(got, want) and got >= want  # rounded up
    assert aa.opendp_make_pureDP_to_zCDP(1e200) == math.inf  # OpenDP: Overflow
    assert aa.opendp_make_pureDP_to_zCDP(math.inf) == math.inf


def test_opendp_make_zCDP_to_approxDP():
    pytest.importorskip("opendp")
    mp = _mp()
    for delta in DELTAS:
        for rho in (1e-4, 0.01, 0.5, 3.0, 50.0, 1000.0):  # α* < 1.01 for the last two
            got = aa.opendp_make_zCDP_to_approxDP(rho, delta=delta)
            assert close(got, zcdp_epsilon(mp, rho, delta, alpha_min=1.01)), (rho, delta, got)
        assert aa.opendp_make_zCDP_to_approxDP(0.0, delta=delta) == 0.0
        assert aa.opendp_make_zCDP_to_approxDP(math.inf, delta=delta) == math.inf
        assert aa.opendp_make_zCDP_to_approxDP(1e5, delta=delta) == math.inf  # OpenDP: Overflow
    assert aa.opendp_make_zCDP_to_approxDP(0.5, delta=0.0) == math.inf
    if al.AVAILABLE["autodp"]:  # the same numbers as autodp's where α* ≥ 1.01
        assert close(aa.opendp_make_zCDP_to_approxDP(0.5, delta=1e-5),
                     aa.autodp_rdp_to_approxdp(0.5, delta=1e-5))


def test_opendp_make_zCDP_to_approxDP_delta():
    pytest.importorskip("opendp")
    mp = _mp()
    for epsilon in EPSILONS:
        for rho in (0.01, 0.05, 0.5, 1.0, 3.0):
            got = aa.opendp_make_zCDP_to_approxDP_delta(rho, epsilon=epsilon)
            assert close(got, zcdp_delta(mp, rho, epsilon, alpha_min=1.01)), (rho, epsilon, got)
        assert aa.opendp_make_zCDP_to_approxDP_delta(0.0, epsilon=epsilon) == 0.0
        assert aa.opendp_make_zCDP_to_approxDP_delta(math.inf, epsilon=epsilon) == 1.0
        assert aa.opendp_make_zCDP_to_approxDP_delta(1e6, epsilon=epsilon) == math.inf  # Overflow
    # δ below the least float (≈ 5e−438 here) is rounded up to it, never to 0
    assert aa.opendp_make_zCDP_to_approxDP_delta(1e-3, epsilon=2.0) == 5e-324
    with pytest.raises(ValueError, match="epsilon"):
        aa.opendp_make_zCDP_to_approxDP_delta(0.5, epsilon=-1.0)


# -- prv_accountant ----------------------------------------------------------------------------


def test_prv_accountant_rdp():
    pytest.importorskip("prv_accountant")
    mp = _mp()
    for alpha in ORDERS:
        for eps in (0.0, 0.1, 1.0, 3.0):
            got = aa.prv_accountant_rdp(eps, order=alpha)
            assert close(got, (mp.mpf(alpha) - 1) * eps / alpha)
        assert aa.prv_accountant_rdp(math.inf, order=alpha) == math.inf
        # below the Rényi divergence of randomized response, which is ε-DP: not a valid bound
        assert aa.prv_accountant_rdp(1.0, order=alpha) < float(rr_renyi(mp, 1.0, alpha))
    with pytest.raises(ValueError, match="order"):
        aa.prv_accountant_rdp(1.0, order=1.0)


def test_prv_accountant_rdp_to_dp():
    pytest.importorskip("prv_accountant")
    mp = _mp()
    for alpha in ORDERS:
        for delta in DELTAS:
            for r in (0.0, 0.05, 0.3, 1.0, 7.5):
                got = aa.prv_accountant_rdp_to_dp(r, order=alpha, delta=delta)
                assert close(got, cks_epsilon(mp, r, alpha, delta)), (alpha, delta, r, got)
            assert aa.prv_accountant_rdp_to_dp(math.inf, order=alpha, delta=delta) == math.inf
    # no clamp at 0 (dp_accounting's compute_epsilon returns 0 here)
    assert close(aa.prv_accountant_rdp_to_dp(0.0, order=2.0, delta=0.5), -math.log(2))
    with pytest.raises(ValueError, match="order"):
        aa.prv_accountant_rdp_to_dp(0.5, order=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="delta"):
        aa.prv_accountant_rdp_to_dp(0.5, order=2.0, delta=0.0)


# -- every record calls its adapter ------------------------------------------------------------


@pytest.mark.parametrize("library", sorted(al.LIBRARIES))
def test_every_record_evaluates(library):
    pytest.importorskip(library)
    for c in ac.CONVERSIONS:
        if c.library != library:
            continue
        values = c.vectorized()(np.array([0.1, 1.0, 1.0]))
        assert values[1] == values[2] == c(1.0) == c.function(1.0, **c.fixed)
        assert not np.isnan(values).any()
