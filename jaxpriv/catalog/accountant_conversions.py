"""The accountant libraries' conversions that jaxpriv audits, as records.

One :class:`Conversion` per conversion of :mod:`jaxpriv.catalog.accountant_adapters` and value
of its fixed parameters (the Rényi orders :data:`ORDERS`, the δ of :data:`DELTAS`, the ε of
:data:`EPSILONS`): its id, the premise and conclusion notions with their options, the statement,
the library's source, and the adapter that computes the claimed bound.
:mod:`jaxpriv.catalog.accountants` registers the installed libraries' records as relations.

Like the adapters, this module is pure Python/NumPy and imports nothing from jaxpriv but them
and :mod:`jaxpriv.catalog.accountant_libraries` (relatively, so all three load by path where
jaxpriv's dependencies are not installed: ``tests/test_accountant_adapters.py``); nothing here
imports a library.

Examples:
  >>> conversion = CONVERSIONS_BY_ID["dp_accounting.compute_epsilon.a2.d1e-5"]
  >>> conversion.premise, conversion.conclusion, dict(conversion.fixed)
  ('renyi', 'eps_at_delta', {'order': 2.0, 'delta': 1e-05})
  >>> conversion.premise_options, conversion.conclusion_options
  ({'order': 2.0}, {'delta': 1e-05})
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from .accountant_adapters import (
    autodp_puredp_to_rdp,
    autodp_rdp_to_approxdp,
    autodp_rdp_to_delta,
    dp_accounting_compute_delta,
    dp_accounting_compute_epsilon,
    opendp_make_pureDP_to_zCDP,
    opendp_make_zCDP_to_approxDP,
    opendp_make_zCDP_to_approxDP_delta,
    prv_accountant_rdp,
    prv_accountant_rdp_to_dp,
)
from .accountant_libraries import AVAILABLE, VERIFIED_VERSIONS, vectorized

__all__ = ["CONVERSIONS", "CONVERSIONS_BY_ID", "Conversion", "DELTAS", "EPSILONS", "ORDERS",
           "instance"]


@dataclass(frozen=True)
class Conversion:
    """One instance of a library's conversion, as a claimed relation between two notions.

    ``id`` is ``<conversion>[.<parameter tags>]``: ``conversion`` is the library's import name,
    a dot and its function (``"dp_accounting.compute_epsilon"``); the tags are the fixed
    parameters in the order of the function's keywords, each a letter and the value formatted
    with ``{:g}``: ``a`` the Rényi order α, ``d`` the δ of a conclusion ε(δ), ``e`` the ε of a
    conclusion δ(ε) — e.g. ``"dp_accounting.compute_epsilon.a2.d1e-5"``,
    ``"opendp.make_zCDP_to_approxDP.e1"``. ``function(x, **fixed)`` is the claimed conclusion
    level at premise level ``x``; ``premise_options`` / ``conclusion_options`` are the notions'
    parameters (jaxpriv keys: ``order`` of ``renyi``, ``epsilon`` of ``delta``, ``delta`` of
    ``eps_at_delta``).
    """

    id: str
    conversion: str
    library: str
    function: Callable[..., float] = field(compare=False)
    statement: str
    premise: str
    conclusion: str
    fixed: Mapping[str, float] = field(default_factory=dict, hash=False)
    premise_options: Mapping[str, float] = field(default_factory=dict, hash=False)
    conclusion_options: Mapping[str, float] = field(default_factory=dict, hash=False)
    source: str = ""
    template: str = field(default="", compare=False)
    """The statement with its parameters as placeholders (``{order}``, ``{delta}``)."""

    @property
    def available(self) -> bool:
        """Whether the library is installed."""
        return AVAILABLE[self.library]

    def __call__(self, x: float) -> float:
        """The claimed conclusion level at premise level ``x``."""
        return self.function(x, **self.fixed)

    def vectorized(self, **options: Any) -> Callable[[Any], np.ndarray]:
        """:func:`vectorized` of this instance's function and fixed parameters."""
        return vectorized(self.function, **options, **self.fixed)


ORDERS = (1.5, 2.0, 4.0, 16.0)
DELTAS = (1e-2, 1e-5)
EPSILONS = (0.5, 1.0, 2.0)

