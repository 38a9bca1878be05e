"""Adversarial tightness search: optax maximizes a relation's conclusion at a fixed premise level.

For each grid point ``x`` (and condition parameter ``ε``) many restarts each optimize one
mechanism. Data flows one way: **parameterize** (softmax logits) → **retract** onto the feasible
set → **smooth objective** → optax step, all inside one jitted ``lax.scan`` per segment of steps,
vmapped over restarts and grid points and sharded over devices → **re-evaluate** the best restarts
exactly in float64, from scratch → **envelope** of real witnesses and verified violations.

Constraint handling is an exact, feasibility-preserving retraction rather than a penalty
(:mod:`jaxpriv.core.retractions`). A candidate ``K`` is mixed with the constant mechanism ``U``
(rows ``1/m``): ``K_t = (1−t)K + tU``, a post-processing, so every premise notion that obeys data
processing is non-increasing in ``t``; the least ``t`` with premise ``≤ x`` comes from the
notion's closed form where its record has one (LDP, MBP, the database notions) and otherwise
from a bisection on ``t`` with the implicit function's gradient. The retraction is the identity
on feasible mechanisms (``t = 0``), so every feasible mechanism is reachable, and every iterate
is feasible: no multiplier to tune and no witness that misses its premise. The same trick
keeps the prior ``ε``-close to uniform (mix with the uniform prior) and the belief ``ε``-close to
the prior (mix with ``π``); extreme points are reached at finite parameters, where a squashing
map (``ε·sigmoid(u)``) would need ``u → ±∞``. The conclusion is the notion's smooth surrogate
where its record has one (maxima as log-sum-exps whose temperature is annealed towards 0), else
its reference level; the true (hard) objective is what picks each restart's best iterate.

Relations whose search hint asks for gates (the PAC notions) give outputs soft failure gates
``g_w ∈ (0,1)``. A fractional gate is exact — it is the mechanism with output ``w`` split in
two proportional copies, which leaves every ratio unchanged — and the best ``γ/β`` is attained
at a single failing output (mediant inequality), so witnesses take the best binary gate set,
keeping ``m`` outputs.

The envelope is a lower bound on ``E_R(x)`` (SPEC §4), except where :mod:`jaxpriv.engines.certify`
knows the exact value; there the search reports its optimality gap.

A search is deterministic given its seed and device count. Across device counts the float32
trajectories differ in the last bits (XLA vectorizes a different number of restarts per device),
and the envelopes agree to optimization precision (about 1e-5 relative), not bit for bit.

Examples:
  >>> from jaxpriv.catalog import seed_papers as relations
  >>> from jaxpriv.engines import search
  >>> config = search.make_config(relations.R2.id, n=3, m=3, grid=(0.5,), restarts=8, steps=200)
  >>> result = search.run(config, progress=False)
  >>> row = result.rows[0]
  >>> row["premise"] <= 0.5 + 1e-12, row["gap"] < 0.01  # reaches the certified 2ξ = 1.0
  (True, True)
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxpriv import registry
from jaxpriv.core import divergences, retractions
from jaxpriv.core.errors import InputError
from jaxpriv.core.mechanisms import Mechanism, Records
from jaxpriv.engines import certify, io, runstate, settings
from jaxpriv.kernels import fused

STATE_FILE = "search_state.npz"
MAX_WITNESSES = 100
"""Violating candidates verified and saved per search (more are not re-verified)."""
FAIL_VALUE = 2.0
"""Output value of a failing output under gates (``|v − μ| > α`` with ``μ = 0, α = 1``); passing
ones get 0."""


# --------------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------------


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
    """

    prior: str
    belief: str
    gates: bool
    gridded_parameter: bool
    records: Records | None = None


def setup_for(relation, records: Records | None = None) -> SearchSetup:
    """How ``relation`` is searched; ``records``: the database layout, for relations between
    database-level notions."""
    if relation.kind != "mechanism":
        raise InputError(f"{relation.id} is a statistical relation: jaxpriv.engines.settings "
                         "searches it")
    if relation.needs_records and records is None:
        raise InputError(f"{relation.id} relates database-level notions: give the layout "
                         "with --k (values per record) and --r (records)")
    premise = registry.notion(relation.premise)
    if premise.retract is None and not premise.post_processing:
        raise InputError(f"{relation.id}: the search cannot hold its premise {premise.key!r} "
                         "at a level: the notion has no retraction and is not flagged "
                         "post_processing=True (non-increasing under post-processing)")
    hints = relation.search
    return SearchSetup(hints.prior, hints.belief, hints.gates, hints.gridded_parameter,
                       records if relation.needs_records else None)


