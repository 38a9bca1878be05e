"""The certified FFT bracket of the composed privacy profile (SPEC §6, where the count vectors
do not fit: ``jaxpriv.core.composition_bracket``): it contains the exact value — the 50-digit
closed form of randomized response (Kairouz, Oh, Viswanath 2015, Thm 3.3) and the exact
count-vector computation on random mechanisms with zeros (+∞ atoms) and heterogeneous
compositions — its width shrinks with the grid, and ``compose`` takes it where the exact
computation does not fit, with the accountants judged against its ends."""

from __future__ import annotations

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import reference
from jaxpriv import InputError
from jaxpriv.core import composition
from jaxpriv.core import composition_bracket as cb
from jaxpriv.engines import compose

SIZE = 1 << 14
SLACK = 1e-12  # the exact side's own float64 rounding


def _exact(parts, *, delta=None, epsilon=None):
    with jax.enable_x64(True):
        loss = composition.combined_loss([(jnp.asarray(P, jnp.float64), jnp.asarray(Q, jnp.float64),
                                           k) for P, Q, k in parts])
        if delta is not None:
            return float(composition.eps_of_loss(loss, delta))
        return float(composition.delta_of_loss(loss, epsilon))


def _inside(value, lower, upper):
    if math.isinf(value):
        return lower == upper == value
    return lower <= value * (1 + SLACK) + SLACK and value <= upper * (1 + SLACK) + SLACK


@pytest.mark.parametrize("eps, k, delta", [(math.log(1.5), 10, 1e-5), (0.5, 100, 1e-6),
                                           (1.0, 37, 1e-8)])
def test_randomized_response_closed_form_is_inside_the_bracket(eps, k, delta):
    P = np.log([math.exp(eps), 1.0]) - math.log1p(math.exp(eps))
    lower, upper = cb.eps_bracket([(P, P[::-1], k)], delta, size=SIZE)
    want = float(reference.rr_composed_eps(eps, k, delta))
    assert lower <= want <= upper
    # width: each use's loss moves by less than the step h = span/(N − k − 1), span = 2kε
    assert upper - lower <= 1.5 * k * (2 * k * eps) / (SIZE - k - 1) + 1e-9
    d_lower, d_upper = cb.delta_bracket([(P, P[::-1], k)], 0.5 * want, size=SIZE)
    d_want = float(reference.rr_composed_delta(eps, k, 0.5 * want))
    assert d_lower <= d_want <= d_upper


def _random_parts(rng, trial):
    m = int(rng.integers(2, 5))
    K = rng.dirichlet(np.full(m, 0.7), size=2)
    if trial % 3 == 0:  # an output only the second row gives
        K[0, 0] = 0.0
    if trial % 4 == 1:  # an output only the first row gives: a +∞ atom
        K[1, -1] = 0.0
    K /= K.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore"):
        log_K = np.log(K)
    parts = [(log_K[0], log_K[1], int(rng.choice([1, 7, 23])))]  # few shapes: few compiles
    if trial % 5 == 2:  # heterogeneous: a second mechanism on the same pair
        other = np.log(rng.dirichlet(np.full(3, 1.0), size=2))
        parts.append((other[0], other[1], 6))
    return parts


@pytest.mark.parametrize("trial", range(6))
def test_the_exact_value_is_inside_the_bracket_on_random_mechanisms(trial):
    rng = np.random.default_rng(700 + trial)
    parts = _random_parts(rng, trial)
    delta = float(10.0 ** rng.uniform(-9, -2))
    eps = float(rng.uniform(0.0, 3.0))
    assert _inside(_exact(parts, delta=delta), *cb.eps_bracket(parts, delta, size=SIZE))
    assert _inside(_exact(parts, epsilon=eps), *cb.delta_bracket(parts, eps, size=SIZE))


def test_the_bracket_narrows_as_the_grid_grows():
    rng = np.random.default_rng(3)
    log_K = np.log(rng.dirichlet(np.full(4, 2.0), size=2))
    parts = [(log_K[0], log_K[1], 40)]
    want = _exact(parts, delta=1e-6)
    widths = []
    for size in (1 << 10, 1 << 13, 1 << 16):
        lower, upper = cb.eps_bracket(parts, 1e-6, size=size)
        assert lower <= want <= upper
        widths.append(upper - lower)
    assert widths[0] > 4 * widths[1] > 16 * widths[2] > 0


