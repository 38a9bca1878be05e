"""Fused batch kernels: LDP, MBP and ABP (record law, every ``d*``) in one pass, for throughput;
and the database notions' (DP, BDP, SP, BSP, MP: :func:`database_levels`), all the sweep's
screens by field name (:func:`screen_levels`, :data:`SCREENS`).

:mod:`jaxpriv.core.notions` is the reference implementation, written for one mechanism and
broadcasting over leading batch axes. On a CPU that layout is slow for millions of tiny
mechanisms: every reduction runs over an axis of length 8, and whole-batch intermediates do not
fit in cache. This module computes the same levels with the batch as the *minor* (last) axis, so
every reduction over secrets or outputs is an elementwise operation across SIMD lanes of
mechanisms, and processes the batch in cache-sized tiles with ``lax.map``. In float32 the JS
terms come from :func:`jaxpriv.core.divergences.js_terms_fast` (float32-accurate, half the cost of
the reference terms); float64 input gets the reference terms. On a CPU, float32 batches go to
the same computation written by hand (:mod:`jaxpriv.kernels.native`) where it can be built. The sweep
screens mechanisms with it; every reported number is still recomputed by :mod:`jaxpriv.core.notions`
in float64.

The record-law ABP needs ``F^A_{d*} − π`` for every true secret ``d*``; with ``Y[d,w] = K[d,w] −
p(w)`` (the law's deviation from the marginal) and ``Z[d,w] = P[d,w] − π(d) = π(d)·Y[d,w]/p(w)``
(the posterior shift), ``F^A_{a} − π = Σ_w Y[a,w]·Z[·,w]``: one small Gram product per mechanism
instead of ``n`` laws, and a product of two small differences where ``K ≈ p`` (see
:func:`jaxpriv.core.notions.abp_kernel` for why that form).

Examples:
  >>> import jax
  >>> from jaxpriv import families
  >>> from jaxpriv.kernels import fused
  >>> mech = families.randomized_response(1.0)
  >>> levels = jax.jit(fused.record_levels)(mech.log_K, mech.log_prior, mech.log_belief)
  >>> round(float(levels.mbp), 5), round(float(levels.abp), 5)  # log((1+e)/2) = 0.6201145
  (0.62011, 0.07601)
"""

from __future__ import annotations

from collections.abc import Collection

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxpriv.core import databases, divergences
from jaxpriv.kernels import native
from jaxpriv.core.mechanisms import Mechanism, Records

NEG_INF = -jnp.inf
TILE_ENTRIES = 8192
"""Entries of K per tile (``tile = TILE_ENTRIES / (n·m)`` mechanisms, within [64, 1024]): small
enough that a tile's ``(n, n, tile)`` intermediates stay in a core's L2 cache. Measured on a
2-core CPU (2026-11-23 kernel): n = m = 8 runs 3.8–4.0e6 mechanisms/s at 64, 128 and 256 per
tile (within noise), 2.6e6/s at 512. The tiles run one after another, so off a CPU
:func:`record_levels` takes the whole batch as one tile."""


