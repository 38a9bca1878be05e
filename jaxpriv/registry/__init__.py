"""Notions and relations as data: the records every engine works from, and the one registry.

A :class:`Notion` is a record: a key, a float64 reference ``level(mechanism, **params)`` that
broadcasts over batch axes, a one-line definition with its source, its unit, the parameters it
takes (with defaults), whether it needs a records layout, and what the engines may use instead
of the reference: a float32 ``screen`` (a field of the fused kernel), a smooth ``surrogate``
for the search, a closed-form ``retract`` (premise retraction), and the ``post_processing``
flag (the level cannot increase under post-processing, which lets the search hold it at any
level by mixing with the constant mechanism).

A :class:`Relation` is a record of a claim ``premise ≤ x ∧ condition ⇒ conclusion ≤ bound(x, ε)``
carrying everything the engines need: sources, the condition, how to sample for it
(:class:`Sampling`), how to search it (:class:`SearchHints`), its certified envelope and the
link to its proof where one is known, and display hints. A :class:`StatisticalRelation` is a
claim whose subject is a setting of an estimator rather than a mechanism.

The engines (:mod:`jaxpriv.engines.sweep`, :mod:`jaxpriv.engines.search`, :mod:`jaxpriv.engines.certify`,
:mod:`jaxpriv.engines.settings`) read these records and never branch on an id or a notion name.
Built-in notions live in :mod:`jaxpriv.catalog.notions`, the relations of the three seed papers in
:mod:`jaxpriv.catalog.seed_papers` and :mod:`jaxpriv.catalog.statistical`; a user's own are added with
:func:`register`, from a plugin file (:func:`load_plugin`, ``--plugin FILE.py``) or an installed
package's entry point in the group ``jaxpriv.plugins``.

Examples:
  >>> import jax.numpy as jnp
  >>> from jaxpriv import Notion, Relation, Source, families, register
  >>> def tv_rows(mech, **params):
  ...     K = jnp.exp(mech.log_K)
  ...     return 0.5 * jnp.abs(K[..., :, None, :] - K[..., None, :, :]).sum(-1).max(axis=(-2, -1))
  >>> _ = register(Notion("tv_rows_doc", tv_rows, doc="largest TV distance between rows",
  ...                     post_processing=True), replace=True)
  >>> _ = register(Relation(id="TVDOC", statement="ε-LDP ⇒ TV ≤ tanh(ε/2)", premise="ldp",
  ...                       conclusion="tv_rows_doc", bound=lambda x, *p: jnp.tanh(x / 2),
  ...                       sources=(Source("Kairouz, Oh, Viswanath 2015"),)), replace=True)
  >>> result = get("TVDOC").check(families.randomized_response(1.0))
  >>> round(float(result.slack), 9), bool(result.violated)  # binary RR attains it
  (1.0, False)
  >>> unregister("TVDOC"); unregister("tv_rows_doc")
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import re
import sys
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpriv.core.errors import InputError
from jaxpriv.core.mechanisms import Mechanism

RTOL = 1e-9
"""Relative tolerance a conclusion must exceed its bound by to count as a violation."""
ATOL = 1e-12
"""Absolute tolerance, for bounds at or near 0."""

PAPERS = {
    "002": ("002_a929441205351d74.txt", "Zhang, Chen — Bridging Privacy and Robustness for "
            "Trustworthy Machine Learning"),
    "003": ("003_ed377a0eab1a130b.txt", "Zhang, Fei, Chen, Jin — Deciphering the Interplay "
            "between LDP, ABP and MBP"),
    "004": ("004_a00d4f65f210ea49.txt", "Zhao — Relations Among Different Privacy Notions"),
}
"""The seed papers (``../shared/papers``) by the short key their sources use."""

UNITS = ("nats", "√nats", "probability", "indicator", "bits", "")
"""Units a level may carry (``""``: dimensionless other than those)."""


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()
"""Default of a notion parameter that has none: evaluating without it is an input error."""

_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-]*$")
RESERVED_PARAMS = frozenset({"K", "prior", "belief", "values", "records", "relation", "index",
                             "claimed", "parameter", "eps", "beta", "grid_point", "restart",
                             "gates"})
"""Keys a witness file already uses: a notion parameter may not take one of these names."""


# --------------------------------------------------------------------------------------------
# records
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Source:
    """Where a notion or claim comes from: any paper (free text) and its theorem number.

    ``paper`` may be a key of :data:`PAPERS` (``"003"``) for the seed papers."""

    paper: str
    theorem: str = ""

    def __str__(self) -> str:
        return f"{self.paper} {self.theorem}".strip()


def is_number(value: Any) -> bool:
    """Whether a value read from a file is a number: an int or float (±inf allowed), not a
    bool, not NaN."""
    return isinstance(value, (int, float, np.number)) and not isinstance(value, bool) \
        and not math.isnan(value)


def _parameter_value(value: Any) -> bool:
    """Whether a notion parameter read from a file or the command line is usable: a name, a
    number, or a non-empty (nested) list of numbers; arrays pass as they are."""
    if isinstance(value, (list, tuple)):
        return bool(value) and all(not isinstance(v, str) and _parameter_value(v) for v in value)
    return is_number(value) or isinstance(value, (str, np.ndarray, jax.Array, jax.core.Tracer))


@dataclasses.dataclass(frozen=True, eq=False)
class Notion:
    """A privacy notion: one level per mechanism.

    Attributes:
      key: the name relations and the CLI use (letters, digits, ``_ . -``).
      level: the float64 reference, ``level(mech, **params) -> (*batch,)``; it must broadcast
        over the mechanism's batch axes and return values in ``[0, +∞]`` (never NaN).
      doc: a one-line definition.
      source: where it is defined (a :class:`Source` or free text).
      unit: one of :data:`UNITS`.
      params: the parameters ``level`` takes, with their defaults (:data:`REQUIRED` for none).
      needs_records: its secrets are databases (the mechanism needs a records layout).
      needs_prior: it depends on the prior (informational; the engines draw priors anyway).
      post_processing: it cannot increase under post-processing (data processing), so mixing
        with the constant mechanism lowers it monotonically: the search can hold it at any
        premise level by bisection on the mixing weight.
      screen: a field of the fused kernels (:data:`jaxpriv.kernels.fused.SCREENS`) that computes the
        same level in float32 (the sweep's fast screen), or ``None``.
      screen_requires: parameter values under which ``screen`` applies (e.g. the record law).
      surrogate: a smooth stand-in for the search, ``surrogate(mech, temperature, **params)``
        (maxima as log-sum-exps at ``temperature``; the hard level at ``None``).
      retract: a closed-form premise retraction, ``retract(mech, x, temperature) -> log(1−t)``
        for the least ``t`` such that ``(1−t)K + t/m`` has level ``≤ x`` (0 if it has):
        the search's fast path instead of the generic bisection.
      label: the label ``jaxpriv eval`` prints (default: ``doc``).
      details: ``details(mech, **params) -> {name: array}``: vectors behind the level that
        ``jaxpriv eval`` prints as well (e.g. ABP per true secret).
      show: ``jaxpriv eval`` prints it (at its default parameters).
      held_by: as a relation's condition parameter (``notion ≤ ε``), what the engines move to
        satisfy it: ``"prior"`` (towards uniform) or ``"belief"`` (towards the prior); the
        default sampling and search hints of such a relation follow from it.
    """

    key: str
    level: Callable[..., Any]
    doc: str = ""
    source: Source | str | None = None
    unit: str = "nats"
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    needs_records: bool = False
    needs_prior: bool = False
    post_processing: bool = False
    screen: str | None = None
    screen_requires: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    surrogate: Callable[..., Any] | None = None
    retract: Callable[..., Any] | None = None
    label: str = ""
    details: Callable[..., dict] | None = None
    show: bool = True
    held_by: str | None = None

    def __post_init__(self) -> None:
        what = f"notion {self.key!r}"
        if self.held_by not in (None, "prior", "belief"):
            raise InputError(f"{what}: held_by must be 'prior', 'belief' or None")
        if not isinstance(self.key, str) or not _KEY.match(self.key):
            raise InputError(f"notion key must be a name of letters, digits, '_', '.', '-' "
                             f"starting with a letter, got {self.key!r}")
        if not callable(self.level):
            raise InputError(f"{what}: level must be a function level(mech, **params), got "
                             f"{type(self.level).__name__}")
        for name in ("surrogate", "retract", "details"):
            if getattr(self, name) is not None and not callable(getattr(self, name)):
                raise InputError(f"{what}: {name} must be a function or None")
        if self.unit not in UNITS:
            raise InputError(f"{what}: unit must be one of {', '.join(map(repr, UNITS))}, got "
                             f"{self.unit!r}")
        if not isinstance(self.params, Mapping):
            raise InputError(f"{what}: params must be a mapping of parameter names to defaults")
        clash = sorted(set(self.params) & RESERVED_PARAMS)
        if clash:
            raise InputError(f"{what}: parameter name(s) {', '.join(clash)} are reserved (a "
                             "witness file uses them); choose others")
        object.__setattr__(self, "params", dict(self.params))
        object.__setattr__(self, "screen_requires", dict(self.screen_requires))

    def resolve(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """This notion's parameters out of ``options`` (others ignored), defaults filled in."""
        values = {}
        for name, default in self.params.items():
            value = options.get(name)
            if value is None:
                value = default
            if value is REQUIRED:
                raise InputError(f"notion {self.key!r} needs '{name}' (in the witness file or "
                                 "as an option)")
            values[name] = self.checked(name, value)
        return values

    def checked(self, name: str, value: Any) -> Any:
        """``value`` of parameter ``name``, if usable (a name, a number that is not NaN, a
        non-empty list of numbers; a number where the default is one); else an InputError."""
        default = self.params.get(name)
        if value is None and default is None:  # an optional parameter left out
            return None
        if not _parameter_value(value) or (isinstance(default, (int, float)) and
                                           isinstance(value, (list, tuple, str))):
            kind = "a number" if isinstance(default, (int, float)) else \
                "a number, a list of numbers or a name"
            raise InputError(f"notion {self.key!r}: '{name}' must be {kind}, got {value!r}")
        return value

    def evaluate(self, mech: Mechanism, options: Mapping[str, Any] | None = None):
        """The reference level at ``options`` (extra options are ignored)."""
        return self.level(mech, **self.resolve(options or {}))

    def screens(self, options: Mapping[str, Any]) -> bool:
        """Whether the float32 ``screen`` computes this level at ``options``."""
        if self.screen is None:
            return False
        resolved = {name: self.params.get(name) if options.get(name) is None else options[name]
                    for name in self.screen_requires}
        return all(resolved[name] == value for name, value in self.screen_requires.items())

    @property
    def title(self) -> str:
        return self.label or self.doc or self.key


@dataclasses.dataclass(frozen=True)
class Sampling:
    """How a sweep draws mechanisms for a relation (a hint the sampler reads, not an engine
    branch); see :class:`jaxpriv.kernels.samplers.SamplerSpec` for the first four fields.

    Attributes:
      prior: ``"uniform"``, ``"close"`` (ε-close to uniform, ε spread) or ``"dirichlet"``.
      belief_eps_max: tilt the belief away from the prior by up to this much (0: belief = prior).
      values: draw output values (the PAC notions).
      prior_zero_fraction: share of priors that rule out some secrets.
      x_max: premise bins span ``[0, x_max]``.
      param_max, param_bins: condition-parameter bins (``param_bins = 1``: none).
    """

    prior: str = "dirichlet"
    belief_eps_max: float = 0.0
    values: bool = False
    prior_zero_fraction: float = 0.0
    x_max: float = 10.0
    param_max: float = 0.0
    param_bins: int = 1


@dataclasses.dataclass(frozen=True)
class SearchHints:
    """How the adversarial search holds a relation's condition.

    Attributes:
      prior: ``"uniform"`` (held fixed), ``"close"`` (``ε_unif(π) ≤ ε``, mixed towards uniform)
        or ``"free"``.
      belief: ``"prior"`` (``b = π``) or ``"close"`` (``ε_bel(b, π) ≤ ε``, mixed towards π).
      gates: outputs carry soft failure gates (PAC notions with ``μ = 0, α = 1``): a gate is an
        output split in two proportional copies, so every ratio is unchanged.
      gridded_parameter: the bound is claimed at the grid's ``ε`` (the search's ``--param``).
      grid_limit: the largest premise level worth searching, besides ``premise_limit`` (e.g. a
        probability premise whose bound is infinite from ½).
    """

    prior: str = "free"
    belief: str = "prior"
    gates: bool = False
    gridded_parameter: bool = False
    grid_limit: float | None = None


class Certificate(NamedTuple):
    """A certified envelope point (float64 arrays shaped like ``x``), or a certified bracket.

    In the manner of prv_accountant's (lower, estimate, upper): ``conclusion`` is attained by a
    real mechanism, ``upper`` is a proved upper bound on the envelope, and they are equal where
    the envelope is exact. So the least slack lies in ``[min_slack_lower, min_slack]``.

    Attributes:
      conclusion: ``E_R(x, ε)``, the supremum of the conclusion level where exact; the lower end
        of the bracket (attained) otherwise (NaN where the relation's envelope is not a
        conclusion level alone, e.g. a bound that scales with the parameter).
      min_slack: the least slack any mechanism can have there (exact), or the least slack a
        real mechanism reaches (the bracket's upper end).
      source: where the closed form is proved.
      upper: the bracket's upper end of the envelope (equal to ``conclusion`` where exact).
      min_slack_lower: the least slack's certified lower end (``f/upper``; = ``min_slack``
        where exact).
      bound: the claimed bound ``f(x, ε)`` at the same points.
    """

    conclusion: np.ndarray
    min_slack: np.ndarray
    source: str
    upper: np.ndarray | None = None
    min_slack_lower: np.ndarray | None = None
    bound: np.ndarray | None = None

    @property
    def exact(self) -> np.ndarray:
        """Where the envelope is known exactly (the bracket's ends agree to 1e-9)."""
        lower = self.min_slack if self.min_slack_lower is None else self.min_slack_lower
        return np.isclose(lower, self.min_slack, rtol=1e-9, atol=0.0, equal_nan=True) | (
            np.isinf(self.min_slack) & np.isinf(lower))


class CheckResult(NamedTuple):
    """Outcome of checking one relation on a (batch of) mechanism(s); float64 numpy arrays.

    Attributes:
      relation: the relation id.
      premise: premise level ``x``.
      parameter: the measured condition parameter (e.g. ``ε_unif(π)``), 0 if none.
      parameter_used: the parameter the bound is evaluated at (the measured one unless given).
      condition_holds: the relation's condition holds, so the bound is claimed.
      conclusion: conclusion level.
      bound: claimed bound ``f(x, parameter_used)``.
      slack: ``bound / conclusion`` (``+∞`` when the conclusion is 0 or the bound infinite).
      violated: condition holds and ``conclusion > bound·(1+RTOL) + ATOL``.
    """

    relation: str
    premise: np.ndarray
    parameter: np.ndarray
    parameter_used: np.ndarray
    condition_holds: np.ndarray
    conclusion: np.ndarray
    bound: np.ndarray
    slack: np.ndarray
    violated: np.ndarray


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
        if not isinstance(self.sampling, (Sampling, type(None))) or not isinstance(
                self.search, (SearchHints, type(None))):
            raise InputError(f"{what}: sampling must be a Sampling and search a SearchHints")
        if self.notions <= set(NOTIONS):
            _derive_hints(self)

    @property
    def notions(self) -> frozenset[str]:
        """Every notion the relation's check evaluates."""
        return frozenset({self.premise, self.conclusion, self.parameter, self.requires} - {None})

    @property
    def needs_records(self) -> bool:
        """Whether its notions are defined on databases (a records layout is needed)."""
        return any(notion(key).needs_records for key in self.notions)

    @property
    def notion_params(self) -> frozenset[str]:
        """Every parameter name the relation's notions take."""
        return frozenset(p for key in self.notions for p in notion(key).params)

    def check(self, mech: Mechanism, *, parameter=None, rtol: float = RTOL, atol: float = ATOL,
              **options: Any) -> CheckResult:
        """Evaluate the relation on ``mech`` in float64 at its own ``options`` (those given
        here override them); see :func:`check`."""
        return check(self, mech, parameter=parameter, rtol=rtol, atol=atol,
                     **{**self.options, **options})



class Strategies(NamedTuple):
    """What a statistical relation gives the engine.

    Attributes:
      sweep_step: ``sweep_step(config) -> (step, table)``; ``step(key, table)`` draws
        ``config.chunk`` settings and returns their coordinates (one array per witness field,
        first axis the chunk), the log conclusion and the log bound (float64), then any extra
        arrays ``on_chunk`` reads.
      fields: one setting's coordinates → its witness fields (``{field: value}``).
      violated: ``(log conclusion, log bound) -> bool array``: the sweep's float64 test (every
        hit is re-checked from scratch before it counts).
      search: ``search(config, progress) -> bins``, ``progress(total, unit)`` the engine's
        progress bar (``None`` when it shows none): per grid point ``g`` (key ``str(g)``)
        ``{"count", "log_slack", "fields", "x"}``.
      defaults: per mode, config fields the relation sets unless given.
      initial: ``() -> dict``: extra run state (checkpointed).
      on_chunk: ``(extra, config, settings, log_y, extra_outputs) -> None``: per-chunk checks.
      summary: ``(extra, config) -> dict``: what the run reports of ``extra``.
    """

    sweep_step: Callable
    fields: Callable
    violated: Callable
    search: Callable
    defaults: dict = {}
    initial: Callable | None = None
    on_chunk: Callable | None = None
    summary: Callable | None = None

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
        return self.check_fn(**{f: fields[f] for f in self.fields})


def _check_id(rid) -> None:
    if not isinstance(rid, str) or not _KEY.match(rid):
        raise InputError(f"relation id must be a name of letters, digits, '_', '.', '-' "
                         f"starting with a letter, got {rid!r}")


def _sources(sources, what: str) -> tuple[Source, ...]:
    if isinstance(sources, (Source, str)):
        sources = (sources,)
    out = []
    for s in sources:
        if isinstance(s, str):
            s = Source(s)
        if not isinstance(s, Source):
            raise InputError(f"{what}: sources must be Source records or strings")
        out.append(s)
    return tuple(out)


# --------------------------------------------------------------------------------------------
# evaluation
# --------------------------------------------------------------------------------------------


def slack(bound, conclusion):
    """``bound / conclusion`` with ``x/0 = +∞`` and ``∞/∞ = +∞`` (an infinite bound is vacuous)."""
    bound = jnp.asarray(bound)
    conclusion = jnp.asarray(conclusion)
    vacuous = (conclusion <= 0) | jnp.isinf(bound)
    ratio = bound / jnp.where(vacuous, 1.0, conclusion)
    return jnp.where(vacuous, jnp.inf, ratio)


def evaluate(relation: Relation, mech: Mechanism, *, parameter=None, rtol: float = RTOL,
             atol: float = ATOL, levels: Mapping[str, jax.Array] | None = None,
             **options: Any) -> CheckResult:
    """The check's arithmetic in the mechanism's own dtype, as JAX arrays (jit-able).

    The sweep runs this in float32 to find candidates; :func:`check` runs it in float64 to
    decide. ``levels`` may carry notion levels already computed for these options (the sweep's
    fused kernel); the others are computed here. Other arguments as in :func:`check`.
    """
    levels = levels or {}

    def level_of(key):
        return levels[key] if key in levels else notion(key).evaluate(mech, options)

    x = level_of(relation.premise)
    y = level_of(relation.conclusion)
    measured = jnp.zeros_like(x) if relation.parameter is None else level_of(relation.parameter)
    used = measured if parameter is None else jnp.broadcast_to(
        jnp.asarray(parameter, x.dtype), measured.shape)
    holds = measured <= used
    if relation.parameter_limit is not None:
        holds &= measured <= relation.parameter_limit
    if relation.premise_limit is not None:
        holds &= x <= relation.premise_limit
    if relation.requires is not None:
        holds &= level_of(relation.requires) > 0
    bound = jnp.broadcast_to(jnp.asarray(relation.bound(x, used), x.dtype), x.shape)
    violated = holds & (y > bound * (1.0 + rtol) + atol)
    return CheckResult(relation.id, x, measured, used, holds, y, bound, slack(bound, y), violated)


def check(relation: Relation, mech: Mechanism, *, parameter=None, rtol: float = RTOL,
          atol: float = ATOL, **options: Any) -> CheckResult:
    """Check ``relation`` on ``mech`` (any batch shape), recomputing every level in float64.

    Args:
      relation: a registry entry.
      mech: the mechanism(s); cast to float64 here.
      parameter: the condition parameter the bound is claimed at (default: the measured one,
        which gives the tightest claim).
      rtol, atol: violation tolerance.
      **options: what the notions need (their ``params``: ``law``, ``mu``, ...).

    Returns:
      a :class:`CheckResult` of float64 numpy arrays.
    """
    with jax.enable_x64(True):
        mech = mech.astype(jnp.float64)
        key = _check_key(relation, parameter is None, rtol, atol, options)
        compiled = _compiled_check(key)
        if compiled is not None:
            try:
                arrays = compiled(mech, 0.0 if parameter is None else parameter)
                return CheckResult(relation.id, *(np.asarray(a) for a in arrays))
            except jax.errors.JAXTypeError:  # a notion or bound that only runs op by op
                _not_compiled.add(key)
        result = evaluate(relation, mech, parameter=parameter, rtol=rtol, atol=atol, **options)
        return CheckResult(relation.id, *(np.asarray(a) for a in result[1:]))


_compiled_checks: dict[Any, Callable] = {}
_not_compiled: set[Any] = set()


def _check_key(relation, measured: bool, rtol, atol, options):
    try:
        key = (relation, measured, rtol, atol, tuple(sorted(options.items())))
        hash(key)
        return key
    except TypeError:  # an unhashable option: not cached
        return None


def _compiled_check(key):
    """:func:`check`'s arithmetic as one compiled program per relation and options (op by op,
    a database relation's float64 check compiled dozens of small programs, ~1 s), or ``None``
    where it cannot be cached (``key`` None) or compiled."""
    if key is None or key in _not_compiled:
        return None
    if key not in _compiled_checks:
        relation, measured, rtol, atol, items = key
        options = dict(items)

        def run(mech, parameter):
            result = evaluate(relation, mech, parameter=None if measured else parameter,
                              rtol=rtol, atol=atol, **options)
            return tuple(result[1:])
        _compiled_checks[key] = jax.jit(run)
    return _compiled_checks[key]


def level(key: str, mech: Mechanism, **params: Any):
    """The float64 reference level of notion ``key`` on ``mech`` (one per mechanism of the batch).

    Examples:
      >>> from jaxpriv import families, level
      >>> round(float(level("ldp", families.randomized_response(1.0))), 6)
      1.0
    """
    record = notion(key)
    unknown = sorted(set(params) - set(record.params))
    if unknown:
        takes = ", ".join(record.params) or "no parameters"
        raise InputError(f"notion {key!r} takes {takes}; not {', '.join(unknown)}")
    if record.needs_records and mech.records is None:
        raise InputError(f"notion {key!r} is defined on databases: the mechanism needs a "
                         "records layout")
    with jax.enable_x64(True):  # compiled: op by op, iterative notions take seconds
        return np.asarray(jax.jit(lambda m: record.evaluate(m, params))(
            mech.astype(jnp.float64)))


# --------------------------------------------------------------------------------------------
# the registry
# --------------------------------------------------------------------------------------------

NOTIONS: dict[str, Notion] = {}
"""Every registered notion by key."""
REGISTRY: dict[str, Relation | StatisticalRelation] = {}
"""Every registered relation by id."""
OPTIONAL: dict[str, str] = {}
"""Id prefixes of relations registered only when an optional package is installed, and what to
install (named when a selection finds none of them)."""


def register(record, *, replace: bool = False):
    """Add a :class:`Notion`, :class:`Relation` or :class:`StatisticalRelation` (``replace=True``
    to overwrite one of the same name). A relation's notions must be registered first.
    Returns the record."""
    if isinstance(record, Notion):
        if record.key in NOTIONS and not replace:
            raise InputError(f"notion {record.key!r} is already registered")
        NOTIONS[record.key] = record
        return record
    if not isinstance(record, (Relation, StatisticalRelation)):
        raise InputError(f"register() takes a Notion, Relation or StatisticalRelation, not "
                         f"{type(record).__name__}")
    if _lookup_key(record.id) in {_lookup_key(r) for r in REGISTRY} and not replace:
        raise InputError(f"relation {record.id} is already registered")
    if record.kind == "mechanism":
        for key in sorted(record.notions):
            if key not in NOTIONS:
                raise InputError(f"relation {record.id} uses unknown notion {key!r}; "
                                 f"registered: {', '.join(NOTIONS)}")
        _check_bound(record)
        _derive_hints(record)
    for existing in [r for r in REGISTRY if _lookup_key(r) == _lookup_key(record.id)]:
        del REGISTRY[existing]
    REGISTRY[record.id] = record
    return record


def unregister(name: str) -> None:
    """Remove a relation (by id) or a notion (by key); no error if there is none."""
    for rid in [r for r in REGISTRY if _lookup_key(r) == _lookup_key(name)]:
        del REGISTRY[rid]
    NOTIONS.pop(name, None)


def _derive_hints(relation: Relation) -> None:
    """Fill a relation's missing sampling and search hints from its condition parameter's
    ``held_by`` (records are frozen: set once, at registration)."""
    held = NOTIONS[relation.parameter].held_by if relation.parameter else None
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


def _check_bound(relation: Relation) -> None:
    """A bound must take ``(x, parameter)`` and return one number per ``x``: traced once,
    abstractly (:func:`jax.eval_shape`, so registering never starts a JAX backend)."""
    scalar = jax.ShapeDtypeStruct((), jnp.float32)
    try:
        out = jax.eval_shape(lambda x, p: jnp.asarray(relation.bound(x, p)), scalar, scalar)
    except Exception as error:  # a plugin's function: any failure is the plugin's
        raise InputError(f"relation {relation.id}: bound(x, parameter) failed: "
                         f"{type(error).__name__}: {error}") from None
    if getattr(out, "shape", None) != ():
        raise InputError(f"relation {relation.id}: bound(x, parameter) must return one number "
                         f"per x (got shape {getattr(out, 'shape', None)})")


def _lookup_key(name: str) -> str:
    return name.strip().upper()


def get(relation_id: str):
    """The registered relation with this id (case-insensitive), or an InputError naming the ids."""
    key = _lookup_key(str(relation_id))
    for rid, relation in REGISTRY.items():
        if _lookup_key(rid) == key:
            return relation
    hint = _optional_hint(str(relation_id))
    raise InputError(hint or f"unknown relation {relation_id!r}; registered: "
                     f"{', '.join(REGISTRY)}")


def notion(key: str) -> Notion:
    """The registered notion with this key, or an InputError naming the keys."""
    if key not in NOTIONS:
        raise InputError(f"unknown notion {key!r}; registered: {', '.join(NOTIONS)}")
    return NOTIONS[key]


def select(pattern: str | None) -> list[str]:
    """Relation ids matching a comma list of ids or prefixes ending in ``*`` (``'opendp.*'``;
    a prefix matches case-sensitively where it can, else in any case);
    an id registered only at parameter values (``D6`` as ``D6.a2.d1e-5``, …) selects them all;
    ``None``/``"all"``: every relation."""
    if pattern is None or pattern.strip().lower() == "all":
        return list(REGISTRY)
    chosen = []
    parts = [p.strip() for p in pattern.split(",") if p.strip()]
    if not parts:
        raise InputError("no relation ids given: give ids like R1,R5, a prefix like 'R*', or "
                         "'all'")
    for part in parts:
        if part.endswith("*"):
            # case-sensitive first ('D*' is D1–D16, not dp_accounting.*), else any case
            matched = [rid for rid in REGISTRY if rid.startswith(part[:-1])] or [
                rid for rid in REGISTRY if _lookup_key(rid).startswith(_lookup_key(part[:-1]))]
            if not matched:
                raise InputError(_optional_hint(part) or f"no relation matches {part!r}; "
                                 f"registered: {', '.join(REGISTRY)}")
            chosen += matched
        else:
            key = _lookup_key(part)
            registered = any(_lookup_key(rid) == key for rid in REGISTRY)
            family = [] if registered else [
                rid for rid in REGISTRY if _lookup_key(rid).startswith(key + ".")]
            chosen += family or [get(part).id]  # get names the extra for an optional id
    return list(dict.fromkeys(chosen))


def _optional_hint(part: str) -> str | None:
    """What to install for a selection that names an optional package's relations."""
    key = _lookup_key(part.rstrip("*"))
    for prefix, hint in OPTIONAL.items():
        if key.startswith(_lookup_key(prefix)) or _lookup_key(prefix).startswith(key + "."):
            return f"no relation matches {part!r}: {hint}"
    return None


# --------------------------------------------------------------------------------------------
# plugins
# --------------------------------------------------------------------------------------------

PLUGIN_GROUP = "jaxpriv.plugins"
"""Entry-point group through which installed packages register notions and relations."""

LOADED_PLUGINS: list[str] = []
"""Plugin files loaded in this process (absolute paths), in order; worker processes load the
same ones."""


def load_plugin(path: str | Path) -> None:
    """Run a plugin file (it registers its notions and relations with :func:`register`).

    Any failure — a missing file, a syntax error, an exception while it runs, a malformed
    record — is an :class:`InputError` naming the file."""
    path = Path(path).expanduser()
    resolved = str(path.resolve())
    if resolved in LOADED_PLUGINS:
        return
    if not path.is_file():
        raise InputError(f"plugin {path}: no such file")
    name = "jaxpriv_plugin_" + re.sub(r"\W", "_", path.stem) + f"_{len(LOADED_PLUGINS)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise InputError(f"plugin {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except InputError as error:
        sys.modules.pop(name, None)
        raise InputError(f"plugin {path}: {error}") from None
    except SyntaxError as error:
        sys.modules.pop(name, None)
        raise InputError(f"plugin {path}: syntax error at line {error.lineno}: "
                         f"{error.msg}") from None
    except Exception as error:  # the plugin's own code: report it, do not crash
        sys.modules.pop(name, None)
        line = _plugin_line(error, path)
        raise InputError(f"plugin {path}{line}: {type(error).__name__}: {error}") from None
    LOADED_PLUGINS.append(resolved)


def _plugin_line(error: BaseException, path: Path) -> str:
    frame = _plugin_frame(error, [path])
    return "" if frame is None else f" (line {frame.lineno})"


def _plugin_frame(error: BaseException, files) -> Any:
    """The innermost traceback frame of ``error`` in one of ``files`` (``None`` if none)."""
    import traceback

    wanted = {str(Path(f).resolve()) for f in files}
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if str(Path(f.filename).resolve()) in wanted]
    return frames[-1] if frames else None


def plugin_error(error: BaseException) -> InputError | None:
    """An exception raised by a loaded plugin's own code while jaxpriv ran it, as one-line
    :class:`InputError` naming the plugin file, line and function; ``None`` if no plugin frame
    is in its traceback (then it is jaxpriv's)."""
    frame = _plugin_frame(error, LOADED_PLUGINS)
    if frame is None:
        return None
    first = (str(error).strip().splitlines() or [""])[0]  # JAX's messages run to many lines
    return InputError(f"plugin {frame.filename} (line {frame.lineno}, in {frame.name}): "
                      f"{type(error).__name__}: {first}; fix the plugin")


def load_plugins(files=(), entry_points: bool = True) -> None:
    """Load plugin files and (optionally) every installed ``jaxpriv.plugins`` entry point.

    An entry point names a module (imported; it registers on import) or a callable (called)."""
    for file in files or ():
        load_plugin(file)
    if not entry_points:
        return
    from importlib.metadata import entry_points as find

    for point in find(group=PLUGIN_GROUP):
        try:
            loaded = point.load()
            if callable(loaded):
                loaded()
        except InputError as error:
            raise InputError(f"plugin {point.name} ({point.value}): {error}") from None
        except Exception as error:
            raise InputError(f"plugin {point.name} ({point.value}): {type(error).__name__}: "
                             f"{error}") from None