@dataclasses.dataclass(frozen=True)
class SearchConfig:
    """Everything that determines a search's result.

    Attributes:
      relation: registry id.
      n, m: mechanism shape.
      grid: premise levels ``x`` (nats, > 0).
      param: the condition parameter ``ε`` where the relation's bound is claimed at a gridded
        one (its search hint ``gridded_parameter``); 0 elsewhere.
      law: ABP observation law, ``"record"`` or ``"output"`` (the max over the true secret, or
        the output, is part of the smoothed objective).
      prior: ``""`` (the relation's search hint) or ``"uniform"`` (held fixed at ``1/n``: a
        special case of every hint, so the relation's condition still holds).
      restarts: independent optimizations per grid point (rounded up to the device count).
      steps: optimizer steps (at most; see ``patience``).
      segment: steps per compiled call (progress, checkpoints and early stopping happen between).
      patience: stop when, in the second half of the schedule (temperature already low),
        ``patience`` segments in a row improved no grid point's best objective by more than
        ``tol``.
      tol: improvement threshold of the early stop (objective is a log, so relative).
      learning_rate: peak Adam step size (cosine-decayed to 1% over ``steps``).
      clip: gradient clipping (global norm, per restart).
      temperature: log-sum-exp temperature, annealed geometrically from the first value to the
        second over ``steps``.
      top: best restarts per grid point re-evaluated in float64.
      explore: fraction of the steps during which, before every segment, the worst restarts
        restart near the best ones or from a neighbouring grid point's best (see
        :func:`_explore`); 0 turns it off.
      seed: PRNG seed.
    """

    relation: str
    n: int
    m: int
    grid: tuple[float, ...]
    param: float = 0.0
    law: str = "record"
    prior: str = ""
    restarts: int = 128
    steps: int = 3000
    segment: int = 100
    patience: int = 3
    tol: float = 1e-6
    learning_rate: float = 0.02
    clip: float = 1.0
    temperature: tuple[float, float] = (0.2, 1e-4)
    top: int = 8
    explore: float = 0.5
    seed: int = 0
    k: int = 0
    r: int = 0

    @property
    def records(self) -> Records | None:
        return Records(self.k, self.r) if self.r else None

    @property
    def setup(self) -> SearchSetup:
        setup = setup_for(registry.get(self.relation), self.records)
        return dataclasses.replace(setup, prior=self.prior) if self.prior else setup

    @property
    def options(self) -> dict[str, Any]:
        """The notion parameters: the relation's own, and ``law`` where a notion takes one."""
        relation = registry.get(self.relation)
        options = dict(relation.options)
        if "law" in relation.notion_params:
            options["law"] = self.law
        return options


MAX_GRID_POINTS = 10_000
"""The most premise levels a search grid may have."""


def parse_grid(text: str) -> tuple[float, ...]:
    """``"a:b:k"`` (``k`` points from ``a`` to ``b ≥ a``) or a comma list ``"0.1,0.5,1"`` of
    premise levels: finite, positive, at most :data:`MAX_GRID_POINTS`."""
    try:
        if ":" in text:
            low, high, count = text.split(":")
            low, high, count = float(low), float(high), int(count)
            if count < 1:
                raise InputError(f"--grid {text!r}: the count must be >= 1, got {count}")
            if high < low:
                raise InputError(f"--grid {text!r}: high ({high:g}) is below low ({low:g}); "
                                 "write 'low:high:count'")
            if count > MAX_GRID_POINTS:
                raise InputError(f"--grid {text!r}: {count} points; at most {MAX_GRID_POINTS}")
            points = np.linspace(low, high, count)
        else:
            points = np.array([float(v) for v in text.split(",") if v.strip()])
    except InputError:
        raise
    except ValueError:
        raise InputError(f"--grid {text!r}: expected 'low:high:count' or a comma list") from None
    if points.size == 0:
        raise InputError(f"--grid {text!r} has no points")
    if points.size > MAX_GRID_POINTS:
        raise InputError(f"--grid {text!r}: {points.size} points; at most {MAX_GRID_POINTS}")
    if not np.all(np.isfinite(points)) or np.any(points <= 0):
        raise InputError(f"--grid {text!r}: grid points must be finite and > 0 (premise levels)")
    return tuple(float(v) for v in points)


def grid_limit(relation) -> float | None:
    """The largest premise level the relation is searched at: its ``premise_limit`` and its
    search hint's ``grid_limit``, whichever is lower (``None``: no limit)."""
    limits = [v for v in (relation.premise_limit, relation.search.grid_limit) if v is not None]
    return min(limits) if limits else None


