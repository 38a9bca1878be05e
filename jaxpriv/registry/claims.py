"""Claims with parameters: one published claim (Mironov's "D_α ≤ r ⇒ ε(δ) ≤ r + log(1/δ)/(α−1)")
is one :class:`Claim`, its parameters (α, δ, ε, k) values a user sets; a :class:`Relation` is the
claim at one setting of them (an *instance*, ``D6.a3.d1e-7``).

The audit audits each claim over its default grid (the instances registered in the catalog); a
user checks it anywhere (``jaxpriv check D6 FILE --alpha 3 --delta 1e-7``, or the instance id,
which :func:`resolve` builds on demand: a witness written at a new setting re-checks by its id).

Examples:
  >>> from jaxpriv import families, registry
  >>> relation = registry.resolve("D6", {"order": 3.0, "delta": 1e-7})
  >>> relation.id, relation.values
  ('D6.a3.d1e-7', {'order': 3.0, 'delta': 1e-07})
  >>> registry.resolve("D6.a3.d1e-7") is not None   # the id alone says the setting
  True
"""

from __future__ import annotations

import dataclasses
import math
import re
import sys
from typing import Any, Callable, Mapping

from jaxpriv.core.errors import InputError
from jaxpriv.registry.store import CLAIMS, REGISTRY, claim_of, register


@dataclasses.dataclass(frozen=True)
class ClaimParameter:
    """One parameter of a claim.

    Attributes:
      name: the notion option it sets (``order``, ``delta``, ``epsilon``, ``k``): a claim's
        parameters are options of its notions, so an instance evaluates its notions there.
      symbol: how a statement writes it (``α``).
      letter: its tag in an instance id (``a`` in ``D6.a4.d1e-5``).
      flag: the command-line option that sets it (``--alpha``).
      check: ``check(value) -> str | None``: what is wrong with a value (``None``: fine).
      integer: whether values are integers (ids and statements write them without a point).
      scientific: whether ids write it as ``1e-5`` rather than ``0.00001``.
      traced: a claim that shares one program among its instances
        (:mod:`jaxpriv.registry.programs`) passes it as an argument; ``False`` where it sets a
        shape (the number of uses ``k``: a composed level's count vectors), so that each value
        keeps its own program.
      origin: where its precision is measured from (``1`` for an order: what a bound divides by
        is ``α − 1``); a float32 program refuses a value whose distance from it float32 cannot
        hold to 1e-3 (:func:`jaxpriv.registry.programs.check_float32`).
    """

    name: str
    symbol: str
    letter: str
    flag: str
    check: Callable[[float], str | None]
    integer: bool = False
    scientific: bool = False
    traced: bool = True
    origin: float = 0.0

    def value(self, claim_id: str, value: Any) -> float | int:
        """``value`` checked (an :class:`InputError` of one line naming the claim if wrong)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            try:
                value = float(value)
            except (TypeError, ValueError):
                raise InputError(f"{claim_id}: {self.symbol} ({self.flag}) must be a number, "
                                 f"got {value!r}") from None
        value = float(value)
        problem = "is NaN" if math.isnan(value) else self.check(value)
        if problem is None and self.integer and value != int(value):
            problem = "must be an integer"
        if problem:
            raise InputError(f"{claim_id}: {self.symbol} = {value:g} {problem} ({self.flag})")
        return int(value) if self.integer else value

    def tag(self, value: float | int) -> str:
        """The value as an id writes it, shortest first and always read back exactly."""
        if self.integer:
            return f"{self.letter}{int(value)}"
        forms = ([f"{value:.0e}"] if self.scientific else []) + [f"{value:g}", repr(float(value))]
        for form in forms:
            form = form.replace("e-0", "e-").replace("e+0", "e").replace("e+", "e")
            if float(form) == value:
                return f"{self.letter}{form}"
        raise AssertionError(value)  # repr always reads back


ORDER = ClaimParameter("order", "α", "a", "--alpha",
                       lambda a: None if 1.0 < a < math.inf else "must be a finite order > 1",
                       origin=1.0)
DELTA = ClaimParameter("delta", "δ", "d", "--delta",
                       lambda d: "must lie in (0, 1)" if not 0.0 < d < 1.0 else
                       (f"is subnormal: give δ ≥ {sys.float_info.min:.1e} (XLA reads a smaller "
                        "one as 0: log δ = −∞, every bound ∞)" if d < sys.float_info.min
                        else None), scientific=True)
EPSILON = ClaimParameter("epsilon", "ε", "e", "--epsilon",
                         lambda e: None if 0.0 <= e < math.inf else "must be finite and ≥ 0")
USES = ClaimParameter("k", "k", "k", "--k",
                      lambda k: None if 1 <= k <= 10**6 else "must be a number of uses in "
                      "1 … 10^6", integer=True, traced=False)
STANDARD = (ORDER, DELTA, EPSILON, USES)
"""The parameters the command line sets (``--alpha``, ``--delta``, ``--epsilon``, ``--k``)."""


@dataclasses.dataclass(frozen=True)
class Claim:
    """A published claim with parameters.

    Attributes:
      id: its id (``D6``); an instance's id adds each parameter's tag (``D6.a4.d1e-5``).
      statement: the claim in words, its parameters as symbols.
      parameters: :class:`ClaimParameter` records, in the order an id tags them.
      make: ``make(id, **values) -> Relation``: the claim at one setting (not registered).
      grid: the settings the audit takes (a tuple of ``{name: value}``).
      bound: ``bound(x, *p, **values)``, the claimed bound with the parameters as keywords,
        in ``jnp`` (the values may be traced), or ``None``. With it, the engines compile one
        program per claim (and per value of a parameter that is not ``traced``) and pass the
        other values in (:mod:`jaxpriv.registry.programs`); ``make`` must then build each
        instance's bound as this one at its values.
    """

    id: str
    statement: str
    parameters: tuple[ClaimParameter, ...]
    make: Callable[..., Any]
    grid: tuple[Mapping[str, Any], ...] = ()
    bound: Callable[..., Any] | None = None

    def __post_init__(self) -> None:
        if not self.parameters:
            raise InputError(f"claim {self.id}: a claim has at least one parameter")
        if self.bound is not None and not callable(self.bound):
            raise InputError(f"claim {self.id}: bound must be a function bound(x, *p, **values)")
        names = [p.name for p in self.parameters]
        for values in self.grid:
            if set(values) != set(names):
                raise InputError(f"claim {self.id}: a grid setting must give {', '.join(names)}")

    def instance_id(self, values: Mapping[str, Any]) -> str:
        return ".".join([self.id] + [p.tag(values[p.name]) for p in self.parameters])

    def instance(self, **values: Any):
        """The claim at ``values`` (every parameter, checked): the registered instance when
        the audit's grid has it, else a new :class:`Relation` (not registered)."""
        missing = [p for p in self.parameters if values.get(p.name) is None]
        if missing:
            raise InputError(self.needs(missing))
        unknown = sorted(set(values) - {p.name for p in self.parameters})
        if unknown:
            raise InputError(f"{self.id} has no parameter {', '.join(unknown)} "
                             f"({self.described()})")
        checked = {p.name: p.value(self.id, values[p.name]) for p in self.parameters}
        rid = self.instance_id(checked)
        return REGISTRY[rid] if rid in REGISTRY else self.build(checked)

    def build(self, checked: Mapping[str, Any]):
        """The :class:`Relation` at ``checked`` values (not registered), marked as this
        claim's instance."""
        relation = self.make(self.instance_id(checked), **checked)
        object.__setattr__(relation, "claim", self.id)
        object.__setattr__(relation, "values", dict(checked))
        return relation

    def audited_at(self, parameter: ClaimParameter) -> list:
        return list(dict.fromkeys(values[parameter.name] for values in self.grid))

    def described(self) -> str:
        """``parameters α (--alpha) audited at 1.5, 2, 4, 16; δ (--delta) audited at 0.01, 1e-05``."""
        parts = []
        for p in self.parameters:
            at = ", ".join(f"{v:g}" for v in self.audited_at(p))
            parts.append(f"{p.symbol} ({p.flag})" + (f" audited at {at}" if at else ""))
        word = "parameter" if len(self.parameters) == 1 else "parameters"
        return f"{word} " + "; ".join(parts)

    def needs(self, missing) -> str:
        example = self.instance_id(self.grid[0]) if self.grid else None
        flags = " ".join(f"{p.flag} X" for p in missing)
        return (f"{self.id} is a claim with {self.described()}: give {flags}"
                + (f", or an instance id like {example}" if example else ""))

    def parse(self, relation_id: str) -> dict[str, float | int] | None:
        """The values an instance id of this claim names (``None``: not one of its ids)."""
        pattern = re.escape(self.id) + "".join(
            rf"\.{p.letter}(?P<{p.name}>[-+0-9.eE]+?)" for p in self.parameters) + "$"
        match = re.fullmatch(pattern, relation_id.strip(), flags=re.IGNORECASE)
        if not match:
            return None
        try:
            return {p.name: p.value(self.id, float(match[p.name])) for p in self.parameters}
        except ValueError:
            return None


