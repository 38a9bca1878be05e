"""Sweeps and searches of the statistical relations R14 and R15 (SPEC §3), with the run-directory
contract of :mod:`jaxpriv.sweep` and :mod:`jaxpriv.search` (``summary.json``, ``envelope.csv``,
``envelope.png``, ``witnesses/``).

A *setting* plays the part a mechanism plays elsewhere: ``(T, κ₁, ε)`` for R14,
``(κ₁, κ₂, ε)`` for R15. The premise level ``x`` is ε; envelope rows are ε bins (sweep) or ε grid
points (search), each holding its lowest-slack setting.

* **R14 sweep**: settings drawn log-uniformly (``T`` in ``[1, t_max]``, stratified in
  ``log T`` so that each stratum sums only the terms its ``T`` can have: 4.7× the settings per
  second at ``t_max = 10⁴``; ``κ₁`` in ``[1e-4, ½]``, ε in ``[1e-2, x_max]``); the failure
  probability is the exact binomial tail, summed in log space from a log-factorial table in
  float64. A Monte Carlo estimate on the first
  ``mc_settings`` settings of every chunk checks it: each estimate carries a Bernstein interval
  at confidence ``1 − MC_DELTA`` per setting, and a disagreement is reported.
* **R14 search**: exhaustive over a log grid of ``T`` and ``κ₁`` at each ε, then two rounds of
  local refinement around the best setting.
* **R15 sweep**: Dirichlet pairs ``(κ₁, κ₂)`` on ``n`` secrets (concentrations over four decades),
  ε uniform in ``(0, 1)``; the worst estimation error over the perturbations is exact
  (:func:`jaxpriv.statistical.r15_worst_error`).
* **R15 search**: optax over the logits of ``κ₁, κ₂`` maximizing ``log(worst error) − log(bound)``
  at each ε, many restarts; the best restarts are re-checked in float64.

Every reported violation is re-checked from scratch by the registry's check
(:func:`jaxpriv.statistical.r14_check`, ``r15_check``) and saved as a witness file that
``jaxpriv check`` reads. Long runs checkpoint after every chunk and resume.

Examples:
  >>> from jaxpriv import statistical_audit as sa
  >>> config = sa.make_config("R14", "search", grid=(0.5, 4.0), t_max=2000)
  >>> rows = sa.run(config, progress=False).rows
  >>> [row["slack"] > 1 for row in rows]  # the Chernoff regime holds, ε = 4 does not
  [True, False]
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.scipy.special import gammaln

from jaxpriv import io, relations, statistical
from jaxpriv.errors import InputError

STATISTICAL = ("R14", "R15")
MODES = ("sweep", "search")
CHECKPOINT = "checkpoint.json"
MC_DELTA = 1e-9
"""Per-setting probability that a correct exact tail falls outside its Monte Carlo interval."""
KAPPA_RANGE = (1e-4, 0.5)
EPS_LOW = 1e-2


@dataclasses.dataclass(frozen=True)
class StatConfig:
    """Everything that determines a statistical audit's result.

    Attributes:
      relation: ``"R14"`` or ``"R15"``. mode: ``"sweep"`` or ``"search"``.
      count, chunk: sweep settings, and settings per compiled step.
      x_max, x_bins: ε bins ``[0, x_max]`` of the sweep envelope.
      grid: ε grid of the search.
      t_max: largest sample count ``T`` (R14).
      mc_settings, draws: Monte Carlo check of R14's exact tails, on this many settings per
        chunk with this many binomial draws each.
      n: secrets of ``κ₁, κ₂`` (R15).
      restarts, steps, learning_rate: the R15 search's optax runs per grid point.
      max_witnesses: violations saved as files (later ones are counted).
      seed: PRNG seed.
    """

    relation: str
    mode: str
    count: int = 100_000
    chunk: int = 1024
    x_max: float = 10.0
    x_bins: int = 40
    grid: tuple[float, ...] = ()
    t_max: int = 10_000
    mc_settings: int = 32
    draws: int = 2000
    n: int = 4
    restarts: int = 64
    steps: int = 1500
    learning_rate: float = 0.05
    max_witnesses: int = 100
    seed: int = 0

    @property
    def chunks(self) -> int:
        return -(-self.count // self.chunk)


def make_config(relation: str, mode: str, **overrides) -> StatConfig:
    """A validated :class:`StatConfig` (R15's ε range is ``(0, 1)``: its bin range and default
    grid follow)."""
    rid = relations.get(relation).id
    if rid not in STATISTICAL:
        raise InputError(f"{rid} is not a statistical relation ({', '.join(STATISTICAL)})")
    if mode not in MODES:
        raise InputError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if rid == "R15":
        overrides.setdefault("x_max", 1.0)
    if rid == "R14" and mode == "sweep":
        # stratified tails hold the whole-table memory of 1,024 settings at 8,192; per-chunk
        # host work (checkpoint, bins, the Monte Carlo check) is then amortized over 8× more
        overrides.setdefault("chunk", R14_CHUNK)
    for name in ("count", "chunk", "x_bins", "t_max", "mc_settings", "draws", "restarts",
                 "steps", "max_witnesses"):
        value = overrides.get(name, 1)
        if int(value) != value or value < 1:
            raise InputError(f"--{name.replace('_', '-')} must be a positive integer, got {value}")
    if overrides.get("n", 2) < 2 or int(overrides.get("n", 2)) != overrides.get("n", 2):
        raise InputError(f"--n must be an integer >= 2 (secrets of κ₁, κ₂), got {overrides['n']}")
    if overrides.get("t_max", 1) > statistical.MAX_T:
        raise InputError(f"--t-max must be at most {statistical.MAX_T:,}, got {overrides['t_max']}")
    if overrides.get("learning_rate", 1.0) <= 0:
        raise InputError(f"--lr must be positive, got {overrides['learning_rate']}")
    if int(overrides.get("seed", 0)) != overrides.get("seed", 0) or overrides.get("seed", 0) < 0:
        raise InputError(f"--seed must be a non-negative integer, got {overrides['seed']}")
    grid = overrides.pop("grid", None)
    if mode == "search":
        if grid is None or len(grid) == 0:
            grid = np.linspace(0.05, 0.95, 19) if rid == "R15" else np.linspace(0.25, 10, 40)
        grid = tuple(sorted({float(x) for x in grid}))
        if not all(math.isfinite(x) and x > 0 for x in grid):
            raise InputError(f"--grid points must be finite and > 0, got {list(grid)}")
        if rid == "R15" and max(grid) >= 1:
            raise InputError(f"R15 is claimed for 0 < ε < 1; the grid reaches {max(grid)}")
    else:
        grid = ()
    overrides["chunk"] = min(int(overrides.get("chunk", StatConfig.chunk)),
                             int(overrides.get("count", StatConfig.count)))
    return StatConfig(relation=rid, mode=mode, grid=grid, **overrides)


class StatResult(NamedTuple):
    config: StatConfig
    rows: list[dict[str, Any]]  # envelope rows, see report.ENVELOPE_COLUMNS
    violations: list[dict[str, Any]]
    violation_count: int
    seconds: float
    extra: dict[str, Any]  # R14 sweep: the Monte Carlo agreement record


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


def _r14_chunk(config: StatConfig):
    drawn = -(-config.chunk // R14_STRATA) * R14_STRATA  # the extra settings are not used

    def step(key, log_fact):
        k_set, k_mc = jax.random.split(key)
        T, kappa, eps = draw_r14_settings(k_set, drawn, config.t_max, config.x_max)
        log_failure, log_claimed = r14_stratified_log_terms(log_fact, T, kappa, eps,
                                                            config.t_max)
        T, kappa, eps, log_failure, log_claimed = (a[:config.chunk] for a in
                                                   (T, kappa, eps, log_failure, log_claimed))
        s = config.mc_settings
        x = jax.random.binomial(k_mc, T[:s], kappa[:s], shape=(config.draws, s),
                                dtype=jnp.float64)
        fails = jnp.abs(x - T[:s] * kappa[:s]) > eps[:s] * T[:s] * kappa[:s] * (
            1 + statistical.BOUNDARY_RTOL)
        return T, kappa, eps, log_failure, log_claimed, jnp.mean(fails, axis=0)
    return jax.jit(step)


# --------------------------------------------------------------------------------------------
# R15: worst estimation errors of many pairs at once
# --------------------------------------------------------------------------------------------


def draw_r15_settings(key, count: int, n: int):
    """``count`` pairs ``(κ₁, κ₂)`` on ``n`` secrets and ε uniform in ``(0, 1)``."""
    k_pairs, k_e = jax.random.split(key)
    kappa1, kappa2 = statistical.draw_distribution_pairs(k_pairs, count, n)
    eps = jax.random.uniform(k_e, (count,), jnp.float64, 1e-3, 1.0 - 1e-3)
    return kappa1, kappa2, eps


def _r15_chunk(config: StatConfig):
    def step(key, unused):
        kappa1, kappa2, eps = draw_r15_settings(key, config.chunk, config.n)
        error = jax.vmap(statistical.r15_worst_error)(kappa1, kappa2, eps)
        return kappa1, kappa2, eps, jnp.log(error), jnp.log(statistical.r15_bound(eps))
    return jax.jit(step)


# --------------------------------------------------------------------------------------------
# sweep driver
# --------------------------------------------------------------------------------------------


def _empty_state() -> dict[str, Any]:
    return {"next_chunk": 0, "seconds": 0.0, "violation_count": 0, "violations": [],
            "bins": {}, "mc": {"settings": 0, "disagreements": 0, "max_ratio": 0.0,
                               "worst": None}}


def _witness_fields(relation: str, values: tuple) -> dict[str, Any]:
    if relation == "R14":
        T, kappa, eps = values
        return {"T": int(T), "kappa1": float(kappa), "eps": float(eps)}
    kappa1, kappa2, eps = values
    return {"kappa1": [float(v) for v in kappa1], "kappa2": [float(v) for v in kappa2],
            "eps": float(eps)}


def _verify(relation_id: str, fields: dict[str, Any], out_dir: Path | None, name: str
            ) -> dict[str, Any] | None:
    """Re-check a setting from scratch with the registry's check; save it if violated."""
    relation = relations.get(relation_id)
    checked = relation.check(**fields)
    if not bool(checked.violated):
        return None
    found = {"file": None, "slack": float(checked.slack), "premise": float(checked.premise),
             "parameter": float(checked.parameter), "conclusion": float(checked.conclusion), "bound": float(checked.bound), **fields}
    if out_dir is not None:
        target = out_dir / "witnesses" / f"{name}.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        io.atomic_write(target, lambda f: json.dump({"relation": relation_id, **fields}, f,
                                                    indent=1))
        # the saved file must reproduce the violation when read back
        again = relation.check(**{k: v for k, v in json.loads(target.read_text()).items()
                                  if k != "relation"})
        if not bool(again.violated):
            target.unlink()
            return None
        found["file"] = str(target.relative_to(out_dir))
    return found