def clip_grid(relation, grid) -> tuple[float, ...]:
    """The part of ``grid`` where ``relation`` is claimed (see :func:`grid_limit`). If fewer
    than half the points are left, as many points evenly spaced up to the limit instead."""
    grid = tuple(float(x) for x in grid)
    limit = grid_limit(relation)
    if limit is None:
        return grid
    kept = tuple(x for x in grid if x <= limit)
    if 2 * len(kept) >= len(grid):
        return kept
    count = max(len(grid), 2)
    top = limit * (1 - 1e-9)  # a witness retracted to the limit may round just above it
    return tuple(float(v) for v in np.linspace(top / count, top, count))


SETTING_OPTIONS = ("t_max",)
"""Options only a search of settings takes (ignored for mechanisms)."""


def make_config(relation: str, n: int, m: int, grid, **overrides):
    """A validated :class:`SearchConfig` (``grid``: a sequence or a :func:`parse_grid` string),
    or, for a claim about an estimator, the setting subject's
    :class:`jaxpriv.engines.settings.StatConfig` (its own grid where ``grid`` is ``None``)."""
    rel = registry.get(relation)
    if rel.kind != "mechanism":
        if isinstance(grid, str):
            grid = parse_grid(grid)
        if overrides.get("prior"):
            raise InputError(f"--prior: {rel.id} is a claim about an estimator, not a "
                             "mechanism; it has no prior to hold")
        given = {k: v for k, v in overrides.items()
                    if k not in ("k", "r", "param", "law", "prior")}
        return settings.make_config(rel.id, "search", grid=grid, n=n, **given)
    overrides = {k: v for k, v in overrides.items() if k not in SETTING_OPTIONS}
    k, r = int(overrides.pop("k", 0) or 0), int(overrides.pop("r", 0) or 0)
    records = None
    if rel.kind == "mechanism" and rel.needs_records:
        if k < 2 or r < 1:
            raise InputError(f"{rel.id} relates database-level notions: give the layout with "
                             "--k (values per record, >= 2) and --r (records, >= 1)")
        records = Records(k, r)
        n = k**r
        if 2 ** (r - 1) * n * n * m > 1 << 20:
            raise InputError(f"k^r = {n} databases is too many for the search (the retraction "
                             "compares every pair of databases)")
    else:
        k = r = 0
    setup = setup_for(rel, records)
    grid = parse_grid(grid) if isinstance(grid, str) else tuple(float(v) for v in grid)
    grid = tuple(sorted(set(grid)))  # neighbours in the grid share starting points
    for name, value, low in (("n", n, 2), ("m", m, 2)):
        if int(value) != value or value < low:
            raise InputError(f"--{name} must be an integer >= {low}, got {value}")
    if n * m > 1024:
        raise InputError(f"n*m = {n * m} is above the search limit of 1024 entries")
    if not grid or not all(math.isfinite(x) and x > 0 for x in grid):
        raise InputError(f"--grid points must be finite and > 0, got {list(grid)}")
    if rel.premise_limit is not None and max(grid) > rel.premise_limit:
        raise InputError(f"{rel.id} is claimed only for {rel.premise} ≤ {rel.premise_limit}; "
                         f"the grid reaches {max(grid)}")
    param = float(overrides.get("param", 0.0))
    if not math.isfinite(param) or param < 0:
        raise InputError(f"--param must be finite and >= 0, got {param}")
    with jax.enable_x64(True):
        at_top = float(np.asarray(rel.bound(jnp.float64(max(grid)), jnp.float64(param))))
    if not math.isfinite(at_top):
        raise InputError(f"{rel.id}'s bound is infinite at {rel.premise} = {max(grid)} (nothing "
                         f"to search there): keep the grid below "
                         f"{grid_limit(rel) or max(grid)}")
    if param > 0 and not setup.gridded_parameter:
        raise InputError(f"{rel.id} has no condition parameter to set; leave --param out")
    law = overrides.get("law", "record")
    if law not in ("record", "output"):
        raise InputError(f"--law must be 'record' or 'output', got {law!r}")
    prior = overrides.get("prior", "") or ""
    if prior not in ("", "uniform", setup.prior):
        raise InputError(f"--prior {prior!r}: {rel.id} is searched with the prior "
                         f"{setup.prior!r} (its condition: {rel.condition}); give 'uniform' "
                         "(a special case) or leave --prior out")
    overrides["prior"] = "" if prior == setup.prior else prior
    for name in ("restarts", "steps", "segment", "patience", "top"):
        value = overrides.get(name, 1)
        if int(value) != value or value < 1:
            raise InputError(f"--{name} must be a positive integer, got {value}")
    if overrides.get("learning_rate", 1.0) <= 0:
        raise InputError(f"--lr must be positive, got {overrides['learning_rate']}")
    if int(overrides.get("seed", 0)) != overrides.get("seed", 0) or overrides.get("seed", 0) < 0:
        raise InputError(f"--seed must be a non-negative integer, got {overrides['seed']}")
    devices = jax.device_count()
    restarts = int(overrides.pop("restarts", SearchConfig.restarts))
    restarts = -(-restarts // devices) * devices
    top = min(int(overrides.pop("top", SearchConfig.top)), restarts)
    return SearchConfig(relation=rel.id, n=int(n), m=int(m), grid=grid, restarts=restarts,
                        top=top, k=k, r=r, **overrides)


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
    ``temperature`` smooths its min over entries), else the generic bisection
    (:func:`jaxpriv.core.retractions.bisect_keep`) on its reference level."""
    premise = registry.notion(relation.premise)
    if premise.retract is not None:
        return premise.retract(mech, x, temperature)
    options = premise.resolve(relation.options)
    return retractions.bisect_keep(lambda candidate: premise.level(candidate, **options), mech, x)


def build(params: Params, x, eps, relation, setup: SearchSetup, temperature=None) -> Mechanism:
    """The feasible mechanism of ``params`` at premise level ``x`` and condition parameter ``eps``
    (in the parameters' dtype; ``temperature`` smooths the premise retraction). Gates are not
    applied here: see :func:`log_conclusion` and :func:`candidate_mechanisms`."""
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
    return divergences.safe_log(notion.level(mech, **params))


def log_conclusion(mech: Mechanism, gates, relation, options, temperature):
    """``log`` of the (smoothed) conclusion level, and ``log`` of the measured condition
    parameter where the bound scales with it (else ``None``)."""
    log_y = _log_level(relation.conclusion, mech, options, temperature, gates)
    if relation.scales_with_parameter:
        return log_y, _log_level(relation.parameter, mech, options, temperature, gates)
    return log_y, None


def objective(params: Params, x, eps, relation, setup, options, temperature):
    """``log(conclusion) − log(bound(x, parameter))``: the log of the inverse slack at the grid
    point (the bound at the grid's ``ε`` where it is gridded, at the measured parameter where
    the bound scales with it)."""
    mech = build(params, x, eps, relation, setup, temperature)
    gates = params.gates if setup.gates else None
    log_y, log_param = log_conclusion(mech, gates, relation, options, temperature)
    if relation.scales_with_parameter:
        return log_y - jnp.log(relation.bound(x, 1.0)) - log_param
    return log_y - jnp.log(relation.bound(x, eps))


# --------------------------------------------------------------------------------------------
# the optimization loop
# --------------------------------------------------------------------------------------------


class SearchState(NamedTuple):
    params: Params  # (G, R, ...)
    opt_state: Any
    best_params: Params
    best_score: jax.Array  # (G, R): hard objective of best_params
    step: jax.Array  # () int32


def default_optimizer(config: SearchConfig) -> optax.GradientTransformation:
    """Clipped Adam on a cosine schedule (decays to 1% of the peak over ``config.steps``)."""
    schedule = optax.cosine_decay_schedule(config.learning_rate, config.steps, alpha=0.01)
    return optax.chain(optax.clip_by_global_norm(config.clip), optax.adam(schedule))


def initial_params(config: SearchConfig, dtype=jnp.float32) -> Params:
    """Random starting points, a different logit scale per restart (``(G, R, ...)`` arrays)."""
    G, R, n, m = len(config.grid), config.restarts, config.n, config.m

    def one(index):
        key = jax.random.fold_in(jax.random.key(config.seed), index)
        k_scale, k_K, k_p, k_b, k_g = jax.random.split(key, 5)
        scale = jnp.exp(jax.random.uniform(k_scale, (), dtype, jnp.log(0.3), jnp.log(4.0)))
        return Params(scale * jax.random.normal(k_K, (n, m), dtype),
                      jax.random.normal(k_p, (n,), dtype),
                      jax.random.normal(k_b, (n,), dtype),
                      jax.random.normal(k_g, (m,), dtype))

    flat = jax.vmap(one)(jnp.arange(G * R, dtype=jnp.uint32))
    return jax.tree_util.tree_map(lambda a: a.reshape((G, R) + a.shape[1:]), flat)


def _work(config: SearchConfig) -> int:
    """What a search evaluates in all (:func:`jaxpriv.kernels.fused.program_options`): restart-steps
    × n × m."""
    return config.steps * config.restarts * len(config.grid) * config.n * config.m


def make_segment(config: SearchConfig, optimizer: optax.GradientTransformation):
    """The jitted ``state -> state`` that runs ``config.segment`` optimizer steps on every restart
    of every grid point (restarts sharded over the devices — every process's, in a group)."""
    relation = registry.get(config.relation)
    setup = config.setup
    options = config.options
    grid = jnp.asarray(config.grid, jnp.float32)
    eps = jnp.float32(config.param)
    t0, t1 = config.temperature
    mesh = Mesh(np.array(jax.devices()), ("restarts",))

    def restart_step(params, opt_state, best_params, best_score, x, step):
        fraction = jnp.minimum(step / config.steps, 1.0)
        temperature = t0 * (t1 / t0) ** fraction
        # optax minimizes: descend on the negated objective
        grads = jax.grad(lambda q: -objective(q, x, eps, relation, setup, options,
                                              temperature))(params)
        # a non-finite gradient (never expected) must not poison the restart
        grads = jax.tree_util.tree_map(lambda g: jnp.where(jnp.isfinite(g), g, 0.0), grads)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        score = objective(params, x, eps, relation, setup, options, None)
        score = jnp.where(jnp.isfinite(score), score, -jnp.inf)
        better = score > best_score
        best_params = jax.tree_util.tree_map(lambda b, p: jnp.where(better, p, b), best_params,
                                             params)
        return params, opt_state, best_params, jnp.maximum(score, best_score)

    # vmap over restarts, then over grid points
    over_restarts = jax.vmap(restart_step, in_axes=(0, 0, 0, 0, None, None))
    over_grid = jax.vmap(over_restarts, in_axes=(0, 0, 0, 0, 0, None))

    def local_segment(params, opt_state, best_params, best_score, step):
        def body(carry, k):
            p, o, bp, bs = carry
            return over_grid(p, o, bp, bs, grid, step + k), None
        carry, _ = jax.lax.scan(body, (params, opt_state, best_params, best_score),
                                jnp.arange(config.segment, dtype=jnp.int32))
        return carry

    spec = PartitionSpec(None, "restarts")
    sharded = jax.shard_map(local_segment, mesh=mesh, in_specs=(spec, spec, spec, spec,
                                                                PartitionSpec()),
                            out_specs=(spec, spec, spec, spec))

    def segment(state: SearchState) -> SearchState:
        exploring = (state.step > 0) & (state.step < config.explore * config.steps)
        state = jax.lax.cond(exploring, lambda s: _explore(config, s), lambda s: s, state)
        params, opt_state, best_params, best_score = sharded(
            state.params, state.opt_state, state.best_params, state.best_score, state.step)
        return SearchState(params, opt_state, best_params, best_score,
                           state.step + config.segment)

    # the state comes back whole on every device (and every process of a group), for the host
    # side's checkpoints and re-checks; the next segment takes each device's share of it
    whole = NamedSharding(mesh, PartitionSpec())
    return jax.jit(segment, donate_argnums=0, in_shardings=whole, out_shardings=whole,
                   compiler_options=fused.program_options(config.n, config.m, _work(config)))


def _explore(config: SearchConfig, state: SearchState) -> SearchState:
    """Population step: at every grid point the worst quarter of the restarts (taken from the
    second half only; the first half always runs undisturbed) restart from the best quarter's
    best parameters, perturbed; a quarter of them start instead from the best *mechanisms* of
    the next smaller grid point, and a quarter from the next larger one's parameters. A smaller ``x``'s mechanism is feasible here, so it is carried over exactly (as
    the parameters the retraction maps to it unchanged): the search envelope then never falls as
    ``x`` grows. Optimizer states travel with the parameters. Deterministic in (seed, step)."""
    G, R = state.best_score.shape
    moving = R // 4
    if moving == 0:
        return state
    relation = registry.get(config.relation)
    setup = config.setup
    grid = jnp.asarray(config.grid, jnp.float32)
    eps = jnp.float32(config.param)
    order = jnp.argsort(-state.best_score, axis=1)  # best first, per grid point
    # only the second half of the restarts ever moves: the first half stays independent, so
    # selection on early scores cannot crowd out a slow starter that ends best
    protected = jnp.arange(R) < R - R // 2
    order_movable = jnp.argsort(jnp.where(protected[None, :], jnp.inf, -state.best_score),
                                axis=1)
    slots = jnp.arange(moving)
    shift = jnp.where(slots % 4 == 0, -1, jnp.where(slots % 4 == 1, 1, 0))
    donor_grid = jnp.clip(jnp.arange(G)[:, None] + shift[None, :], 0, G - 1)  # (G, moving)
    donor = order[donor_grid, slots[None, :]]
    target = order_movable[:, R // 2 - moving:R // 2]  # the worst movable ones
    rows = jnp.arange(G)[:, None]
    from_below = (shift[None, :] == -1) & (donor_grid < rows)

    def moved(leaf):
        return leaf.at[rows, target].set(leaf[donor_grid, donor])

    def carried(params, x_from, x_to):
        """Parameters that :func:`build` maps at ``x_to`` to the mechanism ``params`` give at
        ``x_from ≤ x_to`` (the retraction is the identity on feasible mechanisms)."""
        mech = build(params, x_from, eps, relation, setup)
        scale = jnp.maximum(1.0, 0.5 * x_to)
        return Params(jnp.maximum(mech.log_K, -60.0) / scale,
                      jnp.maximum(mech.log_prior, -60.0) / scale,
                      jnp.maximum(mech.log_belief, -60.0), params.gates)

    donors = jax.tree_util.tree_map(lambda leaf: leaf[donor_grid, donor], state.best_params)
    exact = jax.vmap(jax.vmap(carried, in_axes=(0, 0, None)), in_axes=(0, 0, 0))(
        donors, grid[donor_grid], grid)
    key = jax.random.fold_in(jax.random.key(config.seed + 1), state.step)
    leaves, treedef = jax.tree_util.tree_flatten(donors)
    keys = jax.random.split(key, len(leaves))
    scale = 0.3 * (1.0 - state.step / (config.explore * config.steps)) + 0.02
    noisy = treedef.unflatten([leaf + scale * jax.random.normal(k, leaf.shape, leaf.dtype)
                               for leaf, k in zip(leaves, keys)])

    def place(current, exact_leaf, noisy_leaf):
        pick = from_below.reshape(from_below.shape + (1,) * (exact_leaf.ndim - 2))
        return current.at[rows, target].set(jnp.where(pick, exact_leaf, noisy_leaf))

    params = jax.tree_util.tree_map(place, state.params, exact, noisy)
    opt_state = jax.tree_util.tree_map(moved, state.opt_state)
    return state._replace(params=params, opt_state=opt_state)


def initial_state(config: SearchConfig, optimizer: optax.GradientTransformation) -> SearchState:
    params = initial_params(config)
    opt_state = jax.vmap(jax.vmap(optimizer.init))(params)
    G, R = len(config.grid), config.restarts
    best = jax.tree_util.tree_map(jnp.copy, params)  # not aliased: the state is donated
    return SearchState(params, opt_state, best, jnp.full((G, R), -jnp.inf, jnp.float32),
                       jnp.zeros((), jnp.int32))


# --------------------------------------------------------------------------------------------
# float64 re-evaluation: from the best parameters to real witnesses
# --------------------------------------------------------------------------------------------


def candidate_mechanisms(config: SearchConfig, params: Params) -> Mechanism:
    """The float64 mechanisms of parameters shaped ``(G, T, ...)`` (``T`` candidates per grid
    point), built again from scratch with the retraction in float64 at each grid point, as one
    batch ``(G, T, V, n, m)``. ``V = 1``, except with gates (PAC notions): one per binary gate set tried (the
    gates rounded, then each single failing output)."""
    relation = registry.get(config.relation)
    setup = config.setup
    with jax.enable_x64(True):
        p64 = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64), params)
        grid = jnp.asarray(config.grid, jnp.float64)
        eps = jnp.float64(config.param)
        mech = jax.vmap(jax.vmap(lambda p, x: build(p, x, eps, relation, setup),
                                 in_axes=(0, None)))(p64, grid)
        values = None
        if setup.gates:
            G, T, m = np.shape(params.gates)
            rounded = (p64.gates > 0)[:, :, None, :]
            singles = jnp.broadcast_to(jnp.eye(m, dtype=bool), (G, T, m, m))
            values = jnp.where(jnp.concatenate([rounded, singles], axis=2), FAIL_VALUE, 0.0)
        V = 1 if values is None else values.shape[2]

        def widen(a):
            return jnp.broadcast_to(a[:, :, None], a.shape[:2] + (V,) + a.shape[2:])

        return Mechanism(widen(mech.log_K), widen(mech.log_prior), widen(mech.log_belief),
                         values, mech.records)


class SearchResult(NamedTuple):
    config: SearchConfig
    rows: list[dict[str, Any]]  # one per grid point, see report.SEARCH_COLUMNS
    violations: list[dict[str, Any]]
    seconds: float
    compile_seconds: float
    steps: int  # steps actually run (early stop)


def float64_scores(config: SearchConfig, params: Params) -> np.ndarray:
    """The hard objective of every ``(grid point, restart)`` in float64, shape ``(G, R)``."""
    relation = registry.get(config.relation)
    setup = config.setup
    options = config.options

    def score(p, x):
        value = objective(p, x, jnp.float64(config.param), relation, setup, options, None)
        return jnp.where(jnp.isfinite(value), value, -jnp.inf)

    with jax.enable_x64(True):
        p64 = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64), params)
        grid = jnp.asarray(config.grid, jnp.float64)
        return np.asarray(jax.jit(jax.vmap(jax.vmap(score, in_axes=(0, None))),
                                  compiler_options=fused.program_options(config.n, config.m,
                                                                         work=0))(
            p64, grid))


