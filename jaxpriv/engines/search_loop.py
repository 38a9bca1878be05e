"""A search's optimization loop: the state of every restart at every grid point
(:class:`SearchState`), the optimizer (:func:`default_optimizer`), the starting points
(:func:`initial_params`) and the compiled segment of steps (:func:`make_segment`: optax steps on
:func:`jaxpriv.engines.search_objective.scores` — the objective less the bound, which the
segment never reads — vmapped over restarts and grid points, sharded over devices, with the
population step :func:`_explore` between segments).
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxpriv import registry
from jaxpriv.engines.search_objective import Params, scores
from jaxpriv.kernels import fused


class Built(NamedTuple):
    """The mechanism a restart's best parameters build at its grid point (log space), kept so
    that the population step carries it to the next grid point without building it again."""
    log_K: jax.Array  # (G, R, n, m)
    log_prior: jax.Array  # (G, R, n)
    log_belief: jax.Array  # (G, R, n)


class SearchState(NamedTuple):
    params: Params  # (G, R, ...)
    opt_state: Any
    best_params: Params
    best_score: jax.Array  # (G, R): hard score of best_params (search_objective.score_of: the
    # objective less the bound's log at the grid point)
    step: jax.Array  # () int32
    best_built: Built  # what best_params build (uniform until a restart first scores)


def default_optimizer(config) -> optax.GradientTransformation:
    """Clipped Adam on a cosine schedule (decays to 1% of the peak over ``config.steps``)."""
    schedule = optax.cosine_decay_schedule(config.learning_rate, config.steps, alpha=0.01)
    return optax.chain(optax.clip_by_global_norm(config.clip), optax.adam(schedule))


def initial_params(config, dtype=jnp.float32) -> Params:
    """Random starting points, a different logit scale per restart (``(G, R, ...)`` arrays);
    where the conclusion's extremes sit at rare outputs (``config.setup.rare_starts``), every
    fourth restart starts with one (docs/engines.md, "Starting points"). Restart ``r`` at grid
    point ``g`` draws from the key ``fold_in(key(seed), g·R + r)``: the first ``G·R`` of a
    longer draw are the same, so one compiled program (for :func:`_draw_count` restarts) serves
    every grid of up to that many points (drawn op by op, a new grid length spent ~4.5 s cold
    compiling some 40 small programs)."""
    G, R, n, m = len(config.grid), config.restarts, config.n, config.m
    count = _draw_count(G * R)
    flat = _drawn(config.seed, n, m, bool(config.setup.rare_starts), jnp.dtype(dtype).name,
                  count)()
    return jax.tree_util.tree_map(lambda a: a[:G * R].reshape((G, R) + a.shape[1:]), flat)


def _draw_count(restarts: int) -> int:
    """The restarts :func:`initial_params` draws for ``restarts``: a power of two, at least
    256 (a quick audit's 16 restarts at up to 16 grid points draw once per shape)."""
    return max(256, 1 << (int(restarts) - 1).bit_length())


@functools.lru_cache(maxsize=32)
def _drawn(seed: int, n: int, m: int, rare_starts: bool, dtype: str, count: int):
    """The jitted ``() -> Params`` of :func:`initial_params`'s ``count`` first starting points
    (``(count, ...)`` arrays)."""
    dtype = jnp.dtype(dtype)

    def one(index):
        key = jax.random.fold_in(jax.random.key(seed), index)
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

    # a one-shot program (fused.one_shot_options, level 0 whatever the count: a shorter grid's
    # starts stay a longer one's first rows): at n = m = 3 and 256 starts it compiled in
    # 0.5–0.65 s against 3.1 s at XLA's defaults, logits within 4e-6 (2-core AVX2 EPYC)
    return jax.jit(lambda: jax.vmap(one)(jnp.arange(count, dtype=jnp.uint32)),
                   compiler_options=fused.one_shot_options(n, m))


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


def grid_argument(config, dtype) -> np.ndarray:
    """``config.grid`` as the argument a search's programs take it as, ``(G,)`` of ``dtype``: a
    program serves every grid of its length (D9's instances cut their grids at different
    premise levels)."""
    return np.asarray(config.grid, dtype)


def make_segment(config, optimizer: optax.GradientTransformation):
    """The jitted ``(state, values, grid) -> state`` that runs ``config.segment`` optimizer
    steps on every restart of every grid point (restarts sharded over the devices — every
    process's, in a group); ``values``: the claim's traced parameters
    (:func:`jaxpriv.registry.programs.traced_values` of the relation: one program serves every
    instance of a claim that shares one, and every relation with the same notions, options
    and hints, :func:`jaxpriv.registry.programs.objective_key`: the bound is not read);
    ``grid``: :func:`grid_argument` (float32), the premise levels."""
    setup = config.setup
    eps = jnp.float32(config.param)
    t0, t1 = config.temperature
    mesh = Mesh(np.array(jax.devices()), ("restarts",))

    def restart_step(params, opt_state, best_params, best_score, best_built, x, step, values):
        relation, options = relation_at(config, values)
        fraction = jnp.minimum(step / config.steps, 1.0)
        temperature = t0 * (t1 / t0) ** fraction
        # optax minimizes: descend on the negated score; the same pass scores the current
        # iterate by the hard score (one premise retraction per step, not two)
        def loss(q):
            smooth, hard = scores(q, x, eps, relation, setup, options, temperature)
            return -smooth, hard

        (_, (score, mech)), grads = jax.value_and_grad(loss, has_aux=True)(params)
        score = jnp.where(jnp.isfinite(score), score, -jnp.inf)
        better = score > best_score
        best_params = jax.tree_util.tree_map(lambda b, p: jnp.where(better, p, b), best_params,
                                             params)
        best_built = jax.tree_util.tree_map(
            lambda b, a: jnp.where(better, a, b), best_built,
            Built(mech.log_K, mech.log_prior, mech.log_belief))
        best_score = jnp.maximum(score, best_score)
        # a non-finite gradient (never expected) must not poison the restart
        grads = jax.tree_util.tree_map(lambda g: jnp.where(jnp.isfinite(g), g, 0.0), grads)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        return params, opt_state, best_params, best_score, best_built

    # vmap over restarts, then over grid points
    over_restarts = jax.vmap(restart_step, in_axes=(0, 0, 0, 0, 0, None, None, None))
    over_grid = jax.vmap(over_restarts, in_axes=(0, 0, 0, 0, 0, 0, None, None))

    def local_segment(params, opt_state, best_params, best_score, best_built, step, values,
                      grid):
        def body(carry, k):
            return over_grid(*carry, grid, step + k, values), None
        carry, _ = jax.lax.scan(body, (params, opt_state, best_params, best_score, best_built),
                                jnp.arange(config.segment, dtype=jnp.int32))
        return carry

    spec = PartitionSpec(None, "restarts")
    sharded = jax.shard_map(local_segment, mesh=mesh,
                            in_specs=(spec,) * 5 + (PartitionSpec(),) * 3,
                            out_specs=(spec,) * 5)

    def segment(state: SearchState, values, grid) -> SearchState:
        exploring = (state.step > 0) & (state.step < config.explore * config.steps)
        state = jax.lax.cond(exploring, lambda s: _explore(config, s, grid), lambda s: s,
                             state)
        params, opt_state, best_params, best_score, best_built = sharded(
            state.params, state.opt_state, state.best_params, state.best_score,
            state.best_built, state.step, values, grid)
        return SearchState(params, opt_state, best_params, best_score,
                           state.step + config.segment, best_built)

    # the state comes back whole on every device (and every process of a group), for the host
    # side's checkpoints and re-checks; the next segment takes each device's share of it
    whole = NamedSharding(mesh, PartitionSpec())
    return jax.jit(segment, donate_argnums=0, in_shardings=(whole,) * 3, out_shardings=whole,
                   compiler_options=fused.program_options(config.n, config.m, _work(config)))


def _explore(config, state: SearchState, grid) -> SearchState:
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

    def carried(mech: Built, gates, x_to):
        """Parameters that :func:`jaxpriv.engines.search_objective.build` maps at ``x_to`` to
        ``mech``, which a donor's best parameters built at its ``x_from ≤ x_to`` (the
        retraction is the identity on feasible mechanisms). The mechanism is the one its step
        kept (:class:`Built`), not built again here: a second copy of the retraction in the
        program cost a third of this step's compiling (R5, D6 at 3×3)."""
        scale = jnp.maximum(1.0, 0.5 * x_to)
        return Params(jnp.maximum(mech.log_K, -60.0) / scale,
                      jnp.maximum(mech.log_prior, -60.0) / scale,
                      jnp.maximum(mech.log_belief, -60.0), gates)

    # every leaf moves as a row of one (G, R, F) matrix per dtype: one gather and one scatter
    # each, not one per leaf of the parameters, the optimizer's state and the kept mechanisms
    # (the leaf-by-leaf moves were most of this step's compiling)
    def at_donors(packed):
        return {dtype: a[donor_grid, donor] for dtype, a in packed.items()}

    best, unpack_best = _packed((state.best_params, state.best_built))
    donors, built = unpack_best(at_donors(best))
    exact = jax.vmap(jax.vmap(carried, in_axes=(0, 0, None)))(built, donors.gates, grid)
    key = jax.random.fold_in(jax.random.key(config.seed + 1), state.step)
    scale = 0.3 * (1.0 - state.step / (config.explore * config.steps)) + 0.02
    noisy = jax.tree_util.tree_map(lambda leaf, z: leaf + scale * z, donors,
                                   _normal_like(key, donors))

    def pick(exact_leaf, noisy_leaf):
        below = from_below.reshape(from_below.shape + (1,) * (exact_leaf.ndim - 2))
        return jnp.where(below, exact_leaf, noisy_leaf)

    current, unpack_current = _packed((state.params, state.opt_state))
    _, opt_of_donors = unpack_current(at_donors(current))
    incoming, _ = _packed((jax.tree_util.tree_map(pick, exact, noisy), opt_of_donors))
    params, opt_state = unpack_current(
        {dtype: a.at[rows, target].set(incoming[dtype]) for dtype, a in current.items()})
    return state._replace(params=params, opt_state=opt_state)


def _packed(tree):
    """``tree``'s ``(G, R, ...)`` leaves as one ``(G, R, F)`` matrix per dtype, and the function
    that unpacks such matrices (of any two leading dimensions) into a tree like it."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    groups: dict[Any, list[int]] = {}
    for i, leaf in enumerate(leaves):
        groups.setdefault(jnp.dtype(leaf.dtype), []).append(i)
    packed = {dtype: jnp.concatenate([jnp.reshape(leaves[i], leaves[i].shape[:2] + (-1,))
                                      for i in members], axis=2)
              for dtype, members in groups.items()}

    def unpack(matrices):
        out = [None] * len(leaves)
        for dtype, members in groups.items():
            sizes = [int(np.prod(leaves[i].shape[2:], dtype=int)) for i in members]
            matrix = matrices[dtype]
            parts = jnp.split(matrix, np.cumsum(sizes)[:-1], axis=2)
            for i, part in zip(members, parts):
                out[i] = part.reshape(matrix.shape[:2] + leaves[i].shape[2:])
        return treedef.unflatten(out)

    return packed, unpack


def _normal_like(key, tree):
    """Standard normal draws shaped like ``tree``'s leaves, from one draw of their total size
    (one random-bits program in the step, not one per leaf: each costs ~0.2 s to compile)."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    sizes = [leaf.size for leaf in leaves]
    flat = jax.random.normal(key, (sum(sizes),), leaves[0].dtype)
    parts = jnp.split(flat, np.cumsum(sizes)[:-1])
    return treedef.unflatten([part.reshape(leaf.shape) for part, leaf in zip(parts, leaves)])


def initial_state(config, optimizer: optax.GradientTransformation) -> SearchState:
    params = initial_params(config)
    opt_state = jax.vmap(jax.vmap(optimizer.init))(params)
    G, R = len(config.grid), config.restarts
    best = jax.tree_util.tree_map(jnp.copy, params)  # not aliased: the state is donated
    n, m = config.n, config.m
    uniform = Built(jnp.full((G, R, n, m), -np.log(m), jnp.float32),
                    jnp.full((G, R, n), -np.log(n), jnp.float32),
                    jnp.full((G, R, n), -np.log(n), jnp.float32))
    return SearchState(params, opt_state, best, jnp.full((G, R), -jnp.inf, jnp.float32),
                       jnp.zeros((), jnp.int32), uniform)
