"""Adapters to the privacy-conversion functions that accounting libraries ship, as claimed bounds.

Each adapter calls one conversion of one real library and returns, as a Python float, the bound
that library claims at a premise level ``x``: *if a mechanism satisfies the premise notion at
level x, it satisfies the conclusion notion at the returned level*. jaxpriv audits such a claim
on finite mechanisms exactly like a published relation (the
:data:`~jaxpriv.catalog.accountant_conversions.CONVERSIONS` records carry the notion keys and
parameters; :func:`~jaxpriv.catalog.accountant_libraries.vectorized` gives the NumPy function to
wrap in ``jax.pure_callback``).

This module is pure Python/NumPy and imports nothing from jaxpriv but
:mod:`jaxpriv.catalog.accountant_libraries` (relatively, so that both load by path without
jaxpriv's dependencies); each library is imported lazily inside the adapter that needs it, so
the module imports (and :data:`~jaxpriv.catalog.accountant_libraries.AVAILABLE` reports
``False``) where none is installed. Verified against dp-accounting 0.6.0, autodp 0.2.3.1,
opendp 0.16.0 and prv-accountant 0.2.0 (Python 3.11, NumPy 2.4, SciPy 1.17).

What each library computes (read from its code; ``r`` is a Rényi divergence bound at order
``α``, ``ρ`` a zCDP level, ``ε`` a pure-DP level, ``ℓ(α) = log(1 − 1/α)``):

* **dp_accounting** (Google), ``dp_accounting/rdp/rdp_privacy_accountant.py``.
  ``compute_epsilon(orders, rdp, delta)`` returns the least over the given orders of
  ``0`` if ``δ² > 1 − e^{−r}`` (TV ≤ √(1 − e^{−KL}) with ``KL ≤ D_α ≤ r``), else, for
  ``α > 1.01``, ``r + ℓ(α) − log(δα)/(α − 1)`` (Canonne–Kamath–Steinke 2020, arXiv:2004.00010
  Prop. 12 in v4; Asoodeh et al. 2020, arXiv:2001.05990 eq. 20), else ``+∞``; clamped at 0.
  ``compute_delta(orders, rdp, epsilon)`` returns ``min(1, exp(min_α log δ_α))`` with
  ``log δ_α = min(½ log(1 − e^{−r}), (α − 1)(r − ε + ℓ(α)) − log α)`` (the second term only for
  ``α > 1.01``); the same two results, solved for δ.
* **autodp**, ``autodp/converter.py``. ``rdp_to_approxdp(rdp)(δ)`` minimises, by SciPy's Brent
  search bracketed from (1, 2) over the real α > 1,
  ``max(0, rdp(α) + ℓ(α) − (log δ + log α)/(α − 1))``
  (Balle–Barthe–Gaboardi–Hsu–Sato, arXiv:1905.09982 Thm 21 — the same expression as CKS Prop. 12);
  it returns ``rdp(∞)`` at δ = 0 and ``+∞`` if Brent reports failure. It takes a whole RDP curve,
  so the premise here is zCDP (``rdp(α) = ρα``). ``rdp_to_delta(rdp)(ε)`` minimises
  ``min(1, e^{(α−1)(rdp(α)−ε)} (1 − 1/α)^{α−1} / α)`` the same way (returning 1 when the search
  fails, which it does whenever the bracket's α = 2 already gives 1, i.e. ρ ≥ (ε + log 4)/2).
  ``puredp_to_rdp(ε)(α)`` returns ``log((sinh(αε) − sinh((α−1)ε)) / sinh ε) / (α − 1)`` ("the
  proof of Lemma 4 of Bun et al. 2016") — exactly the Rényi divergence of binary randomized
  response, the tight bound — computed as differences of logs without ``log1p``/``expm1``, so it
  falls below the exact value (even below 0) for ε ≲ 1e−5, is NaN at ε = 0 and ``−∞`` at ε = ∞.
* **opendp**, Rust ``combinators/measure_cast/{pureDP_to_zCDP,zCDP_to_approxDP}`` (wrapped by
  ``opendp.combinators.make_pureDP_to_zCDP`` / ``make_zCDP_to_approxDP``). ε-DP ⇒ ρ = ε²/2
  rounded up (Bun–Steinke 2016, arXiv:1605.02065 §3.1). ρ-zCDP ⇒ the privacy profile
  ``δ(ε) = min(1, exp((α−1)(αρ − ε) + α ℓ(α)) / (α − 1))`` at the α in ``[1.01, (ε+1)/(2ρ) + 2]``
  found by bisection on the derivative ``(2α − 1)ρ − ε + ℓ(α)`` (CKS 2020, from T. Steinke's
  ``cdp2adp.py``); ``profile.epsilon(δ)`` inverts it by bisection over ε (outward search
  2, 4, 16, 256, …), so ε(δ) = ``max(0, αρ + ℓ(α) − log(δα)/(α − 1))`` at the optimal
  ``α ≥ 1.01``. The measurements are built once, with ``make_user_measurement`` and the
  identity privacy map, which needs ``opendp.prelude.enable_features("contrib",
  "honest-but-curious")`` — the adapters switch these features on for the process.
* **prv_accountant** (Microsoft), ``prv_accountant/privacy_random_variables/pure_dp_mechanism.py``
  ``PureDPMechanism(eps).rdp(alpha) = (α − 1) ε / α`` (no citation; it is *not* the Rényi
  divergence of the randomized-response privacy loss the same class's ``cdf`` describes, and is
  below it, e.g. 0.5 < 0.7353 at ε = 1, α = 2). ``prv_accountant/other_accountants.py``
  ``RDP(prvs, orders).compute_epsilon(delta, num_self_compositions)`` returns
  ``(0, e, e)`` with ``e = min_α r − log(δα)/(α − 1) + ℓ(α)`` (NaNs ignored; "based on TF
  Privacy"), i.e. CKS Prop. 12 without dp_accounting's KL branch and without clamping at 0.

Conventions of every adapter ``f(x, **fixed) -> float``:

* ``x`` is a premise level: a float in ``[0, +∞]``; NaN or a negative ``x`` raises
  :class:`ValueError` (it is not a level). Fixed parameters outside the domain that the library
  would silently mishandle (autodp only prints for δ ∉ [0, 1]; prv_accountant returns NaN for
  α ≤ 1) raise :class:`ValueError` here; where the library raises on its own, its exception
  propagates.
* ``+∞`` is returned where the library says ``+∞`` and where it refuses a value as out of its
  range (OpenDP's ``Overflow`` errors only — each case is named in the adapter's docstring).
* A NaN result raises :class:`~jaxpriv.catalog.accountant_libraries.LibraryNaNError`: a NaN
  is never passed on as a claim.
* Otherwise the library's value is returned unchanged, even when it is not a valid bound
  (negative, ``−∞``): auditing exactly what the library claims is the point.
"""

