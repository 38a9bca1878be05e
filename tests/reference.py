"""Independent high-precision oracle (mpmath, 50 digits) for every core notion.

Written straight from SPEC's definitions with none of the library's numerical rewrites: the
posterior is formed explicitly, JS is ½KL(P‖M)+½KL(Q‖M), KL is Σ P log(P/Q). At 50 digits the
cancellations the library works around are harmless, so agreement checks the rewrites.
"""

from __future__ import annotations

import mpmath as mp

mp.mp.dps = 50
INF = mp.inf


def _m(x):
    x = x.tolist() if hasattr(x, "tolist") else list(x)
    return [_m(v) if isinstance(v, (list, tuple)) else mp.mpf(v) for v in x]


def marginal(K, prior):
    n, m = len(K), len(K[0])
    return [mp.fsum(prior[d] * K[d][w] for d in range(n)) for w in range(m)]


def ldp(K, neighbours=None):
    n, m = len(K), len(K[0])
    best = mp.mpf(0)
    for w in range(m):
        for d in range(n):
            for e in range(n):
                if neighbours is not None and not neighbours[d][e]:
                    continue
                if K[d][w] > 0:
                    best = max(best, INF if K[e][w] == 0 else mp.log(K[d][w] / K[e][w]))
    return best


def mbp(K, prior):
    p = marginal(K, prior)
    best = mp.mpf(0)
    for w, pw in enumerate(p):
        if pw == 0:
            continue
        for d, pd in enumerate(prior):
            if pd == 0:
                continue
            post = pd * K[d][w] / pw
            best = max(best, INF if post == 0 else abs(mp.log(post / pd)))
    return best


def kl(P, Q):
    total = mp.mpf(0)
    for a, b in zip(P, Q):
        if a > 0:
            if b == 0:
                return INF
            total += a * mp.log(a / b)
    return total


def js(P, Q):
    M = [(a + b) / 2 for a, b in zip(P, Q)]
    return kl(P, M) / 2 + kl(Q, M) / 2


def tv(P, Q):
    return mp.fsum(abs(a - b) for a, b in zip(P, Q)) / 2


def abp_for_law(K, prior, belief, q):
    n, m = len(K), len(K[0])
    p = marginal(K, prior)
    possible = [w for w in range(m) if p[w] > 0]
    mass = mp.fsum(q[w] for w in possible)
    if mass == 0:
        FA = list(prior)
    else:
        FA = [mp.fsum(prior[d] * K[d][w] / p[w] * q[w] / mass for w in possible)
              for d in range(n)]
    return mp.sqrt(js(FA, belief))


def abp_record(K, prior, belief):
    return [abp_for_law(K, prior, belief, K[d]) for d in range(len(K))]


def abp_output(K, prior, belief):
    m = len(K[0])
    p = marginal(K, prior)
    out = []
    for w in range(m):
        q = [mp.mpf(1) if v == w else mp.mpf(0) for v in range(m)]
        out.append(abp_for_law(K, prior, belief, q) if p[w] > 0 else mp.mpf(0))
    return out


def eps_unif(prior):
    if min(prior) == 0:
        return INF
    return mp.log(max(prior) / min(prior))


def eps_bel(belief, prior):
    best = mp.mpf(0)
    for b, p in zip(belief, prior):
        if b == 0 and p == 0:
            continue
        best = max(best, INF if b == 0 or p == 0 else abs(mp.log(b / p)))
    return best


def mutual_information(K, prior):
    p = marginal(K, prior)
    total = mp.mpf(0)
    for d, pd in enumerate(prior):
        for w, pw in enumerate(p):
            if pd > 0 and K[d][w] > 0:
                total += pd * K[d][w] * mp.log(K[d][w] / pw)
    return total


def levels(K, prior=None, belief=None):
    """Everything ``jaxpriv eval --json`` reports, as Python floats."""
    K = _m(K)
    n = len(K)
    prior = _m(prior) if prior is not None else [mp.mpf(1) / n] * n
    belief = _m(belief) if belief is not None else prior
    record = abp_record(K, prior, belief)
    output = abp_output(K, prior, belief)
    abp = max((v for v, pd in zip(record, prior) if pd > 0), default=mp.mpf(0))
    result = {
        "ldp": ldp(K), "mbp": mbp(K, prior), "abp": abp,
        "abp_mean": mp.fsum(v * pd for v, pd in zip(record, prior)),
        "abp_record": record, "abp_output": max(output), "abp_output_vector": output,
        "eps_unif": eps_unif(prior), "eps_bel": eps_bel(belief, prior),
        "mi": mutual_information(K, prior),
    }
    return {k: ([float(x) for x in v] if isinstance(v, list) else float(v))
            for k, v in result.items()}