_TAGS = {"order": "a", "delta": "d", "epsilon": "e"}
_NOTION_OPTION = {"order": "order", "delta": "delta", "epsilon": "epsilon"}

_SOURCES = {
    "dp_accounting.compute_epsilon": (
        "dp-accounting {v}, dp_accounting/rdp/rdp_privacy_accountant.py::compute_epsilon; cites "
        "Canonne-Kamath-Steinke 2020 (arXiv:2004.00010) Prop. 12 (v4) and Asoodeh et al. 2020 "
        "(arXiv:2001.05990) eq. 20; the KL/TV bound TV <= sqrt(1 - exp(-KL))"),
    "dp_accounting.compute_delta": (
        "dp-accounting {v}, dp_accounting/rdp/rdp_privacy_accountant.py::compute_delta; cites "
        "Canonne-Kamath-Steinke 2020 (arXiv:2004.00010) Prop. 12 (v4); the KL/TV bound"),
    "autodp.rdp_to_approxdp": (
        "autodp {v}, autodp/converter.py::rdp_to_approxdp (BBGHS_conversion=True); cites "
        "Balle-Barthe-Gaboardi-Hsu-Sato 2019 (arXiv:1905.09982) Thm 21"),
    "autodp.rdp_to_delta": (
        "autodp {v}, autodp/converter.py::rdp_to_delta (BBGHS_conversion=True); cites "
        "Canonne et al. 2020 (arXiv:2004.00010)"),
    "autodp.puredp_to_rdp": (
        "autodp {v}, autodp/converter.py::puredp_to_rdp; cites the proof of Lemma 4 of Bun et al. "
        "2016 (the Renyi divergence of randomized response)"),
    "opendp.make_pureDP_to_zCDP": (
        "opendp {v}, opendp/combinators.py::make_pureDP_to_zCDP (Rust "
        "combinators/measure_cast/pureDP_to_zCDP/mod.rs); cites Bun-Steinke 2016 "
        "(arXiv:1605.02065) sec. 3.1"),
    "opendp.make_zCDP_to_approxDP": (
        "opendp {v}, opendp/combinators.py::make_zCDP_to_approxDP (Rust "
        "combinators/measure_cast/zCDP_to_approxDP/cdp_delta/mod.rs, measures::PrivacyProfile); "
        "cites Canonne-Kamath-Steinke 2020 (arXiv:2004.00010), Steinke's cdp2adp.py"),
    "prv_accountant.rdp": (
        "prv-accountant {v}, prv_accountant/privacy_random_variables/pure_dp_mechanism.py::"
        "PureDPMechanism.rdp; no citation"),
    "prv_accountant.RDP.compute_epsilon": (
        "prv-accountant {v}, prv_accountant/other_accountants.py::RDP.compute_epsilon; "
        "'based on Google's TF Privacy' (Canonne-Kamath-Steinke 2020 Prop. 12)"),
}


def _tag(value: float, name: str = "") -> str:
    """``{:g}``, except δ as ``1e-5`` (jaxpriv's ids: ``D6.a2.d1e-5``)."""
    if name == "delta":
        return f"{value:.0e}".replace("e-0", "e-")
    return f"{value:g}"


def _record(conversion: str, function: Callable[..., float], premise: str, conclusion: str,
            statement: str, fixed: Mapping[str, float]) -> Conversion:
    """The instance of one conversion at the fixed parameters' values ``fixed``."""
    library = conversion.split(".")[0]
    source = _SOURCES[conversion].format(v=VERIFIED_VERSIONS[library])
    tags = "".join(f".{_TAGS[k]}{_tag(v, k)}" for k, v in fixed.items())
    shown = {k: _tag(v) for k, v in fixed.items()}
    premise_options = {_NOTION_OPTION[k]: v for k, v in fixed.items() if k == "order"}
    conclusion_options = {_NOTION_OPTION[k]: v for k, v in fixed.items() if k != "order"}
    if conclusion == "renyi":  # the order belongs to the conclusion
        premise_options, conclusion_options = {}, {"order": fixed["order"]}
    return Conversion(
        id=conversion + tags, conversion=conversion, library=library, function=function,
        statement=statement.format(**shown), premise=premise, conclusion=conclusion,
        fixed=dict(fixed), premise_options=premise_options,
        conclusion_options=conclusion_options, source=source, template=statement)