from __future__ import annotations

import contextlib
import io
import math
import warnings
from typing import Any, Callable

import numpy as np

from .accountant_libraries import _claim, _delta, _epsilon, _level, _order

__all__ = [
    "autodp_puredp_to_rdp", "autodp_rdp_to_approxdp", "autodp_rdp_to_delta",
    "dp_accounting_compute_delta", "dp_accounting_compute_epsilon",
    "opendp_make_pureDP_to_zCDP", "opendp_make_zCDP_to_approxDP",
    "opendp_make_zCDP_to_approxDP_delta", "prv_accountant_rdp", "prv_accountant_rdp_to_dp", "quiet",
]


# --------------------------------------------------------------------------------------------
# dp_accounting (Google)
# --------------------------------------------------------------------------------------------


def dp_accounting_compute_epsilon(r: float, *, order: float, delta: float) -> float:
    """``D_α ≤ r ⇒ ε(δ) ≤ compute_epsilon([α], [r], δ)[0]`` (dp_accounting).

    Library: dp-accounting (verified 0.6.0),
    ``dp_accounting.rdp.rdp_privacy_accountant.compute_epsilon(orders, rdp, delta)``, called with
    the single order. Formula (from the code)::

        0                                      if δ² + expm1(−r) > 0   (TV ≤ √(1 − e^{−r}) < δ)
        max(0, r + log1p(−1/α) − log(δα)/(α − 1))   elif α > 1.01
        +∞                                     otherwise (1 ≤ α ≤ 1.01)

    The code cites Canonne–Kamath–Steinke 2020 (arXiv:2004.00010, Prop. 12 in v4) and Asoodeh et
    al. 2020 (arXiv:2001.05990, eq. 20); the basic bound ``r + log(1/δ)/(α − 1)`` of Mironov 2017
    Prop. 3 is only mentioned in a comment. ``r = +∞`` gives ``+∞``; ``δ = 0`` gives ``0`` if
    ``r = 0`` else ``+∞`` (the library's own δ = 0 branch). ``order < 1`` or ``delta < 0``:
    the library raises :class:`ValueError`.
    """
    r = _level(r, "r")

    from dp_accounting.rdp import rdp_privacy_accountant as rdp

    eps, _ = rdp.compute_epsilon([float(order)], [r], float(delta))
    return _claim(eps, "dp_accounting.compute_epsilon")


