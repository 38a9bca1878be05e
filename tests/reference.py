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
