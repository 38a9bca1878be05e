"""The accountants' composition, called as a user calls it: the composed ε at δ that each
installed library reports for ``k`` uses of a mechanism, each call path its own row
(``jaxpriv compose --accountants``). Each value is a claim about ``eps_composed``: an upper
bound on the exact composed ε of the mechanism (or, for an estimate its library calls
optimistic, a lower one), checked against the exact value in float64.

Two kinds of call:

* **ε-LDP calls** describe the mechanism only by its LDP level ε (the max over ordered pairs of
  ``|log K[d,w]/K[d',w]|``): a library's pure-DP or randomized-response event at ε. Binary
  randomized response RR_ε dominates every ε-LDP mechanism (Kairouz, Oh, Viswanath 2015, Thm
  3.3), so a sound answer is at least RR_ε's exact composed ε, hence at least the mechanism's.
  dp-accounting's ``RandomizedResponseDpEvent(noise_parameter=p, num_buckets=2)`` is RR_ε at
  ``p = 2/(1 + e^ε)`` (it keeps the input with probability ``1 − p``, else draws a bucket
  uniformly: ``(1 − p/2)/(p/2) = e^ε``), under ``NeighboringRelation.REPLACE_ONE`` (the only
  relation its accountants take for this event).
* **pair calls** give the library the mechanism's own rows: dp-accounting's privacy-loss
  distribution from two probability mass functions, for every ordered pair of secrets, the
  largest answer taken.

A library that refuses a call (an exception) gets a row saying so, never a number.

References:
  dp-accounting (Google): https://github.com/google/differential-privacy/tree/main/python
  prv-accountant (Microsoft): Gopi, Lee, Wutschitz 2021, arXiv 2106.02848
  autodp: Zhu, Dong, Wang 2022 (AISTATS), https://github.com/yuxiangw/autodp
  OpenDP: https://github.com/opendp/opendp (``opendp.combinators.make_composition``: basic
    composition for pure DP and zCDP; ``make_pureDP_to_zCDP``: ρ = ε²/2, Bun, Steinke 2016
    Prop 1.4; ``make_zCDP_to_approxDP``: Canonne, Kamath, Steinke 2020 Prop 12)
"""

from __future__ import annotations

import importlib.util
import math
from typing import Callable, NamedTuple

import numpy as np

from .accountant_adapters import quiet  # relative: the adapters load without jaxpriv (tests)


class ComposeCall(NamedTuple):
    """One way a library composes a mechanism ``k`` times.

    Attributes:
      library: the package (``dp_accounting``, ``prv_accountant``, ``autodp``, ``opendp``).
      call: what is called, as a user writes it (``ε``, ``k``, ``δ`` and ``P``, ``Q`` stand for
        the values passed).
      kind: ``"ldp"`` (takes the mechanism's LDP level ε) or ``"pair"`` (takes two rows).
      upper: whether the library claims its value is at least the exact composed ε (an
        optimistic estimate claims the opposite).
      function: ``(ε or (log_P, log_Q), k, δ) -> ε``.
    """

    library: str
    call: str
    kind: str
    upper: bool
    function: Callable[..., float]

    @property
    def available(self) -> bool:
        return importlib.util.find_spec(self.library) is not None


# -- dp-accounting ------------------------------------------------------------------------------


def _rr_event(eps: float):
    from dp_accounting import dp_event

    return dp_event.RandomizedResponseDpEvent(noise_parameter=2.0 / (1.0 + math.exp(eps)),
                                              num_buckets=2)


def _dp_accounting(accountant: str, route: str):
    def call(eps: float, k: int, delta: float) -> float:
        import dp_accounting
        from dp_accounting import dp_event, pld, rdp

        relation = dp_accounting.NeighboringRelation.REPLACE_ONE
        acc = (pld.PLDAccountant(relation) if accountant == "pld"
               else rdp.RdpAccountant(neighboring_relation=relation))
        event = _rr_event(eps)
        if route == "count":
            acc.compose(event, k)
        elif route == "self":
            acc.compose(dp_event.SelfComposedDpEvent(event, k))
        else:
            acc.compose(dp_event.ComposedDpEvent([event] * k))
        return float(acc.get_epsilon(delta))
    return call


def _pmf_pld(pessimistic: bool):
    def call(rows, k: int, delta: float) -> float:
        from dp_accounting.pld import privacy_loss_distribution as pld

        log_P, log_Q = (np.asarray(r, np.float64) for r in rows)
        upper = {w: float(v) for w, v in enumerate(log_P) if np.isfinite(v)}
        lower = {w: float(v) for w, v in enumerate(log_Q) if np.isfinite(v)}
        distribution = pld.from_two_probability_mass_functions(
            upper, lower, pessimistic_estimate=pessimistic)
        return float(distribution.self_compose(k).get_epsilon_for_delta(delta))
    return call


# -- prv-accountant -----------------------------------------------------------------------------


PRV_EPS_ERROR = 0.01
PRV_DELTA_ERROR = 1e-10
"""prv-accountant's error settings (its README's DP-SGD example uses eps_error=0.01; δ_error is
set well below the δ asked)."""


def prv_triple(eps: float, k: int, delta: float) -> tuple[float, float, float]:
    """prv-accountant's own ``(lower, estimate, upper)`` for k uses of PureDPMechanism(ε)."""
    from prv_accountant import PRVAccountant
    from prv_accountant.privacy_random_variables import PureDPMechanism

    accountant = PRVAccountant(prvs=[PureDPMechanism(eps)], max_self_compositions=[k],
                               eps_error=PRV_EPS_ERROR, delta_error=PRV_DELTA_ERROR)
    return tuple(float(v) for v in accountant.compute_epsilon(delta=delta,
                                                              num_self_compositions=[k]))