def dp_accounting_compute_delta(r: float, *, order: float, epsilon: float) -> float:
    """``D_α ≤ r ⇒ δ(ε) ≤ compute_delta([α], [r], ε)[0]`` (dp_accounting).

    Library: dp-accounting (verified 0.6.0),
    ``dp_accounting.rdp.rdp_privacy_accountant.compute_delta(orders, rdp, epsilon)``, called with
    the single order. Formula (from the code)::

        log δ = ½ log1p(−e^{−r})                                  (−∞ at r = 0)
        log δ = min(log δ, (α − 1)(r − ε + log1p(−1/α)) − log α)   if α > 1.01
        δ = min(1, e^{log δ})

    (the KL/TV bound, then Canonne–Kamath–Steinke 2020 Prop. 12). ``r = +∞`` gives 1. ``order < 1``
    or ``epsilon < 0``: the library raises :class:`ValueError`. For ``0 < r < 2^−53`` it raises
    ``ValueError: math domain error`` on a valid level (``e^{−r}`` rounds to 1 and
    ``math.log1p(−1)`` refuses): it makes no claim there, returned as ``+∞`` (found by
    tests/test_relations.py's sweep of every bound over ``x = 0, 1e-300, …, ∞``; verified 0.6.0).
    """
    r = _level(r, "r")

    from dp_accounting.rdp import rdp_privacy_accountant as rdp

    try:
        delta, _ = rdp.compute_delta([float(order)], [r], float(epsilon))
    except ValueError:
        if 0.0 < r and math.exp(-r) == 1.0:  # the library's log1p(−e^{−r}) at e^{−r} = 1
            return math.inf
        raise
    return _claim(delta, "dp_accounting.compute_delta")