# --------------------------------------------------------------------------------------------
# SPEC §5: the wider DP literature (pair notions: max over ordered pairs of distinct rows)
# --------------------------------------------------------------------------------------------


def chi2(P, Q):
    total = mp.mpf(0)
    for a, b in zip(P, Q):
        if b == 0:
            if a > 0:
                return INF
            continue
        total += (a - b) ** 2 / b
    return total


def renyi(P, Q, order):
    """``(α−1)⁻¹ log Σ P^α Q^{1−α}`` straight from the definition (α > 1, finite)."""
    alpha = mp.mpf(order)
    total = mp.mpf(0)
    for a, b in zip(P, Q):
        if a > 0:
            if b == 0:
                return INF
            total += a ** alpha * b ** (1 - alpha)
    return mp.log(total) / (alpha - 1)


def d_inf(P, Q):
    best = mp.mpf(0)
    for a, b in zip(P, Q):
        if a > 0:
            best = max(best, INF if b == 0 else mp.log(a / b))
    return best


def zcdp(P, Q):
    """``sup_{α>1} D_α/α``: a 160-point scan of ``log(α−1)`` over [−14, log(α_max)] then a
    ternary search (90 steps) around the best point, against the α → 1 limit (KL)."""
    k = kl(P, Q)
    top = d_inf(P, Q)
    if top == INF:
        return INF
    if k == 0:
        return mp.mpf(0)
    high = mp.log(max(top / k, 2) - 1)
    low = mp.mpf(-14)
    points = 160
    g = lambda u: renyi(P, Q, 1 + mp.exp(u)) / (1 + mp.exp(u))  # noqa: E731
    us = [low + (high - low) * i / (points - 1) for i in range(points)]
    values = [g(u) for u in us]
    i = max(range(points), key=lambda j: values[j])
    a, b = us[max(i - 1, 0)], us[min(i + 1, points - 1)]
    for _ in range(90):
        c, d = a + (b - a) / 3, b - (b - a) / 3
        if g(c) >= g(d):
            b = d
        else:
            a = c
    return max(k, max(values), g((a + b) / 2))


def hockey_stick(P, Q, eps):
    E = mp.exp(eps)
    return mp.fsum(max(mp.mpf(0), a - E * b) for a, b in zip(P, Q))


