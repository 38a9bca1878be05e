"""A search's float64 re-evaluation, from the best parameters to real witnesses: every
restart's best scored again in float64 (:func:`float64_scores`), the best of every grid point
rebuilt from scratch (:func:`candidate_mechanisms`) and checked, per grid point the feasible
witness with the least slack kept (:func:`evaluate_grid`), and every violation verified.

Relations whose search hint asks for gates (the PAC notions) give outputs soft failure gates
``g_w ∈ (0,1)``. A fractional gate is exact — it is the mechanism with output ``w`` split in
two proportional copies, which leaves every ratio unchanged — and the best ``γ/β`` is attained
at a single failing output (mediant inequality), so witnesses take the best binary gate set,
keeping ``m`` outputs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpriv import registry
from jaxpriv.core.mechanisms import Mechanism
from jaxpriv.engines import certify, io, programs, runstate
from jaxpriv.engines.search_loop import SearchState, grid_argument, relation_at
from jaxpriv.engines.search_objective import Params, build, objective_of, score_of
from jaxpriv.kernels import fused

MAX_WITNESSES = 100
"""Violating candidates verified and saved per search (more are not re-verified)."""
FAIL_VALUE = 2.0
"""Output value of a failing output under gates (``|v − μ| > α`` with ``μ = 0, α = 1``); passing
ones get 0."""


def candidate_mechanisms(config, params: Params) -> Mechanism:
    """The float64 mechanisms of parameters shaped ``(G, T, ...)`` (``T`` candidates per grid
    point), built again from scratch with the retraction in float64 at each grid point, as one
    batch ``(G, T, V, n, m)``. ``V = 1``, except with gates (PAC notions): one per binary gate set tried (the
    gates rounded, then each single failing output)."""
    with jax.enable_x64(True):
        _, mech, p64 = _float64_built(config, params, _values(config),
                                      grid_argument(config, np.float64))
        return _with_gate_sets(config, mech, p64)


def _values(config) -> dict[str, float]:
    """The claim's parameters the programs take as arguments (:mod:`jaxpriv.registry.programs`)."""
    return registry.programs.traced_values(registry.get(config.relation), np.float64)


def _with_gate_sets(config, mech: Mechanism, p64: Params) -> Mechanism:
    """``(G, T, n, m)`` float64 mechanisms widened to ``(G, T, V, n, m)``: ``V = 1``, or with
    gates one binary gate set per ``V`` (see :func:`candidate_mechanisms`)."""
    values = None
    if config.setup.gates:
        G, T, m = np.shape(p64.gates)
        rounded = (p64.gates > 0)[:, :, None, :]
        singles = jnp.broadcast_to(jnp.eye(m, dtype=bool), (G, T, m, m))
        values = jnp.where(jnp.concatenate([rounded, singles], axis=2), FAIL_VALUE, 0.0)
    V = 1 if values is None else values.shape[2]

    def widen(a):
        return jnp.broadcast_to(a[:, :, None], a.shape[:2] + (V,) + a.shape[2:])

    return Mechanism(widen(mech.log_K), widen(mech.log_prior), widen(mech.log_belief),
                     values, mech.records)


def float64_scores(config, params: Params) -> np.ndarray:
    """The hard objective of every ``(grid point, restart)`` in float64, shape ``(G, R)``."""
    relation = registry.get(config.relation)
    with jax.enable_x64(True):
        scores = programs.cached("float64 scores", relation, config, lambda: jax.jit(
            lambda p, values, grid: _float64_built(config, p, values, grid)[0],
            compiler_options=fused.program_options(config.n, config.m, work=0)))
        return np.asarray(scores(params, _values(config), grid_argument(config, np.float64)))


def _float64_built(config, params: Params, values, grid, bound: bool = True
                   ) -> tuple[jax.Array, Mechanism, Params]:
    """Every ``(grid point, restart)``'s float64 mechanism (built from scratch) and its hard
    objective (``(G, R)``; ``−∞`` where not finite), and the float64 parameters; ``values``:
    the claim's parameters (:func:`jaxpriv.registry.programs.bind`); ``grid``: the premise
    levels (:func:`jaxpriv.engines.search_loop.grid_argument`). ``bound=False``: the score
    (:func:`jaxpriv.engines.search_objective.score_of`, the objective less the bound's log at
    the grid point: the same order within a grid point) instead of the objective."""
    relation, options = relation_at(config, values)
    setup = config.setup
    eps = jnp.float64(config.param)

    def one(p, x):
        mech = build(p, x, eps, relation, setup)
        value = (objective_of(mech, p, x, eps, relation, setup, options, None) if bound else
                 score_of(mech, p, relation, setup, options, None))
        return jnp.where(jnp.isfinite(value), value, -jnp.inf), mech

    p64 = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64), params)
    scores, mechs = jax.vmap(jax.vmap(one, in_axes=(0, None)))(p64, grid)
    return scores, mechs, p64


