"""A sweep's float64 side on the host: a device record as a float64 mechanism
(:func:`record_mechanism`, :func:`mechanism_of`), the compiled float64 screen of the chunk's
candidates (:func:`float64_screen`: the notions' levels in a program shared by every relation
with the same notions, the check's arithmetic in one per claim), the candidates it finds
violating (:func:`violated_in_float64`) and the float64 check of the envelope's cells and the
worst point (:func:`checked_records`: their reported levels and slacks are the compiled
check's, the same as :func:`jaxpriv.registry.check` to 1e-12 relative in the tests). A violation
counts only once verified again from scratch (:func:`jaxpriv.engines.runstate.verify_witness`).
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxpriv import registry
from jaxpriv.core.mechanisms import Mechanism, Records
from jaxpriv.engines import programs
from jaxpriv.engines.sweep_state import Best, Candidates
from jaxpriv.engines.sweep_step import sampler_spec
from jaxpriv.kernels import fused

__all__ = ["RECORD_FIELDS", "checked_records", "float64_screen", "mechanism_of",
           "record_mechanism", "violated_in_float64", "warm_float64"]


RECORD_FIELDS = ("log_K", "log_prior", "log_belief", "values")
"""The arrays of a device-side record of mechanisms (:class:`jaxpriv.engines.sweep_state.Best`,
the candidates), as :func:`checked_records` reads them."""


def record_mechanism(config, best: Best, i: int) -> Mechanism:
    """Entry ``i`` of a device-side record, as a float64 mechanism."""
    spec = sampler_spec(config)
    return mechanism_of(best.log_K[i], best.log_prior[i], best.log_belief[i], best.values[i],
                        spec.values, spec.records)


def mechanism_of(log_K, log_prior, log_belief, values, has_values: bool,
                 records: Records | None = None) -> Mechanism:
    """A float64 mechanism from one record's float32 arrays (validated and renormalized)."""
    with jax.enable_x64(True):
        return Mechanism.from_log_K(np.asarray(log_K, np.float64), np.asarray(log_prior, np.float64),
                                    np.asarray(log_belief, np.float64),
                                    np.asarray(values, np.float64) if has_values else None,
                                    records=records, dtype=np.float64)


def float64_screen(config, relation, options) -> Callable[[Mechanism], registry.CheckResult]:
    """:func:`jaxpriv.registry.check` of ``relation`` on a float64 batch of ``config.candidates``
    mechanisms, as a :class:`jaxpriv.registry.CheckResult` of NumPy arrays, compiled ahead of
    the timed loop: the eager float64 check costs ~150 ms per batch at n = m = 8, the compiled
    one ~1 ms. It screens each chunk's candidates (:func:`violated_in_float64`) and checks the
    envelope's cells and the worst point (:func:`checked_records`). A violation it finds counts
    only once :func:`jaxpriv.engines.runstate.verify_witness` has checked it again eagerly.

    Two programs: the notions' float64 levels (:func:`jaxpriv.registry.notion_levels`), which
    never read the bound — one for every relation with the same notions and options
    (:func:`jaxpriv.registry.programs.levels_key`: D4 takes D3's, D7 D6's; ~2.5 s cold each)
    — and the check's arithmetic on them, the bound's, one small program per claim."""
    k, n, m = config.candidates, config.n, config.m
    spec = sampler_spec(config, relation)
    has_values = spec.values
    values = registry.programs.traced_values(relation, np.float64)
    fixed = {key: value for key, value in options.items() if key not in values}

    def levels_of(mech, at_values):
        at = registry.programs.bind(relation, at_values)
        return registry.notion_levels(at, mech, **fixed, **at_values)

    def screen(levels, at_values):
        at = registry.programs.bind(relation, at_values)
        return tuple(registry.evaluate(at, None, levels=levels, **fixed, **at_values)[1:])

    with jax.enable_x64(True):
        f64 = jnp.float64
        shape = Mechanism(jax.ShapeDtypeStruct((k, n, m), f64),
                          jax.ShapeDtypeStruct((k, n), f64), jax.ShapeDtypeStruct((k, n), f64),
                          jax.ShapeDtypeStruct((k, m), f64) if has_values else None,
                          spec.records)
        extra = tuple(sorted(fixed.items()))
        # one batch of candidates a chunk (fused.one_shot_options: level 0 for a short
        # sweep's, whose compile costs more than their run)
        chunks = -(-config.count // config.chunk)
        options = fused.one_shot_options(n, m, work=chunks * k * n * m)
        levels = programs.kept("float64 levels", relation, config,
                               lambda: jax.jit(levels_of, compiler_options=options),
                               shape, values, extra=extra,
                               program=registry.programs.levels_key(relation))
        # the levels' shapes and types as the program returns them (traced again only where
        # the program does not say: never for one compiled or loaded from disk)
        example = jax.tree_util.tree_map(
            lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype),
            getattr(levels, "out_info", None) or jax.eval_shape(levels_of, shape, values))
        checked = programs.kept("float64 screen", relation, config,
                                lambda: jax.jit(screen, compiler_options=options),
                                example, values, extra=extra)

    def check(mech: Mechanism) -> registry.CheckResult:
        with jax.enable_x64(True):
            found = checked(levels(mech, values), values)
            return registry.CheckResult(relation.id, *(np.asarray(a) for a in found))
    return check


