"""The float64 check of a relation on mechanisms: :func:`slack`, :func:`evaluate` (the check's
arithmetic, jit-able, in any dtype), :func:`check` (one compiled program per relation and
options, cached), :func:`bound_at` (the claimed bound at many points, compiled) and :func:`level`
(one notion's reference level).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from jaxpriv.core import pair_rows
from jaxpriv.core.errors import InputError
from jaxpriv.core.mechanisms import Mechanism
from jaxpriv.kernels import fused
from jaxpriv.registry.records import ATOL, RTOL, CheckResult, where_defined
from jaxpriv.registry.relations import Relation, _same
from jaxpriv.registry import programs
from jaxpriv.registry.store import notion


@jax.jit  # one program per shape (host callers: op by op, ~8 small programs a new shape)
def slack(bound, conclusion, atol: float = ATOL, rtol: float = RTOL):
    """``bound / conclusion`` with ``x/0 = +∞`` and ``∞/∞ = +∞`` (an infinite bound is vacuous),
    below 1 wherever the check's violation test (``conclusion > bound·(1 + rtol) + atol``)
    fires.

    Where both are zero to the check's absolute tolerance (``bound ≤ atol``, ``conclusion ≤
    atol``, and the check holds: "0 ≤ 0" up to rounding) the slack is ``+∞`` as at an exact
    ``0/0``: D16's ``I(D;W) ≤ ML`` at a constant mechanism gave ``ML = 0`` and ``I = 1e-17``
    (float64 rounding), slack 0, no violation (within the tolerance) — and a verdict "tight"
    with least slack 0. A negative bound the conclusion exceeds is no zero: over a conclusion
    above ``atol`` the ratio (negative), over one within ``atol`` of 0 (or below) ``−∞``; a
    bound of ``−∞`` too (autodp's pure-DP RDP of −1.3e-8 against a Rényi divergence of 8.6e-18
    read "slack inf" beside "VIOLATED", and a sweep ranked such points last)."""
    bound = jnp.asarray(bound)
    conclusion = jnp.asarray(conclusion)
    holds = conclusion <= bound * (1.0 + rtol) + atol
    vacuous = (bound == jnp.inf) | ((conclusion <= 0) & (bound >= 0)) | (
        (conclusion <= atol) & (bound <= atol) & holds)
    below = ((conclusion <= atol) & (bound < 0)) | (conclusion <= 0) | (bound == -jnp.inf)
    ratio = bound / jnp.where(vacuous | below, 1.0, conclusion)
    return jnp.where(vacuous, jnp.inf, jnp.where(below, -jnp.inf, ratio))


def evaluate(relation: Relation, mech: Mechanism, *, parameter=None, rtol: float = RTOL,
             atol: float = ATOL, levels: Mapping[str, jax.Array] | None = None,
             **options: Any) -> CheckResult:
    """The check's arithmetic in the mechanism's own dtype, as JAX arrays (jit-able).

    The sweep runs this in float32 to find candidates; :func:`check` runs it in float64 to
    decide. ``levels`` may carry notion levels already computed for these options (the sweep's
    fused kernel); the others are computed here. Other arguments as in :func:`check`.
    """
    levels = notion_levels(relation, mech, levels, **options)
    x = levels[relation.premise]
    y = levels[relation.conclusion]
    measured = jnp.zeros_like(x) if relation.parameter is None else levels[relation.parameter]
    used = measured if parameter is None else jnp.broadcast_to(
        jnp.asarray(parameter, x.dtype), measured.shape)
    holds = measured <= used
    if relation.parameter_limit is not None:
        holds &= measured <= relation.parameter_limit
    if relation.premise_limit is not None:
        holds &= x <= relation.premise_limit
    if relation.requires is not None:
        holds &= levels[relation.requires] > 0
    bound = jnp.broadcast_to(jnp.asarray(relation.bound(x, used), x.dtype), x.shape)
    violated = holds & (y > bound * (1.0 + rtol) + atol)
    return CheckResult(relation.id, x, measured, used, holds, y, bound,
                       slack(bound, y, atol, rtol), violated)


def notion_levels(relation: Relation, mech: Mechanism | None,
                  levels: Mapping[str, jax.Array] | None = None, **options: Any
                  ) -> dict[str, jax.Array]:
    """The level of every notion :func:`evaluate` reads of ``relation`` — its premise,
    conclusion, condition parameter and requirement — on ``mech`` (jit-able; those in
    ``levels`` taken as they are). What a check computes before its bound: a search's float64
    program computes these for the relations of every claim with the same notions, and
    :func:`evaluate` given all of them only applies the bound (``mech`` may then be ``None``)."""
    found = dict(levels or {})
    for key in (relation.premise, relation.conclusion, relation.parameter, relation.requires):
        if key is not None and key not in found:
            found[key] = notion(key).evaluate(mech, options)
    return found


def nan_problem(relation: Relation, result: CheckResult) -> str | None:
    """One line naming a NaN in ``result`` — the bound, or a notion's level — or a negative level
    (a slack, bound over level, means nothing there), and where it came from (the bound's or the
    notion's function, file and line, and the premise level), or ``None``. A NaN compares false,
    so unchecked it would read "holds"."""
    premise = np.asarray(result.premise, np.float64)
    at = f"at premise {relation.premise} = {float(premise.reshape(-1)[0]):.6g}" \
        if premise.size and not np.isnan(premise).all() else ""
    for field, key in (("premise", relation.premise), ("parameter", relation.parameter),
                       ("conclusion", relation.conclusion)):
        if key is None:
            continue
        values = np.asarray(getattr(result, field), np.float64)
        nan, negative = np.isnan(values).any(), (values < -ATOL).any()
        if nan or negative:
            try:
                defined = where_defined(notion(key).level)
            except Exception:  # not a registered notion (a statistical claim's field)
                defined = key
            what = "NaN" if nan else f"negative ({float(values.min()):.6g})"
            return (f"relation {relation.id}: the level of notion '{key}' ({field}) is {what} "
                    f"{at} (the notion is defined at {defined}); a level must lie in [0, ∞]"
                    ).replace("  ", " ")
    if np.isnan(np.asarray(result.bound, np.float64)).any():
        return (f"relation {relation.id}: its bound is NaN {at} (the bound is defined at "
                f"{where_defined(relation.bound)}); a bound must be a number or ±inf")
    return None


def _check_parameter(relation: Relation, parameter) -> None:
    """A condition parameter given for ``relation``: a level of its parameter notion, so a
    number in ``[0, maximum]`` (a negative ε or β was taken, and the claim read "holds")."""
    values = np.asarray(parameter, dtype=np.float64)
    record = notion(relation.parameter)
    top = record.maximum
    if np.isnan(values).any() or (values < 0).any() or (values > top).any():
        where = f"[0, {top:g}]" if np.isfinite(top) else "[0, ∞)"
        raise InputError(f"{relation.id}: the condition parameter ({relation.parameter}) must lie "
                         f"in {where}, got {parameter!r}")


def check(relation: Relation, mech: Mechanism, *, parameter=None, rtol: float = RTOL,
          atol: float = ATOL, **options: Any) -> CheckResult:
    """Check ``relation`` on ``mech`` (any batch shape), recomputing every level in float64.

    Args:
      relation: a registry entry.
      mech: the mechanism(s); cast to float64 here.
      parameter: the condition parameter the bound is claimed at (default: the measured one,
        which gives the tightest claim).
      rtol: violation tolerance, relative.
      atol: violation tolerance, absolute.
      **options: what the notions need (their ``params``: ``law``, ``mu``, ...).

    Returns:
      a :class:`CheckResult` of float64 numpy arrays.
    """
    if parameter is not None and relation.parameter is not None:
        _check_parameter(relation, parameter)
    with jax.enable_x64(True):
        mech = mech.astype(jnp.float64)
        values = programs.traced_values(relation, np.float64)
        shared = all(_same(options.get(name), value) for name, value in values.items())
        if not shared:
            values = {}  # options that are not the instance's own: a program of its own
        key = _check_key(programs.program_key(relation) if shared else ("relation", relation),
                         parameter is None, rtol, atol,
                         {k: v for k, v in options.items() if k not in values})
        compiled = _compiled_check(key, relation, _options_for(mech.log_K))
        if compiled is not None:
            try:
                arrays = compiled(mech, 0.0 if parameter is None else parameter, values)
                return CheckResult(relation.id, *(np.asarray(a) for a in arrays))
            except jax.errors.JAXTypeError:  # a notion or bound that only runs op by op
                _not_compiled.add(key)
        result = evaluate(relation, mech, parameter=parameter, rtol=rtol, atol=atol, **options)
        return CheckResult(relation.id, *(np.asarray(a) for a in result[1:]))


_compiled_checks: dict[Any, Callable] = {}
_not_compiled: set[Any] = set()


def _hashable(*parts):
    """``parts`` as a cache key, or ``None`` where an option is unhashable (then not cached)."""
    try:
        hash(parts)
        return parts
    except TypeError:
        return None


def _check_key(program, measured: bool, rtol, atol, options):
    """The compiled check's key: the relation's program (one per claim that shares one,
    :func:`jaxpriv.registry.programs.program_key`) and the options its parameters do not set."""
    return _hashable(program, measured, rtol, atol, tuple(sorted(options.items())))


def _options_for(log_K) -> tuple:
    """The XLA options of a float64 program run once on ``log_K``'s batch, as sorted items
    (a key): :func:`jaxpriv.kernels.fused.one_shot_options` — level 0 for a few small
    mechanisms (a witness, a sweep's record; D8's check of one compiled in 3.7 s at XLA's
    defaults), level 2 for a large one (``jaxpriv eval`` of a 300×300 mechanism)."""
    n, m = log_K.shape[-2:]
    return tuple(sorted((fused.one_shot_options(n, m, work=log_K.size) or {}).items()))


def _compiled_check(key, relation, compiler: tuple = ()):
    """:func:`check`'s arithmetic as one compiled program per relation (or claim), options and
    XLA options ``compiler`` (:func:`_options_for`; op by op, a database relation's float64
    check compiled dozens of small programs, ~1 s), taking the claim's parameters as arguments,
    or ``None`` where it cannot be cached (``key`` None) or compiled."""
    if key is None or key in _not_compiled:
        return None
    _, measured, rtol, atol, items = key
    key = (*key, compiler)
    if key not in _compiled_checks:
        options = dict(items)

        def run(mech, parameter, values):
            at = programs.bind(relation, values)
            result = evaluate(at, mech, parameter=None if measured else parameter,
                              rtol=rtol, atol=atol, **options, **values)
            return tuple(result[1:])
        _compiled_checks[key] = jax.jit(run, compiler_options=dict(compiler) or None)
    return _compiled_checks[key]


_compiled_bounds: dict[Any, Callable] = {}
BOUND_POINTS = 512
"""The fewest points :func:`bound_at`'s compiled program evaluates a claimed bound at (a call at
fewer is padded): a figure's curve fits, and a compiled bound at 512 points costs no more than
at 16."""


def bound_at(relation: Relation, x, used=0.0) -> np.ndarray:
    """The claimed bound at premise levels ``x`` and condition parameters ``used`` (broadcast
    together), in float64, as one compiled program per relation (or claim: its parameters are
    the program's arguments) — the report's, verdicts' and envelopes' bound at many points in
    one call, instead of op by op (a bound with a golden-section search or ``erfcx`` took
    0.05–0.2 s a point that way: 40 s of a quick audit). A bound that only runs op by op (a
    library's callback) is evaluated so.

    Examples:
      >>> from jaxpriv import registry
      >>> bound_at(registry.get("D6.a2.d1e-5"), [1.0, 2.0]).round(5)
      array([12.51293, 13.51293])
    """
    with jax.enable_x64(True):
        x = np.asarray(x, np.float64)
        used = np.asarray(used, np.float64)
        shape = np.broadcast_shapes(x.shape, used.shape)
        values = programs.traced_values(relation, np.float64)
        key = _hashable("bound", programs.program_key(relation))
        if key is not None and key not in _not_compiled:
            if key not in _compiled_bounds:
                def run(x, used, values):
                    bound = programs.bind(relation, values).bound(x, used)
                    return jnp.broadcast_to(jnp.asarray(bound, jnp.float64), x.shape)
                _compiled_bounds[key] = jax.jit(run)
            # flat, padded with the last point to a power of two ≥ BOUND_POINTS: one program per
            # claim serves the calls of a quick audit (a figure's 399 points, an envelope's 40
            # rows, a verdict's 7, a scalar); padded to ≥ 16, three sizes were ~120 of its ~170
            # small programs, each compiled (cold) or fetched (warm) by every worker
            size = int(np.prod(shape))
            padded = max(BOUND_POINTS, 1 << max(0, size - 1).bit_length())

            def flat(a):
                a = np.broadcast_to(a, shape).ravel()
                return np.concatenate([a, np.full(padded - size, a[-1] if size else 0.0)])
            try:
                out = _compiled_bounds[key](flat(x), flat(used), values)
                return np.asarray(out)[:size].reshape(shape)
            except jax.errors.JAXTypeError:
                _not_compiled.add(key)
        return np.broadcast_to(np.asarray(relation.bound(jnp.asarray(x), jnp.asarray(used)),
                                          np.float64), shape).copy()


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
        mech = _rows_needed(record, params, mech.astype(jnp.float64))
        return np.asarray(_compiled_level(record, params, _options_for(mech.log_K))(mech))


def _rows_needed(record, params: Mapping[str, Any], mech: Mechanism) -> Mechanism:
    """``mech`` with only the rows its level needs, where the notion is a max over every pair
    of rows (``record.pair_rows``; no neighbour relation given) and ``mech`` one concrete
    mechanism: repeated rows, and rows inside the hull of the others where the pair quantity
    allows (:mod:`jaxpriv.core.pair_rows`; a 2000×2 mechanism's zCDP took 8 s, its GDP 10 s)."""
    if (record.pair_rows is None or params.get("neighbours") is not None
            or record.needs_prior or record.needs_records  # (the rows alone are kept)
            or mech.log_K.ndim != 2 or isinstance(mech.log_K, jax.core.Tracer)):
        return mech
    rows = pair_rows.rows_for_pair_max(np.asarray(mech.log_K), record.pair_rows == "hull")
    if len(rows) == mech.n:
        return mech
    return Mechanism.from_log_K(mech.log_K[rows], validate=False, dtype=jnp.float64)


_compiled_levels: dict = {}


def _compiled_level(record, params: dict, compiler: tuple = ()):
    """:func:`level`'s compiled program, one per notion record, parameters and XLA options
    ``compiler`` (:func:`_options_for`): a new closure on every call was traced, lowered and
    compiled again every time (``jaxpriv show`` compiled ~90 programs per witness, however many
    it had seen before). Unhashable parameters: not cached."""
    key = _hashable(record, tuple(sorted(params.items())), compiler)
    options = dict(compiler) or None
    if key is None:
        return jax.jit(lambda m: record.evaluate(m, params), compiler_options=options)
    if key not in _compiled_levels:
        _compiled_levels[key] = jax.jit(lambda m: record.evaluate(m, params),
                                        compiler_options=options)
    return _compiled_levels[key]