def _checked_candidates(config: SearchConfig, params: Params
                        ) -> tuple[Mechanism, registry.CheckResult]:
    """:func:`candidate_mechanisms` and the relation's float64 arithmetic on them, compiled as
    one program (op-by-op, the first call spent seconds compiling hundreds of small ops)."""
    relation = registry.get(config.relation)
    options = config.options

    def build_and_check(p):
        mechs = candidate_mechanisms(config, p)
        return mechs, tuple(registry.evaluate(relation, mechs, **options)[1:])

    with jax.enable_x64(True):
        mechs, arrays = jax.jit(build_and_check, compiler_options=fused.program_options(
            config.n, config.m, work=0))(params)
        return mechs, registry.CheckResult(relation.id, *(np.asarray(a) for a in arrays))


def evaluate_grid(config: SearchConfig, state: SearchState, out_dir: Path | None
                  ) -> tuple[list[dict], list[dict]]:
    """Score every restart's best parameters again in float64, rebuild the ``top`` best of every
    grid point from scratch and check them all with one :meth:`Relation.check`; keep per grid
    point the witness with the smallest slack there among those that satisfy its premise and
    condition, and verify every violation. (Ranking by the float32 scores let a
    float32-flattered restart, copied by the population step, crowd out the real optimum.)"""
    relation = registry.get(config.relation)
    setup = config.setup
    options = config.options
    best = jax.tree_util.tree_map(np.asarray, state.best_params)
    scores = float64_scores(config, best)
    order = np.argsort(-scores, axis=1, kind="stable")[:, :config.top]  # (G, T)
    rows_index = np.arange(len(config.grid))[:, None]
    mechs, checked = _checked_candidates(config, jax.tree_util.tree_map(
        lambda a: a[rows_index, order], best))  # checked: float64 arrays (G, T, V)
    x = np.asarray(config.grid)[:, None, None]
    with jax.enable_x64(True):
        used = checked.parameter if not setup.gridded_parameter else np.full_like(
            checked.parameter, config.param)
        grid_bound = np.asarray(relation.bound(jnp.asarray(np.broadcast_to(x, used.shape)),
                                               jnp.asarray(used)))
        grid_slack = np.asarray(registry.slack(grid_bound, checked.conclusion))
    feasible = (checked.premise <= x * (1 + 1e-9) + 1e-12) & checked.condition_holds
    if setup.gridded_parameter:
        feasible &= checked.parameter <= config.param * (1 + 1e-9) + 1e-12
    cert = certify.envelope(relation, np.asarray(config.grid), config.param, n=config.n,
                            r=config.r or None, prior=config.setup.prior, options=options)
    rows = []
    for g, x_g in enumerate(config.grid):
        candidates = np.flatnonzero(feasible[g])
        chosen = None
        if candidates.size:
            t, v = np.unravel_index(candidates[np.argmin(grid_slack[g].ravel()[candidates])],
                                    feasible[g].shape)
            levels = {k: float(getattr(checked, k)[g, t, v])
                      for k in ("premise", "parameter", "conclusion")}
            chosen = (float(grid_slack[g, t, v]), float(grid_bound[g, t, v]), levels,
                      mechs[g, t, v], int(order[g, t]))
        rows.append(_row(config, g, x_g, chosen, cert, out_dir))
    found = []
    for g, t, v in np.argwhere(checked.violated)[:MAX_WITNESSES]:
        r = int(order[g, t])
        gate_set = f"-v{v:02d}" if checked.violated.shape[2] > 1 else ""
        target = runstate.witness_path(out_dir, f"{config.relation}-g{g:03d}-r{r:04d}{gate_set}")
        verified = runstate.verify_witness(relation, mechs[g, t, v], options, target,
                                           g * config.restarts + r)
        if verified is None:
            continue
        verified["grid_point"] = config.grid[g]
        found.append(runstate.keep(verified, out_dir))
    return rows, found