def _merge_bins(config: StatConfig, bins: dict, eps, log_slack, settings, offset: int) -> None:
    """Keep per ε bin the lowest-slack setting (as witness fields) and the bin's count."""
    cells = np.minimum((np.asarray(eps) / config.x_max * config.x_bins).astype(int),
                       config.x_bins - 1)
    for cell in np.unique(cells):
        members = np.flatnonzero(cells == cell)
        best = members[np.argmin(log_slack[members])]
        entry = bins.setdefault(str(cell), {"count": 0, "log_slack": math.inf, "fields": None,
                                            "index": None})
        entry["count"] += int(members.size)
        if entry["fields"] is None or log_slack[best] < entry["log_slack"]:
            entry.update(log_slack=float(log_slack[best]), index=offset + int(best),
                         fields=_witness_fields(config.relation,
                                                tuple(np.asarray(s)[best] for s in settings)))


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


def run_sweep(config: StatConfig, out_dir: Path | None, resume: bool, progress: bool,
              max_chunks: int | None = None) -> StatResult:
    state = _empty_state()
    if resume:
        state = _load_checkpoint(out_dir, config)
    elif out_dir is not None and (out_dir / CHECKPOINT).exists():
        raise InputError(f"{out_dir} already holds a run; use --resume, or a new --out")
    with jax.enable_x64(True):
        if config.relation == "R14":
            step, table = _r14_chunk(config), log_factorials(config.t_max)
        else:
            step, table = _r15_chunk(config), jnp.zeros(())
        bar = _progress_bar(config, state["next_chunk"] * config.chunk, config.count, progress,
                            "setting")
        stop = config.chunks if max_chunks is None else min(config.chunks,
                                                            state["next_chunk"] + max_chunks)
        for chunk_index in range(state["next_chunk"], stop):
            began = time.perf_counter()
            key = jax.random.fold_in(jax.random.key(config.seed), chunk_index)
            outputs = [np.asarray(a) for a in step(key, table)]
            size = min(config.chunk, config.count - chunk_index * config.chunk)
            outputs = [a[:size] if a.ndim and a.shape[0] == config.chunk else a for a in outputs]
            settings, log_y, log_bound = outputs[:3], outputs[3], outputs[4]
            log_slack = log_bound - log_y
            if config.relation == "R14":
                violated = log_slack < math.log1p(-statistical.R14_RTOL)
                s = min(config.mc_settings, size)
                _merge_mc(state["mc"], *(a[:s] for a in settings), log_y[:s],
                          outputs[5][:s], config.draws)
            else:
                violated = np.exp(log_y) > np.exp(log_bound) * (1 + relations.RTOL) + \
                    relations.ATOL
            offset = chunk_index * config.chunk
            _merge_bins(config, state["bins"], settings[-1], log_slack, settings, offset)
            for i in np.flatnonzero(violated):
                if len(state["violations"]) >= config.max_witnesses:
                    state["violation_count"] += 1  # counted on the float64 sweep arithmetic
                    continue
                fields = _witness_fields(config.relation, tuple(a[i] for a in settings))
                found = _verify(config.relation, fields, out_dir,
                                f"{config.relation}-{offset + i}")
                if found is not None:
                    state["violation_count"] += 1
                    state["violations"].append(found)
            state["next_chunk"] = chunk_index + 1
            state["seconds"] += time.perf_counter() - began
            if out_dir is not None:
                _save_checkpoint(out_dir, config, state)
            if bar is not None:
                bar.update(size)
                bar.set_postfix(violations=state["violation_count"])
        if bar is not None:
            bar.close()
    if state["next_chunk"] < config.chunks:
        return StatResult(config, [], state["violations"], state["violation_count"],
                          state["seconds"], {})
    rows = _envelope_rows(config, state["bins"], out_dir)
    extra = {}
    if config.relation == "R14":
        extra["monte_carlo"] = {**state["mc"], "draws": config.draws, "delta": MC_DELTA,
                                "interval": "Bernstein, two-sided, per setting; max_ratio = the largest "
                                "|estimate − exact| / half-width (1 = the interval's edge)"}
    return StatResult(config, rows, state["violations"], state["violation_count"],
                      state["seconds"], extra)