# --------------------------------------------------------------------------------------------
# autodp
# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def quiet():
    """Silences autodp's side channels: SciPy/NumPy RuntimeWarnings and its ``print("not found")``
    (``sys.stdout`` is swapped for the call's duration)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"), \
            contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def _zcdp_curve(rho: float) -> Callable[[float], float]:
    """The RDP curve ``α ↦ ρα`` of ρ-zCDP, with ``0·∞ = 0`` (autodp reads ``rdp(∞)`` at δ = 0)."""
    return lambda alpha: 0.0 if rho == 0 else rho * alpha


def autodp_rdp_to_approxdp(rho: float, *, delta: float) -> float:
    """``ρ-zCDP ⇒ ε(δ) ≤ rdp_to_approxdp(α ↦ ρα)(δ)`` (autodp).

    Library: autodp (verified 0.2.3.1), ``autodp.converter.rdp_to_approxdp(rdp, alpha_max=inf,
    BBGHS_conversion=True)`` with ``rdp = lambda α: ρα``. Formula (from the code): SciPy
    ``minimize_scalar(method="Brent", bracket=(1, 2))`` of::

        f(α) = max(0, ρα + log((α − 1)/α) − (log δ + log α)/(α − 1))   (α > 1; +∞ for α ≤ 1)

    (Balle–Barthe–Gaboardi–Hsu–Sato, arXiv:1905.09982 Thm 21; the same expression as CKS 2020
    Prop. 12), ``+∞`` if Brent reports failure; ``rdp(∞)`` (``+∞``, or 0 at ρ = 0) at δ = 0.
    Brent's minimum is the exact one to ~1e−15 relative. ``ρ = +∞`` gives ``+∞``. autodp's
    ``alpha_max`` argument is unused (commented out in the code), and the function only prints
    for δ ∉ [0, 1]: here δ ∉ [0, 1) raises :class:`ValueError`.

    Only the zCDP premise is offered: the function takes a whole RDP curve and searches a
    continuous α, so a single-order premise ``D_α ≤ r`` (the curve ``r`` on (1, α], ``+∞``
    after) would put a jump at the optimum that Brent does not handle reliably.
    SciPy's RuntimeWarnings from the search (e.g. at ρ = 0) and autodp's prints are suppressed.
    """
    rho = _level(rho, "rho")
    delta = _delta(delta, zero_ok=True)

    from autodp import converter

    with quiet():
        eps = converter.rdp_to_approxdp(_zcdp_curve(rho))(delta)
    return _claim(eps, "autodp.rdp_to_approxdp")


def autodp_rdp_to_delta(rho: float, *, epsilon: float) -> float:
    """``ρ-zCDP ⇒ δ(ε) ≤ rdp_to_delta(α ↦ ρα)(ε)`` (autodp).

    Library: autodp (verified 0.2.3.1), ``autodp.converter.rdp_to_delta(rdp,
    BBGHS_conversion=True)`` with ``rdp = lambda α: ρα``. Formula (from the code): SciPy
    ``minimize_scalar(method="Brent", bracket=(1, 2))`` of::

        g(α) = min(1, exp((α − 1)(ρα − ε)) (1 − 1/α)^{α−1} / α)

    ("also by Canonne et al., 2020"); it prints "not found" and returns 1 if Brent reports
    failure. That happens whenever ``g(2) = min(1, e^{2ρ−ε}/4)`` is already 1, i.e.
    ``ρ ≥ (ε + log 4)/2``: the bracket from (1, 2) is flat at 1 and the search never looks in
    (1, 2), where the optimum then lies (ρ = 1, ε = 0.5: 1 instead of 0.6201). The claim is then
    the vacuous (valid) δ ≤ 1, not the formula's minimum. ``ρ = +∞`` gives 1. Warnings and the
    print are suppressed.
    """
    rho = _level(rho, "rho")
    epsilon = _epsilon(epsilon)

    from autodp import converter

    with quiet():
        delta = converter.rdp_to_delta(_zcdp_curve(rho))(epsilon)
    return _claim(delta, "autodp.rdp_to_delta")


def autodp_puredp_to_rdp(eps: float, *, order: float) -> float:
    """``ε-DP ⇒ D_α ≤ puredp_to_rdp(ε)(α)`` (autodp).

    Library: autodp (verified 0.2.3.1), ``autodp.converter.puredp_to_rdp(eps)(alpha)``. Formula
    (from the code, "in the proof of Lemma 4 of Bun et al. (2016)"), for α > 1::

        log((sinh(αε) − sinh((α − 1)ε)) / sinh(ε)) / (α − 1)

    — exactly ``D_α`` of binary randomized response with ratio ``e^ε``, which is the largest
    ``D_α`` of any ε-DP pair, so the claim is tight. It is evaluated through
    ``log(e^y − e^x) = y + log(1 − e^{x−y})`` (no ``log1p``/``expm1``): for small ε the result
    has an absolute error of ~1e−16/ε and is *below* the exact value, even negative, for
    ε ≲ 1e−5; ε = 0 gives NaN (raised here as :class:`LibraryNaNError`), and ``ε = +∞`` gives
    ``−∞`` (returned as is: an invalid claim). Orders ≤ 1 (autodp's other branches: KL at α = 1,
    ``min(αε²/2, KL)`` below 1) are not Rényi premises of jaxpriv: :class:`ValueError`.
    """
    eps = _level(eps, "eps")
    order = _order(order)

    from autodp import converter

    with quiet():
        value = converter.puredp_to_rdp(eps)(order)
    return _claim(value, "autodp.puredp_to_rdp")


# --------------------------------------------------------------------------------------------
# OpenDP
# --------------------------------------------------------------------------------------------

_OPENDP: dict[str, Any] = {}


def _opendp_measurements() -> dict[str, Any]:
    """The two casts applied to identity-map user measurements, built once per process."""
    if not _OPENDP:
        import opendp.prelude as dp

        dp.enable_features("contrib", "honest-but-curious")
        space = (dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float))

        def identity(d_in):
            return d_in

        def release(x):
            return x

        pure = dp.m.make_user_measurement(*space, output_measure=dp.max_divergence(),
                                          function=release, privacy_map=identity)
        zcdp = dp.m.make_user_measurement(*space, output_measure=dp.zero_concentrated_divergence(),
                                          function=release, privacy_map=identity)
        _OPENDP.update(exception=dp.OpenDPException,
                       pure_to_zcdp=dp.c.make_pureDP_to_zCDP(pure),
                       zcdp_to_approx=dp.c.make_zCDP_to_approxDP(zcdp))
    return _OPENDP


def _opendp_call(fn: Callable[[], Any], what: str) -> float:
    """Runs an OpenDP map; its ``Overflow`` errors (a value beyond f64) mean ``+∞``."""
    exception = _opendp_measurements()["exception"]
    try:
        value = fn()
    except exception as error:
        if getattr(error, "variant", None) == "Overflow":
            return math.inf
        raise
    return _claim(value, what)


def opendp_make_pureDP_to_zCDP(eps: float) -> float:
    """``ε-DP ⇒ ρ ≤ make_pureDP_to_zCDP(M).map(·)`` for a measurement ``M`` with map ``d ↦ ε``.

    Library: opendp (verified 0.16.0), ``opendp.combinators.make_pureDP_to_zCDP``; Rust
    ``combinators/measure_cast/pureDP_to_zCDP/mod.rs``: ``eps.inf_powi(2).inf_div(2.0)``, i.e.
    ``ρ = ε²/2`` rounded up (Bun–Steinke 2016, arXiv:1605.02065 §3.1, Prop. 3.3). Evaluated as
    ``make_pureDP_to_zCDP(make_user_measurement(…, max_divergence(), privacy_map=identity))
    .map(ε)``. ``ε ≥ ~1.34e154`` (ε² overflows; OpenDP raises ``Overflow``) and ``ε = +∞`` give
    ``+∞``. (OpenDP itself squares a negative ε; negative levels are rejected here.)
    """
    eps = _level(eps, "eps")
    m = _opendp_measurements()["pure_to_zcdp"]
    return _opendp_call(lambda: m.map(eps), "opendp.make_pureDP_to_zCDP")


def opendp_make_zCDP_to_approxDP(rho: float, *, delta: float) -> float:
    """``ρ-zCDP ⇒ ε(δ) ≤ make_zCDP_to_approxDP(M).map(·).epsilon(δ)`` for ``M`` with map ``d ↦ ρ``.

    Library: opendp (verified 0.16.0), ``opendp.combinators.make_zCDP_to_approxDP``; Rust
    ``combinators/measure_cast/zCDP_to_approxDP/cdp_delta/mod.rs`` (CKS 2020, arXiv:2004.00010;
    from T. Steinke's ``cdp2adp.py``) and ``measures::PrivacyProfile::epsilon``. The map returns
    a ``PrivacyProfile`` ``δ(ε) = min(1, exp((α−1)(αρ − ε) + α log1p(−1/α)) / (α − 1))`` at the α
    minimising it over ``[1.01, (ε+1)/(2ρ) + 2]`` (bisection on its derivative, conservative
    rounding); ``.epsilon(δ)`` is the least ε (bisection over ε from [0, 2], doubling the
    exponent outward) with ``δ(ε) ≤ δ``. In closed form::

        ε(δ) = max(0, αρ + log1p(−1/α) − log(δα)/(α − 1)),
        α = max(1.01, the root of ρ(α − 1)² + log(δα) = 0)

    ``ρ = +∞`` and ``δ = 0`` (for ρ > 0) give ``+∞``. For ρ ≳ 70283 the profile raises
    ``Overflow`` (``cdp_delta`` exponentiates before capping at 1); returned as ``+∞``.
    """
    rho = _level(rho, "rho")
    delta = _delta(delta, zero_ok=True)
    m = _opendp_measurements()["zcdp_to_approx"]
    return _opendp_call(lambda: m.map(rho).epsilon(delta), "opendp.make_zCDP_to_approxDP")


def opendp_make_zCDP_to_approxDP_delta(rho: float, *, epsilon: float) -> float:
    """``ρ-zCDP ⇒ δ(ε) ≤ make_zCDP_to_approxDP(M).map(·).delta(ε)`` (the profile's other side).

    Library: opendp (verified 0.16.0), as :func:`opendp_make_zCDP_to_approxDP`, reading the
    profile at ε (``cdp_delta(ρ, ε)``)::

        δ(ε) = min(1, exp((α−1)(αρ − ε) + α log1p(−1/α)) / (α − 1)),
        α = min(max(1.01, the root of (2α − 1)ρ − ε + log1p(−1/α) = 0), (ε+1)/(2ρ) + 2)

    0 at ρ = 0 or ε = +∞; 1 at ρ = +∞; a δ below the least float is rounded up to 5e−324 (the
    rounding is conservative throughout). Where ``(α−1)(αρ − ε) + …`` exceeds ~709 (δ would be 1
    anyway) OpenDP raises ``Overflow``: returned as ``+∞`` (no finite claim from the library).
    """
    rho = _level(rho, "rho")
    epsilon = _epsilon(epsilon)
    m = _opendp_measurements()["zcdp_to_approx"]
    return _opendp_call(lambda: m.map(rho).delta(epsilon), "opendp.make_zCDP_to_approxDP")


# --------------------------------------------------------------------------------------------
# prv_accountant (Microsoft)
# --------------------------------------------------------------------------------------------


def prv_accountant_rdp(eps: float, *, order: float) -> float:
    """``ε-DP ⇒ D_α ≤ PureDPMechanism(ε).rdp(α)`` (prv_accountant).

    Library: prv-accountant (verified 0.2.0),
    ``prv_accountant.privacy_random_variables.PureDPMechanism(eps).rdp(alpha)``
    (``privacy_random_variables/pure_dp_mechanism.py``)::

        (α − 1) ε / α

    No source is cited. The same class's ``cdf`` is the privacy loss of binary randomized
    response (±ε with mass ``1/(1 + e^ε)`` at −ε), whose Rényi divergence is autodp's
    ``puredp_to_rdp`` value; ``(α − 1)ε/α`` is below it unless ε is small (e.g. 0.5 < 0.7353 at
    ε = 1, α = 2, and it tends to 0 as α → 1 while KL > 0), so as a claimed bound it fails.
    The accountant uses it only to size its discretisation domain. ``ε = +∞`` gives ``+∞``.
    """
    eps = _level(eps, "eps")
    order = _order(order)

    from prv_accountant.privacy_random_variables import PureDPMechanism

    return _claim(PureDPMechanism(eps).rdp(order), "prv_accountant.PureDPMechanism.rdp")


def prv_accountant_rdp_to_dp(r: float, *, order: float, delta: float) -> float:
    """``D_α ≤ r ⇒ ε(δ) ≤ RDP([prv with rdp(α) = r], [α]).compute_epsilon(δ, [1])[2]``.

    Library: prv-accountant (verified 0.2.0), ``prv_accountant.other_accountants.RDP``
    (``other_accountants.py``; "based on Google's TF Privacy"). Its real input is a list of
    privacy random variables (it calls ``prv.rdp(α)`` for each order); here one that reports
    ``r`` at the single order. ``compute_epsilon`` returns ``(0.0, e, e)`` with::

        e = r − log(δα)/(α − 1) + log1p(−1/α)

    (CKS 2020 Prop. 12), the upper estimate ``e`` is returned. Unlike dp_accounting there is no
    KL branch and no clamp at 0: ``e < 0`` where ``log(δα)/(α − 1) > r + log1p(−1/α)`` (large δ),
    returned as is. ``r = +∞`` gives ``+∞``. ``order ≤ 1`` makes the library compute NaN (and
    ``nanargmin`` raise), and δ ∉ (0, 1) is not checked by it: both raise :class:`ValueError` here.
    """
    r = _level(r, "r")
    order = _order(order)
    delta = _delta(delta)

    from prv_accountant.other_accountants import RDP
    from prv_accountant.privacy_random_variables import PrivacyRandomVariable

    class _FixedRDP(PrivacyRandomVariable):
        """A privacy random variable known only through its RDP value at one order."""

        def __init__(self, value: float) -> None:
            self.value = value

        def cdf(self, t):  # pragma: no cover - RDP never asks for it
            raise NotImplementedError("only the RDP value is known")

        def rdp(self, alpha: float) -> float:
            return self.value

    with np.errstate(all="ignore"):
        _, _, upper = RDP(prvs=[_FixedRDP(r)], orders=[order]).compute_epsilon(delta, [1])
    return _claim(upper, "prv_accountant.RDP.compute_epsilon")
