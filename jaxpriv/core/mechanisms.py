"""Finite mechanisms: the immutable description every notion is a function of.

A mechanism is a row-stochastic matrix ``K[d, w] = f(w | d)`` over secrets ``d ∈ {0..n−1}``
and outputs ``w ∈ {0..m−1}``, together with the prior ``π`` (the data distribution), the
attacker's belief ``b`` (default ``π``) and, optionally, real output values ``v(w)`` (for the
PAC notions of SPEC §2.7). It is stored in log space (``log K``, ``log π``, ``log b``) so that
zeros are ``−∞`` and entries far below the float32 range keep their meaning.

Everything carries leading batch axes: ``log_K`` has shape ``(*batch, n, m)`` and the prior and
belief ``(*batch, n)``, so one call evaluates a million mechanisms.

Validation (shape, finiteness, non-negativity, rows and prior summing to 1 within
:data:`SUM_ATOL`) runs on the host when the inputs are concrete arrays; inside ``jit`` it is
skipped. Rows that pass are renormalized exactly, so ``0.333333`` three times means 1/3.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from jaxpriv.core.errors import InputError

SUM_ATOL = 1e-5
"""Rows of K, the prior and the belief must sum to 1 within this absolute tolerance
(enough for six typed decimals, ``0.333333 × 3``; the accepted rows are then renormalized)."""


@dataclasses.dataclass(frozen=True)
class Records:
    """Databases ``V^r`` with ``V = {0..k−1}`` and default value ``⊥`` (SPEC §2.6)."""

    k: int
    r: int
    default: int = 0

    @property
    def size(self) -> int:
        return self.k**self.r


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Mechanism:
    """A (batch of) finite mechanism(s) with prior and belief, in log space.

    Attributes:
      log_K: ``log f(w|d)``, shape ``(*batch, n, m)``; ``−∞`` for a zero entry.
      log_prior: ``log π``, shape ``(*batch, n)``.
      log_belief: ``log b``, shape ``(*batch, n)``.
      values: real output values ``v(w)``, shape ``(*batch, m)``, or ``None``.
      records: the database layout of the secrets (static), or ``None``.

    Build one with :meth:`from_K` or :meth:`from_log_K`, which validate.

    Examples:
      >>> import jax.numpy as jnp
      >>> mech = Mechanism.from_K(jnp.array([[0.75, 0.25], [0.25, 0.75]]))
      >>> mech.n, mech.m, mech.batch_shape
      (2, 2, ())
    """

    log_K: Float[Array, "*batch n m"]
    log_prior: Float[Array, "*batch n"]
    log_belief: Float[Array, "*batch n"]
    values: Optional[Float[Array, "*batch m"]] = None
    records: Optional[Records] = dataclasses.field(default=None, metadata=dict(static=True))

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def from_K(
        cls,
        K,
        prior=None,
        belief=None,
        values=None,
        *,
        records: Records | None = None,
        dtype=None,
        validate: bool = True,
    ) -> "Mechanism":
        """Mechanism from probabilities ``K[..., d, w]``; prior defaults to uniform, belief to prior.

        Args:
          K: shape ``(*batch, n, m)``, rows on the simplex.
          prior: shape ``(n,)`` or ``(*batch, n)``; default uniform.
          belief: like ``prior``; default ``prior``.
          values: output values, shape ``(m,)`` or ``(*batch, m)``.
          records: database layout, when the secrets are databases.
          dtype: float dtype of the stored arrays (default: JAX's default float).
          validate: check the inputs (only possible for concrete arrays).

        Raises:
          InputError: naming the first problem found.
        """
        if validate and _is_concrete(K, prior, belief, values):
            K64 = _checked_stochastic(K, "K", min_ndim=2)
            n, m = K64.shape[-2:]
            prior64 = _checked_distribution(prior, "prior", n, K64.shape[:-2])
            belief64 = prior64 if belief is None else _checked_distribution(
                belief, "belief", n, K64.shape[:-2])
            values64 = None if values is None else _checked_values(values, m)
            _check_records(records, n)
            with np.errstate(divide="ignore"):
                return cls._assemble(np.log(K64), np.log(prior64), np.log(belief64),
                                     values64, records, dtype)
        K = jnp.asarray(K)
        n = K.shape[-2]
        prior = jnp.full((n,), 1.0 / n) if prior is None else jnp.asarray(prior)
        belief = prior if belief is None else jnp.asarray(belief)
        return cls._assemble(jnp.log(K), jnp.log(prior), jnp.log(belief), values, records, dtype)

    @classmethod
    def from_log_K(
        cls,
        log_K,
        log_prior=None,
        log_belief=None,
        values=None,
        *,
        records: Records | None = None,
        dtype=None,
        validate: bool = True,
    ) -> "Mechanism":
        """Mechanism from ``log K`` (and optionally ``log π``, ``log b``); see :meth:`from_K`.

        Use this when entries are below the float range (e.g. ``K = 1e−60`` in float32).
        """
        if validate and _is_concrete(log_K, log_prior, log_belief, values):
            log_K64 = _checked_log_stochastic(log_K, "log_K")
            n, m = log_K64.shape[-2:]
            batch = log_K64.shape[:-2]
            log_prior64 = (np.full((n,), -math.log(n)) if log_prior is None
                           else _checked_log_stochastic(log_prior, "log_prior", min_ndim=1,
                                                        length=n, batch=batch))
            log_belief64 = log_prior64 if log_belief is None else _checked_log_stochastic(
                log_belief, "log_belief", min_ndim=1, length=n, batch=batch)
            values64 = None if values is None else _checked_values(values, m)
            _check_records(records, n)
            return cls._assemble(log_K64, log_prior64, log_belief64, values64, records, dtype)
        log_K = jnp.asarray(log_K)
        n = log_K.shape[-2]
        log_prior = jnp.full((n,), -math.log(n)) if log_prior is None else jnp.asarray(log_prior)
        log_belief = log_prior if log_belief is None else jnp.asarray(log_belief)
        return cls._assemble(log_K, log_prior, log_belief, values, records, dtype)

    @classmethod
    def _assemble(cls, log_K, log_prior, log_belief, values, records, dtype):
        dtype = jnp.dtype(dtype) if dtype is not None else jnp.asarray(0.0).dtype
        log_K = jnp.asarray(log_K, dtype)
        batch = log_K.shape[:-2]
        n = log_K.shape[-2]
        log_prior = jnp.broadcast_to(jnp.asarray(log_prior, dtype), (*batch, n))
        log_belief = jnp.broadcast_to(jnp.asarray(log_belief, dtype), (*batch, n))
        if values is not None:
            values = jnp.broadcast_to(jnp.asarray(values, dtype), (*batch, log_K.shape[-1]))
        return cls(log_K, log_prior, log_belief, values, records)

    # -- views -------------------------------------------------------------------------------

    @property
    def K(self) -> Float[Array, "*batch n m"]:
        return jnp.exp(self.log_K)

    @property
    def prior(self) -> Float[Array, "*batch n"]:
        return jnp.exp(self.log_prior)

    @property
    def belief(self) -> Float[Array, "*batch n"]:
        return jnp.exp(self.log_belief)

    @property
    def n(self) -> int:
        return self.log_K.shape[-2]

    @property
    def m(self) -> int:
        return self.log_K.shape[-1]

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return tuple(self.log_K.shape[:-2])

    @property
    def dtype(self):
        return self.log_K.dtype

    def astype(self, dtype) -> "Mechanism":
        """The same mechanism with every array cast to ``dtype``, its rows, prior and belief
        renormalized in ``dtype`` (log space); the mechanism itself if it already is ``dtype``.

        A float32 mechanism's rows sum to 1 only within ~1e−7; cast as they are, float64
        arithmetic would see a mechanism that is not stochastic, and identities the kernels rely
        on (``Σ_w p(w) = 1``) would fail at that level.
        """
        if all(jnp.asarray(a).dtype == jnp.dtype(dtype) for a in jax.tree_util.tree_leaves(self)):
            return self  # nothing to cast: keep the exact numbers (no renormalization)
        cast = jax.tree_util.tree_map(lambda a: jnp.asarray(a, dtype), self)
        return cast.replace(log_K=_renormalized(cast.log_K),
                            log_prior=_renormalized(cast.log_prior),
                            log_belief=_renormalized(cast.log_belief))

    def __getitem__(self, index) -> "Mechanism":
        """Index the batch axes: ``mechs[3]`` is the fourth mechanism of a batch."""
        if not self.batch_shape:
            raise IndexError("an unbatched Mechanism cannot be indexed")
        return jax.tree_util.tree_map(lambda a: a[index], self)

    def replace(self, **changes: Any) -> "Mechanism":
        return dataclasses.replace(self, **changes)


@jax.jit  # one program per shape: op by op, ~14 small ones (astype on the host, every check)
def _renormalized(log_w):
    """``log w − log Σ w`` over the last axis (unchanged where the sum is 0, never NaN)."""
    from jax.scipy.special import logsumexp

    total = logsumexp(log_w, axis=-1, keepdims=True)
    return jnp.where(jnp.isfinite(total), log_w - jnp.where(jnp.isfinite(total), total, 0.0),
                     log_w)


# -- host-side validation ------------------------------------------------------------------


def _is_concrete(*arrays) -> bool:
    return not any(isinstance(a, jax.core.Tracer) for a in arrays if a is not None)


def _as_float64(x, name: str, min_ndim: int) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a rectangular array of numbers") from None
    except OverflowError:  # an integer literal beyond float64
        raise InputError(f"{name} has a number too large for a float64") from None
    if a.ndim < min_ndim:
        what = "matrix (rows = secrets, columns = outputs)" if min_ndim == 2 else "vector"
        raise InputError(f"{name} must be a {what}, got shape {a.shape}")
    if 0 in a.shape:
        raise InputError(f"{name} must not be empty, got shape {a.shape}")
    if np.isnan(a).any():
        raise InputError(f"{name} contains NaN at index {_first(np.isnan(a))}")
    return a


def _first(mask: np.ndarray):
    """Index of the first True entry: an int for vectors, a tuple otherwise."""
    index = tuple(int(i) for i in np.argwhere(mask)[0])
    return index[0] if len(index) == 1 else index


def _checked_stochastic(x, name: str, min_ndim: int) -> np.ndarray:
    a = _as_float64(x, name, min_ndim)
    if np.isinf(a).any():
        raise InputError(f"{name} contains an infinite entry at index {_first(np.isinf(a))}")
    if (a < 0).any():
        idx = _first(a < 0)
        raise InputError(f"{name} has a negative entry {a[idx]:g} at index {idx}")
    sums = a.sum(axis=-1)
    bad = np.abs(sums - 1.0) > SUM_ATOL
    if bad.any():
        idx = _first(bad)
        where = f"row {idx}" if a.ndim >= 2 else "it"
        raise InputError(f"{name} must sum to 1 along its last axis (within {SUM_ATOL:g}); "
                         f"{where} sums to {sums[idx]:.10g}")
    return a / sums[..., None]


def _checked_distribution(x, name: str, n: int, batch: tuple[int, ...]) -> np.ndarray:
    if x is None:
        return np.full((n,), 1.0 / n)
    a = _checked_stochastic(x, name, min_ndim=1)
    _check_length_and_batch(a, name, n, batch, "secrets")
    return a


def _check_length_and_batch(a, name, n, batch, what):
    if a.shape[-1] != n:
        raise InputError(f"{name} has {a.shape[-1]} entries but the mechanism has {n} {what}")
    try:
        np.broadcast_shapes(a.shape[:-1], batch)
    except ValueError:
        raise InputError(f"{name} batch shape {a.shape[:-1]} does not match {batch}") from None


def _checked_log_stochastic(x, name, min_ndim=2, length=None, batch=()):
    a = _as_float64(x, name, min_ndim)
    if (a == np.inf).any():
        raise InputError(f"{name} contains +inf at index {_first(a == np.inf)}")
    if length is not None:
        _check_length_and_batch(a, name, length, batch, "secrets")
    finite_max = np.max(a, axis=-1, keepdims=True)
    if (finite_max == -np.inf).any():
        raise InputError(f"{name} has a row that is all -inf (sums to 0, not 1)")
    log_sums = np.log(np.sum(np.exp(a - finite_max), axis=-1, keepdims=True)) + finite_max
    bad = np.abs(np.expm1(log_sums[..., 0])) > SUM_ATOL
    if bad.any():
        idx = _first(bad)
        raise InputError(f"exp({name}) must sum to 1 along its last axis (within {SUM_ATOL:g}); "
                         f"row {idx} sums to {math.exp(log_sums[idx][0]):.10g}")
    return a - log_sums


def _checked_values(values, m: int) -> np.ndarray:
    a = _as_float64(values, "values", 1)
    if not np.isfinite(a).all():
        raise InputError(f"values must be finite; index {_first(~np.isfinite(a))} is not")
    if a.shape[-1] != m:
        raise InputError(f"values has {a.shape[-1]} entries but the mechanism has {m} outputs")
    return a


def _check_records(records: Records | None, n: int) -> None:
    if records is None:
        return
    if records.k < 1 or records.r < 1:
        raise InputError(f"records needs k >= 1 and r >= 1, got k={records.k}, r={records.r}")
    if not 0 <= records.default < records.k:
        raise InputError(f"records default {records.default} is not a value in 0..{records.k - 1}")
    # k^r is computed only where it can equal n (k = 1e0 or r*log k about log n): a huge r took
    # seconds and memory for the power, then failed to print it
    if records.k > 1 and records.r * math.log(records.k) > math.log(max(n, 1)) + 1.0:
        raise InputError(f"records k={records.k}, r={records.r} describe more than {n} databases "
                         f"(k^r), but K has {n} rows")
    if records.size != n:
        raise InputError(f"records k={records.k}, r={records.r} describe {records.size} "
                         f"databases but K has {n} rows")