def _envelope_rows(config: StatConfig, bins: dict, out_dir: Path | None) -> list[dict]:
    """One row per non-empty ε bin (sweep) or grid point (search): its lowest-slack setting,
    re-checked from scratch in float64 and saved as a witness."""
    relation = relations.get(config.relation)
    rows = []
    for cell in sorted(bins, key=int):
        entry = bins[cell]
        checked = relation.check(**entry["fields"])
        name = ""
        if out_dir is not None:
            name = f"witnesses/bins/x{int(cell):03d}.json"
            target = out_dir / name
            target.parent.mkdir(parents=True, exist_ok=True)
            io.atomic_write(target, lambda f: json.dump(
                {"relation": relation.id, **entry["fields"]}, f, indent=1))
        x = entry.get("x", config.x_max * (int(cell) + 1) / config.x_bins)
        rows.append({"x": x, "param": "", "premise": float(checked.premise),
                     "parameter": float(checked.parameter),
                     "conclusion": float(checked.conclusion), "bound": float(checked.bound),
                     "slack": float(checked.slack), "count": entry["count"], "witness": name,
                     "log_slack": float(entry["log_slack"])})
    return rows


def _save_checkpoint(out_dir: Path, config: StatConfig, state: dict) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    record = {"config": json.loads(json.dumps(dataclasses.asdict(config))), **state}
    io.atomic_write(out_dir / CHECKPOINT, lambda f: json.dump(record, f))