def _checked_candidates(config, params: Params
                        ) -> tuple[np.ndarray, Mechanism, registry.CheckResult]:
    """Every restart's float64 score, the ``top`` best of each grid point (``(G, T)``, best
    first) as :func:`candidate_mechanisms` (the same float64 mechanisms, built once) and the
    relation's float64 check of them, in two compiled programs (op-by-op, the first call spent
    seconds compiling hundreds of small ops; two programs built every mechanism twice):

    * the scores, the best candidates and their notion levels, which never read the bound
      (the score ranks restarts within a grid point as the objective does): one program for
      every relation with the same notions (:func:`jaxpriv.registry.programs.levels_key`; D4
      compiled its own, 9 s cold, where D3's served);
    * the check's arithmetic on those levels (:func:`jaxpriv.registry.evaluate`): the bound,
      one small program per claim."""
    base = registry.get(config.relation)

    def best_and_levels(p, values, grid):
        relation, options = relation_at(config, values)
        scores, mechs, p64 = _float64_built(config, p, values, grid, bound=False)
        # best first; ties (−∞ included) in restart order, as NumPy's stable argsort
        order = jnp.argsort(-scores, axis=1, stable=True)[:, :config.top]

        def top(a):
            index = order.reshape(order.shape + (1,) * (a.ndim - 2))
            return jnp.take_along_axis(a, index, axis=1)

        chosen = Mechanism(top(mechs.log_K), top(mechs.log_prior), top(mechs.log_belief),
                           None, mechs.records)
        chosen = _with_gate_sets(config, chosen, jax.tree_util.tree_map(top, p64))
        return order, chosen, registry.notion_levels(relation, chosen, **options)

    def check(levels, values):
        relation, options = relation_at(config, values)
        return tuple(registry.evaluate(relation, None, levels=levels, **options)[1:])

    values, grid = _values(config), grid_argument(config, np.float64)
    options = fused.program_options(config.n, config.m, work=0)
    with jax.enable_x64(True):
        best = programs.kept(
            "float64 best of the search", base, config,
            lambda: jax.jit(best_and_levels, compiler_options=options),
            params, values, grid, program=registry.programs.levels_key(base))
        order, mechs, levels = best(params, values, grid)
        checked = programs.kept("float64 check of the best", base, config,
                                lambda: jax.jit(check), levels, values)
        return (np.asarray(order), mechs,
                registry.CheckResult(base.id, *(np.asarray(a) for a in checked(levels, values))))


def evaluate_grid(config, state: SearchState, out_dir: Path | None
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
    # order: (G, T) restarts, best float64 score first; checked: float64 arrays (G, T, V)
    order, mechs, checked = _checked_candidates(config, best)
    # on the host: a witness indexed out of device arrays dispatched a slice per array
    mechs = jax.tree_util.tree_map(np.asarray, mechs)
    x = np.asarray(config.grid)[:, None, None]
    with jax.enable_x64(True):
        used = checked.parameter if not setup.gridded_parameter else np.full_like(
            checked.parameter, config.param)
        grid_bound = registry.bound_at(relation, np.broadcast_to(x, used.shape), used)
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
        # (a found slack of 0 — a claimed bound of 0 and a positive conclusion — is below
        # every certified one: no shortfall, as a gap of −∞)
        row["gap"] = (1.0 if not np.isfinite(slack) else
                      -np.inf if slack == 0 and row["certified_slack"] > 0 else
                      0.0 if slack == 0 else 1.0 - row["certified_slack"] / slack)
    if out_dir is not None:
        name = f"witnesses/grid/g{g:03d}.json"
        io.save_mechanism(out_dir / name, mech, relation=config.relation, grid_point=x,
                          restart=r, **config.options)
        row["witness"] = name
    return row
