"""Random mechanisms, priors, beliefs and output values, on device, batched and seeded.

Every draw is a pure function of a PRNG key and static shapes. Each random number is a counter
hash (:func:`random_bits`: two rounds of a 32-bit integer mixer over the element's index, keyed
by two words that threefry draws from the key; a row's entries, :func:`entry_bits`: one round
over the row's word and a constant per entry), so it depends on its index and the key only,
never on how the batch is sharded across devices: a sweep gives the same mechanisms on 1 or 8
devices. Measured on a 2-core CPU, drawing the random variates of a batch of
n = m = 8 mechanisms is 6× faster than with ``jax.random`` (whose threefry runs 20 rounds per
pair of words as a rolled loop): 6.9e6 vs 1.2e6 mechanisms/s per core.

Mechanism rows come from a mixture chosen per mechanism, so the sampled MBP/LDP levels cover
roughly 0 to 10 nats rather than one narrow band:

* Dirichlet-like rows, concentration log-uniform in ``[1e-2, 1e2]``: ``log G(α+1)`` normal with
  the log-gamma law's mean and variance (one :func:`triangular` variate each), then
  ``G(α) = G(α+1)·U^{1/α}``, in log space so tiny concentrations do not underflow. It is an
  approximation of the Dirichlet law — harmless here, since the sampler only has to spread
  mechanisms widely and every level is then computed exactly — and one log per entry;
* softmax of random logits (:func:`triangular` variates: mean 0, variance 1), scale
  log-uniform in ``[1e-2, 1e1]``;
* k-ary randomized response with ``ε`` uniform in ``[0, 8]`` (when ``n = m``; otherwise a
  random-logit row);
* any of the above made sparse (each entry zeroed with probability up to ½, never a whole row).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp
from jaxtyping import Array, Float, PRNGKeyArray, UInt32

from jaxpriv.core.mechanisms import Mechanism, Records

PriorKind = Literal["uniform", "close", "dirichlet"]


@dataclasses.dataclass(frozen=True)
class SamplerSpec:
    """What to draw (static: it shapes the compiled computation).

    Attributes:
      n, m: secrets and outputs.
      prior: ``"uniform"``; ``"close"`` (``ε_unif(π)`` exactly ε, ε uniform in ``[0, eps_max]``);
        ``"dirichlet"`` (half uniform, half Dirichlet with log-uniform concentration).
      belief_eps_max: if > 0, the belief is the prior tilted by up to this much per secret
        (``ε_bel ≤ 2·belief_eps_max``); else the belief is the prior.
      eps_max: range of ε for ``prior="close"``.
      values: draw output values in ``{0, 10}`` (for the PAC notions with ``μ=0, α=1``).
      sparse_fraction: share of mechanisms with zeroed entries.
      records: database layout of the secrets (``n = k^r``), for the database-level notions.
      prior_zero_fraction: share of mechanisms whose prior rules out some secrets (each entry
        zeroed with probability up to ½, never the largest): the priors where notions that
        condition on the prior (BDP) and notions that do not (DP, MP) part ways.
      rare_fraction: share of mechanisms with one output made rare (:func:`with_rare_output`):
        where ε(δ)- and δ(ε)-type conclusions are extreme at large premise levels (a sweep of
        a claim whose conclusion has :attr:`jaxpriv.registry.Notion.rare_outputs`).
    """

    n: int
    m: int
    prior: PriorKind = "dirichlet"
    belief_eps_max: float = 0.0
    eps_max: float = 3.0
    values: bool = False
    sparse_fraction: float = 0.15
    records: Records | None = None
    prior_zero_fraction: float = 0.0
    rare_fraction: float = 0.0


def _mix32(x: UInt32[Array, "..."]) -> UInt32[Array, "..."]:
    """A bijective 32-bit integer mixer (Wellons' ``lowbias32``: bias 0.17 on the avalanche
    test; https://nullprogram.com/blog/2018/07/31/)."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x7FEB352D)
    x = x ^ (x >> 15)
    x = x * jnp.uint32(0x846CA68B)
    return x ^ (x >> 16)


def random_bits(key: PRNGKeyArray, shape: tuple[int, ...]) -> UInt32[Array, "..."]:
    """Uniform 32-bit words: ``mix(mix(i + s₀) ⊕ s₁)`` for the flat index ``i`` of each element.

    ``(s₀, s₁)`` are drawn from ``key`` by :func:`jax.random.bits`, and every word is a function
    of the key and its own index only. Both rounds are bijections of the index, so no two
    elements of one draw share a word. Two keys (from ``split`` / ``fold_in``) repeat each
    other's stream, shifted, only if their ``s₁`` agree and their ``s₀`` differ by less than the
    draw size: probability below ``size / 2⁶⁴`` per pair of keys.

    Raises:
      ValueError: if the draw has 2³² elements or more (the index would wrap).
    """
    size = math.prod(shape)
    if size >= 2**32:
        raise ValueError(f"random_bits draws at most 2**32 - 1 words at once, asked for {size}")
    return _words(jax.random.bits(key, (2,), jnp.uint32), shape)


def _words(seed: UInt32[Array, "2"], shape: tuple[int, ...]) -> UInt32[Array, "..."]:
    """:func:`random_bits` from its two seed words."""
    index = jax.lax.iota(jnp.uint32, math.prod(shape)).reshape(shape)
    return _mix32(_mix32(index + seed[0]) ^ seed[1])


ENTRY_WEYL, ENTRY_OFFSET = 0x9E3779B9, 0x632BE5AB
""":func:`entry_bits`' constants: entry ``w``'s is ``mix(w·φ + offset)`` (φ: 2³²/golden ratio)."""


def entry_bits(key: PRNGKeyArray, shape: tuple[int, ...]) -> UInt32[Array, "..."]:
    """Uniform 32-bit words for a batch of rows (the last axis: a row's entries):
    ``mix(kᵣ ⊕ c_w)`` for entry ``w`` of row ``r``, where ``kᵣ`` is :func:`random_bits`' word of
    the row's flat index (its key) and ``c_w = mix(w·φ + offset)`` a fixed constant.

    One round of the mixer per entry instead of two (the rows' keys cost two rounds, once per
    row): the sampler's per-entry words, at about half the price. Words depend on the key, the
    row's index and the entry's only. Within a row no two entries share a word (the constants
    are distinct and the mixer a bijection); two rows share a word for entries ``w``, ``w′``
    only where their keys differ by ``c_w ⊕ c_w′`` — single coincidences, as independent words
    have, never a shifted copy of a row (which one Weyl sequence ``kᵣ + w·φ`` would give).

    Raises:
      ValueError: if the draw has 2³² rows or more, or a row 2³² entries or more.
    """
    *rows, m = shape
    if m >= 2**32:
        raise ValueError(f"entry_bits draws at most 2**32 - 1 entries a row, asked for {m}")
    keys = random_bits(key, tuple(rows))
    return _entries_of(keys, m)


def _entries_of(keys: UInt32[Array, "..."], m: int) -> UInt32[Array, "... m"]:
    """:func:`entry_bits` from the rows' keys."""
    weyl = jax.lax.iota(jnp.uint32, m) * jnp.uint32(ENTRY_WEYL) + jnp.uint32(ENTRY_OFFSET)
    return _mix32(keys[..., None] ^ _mix32(weyl))


def uniform(key: PRNGKeyArray, shape: tuple[int, ...], minval=0.0, maxval=1.0
            ) -> Float[Array, "..."]:
    """Uniform on the open interval ``(minval, maxval)`` (JAX's default float dtype)."""
    return _uniform_of(random_bits(key, shape), minval, maxval)


def _uniform_of(words, minval=0.0, maxval=1.0):
    unit = unit_interval(words).astype(jnp.result_type(float))
    return minval + (maxval - minval) * unit  # exactly ``unit`` for the default (0, 1)


def unit_interval(words: UInt32[Array, "..."]) -> Float[Array, "..."]:
    """Words to float32 in the open interval ``(0, 1)``: ``2⁻²⁴ + k·2⁻²³``, ``k`` the top 23 bits.

    The bits fill the mantissa of a float in ``[1, 2)``; subtracting ``1 − 2⁻²⁴`` is exact
    (Sterbenz). Never 0 or 1, so ``log(u)`` stays finite.
    """
    mantissa = (words >> 9) | jnp.uint32(0x3F800000)
    return jax.lax.bitcast_convert_type(mantissa, jnp.float32) - jnp.float32(1.0 - 2.0**-24)


TRIANGULAR_SCALE = np.float32(math.sqrt(6.0) / 65536.0)
"""``√6/2¹⁶`` in float32: :func:`triangular`'s scale (unit variance)."""


def entry_uniform(key: PRNGKeyArray, shape: tuple[int, ...], minval=0.0, maxval=1.0
                  ) -> Float[Array, "..."]:
    """:func:`uniform` from :func:`entry_bits` (rows along the last axis)."""
    return _uniform_of(entry_bits(key, shape), minval, maxval)


def triangular(key: PRNGKeyArray, shape: tuple[int, ...]) -> Float[Array, "..."]:
    """Variates of mean 0 and variance 1 (``1 − 2⁻³²``): each word's two 16-bit halves summed,
    ``(hi + lo − 65535)·√6/2¹⁶`` — triangular on ``(−√6, √6)``, the law of the sum of two
    uniforms. No transcendental function (an inverse normal CDF costs a log and a polynomial
    per variate, which was a third of the sampler's work): integer arithmetic and one rounded
    product, so every backend draws the same bits. Words by :func:`entry_bits` (rows along the
    last axis)."""
    return _triangular_of(entry_bits(key, shape))


def _triangular_of(words: UInt32[Array, "..."]) -> Float[Array, "..."]:
    total = ((words >> 16) + (words & jnp.uint32(0xFFFF))).astype(jnp.int32) - 65535
    return total.astype(jnp.float32) * TRIANGULAR_SCALE


def _log_uniform(key, shape, low, high):
    return jnp.exp(uniform(key, shape, math.log(low), math.log(high)))


def log_gamma_approx(key: PRNGKeyArray, alpha: Float[Array, "..."]) -> Float[Array, "..."]:
    """``log G``, ``G ≈ Gamma(α)``: see :func:`_log_gamma_from`."""
    k_unit, k_uniform = jax.random.split(key)
    return _log_gamma_from(triangular(k_unit, alpha.shape),
                           entry_uniform(k_uniform, alpha.shape), alpha)


def _log_gamma_from(z, u, alpha):
    """``log G(α+1)`` as a normal law's — mean ``ψ(α+1)``, variance ``ψ′(α+1)`` by their
    asymptotic series, within 0.006 and 0.023 of the exact values at ``α+1 = 1`` and closer
    above — with the unit variate ``z``, then ``G(α) = G(α+1)·U^{1/α}``: tiny concentrations
    stay in log space. Two transcendental functions per entry fewer than a Wilson–Hilferty
    cube (a log of the cube, and the normal's inverse CDF under ``z``)."""
    a = 1.0 + alpha
    inverse = 1.0 / a
    mean = jnp.log(a) - inverse * (0.5 + inverse * (1.0 / 12.0))
    spread = jnp.sqrt(inverse * (1.0 + inverse * (0.5 + inverse * (1.0 / 6.0))))
    return (mean + spread * z) + jnp.log(u) / alpha


def _normalize_rows(log_w):
    return log_w - logsumexp(log_w, axis=-1, keepdims=True)


def _drop_and_normalize(log_w, drop):
    """Rows with the ``drop`` entries zeroed — never a row's largest — then normalized, with
    the logsumexp's maximum the one the mask compares against (the largest entry stays): one
    reduction less for XLA to fuse a draw into (it recomputes the draw in each: R1's sweep with
    JAX's sampler 2.4 → 6.3e6/s at n = m = 8)."""
    top = jnp.max(log_w, axis=-1, keepdims=True)
    kept = jnp.where(drop & (log_w < top), -jnp.inf, log_w)
    return kept - (top + jnp.log(jnp.sum(jnp.exp(kept - top), axis=-1, keepdims=True)))


RARE_SHARE = 0.25
"""The share of a sweep's mechanisms given a rare output where its claim's conclusion has
:attr:`jaxpriv.registry.Notion.rare_outputs` (:attr:`SamplerSpec.rare_fraction`)."""

RARE_NATS = 600.0
"""How far :func:`with_rare_output` lowers a rare output's log-mass at most."""

RARE_FLOOR = -700.0
"""Nor below this log-mass (``e^−700`` is a normal float64: every level reads it as drawn; an
entry the draw put lower stays as drawn)."""

RARE_SALT = np.uint32(0x52A4E0D7)
""":func:`with_rare_output`'s words: the last ``log K`` seed words XOR this (a stream of its own)."""


def with_rare_output(seed: UInt32[Array, "2"], log_K: Float[Array, "count n m"], fraction: float
                     ) -> Float[Array, "count n m"]:
    """``log_K`` with a share ``fraction`` of its mechanisms given a rare output: one output ``w``
    (uniform) keeps its mass in one row (uniform) and has it lowered in every other row ``d``
    by ``U(0, RARE_NATS)`` nats (each row its own depth; not below :data:`RARE_FLOOR`), rows
    renormalized; the other mechanisms exactly as drawn.

    Random mechanisms almost never put mass ``~δ`` under one secret and ``e^−hundreds`` under
    another — where ε(δ)-type conclusions are extreme at large premise levels (Bun–Steinke's
    zCDP → (ε, δ) at δ = 1e-2 comes within 1% only at ρ ≳ 250: on 20,000 draws with a quarter
    made rare, the least slack found is 1.0046 at ρ ≈ 660 in each of two seeds). The words come
    from ``seed`` (:data:`RARE_SALT`), after the draw, the same for the native and the XLA
    sampler.
    """
    count, n, m = log_K.shape
    words = _words(seed ^ RARE_SALT, (count, n + 3))
    chosen = _uniform_of(words[:, 0]) < fraction
    w = words[:, 1] % jnp.uint32(m)
    kept = words[:, 2] % jnp.uint32(n)
    depth = _uniform_of(words[:, 3:], 0.0, RARE_NATS).astype(log_K.dtype)  # (count, n)
    rows = jnp.arange(n, dtype=jnp.uint32)[None, :] != kept[:, None]
    lowered = (chosen[:, None, None] & rows[:, :, None]
               & (jnp.arange(m, dtype=jnp.uint32)[None, None, :] == w[:, None, None]))
    deeper = jnp.maximum(log_K - depth[:, :, None], jnp.minimum(log_K, RARE_FLOOR))
    made = _normalize_rows(jnp.where(lowered, deeper, log_K))
    return jnp.where(chosen[:, None, None], made, log_K)  # the others exactly as drawn


def sample_log_K(key: PRNGKeyArray, count: int, n: int, m: int, sparse_fraction: float = 0.15,
                 kernel: str = "xla") -> Float[Array, "count n m"]:
    """``count`` random ``log K`` of shape ``(n, m)`` from the mixture described above.

    Two random numbers per entry serve every kind: a :func:`triangular` ``z`` (the random
    logits, and the normal part of the Dirichlet-like rows' ``log G(α+1)``) and a uniform ``u``
    (the Dirichlet-like rows' ``U^{1/α}``, and the sparsity mask ``u < rate`` — which, for
    Dirichlet-like rows, drops mostly their smallest entries). Rows are normalized once, after
    the mask.

    Changed from the earlier law (per-entry words of two mixer rounds each, a normal ``z`` by
    the inverse normal CDF, and a Wilson–Hilferty cube; the native sampler is 2× faster without
    them): a seeded sweep now draws other mechanisms than before. The per-mechanism draws — the
    kinds, which mechanisms are sparse, drop rates, concentrations, scales, RR's ε — are the
    same words as before; every per-entry number (``z``, ``u`` and so the drop masks, and the
    priors' and beliefs' entries) comes from :func:`entry_bits` and is new.

    ``kernel="native"`` draws the same mixture from the same random words with
    :func:`jaxpriv.kernels.native.sample_log_K` (float32 on a CPU; every choice and mask identical,
    values equal to float32 rounding); ``"auto"`` uses it where :func:`native_sampler_applies`.
    """
    keys = jax.random.split(key, 8)
    if draws_natively(kernel):
        from jaxpriv.kernels import native

        return native.sample_log_K(_seed_words(keys), count, n, m, sparse_fraction)
    kind = jnp.floor(uniform(keys[0], (count, 1, 1), 0.0, 3.0))
    z = triangular(keys[1], (count, n, m))
    u = entry_uniform(keys[2], (count, n, m))
    concentration = _log_uniform(keys[3], (count, 1, 1), 1e-2, 1e2)
    scale = _log_uniform(keys[4], (count, 1, 1), 1e-2, 1e1)
    gaussian = scale * z
    if n == m:
        rr = uniform(keys[5], (count, 1, 1), 0.0, 8.0) * jnp.eye(n)
    else:
        rr = gaussian
    log_w = jnp.where(kind == 0, _log_gamma_from(z, u, concentration),
                      jnp.where(kind == 1, gaussian, rr))
    sparse = uniform(keys[6], (count, 1, 1)) < sparse_fraction
    drop = u < uniform(keys[7], (count, 1, 1), 0.0, 0.5)
    return _drop_and_normalize(log_w, sparse & drop)


def draws_natively(kernel: str) -> bool:
    """Whether ``kernel`` (``"xla"``, ``"native"`` or ``"auto"``) draws with the native sampler."""
    if kernel not in ("xla", "native", "auto"):
        raise ValueError(f"kernel must be 'xla', 'native' or 'auto', got {kernel!r}")
    return kernel == "native" or (kernel == "auto" and native_sampler_applies())


def native_sampler_applies() -> bool:
    """Whether ``sample_log_K(..., kernel="auto")`` draws with the native sampler: float32 on a
    CPU where :mod:`jaxpriv.kernels.native` is available."""
    from jaxpriv.kernels import native

    return (jax.default_backend() == "cpu" and jnp.result_type(float) == jnp.float32
            and native.available())


def sample_log_prior(key: PRNGKeyArray, count: int, n: int, kind: PriorKind = "dirichlet",
                     eps_max: float = 3.0) -> Float[Array, "count n"]:
    """``count`` random ``log π``; see :class:`SamplerSpec` for the kinds."""
    if kind == "uniform":
        return jnp.full((count, n), -jnp.log(float(n)))
    k1, k2, k3 = jax.random.split(key, 3)
    if kind == "close":
        u = entry_uniform(k1, (count, n))
        spread = jnp.max(u, -1, keepdims=True) - jnp.min(u, -1, keepdims=True)
        scaled = (u - jnp.min(u, -1, keepdims=True)) / jnp.where(spread > 0, spread, 1.0)
        eps = uniform(k2, (count, 1), 0.0, eps_max)
        return _normalize_rows(eps * scaled)
    concentration = _log_uniform(k1, (count, 1), 1e-1, 1e2)
    dirichlet = _normalize_rows(log_gamma_approx(k2, jnp.broadcast_to(concentration,
                                                                     (count, n))))
    flat = uniform(k3, (count, 1)) < 0.5
    return jnp.where(flat, -jnp.log(float(n)), dirichlet)


def _with_zeros(key: PRNGKeyArray, log_w: Float[Array, "count n"], fraction: float
                ) -> Float[Array, "count n"]:
    """In a ``fraction`` of the rows, zero each entry with probability up to ½ (never a row's
    largest entry), then renormalize."""
    k_rows, k_rate, k_drop = jax.random.split(key, 3)
    count, n = log_w.shape
    chosen = uniform(k_rows, (count, 1)) < fraction
    drop = entry_uniform(k_drop, (count, n)) < uniform(k_rate, (count, 1), 0.0, 0.5)
    return _drop_and_normalize(log_w, chosen & drop)


def sample(key: PRNGKeyArray, count: int, spec: SamplerSpec, kernel: str = "xla") -> Mechanism:
    """A batch of ``count`` random mechanisms drawn per ``spec`` (dtype: JAX's default float);
    ``kernel`` as in :func:`sample_log_K` (the native sampler draws the prior and belief too,
    :func:`jaxpriv.kernels.native.sample_prior`, from the words this function's JAX code draws)."""
    if draws_natively(kernel):
        return sample_seeded(draw_seeds(key, spec, kernel), count, spec, kernel)
    k_K, k_prior, k_belief, k_values = jax.random.split(key, 4)
    log_K = sample_log_K(k_K, count, spec.n, spec.m, spec.sparse_fraction, kernel)
    if spec.rare_fraction > 0:
        # the native path's seeds.log_K[-1]: the words of sample_log_K's last key
        last = jax.random.bits(jax.random.split(k_K, 8)[-1], (2,), jnp.uint32)
        log_K = with_rare_output(last, log_K, spec.rare_fraction)
    log_prior = sample_log_prior(k_prior, count, spec.n, spec.prior, spec.eps_max)
    if spec.prior_zero_fraction > 0:
        log_prior = _with_zeros(jax.random.fold_in(k_prior, 1), log_prior,
                                spec.prior_zero_fraction)
    log_belief = log_prior
    if spec.belief_eps_max > 0:
        k1, k2 = jax.random.split(k_belief)
        tilt = entry_uniform(k1, (count, spec.n), -1.0, 1.0)
        size = uniform(k2, (count, 1), 0.0, spec.belief_eps_max)
        log_belief = _normalize_rows(log_prior + size * tilt)
    return Mechanism(log_K, log_prior, log_belief, _values(k_values, count, spec), spec.records)


class NativeSeeds(NamedTuple):
    """Every seed word (:func:`random_bits`' two per draw) of one :func:`sample` call by the
    native sampler: ``log_K``'s 8 draws (:func:`sample_log_K`'s order), the prior's and belief's
    10 (:func:`prior_seeds`; ``None`` for a fixed uniform prior), the values' 2 (``None``
    without values)."""

    log_K: UInt32[Array, "8 2"]
    prior: UInt32[Array, "10 2"] | None
    values: UInt32[Array, "2 2"] | None


def draw_seeds(key: PRNGKeyArray, spec: SamplerSpec, kernel: str = "xla"
               ) -> NativeSeeds | PRNGKeyArray:
    """What :func:`sample_seeded` needs of ``key``: for the native sampler, every seed word of
    the draw (a few hundred tiny integer operations, best done for many blocks at once under
    ``vmap``: one at a time they cost more than drawing the block), else ``key`` itself.
    ``sample_seeded(draw_seeds(key, spec, kernel), count, spec, kernel)`` is
    ``sample(key, count, spec, kernel)``, bit for bit."""
    if not draws_natively(kernel):
        return key
    return seeds_for(draw_all_seeds(key), spec)


def draw_all_seeds(key: PRNGKeyArray) -> NativeSeeds:
    """Every seed word the native sampler may need of ``key`` (a random prior and belief,
    output values), whatever the spec: :func:`seeds_for` picks a spec's (that is
    :func:`draw_seeds`). One program for every spec: the sweep compiles it once, whatever the
    relation."""
    k_K, k_prior, k_belief, k_values = jax.random.split(key, 4)
    return NativeSeeds(_seed_words(jax.random.split(k_K, 8)), prior_seeds(k_prior, k_belief),
                       _seed_words(jax.random.split(k_values)))


def seeds_for(seeds: NativeSeeds, spec: SamplerSpec) -> NativeSeeds:
    """The seed words of :func:`draw_all_seeds` that ``spec``'s draw uses."""
    return NativeSeeds(seeds.log_K, seeds.prior if _random_prior(spec) else None,
                       seeds.values if spec.values else None)


def sample_seeded(seeds: NativeSeeds | PRNGKeyArray, count: int, spec: SamplerSpec,
                  kernel: str = "xla") -> Mechanism:
    """:func:`sample` from :func:`draw_seeds`' result."""
    if not isinstance(seeds, NativeSeeds):
        return sample(seeds, count, spec, kernel)
    from jaxpriv.kernels import native

    log_K = native.sample_log_K(seeds.log_K, count, spec.n, spec.m, spec.sparse_fraction)
    if spec.rare_fraction > 0:
        log_K = with_rare_output(seeds.log_K[-1], log_K, spec.rare_fraction)
    if seeds.prior is None:
        log_prior = log_belief = sample_log_prior(None, count, spec.n, "uniform")
    else:
        log_prior, log_belief = native.sample_prior(
            seeds.prior, count, spec.n, spec.prior, spec.eps_max, spec.prior_zero_fraction,
            spec.belief_eps_max)
    return Mechanism(log_K, log_prior, log_belief, _values_of(seeds.values, count, spec),
                     spec.records)


def _random_prior(spec: SamplerSpec) -> bool:
    return spec.prior != "uniform" or spec.prior_zero_fraction > 0 or spec.belief_eps_max > 0


def _seed_words(keys) -> UInt32[Array, "k 2"]:
    return jnp.stack([jax.random.bits(k, (2,), jnp.uint32) for k in keys])


def _values(key: PRNGKeyArray, count: int, spec: SamplerSpec) -> Float[Array, "count m"] | None:
    return _values_of(_seed_words(jax.random.split(key)) if spec.values else None, count, spec)


def _values_of(seeds: UInt32[Array, "2 2"] | None, count: int, spec: SamplerSpec
               ) -> Float[Array, "count m"] | None:
    """Output values from their two draws' seed words (``None`` without values)."""
    if seeds is None:
        return None
    rate = _uniform_of(_words(seeds[0], (count, 1)), 0.05, 0.5)
    return jnp.where(_uniform_of(_words(seeds[1], (count, spec.m))) < rate, 10.0, 0.0)


def prior_seeds(k_prior: PRNGKeyArray, k_belief: PRNGKeyArray) -> UInt32[Array, "10 2"]:
    """The seed words (:func:`random_bits`' two per draw) of the prior and belief draws of
    :func:`sample`, in the order the native sampler takes them: :func:`sample_log_prior`'s
    ``k1``, ``k2``, the Dirichlet's unit variate and uniform (``split(k2)``), ``k3``;
    :func:`_with_zeros`' rows, rate and drop; the belief's tilt and size."""
    k1, k2, k3 = jax.random.split(k_prior, 3)
    k_unit, k_uniform = jax.random.split(k2)
    zeros = jax.random.split(jax.random.fold_in(k_prior, 1), 3)
    tilt, size = jax.random.split(k_belief)
    return _seed_words((k1, k2, k_unit, k_uniform, k3, *zeros, tilt, size))
