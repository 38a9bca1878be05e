"""A search's optimization loop: the state of every restart at every grid point
(:class:`SearchState`), the optimizer (:func:`default_optimizer`), the starting points
(:func:`initial_params`) and the compiled segment of steps (:func:`make_segment`: optax steps on
:func:`jaxpriv.engines.search_objective.objective`, vmapped over restarts and grid points,
sharded over devices, with the population step :func:`_explore` between segments).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxpriv import registry
from jaxpriv.engines.search_objective import Params, build, objective_and_score
from jaxpriv.kernels import fused


class SearchState(NamedTuple):
    params: Params  # (G, R, ...)
    opt_state: Any
    best_params: Params
    best_score: jax.Array  # (G, R): hard objective of best_params
    step: jax.Array  # () int32


def default_optimizer(config) -> optax.GradientTransformation:
    """Clipped Adam on a cosine schedule (decays to 1% of the peak over ``config.steps``)."""
    schedule = optax.cosine_decay_schedule(config.learning_rate, config.steps, alpha=0.01)
    return optax.chain(optax.clip_by_global_norm(config.clip), optax.adam(schedule))


def initial_params(config, dtype=jnp.float32) -> Params:
    """Random starting points, a different logit scale per restart (``(G, R, ...)`` arrays);
    where the conclusion's extremes sit at rare outputs (``config.setup.rare_starts``), every
    fourth restart starts with one (docs/engines.md, "Starting points")."""
    G, R, n, m = len(config.grid), config.restarts, config.n, config.m
    rare_starts = config.setup.rare_starts

    def one(index):
        key = jax.random.fold_in(jax.random.key(config.seed), index)
        k_scale, k_K, k_p, k_b, k_g = jax.random.split(key, 5)
        scale = jnp.exp(jax.random.uniform(k_scale, (), dtype, jnp.log(0.3), jnp.log(4.0)))
        logits = scale * jax.random.normal(k_K, (n, m), dtype)
        if rare_starts:
            # every fourth restart starts with a rare output: one output's logit lowered by 3 to
            # 45 nats, by a different amount in each row (mass ~δ under one secret and far less
            # under another: where ε(δ)-type conclusions are extreme, and random logits never go)
            k_w, k_s = jax.random.split(jax.random.fold_in(key, 0x5A5E))
            w = jax.random.randint(k_w, (), 0, m)
            drop = jax.random.uniform(k_s, (n,), dtype, 3.0, 45.0)
            rare = (index % 4 == 3) & (jnp.arange(m) == w)[None, :]
            logits = logits - jnp.where(rare, drop[:, None], 0.0)
        return Params(logits,
                      jax.random.normal(k_p, (n,), dtype),
                      jax.random.normal(k_b, (n,), dtype),
                      jax.random.normal(k_g, (m,), dtype))

    flat = jax.vmap(one)(jnp.arange(G * R, dtype=jnp.uint32))
    return jax.tree_util.tree_map(lambda a: a.reshape((G, R) + a.shape[1:]), flat)


def _work(config) -> int:
    """What a search evaluates in all (:func:`jaxpriv.kernels.fused.program_options`): restart-steps
    × n × m."""
    return config.steps * config.restarts * len(config.grid) * config.n * config.m


def relation_at(config, values):
    """``config``'s relation and notion options at the claim's traced ``values``
    (:func:`jaxpriv.registry.programs.bind`; ``{}``: its own): what a search's programs
    evaluate."""
    return (registry.programs.bind(registry.get(config.relation), values),
            {**config.options, **values})


def make_segment(config, optimizer: optax.GradientTransformation):
    """The jitted ``(state, values) -> state`` that runs ``config.segment`` optimizer steps on
    every restart of every grid point (restarts sharded over the devices — every process's, in
    a group); ``values``: the claim's traced parameters
    (:func:`jaxpriv.registry.programs.traced_values` of the relation: one program serves every
    instance of a claim that shares one)."""
    setup = config.setup
    grid = jnp.asarray(config.grid, jnp.float32)
    eps = jnp.float32(config.param)
    t0, t1 = config.temperature
    mesh = Mesh(np.array(jax.devices()), ("restarts",))

    def restart_step(params, opt_state, best_params, best_score, x, step, values):
        relation, options = relation_at(config, values)
        fraction = jnp.minimum(step / config.steps, 1.0)
        temperature = t0 * (t1 / t0) ** fraction
        # optax minimizes: descend on the negated objective; the same pass scores the current
        # iterate by the hard objective (one premise retraction per step, not two)
        def loss(q):
            smooth, hard = objective_and_score(q, x, eps, relation, setup, options, temperature)
            return -smooth, hard

        (_, score), grads = jax.value_and_grad(loss, has_aux=True)(params)
        score = jnp.where(jnp.isfinite(score), score, -jnp.inf)
        better = score > best_score
        best_params = jax.tree_util.tree_map(lambda b, p: jnp.where(better, p, b), best_params,
                                             params)
        best_score = jnp.maximum(score, best_score)
        # a non-finite gradient (never expected) must not poison the restart
        grads = jax.tree_util.tree_map(lambda g: jnp.where(jnp.isfinite(g), g, 0.0), grads)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        return params, opt_state, best_params, best_score

    # vmap over restarts, then over grid points
    over_restarts = jax.vmap(restart_step, in_axes=(0, 0, 0, 0, None, None, None))
    over_grid = jax.vmap(over_restarts, in_axes=(0, 0, 0, 0, 0, None, None))

    def local_segment(params, opt_state, best_params, best_score, step, values):
        def body(carry, k):
            p, o, bp, bs = carry
            return over_grid(p, o, bp, bs, grid, step + k, values), None
        carry, _ = jax.lax.scan(body, (params, opt_state, best_params, best_score),
                                jnp.arange(config.segment, dtype=jnp.int32))
        return carry

    spec = PartitionSpec(None, "restarts")
    sharded = jax.shard_map(local_segment, mesh=mesh, in_specs=(spec, spec, spec, spec,
                                                                PartitionSpec(), PartitionSpec()),
                            out_specs=(spec, spec, spec, spec))

    def segment(state: SearchState, values) -> SearchState:
        exploring = (state.step > 0) & (state.step < config.explore * config.steps)
        state = jax.lax.cond(exploring, lambda s: _explore(config, s, values), lambda s: s,
                             state)
        params, opt_state, best_params, best_score = sharded(
            state.params, state.opt_state, state.best_params, state.best_score, state.step,
            values)
        return SearchState(params, opt_state, best_params, best_score,
                           state.step + config.segment)

    # the state comes back whole on every device (and every process of a group), for the host
    # side's checkpoints and re-checks; the next segment takes each device's share of it
    whole = NamedSharding(mesh, PartitionSpec())
    return jax.jit(segment, donate_argnums=0, in_shardings=(whole, whole), out_shardings=whole,
                   compiler_options=fused.program_options(config.n, config.m, _work(config)))


def _explore(config, state: SearchState, values) -> SearchState:
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
    relation = relation_at(config, values)[0]  # at the claim's traced values, as the steps
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
        """Parameters that :func:`jaxpriv.engines.search_objective.build` maps at ``x_to`` to the mechanism ``params`` give at
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


def initial_state(config, optimizer: optax.GradientTransformation) -> SearchState:
    params = initial_params(config)
    opt_state = jax.vmap(jax.vmap(optimizer.init))(params)
    G, R = len(config.grid), config.restarts
    best = jax.tree_util.tree_map(jnp.copy, params)  # not aliased: the state is donated
    return SearchState(params, opt_state, best, jnp.full((G, R), -jnp.inf, jnp.float32),
                       jnp.zeros((), jnp.int32))