def _row(config, g, x, chosen, cert, out_dir) -> dict[str, Any]:
    row = {"x": x, "param": config.param if config.setup.gridded_parameter else "", "premise": np.nan, "parameter": np.nan,
           "conclusion": np.nan, "bound": np.nan, "slack": np.nan, "count": config.restarts,
           "witness": "", "certified_slack": np.nan, "gap": np.nan,
           "certified_slack_lower": np.nan}
    if cert is not None:
        row["certified_slack"] = float(cert.min_slack[g])
        row["certified_slack_lower"] = float(cert.min_slack_lower[g])
    if chosen is None:
        return row
    slack, bound, levels, mech, r = chosen
    row.update(**levels, bound=bound, slack=slack)
    if cert is not None:
        # relative shortfall of the found conclusion/bound ratio against the certified one
        row["gap"] = 1.0 - row["certified_slack"] / slack if np.isfinite(slack) else 1.0
    if out_dir is not None:
        name = f"witnesses/grid/g{g:03d}.json"
        io.save_mechanism(out_dir / name, mech, relation=config.relation, grid_point=x,
                          restart=r, **config.options)
        row["witness"] = name
    return row


# --------------------------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------------------------


def run(config: SearchConfig, out: str | os.PathLike | None = None, resume: bool = False,
        progress: bool = True, optimizer: optax.GradientTransformation | None = None,
        max_segments: int | None = None, write=None) -> SearchResult:
    """Run (or resume) a search; with ``out``, checkpoint after every segment.

    Args:
      config: from :func:`make_config`.
      out: run directory (checkpoint, ``witnesses/``; the outputs layer adds ``summary.json``,
        ``envelope.csv``, ``envelope.png``).
      resume: continue from ``out``'s checkpoint (same config required).
      progress: show a progress bar (restart-steps/s, ETA) on stderr.
      optimizer: an optax ``GradientTransformation`` (default :func:`default_optimizer`);
        applied per restart.
      max_segments: stop after this many segments in this call (resumable).
      write: the outputs layer's writer, ``write(out_dir, result, relation)``, called when the
        search is complete and has a directory (e.g. :func:`jaxpriv.report.write_search`).

    A search of settings (a claim about an estimator) runs its relation's search strategy
    (:func:`jaxpriv.engines.settings.run`) with the same run directory and witness round trip.

    Returns:
      a :class:`SearchResult`; ``rows`` hold float64 levels of real witnesses.
    """
    if isinstance(config, settings.StatConfig):
        return settings.run(config, out, resume=resume, progress=progress, write=write)
    optimizer = optimizer or default_optimizer(config)
    with runstate.run_directory(out, resume, STATE_FILE,
                                f"search {config.relation}") as out_dir:
        return _run(config, out_dir, resume, progress, optimizer, max_segments, write)