def warm_float64(config, screen) -> None:
    """One pass of the host's float64 check on uniform mechanisms, before the timed loop: its
    first call (eager conversions dispatched for the first time) took 0.18 s, a third of a
    300,000-mechanism R5 sweep; later ones 3 ms."""
    k, n, m = config.candidates, config.n, config.m
    spec = sampler_spec(config)
    uniform = np.full((k, n), -np.log(n), np.float32)
    mech = mechanism_of(np.full((k, n, m), -np.log(m), np.float32), uniform, uniform,
                        np.zeros((k, m), np.float32), spec.values, spec.records)
    screen(mech)


def violated_in_float64(config, screen, candidates: Candidates,
                        lowest: dict | None = None) -> tuple[list[int], dict | None]:
    """The candidates whose float32 slack is below ``candidate_slack`` and that violate the
    relation when recomputed in float64, and the lowest float64 slack among the chunk's
    candidates and ``lowest`` (the runs' so far: ``{"slack", "index", "record"}``, the record
    the candidate's float32 arrays as lists). All are checked in one call of a fixed shape (a
    tight bound sends a full set of candidates every chunk; one call per candidate, or a new
    shape per chunk, made this the sweep's bottleneck)."""
    slack = np.asarray(candidates.score)
    index = np.asarray(candidates.index)
    real = index < config.count
    picked = (slack < config.candidate_slack) & real
    if not real.any():
        return [], lowest
    spec = sampler_spec(config)
    mech = mechanism_of(candidates.log_K, candidates.log_prior, candidates.log_belief,
                        candidates.values, spec.values, spec.records)
    checked = screen(mech)
    violated = checked.violated
    slack64 = np.where(checked.condition_holds, checked.slack, np.inf)
    slack64 = np.where(real & ~np.isnan(slack64), slack64, np.inf)
    k = int(np.argmin(slack64))
    if np.isfinite(slack64[k]) and (lowest is None or slack64[k] < lowest["slack"]):
        lowest = {"slack": float(slack64[k]), "index": int(index[k]), "record": {
            name: np.asarray(getattr(candidates, name))[k].tolist()
            for name in RECORD_FIELDS}}
    return [int(k) for k in np.flatnonzero(picked & violated)], lowest


def checked_records(config, screen, record, indices) -> tuple[Mechanism, registry.CheckResult]:
    """Entries ``indices`` of a record of mechanisms (an envelope's cells, the worst point: its
    arrays, :data:`RECORD_FIELDS`, on the host or a device) as float64 mechanisms on the host (a
    batch of NumPy arrays) and their float64 check by ``screen`` (:func:`float64_screen`), in
    batches of ``config.candidates`` (the last one padded with its last entry): the compiled
    screen's shape, no program of its own. One check per cell cost ~2 ms of dispatch and a
    program per claim and shape."""
    indices = np.asarray(indices, np.int64)
    k, count = config.candidates, len(indices)
    take = np.concatenate([indices, np.full(-count % k, indices[-1], np.int64)])
    spec = sampler_spec(config)
    mechs, checks = [], []
    for start in range(0, len(take), k):
        part = take[start:start + k]
        mech = mechanism_of(*(np.asarray(getattr(record, name))[part] for name in RECORD_FIELDS),
                            spec.values, spec.records)
        checks.append(screen(mech))
        mechs.append(jax.tree_util.tree_map(np.asarray, mech))
    mech = jax.tree_util.tree_map(lambda *a: np.concatenate(a)[:count], *mechs)
    return mech, registry.CheckResult(checks[0].relation, *(
        np.concatenate(parts)[:count] for parts in zip(*(c[1:] for c in checks))))