def _load_checkpoint(out_dir: Path | None, config: StatConfig) -> dict:
    if out_dir is None:
        raise InputError("--resume needs --out DIR")
    path = out_dir / CHECKPOINT
    if not path.exists():
        raise InputError(f"{out_dir}: no checkpoint to resume (run without --resume first)")
    record = io.read_json(path)
    saved = record.pop("config", None)
    expected = json.loads(json.dumps(dataclasses.asdict(config)))
    if saved != expected:
        differing = sorted(k for k, v in expected.items() if (saved or {}).get(k) != v)
        raise InputError(f"{out_dir}: the checkpoint was made with different settings "
                         f"({', '.join(differing)}); resume with the same arguments")
    return record


# --------------------------------------------------------------------------------------------
# searches
# --------------------------------------------------------------------------------------------


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


def search_r14(config: StatConfig, progress: bool) -> dict:
    """Per ε: every ``T ≤ 64`` and a log grid of larger ``T`` up to ``t_max``, each with a log
    grid of κ₁ and the breakpoints of the failure set; then two local refinements."""
    bins = {}
    T_grid = np.unique(np.concatenate([np.arange(1, 65),
                                       np.geomspace(64, config.t_max, 80)]))
    T_grid = T_grid[T_grid <= config.t_max]
    bar = _progress_bar(config, 0, len(config.grid), progress, "ε point")
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


