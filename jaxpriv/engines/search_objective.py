"""What a search optimizes: unconstrained parameters (:class:`Params`), the feasible mechanism
they give at a premise level (:func:`build`, the retraction) and the smoothed objective
(:func:`objective`), dtype-generic (the float32 search, the float64 re-evaluation).

Constraint handling is an exact, feasibility-preserving retraction rather than a penalty
(:mod:`jaxpriv.core.retractions`). A candidate ``K`` is mixed with the constant mechanism ``U``
(rows ``1/m``): ``K_t = (1−t)K + tU``, a post-processing, so every premise notion that obeys data
processing is non-increasing in ``t``; the least ``t`` with premise ``≤ x`` comes from the
notion's closed form where its record has one (LDP, MBP, the database notions) and otherwise
from a bracketed root finder on ``t`` with the implicit function's gradient. The retraction is the identity
on feasible mechanisms (``t = 0``), so every feasible mechanism is reachable, and every iterate
is feasible: no multiplier to tune and no witness that misses its premise. The same trick
keeps the prior ``ε``-close to uniform (mix with the uniform prior) and the belief ``ε``-close to
the prior (mix with ``π``); extreme points are reached at finite parameters, where a squashing
map (``ε·sigmoid(u)``) would need ``u → ±∞``. The conclusion is the notion's smooth surrogate
where its record has one (maxima as log-sum-exps whose temperature is annealed towards 0), else
its reference level; the true (hard) objective is what picks each restart's best iterate.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxpriv import registry
from jaxpriv.core import divergences, retractions
from jaxpriv.core.mechanisms import Mechanism, Records


@dataclasses.dataclass(frozen=True)
class SearchSetup:
    """How a relation is searched (its record's :class:`jaxpriv.registry.SearchHints`, plus the
    database layout where it has one).

    Attributes:
      prior: ``"uniform"`` (held fixed), ``"close"`` (``ε_unif(π) ≤ ε``) or ``"free"``.
      belief: ``"prior"`` (``b = π``) or ``"close"`` (``ε_bel(b, π) ≤ ε``).
      gates: outputs carry PAC failure gates.
      gridded_parameter: the bound is taken at the given ``ε``; otherwise at the measured
        parameter, which the search is free to choose.
      records: the database layout, where the relation has one.
      rare_starts: a quarter of the restarts start with a rare output (the conclusion
        notion's :attr:`jaxpriv.registry.Notion.rare_outputs`).
    """

    prior: str
    belief: str
    gates: bool
    gridded_parameter: bool
    records: Records | None = None
    rare_starts: bool = False


# --------------------------------------------------------------------------------------------
# parameterization and retraction (dtype-generic: float32 search, float64 re-evaluation)
# --------------------------------------------------------------------------------------------


class Params(NamedTuple):
    """Unconstrained parameters of one mechanism."""

    logits: jax.Array  # (n, m): rows of K before the premise retraction
    prior: jax.Array  # (n,)
    belief: jax.Array  # (n,)
    gates: jax.Array  # (m,): PAC failure gates (logits); unused unless the relation has them


def premise_keep(relation, mech: Mechanism, x, temperature=None):
    """``log(1 − t)`` for the least ``t`` such that ``(1−t)K + t/m`` has ``premise ≤ x`` (0 if
    ``K`` already has): the premise notion's closed form where its record has one (``retract``;
    ``temperature`` smooths its min over entries), else the generic root finder
    (:func:`jaxpriv.core.retractions.bisect_keep`) on its reference level."""
    premise = registry.notion(relation.premise)
    if premise.retract is not None:
        return premise.retract(mech, x, temperature)
    return retractions.bisect_keep(lambda candidate: premise.evaluate(candidate, relation.options),
                                   mech, x)


def build(params: Params, x, eps, relation, setup: SearchSetup, temperature=None) -> Mechanism:
    """The feasible mechanism of ``params`` at premise level ``x`` and condition parameter ``eps``
    (in the parameters' dtype; ``temperature`` smooths the premise retraction). Gates are not
    applied here: see :func:`log_conclusion` and
    :func:`jaxpriv.engines.search_grid.candidate_mechanisms`."""
    n, m = params.logits.shape
    # logits in units of max(1, x/2): the log-ratios that matter grow with x, so one step size
    # serves the whole grid (at x = 10 a unit scale left R5's search 2% short of the sweep)
    scale = jnp.maximum(1.0, 0.5 * x)
    if setup.prior == "uniform":
        log_prior = jnp.full((n,), -jnp.log(n), params.prior.dtype)
    elif setup.prior == "close":
        log_prior0 = jax.nn.log_softmax(scale * params.prior)
        prior0 = jnp.exp(log_prior0)
        keep = retractions.log_keep_for(jnp.max(prior0), jnp.min(prior0), jnp.exp(eps),
                                        jnp.expm1(eps) / n)
        log_prior = retractions.mix(log_prior0, jnp.full_like(log_prior0, -jnp.log(n)), keep)
    else:
        log_prior = jax.nn.log_softmax(scale * params.prior)
    if setup.belief == "close":
        log_belief0 = jax.nn.log_softmax(params.belief)
        keep = retractions.belief_keep(jnp.exp(log_belief0), jnp.exp(log_prior), eps)
        log_belief = retractions.mix(log_belief0, log_prior, keep)
    else:
        log_belief = log_prior
    log_K0 = jax.nn.log_softmax(scale * params.logits, axis=-1)
    keep = premise_keep(relation, Mechanism(log_K0, log_prior, log_belief, None, setup.records),
                        x, temperature)
    log_K = retractions.mix(log_K0, jnp.full_like(log_K0, -jnp.log(m)), keep)
    return Mechanism(log_K, log_prior, log_belief, None, setup.records)


# --------------------------------------------------------------------------------------------
# objective
# --------------------------------------------------------------------------------------------


def _log_level(key: str, mech: Mechanism, options, temperature, gates):
    """``log`` of notion ``key``'s level: its surrogate (which returns the log of a smoothed
    level, maxima at ``temperature``; soft ``gates`` where the search uses them) if it has one,
    else the log of its reference level (hard maxima: their float64 value picks the best
    iterate anyway, and Adam's steps follow the active pair)."""
    notion = registry.notion(key)
    params = notion.resolve(options)
    if notion.surrogate is not None:
        if gates is not None:
            params["gates"] = gates
        return notion.surrogate(mech, temperature, **params)
    return divergences.safe_log(notion.evaluate(mech, options))  # (its shape checked)


def log_conclusion(mech: Mechanism, gates, relation, options, temperature):
    """``log`` of the (smoothed) conclusion level, and ``log`` of the measured condition
    parameter where the bound scales with it (else ``None``)."""
    log_y = _log_level(relation.conclusion, mech, options, temperature, gates)
    if relation.scales_with_parameter:
        return log_y, _log_level(relation.parameter, mech, options, temperature, gates)
    return log_y, None


def score_of(mech: Mechanism, params: Params, relation, setup, options, temperature):
    """What a search maximizes at a grid point: ``log(conclusion)`` (less ``log(parameter)``
    where the bound scales with the measured parameter) — :func:`objective_of` but the bound's
    log at the grid point, a constant there. The optimizer's steps, each restart's best iterate
    and the population step's ranking (within a grid point) are the same either way, so a
    search's compiled segment never reads the bound, and relations with the same notions share
    it (:func:`jaxpriv.registry.programs.objective_key`)."""
    gates = params.gates if setup.gates else None
    log_y, log_param = log_conclusion(mech, gates, relation, options, temperature)
    if relation.scales_with_parameter:
        return log_y - log_param
    return log_y


def objective_of(mech: Mechanism, params: Params, x, eps, relation, setup, options,
                 temperature):
    """:func:`objective` of the mechanism ``params`` built (its gates come from ``params``)."""
    gates = params.gates if setup.gates else None
    log_y, log_param = log_conclusion(mech, gates, relation, options, temperature)
    if relation.scales_with_parameter:
        return log_y - jnp.log(relation.bound(x, 1.0)) - log_param
    return log_y - jnp.log(relation.bound(x, eps))


def objective(params: Params, x, eps, relation, setup, options, temperature):
    """``log(conclusion) − log(bound(x, parameter))``: the log of the inverse slack at the grid
    point (the bound at the grid's ``ε`` where it is gridded, at the measured parameter where
    the bound scales with it)."""
    mech = build(params, x, eps, relation, setup, temperature)
    return objective_of(mech, params, x, eps, relation, setup, options, temperature)


def scores(params: Params, x, eps, relation, setup, options, temperature):
    """:func:`score_of` at ``temperature`` (to differentiate) and, without a derivative, the
    hard one (``temperature=None``: what picks the best iterate) with the mechanism it scored,
    ``(smooth, (hard, mechanism))``, sharing the premise retraction where it does not depend
    on the temperature (a root-found retraction, the costly part of a search step; a
    closed-form one is rebuilt hard). The mechanism is :func:`build`'s at ``temperature=None``:
    what the population step carries to the next grid point without building it again. The
    bound is not read: these are :func:`objective`'s values less its log at ``(x, ε)``."""
    mech = build(params, x, eps, relation, setup, temperature)
    smooth = score_of(mech, params, relation, setup, options, temperature)
    if registry.notion(relation.premise).retract is not None:
        mech = build(params, x, eps, relation, setup, None)
    stopped = jax.tree_util.tree_map(jax.lax.stop_gradient, (mech, params))
    hard = score_of(stopped[0], stopped[1], relation, setup, options, None)
    return smooth, (hard, stopped[0])
