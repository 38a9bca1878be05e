"""A hand-written CPU kernel for :func:`jaxpriv.kernels.fused.record_levels` in float32, built on first use.

XLA:CPU's code for the fused kernel runs ~1,500 cycles per 8×8 mechanism, set by its fusion and
vectorization choices, not the arithmetic. ``record_levels.cc`` (beside this file) computes the
same five levels with explicit SIMD vectors, one mechanism per lane, compiled with the system C++
compiler on first need (seconds), cached, and registered as an XLA FFI target (it runs inside
jitted, sharded programs). Without a compiler, on a failed build (said once, as a
:class:`NativeKernelWarning`) or with ``JAXPRIV_NATIVE=0``, :func:`available` is ``False`` and
XLA's kernel runs (same values to float32 rounding). The library also holds the sweep's samplers
(:func:`sample_log_K`, :func:`sample_prior`), the database notions' screen
(:func:`database_levels`) and the pair levels of :mod:`jaxpriv.kernels.pair_levels`
(``zcdp_orders.cc``, ``sorted_pairs.cc``: :func:`zcdp_orders`, :func:`eps_at_delta`, :func:`gdp`).

It is used where the CPU has AVX2 or AVX-512 (8 or 16 mechanisms per vector); with 128-bit
vectors only it is no faster than XLA's, and :func:`unavailable_reason` says so.

This module loads the library and calls its kernels; :mod:`jaxpriv.kernels.native.builder`
compiles and caches it (its settings ``JAXPRIV_CACHE``, ``CXX`` and ``JAXPRIV_NATIVE_MARCH``
documented there; :func:`build`, :func:`march`, :func:`library_path`... re-exported here).
``JAXPRIV_NATIVE=0`` turns the kernel off (no build, no warning), ``=force`` uses it anyway.

Examples:
  >>> import jax
  >>> from jaxpriv import families
  >>> from jaxpriv.kernels import fused
  >>> mech = families.randomized_response(1.0)  # float32
  >>> levels = jax.jit(fused.record_levels)(mech.log_K, mech.log_prior, mech.log_belief)
  >>> round(float(levels.abp), 5)  # by this kernel where available(), else by XLA's
  0.07601
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int, UInt32

from jaxpriv.kernels.native.builder import (
    AVX2_ENVIRONMENT,
    MARCH_NEEDS,
    build,
    cache_root,
    cpu_flags,
    library_path,
    march,
    turned_off,
)

__all__ = [
    "AVX2_ENVIRONMENT", "DATABASE_FIELDS", "MARCH_NEEDS", "PRIOR_KINDS", "NativeKernelWarning",
    "available", "build", "cache_root", "cpu_flags", "database_levels", "group_winners",
    "library_path", "march", "record_levels", "register", "sample_log_K", "sample_prior",
    "composed_eps", "eps_at_delta", "gdp", "state", "unavailable_reason", "zcdp_orders",
]

TARGET = "jaxpriv_record_levels"
SYMBOL = "JaxprivRecordLevels"
SAMPLER_TARGET = "jaxpriv_sample_log_k"
SAMPLER_SYMBOL = "JaxprivSampleLogK"
PRIOR_SYMBOL = "JaxprivSamplePrior"
DATABASE_SYMBOL = "JaxprivDatabaseLevels"
WINNERS_SYMBOL = "JaxprivGroupWinners"
ZCDP_SYMBOL = "JaxprivZcdpOrders"
EPS_AT_DELTA_SYMBOL = "JaxprivEpsAtDelta"
GDP_SYMBOL = "JaxprivGdp"
COMPOSED_SYMBOLS = {"f32": "JaxprivComposedEpsF32", "f64": "JaxprivComposedEpsF64"}
DATABASE_FIELDS = ("dp", "bdp", "sp", "bsp", "mp", "bsp_games")
_DATABASE_WANTS = {"dp": 1, "bdp": 2, "mp": 2 | 1, "sp": 4, "bsp": 8, "bsp_games": 16}
PRIOR_KINDS = ("uniform", "close", "dirichlet")


class NativeKernelWarning(UserWarning):
    """The native kernel could not be built or loaded; the XLA kernel runs instead."""


def available() -> bool:
    """Whether the native kernel is built and registered (builds it on the first call)."""
    return _registered() is None


def unavailable_reason() -> str | None:
    """Why :func:`available` is ``False`` (``None`` when it is ``True``)."""
    return _registered()


def state() -> str:
    """What this process did with the kernel, without building it: ``"on"``, ``"off: why"``, or
    ``"not used"`` (nothing asked for it, e.g. off a CPU or in float64)."""
    if _registered.cache_info().currsize == 0:
        return "not used"
    reason = _registered()
    if reason is not None:
        return f"off: {reason}"
    chosen = march()
    return "on" if chosen == "native" else f"on (-march={chosen})"


def record_levels(log_K: Float[Array, "*b n m"], log_prior: Float[Array, "*b n"],
                  log_belief: Float[Array, "*b n"], abp: bool = True
                  ) -> tuple[Float[Array, "*b"], ...]:
    """``(ldp, mbp, abp, eps_unif, eps_bel)`` of a float32 batch, by the native kernel.

    Same contract as :func:`jaxpriv.kernels.fused.record_levels` (which wraps the result in
    :class:`jaxpriv.kernels.fused.RecordLevels` and calls this on a CPU when :func:`available`). Pure;
    jit, vmap and shard_map it like any JAX operation; not differentiable.

    Args:
      log_K: ``log K``, float32, shape ``(*b, n, m)``.
      log_prior, log_belief: float32, shape ``(*b, n)``.
      abp: compute ABP; ``False`` skips it (most of the kernel's work) and returns ``None`` in
        its place.

    Returns:
      five float32 arrays of shape ``(*b)`` (``None`` for ABP when ``abp`` is ``False``).

    Raises:
      TypeError: for input that is not float32 (float64 goes to the XLA kernel).
      RuntimeError: if the kernel is not available (see :func:`unavailable_reason`).
    """
    arrays = (log_K, log_prior, log_belief)
    if any(jnp.result_type(a) != jnp.float32 for a in arrays):
        raise TypeError("the native kernel takes float32 input only, got "
                        + ", ".join(str(jnp.result_type(a)) for a in arrays))
    reason = _registered()
    if reason is not None:
        raise RuntimeError(f"the native kernel is not available: {reason}")
    levels = _call(TARGET, *arrays, with_abp=abp)
    return levels if abp else levels[:2] + (None,) + levels[3:]


def database_levels(log_K: Float[Array, "*b n m"], log_prior: Float[Array, "*b n"], records,
                    fields=DATABASE_FIELDS) -> tuple[Float[Array, "*b"] | None, ...]:
    """``(dp, bdp, Λ_SP, Λ_BSP, mp, bsp_games)`` of a float32 batch of database mechanisms, by
    the native kernel: :func:`jaxpriv.kernels.fused.database_levels` (which calls this on a CPU when
    :func:`available`, and takes ``tanh(Λ/4)`` of the two spreads). Pure; not differentiable.

    Args:
      log_K: ``log K``, float32, shape ``(*b, n, m)``, ``n = k^r`` databases.
      log_prior: the joint prior, float32, shape ``(*b, n)``.
      records: the :class:`jaxpriv.core.mechanisms.Records` layout.
      fields: which of :data:`DATABASE_FIELDS` to compute (the others are ``None``).

    Returns:
      six float32 arrays of shape ``(*b)`` or ``None``.

    Raises:
      TypeError: for input that is not float32.
      RuntimeError: if the kernel is not available (see :func:`unavailable_reason`).
    """
    if any(jnp.result_type(a) != jnp.float32 for a in (log_K, log_prior)):
        raise TypeError("the native kernel takes float32 input only")
    reason = _registered()
    if reason is not None:
        raise RuntimeError(f"the native kernel is not available: {reason}")
    return _databases(TARGET + "_databases", log_K, log_prior, records, fields)


def group_winners(cell: Int[Array, " N"], score: Float[Array, " N"], worst: Float[Array, " N"],
                  order: Float[Array, " N"], cells: int, block: int, k: int
                  ) -> tuple[Int[Array, " cells"], Int[Array, " cells"], Int[Array, ""],
                             Int[Array, "blocks k"]]:
    """The sweep's reduction of a group of mechanisms, in one pass (for
    :func:`jaxpriv.engines.sweep.make_step`, where XLA's scatters, gathers and ``top_k`` cost ~100 small
    operations). Positions ``0..N−1`` must be in the order of the mechanisms' indices: ties go
    to the smaller position.

    Args:
      cell: each mechanism's envelope cell, ``−1`` where it is not in range; int32, ``(N,)``.
      score: the envelope's score (the highest above ``−∞`` wins its cell); float32, ``(N,)``.
      worst: the worst point's score (the highest above ``−∞`` wins); float32, ``(N,)``.
      order: the candidates' order (each block's ``k`` lowest win; never NaN); float32,
        ``(N,)``.
      cells, block, k: cells; mechanisms per block (divides ``N``); candidates per block.

    Returns:
      ``(winner, count, worst_winner, lowest)``: each cell's winning position (``−1``: none, or
      a NaN score in the cell, as XLA's NaN-propagating max leaves it) and its count of
      mechanisms, int32 ``(cells,)``; the worst point's position (``−1``: none), int32 ``()``;
      each block's ``k`` lowest positions, lowest first, int32 ``(N/block, k)``.

    Raises:
      RuntimeError: if the native kernel is not available (see :func:`unavailable_reason`).
    """
    reason = _registered()
    if reason is not None:
        raise RuntimeError(f"the native kernel is not available: {reason}")
    size = cell.shape[0]
    if size % block or not 0 < k <= block:
        raise ValueError(f"group_winners: {size} mechanisms in blocks of {block}, {k} each")
    out = (jax.ShapeDtypeStruct((cells,), jnp.int32), jax.ShapeDtypeStruct((cells,), jnp.int32),
           jax.ShapeDtypeStruct((), jnp.int32),
           jax.ShapeDtypeStruct((size // block, k), jnp.int32))
    return tuple(jax.ffi.ffi_call(TARGET + "_winners", out, vmap_method="sequential")(
        cell.astype(jnp.int32), score.astype(jnp.float32), worst.astype(jnp.float32),
        order.astype(jnp.float32), block=np.int32(block)))


def zcdp_orders(log_P: Float[Array, "*p m"], log_Q: Float[Array, "*p m"], group: int = 1
                ) -> tuple[Float[Array, "*p"], Float[Array, "*p"]]:
    """The zCDP level ``ρ = sup_{α>1} D_α(P‖Q)/α`` of float32 pairs and its order, by
    ``zcdp_orders.cc``: each pair in double precision, the reference's branch and bound over
    ``u = log(α − 1)`` (:mod:`jaxpriv.core.zcdp`), then Newton's steps. Pure; not
    differentiable (:func:`jaxpriv.kernels.pair_levels.zcdp_pair` differentiates at the order).

    Twins (pairs equal up to an output permutation) are solved once.

    Args:
      log_P, log_Q: float32, the same shape ``(*p, m)`` (``−∞`` for a zero).
      group: pairs per group (static, dividing the pairs); > 1: only each group's max is wanted
        (``zcdp_orders.cc`` says how pairs below it are skipped), it and the pairs attaining it
        the ungrouped kernel's bit for bit.

    Returns:
      ``(rho, order)``, float32 ``(*p)``: ``ρ`` (``+∞`` where ``Q = 0 < P`` somewhere, 0 where
      ``P = Q``) and ``u = log(α − 1)`` of the maximizing order (``−∞`` where KL, α → 1, is
      the max, and for a pair a group skipped: it reads its KL; 0 where ``ρ`` is ∞, 0, NaN).

    Raises:
      TypeError: for input that is not float32 or not of one shape.
      ValueError: for a ``group`` that does not divide the pairs.
      RuntimeError: if the kernel is not available (see :func:`unavailable_reason`).
    """
    _check_group(log_P, group)
    return tuple(_pair_call("_zcdp", 2, log_P, log_Q, group=np.int64(group)))


def eps_at_delta(log_P: Float[Array, "*p m"], log_Q: Float[Array, "*p m"],
                 delta: Float[Array, "*p"], group: int = 1) -> Float[Array, "*p"]:
    """The least ``ε ≥ 0`` with ``δ(ε) ≤ δ`` of float32 pairs, by ``sorted_pairs.cc``: the
    closed form of :func:`jaxpriv.core.pair_notions.eps_at_delta_pair` (prefix sums over the
    outputs sorted by ``log(P/Q)``), each pair in double precision. Pure; not differentiable
    (:func:`jaxpriv.kernels.pair_levels.eps_at_delta_pair` differentiates the reference).

    Args:
      log_P, log_Q: float32, the same shape ``(*p, m)`` (``−∞`` for a zero).
      delta: float32, shape ``(*p)`` (each pair's δ).
      group: pairs per group (static, dividing the pairs); > 1: only each group's max is wanted,
        a pair whose ``D_∞`` (a bound of its ε) is below the best ε found reads 0.

    Returns:
      ``ε``, float32 ``(*p)``: ``+∞`` where more than δ of ``P``'s mass is where ``Q`` has none.

    Raises:
      TypeError, ValueError, RuntimeError: as :func:`zcdp_orders`.
    """
    _check_group(log_P, group)
    return _pair_call("_eps_at_delta", 1, log_P, log_Q, delta, group=np.int64(group))[0]


def gdp(log_P: Float[Array, "*p m"], log_Q: Float[Array, "*p m"], group: int = 1
        ) -> Float[Array, "*p"]:
    """The GDP level ``μ`` of float32 pairs, by ``sorted_pairs.cc``: the vertex formula of
    :func:`jaxpriv.core.pair_notions.gdp_pair` (prefixes of the outputs sorted by ``log(Q/P)``,
    each probit from the smaller of a prefix sum and its complement's own sum) in double
    precision, each pair in one direction (GDP is symmetric: a pair and its reverse read
    alike). Pure; not differentiable (:func:`jaxpriv.kernels.pair_levels.gdp` differentiates).

    Args:
      log_P, log_Q: float32, the same shape ``(*p, m)`` (``−∞`` for a zero).
      group: as :func:`eps_at_delta`'s (bound ``2Φ⁻¹(e^D/(1 + e^D))``, D: symmetric ``D_∞``).

    Returns:
      ``μ``, float32 ``(*p)`` (``+∞`` where a test separates ``P`` from ``Q`` on a set).

    Raises:
      TypeError, ValueError, RuntimeError: as :func:`zcdp_orders`.
    """
    _check_group(log_P, group)
    return _pair_call("_gdp", 1, log_P, log_Q, group=np.int64(group))[0]


def composed_eps(log_K: Float[Array, "*b n m"], delta: Float[Array, "*b"], k: int,
                 pairs: np.ndarray) -> tuple[Array, Array, Array, Array]:
    """The composed ``ε(δ)`` of ``k`` uses, max over the ordered ``pairs`` of secrets, by
    ``composed_eps.cc``: :func:`jaxpriv.core.composition_tails.eps_over_pairs`'s algorithm,
    each mechanism on its own in double precision. Pure; not differentiable
    (:func:`jaxpriv.kernels.composed.eps_composed` differentiates it).

    Args:
      log_K: float32 or float64 ``(*b, n, m)``, ``m ≥ 2`` (``−∞`` for a zero).
      delta: the same dtype, shape ``(*b)`` (each mechanism's δ, in (0, 1)).
      k: uses, ``1 ≤ k ≤ 100000`` (static).
      pairs: ``(P, 2)`` ordered pairs of rows (static).

    Returns:
      ``(eps, which, lo, hi)``, each ``(*b)``: ``ε`` (``+∞`` where the ``+∞`` atom's mass
      exceeds δ; NaN where an input is), the index into ``pairs`` of the pair attaining it
      (int32), and that pair's final search bracket ``[lo, hi]``.

    Raises:
      TypeError: for input that is not float32/float64 or not of matching shapes.
      RuntimeError: if the kernel is not available (see :func:`unavailable_reason`).
    """
    dtype = jnp.result_type(log_K)
    if dtype not in (jnp.float32, jnp.float64) or jnp.result_type(delta) != dtype:
        raise TypeError("the composed kernel takes float32 or float64 log_K and delta of its "
                        "dtype")
    batch = jnp.shape(log_K)[:-2]
    if jnp.ndim(log_K) < 2 or jnp.shape(delta) != batch or log_K.shape[-1] < 2:
        raise TypeError(f"log_K must have shape (*b, n, m ≥ 2) and delta (*b), got "
                        f"{jnp.shape(log_K)} and {jnp.shape(delta)}")
    reason = _registered()
    if reason is not None:
        raise RuntimeError(f"the native kernel is not available: {reason}")
    suffix = "f32" if dtype == jnp.float32 else "f64"
    value = jax.ShapeDtypeStruct(jnp.shape(delta), dtype)
    which = jax.ShapeDtypeStruct(jnp.shape(delta), jnp.int32)
    return tuple(jax.ffi.ffi_call(f"{TARGET}_composed_eps_{suffix}", (value, which, value, value),
                                  vmap_method="broadcast_all")(
        log_K, delta, k=np.int64(k), pairs=np.asarray(pairs, np.int32).reshape(-1)))


def _check_group(log_P, group) -> None:
    """A pair kernel's ``group``: a positive integer dividing the pairs."""
    count = math.prod(jnp.shape(log_P)[:-1])
    if not isinstance(group, (int, np.integer)) or group < 1 or count % group:
        raise ValueError(f"group must be a positive integer dividing the {count} pairs, got "
                         f"{group!r}")


def _pair_call(suffix: str, results: int, log_P, log_Q, *per_pair, **attributes
               ) -> tuple[Array, ...]:
    """A pair kernel's call: float32 ``(*p, m)`` pairs (and float32 ``(*p)`` arguments) in,
    ``results`` float32 ``(*p)`` arrays out; the checks every pair kernel makes."""
    arrays = (log_P, log_Q, *per_pair)
    if any(jnp.result_type(a) != jnp.float32 for a in arrays):
        raise TypeError("the native kernel takes float32 input only")
    pairs = jnp.shape(log_P)[:-1]
    if (jnp.shape(log_P) != jnp.shape(log_Q) or jnp.ndim(log_P) < 1
            or any(jnp.shape(a) != pairs for a in per_pair)):
        raise TypeError(f"log_P and log_Q must have one shape (*p, m), and the pairs' arguments "
                        f"(*p), got {', '.join(str(jnp.shape(a)) for a in arrays)}")
    reason = _registered()
    if reason is not None:
        raise RuntimeError(f"the native kernel is not available: {reason}")
    out = jax.ShapeDtypeStruct(pairs, jnp.float32)
    return tuple(jax.ffi.ffi_call(TARGET + suffix, (out,) * results,
                                  vmap_method="broadcast_all")(*arrays, **attributes))


def _databases(target, log_K, log_prior, records, fields):
    unknown = set(fields) - set(DATABASE_FIELDS)
    if unknown:
        raise ValueError(f"unknown fields {sorted(unknown)}; the kernel has {DATABASE_FIELDS}")
    if log_K.shape[-2] != records.size:
        raise ValueError(f"{log_K.shape[-2]} rows for k^r = {records.size} databases")
    want = 0
    for name in fields:
        want |= _DATABASE_WANTS[name]
    level = jax.ShapeDtypeStruct(log_K.shape[:-2], jnp.float32)
    levels = jax.ffi.ffi_call(target, (level,) * 6, vmap_method="broadcast_all")(
        log_K, log_prior, k=np.int32(records.k), r=np.int32(records.r),
        default=np.int32(records.default), want=np.int32(want))
    return tuple(level if name in fields else None for name, level in zip(DATABASE_FIELDS, levels))


def sample_log_K(seeds: UInt32[Array, "8 2"], count: int, n: int, m: int,
                 sparse_fraction: float) -> Float[Array, "count n m"]:
    """:func:`jaxpriv.kernels.samplers.sample_log_K` by the native sampler: the same mixture, from the
    same random words, in float32 (equal to the JAX sampler's to float32 rounding).

    Args:
      seeds: the two seed words of each of the 8 draws of ``sample_log_K``, in its order (kind,
        z, u, concentration, scale, RR's ε, sparse, drop rate): ``jax.random.bits(k, (2,),
        uint32)`` of ``jax.random.split(key, 8)``. Under ``vmap`` one call draws for every
        seed set of the batch, each on its own.
      count, n, m: the batch's shape; ``count·n·m < 2³²``.
      sparse_fraction: share of mechanisms with zeroed entries.

    Returns:
      ``log K``, float32, shape ``(count, n, m)``.

    Raises:
      RuntimeError: if the native kernel is not available (see :func:`unavailable_reason`).
    """
    reason = _registered()
    if reason is not None:
        raise RuntimeError(f"the native kernel is not available: {reason}")
    return _sample(SAMPLER_TARGET, seeds, count, n, m, sparse_fraction)


def sample_prior(seeds: UInt32[Array, "10 2"], count: int, n: int, kind: str, eps_max: float,
                 zero_fraction: float, belief_eps_max: float
                 ) -> tuple[Float[Array, "count n"], Float[Array, "count n"]]:
    """The prior and belief of :func:`jaxpriv.kernels.samplers.sample` by the native sampler
    (:func:`jaxpriv.kernels.samplers.sample_log_prior`, then its zeros and belief tilt): the same random
    words for the same indices, in float32 (equal to the JAX sampler's to float32 rounding).

    Args:
      seeds: two seed words for each of the 10 draws, in this order: the prior's ``k1``, ``k2``,
        the Dirichlet's normal and uniform, ``k3``; the zeros' rows, rate and drop; the belief's
        tilt and size (:func:`jaxpriv.kernels.samplers.prior_seeds`). Under ``vmap``, one draw per
        seed set, as :func:`sample_log_K`.
      count, n: the batch's shape; ``count·n < 2³²``.
      kind: ``"uniform"``, ``"close"`` or ``"dirichlet"``.
      eps_max, zero_fraction, belief_eps_max: as in :class:`jaxpriv.kernels.samplers.SamplerSpec`.

    Returns:
      ``(log_prior, log_belief)``, float32, shape ``(count, n)`` each (equal when
      ``belief_eps_max`` is 0).

    Raises:
      RuntimeError: if the native kernel is not available (see :func:`unavailable_reason`).
    """
    reason = _registered()
    if reason is not None:
        raise RuntimeError(f"the native kernel is not available: {reason}")
    return _sample_prior(SAMPLER_TARGET + "_prior", seeds, count, n, kind, eps_max,
                         zero_fraction, belief_eps_max)


def _sample_prior(target, seeds, count, n, kind, eps_max, zero_fraction, belief_eps_max):
    if count * n >= 2**32:
        raise ValueError(f"the sampler draws at most 2**32 - 1 entries at once, asked for "
                         f"{count * n}")
    if kind not in PRIOR_KINDS:
        raise ValueError(f"kind must be one of {PRIOR_KINDS}, got {kind!r}")
    shape = jax.ShapeDtypeStruct((count, n), jnp.float32)
    return tuple(jax.ffi.ffi_call(target, (shape, shape), vmap_method="broadcast_all")(
        jnp.asarray(seeds, jnp.uint32), kind=np.int32(PRIOR_KINDS.index(kind)),
        eps_max=np.float32(eps_max), zero_fraction=np.float32(zero_fraction),
        belief_eps_max=np.float32(belief_eps_max)))


def _sample(target: str, seeds, count: int, n: int, m: int, sparse_fraction: float) -> Array:
    if count * n * m >= 2**32:
        raise ValueError(f"the sampler draws at most 2**32 - 1 entries at once, asked for "
                         f"{count * n * m}")
    shape = jax.ShapeDtypeStruct((count, n, m), jnp.float32)
    return jax.ffi.ffi_call(target, shape, vmap_method="broadcast_all")(
        jnp.asarray(seeds, jnp.uint32), sparse_fraction=np.float32(sparse_fraction))


def _call(target: str, *arrays: Array, with_abp: bool = True) -> tuple[Array, ...]:
    level = jax.ShapeDtypeStruct(arrays[0].shape[:-2], jnp.float32)
    return tuple(jax.ffi.ffi_call(target, (level,) * 5, vmap_method="broadcast_all")(
        *arrays, with_abp=bool(with_abp)))


def register(library_file: Path, target: str, sampler_target: str | None = None) -> int:
    """Loads a built library and registers its kernel as the CPU FFI target ``target``, its
    database kernel as ``target + "_databases"``, the sweep's reduction as
    ``target + "_winners"``, the pair levels' as ``target + "_zcdp"``,
    ``target + "_eps_at_delta"`` and ``target + "_gdp"``, the composed ε(δ)'s as
    ``target + "_composed_eps_f32"`` and ``"_f64"`` (and its
    samplers as ``sampler_target`` and ``sampler_target + "_prior"``, if given).

    Returns:
      mechanisms per SIMD vector in that build (16 with AVX-512, 8 with AVX2, else 4).
    """
    library = ctypes.cdll.LoadLibrary(str(library_file))
    jax.ffi.register_ffi_target(target, jax.ffi.pycapsule(getattr(library, SYMBOL)),
                                platform="cpu")
    jax.ffi.register_ffi_target(target + "_databases",
                                jax.ffi.pycapsule(getattr(library, DATABASE_SYMBOL)),
                                platform="cpu")
    jax.ffi.register_ffi_target(target + "_winners",
                                jax.ffi.pycapsule(getattr(library, WINNERS_SYMBOL)),
                                platform="cpu")
    for suffix, symbol in (("_zcdp", ZCDP_SYMBOL), ("_eps_at_delta", EPS_AT_DELTA_SYMBOL),
                           ("_gdp", GDP_SYMBOL)):
        jax.ffi.register_ffi_target(target + suffix, jax.ffi.pycapsule(getattr(library, symbol)),
                                    platform="cpu")
    for suffix, symbol in COMPOSED_SYMBOLS.items():
        jax.ffi.register_ffi_target(f"{target}_composed_eps_{suffix}",
                                    jax.ffi.pycapsule(getattr(library, symbol)), platform="cpu")
    if sampler_target is not None:
        jax.ffi.register_ffi_target(sampler_target,
                                    jax.ffi.pycapsule(getattr(library, SAMPLER_SYMBOL)),
                                    platform="cpu")
        jax.ffi.register_ffi_target(sampler_target + "_prior",
                                    jax.ffi.pycapsule(getattr(library, PRIOR_SYMBOL)),
                                    platform="cpu")
    return int(library.JaxprivNativeLanes())


@functools.cache
def _registered() -> str | None:
    """Builds, loads and registers the kernel once per process; the reason if it cannot."""
    if turned_off():
        return "turned off by JAXPRIV_NATIVE"
    setting = os.environ.get("JAXPRIV_NATIVE", "1").strip().lower()
    try:
        if register(build(march()), TARGET, SAMPLER_TARGET) < 8 and setting != "force":  # registered, left unused
            return ("this CPU has neither AVX2 nor AVX-512, and with 128-bit vectors the native "
                    "kernel is no faster than the XLA kernel (JAXPRIV_NATIVE=force uses it anyway)")
    except (OSError, RuntimeError, AttributeError) as error:
        reason = str(error) or type(error).__name__
        warnings.warn(f"jaxpriv: native CPU kernel unavailable, using the XLA kernel ({reason})",
                      NativeKernelWarning, stacklevel=3)
        return reason
    return None
