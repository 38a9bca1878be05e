"""The claims: :class:`Relation` (about a mechanism) and :class:`StatisticalRelation` (about a
setting of an estimator), and the sampling and search hints a relation derives from its
condition parameter.

A relation's notions, its check and its derived hints read the registry's store
(:mod:`jaxpriv.registry.store`) and check (:mod:`jaxpriv.registry.checks`), which themselves
import these records: they are reached through the :mod:`jaxpriv.registry` package when a
method runs (it is loaded in full by then).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, ClassVar, Mapping

from jaxpriv.core.errors import InputError
from jaxpriv.core.mechanisms import Mechanism
from jaxpriv.registry.records import (ATOL, RTOL, CheckResult, Sampling, SearchHints, Source,
                                      _check_id, _sources)


def _registry():
    """The :mod:`jaxpriv.registry` package (its store and check), looked up at call time."""
    from jaxpriv import registry

    return registry


@dataclasses.dataclass(frozen=True, eq=False)
class Relation:
    """A claim ``premise ≤ x ∧ condition ⇒ conclusion ≤ bound(x, parameter)`` about a mechanism.

    Attributes:
      id: the name the CLI and reports use (``R1``, ``TV1``, ``dp_accounting.compute_epsilon``).
      statement: the claim in words.
      premise, conclusion: notion keys.
      bound: ``f(x, parameter)``, vectorized, float64-safe (``lambda x, *p: ...`` when it has no
        parameter).
      sources: where it is claimed (:class:`Source`, any paper).
      condition: the condition in words.
      parameter: notion key of the condition parameter (``ε``), or ``None``.
      parameter_limit: if set, the condition is ``parameter ≤ parameter_limit``; else the
        parameter is free and the bound is evaluated at it.
      premise_limit: if set, the condition also requires ``x ≤ premise_limit``.
      requires: notion key of a 0/1 notion that must be 1 for the condition to hold.
      scales_with_parameter: the bound is ``f(x, 1)·parameter`` (e.g. γ = (1+4ξ)β): the search
        maximizes ``conclusion / parameter`` and figures draw that ratio.
      options: notion parameters the engines evaluate the claim at (a check of a file takes
        the file's own).
      sampling, search: hints for the sweep and the search; ``None`` (the default): derived
        when registered from the condition parameter's ``held_by`` (a uniform prior for
        ``ε_unif ≤ tiny``, priors ε-close to uniform, beliefs ε-close to the prior, else free).
      certificate: ``certificate(x, eps, *, n, r) -> (sup, min_slack)`` (float64 arrays, or
        ``None`` where unknown): the exact envelope, proved at ``proof``; or
        ``(attained, min_slack, upper)`` for a certified bracket ``attained ≤ E ≤ upper``
        (``min_slack`` ``None``: computed from the bound). It may also take the keywords
        ``prior`` (the search's prior setting: ``"free"``, ``"uniform"``, ``"close"``) and any
        notion parameter (e.g. ``law``); one that does not take ``prior`` is only used at the
        relation's own search prior.
      proof: where the certificate is proved (a link).
      ratio_label: axis label of the ratio a ``scales_with_parameter`` relation is drawn as.
      quick: whether the quick audit of every relation takes it (a claim registered at many
        parameter values keeps a few there; the standard and full audits, and any selection
        that names it, take every instance).
      claim, values: the :class:`~jaxpriv.registry.claims.Claim` this relation is an instance of
        (its id) and the values of the claim's parameters here (``None`` and ``{}`` for a claim
        without parameters); set by the claim. The values are notion options the check holds
        fixed: a file that sets one otherwise is refused, not mixed in.
    """

    id: str
    statement: str
    premise: str
    conclusion: str
    bound: Callable[..., Any]
    sources: tuple[Source, ...] = ()
    condition: str = "—"
    parameter: str | None = None
    parameter_limit: float | None = None
    premise_limit: float | None = None
    requires: str | None = None
    scales_with_parameter: bool = False
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    sampling: Sampling | None = None
    search: SearchHints | None = None
    certificate: Callable[..., Any] | None = None
    proof: str = ""
    ratio_label: str = ""
    quick: bool = True
    claim: str | None = None
    values: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    kind: ClassVar[str] = "mechanism"

    def __post_init__(self) -> None:
        _check_id(self.id)
        what = f"relation {self.id}"
        for name in ("statement", "premise", "conclusion", "condition"):
            if not isinstance(getattr(self, name), str):
                raise InputError(f"{what}: {name} must be a string")
        if not callable(self.bound):
            raise InputError(f"{what}: bound must be a function bound(x, parameter)")
        if self.certificate is not None and not callable(self.certificate):
            raise InputError(f"{what}: certificate must be a function or None")
        object.__setattr__(self, "sources", _sources(self.sources, what))
        object.__setattr__(self, "options", dict(self.options))
        object.__setattr__(self, "values", dict(self.values))
        if not isinstance(self.sampling, (Sampling, type(None))) or not isinstance(
                self.search, (SearchHints, type(None))):
            raise InputError(f"{what}: sampling must be a Sampling and search a SearchHints")
        if self.notions <= set(_registry().NOTIONS):
            _derive_hints(self)

    @property
    def notions(self) -> frozenset[str]:
        """Every notion the relation's check evaluates."""
        return frozenset({self.premise, self.conclusion, self.parameter, self.requires} - {None})

    @property
    def needs_records(self) -> bool:
        """Whether its notions are defined on databases (a records layout is needed)."""
        notion = _registry().notion
        return any(notion(key).needs_records for key in self.notions)

    @property
    def notion_params(self) -> frozenset[str]:
        """Every parameter name the relation's notions take."""
        notion = _registry().notion
        return frozenset(p for key in self.notions for p in notion(key).params)

    def check(self, mech: Mechanism, *, parameter=None, rtol: float = RTOL, atol: float = ATOL,
              **options: Any) -> CheckResult:
        """Evaluate the relation on ``mech`` in float64 at its own ``options`` (those given
        here override them; one given as ``None`` — a file that does not set it — keeps the
        relation's); see :func:`jaxpriv.registry.check`."""
        given = {key: value for key, value in options.items() if value is not None}
        for key, fixed in self.values.items():
            if key in given and not _same(given[key], fixed):
                raise InputError(
                    f"{self.id} is {self.claim} at {key} = {fixed:g}, but {key} = {given[key]!r} "
                    f"was given (a file's field?): check {self.claim} at that value instead "
                    f"(jaxpriv check {self.claim} FILE with the parameter's flag)")
        return _registry().check(self, mech, parameter=parameter, rtol=rtol, atol=atol,
                                 **{**self.options, **given})