@pytest.mark.parametrize("trial", range(4))
def test_a_coarse_grid_never_reads_beyond_the_largest_composed_loss(trial):
    """Every sequence's loss is at most ``Σ k_i max L_i``: ε(δ) is at most that and δ(ε) above
    it is the +∞ atom's mass alone, exactly. On a coarse grid the bracket read ε = 636 for 100
    uses of ε = 1 randomized response, and δ(150) = 1 where it is 0."""
    rng = np.random.default_rng(900 + trial)
    parts = _random_parts(rng, trial)
    with np.errstate(invalid="ignore"):
        top = sum(k * float(np.nanmax(np.where(np.isfinite(P) & np.isfinite(Q), P - Q, np.nan)))
                  for P, Q, k in parts)
    size = 1 << 7 if sum(k for *_, k in parts) < 100 else 1 << 8
    for delta in (1e-9, 1e-3):
        lower, upper = cb.eps_bracket(parts, delta, size=size)
        assert _inside(_exact(parts, delta=delta), lower, upper)
        assert math.isinf(upper) or upper <= max(top, 0.0) * (1 + 1e-9)
    lower, upper = cb.delta_bracket(parts, top * 1.001 + 1e-9, size=size)
    atom = _exact(parts, epsilon=top * 1.001 + 1e-9)  # the +∞ atom's mass (0 without one)
    assert _inside(atom, lower, upper) and upper - lower <= 1e-13 * atom
    rr = np.log([[math.e / (1 + math.e), 1 / (1 + math.e)]] * 2)
    rr[1] = rr[1][::-1]
    assert cb.eps_bracket([(rr[0], rr[1], 100)], 1e-6, size=128)[1] <= 100 * (1 + 1e-9)
    assert cb.delta_bracket([(rr[0], rr[1], 100)], 150.0, size=128) == (0.0, 0.0)


