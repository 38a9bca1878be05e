"""Certified envelopes: the exact supremum of each conclusion at a premise level, where one is
known in closed form, and the float64 re-verification every reported violation goes through.

``E_R(x, ε) = sup{conclusion : premise ≤ x, condition at ε}`` over all ``n × m`` mechanisms
(``m ≥ 2``). The closed forms below are derived and proved in ``docs/certified.md``; each is
attained (not only approached), so a search can reach it, and the tests check it against
brute-force maxima and against the search. Everything here is float64.

Examples:
  >>> from jaxpriv import certify
  >>> round(float(certify.envelope("R1", 1.0, 0.0, n=4).conclusion), 6)  # log((1+3e)/4)
  0.827989
  >>> round(float(certify.envelope("R6", 1.0, 0.0, n=2).min_slack), 4)  # (1+4ξ)/e^{2ξ} < 1
  0.6767
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpriv import io, relations
from jaxpriv.mechanisms import Mechanism


class Certificate(NamedTuple):
    """A certified envelope point.

    Attributes:
      conclusion: ``E_R(x, ε)``, the supremum of the conclusion level (NaN where the relation's
        envelope is not a conclusion level alone, e.g. R6, whose bound scales with β).
      min_slack: the least slack any mechanism can have at this point: ``f(x, ε) / E_R(x, ε)``
        (for R6, ``inf (1+4ξ)β/γ = (1+4ξ)/e^{2ξ}``).
      source: where the closed form is proved.
    """

    conclusion: np.ndarray
    min_slack: np.ndarray
    source: str


CERTIFIED = ("R1", "R2", "R3", "R4", "R6", "R7", "R8", "R9", "R10", "R11", "R12", "R13")
"""Relations with a closed-form envelope; for the others the search is a lower bound only."""


def _ldp_to_mbp(x, eps, n):
    """R1/R3: ``sup MBP`` at LDP ≤ x, ``ε_unif(π) ≤ ε``: ``log(e^x − (e^x − 1)/(1 + (n−1)e^ε))``
    (one secret with the least prior mass, its column entry ``e^x`` times smaller than the rest)."""
    return x + jnp.log1p(jnp.expm1(-x) / (1.0 + (n - 1) * jnp.exp(eps)))


def _mbp_to_ldp(x, eps, n):
    """R2/R4: ``sup LDP`` at MBP ≤ x, ``ε_unif(π) ≤ ε``:
    ``x + log(min(e^x, 1 + (n−1)e^ε(1 − e^{−x})))``."""
    return x + jnp.log(jnp.minimum(jnp.exp(x), 1.0 - (n - 1) * jnp.exp(eps) * jnp.expm1(-x)))


def _database_sup(rid: str, x, r: int):
    """R7–R13 (paper 004; proofs in docs/certified.md): the supremum of the conclusion over
    every mechanism on ``k^r`` databases (any ``k ≥ 2``, ``m ≥ 2``) and every prior the
    relation allows.

    * R7, R9: ``(B)SP = tanh(Λ/4)`` with ``Λ ≤ 2·(B)DP`` (each ratio ``r(u)`` lies within
      ``e^{±(B)DP}``), attained for ``r ≥ 2``; for ``r = 1`` the reset database is a
      neighbour of every other, ``Λ ≤ (B)DP``: ``tanh(x/4)``.
    * R8, R10, R11: ``(B)DP ≤ Λ = 4·atanh((B)SP)`` (a neighbour ratio is a quotient of two
      ``r(u)``), attained by randomized response on one record.
    * R12: ``+∞`` — a prior with zeros can make BDP 0 while MP over 𝔻_* sees every database
      (``examples/r12_counterexample.json``); with full-support priors it would be ``x``.
    * R13: ``x`` — MP over 𝔻_* is ``max(DP, BDP over proper known sets) ≥ BDP``; equality for
      independent records.
    """
    if rid in ("R7", "R9"):
        return jnp.tanh(x / (2.0 if r >= 2 else 4.0))
    if rid in ("R8", "R10", "R11"):
        return jnp.where(x < 1.0, 4.0 * jnp.arctanh(jnp.minimum(x, 1.0 - 1e-16)), jnp.inf)
    if rid == "R12":
        return jnp.full_like(x, jnp.inf)
    return x  # R13


def envelope(relation_id: str, x, eps=0.0, *, n: int, r: int | None = None
             ) -> Certificate | None:
    """The certified envelope of a relation at premise level(s) ``x``, or ``None`` if unknown.

    Args:
      relation_id: ``"R1"`` … (see :data:`CERTIFIED`).
      x: premise level(s), nats, ``x ≥ 0``.
      eps: condition parameter (``ε_unif`` for R3/R4; ignored by R1, R2 — uniform prior — and R6).
      n: number of secrets (``≥ 2``); every form holds for any ``m ≥ 2``.
      r: records per database, for R7–R13 (their secrets are ``k^r`` databases); ``None``
        for the others (then R7–R13 have no certificate).

    Returns:
      a :class:`Certificate` of float64 arrays shaped like ``x``.
    """
    rid = relations.get(relation_id).id
    if rid not in CERTIFIED:
        return None
    database = rid in ("R7", "R8", "R9", "R10", "R11", "R12", "R13")
    if database and not r:
        return None
    with jax.enable_x64(True):
        x = jnp.asarray(x, jnp.float64)
        if database:
            sup = _database_sup(rid, x, r)
            slack = relations.slack(relations.get(rid).bound(x, jnp.zeros_like(x)), sup)
            slack = jnp.where(jnp.isinf(sup), 0.0, slack)
            return Certificate(np.asarray(sup), np.asarray(slack),
                               f"docs/certified.md#{rid.lower()}")
        eps = jnp.zeros_like(x) if rid in ("R1", "R2") else jnp.broadcast_to(
            jnp.asarray(eps, jnp.float64), x.shape)
        relation = relations.get(rid)
        if rid in ("R1", "R3"):
            sup = _ldp_to_mbp(x, eps, n)
        elif rid in ("R2", "R4"):
            sup = _mbp_to_ldp(x, eps, n)
        else:  # R6: sup γ/β(d_true) = e^{2ξ} at MBP ≤ ξ (free prior)
            ratio = jnp.exp(2.0 * x)
            slack = (1.0 + 4.0 * x) / ratio
            return Certificate(np.full(x.shape, np.nan), np.asarray(slack),
                               "docs/certified.md#r6")
        slack = relations.slack(relation.bound(x, eps), sup)
        return Certificate(np.asarray(sup), np.asarray(slack),
                           f"docs/certified.md#{rid.lower()}")


def verify_witness(relation: relations.Relation, mech: Mechanism, options: dict[str, Any],
                   path: Path, index: int) -> dict | None:
    """Re-check ``mech`` in float64; if it violates the relation, save it as a witness JSON,
    re-read the file and re-check that; return its levels, or ``None`` (no file left behind)
    if the violation does not survive."""
    result = relation.check(mech, **options)
    if not bool(result.violated):
        return None
    io.save_mechanism(path, mech, relation=relation.id, index=int(index), **options,
                      claimed=levels_dict(result))
    reloaded, extras = io.load_mechanism(path)
    again = relation.check(reloaded, **{k: extras.get(k) for k in options})
    if not bool(again.violated):
        path.unlink()
        return None
    return {"file": str(path), "index": int(index), **levels_dict(again)}


WITNESS_OPTIONS = ("law", "q", "mu", "alpha", "d_true")


def witness_check_arguments(extras: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """``(parameter, options)`` a witness file's extra fields give its relation's check."""
    return (extras.get("eps", extras.get("beta")),
            {key: extras.get(key) for key in WITNESS_OPTIONS})


def check_witness(path: str | Path) -> relations.CheckResult:
    """Re-check a witness file (``{"relation": id, ...}``) from scratch in float64."""
    data = io.read_json(path)
    relation = relations.get(str(data.get("relation")))
    if relation.kind == "statistical":
        return relation.check(**data)
    mech, extras = io.load_mechanism(path)
    parameter, options = witness_check_arguments(extras)
    return relation.check(mech, parameter=parameter, **options)


def levels_dict(result: relations.CheckResult) -> dict[str, float]:
    return {"premise": float(result.premise), "parameter": float(result.parameter),
            "conclusion": float(result.conclusion), "bound": float(result.bound),
            "slack": float(result.slack)}
