"""The plain records of the registry: tolerances, units and the seed papers, and the
:class:`Source`, :class:`Notion`, :class:`Sampling`, :class:`SearchHints`, :class:`Certificate`,
:class:`CheckResult` and :class:`Strategies` records with their validation helpers.

The claims built from them (:class:`~jaxpriv.registry.relations.Relation`,
:class:`~jaxpriv.registry.relations.StatisticalRelation`) are in :mod:`jaxpriv.registry.relations`;
this module reads no registry state.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import re
from typing import Any, Callable, Mapping, NamedTuple

import jax
import numpy as np

from jaxpriv.core.errors import BrokenNotionError, InputError
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


def where_defined(fn) -> str:
    """``file:line`` of a function's definition (a lambda's too), or its name."""
    target = inspect.unwrap(fn)
    while isinstance(target, functools.partial):  # a claim's bound at its values
        target = inspect.unwrap(target.func)
    try:
        return f"{inspect.getsourcefile(target)}:{inspect.getsourcelines(target)[1]}"
    except (OSError, TypeError):
        return getattr(target, "__qualname__", repr(target))


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
      maximum: the largest value the level can take on any mechanism (TV, δ: 1; ABP: √ln 2;
        ``+∞`` where unbounded or where it depends on the shape). A claimed bound at or above
        it says nothing: the audit never reads such points as "tight" (its verdict names
        where the claim is vacuous).
      rare_outputs: its largest values sit at mechanisms with a rare output (mass of the order
        of a small parameter such as δ under one secret, far less under another: ε(δ), δ(ε) and
        their composed forms); a search whose conclusion it is starts a quarter of its restarts
        there (:func:`jaxpriv.engines.search.initial_params`), where random logits never go.
      unbounded: the level grows without bound on every shape, whatever the prior (LDP, DP,
        Rényi, zCDP, KL: a claim about it can be approached only as it grows); the audit
        searches an uncertified claim with such a premise beyond its grid as well
        (:func:`jaxpriv.audit.plans.probes`). ``False`` where it is bounded, bounded on each
        shape (maximal leakage, mutual information ≤ log n) or only as the prior degenerates
        (MBP, PML).
      pair_rows: the level is a max over ordered pairs of distinct rows (all of them, where its
        ``neighbours`` parameter is ``None``) of a quantity 0 at equal rows: ``"distinct"``,
        so :func:`jaxpriv.registry.level` drops repeated rows first; ``"hull"``, the quantity
        is also jointly quasi-convex, so rows inside the convex hull of the others go too
        (:mod:`jaxpriv.core.pair_rows`); ``None``: neither (the level reads every row). The
        rows alone are kept (no prior, no records): not applied to a notion that needs them.
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
    maximum: float = math.inf
    rare_outputs: bool = False
    unbounded: bool = False
    pair_rows: str | None = None

    def __post_init__(self) -> None:
        what = f"notion {self.key!r}"
        if self.pair_rows not in (None, "distinct", "hull"):
            raise InputError(f"{what}: pair_rows must be 'distinct', 'hull' or None")
        if self.held_by not in (None, "prior", "belief"):
            raise InputError(f"{what}: held_by must be 'prior', 'belief' or None")
        if isinstance(self.maximum, bool) or not isinstance(self.maximum, (int, float)) \
                or not self.maximum > 0:
            raise InputError(f"{what}: maximum must be a number > 0 (or math.inf), got "
                             f"{self.maximum!r}")
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
        """The reference level at ``options`` (extra options are ignored): one per mechanism of
        the batch (a level of another shape is an InputError naming where the notion is
        defined: a plugin's ``(3,)`` ended a check, sweep or search in a traceback)."""
        value = self.level(mech, **self.resolve(options or {}))
        batch = tuple(mech.log_K.shape[:-2])
        shape = tuple(np.shape(value))
        try:
            fits = np.broadcast_shapes(shape, batch) == batch
        except ValueError:
            fits = False
        if not fits:
            raise BrokenNotionError(f"notion {self.key!r} (defined at {where_defined(self.level)}) "
                             f"must return one level per mechanism: shape {batch}, got {shape}")
        return value if shape == batch else jax.numpy.broadcast_to(value, batch)

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
      shape: the largest ``(n, m)`` the audit draws and searches for this relation (``None``:
        its budget's), where a notion's cost grows fast with the shape (a composed level of
        ``k`` uses sums ``C(k + m − 1, m − 1)`` count vectors per pair).
    """

    prior: str = "dirichlet"
    belief_eps_max: float = 0.0
    values: bool = False
    prior_zero_fraction: float = 0.0
    x_max: float = 10.0
    param_max: float = 0.0
    param_bins: int = 1
    shape: tuple[int, int] | None = None


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
      slack: ``bound / conclusion`` (``+∞`` when the conclusion is 0 or the bound ``+∞``; below
        1 exactly where violated: see :func:`jaxpriv.registry.slack`).
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
      reads: per mode, the :class:`jaxpriv.engines.settings.StatConfig` fields its strategies
        read beyond the engine's own (a sweep's ``count``, ``chunk``, ``x_bins``, ``seed``; a
        search's ``grid``): an option setting any other is refused, not dropped in silence.
        ``None`` (not declared): every option is taken.
    """

    sweep_step: Callable
    fields: Callable
    violated: Callable
    search: Callable
    defaults: dict = {}
    initial: Callable | None = None
    on_chunk: Callable | None = None
    summary: Callable | None = None
    reads: dict | None = None


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