def default_tile(n: int, m: int) -> int:
    return int(min(1024, max(64, TILE_ENTRIES // (n * m))))


class RecordLevels(NamedTuple):
    """The levels :func:`record_levels` returns, each of the batch shape.

    Attributes:
      ldp: ``ε_LDP`` (all pairs of secrets), as :func:`jaxpriv.core.notions.ldp`.
      mbp: ``ξ``, as :func:`jaxpriv.core.notions.mbp`.
      abp: ABP level under the record law (max over ``d*`` with ``π(d*) > 0``), as
        ``notions.abp(mech, "record").level``.
      eps_unif: ``ε_unif(π)``.
      eps_bel: ``ε_bel(b, π)``.
    """

    ldp: Float[Array, "*b"]
    mbp: Float[Array, "*b"]
    abp: Float[Array, "*b"]
    eps_unif: Float[Array, "*b"]
    eps_bel: Float[Array, "*b"]


def record_levels_minor(log_K: Float[Array, "n m t"], log_prior: Float[Array, "n t"],
                        log_belief: Float[Array, "n t"]) -> RecordLevels:
    """The levels of a tile of mechanisms stored batch-minor (the batch is the last axis).

    Args:
      log_K: ``log K[d, w, i]`` of mechanism ``i``, shape ``(n, m, t)``.
      log_prior, log_belief: shape ``(n, t)``.

    Returns:
      :class:`RecordLevels`, each of shape ``(t,)``.
    """
    # Reductions over the short secret axis are written as elementwise chains over its slices:
    # XLA:CPU then keeps them in its loop fusions instead of calling a reduction library.
    top = _over_secrets(jnp.maximum, log_K)  # (m, t)
    occurs = top > NEG_INF
    safe_top = jnp.where(occurs, top, 0.0)
    spread = jnp.where(occurs, top - jnp.where(occurs, _over_secrets(jnp.minimum, log_K), 0.0),
                       0.0)
    ldp = _over_secrets(jnp.maximum, spread)

    # Column-scaled mechanism R = K / max_d K (entries in [0, 1], 1 at the top): the marginal
    # p(w) = e^{top(w)}·q(w) with q = Σ_d π(d)·R[d,w] cannot underflow where K itself would.
    scaled = jnp.exp(log_K - safe_top)
    prior = jnp.exp(log_prior)
    belief = jnp.exp(log_belief)
    q = _over_secrets(jnp.add, prior[:, None] * scaled)
    possible = q > 0  # p(w) > 0
    safe_q = jnp.where(possible, q, 1.0)
    log_p = safe_top + jnp.log(safe_q)
    counted = log_prior > NEG_INF
    # log_p is finite everywhere (safe_q), so |log K − log p| is a number or +inf, never NaN
    mbp_per_output = _over_secrets(jnp.maximum, jnp.where(counted[:, None] & possible,
                                                           jnp.abs(log_K - log_p), 0.0))
    mbp = _over_secrets(jnp.maximum, mbp_per_output)

    # Y[d,w] = K[d,w] − p(w) = e^{top}·(R − q): the record law of d minus the marginal;
    # Z = π·Y/p = π·(R − q)/q = P − π: the posterior shift. Rows of secrets with π(d) = 0 (the
    # only ones that can put mass on impossible outputs) are computed but never counted.
    centred = jnp.where(possible, scaled - q, 0.0)
    deviation = jnp.exp(safe_top) * centred  # centred is 0 in a column no secret reaches
    shift = prior[:, None] * centred / safe_q
    delta = _gram(deviation, shift)  # F^A_{d*=a}(c) − π(c)
    js_terms = divergences.js_terms_fast(jnp.maximum(prior + belief + delta, 0.0),
                                         delta + (prior - belief))
    js = jnp.clip(_over_secrets(jnp.add, jnp.moveaxis(js_terms, 1, 0)), 0.0, divergences.LN2)
    positive = js > 0
    abp_vector = jnp.where(positive, jnp.sqrt(jnp.where(positive, js, 1.0)), 0.0)
    abp = _over_secrets(jnp.maximum, jnp.where(counted, abp_vector, 0.0))

    bottom = _over_secrets(jnp.minimum, log_prior)
    eps_unif = jnp.where(bottom > NEG_INF,
                         _over_secrets(jnp.maximum, log_prior) - jnp.where(bottom > NEG_INF,
                                                                           bottom, 0.0),
                         jnp.inf)
    both_zero = (log_belief == NEG_INF) & (log_prior == NEG_INF)
    eps_bel = _over_secrets(jnp.maximum, jnp.abs(jnp.where(both_zero, 0.0, log_belief)
                                                 - jnp.where(both_zero, 0.0, log_prior)))
    return RecordLevels(ldp, mbp, abp, eps_unif, eps_bel)


_CHAINED_REDUCTIONS = {jnp.maximum: jnp.max, jnp.minimum: jnp.min, jnp.add: jnp.sum}
CHAIN_LIMIT = 8
"""Longest axis folded as an elementwise chain; longer ones use XLA's reduction (measured at
n = m = 16 and 32: the chains are 1.5–2.5× slower there, at n = m = 8 they are faster)."""


def compiler_options(n: int, m: int) -> dict[str, str] | None:
    """XLA options for a jitted program that samples and screens mechanisms of shape ``(n, m)``.

    On a CPU with ``n, m ≤`` :data:`CHAIN_LIMIT` the reductions left are over short axes (the
    sampler's rows), and XLA's own loops beat the YNNPACK fusions it otherwise calls for them:
    measured on a 2-core CPU at n = m = 8, the sampler ran 2.5× faster (4.4–4.7e6 vs
    1.6–1.9e6 mechanisms/s) and the R1/R5 sweeps 1.4–1.7×; sweeps screened by the reference
    notions gain too (database relations at k = 2, r = 3: BDP/BSP 1.7×, BDP/MP 1.25×, the
    others unchanged); at n = m = 16 YNNPACK is faster (R5 0.44e6 vs 0.29e6/s), so larger
    shapes, and other backends, get ``None`` (the defaults).

    Examples:
      >>> step = jax.jit(lambda x: x, compiler_options=compiler_options(8, 8))
    """
    if max(n, m) > CHAIN_LIMIT or jax.default_backend() != "cpu":
        return None
    return {"xla_cpu_experimental_ynn_fusion_type": ""}


COMPILE_BOUND_WORK = 10**7
"""Below this much work (entries of K evaluated: restart-steps × n × m for a search,
mechanisms × n × m for a sweep) a program's compile costs more than its run on a CPU, and
:func:`program_options` trades run speed for compile time."""


def program_options(n: int, m: int, work: float | None = None) -> dict[str, str | int] | None:
    """XLA options for the engines' compiled programs (sweep steps, search segments and their
    float64 re-evaluation) on mechanisms of shape ``(n, m)``: :func:`compiler_options`, and on
    a CPU the backend's optimization level 2 instead of 3; for a program that runs less than
    :data:`COMPILE_BOUND_WORK` (``work``: entries of K it evaluates; ``None``: a long run, 0: a
    one-shot program), also :data:`CHEAP_COMPILE`: XLA:CPU's elemental fusion emitters instead of
    its MLIR ones, and LLVM without its expensive passes.

    Measured on a 2-core CPU (2026-11-25), level 1 compiles a search segment 27–37% faster and
    runs it as fast or faster (R5/R7 at the standard budget 14–17% faster, R1 within 3%), a
    sweep step drawn and screened natively 7–11% faster at the same speed; most of a quick
    audit is compiling. JAX's own sampler, though, runs a third slower at level 1, and the
    reference database notions half as fast: a sweep that draws or screens with XLA keeps
    :func:`compiler_options`. The elemental emitters compile a search segment ~30% faster
    (R5 3.1 → 2.1 s, R7 3.7 → 2.7 s) and run it 10% (n = m = 4) to 30% (n = m = 8) slower:
    worth it for a quick audit's searches (~30,000 restart-steps at n = m = 3; its R1–R15 cold
    95–99 → 82 s), not a standard one's. Their exp and log round differently, so a search's
    float32 trajectory depends on which emitters compiled it (a deterministic function of its
    config); a natively drawn and screened sweep step is bit for bit the same with either.

    Level 2, not 1 (2026-11-28): at level 1 LLVM aborted the process compiling a search segment
    with 8 restarts on one device and a root-found premise retraction (D6, D7, D8 at n = 2–3,
    m = 3–4; "Cannot select: v16f32 = X86ISD::SUBV_BROADCAST_LOAD", AVX-512), an abort no code
    can catch; level 2 compiled every such case, as fast or faster (R5 3.08 → 2.80 s, D6 3.28
    → 2.77 s, D8 3.20 → 3.09 s), its segments as fast (D6 0.58 → 0.48 s, D8 3.23 → 2.87 s) to
    the same best scores; the 63 quick-audit verdicts are identical.

    Examples:
      >>> options = program_options(8, 8, work=0)  # a one-shot program: compile it cheaply
    """
    if jax.default_backend() != "cpu":
        return None
    options = {**(compiler_options(n, m) or {}), "xla_backend_optimization_level": 2}
    if work is not None and work < COMPILE_BOUND_WORK:
        options.update(CHEAP_COMPILE)
    return options


CHEAP_COMPILE = {"xla_cpu_use_fusion_emitters": False, "xla_llvm_disable_expensive_passes": True}
"""XLA:CPU options of a compile-bound program (:func:`program_options`): the elemental fusion
emitters, and LLVM without its expensive passes (the SLP vectorizer among them). Measured on the
2-core AVX-512 EPYC (2026-11-29), the passes off compiled a quick audit's R5, D6 and D8 sweep
steps 4–14% faster and their searches (segment, float64 best of the search, check) 4–10% faster,
ran them as fast, and found the same best slacks to the last digit printed."""


ONE_SHOT_WORK = 10**4
"""Below this much work (entries of K a program evaluates over its run) a one-shot program is
compiled at XLA's optimization level 0 (:func:`one_shot_options`)."""


def one_shot_options(n: int, m: int, work: float = 0) -> dict[str, str | int] | None:
    """XLA options for a program run once or a few times on few mechanisms (a sweep's float64
    screen of its candidates, the float64 check of a witness, the draw of a search's starting
    points): :func:`program_options` for a one-shot program, and below :data:`ONE_SHOT_WORK`
    (``work``: entries of K evaluated over every call) the backend's optimization level 0.

    Measured on the 2-core AVX2 EPYC (2026-11-29, ``benchmarks/bench_one_shot.py``), the
    float64 notion levels of 64 candidates at n = m = 4: D8's (zCDP, ε(δ)) compile in 4.6 s at
    XLA's defaults, 3.2 s at level 2 with the elemental emitters, 1.5 s at level 0, and run in
    25, 32 and 154 ms (D3 and C6 alike): level 0 saves more compiling than it costs running up
    to ~10,000 entries. Its values differ from the defaults' by at most 5e-16 relative (level 2:
    identical); a violation still counts only once :func:`jaxpriv.engines.runstate.verify_witness`
    has checked it again from its saved file. Not for a search's float64 best-of-search
    program: it retracts every restart (bisections of zCDP levels) and ran slower at level 0
    than it compiled faster. The suite compiles its own programs at level 0 too
    (``tests/conftest.py``).

    Examples:
      >>> options = one_shot_options(4, 4, work=64 * 16)  # one batch of 64 candidates
    """
    options = program_options(n, m, work=0)
    if options is not None and work < ONE_SHOT_WORK:
        options["xla_backend_optimization_level"] = 0
    return options


def integer_program_options() -> dict[str, int | bool] | None:
    """XLA options for a small integer program (the sweep's seed words, :mod:`jaxpriv.engines.sweep`):
    on a CPU the backend's level 1 and the elemental fusion emitters, which compile a chunk's
    seed words in 1.16 s instead of 1.83 s and run them as fast (0.7 ms); integer results do not
    depend on either."""
    if jax.default_backend() != "cpu":
        return None
    return {"xla_backend_optimization_level": 1, **CHEAP_COMPILE}


def _over_secrets(op, a: Float[Array, "k ..."]) -> Float[Array, "..."]:
    """``op`` folded over the leading axis, as a chain of elementwise operations when short."""
    if a.shape[0] > CHAIN_LIMIT:
        return _CHAINED_REDUCTIONS[op](a, axis=0)
    total = a[0]
    for i in range(1, a.shape[0]):
        total = op(total, a[i])
    return total


def _gram(a: Float[Array, "n m t"], b: Float[Array, "n m t"]) -> Float[Array, "n n t"]:
    """``Σ_w a[i,w,·]·b[j,w,·]`` as ``m`` broadcast multiply-adds of ``(n, n, t)`` arrays.

    Measured alternatives, all slower on CPU: XLA's dot (it transposes a minor batch axis),
    summing a materialized ``(n, n, m, t)`` product (~1.5×), and unrolling the symmetric half
    into ``(t,)`` vectors (XLA then splits the work into hundreds of small fusions, ~3×).
    """
    total = a[:, None, 0] * b[None, :, 0]
    for w in range(1, a.shape[1]):
        total = total + a[:, None, w] * b[None, :, w]
    return total


KERNELS = ("auto", "native", "xla")


def record_levels(log_K: Float[Array, "*b n m"], log_prior: Float[Array, "*b n"],
                  log_belief: Float[Array, "*b n"], tile: int | None = None,
                  kernel: str = "auto", fields: Collection[str] | None = None
                  ) -> RecordLevels:
    """LDP, MBP, record-law ABP, ε_unif and ε_bel of a batch of mechanisms, tile by tile.

    Same values as the :mod:`jaxpriv.core.notions` functions (to rounding), much faster on large
    batches. Pure; jit it at the edge.

    Args:
      log_K: shape ``(*b, n, m)``.
      log_prior, log_belief: shape ``(*b, n)``.
      tile: mechanisms per tile of the XLA kernel (the batch is padded to a multiple of it);
        default :func:`default_tile` on a CPU, the whole batch on other backends (the tiles run
        one after another, and an accelerator wants one large computation, not many small ones).
      kernel: ``"native"`` for :mod:`jaxpriv.kernels.native` (float32 on a CPU; about 3× the XLA kernel
        at n = m = 8), ``"xla"`` for the XLA kernel below, ``"auto"`` (default) for native where
        it applies and is :func:`~jaxpriv.kernels.native.available`.
      fields: the :class:`RecordLevels` fields wanted (default: all); the others are ``None``.
        Without ``"abp"`` the native kernel skips the JS terms, most of its work (in the XLA
        kernel nothing reads them and XLA drops them).

    Returns:
      :class:`RecordLevels`, each of shape ``(*b)``.
    """
    if fields is not None and not set(fields) <= set(RecordLevels._fields):
        raise ValueError(f"unknown fields {sorted(set(fields) - set(RecordLevels._fields))}; "
                         f"RecordLevels has {RecordLevels._fields}")
    levels = _record_levels(log_K, log_prior, log_belief, tile, kernel,
                            fields is None or "abp" in fields)
    if fields is None:
        return levels
    return RecordLevels(*(getattr(levels, name) if name in fields else None
                          for name in RecordLevels._fields))


def _record_levels(log_K, log_prior, log_belief, tile, kernel, abp: bool) -> RecordLevels:
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    if kernel == "native" or (kernel == "auto" and uses_native_kernel(log_K, log_prior,
                                                                      log_belief)):
        return RecordLevels(*native.record_levels(log_K, log_prior, log_belief, abp=abp))
    batch_shape = log_K.shape[:-2]
    n, m = log_K.shape[-2:]
    count = math.prod(batch_shape)
    if tile is None:
        tile = default_tile(n, m) if jax.default_backend() == "cpu" else count
    tile = max(1, min(tile, count))
    log_K, log_prior, log_belief = (a.reshape((count,) + a.shape[len(batch_shape):])
                                    for a in (log_K, log_prior, log_belief))
    if tile == count:  # one tile: no loop, no padding
        levels = record_levels_minor(*(jnp.moveaxis(a, 0, -1)
                                       for a in (log_K, log_prior, log_belief)))
        return RecordLevels(*(level.reshape(batch_shape) for level in levels))
    tiles = -(-count // tile)
    padding = tiles * tile - count

    def tiled(a, filler):  # (tiles, tile, ...): batch-major still, one tile per loop step
        a = jnp.concatenate([a, jnp.full((padding,) + a.shape[1:], filler, a.dtype)])
        return a.reshape((tiles, tile) + a.shape[1:])

    def one_tile(args):
        *arrays, index = args
        # Each tile is transposed here (the batch becomes the minor axis), in cache;
        # transposing the whole batch before the loop cost as much as the kernel. The copy
        # before the transpose is worth it from n = m = 32 (1.9e5 vs 1.2e5/s), neutral at 8.
        minor = [_materialized(jnp.moveaxis(_materialized(a, index), 0, -1), index)
                 for a in arrays]
        return record_levels_minor(*minor)

    uniform_row, uniform_prior = -math.log(m), -math.log(n)
    args = (tiled(log_K, uniform_row), tiled(log_prior, uniform_prior),
            tiled(log_belief, uniform_prior), jnp.arange(tiles))
    out = jax.lax.map(one_tile, args)
    return RecordLevels(*(level.reshape(-1)[:count].reshape(batch_shape) for level in out))


def uses_native_kernel(*arrays: Array) -> bool:
    """Whether ``record_levels(..., kernel="auto")`` runs :mod:`jaxpriv.kernels.native` on these arrays."""
    return (jax.default_backend() == "cpu"
            and all(jnp.result_type(a) == jnp.float32 for a in arrays)
            and native.available())


def _materialized(a: Array, index: Array) -> Array:
    """``a`` itself, as a buffer XLA cannot fuse into its consumers.

    ``lax.map`` hands each step its tile as a dynamic slice, and XLA:CPU fuses that slice (and
    the transpose after it) into every consumer, where the runtime offset and strided reads stop
    LLVM from vectorizing the loop: the kernel ran 2.6× slower (1.5e6 vs 4.1e6/s at n = m = 8).
    An in-place dynamic update (at an offset XLA cannot prove constant) is never fused into its
    consumers; ``optimization_barrier`` does not prevent the fusion.
    """
    buffer = jnp.zeros(a.shape[:-1] + (a.shape[-1] + 1,), a.dtype)
    buffer = jax.lax.dynamic_update_slice_in_dim(buffer, a, jnp.minimum(index, 0), axis=-1)
    return buffer[..., :a.shape[-1]]


# --------------------------------------------------------------------------------------------
# database-level notions (SPEC §2.6)
# --------------------------------------------------------------------------------------------


class DatabaseLevels(NamedTuple):
    """The levels :func:`database_levels` returns, each of the batch shape: the values of the
    :mod:`jaxpriv.core.databases` functions named (to float32 rounding).

    Attributes:
      dp: :func:`jaxpriv.core.databases.dp`.
      bdp: :func:`jaxpriv.core.databases.bdp`.
      sp: :func:`jaxpriv.core.databases.sp`.
      bsp: :func:`jaxpriv.core.databases.bsp`.
      mp: :func:`jaxpriv.core.databases.mp` over the family 𝔻_* (``family="004"``).
      bsp_games: :func:`jaxpriv.core.databases.bsp_games_defined` as 1.0 / 0.0.
    """

    dp: Float[Array, "*b"]
    bdp: Float[Array, "*b"]
    sp: Float[Array, "*b"]
    bsp: Float[Array, "*b"]
    mp: Float[Array, "*b"]
    bsp_games: Float[Array, "*b"]


DATABASE_LIMIT = 256
"""Largest ``k^r`` the native database kernel takes (its index tables grow as ``2^r·k^r``)."""


def database_levels(log_K: Float[Array, "*b n m"], log_prior: Float[Array, "*b n"],
                    records: Records, fields: Collection[str] | None = None,
                    kernel: str = "auto") -> DatabaseLevels:
    """DP, BDP, SP, BSP, MP (family 𝔻_*) and whether BSP's games exist, for a batch of database
    mechanisms: the :mod:`jaxpriv.core.databases` levels, by the native kernel on a CPU (5–8× the
    XLA of those functions at k = 2, r = 3 on a 2-core CPU), by those functions elsewhere.
    Pure; jit it at the edge.

    Args:
      log_K: shape ``(*b, n, m)``, ``n = k^r`` databases in lexicographic order.
      log_prior: the joint prior on databases, shape ``(*b, n)``.
      records: the :class:`jaxpriv.core.mechanisms.Records` layout (static).
      fields: the :class:`DatabaseLevels` fields wanted (default: all); the others are ``None``.
      kernel: ``"native"`` for :mod:`jaxpriv.kernels.native` (float32 on a CPU), ``"xla"`` for the
        :mod:`jaxpriv.core.databases` functions, ``"auto"`` (default) for native where it applies
        (float32, a CPU, at most :data:`DATABASE_LIMIT` databases) and is available.

    Returns:
      :class:`DatabaseLevels`, each of shape ``(*b)``.

    Examples:
      >>> import numpy as np
      >>> from jaxpriv.core.mechanisms import Mechanism, Records
      >>> rr = np.array([[0.75, 0.25], [0.25, 0.75]])  # ε = log 3 per record
      >>> mech = Mechanism.from_K(np.kron(rr, rr), records=Records(k=2, r=2))
      >>> levels = database_levels(mech.log_K, mech.log_prior, mech.records, {"bdp"})
      >>> round(float(levels.bdp), 5), levels.dp is None  # float32: 5 digits
      (1.09861, True)
    """
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    fields = set(DatabaseLevels._fields if fields is None else fields)
    if not fields <= set(DatabaseLevels._fields):
        raise ValueError(f"unknown fields {sorted(fields - set(DatabaseLevels._fields))}; "
                         f"DatabaseLevels has {DatabaseLevels._fields}")
    n = log_K.shape[-2]
    if n != records.size:
        raise ValueError(f"{n} rows for k^r = {records.size} databases")
    if kernel == "native" or (kernel == "auto" and n <= DATABASE_LIMIT
                              and uses_native_kernel(log_K, log_prior)):
        levels = dict(zip(DatabaseLevels._fields,
                          native.database_levels(log_K, log_prior, records, fields)))
        for name in ("sp", "bsp"):  # the kernel returns the spreads Λ
            if levels[name] is not None:
                levels[name] = jnp.tanh(0.25 * levels[name])
        return DatabaseLevels(**levels)
    # elsewhere the reference: the core function of each field's name (mp over 𝔻_*, its
    # default family), as the catalog's notions of those names evaluate them
    mech = Mechanism(log_K, log_prior, log_prior, None, records)
    return DatabaseLevels(*(_DATABASE_REFERENCE[name](mech) if name in fields else None
                            for name in DatabaseLevels._fields))


_DATABASE_REFERENCE = {name: getattr(databases, name) for name in DatabaseLevels._fields}


SCREENS = RecordLevels._fields + DatabaseLevels._fields
"""Every field a notion's ``screen`` may name."""


def screen_levels(log_K: Float[Array, "*b n m"], log_prior: Float[Array, "*b n"],
                  log_belief: Float[Array, "*b n"], records, fields: Collection[str]
                  ) -> dict[str, Array]:
    """The screen fields (:data:`SCREENS`) asked for, by name: :func:`record_levels`'s from
    its kernel, :func:`database_levels`'s (which need ``records``) from theirs; each kernel
    runs only when one of its fields is asked for.

    Examples:
      >>> from jaxpriv import families
      >>> mech = families.randomized_response(1.0)
      >>> sorted(screen_levels(mech.log_K, mech.log_prior, mech.log_belief, None, {"ldp"}))
      ['ldp']
    """
    fields = set(fields)
    unknown = fields - set(SCREENS)
    if unknown:
        raise ValueError(f"unknown screen fields {sorted(unknown)}; the screens are {SCREENS}")
    out = {}
    wanted = fields & set(RecordLevels._fields)
    if wanted:
        levels = record_levels(log_K, log_prior, log_belief, fields=wanted)
        out.update((name, getattr(levels, name)) for name in wanted)
    wanted = fields & set(DatabaseLevels._fields)
    if wanted:
        if records is None:
            raise ValueError(f"the screens {sorted(wanted)} need a records layout")
        levels = database_levels(log_K, log_prior, records, wanted)
        out.update((name, getattr(levels, name)) for name in wanted)
    return out
