"""The statistical relations of the seed papers, R14 and R15 (SPEC §3): claims about an
estimator, whose subject is a *setting* rather than a mechanism, registered as
:class:`~jaxpriv.registry.StatisticalRelation` records with the strategies the generic
statistical engine (:mod:`jaxpriv.engines.settings`) runs.

* **R14** (003 Lemma C.1; 002 Lemma A.10), a setting ``(T, κ₁, ε)``. Sweep: settings drawn
  log-uniformly (``T`` in ``[1, t_max]``, stratified in ``log T`` so that each stratum sums only
  the terms its ``T`` can have: 4.7× the settings per second at ``t_max = 10⁴``; ``κ₁`` in
  ``[1e-4, ½]``, ε in ``[1e-2, x_max]``); the failure probability is the exact binomial tail,
  summed in log space from a log-factorial table in float64. A Monte Carlo estimate on the first
  ``mc_settings`` settings of every chunk checks it: each estimate carries a Bernstein interval
  at confidence ``1 − MC_DELTA`` per setting, and a disagreement is reported. Search: exhaustive
  over a log grid of ``T`` and ``κ₁`` at each ε, then two rounds of local refinement around the
  best setting (the breakpoints where an outcome joins the failure set are candidates).
* **R15** (003 Thm D.1; 002 Thm A.11), a setting ``(κ₁, κ₂, ε)``. Sweep: Dirichlet pairs on
  ``n`` secrets (concentrations over four decades), ε uniform in ``(0, 1)``; the worst estimation
  error over the perturbations is exact (:func:`jaxpriv.core.statistical.r15_worst_error`). Search:
  optax over the logits of ``κ₁, κ₂`` maximizing ``log(worst error) − log(bound)`` at each ε.

Examples:
  >>> from jaxpriv import registry
  >>> registry.get("R14").check(T=10_000, kappa1=0.001, eps=4.0).violated.item()
  True
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.scipy.special import gammaln

from jaxpriv.core import statistical
from jaxpriv.core.errors import InputError
from jaxpriv.registry import (ATOL, RTOL, CheckResult, Source, StatisticalRelation, Strategies,
                              register, slack)

MC_DELTA = 1e-9
"""Per-setting probability that a correct exact tail falls outside its Monte Carlo interval."""
KAPPA_RANGE = (1e-4, 0.5)
EPS_LOW = 1e-2


# --------------------------------------------------------------------------------------------
# R14: exact tails of many settings at once
# --------------------------------------------------------------------------------------------


def log_factorials(t_max: int) -> jax.Array:
    """``log j!`` for ``j = 0..t_max`` (float64)."""
    return gammaln(jnp.arange(t_max + 1, dtype=jnp.float64) + 1.0)


def r14_log_terms(log_fact, T, kappa, eps, width: int | None = None):
    """``(log exact failure probability, log claimed bound)`` of settings ``(T, κ₁, ε)`` (each
    shape ``(c,)``, ``T`` integer-valued float64 ``≤ len(log_fact) − 1``), exactly in log space;
    ``log C(T, j)`` from the log-factorial table (a gather, not three ``gammaln`` per term).
    The sum runs over outcomes ``j < width`` (default: the whole table); ``width`` must exceed
    every ``T``."""
    width = width or log_fact.shape[0]
    j = jnp.arange(width, dtype=jnp.float64)[None, :]
    T_ = T[:, None]
    T_minus_j = jnp.where(j <= T_, T_ - j, 0.0).astype(jnp.int32)
    log_choose = log_fact[T.astype(jnp.int32)][:, None] - log_fact[None, :width] - \
        log_fact[T_minus_j]
    log_failure = statistical.log_failure_sum(log_choose, j, T_, kappa[:, None], eps[:, None])
    return log_failure, jnp.log(2.0) - eps**2 * T * kappa / 3.0


R14_CHUNK = 8192
"""Default settings per R14 sweep chunk (see :data:`R14_STRATA`)."""
R14_STRATA = 8
"""The R14 sweep draws ``log T`` stratified: setting ``i`` from the ``(i mod 8)``-th of eight
equal parts of ``[0, log(t_max + 1)]`` (equally likely under the log-uniform law, so a chunk is a
stratified sample of it), and sums each stratum's tails only up to its largest possible ``T``
instead of ``t_max``: 5.5× fewer terms at ``t_max = 10⁴``."""


def r14_stratum_widths(t_max: int, strata: int = R14_STRATA) -> list[int]:
    """Outcomes ``0..T`` to sum per stratum: one more than its largest ``T``, with a margin."""
    top = math.log(t_max + 1.0)
    return [min(t_max + 1, int(math.exp(top * (s + 1) / strata) * (1 + 1e-9)) + 2)
            for s in range(strata)]


def draw_r14_settings(key, count: int, t_max: int, eps_max: float, strata: int = R14_STRATA):
    """``count`` settings, log-uniform in each coordinate (float64 arrays ``(count,)``), ``log T``
    stratified: setting ``i``'s is uniform on the ``(i mod strata)``-th of ``strata`` equal parts
    of its range (``strata = 1``: plain log-uniform)."""
    k_T, k_k, k_e = jax.random.split(key, 3)
    stratum = jnp.arange(count) % strata
    u = (stratum + jax.random.uniform(k_T, (count,), jnp.float64)) / strata
    T = jnp.clip(jnp.floor(jnp.exp(u * jnp.log(t_max + 1.0))), 1.0, t_max)
    kappa = jnp.exp(jax.random.uniform(k_k, (count,), jnp.float64, *np.log(KAPPA_RANGE)))
    eps = jnp.exp(jax.random.uniform(k_e, (count,), jnp.float64, np.log(EPS_LOW),
                                     np.log(eps_max)))
    return T, kappa, eps


def r14_stratified_log_terms(log_fact, T, kappa, eps, t_max: int, strata: int = R14_STRATA):
    """:func:`r14_log_terms` of settings drawn with ``strata`` (``count`` a multiple of it), each
    stratum summed over its own width."""
    def columns(a):  # row s: the settings of stratum s
        return a.reshape(-1, strata).T
    parts = [r14_log_terms(log_fact, *(columns(a)[s] for a in (T, kappa, eps)), width=width)
             for s, width in enumerate(r14_stratum_widths(t_max, strata))]
    return tuple(jnp.stack([part[k] for part in parts]).T.reshape(-1) for k in range(2))


def bernstein_halfwidth(p, draws: int, delta: float):
    """Half-width ``t`` with ``P(|p̂ − p| ≥ t) ≤ δ`` for the mean of ``draws`` Bernoulli(p)
    (Bernstein: ``2exp(−D t²/(2p(1−p) + 2t/3)) = δ``, solved for ``t``)."""
    L = math.log(2.0 / delta)
    var = p * (1 - p)
    return (L / 3 + np.sqrt((L / 3) ** 2 + 2 * draws * var * L)) / draws


def _r14_chunk(config):
    drawn = -(-config.chunk // R14_STRATA) * R14_STRATA  # the extra settings are not used

    def step(key, log_fact):
        k_set, k_mc = jax.random.split(key)
        T, kappa, eps = draw_r14_settings(k_set, drawn, config.t_max, config.x_max)
        log_failure, log_claimed = r14_stratified_log_terms(log_fact, T, kappa, eps,
                                                            config.t_max)
        T, kappa, eps, log_failure, log_claimed = (a[:config.chunk] for a in
                                                   (T, kappa, eps, log_failure, log_claimed))
        s = min(config.mc_settings, config.chunk)  # a chunk smaller than the Monte Carlo set
        x = jax.random.binomial(k_mc, T[:s], kappa[:s], shape=(config.draws, s),
                                dtype=jnp.float64)
        fails = jnp.abs(x - T[:s] * kappa[:s]) > eps[:s] * T[:s] * kappa[:s] * (
            1 + statistical.BOUNDARY_RTOL)
        return T, kappa, eps, log_failure, log_claimed, jnp.mean(fails, axis=0, dtype=jnp.float64)
    return jax.jit(step)



def draw_r15_settings(key, count: int, n: int):
    """``count`` pairs ``(κ₁, κ₂)`` on ``n`` secrets and ε uniform in ``(0, 1)``."""
    k_pairs, k_e = jax.random.split(key)
    kappa1, kappa2 = statistical.draw_distribution_pairs(k_pairs, count, n)
    eps = jax.random.uniform(k_e, (count,), jnp.float64, 1e-3, 1.0 - 1e-3)
    return kappa1, kappa2, eps


def _r15_chunk(config):
    def step(key, unused):
        kappa1, kappa2, eps = draw_r15_settings(key, config.chunk, config.n)
        error = jax.vmap(statistical.r15_worst_error)(kappa1, kappa2, eps)
        return kappa1, kappa2, eps, jnp.log(error), jnp.log(statistical.r15_bound(eps))
    return jax.jit(step)



def _merge_mc(mc: dict, T, kappa, eps, log_failure, p_hat, draws: int) -> None:
    p = np.exp(np.asarray(log_failure))
    p_hat = np.asarray(p_hat)
    half = bernstein_halfwidth(p, draws, MC_DELTA)
    ratio = np.abs(p_hat - p) / half  # above 1: outside the interval
    mc["settings"] += int(p.size)
    mc["disagreements"] += int(np.sum(ratio > 1))
    if p.size and float(np.max(ratio)) > mc["max_ratio"]:
        i = int(np.argmax(ratio))
        mc["max_ratio"] = float(ratio[i])
        mc["worst"] = {"T": int(T[i]), "kappa1": float(kappa[i]), "eps": float(eps[i]),
                       "exact": float(p[i]), "estimate": float(p_hat[i]),
                       "interval": [float(max(p_hat[i] - half[i], 0.0)),
                                    float(min(p_hat[i] + half[i], 1.0))]}


KAPPA_CANDIDATES = 640
"""κ₁ values tried per ``(T, ε)`` in the R14 search (a fixed size: one compiled program)."""


def _r14_kappa_candidates(T: int, eps: float, around: float | None, width: float) -> np.ndarray:
    """κ₁ values for one ``(T, ε)``: a log grid (around ``around`` if given) and the
    breakpoints where an outcome joins the failure set (the failure probability jumps up
    there and the claim is continuous, so the worst slack sits just past one), nudged to the
    failing side."""
    if around is None:
        grid = np.geomspace(1e-6, 0.999, 240)
    else:
        grid = around * np.geomspace(1 / width, width, 240)
    j = np.unique(np.concatenate([np.arange(min(T, 40) + 1),
                                  np.round(np.geomspace(1, T, 160))]))
    upper = j / (T * (1 + eps)) * (1 - 1e-9)  # X = j fails above: κ just below j/(T(1+ε))
    lower = j / (T * (1 - eps)) * (1 + 1e-9) if eps < 1 else np.empty(0)
    breaks = np.concatenate([upper, lower])
    if around is not None:
        breaks = breaks[(breaks > around / width) & (breaks < around * width)]
    kappa = np.concatenate([grid, breaks])
    kappa = np.unique(kappa[(kappa > 1e-12) & (kappa < 1 - 1e-12)])
    if kappa.size > KAPPA_CANDIDATES:
        kappa = kappa[np.round(np.linspace(0, kappa.size - 1, KAPPA_CANDIDATES)).astype(int)]
    return np.resize(kappa, KAPPA_CANDIDATES)  # pad by repetition: one shape


def _r14_minimum(T_values, eps: float, around: float | None = None, width: float = 1.0):
    """The lowest log slack at ``ε`` over ``T_values`` and their κ₁ candidates, and its
    ``(T, κ₁)``."""
    best = (math.inf, None, None)
    for T in np.unique(np.clip(np.round(T_values), 1, statistical.MAX_T)).astype(np.int64):
        kappa = _r14_kappa_candidates(int(T), eps, around, width)
        log_failure = statistical.log_failure_probability(int(T), kappa, eps)
        log_slack = math.log(2.0) - eps**2 * T * kappa / 3.0 - log_failure
        i = int(np.argmin(log_slack))
        if log_slack[i] < best[0]:
            best = (float(log_slack[i]), int(T), float(kappa[i]))
    return best


def search_r14(config, progress) -> dict:
    """Per ε: every ``T ≤ 64`` and a log grid of larger ``T`` up to ``t_max``, each with a log
    grid of κ₁ and the breakpoints of the failure set; then two local refinements."""
    bins = {}
    T_grid = np.unique(np.concatenate([np.arange(1, 65),
                                       np.geomspace(64, config.t_max, 80)]))
    T_grid = T_grid[T_grid <= config.t_max]
    bar = progress(len(config.grid), "ε point")
    for g, eps in enumerate(config.grid):
        log_slack, T, kappa = _r14_minimum(T_grid, eps)
        for width in (1.3, 1.03):
            T_local = np.round(T * np.geomspace(1 / width, width, 41))
            candidate = _r14_minimum(T_local[T_local <= config.t_max], eps, kappa, width)
            if candidate[0] < log_slack:
                log_slack, T, kappa = candidate
        bins[str(g)] = {"count": len(T_grid) * KAPPA_CANDIDATES, "log_slack": log_slack,
                        "fields": {"T": T, "kappa1": kappa, "eps": float(eps)}, "x": eps}
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return bins


def _r15_objective(logits, eps):
    """``log(worst error) − log(bound)`` of the pair with these logits (``(2, n)``)."""
    kappa = jax.nn.softmax(logits, axis=-1)
    error = statistical.r15_worst_error(kappa[0], kappa[1], eps)
    return jnp.log(jnp.maximum(error, 1e-300)) - jnp.log(statistical.r15_bound(eps))


def search_r15(config, progress,
               optimizer: optax.GradientTransformation | None = None) -> dict:
    """optax (Adam, cosine schedule by default) over the logits of ``(κ₁, κ₂)``, vmapped over
    restarts and ε grid points, in float64; the best iterate of every restart is kept and the
    best of every grid point re-checked from scratch."""
    optimizer = optimizer or optax.adam(optax.cosine_decay_schedule(
        config.learning_rate, config.steps, alpha=0.01))
    G, R, n = len(config.grid), config.restarts, config.n
    with jax.enable_x64(True):
        grid = jnp.asarray(config.grid, jnp.float64)
        key = jax.random.key(config.seed)
        scale = jnp.exp(jax.random.uniform(jax.random.fold_in(key, 1), (G, R, 1, 1),
                                           jnp.float64, jnp.log(0.3), jnp.log(6.0)))
        params = scale * jax.random.normal(key, (G, R, 2, n), jnp.float64)
        opt_state = jax.vmap(jax.vmap(optimizer.init))(params)

        def one_step(p, o, best_p, best_v, eps):
            value, grad = jax.value_and_grad(_r15_objective)(p, eps)
            grad = jnp.where(jnp.isfinite(grad), grad, 0.0)
            updates, o = optimizer.update(-grad, o, p)
            better = jnp.isfinite(value) & (value > best_v)
            return (optax.apply_updates(p, updates), o, jnp.where(better, p, best_p),
                    jnp.where(better, value, best_v))

        over = jax.vmap(jax.vmap(one_step, in_axes=(0, 0, 0, 0, None)),
                        in_axes=(0, 0, 0, 0, 0))

        @jax.jit
        def segment(carry):
            def body(c, _):
                return over(*c, grid), None
            return jax.lax.scan(body, carry, None, length=100)[0]

        carry = (params, opt_state, params, jnp.full((G, R), -jnp.inf))
        bar = progress(config.steps * G * R, "step")
        for _ in range(-(-config.steps // 100)):
            carry = segment(carry)
            if bar is not None:
                bar.update(100 * G * R)
        if bar is not None:
            bar.close()
        best_p, best_v = carry[2], np.asarray(carry[3])
        bins = {}
        for g, eps in enumerate(config.grid):
            r = int(np.argmax(best_v[g]))
            kappa = np.asarray(jax.nn.softmax(best_p[g, r], axis=-1))
            fields = {"kappa1": kappa[0].tolist(), "kappa2": kappa[1].tolist(),
                      "eps": float(eps)}
            bins[str(g)] = {"count": R, "log_slack": -float(best_v[g, r]), "fields": fields,
                            "x": float(eps)}
    return bins


# --------------------------------------------------------------------------------------------
# the registry checks (one setting, exact, float64)
# --------------------------------------------------------------------------------------------


def r14_check(T, kappa1, eps):
    """R14 at one setting, exactly: the premise is ε, the parameter ``Tκ₁`` (the expected
    count), the conclusion the exact failure probability ``P(|κ̂₁ − κ₁| > εκ₁)`` and the bound
    the claimed ``2·exp(−ε²Tκ₁/3)``; compared in log space, violated when the claim is below
    the exact value by more than :data:`statistical.R14_RTOL`. Returns a ``CheckResult``."""
    T, kappa, eps = statistical._checked(T, kappa1, eps)
    if T.ndim or kappa.ndim or eps.ndim:
        raise InputError("an R14 witness is one setting: T, kappa1 and eps must be numbers")
    log_failure = float(statistical.log_failure_probability(int(T), kappa, eps))
    # (ε·ε: float ** 2 raises OverflowError beyond ε ≈ 1.3e154, where the claim is −∞ in logs)
    log_claimed = math.log(2.0) - float(eps) * float(eps) * float(T) * float(kappa) / 3.0
    log_slack = log_claimed - log_failure
    with np.errstate(over="ignore", under="ignore"):
        values = [np.float64(v) for v in (eps, T * kappa, T * kappa, True, np.exp(log_failure),
                                          np.exp(log_claimed), np.exp(log_slack),
                                          log_slack < math.log1p(-statistical.R14_RTOL))]
    return CheckResult("R14", *(np.asarray(v) for v in values[:3]), np.asarray(True),
                       *(np.asarray(v) for v in values[4:7]), np.asarray(bool(values[7])))


def r15_check(kappa1, kappa2, eps):
    """R15 at one pair ``(κ₁, κ₂)``, exactly: the conclusion is the worst ``|Ĉ₁ − C₁|`` over
    every estimate with ``|κ̂₁ − κ₁| ≤ εκ₁`` (:func:`r15_extremes`), the bound 003 Thm D.1's.
    The claim is made for ``0 < ε < 1`` (the bound needs ``log(1−ε)``); elsewhere the
    condition fails. Returns a ``CheckResult``."""
    k1, k2 = statistical._checked_distribution(kappa1, "kappa1"), statistical._checked_distribution(kappa2, "kappa2")
    if k1.shape != k2.shape:
        raise InputError(f"kappa1 and kappa2 must have the same length, got {k1.size} and "
                         f"{k2.size}")
    eps = float(np.asarray(eps, np.float64))
    if not math.isfinite(eps) or eps <= 0:
        raise InputError(f"eps must be positive and finite, got {eps}")
    holds = eps < 1
    with jax.enable_x64(True):
        error = float(statistical.r15_worst_error(jnp.asarray(k1), jnp.asarray(k2), eps))
        bound = float(statistical.r15_bound(jnp.float64(eps))) if holds else math.inf
        slack_ = float(slack(bound, error))
    violated = holds and error > bound * (1 + RTOL) + ATOL
    return CheckResult("R15", *(np.asarray(v, np.float64) for v in (eps, 0.0, 0.0)),
                                 np.asarray(holds), *(np.asarray(v, np.float64)
                                                      for v in (error, bound, slack_)),
                                 np.asarray(violated))




def _r14_fields(values) -> dict:
    T, kappa, eps = values
    return {"T": int(T), "kappa1": float(kappa), "eps": float(eps)}


def _r14_violated(log_y, log_bound):
    return log_bound - log_y < math.log1p(-statistical.R14_RTOL)


def _r14_step(config):
    return _r14_chunk(config), log_factorials(config.t_max)


def _r14_initial():
    return {"mc": {"settings": 0, "disagreements": 0, "max_ratio": 0.0, "worst": None}}


def _r14_on_chunk(extra: dict, config, settings, log_y, outputs) -> None:
    s = min(config.mc_settings, log_y.shape[0])
    _merge_mc(extra["mc"], *(a[:s] for a in settings), log_y[:s], outputs[0][:s], config.draws)


def _r14_summary(extra: dict, config) -> dict:
    return {"monte_carlo": {**extra["mc"], "draws": config.draws, "delta": MC_DELTA,
                            "interval": "Bernstein, two-sided, per setting; max_ratio = the "
                            "largest |estimate − exact| / half-width (1 = the interval's edge)"}}


def _r15_fields(values) -> dict:
    kappa1, kappa2, eps = values
    return {"kappa1": [float(v) for v in kappa1], "kappa2": [float(v) for v in kappa2],
            "eps": float(eps)}


def _r15_violated(log_y, log_bound):
    return np.exp(log_y) > np.exp(log_bound) * (1 + RTOL) + ATOL


def _r15_step(config):
    return _r15_chunk(config), jnp.zeros(())


R14 = register(StatisticalRelation(
    id="R14", statement="P(|κ̂₁−κ₁| ≤ ε·κ₁) ≥ 1 − 2exp(−ε²Tκ₁/3) for κ̂₁ = X/T, "
                        "X ~ Binomial(T, κ₁)",
    sources=(Source("003", "Lemma C.1"), Source("002", "Lemma A.10")),
    premise="relative accuracy ε", conclusion="failure probability P(|κ̂₁−κ₁| > εκ₁)",
    condition="T samples (no range for ε is stated)", fields=("T", "kappa1", "eps"),
    check_fn=r14_check, rtol=statistical.R14_RTOL, parameter_label="Tκ₁", log_slack=True,
    grid=(0.25, 10.0, 40),
    strategies=Strategies(
        sweep_step=_r14_step, fields=_r14_fields, violated=_r14_violated, search=search_r14,
        defaults={"sweep": {"chunk": R14_CHUNK}}, initial=_r14_initial, on_chunk=_r14_on_chunk,
        summary=_r14_summary,
        reads={"sweep": ("t_max", "draws", "mc_settings"), "search": ("t_max",)})))
R15 = register(StatisticalRelation(
    id="R15", statement="|κ̂₁−κ₁| ≤ εκ₁ ⇒ |Ĉ₁−C₁| ≤ sqrt((1+ε)log((1+ε)/(1−ε))/2 + "
                        "(ε + max(log(1+ε), log(1/(1−ε))))/2)",
    sources=(Source("003", "Thm D.1"), Source("002", "Thm A.11")),
    premise="relative accuracy ε", conclusion="worst |Ĉ₁ − C₁| over the estimates",
    condition="0 < ε < 1", fields=("kappa1", "kappa2", "eps"), check_fn=r15_check,
    grid=(0.05, 0.95, 19), x_range=(0.0, 1.0), fixed_grid=True,
    bound_curve=statistical.r15_bound,
    strategies=Strategies(
        sweep_step=_r15_step, fields=_r15_fields, violated=_r15_violated, search=search_r15,
        defaults={"sweep": {"x_max": 1.0}, "search": {"x_max": 1.0}},
        reads={"sweep": ("n",), "search": ("n", "restarts", "steps", "learning_rate", "seed")})))