def instance(conversion: Conversion, fixed: Mapping[str, float]) -> Conversion:
    """``conversion``'s function at other values of its fixed parameters (a setting a user
    asks for: ``jaxpriv check dp_accounting.compute_epsilon FILE --alpha 3 --delta 1e-7``)."""
    return _record(conversion.conversion, conversion.function, conversion.premise,
                   conversion.conclusion, conversion.template,
                   {name: fixed[name] for name in conversion.fixed})


def _instances(conversion: str, function: Callable[..., float], premise: str, conclusion: str,
               statement: str, grid: Mapping[str, tuple[float, ...]]) -> list[Conversion]:
    """Every instance of one conversion over the product of the fixed parameters' values."""
    combos: list[dict[str, float]] = [{}]
    for name, values in grid.items():
        combos = [{**c, name: v} for c in combos for v in values]
    return [_record(conversion, function, premise, conclusion, statement, fixed)
            for fixed in combos]


#: Every instance of every conversion (see :class:`Conversion` for the id scheme).
CONVERSIONS: list[Conversion] = [
    *_instances("dp_accounting.compute_epsilon", dp_accounting_compute_epsilon, "renyi",
                "eps_at_delta",
                "D_{order} <= r => eps(delta={delta}) <= "
                "dp_accounting.compute_epsilon([{order}], [r], {delta})",
                {"order": ORDERS, "delta": DELTAS}),
    *_instances("dp_accounting.compute_delta", dp_accounting_compute_delta, "renyi", "delta",
                "D_{order} <= r => delta(eps={epsilon}) <= "
                "dp_accounting.compute_delta([{order}], [r], {epsilon})",
                {"order": ORDERS, "epsilon": EPSILONS}),
    *_instances("autodp.rdp_to_approxdp", autodp_rdp_to_approxdp, "zcdp", "eps_at_delta",
                "rho-zCDP => eps(delta={delta}) <= autodp.rdp_to_approxdp(a -> rho*a)({delta})",
                {"delta": DELTAS}),
    *_instances("autodp.rdp_to_delta", autodp_rdp_to_delta, "zcdp", "delta",
                "rho-zCDP => delta(eps={epsilon}) <= autodp.rdp_to_delta(a -> rho*a)({epsilon})",
                {"epsilon": EPSILONS}),
    *_instances("autodp.puredp_to_rdp", autodp_puredp_to_rdp, "ldp", "renyi",
                "eps-DP => D_{order} <= autodp.puredp_to_rdp(eps)({order})",
                {"order": ORDERS}),
    *_instances("opendp.make_pureDP_to_zCDP", opendp_make_pureDP_to_zCDP, "ldp", "zcdp",
                "eps-DP => rho <= opendp make_pureDP_to_zCDP map (eps^2/2)", {}),
    *_instances("opendp.make_zCDP_to_approxDP", opendp_make_zCDP_to_approxDP, "zcdp",
                "eps_at_delta",
                "rho-zCDP => eps(delta={delta}) <= opendp make_zCDP_to_approxDP "
                "profile.epsilon({delta})",
                {"delta": DELTAS}),
    *_instances("opendp.make_zCDP_to_approxDP", opendp_make_zCDP_to_approxDP_delta, "zcdp",
                "delta",
                "rho-zCDP => delta(eps={epsilon}) <= opendp make_zCDP_to_approxDP "
                "profile.delta({epsilon})",
                {"epsilon": EPSILONS}),
    *_instances("prv_accountant.rdp", prv_accountant_rdp, "ldp", "renyi",
                "eps-DP => D_{order} <= prv_accountant PureDPMechanism(eps).rdp({order})",
                {"order": ORDERS}),
    *_instances("prv_accountant.RDP.compute_epsilon", prv_accountant_rdp_to_dp, "renyi",
                "eps_at_delta",
                "D_{order} <= r => eps(delta={delta}) <= prv_accountant "
                "RDP([prv: rdp({order}) = r], [{order}]).compute_epsilon({delta}, [1])[2]",
                {"order": ORDERS, "delta": DELTAS}),
]

#: The instances by id.
CONVERSIONS_BY_ID: dict[str, Conversion] = {c.id: c for c in CONVERSIONS}
