"""The ``compose`` engine: the exact composed privacy of one or several mechanisms on the same
secrets, each used a number of times (SPEC §6), for every ordered pair of secrets, the pair that
attains it, and the privacy-profile curves behind it.

Examples:
  >>> from jaxpriv import families
  >>> from jaxpriv.engines import compose
  >>> result = compose.compose([families.randomized_response(0.1)], [100], delta=1e-5)
  >>> result.method, result.pair, round(result.value, 3)  # kε = 10
  ('exact', (0, 1), 4.307)
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxpriv.core import composition, composition_bracket
from jaxpriv.core.errors import InputError
from jaxpriv.core.mechanisms import Mechanism
from jaxpriv.core.pair_notions import pair_mask


class ComposeResult(NamedTuple):
    """What ``jaxpriv compose`` reports.

    Attributes:
      measure: ``"eps"`` (ε at the given δ) or ``"delta"`` (δ at the given ε).
      value: the composed ε(δ) or δ(ε), max over the ordered pairs.
      bracket: ``(lower, upper)`` containing the exact value (equal: exact).
      method: ``"exact"`` (count vectors, SPEC §6) or ``"bracket"`` (the FFT bracket of
        :mod:`jaxpriv.core.composition_bracket`, where the count vectors do not fit or it is
        asked for: ``value`` is then the bracket's upper end, a certified bound).
      pair: the ordered pair of secrets ``(d, d')`` that attains ``value``.
      per_pair: ``(n, n)`` float64, the value of each ordered pair (NaN off the counted pairs).
      uses: the number of uses of each mechanism.
      at: the δ (``measure == "eps"``) or ε given.
    """

    measure: str
    value: float
    bracket: tuple[float, float]
    method: str
    pair: tuple[int, int]
    per_pair: np.ndarray
    uses: tuple[int, ...]
    at: float


def _checked(mechs: Sequence[Mechanism], uses: Sequence[int]) -> tuple[list, list]:
    if not mechs:
        raise InputError("give at least one mechanism")
    uses = list(uses)
    if len(uses) == 1 and len(mechs) > 1:
        uses = uses * len(mechs)
    if len(uses) != len(mechs):
        raise InputError(f"give one number of uses per mechanism or one for all: {len(mechs)} "
                         f"mechanisms, {len(uses)} numbers of uses")
    uses = [composition.checked_uses(k) for k in uses]
    n = mechs[0].n
    for i, mech in enumerate(mechs):
        if mech.log_K.ndim != 2:
            raise InputError("compose takes single mechanisms, not batches")
        if mech.n != n:
            raise InputError(f"the mechanisms must share their secrets: mechanism 1 has {n}, "
                             f"mechanism {i + 1} has {mech.n}")
    return mechs, uses


def exact_fits(mechs: Sequence[Mechanism], uses: Sequence[int]) -> bool:
    """Whether the count vectors of the composition fit (:data:`composition.MAX_COUNT_VECTORS`
    combinations per pair): then it is computed exactly, else bracketed."""
    total = 1
    for mech, k in zip(mechs, uses):
        total *= composition.number_of_count_vectors(composition.checked_uses(k), mech.m)
    return total <= composition.MAX_COUNT_VECTORS


def _checked_at(epsilon, delta) -> tuple:
    if (epsilon is None) == (delta is None):
        raise InputError("give either epsilon (for δ(ε)) or delta (for ε(δ))")
    if epsilon is not None:
        epsilon = composition.checked_number("compose", "epsilon", epsilon)
        if epsilon < 0:
            raise InputError(f"epsilon must be ≥ 0, got {epsilon!r}")
    else:
        delta = composition.checked_number("compose", "delta", delta)
        if not 0.0 < delta < 1.0:
            raise InputError(f"delta must be in (0, 1), got {delta!r}")
    return epsilon, delta


def pair_brackets(mechs: Sequence[Mechanism], uses: Sequence[int], *, epsilon=None, delta=None,
                  neighbours=None, size: int = composition_bracket.DEFAULT_SIZE,
                  progress=None) -> tuple[np.ndarray, np.ndarray]:
    """``(lower, upper)``, each ``(n, n)`` float64 (NaN off the counted pairs): the certified FFT
    bracket of every ordered pair's composed δ(ε) or ε(δ) (:mod:`composition_bracket`, grid of
    ``size`` points); ``progress(done, total)`` is called after each pair."""
    mechs, uses = _checked(mechs, uses)
    epsilon, delta = _checked_at(epsilon, delta)
    size = composition_bracket.checked_size(size)
    n = mechs[0].n
    pairs = np.argwhere(pair_mask(n, neighbours))
    lower, upper = np.full((n, n), np.nan), np.full((n, n), np.nan)
    logs = [np.asarray(m.log_K, np.float64) for m in mechs]
    for i, (d, e) in enumerate(pairs):
        parts = [(lk[d], lk[e], k) for lk, k in zip(logs, uses)]
        if epsilon is not None:
            lower[d, e], upper[d, e] = composition_bracket.delta_bracket(parts, epsilon, size)
        else:
            lower[d, e], upper[d, e] = composition_bracket.eps_bracket(parts, delta, size)
        if progress is not None:
            progress(i + 1, len(pairs))
    return lower, upper


def pair_values(mechs: Sequence[Mechanism], uses: Sequence[int], *, epsilon=None, delta=None,
                neighbours=None) -> np.ndarray:
    """The composed δ(ε) (``epsilon`` given) or ε(δ) (``delta`` given) of every ordered pair,
    ``(n, n)`` float64 with NaN off the counted pairs (the diagonal, non-neighbours)."""
    mechs, uses = _checked(mechs, uses)
    epsilon, delta = _checked_at(epsilon, delta)
    n = mechs[0].n
    mask = pair_mask(n, neighbours)
    out = np.full((n, n), np.nan)
    with jax.enable_x64(True):
        logs = [jnp.asarray(m.log_K, jnp.float64) for m in mechs]
        # one compiled program for every pair (the pair's rows are its arguments)
        value = jax.jit(lambda rows: _value(rows, uses, epsilon, delta))
        for d, e in np.argwhere(mask):
            out[d, e] = float(value([(lk[d], lk[e]) for lk in logs]))
    return out


def _value(rows, uses, epsilon, delta):
    loss = composition.combined_loss([(P, Q, k) for (P, Q), k in zip(rows, uses)])
    if epsilon is not None:
        return composition.delta_of_loss(loss, epsilon)
    return composition.eps_of_loss(loss, delta)


METHODS = ("auto", "exact", "bracket")


def compose(mechs: Sequence[Mechanism], uses: Sequence[int], *, epsilon=None, delta=None,
            neighbours=None, method: str = "auto", grid: int = composition_bracket.DEFAULT_SIZE,
            progress=None) -> ComposeResult:
    """The composed ε(δ) or δ(ε) of ``mechs`` used ``uses`` times each, max over ordered pairs.

    Args:
      mechs: mechanisms on the same ``n`` secrets (rows), each ``(n, m_i)``.
      uses: the number of uses of each (one number: the same for all).
      epsilon: give it for ``δ(ε)``; or
      delta: give it for ``ε(δ)``.
      neighbours: optional symmetric ``(n, n)`` boolean neighbour relation.
      method: ``"auto"`` (exact where the count vectors fit, :func:`exact_fits`, else the
        bracket), ``"exact"`` or ``"bracket"``.
      grid: the bracket's FFT size (a power of 2; its width shrinks about as 1/grid).
      progress: ``progress(done, total)`` after each pair of the bracket.

    Returns:
      a :class:`ComposeResult` (exact: its bracket is ``(value, value)``; bracketed: ``value``
      is the upper end, the max over pairs of each pair's upper end, and the bracket's lower end
      the max of the lower ends: the exact max over pairs lies between them).
    """
    mechs, uses = _checked(mechs, uses)
    if method not in METHODS:
        raise InputError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    bracketed = method == "bracket" or (method == "auto" and not exact_fits(mechs, uses))
    if bracketed:
        lower, per_pair = pair_brackets(mechs, uses, epsilon=epsilon, delta=delta,
                                        neighbours=neighbours, size=grid, progress=progress)
    else:
        per_pair = pair_values(mechs, uses, epsilon=epsilon, delta=delta, neighbours=neighbours)
        lower = per_pair
    if np.isnan(per_pair).all():
        raise InputError("no pair of secrets to compare (one secret, or no neighbours)")
    d, e = np.unravel_index(np.nanargmax(per_pair), per_pair.shape)
    value = float(per_pair[d, e])
    measure = "delta" if epsilon is not None else "eps"
    return ComposeResult(measure, value, (float(np.nanmax(lower)), value),
                         "bracket" if bracketed else "exact", (int(d), int(e)), per_pair,
                         tuple(uses), float(epsilon if epsilon is not None else delta))


def profile_curve(mechs: Sequence[Mechanism], uses: Sequence[int], pair: tuple[int, int],
                  eps_grid, *, bracket: bool = False,
                  grid: int = composition_bracket.DEFAULT_SIZE):
    """``δ(ε)`` of the pair ``(d, d')`` under the composition, at each ε of ``eps_grid``
    (float64, one compiled program for the grid); with ``bracket``, ``(δ⁻, δ⁺)``: the FFT
    bracket's two curves."""
    mechs, uses = _checked(mechs, uses)
    d, e = pair
    if bracket:
        b = composition_bracket.pair_bracket(
            [(np.asarray(m.log_K[d], np.float64), np.asarray(m.log_K[e], np.float64), k)
             for m, k in zip(mechs, uses)], grid)
        return (np.array([composition_bracket.delta_lower(b.down, x) for x in eps_grid]),
                np.array([composition_bracket.delta_upper(b.up, x) for x in eps_grid]))
    with jax.enable_x64(True):
        rows = [(jnp.asarray(m.log_K[d], jnp.float64), jnp.asarray(m.log_K[e], jnp.float64))
                for m in mechs]
        grid = jnp.asarray(eps_grid, jnp.float64)

        def curve(rows, grid):
            loss = composition.combined_loss([(P, Q, k) for (P, Q), k in zip(rows, uses)])
            return jax.vmap(lambda x: composition.delta_of_loss(loss, x))(grid)

        return np.asarray(jax.jit(curve)(rows, grid))


class AccountantRow(NamedTuple):
    """One library's composed ε for the same mechanism, k and δ, beside the exact value.

    Attributes:
      library, call: what was called (:mod:`jaxpriv.catalog.accountant_composition`).
      value: the library's ε (``None`` where it refused the call or it does not apply).
      ratio: ``value / exact`` (``None`` without a value).
      verdict: ``"sound"`` (at least the exact ε, up to the tolerance), ``"UNSOUND"`` (below it
        beyond the tolerance: the library claims less privacy loss than k uses have),
        ``"lower estimate"`` (an optimistic estimate at most the exact ε, as it claims),
        ``"above the exact value"`` (an optimistic estimate that is not one), or ``"no value"``.
      note: why there is no value, or what the value is of (the LDP level it was given).
    """

    library: str
    call: str
    value: float | None
    ratio: float | None
    verdict: str
    note: str


def accountant_rows(mech: Mechanism, k: int, delta: float, exact,
                    neighbours=None) -> list[AccountantRow]:
    """Every installed library's composed ε for ``k`` uses of ``mech`` at ``delta``, checked
    against ``exact`` (the float64 :func:`compose` value of the same mechanism, k and δ, or its
    bracket ``(lower, upper)``): below it (the lower end) by more than ``RTOL·exact + ATOL`` is
    **UNSOUND**; a value inside a bracket is ``"within the bracket"`` (neither shown); ratios
    are to the exact value (the upper end)."""
    lowest, exact = (exact, exact) if np.ndim(exact) == 0 else (float(exact[0]), float(exact[1]))
    from jaxpriv.catalog import accountant_composition as library
    from jaxpriv.core import notions
    from jaxpriv.registry import ATOL, RTOL

    with jax.enable_x64(True):
        log_K = jnp.asarray(mech.log_K, jnp.float64)
        ldp = float(notions.ldp(dataclasses.replace(mech, log_K=log_K), neighbours))
        pairs = [(log_K[d], log_K[e]) for d, e in np.argwhere(pair_mask(mech.n, neighbours))]
    rows = []
    for call in library.CALLS:
        if not call.available:
            continue
        if call.kind == "ldp" and not math.isfinite(ldp):
            rows.append(AccountantRow(call.library, call.call, None, None, "no value",
                                      "the mechanism is not ε-LDP for any finite ε"))
            continue
        if call.kind == "ldp":
            value, why = library.run(call, ldp, k, delta)
            note = f"given the LDP level ε = {ldp:.12g}"
        else:
            values = [library.run(call, pair, k, delta) for pair in pairs]
            why = next((w for v, w in values if v is None), "")
            value = None if why else max(v for v, _ in values)
            note = "its largest value over the ordered pairs"
        if value is None:
            rows.append(AccountantRow(call.library, call.call, None, None, "no value", why))
            continue
        ratio = value / exact if exact > 0 else (math.inf if value > 0 else 1.0)
        below = value < lowest * (1.0 - RTOL) - ATOL
        above = value > exact * (1.0 + RTOL) + ATOL
        undecided = not below and value < exact * (1.0 - RTOL) - ATOL
        if call.upper:
            verdict = "UNSOUND" if below else "within the bracket" if undecided else "sound"
        else:
            verdict = ("above the exact value" if above
                       else "within the bracket" if value > lowest * (1.0 + RTOL) + ATOL
                       else "lower estimate")
        rows.append(AccountantRow(call.library, call.call, value, ratio, verdict, note))
    return rows


__all__ = ["AccountantRow", "ComposeResult", "METHODS", "accountant_rows", "compose",
           "exact_fits", "pair_brackets", "pair_values", "profile_curve"]