def settings(**axes) -> tuple[dict, ...]:
    """A claim's grid: every combination of the axes' values, the first axis outermost
    (``settings(order=(2, 4), delta=(1e-2, 1e-5))``)."""
    import itertools

    return tuple(dict(zip(axes, combo)) for combo in itertools.product(*axes.values()))


def register_claim(claim: Claim, *, replace: bool = False, check_bound: bool = True) -> Claim:
    """Add a :class:`Claim` and register its instances at every setting of its grid
    (``check_bound`` as in :func:`~jaxpriv.registry.register`: the built-in catalog's are
    checked by the test suite).

    Returns the claim."""
    if not isinstance(claim, Claim):
        raise InputError(f"register_claim() takes a Claim, not {type(claim).__name__}")
    if claim.id.upper() in {c.upper() for c in CLAIMS} and not replace:
        raise InputError(f"claim {claim.id} is already registered")
    CLAIMS[claim.id] = claim
    for values in claim.grid:
        checked = {p.name: p.value(claim.id, values[p.name]) for p in claim.parameters}
        register(claim.build(checked), replace=True, check_bound=check_bound)
    return claim


def resolve(relation_id: str, values: Mapping[str, Any] | None = None,
            fallback: Mapping[str, Any] | None = None):
    """The claim ``relation_id`` names (its id or an instance id) at ``values`` (a value of
    ``None``: not given), the id's own values where not given, then ``fallback``'s (a file's);
    ``None`` if ``relation_id`` names no claim. An :class:`InputError` if a parameter is missing
    or out of range."""
    found = claim_of(relation_id)
    if found is None:
        return None
    claim, own = found
    names = [p.name for p in claim.parameters]
    given = {k: v for k, v in (values or {}).items() if v is not None}
    unknown = sorted(set(given) - set(names))
    if unknown:
        flags = {p.name: p.flag for p in STANDARD}
        raise InputError(f"{claim.id} has no parameter "
                         f"{', '.join(flags.get(u, u) for u in unknown)} ({claim.described()})")
    later = {k: v for k, v in (fallback or {}).items() if k in names and v is not None}
    return claim.instance(**{**later, **own, **given})