def search_r15(config: StatConfig, progress: bool,
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
        bar = _progress_bar(config, 0, config.steps * G * R, progress, "step")
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


def run_search(config: StatConfig, out_dir: Path | None, progress: bool) -> StatResult:
    began = time.perf_counter()
    bins = search_r14(config, progress) if config.relation == "R14" else search_r15(
        config, progress)
    rows = _envelope_rows(config, bins, out_dir)
    violations, count = [], 0
    for g, row in enumerate(rows):
        found = _verify(config.relation, bins[str(g)]["fields"], out_dir,
                        f"{config.relation}-g{g:03d}")
        if found is not None:
            found["grid_point"] = row["x"]
            violations.append(found)
            count += 1
    return StatResult(config, rows, violations, count, time.perf_counter() - began, {})


# --------------------------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------------------------


def run(config: StatConfig, out: str | os.PathLike | None = None, resume: bool = False,
        progress: bool = True, max_chunks: int | None = None) -> StatResult:
    """Run (or, for a sweep, resume) an audit; with ``out``, write the report.

    Args:
      config: from :func:`make_config`.
      out: run directory (``summary.json``, ``envelope.csv``, ``envelope.png``, ``witnesses/``).
      resume: continue a killed sweep from ``out``'s checkpoint (same config required). A
        search is short and restarts from scratch.
      progress: progress bar on stderr.
      max_chunks: stop a sweep after this many chunks in this call (no report).

    Returns:
      a :class:`StatResult`; every row is re-checked from scratch in float64.
    """
    out_dir = Path(out) if out is not None else None
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
    if config.mode == "sweep":
        result = run_sweep(config, out_dir, resume, progress, max_chunks)
        if not result.rows:
            return result
    else:
        if resume:
            raise InputError(f"{config.relation} searches are short and do not resume; run "
                             "again without --resume")
        result = run_search(config, out_dir, progress)
    if out_dir is not None:
        from jaxpriv import report
        report.write_statistical(out_dir, result, relations.get(config.relation))
    return result


def _progress_bar(config: StatConfig, start: int, total: int, enabled: bool, unit: str):
    if not enabled:
        return None
    from tqdm.auto import tqdm
    return tqdm(total=total, initial=start, unit=unit, unit_scale=True,
                desc=f"{config.mode} {config.relation}", smoothing=0.1, dynamic_ncols=True)