def _run(config: SearchConfig, out_dir: Path | None, resume: bool, progress: bool,
         optimizer: optax.GradientTransformation, max_segments: int | None, write
         ) -> SearchResult:
    """:func:`run` in its prepared (and locked) run directory."""
    began = time.perf_counter()
    state = initial_state(config, optimizer)
    done = {"seconds": 0.0, "quiet_segments": 0, "history": []}
    if resume:
        state, done = _load(out_dir, config, state)
        runstate.note(f"resuming search {config.relation} in {out_dir} at step "
                      f"{int(state.step)} of {config.steps}")
    segment = make_segment(config, optimizer)
    segment = segment.lower(state).compile()
    compile_seconds = time.perf_counter() - began
    seconds, quiet, history = done["seconds"], done["quiet_segments"], done["history"]
    total = -(-config.steps // config.segment)
    start = int(state.step) // config.segment
    per_segment = config.segment * config.restarts * len(config.grid)
    bar = runstate.progress_bar(total * per_segment, start * per_segment, "step",
                                f"search {config.relation}", progress)
    stop = total if max_segments is None else min(total, start + max_segments)
    previous = np.max(np.asarray(state.best_score), axis=1)
    for _ in range(start, stop):
        if quiet >= config.patience:
            break
        began = time.perf_counter()
        state = segment(state)
        current = np.max(np.asarray(state.best_score), axis=1)
        improved = np.any(current > previous + config.tol)
        late = int(state.step) >= config.steps // 2
        quiet = 0 if improved or not late else quiet + 1
        previous = current
        history.append(float(np.mean(current[np.isfinite(current)])) if np.isfinite(current).any()
                       else None)
        seconds += time.perf_counter() - began
        if out_dir is not None:
            _save(out_dir, config, state, {"seconds": seconds, "quiet_segments": quiet,
                                           "history": history})
        if bar is not None:
            bar.update(per_segment)
    if bar is not None:
        bar.close()
    finished = quiet >= config.patience or int(state.step) >= total * config.segment
    steps = int(state.step)
    if not finished:
        return SearchResult(config, [], [], seconds, compile_seconds, steps)
    rows, violations = evaluate_grid(config, state, out_dir)
    result = SearchResult(config, rows, violations, seconds, compile_seconds, steps)
    if out_dir is not None and write is not None:
        write(out_dir, result, registry.get(config.relation))
    return result


def _save(out: Path, config: SearchConfig, state: SearchState, progress: dict) -> None:
    runstate.save(out, STATE_FILE, state, dataclasses.asdict(config), progress)


def _load(out: Path, config: SearchConfig, like: SearchState) -> tuple[SearchState, dict]:
    return runstate.load(out, STATE_FILE, like, dataclasses.asdict(config))
