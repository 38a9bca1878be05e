"""One compiled program per claim: the instances of a claim (``D6.a2.d1e-5``, ``D6.a4.d1e-2``,
…) differ only in numbers — the claim's parameters — so the engines compile one program for all
of them and pass those numbers in as arguments (traced values), instead of one program per
instance with the numbers baked in as constants.

A claim opts in by giving its bound with the parameters as keywords (:attr:`Claim.bound
<jaxpriv.registry.claims.Claim>`, written in ``jnp``); parameters that set a shape (the number
of uses ``k`` of a composed level: its count vectors) stay constants of the program
(:attr:`ClaimParameter.traced <jaxpriv.registry.claims.ClaimParameter>` false). Its notions
must take the traced options (a traced value skips the Python checks a claim parameter has
already made: :func:`jaxpriv.core.pair_notions._number`).

An engine asks :func:`program_key` for the key of its program cache, passes
:func:`traced_values` to the compiled program, and inside it evaluates :func:`bind` — the
relation with its bound and options at the traced values. A relation that is not such an
instance keys its own program (its values are ``{}``), so every engine has one code path.

Examples:
  >>> from jaxpriv import registry
  >>> a, b = registry.get("D6.a2.d1e-5"), registry.get("D6.a4.d1e-2")
  >>> program_key(a) == program_key(b)        # one program for both
  True
  >>> traced_values(a)
  {'delta': 1e-05, 'order': 2.0}
  >>> round(float(bind(a, traced_values(b)).bound(1.0)), 5)   # b's bound: 1 + log(100)/3
  2.53506
"""

from __future__ import annotations

import copy
import functools
from typing import Any, Hashable, Mapping

import numpy as np

from jaxpriv.core.errors import InputError
from jaxpriv.registry.store import _BUILTIN, CLAIMS, NOTIONS, REGISTRY

__all__ = ["bind", "check_float32", "is_builtin", "levels_key", "objective_key", "program_key",
           "traced_values"]


def _shared(relation):
    """The relation's claim where its instances share a program: the claim gives ``bound`` and
    the relation's bound is that one at its values (a relation made otherwise — a test's
    deliberately false bound put in its place — keys its own programs); else ``None``."""
    claim = CLAIMS.get(getattr(relation, "claim", None) or "")
    if claim is None or claim.bound is None or not relation.values:
        return None
    bound = relation.bound
    if not (isinstance(bound, functools.partial) and bound.func is claim.bound and not bound.args
            and bound.keywords == dict(relation.values)):
        return None
    return claim


def is_builtin(relation) -> bool:
    """Whether ``relation`` is the catalog's own record (:func:`jaxpriv.registry.store.seal_builtins`),
    or an instance of the catalog's own claim whose program it shares, with the catalog's own
    notions: what the package's code alone determines (:mod:`jaxpriv.engines.program_cache`). A
    relation registered in a session or by a plugin, a record put in place of the catalog's, a
    replaced bound or notion is not."""
    rid = getattr(relation, "id", None)
    claim = _shared(relation)
    own = (REGISTRY.get(rid) is relation and _BUILTIN["relations"].get(rid) is relation) or (
        claim is not None and _BUILTIN["claims"].get(claim.id) is claim)
    return own and all(_BUILTIN["notions"].get(key) is NOTIONS.get(key) is not None
                       for key in getattr(relation, "notions", ()))


def program_key(relation) -> Hashable:
    """The key of ``relation``'s compiled programs: the same for every instance of a claim that
    shares one (its id, the values that set shapes, and everything else the programs read:
    notions, condition, hints), else the relation itself."""
    claim = _shared(relation)
    if claim is None:
        return ("relation", relation)
    static = tuple((p.name, relation.values[p.name]) for p in claim.parameters if not p.traced)
    return ("claim", claim.id, static, relation.premise, relation.conclusion,
            relation.parameter, relation.parameter_limit, relation.premise_limit,
            relation.requires, relation.scales_with_parameter, relation.sampling,
            relation.search)