def eps_at_delta(P, Q, delta):
    """Least ε ≥ 0 with ``δ(ε) ≤ δ`` by bisection on ε (250 steps), not the closed form."""
    delta = mp.mpf(delta)
    if hockey_stick(P, Q, 0) <= delta:
        return mp.mpf(0)
    if mp.fsum(a for a, b in zip(P, Q) if b == 0) > delta:
        return INF
    lo, hi = mp.mpf(0), d_inf(P, Q) + 1
    for _ in range(250):
        mid = (lo + hi) / 2
        if hockey_stick(P, Q, mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def _probit(x):
    return -INF if x == 0 else (INF if x == 1 else mp.sqrt(2) * mp.erfinv(2 * x - 1))


def gdp(P, Q):
    """``max over every test S ⊆ outputs`` (all 2^m subsets, no sorting) of
    ``Φ⁻¹(Q(S)) − Φ⁻¹(P(S))``; subsets with ``P(S) = Q(S) ∈ {0, 1}`` decide nothing."""
    import itertools

    m = len(P)
    best = mp.mpf(0)
    for size in range(0, m + 1):
        for S in itertools.combinations(range(m), size):
            a = mp.fsum(P[w] for w in S)
            b = mp.fsum(Q[w] for w in S)
            ac = mp.fsum(P[w] for w in range(m) if w not in S)
            bc = mp.fsum(Q[w] for w in range(m) if w not in S)
            if (a == 0 and b == 0) or (ac == 0 and bc == 0):
                continue
            if a == 0 or bc == 0:
                return INF
            best = max(best, _probit(b) - _probit(a))
    return best


def pair_level(fn, K, *args, neighbours=None):
    K = _m(K)
    n = len(K)
    best = mp.mpf(0)
    for d in range(n):
        for e in range(n):
            if d != e and (neighbours is None or neighbours[d][e]):
                best = max(best, fn(K[d], K[e], *args))
    return best


def max_leakage(K, prior):
    K, prior = _m(K), _m(prior)
    m = len(K[0])
    return mp.log(mp.fsum(max(K[d][w] for d in range(len(K)) if prior[d] > 0)
                          for w in range(m)))


def pml(K, prior):
    K, prior = _m(K), _m(prior)
    p = marginal(K, prior)
    best = mp.mpf(0)
    for w, pw in enumerate(p):
        if pw > 0:
            top = max(K[d][w] for d in range(len(K)) if prior[d] > 0)
            best = max(best, mp.log(top / pw))
    return best


def literature_levels(K, prior=None, order=2.0, epsilon=1.0, delta=1e-5):
    """Every SPEC §5 notion at the given parameters, as Python floats."""
    n = len(K)
    prior = prior if prior is not None else [1.0 / n] * n
    out = {
        "tv": pair_level(tv, K), "kl": pair_level(kl, K), "chi2": pair_level(chi2, K),
        "renyi": pair_level(renyi, K, order), "zcdp": pair_level(zcdp, K),
        "delta": pair_level(hockey_stick, K, mp.mpf(epsilon)),
        "eps_at_delta": pair_level(eps_at_delta, K, delta), "gdp": pair_level(gdp, K),
        "max_leakage": max_leakage(K, prior), "pml": pml(K, prior),
    }
    return {k: float(v) for k, v in out.items()}


# -- composition (SPEC §6): the k-fold product distributions themselves, all m^k sequences ----


def product(P, k: int):
    """``P^⊗k`` as a list over every output sequence (``m^k`` entries, 50 digits)."""
    import itertools

    P = _m(P)
    return [mp.fprod(P[w] for w in seq) for seq in itertools.product(range(len(P)), repeat=k)]


def composed_delta(P, Q, k: int, eps):
    """``δ_k(ε) = Σ_o max(0, P^⊗k(o) − e^ε Q^⊗k(o))`` over every sequence ``o``."""
    return hockey_stick(product(P, k), product(Q, k), mp.mpf(eps))


def composed_eps(P, Q, k: int, delta, steps: int = 80):
    """Least ε ≥ 0 with ``δ_k(ε) ≤ δ``, by bisection on the sequences' hockey stick
    (``steps`` halvings of ``[0, D_∞ + 1]``: below 1e-20 for ``D_∞ < 1e4``)."""
    P, Q, delta = product(P, k), product(Q, k), mp.mpf(delta)
    if hockey_stick(P, Q, 0) <= delta:
        return mp.mpf(0)
    if mp.fsum(a for a, b in zip(P, Q) if b == 0) > delta:
        return INF
    lo, hi = mp.mpf(0), d_inf(P, Q) + 1
    for _ in range(steps):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if hockey_stick(P, Q, mid) <= delta else (mid, hi)
    return hi


def rr_composed_delta(eps, k: int, eps_prime):
    """SPEC §6's closed form for k uses of binary randomized response RR_ε (Kairouz, Oh,
    Viswanath 2015): ``(1+e^ε)^−k Σ_l C(k,l) max(0, e^{(k−l)ε} − e^{ε'+lε})``."""
    eps, eps_prime = mp.mpf(eps), mp.mpf(eps_prime)
    total = mp.fsum(mp.binomial(k, l) * max(mp.mpf(0), mp.exp((k - l) * eps)
                                             - mp.exp(eps_prime + l * eps)) for l in range(k + 1))
    return total / (1 + mp.exp(eps)) ** k


def rr_composed_eps(eps, k: int, delta, steps: int = 80):
    """Least ε' ≥ 0 with :func:`rr_composed_delta` ``≤ δ`` (bisection on [0, kε]; the closed
    form's terms ``C(k,l) e^{(k−l)ε}`` and ``C(k,l) e^{lε}`` computed once)."""
    eps, delta = mp.mpf(eps), mp.mpf(delta)
    a = [mp.binomial(k, l) * mp.exp((k - l) * eps) for l in range(k + 1)]
    b = [mp.binomial(k, l) * mp.exp(l * eps) for l in range(k + 1)]
    scale = (1 + mp.exp(eps)) ** k

    def profile(eps_prime):
        factor = mp.exp(eps_prime)
        return mp.fsum(max(mp.mpf(0), x - factor * y) for x, y in zip(a, b)) / scale

    if profile(0) <= delta:
        return mp.mpf(0)
    lo, hi = mp.mpf(0), k * eps
    for _ in range(steps):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if profile(mid) <= delta else (mid, hi)
    return hi