def test_above_every_finite_loss_the_bracket_holds_the_atom_s_50_digit_value():
    """Above every finite loss δ_k(ε) is the +∞ atom's mass, 1 − (1 − p)^k: the bracket's ends
    there against it in 50 digits (its float value carries the rounding of p's sum over many
    Q = 0 outputs: taken as exact to 4 ulps, 2 of 400 such pairs fell outside by 3.8 ulps)."""
    import mpmath

    mpmath.mp.dps = 50
    rng = np.random.default_rng(44)
    for _ in range(60):
        m = int(rng.integers(20, 200))
        zeros = int(rng.integers(5, m // 3))
        P, Q = rng.dirichlet(np.ones(m)), rng.dirichlet(np.ones(m))
        Q[:zeros] = 0.0
        Q /= Q.sum()
        with np.errstate(divide="ignore"):
            log_P, log_Q = np.log(P), np.log(Q)
        k = int(rng.integers(1, 4))
        p = mpmath.fsum(mpmath.exp(mpmath.mpf(float(x))) for x in log_P[:zeros])
        atom = 1 - (1 - p) ** k
        top = k * float(np.max(log_P[zeros:] - log_Q[zeros:]))
        lower, upper = cb.delta_bracket([(log_P, log_Q, k)], 1.01 * top + 1, size=1 << 12)
        assert mpmath.mpf(lower) <= atom <= mpmath.mpf(upper)
        assert upper - lower <= 1e-12 * upper


def test_an_infinite_atom_above_delta_is_infinite_at_both_ends():
    with np.errstate(divide="ignore"):
        P, Q = np.log([0.5, 0.5]), np.log([1.0, 0.0])  # P's second output: +∞ loss, mass ½
    assert cb.eps_bracket([(P, Q, 3)], 0.5, size=64) == (math.inf, math.inf)
    lower, upper = cb.delta_bracket([(P, Q, 3)], 2.0, size=64)
    assert lower <= 1 - 0.5 ** 3 <= upper and upper - lower < 1e-9


def test_disjoint_supports_are_infinite_not_an_error():
    """P's whole mass where Q = 0 (disjoint supports): every δ(ε) < 1 needs ε = ∞ and δ(ε) = 1
    at every ε (log1p(−1) raised ValueError in the bracket's +∞ atom)."""
    with np.errstate(divide="ignore"):
        P, Q = np.log([0.5, 0.5, 0.0]), np.log([0.0, 0.0, 1.0])
    assert cb.eps_bracket([(P, Q, 200)], 1e-5, size=1024) == (math.inf, math.inf)
    lower, upper = cb.delta_bracket([(P, Q, 200)], 3.0, size=1024)
    assert lower == pytest.approx(1.0) and upper == pytest.approx(1.0)


@pytest.mark.parametrize("size, message", [(100, "power of 2"), (8, "power of 2"),
                                           (1 << 30, "power of 2"), (64, "cannot bracket")])
def test_bad_grid_sizes_are_one_clear_error(size, message):
    P = np.log([0.6, 0.4])
    with pytest.raises(InputError, match=message):
        cb.eps_bracket([(P, P[::-1], 100)], 1e-5, size=size)
    # uses no grid can hold: not a suggestion of a grid above the largest
    with pytest.raises(InputError, match="beyond the largest, 16,777,216: compose fewer uses"):
        cb.eps_bracket([(P, P[::-1], 20_000_000)], 1e-5, size=size if size == 64 else 1 << 24)


def test_compose_brackets_where_the_count_vectors_do_not_fit(monkeypatch):
    """With the exact limit lowered below this problem's count vectors, ``compose`` (auto)
    brackets; the bracket holds the exact max over pairs, the value is its upper end and the
    pair attaining it is the exact one's."""
    rng = np.random.default_rng(11)
    K = rng.dirichlet(np.full(4, 1.5), size=3)
    from test_composition import mech64
    mech = mech64(K)
    exact = compose.compose([mech], [12], delta=1e-6)
    assert exact.method == "exact"
    monkeypatch.setattr(composition, "MAX_COUNT_VECTORS", 100)  # C(15, 3) = 455 > 100
    bracketed = compose.compose([mech], [12], delta=1e-6, grid=SIZE)
    assert bracketed.method == "bracket" and bracketed.value == bracketed.bracket[1]
    assert bracketed.bracket[0] <= exact.value <= bracketed.bracket[1]
    assert bracketed.pair == exact.pair
    with pytest.raises(InputError, match="method must be one of"):
        compose.compose([mech], [12], delta=1e-6, method="fast")


def test_accountants_inside_the_bracket_are_undecided():
    """Judged against a bracket, a value below its lower end is UNSOUND, between its ends
    undecided (``within the bracket``), at or above its upper end sound."""
    import unittest.mock as mock

    from jaxpriv.catalog import accountant_composition as library
    from test_composition import mech64
    calls = tuple(library.ComposeCall("math", f"× {f}", "ldp", True,
                                      (lambda f: lambda e, k, d: f)(f)) for f in (1.0, 2.5, 4.0))
    with mock.patch.object(library, "CALLS", calls), \
            mock.patch.object(library.ComposeCall, "available", True):
        rows = compose.accountant_rows(mech64([[0.75, 0.25], [0.25, 0.75]]), 3, 1e-5, (2.0, 3.0))
    assert [r.verdict for r in rows] == ["UNSOUND", "within the bracket", "sound"]


def test_compose_command_with_the_bracket(tmp_path, capsys):
    from jaxpriv import cli

    path = tmp_path / "rr.json"
    path.write_text(json.dumps({"K": [[0.75, 0.25], [0.25, 0.75]]}))  # RR with ε = log 3
    assert cli.main(["compose", str(path), "--k", "20", "--delta", "1e-6", "--method", "bracket",
                     "--grid", str(SIZE), "--json", "--out", str(tmp_path / "out")]) == 0
    data = json.loads(capsys.readouterr().out)
    want = float(reference.rr_composed_eps(math.log(3), 20, 1e-6))
    assert data["method"] == "bracket" and data["eps"] == data["bracket"][1]
    assert data["bracket"][0] <= want <= data["bracket"][1]
    assert (tmp_path / "out" / "profile.png").stat().st_size > 10_000
    assert cli.main(["compose", str(path), "--k", "20", "--delta", "1e-6", "--method", "bracket",
                     "--grid", "1000"]) == 2
    err = capsys.readouterr().err
    assert "power of 2" in err and err.count("\n") == 1


def test_a_grid_with_the_exact_method_is_refused_not_ignored(tmp_path, capsys):
    from jaxpriv import cli

    path = tmp_path / "rr.json"
    path.write_text(json.dumps({"K": [[0.75, 0.25], [0.25, 0.75]]}))
    # before: --grid was dropped in silence (the exact count vectors take no grid)
    assert cli.main(["compose", str(path), "--k", "3", "--delta", "1e-6", "--method", "exact",
                     "--grid", "1024"]) == 2
    err = capsys.readouterr().err
    assert "--method exact does not use" in err and err.count("\n") == 1
    # auto may take the bracket: the grid is the bracket's, if it runs
    assert cli.main(["compose", str(path), "--k", "3", "--delta", "1e-6", "--grid", "1024"]) == 0
