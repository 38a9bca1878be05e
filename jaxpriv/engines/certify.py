"""Certified envelopes, and the float64 re-check of witness files.

``E_R(x, ε) = sup{conclusion : premise ≤ x, condition at ε}`` over all ``n × m`` mechanisms
(``m ≥ 2``). Where a relation's record carries a ``certificate`` (a closed form proved at its
``proof`` link, ``docs/certified.md`` for the seed papers), :func:`envelope` evaluates it and
the least slack ``f(x, ε)/E_R(x, ε)``; each closed form is attained (not only approached), so a
search can reach it, and the tests check it against brute-force maxima and against the search.
Everything here is float64 and generic: no relation is named.

Examples:
  >>> from jaxpriv.catalog import seed_papers as relations
  >>> from jaxpriv.engines import certify
  >>> round(float(certify.envelope(relations.R1, 1.0, 0.0, n=4).conclusion), 6)  # log((1+3e)/4)
  0.827989
  >>> round(float(certify.envelope(relations.R6, 1.0, 0.0, n=2).min_slack), 4)  # (1+4ξ)/e^{2ξ}
  0.6767
"""

from __future__ import annotations

import inspect
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxpriv import registry
from jaxpriv.engines import io
from jaxpriv.core.errors import InputError
from jaxpriv.registry import Certificate
from jaxpriv.engines.runstate import levels_dict, verify_witness

__all__ = ["Certificate", "certified", "check_witness", "envelope", "levels_dict",
           "verify_witness", "witness_check_arguments", "witness_relation"]


def certified(relation) -> bool:
    """Whether the relation's envelope is known in closed form (for some layouts)."""
    return getattr(relation, "certificate", None) is not None


def envelope(relation, x, eps=0.0, *, n: int, r: int | None = None, prior: str | None = None,
             options: dict | None = None) -> Certificate | None:
    """The certified envelope of a relation at premise level(s) ``x``, or ``None`` if unknown.

    Args:
      relation: a :class:`jaxpriv.registry.Relation` or its id.
      x: premise level(s), ``x ≥ 0``.
      eps: condition parameter (where the relation has one), broadcast with ``x``.
      n: number of secrets (``≥ 2``).
      r: records per database, for relations between database-level notions (their secrets
        are ``k^r`` databases); ``None`` otherwise.
      prior: the prior setting the envelope is over (``"free"``, ``"uniform"``, ``"close"``);
        default the relation's search hint. A certificate that does not take ``prior`` is only
        known at that default.
      options: notion parameters (e.g. ``{"law": "output"}``), passed to a certificate that
        takes them by name.

    Returns:
      a :class:`Certificate` of float64 arrays shaped like ``broadcast(x, eps)``; its
      ``min_slack`` is 0 where the envelope is infinite; ``upper``/``min_slack_lower`` are the
      bracket's other ends (equal to ``conclusion``/``min_slack`` where exact).
    """
    if isinstance(relation, str):
        relation = registry.get(relation)
    if not certified(relation):
        return None
    default = relation.search.prior if relation.search is not None else "free"
    prior = prior or default
    accepted = _keywords(relation.certificate)
    context = {"prior": prior, **(options or {})}
    if prior != default and accepted is not ALL and "prior" not in accepted:
        return None  # the closed form is for the relation's own prior setting
    kwargs = context if accepted is ALL else {k: v for k, v in context.items() if k in accepted}
    with jax.enable_x64(True):
        x, eps = jnp.broadcast_arrays(jnp.asarray(x, jnp.float64),
                                      jnp.asarray(eps, jnp.float64))
        found = relation.certificate(x, eps, n=n, r=r, **kwargs)
        if found is None:
            return None
        sup, min_slack, upper = (*found, None) if len(found) == 2 else found
        # compiled, one program per claim (eagerly, C7's bisected CLT bound dispatched
        # thousands of small operations: ~2 s a relation in the audit's verdicts)
        bound = jnp.asarray(registry.bound_at(relation, np.asarray(x), np.asarray(eps)))
        sup = jnp.broadcast_to(jnp.asarray(sup, jnp.float64), x.shape)
        if min_slack is None:
            min_slack = _least_slack(bound, sup)
        min_slack = jnp.broadcast_to(jnp.asarray(min_slack, jnp.float64), x.shape)
        if upper is None:
            upper, lower = sup, min_slack
        else:
            upper = jnp.broadcast_to(jnp.asarray(upper, jnp.float64), x.shape)
            lower = _least_slack(bound, upper)
        return Certificate(np.asarray(sup), np.asarray(min_slack), relation.proof,
                           np.asarray(upper), np.asarray(lower),
                           np.broadcast_to(np.asarray(bound, np.float64), x.shape))


def _least_slack(bound, sup):
    """``f/E`` with 0 where the envelope ``E`` is infinite."""
    return jnp.where(jnp.isinf(sup), 0.0, registry.slack(bound, sup))


ALL = object()
"""A certificate that takes ``**kwargs``: every keyword is passed."""


def _keywords(function):
    """The keyword names ``function`` accepts beyond ``x, eps, n, r`` (or :data:`ALL`)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return frozenset()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return ALL
    return frozenset(p.name for p in parameters if p.kind in (
        inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)) - {
        "x", "eps", "n", "r"}


PARAMETER_KEYS = ("parameter", "eps", "beta")
"""Witness-file keys of the condition parameter the bound is claimed at (first found wins)."""


def witness_check_arguments(extras: dict, relation=None) -> tuple:
    """``(parameter, options)`` a witness file's extra fields give its relation's check: the
    claimed parameter, and the file's value of every parameter the relation's notions take."""
    key = next((k for k in PARAMETER_KEYS if extras.get(k) is not None), None)
    parameter = None if key is None else extras[key]
    if key is not None and not registry.is_number(parameter):
        raise InputError(f"'{key}' must be a number (the parameter the bound is claimed at), "
                         f"got {parameter!r}")
    names = relation.notion_params if relation is not None else frozenset(
        p for notion in registry.NOTIONS.values() for p in notion.params)
    return parameter, {key: extras.get(key) for key in sorted(names)}


def witness_relation(data: dict):
    """The relation a witness names: its ``relation``, an id, or a claim's id at the file's own
    parameter values (``order``, ``delta``, …), as ``jaxpriv check CLAIM FILE`` reads them."""
    rid = str(data.get("relation"))
    found = registry.claim_of(rid)
    if found is not None:
        claim, own = found
        missing = [p.name for p in claim.parameters
                   if p.name not in own and data.get(p.name) is None]
        if missing:  # (not "give --alpha X": the file is what says them)
            example = claim.instance_id(claim.grid[0]) if claim.grid else None
            raise InputError(f"the witness names the claim {claim.id} without its "
                             f"{', '.join(repr(name) for name in missing)}: add "
                             f"{'it' if len(missing) == 1 else 'them'} to the file"
                             + (f", or name an instance such as {example!r}" if example
                                else ""))
        return registry.resolve(rid, None, fallback=data)
    return registry.get(rid)


def check_witness(path: str | Path) -> registry.CheckResult:
    """Re-check a witness file (``{"relation": id, ...}``) from scratch in float64."""
    data = io.read_json(path)
    if not isinstance(data, dict):
        raise InputError(f"{path}: not a witness (expected a JSON object with a 'relation')")
    relation = witness_relation(data)
    with io.about(path):
        if relation.kind == "statistical":
            return relation.check(**data)
        mech, extras = io.load_mechanism(path)
        parameter, options = witness_check_arguments(extras, relation)
        return relation.check(mech, parameter=parameter, **options)