def _same(given: Any, fixed: Any) -> bool:
    try:
        return float(given) == float(fixed)
    except (TypeError, ValueError):
        return False


@dataclasses.dataclass(frozen=True, eq=False)
class StatisticalRelation:
    """A published claim about an estimator rather than a mechanism: its subject is a *setting*
    (e.g. ``(T, κ₁, ε)``), and it carries the strategies the statistical engine runs.

    Attributes:
      id, statement, sources, condition: as for :class:`Relation`.
      premise, conclusion: what ``x`` and the conclusion are, in words.
      fields: the keys a witness file carries (``{"relation": id, **fields}``).
      check_fn: ``(**fields) -> CheckResult``, exact, float64.
      rtol: the relative tolerance a violation must exceed.
      strategies: a :class:`Strategies` (draw, evaluate, search).
      parameter_label: what the witness's ``parameter`` is, in words (figures).
      log_slack: the slack underflows float64, so figures and verdicts use its log.
      grid: default premise grid ``(low, high, points)`` of the search.
      x_range: ``(low, high)``: the premise levels where the claim is made (open interval).
      fixed_grid: the search always runs on ``grid`` (an audit budget does not resize it).
      bound_curve: the claimed bound as a function of the premise alone, where it is one (for
        figures), else ``None``.
    """

    id: str
    statement: str
    sources: tuple[Source, ...]
    premise: str
    conclusion: str
    condition: str
    fields: tuple[str, ...]
    check_fn: Callable[..., CheckResult]
    rtol: float = RTOL
    strategies: Any = None
    parameter_label: str = ""
    log_slack: bool = False
    grid: tuple[float, float, int] = (0.25, 10.0, 40)
    x_range: tuple[float, float] | None = None
    fixed_grid: bool = False
    bound_curve: Callable[[Any], Any] | None = None

    kind: ClassVar[str] = "statistical"
    needs_records: ClassVar[bool] = False
    parameter: ClassVar[None] = None
    premise_limit: ClassVar[None] = None
    scales_with_parameter: ClassVar[bool] = False

    def __post_init__(self) -> None:
        _check_id(self.id)
        object.__setattr__(self, "sources", _sources(self.sources, f"relation {self.id}"))

    def check(self, **fields: Any) -> CheckResult:
        """Check the claim at one setting (the witness fields), exactly; see ``check_fn``."""
        missing = [f for f in self.fields if fields.get(f) is None]
        if missing:
            raise InputError(f"{self.id} needs {', '.join(repr(f) for f in missing)} "
                             f"(a witness file carries 'relation' and {', '.join(self.fields)})")
        for name in self.fields:  # ("T": "100" was read as the number, "T": true refused)
            if _has_text(fields[name]):
                raise InputError(f"{self.id}: '{name}' must be a number (or a list of numbers), "
                                 f"got {fields[name]!r}")
        return self.check_fn(**{f: fields[f] for f in self.fields})


def _has_text(value) -> bool:
    """Whether ``value`` (a witness field) is, or holds, a string."""
    if isinstance(value, (str, bytes)):
        return True
    return isinstance(value, (list, tuple)) and any(_has_text(v) for v in value)


def _derive_hints(relation: Relation) -> None:
    """Fill a relation's missing sampling and search hints from its condition parameter's
    ``held_by`` (records are frozen: set once, at registration)."""
    held = _registry().NOTIONS[relation.parameter].held_by if relation.parameter else None
    # a limit of (about) 0 pins the condition (a uniform prior, b = π); any other limit is
    # explored like a free parameter, the check enforcing the limit
    fixed = relation.parameter_limit is not None and relation.parameter_limit <= 1e-9
    if relation.sampling is None:
        if held == "prior":
            hint = Sampling(prior="uniform") if fixed else Sampling(prior="close", param_max=3.0,
                                                                    param_bins=6)
        elif held == "belief":
            hint = Sampling(belief_eps_max=1.0, param_max=3.0, param_bins=1 if fixed else 6)
        else:
            hint = Sampling()
        object.__setattr__(relation, "sampling", hint)
    if relation.search is None:
        if held == "prior":
            hint = SearchHints(prior="uniform") if fixed else SearchHints(
                prior="close", gridded_parameter=True)
        elif held == "belief":
            hint = SearchHints(belief="close", gridded_parameter=not fixed)
        else:
            hint = SearchHints()
        object.__setattr__(relation, "search", hint)