def _prv(eps: float, k: int, delta: float) -> float:
    """The upper end of :func:`prv_triple`: what prv-accountant claims as a bound."""
    return prv_triple(eps, k, delta)[2]


# -- autodp -------------------------------------------------------------------------------------


def _autodp(transformer: str):
    def call(eps: float, k: int, delta: float) -> float:
        from autodp import mechanism_zoo, transformer_zoo

        compose = getattr(transformer_zoo, transformer)()
        mechanism = compose([mechanism_zoo.PureDP_Mechanism(eps, name="pure")], [k])
        return float(mechanism.get_approxDP(delta))
    return call


def _autodp_rdp(eps: float, k: int, delta: float) -> float:
    """autodp's RDP accountant: k times the pure-DP mechanism's RDP curve, converted at δ."""
    from autodp import rdp_acct, rdp_bank

    accountant = rdp_acct.anaRDPacct()
    accountant.compose_mechanism(lambda alpha: rdp_bank.RDP_pureDP({"eps": eps}, alpha), coeff=k)
    return float(accountant.get_eps(delta))


# -- OpenDP -------------------------------------------------------------------------------------


def _opendp_rr(eps: float):
    """OpenDP's binary randomized response at ε (``prob = e^ε/(1 + e^ε)``: RR_ε)."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    return dp, dp.m.make_randomized_response_bool(prob=math.exp(eps) / (1.0 + math.exp(eps)))


def _opendp_pure(eps: float, k: int, delta: float) -> float:
    """Basic composition of k pure-DP measurements: an ε-DP bound, valid at every δ."""
    dp, rr = _opendp_rr(eps)
    return float(dp.c.make_composition([rr] * k).map(1))


def _opendp_zcdp(eps: float, k: int, delta: float) -> float:
    """Each use cast to zCDP (ρ = ε²/2), k of them composed, cast to (ε, δ)."""
    dp, rr = _opendp_rr(eps)
    composed = dp.c.make_composition([dp.c.make_pureDP_to_zCDP(rr)] * k)
    return float(dp.c.make_zCDP_to_approxDP(composed).map(1).epsilon(delta))


_RR = "RandomizedResponseDpEvent(noise_parameter=2/(1+e^ε), num_buckets=2)"
_ODP_RR = "make_randomized_response_bool(prob=e^ε/(1+e^ε))"
_ACC = {"pld": "PLDAccountant(NeighboringRelation.REPLACE_ONE)",
        "rdp": "RdpAccountant(neighboring_relation=NeighboringRelation.REPLACE_ONE)"}

CALLS: tuple[ComposeCall, ...] = tuple(
    ComposeCall("dp_accounting", f"{_ACC[a]}.compose({how}).get_epsilon(δ)", "ldp", True,
                _dp_accounting(a, route))
    for a in ("pld", "rdp")
    for route, how in (("count", f"{_RR}, k"), ("self", f"SelfComposedDpEvent({_RR}, k)"),
                       ("list", f"ComposedDpEvent([{_RR}] * k)"))
) + (
    ComposeCall("dp_accounting", "from_two_probability_mass_functions(log P, log Q, "
                "pessimistic_estimate=True).self_compose(k).get_epsilon_for_delta(δ), max over "
                "ordered pairs", "pair", True, _pmf_pld(True)),
    ComposeCall("dp_accounting", "from_two_probability_mass_functions(log P, log Q, "
                "pessimistic_estimate=False).self_compose(k).get_epsilon_for_delta(δ), max over "
                "ordered pairs (optimistic: claimed ≤ the exact ε)", "pair", False,
                _pmf_pld(False)),
    ComposeCall("prv_accountant", f"PRVAccountant(prvs=[PureDPMechanism(ε)], "
                f"max_self_compositions=[k], eps_error={PRV_EPS_ERROR:g}, "
                f"delta_error={PRV_DELTA_ERROR:g}).compute_epsilon(δ, [k]) (upper)", "ldp", True,
                _prv),
    ComposeCall("autodp", "Composition()([PureDP_Mechanism(ε)], [k]).get_approxDP(δ)", "ldp",
                True, _autodp("Composition")),
    ComposeCall("autodp", "ComposeAFA()([PureDP_Mechanism(ε)], [k]).get_approxDP(δ)", "ldp",
                True, _autodp("ComposeAFA")),
    ComposeCall("autodp", "rdp_acct.anaRDPacct().compose_mechanism(lambda α: rdp_bank."
                "RDP_pureDP({'eps': ε}, α), coeff=k).get_eps(δ)", "ldp", True, _autodp_rdp),
    ComposeCall("opendp", f"make_composition([{_ODP_RR}] * k).map(1) (pure ε: every δ)", "ldp",
                True, _opendp_pure),
    ComposeCall("opendp", f"make_zCDP_to_approxDP(make_composition([make_pureDP_to_zCDP("
                f"{_ODP_RR})] * k)).map(1).epsilon(δ)", "ldp", True, _opendp_zcdp),
)
"""Every call path, installed or not (:attr:`ComposeCall.available`)."""


def run(call: ComposeCall, argument, k: int, delta: float) -> tuple[float | None, str]:
    """``(value, "")``, or ``(None, why)`` where the library refused the call."""
    try:
        with quiet():
            value = call.function(argument, k, delta)
    except Exception as error:  # a library's refusal is reported, not raised
        return None, f"{type(error).__name__}: {error}"[:200]
    if math.isnan(value) or value == -math.inf:
        return None, f"returned {value!r}"
    return value, ""


__all__ = ["CALLS", "ComposeCall", "PRV_DELTA_ERROR", "PRV_EPS_ERROR", "prv_triple", "run"]