def objective_key(relation) -> Hashable:
    """The key of a program that reads a relation's notions and search hints but never its
    bound — a search's segment, whose objective is the conclusion's level and to which the bound
    at a grid point is a constant (:mod:`jaxpriv.engines.search_objective`): the same for every
    relation, of any claim, with the same premise and conclusion notions, options, traced
    parameters' names and search hints (D6 and D7 at the same α and δ; C1, C2, C4 and C7 at one
    k). ``("objective", text, records)``: ``text`` is what a process may write down (names and
    option values), ``records`` the notion records themselves (a notion registered in their
    place keys other programs)."""
    traced = traced_values(relation)
    static = tuple(sorted((k, repr(v)) for k, v in relation.options.items() if k not in traced))
    parameter = relation.parameter if relation.scales_with_parameter else None
    keys = tuple(k for k in (relation.premise, relation.conclusion, parameter) if k)
    text = (keys, relation.scales_with_parameter, repr(relation.search), relation.needs_records,
            static, tuple(sorted(traced)))
    return ("objective", text, tuple(NOTIONS.get(k) for k in keys))


def levels_key(relation) -> Hashable:
    """The key of a program that reads what :func:`objective_key`'s does and the relation's
    condition-parameter and requirement notions, never its bound — a search's float64 scores,
    best candidates and their notion levels (:func:`jaxpriv.registry.checks.notion_levels`):
    shared by D3 and D4, D6 and D7, C1, C2, C4 and C7 at one k. ``("levels", text,
    records)`` as :func:`objective_key`'s."""
    _, text, records = objective_key(relation)
    more = tuple(k for k in (relation.parameter, relation.requires) if k)
    return ("levels", (text, (relation.parameter, relation.requires)),
            records + tuple(NOTIONS.get(k) for k in more))


def traced_values(relation, dtype=None) -> dict[str, Any]:
    """The values a shared program takes as arguments (``{}`` where it takes none): scalars of
    the program's ``dtype`` (``float32`` for a sweep's step or a search's segment, ``float64``
    for the checks; ``None``: Python floats): typed scalars, so a program's argument types do not
    depend on whether 64-bit types are on where it is called."""
    claim = _shared(relation)
    if claim is None:
        return {}
    cast = float if dtype is None else np.dtype(dtype).type
    if dtype is not None and np.dtype(dtype) == np.float32:
        check_float32(relation)
    return {p.name: cast(relation.values[p.name]) for p in sorted(
        claim.parameters, key=lambda p: p.name) if p.traced}


def check_float32(relation) -> None:
    """Refuses (one line) a claim's traced parameter that float32 cannot hold — 0 where it is
    not, infinite, or its distance from the parameter's ``origin`` (``α − 1``) off by more than
    1e-3: a float32 program (a sweep's screen, a search) would rank nothing there. ``check``
    evaluates such a setting in float64."""
    claim = _shared(relation)
    for p in claim.parameters if claim is not None else ():
        if not p.traced:
            continue
        value = float(relation.values[p.name])
        with np.errstate(over="ignore"):
            held = float(np.float32(value))
        distance, held_distance = value - p.origin, held - p.origin
        if distance != 0.0 and not (np.isfinite(held_distance) and held_distance != 0.0 and
                                    abs(held_distance - distance) <= 1e-3 * abs(distance)):
            raise InputError(
                f"{relation.id}: {p.symbol} = {value:.10g} is beyond float32 (a sweep and a "
                f"search screen in float32, where it reads {held:.10g}); jaxpriv check "
                "evaluates it in float64")


def bind(relation, values: Mapping[str, Any]):
    """``relation`` with its claim's traced parameters at ``values`` (inside a program: its
    arguments): its bound is the claim's at them and its notions' options take them. With no
    values, ``relation`` itself."""
    if not values:
        return relation
    claim = CLAIMS[relation.claim]
    everything = {**relation.values, **values}
    bound_at = copy.copy(relation)
    object.__setattr__(bound_at, "bound", functools.partial(claim.bound, **everything))
    object.__setattr__(bound_at, "options", {**relation.options, **values})
    object.__setattr__(bound_at, "values", everything)
    return bound_at
