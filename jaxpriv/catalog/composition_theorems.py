"""Composition theorems (SPEC §6) as relation records C1–C7: what k uses of a mechanism cost.

Each claim bounds the exact composed privacy of ``k`` uses (:mod:`jaxpriv.core.composition`:
``eps_composed`` at ``(k, δ)``, ``delta_composed`` at ``(k, ε')``, max over ordered pairs) by a
function of a single-use level (ε-LDP, Rényi ``D_α``, zCDP ρ). Each is registered once per
audited ``k`` and ``δ`` (or ``ε'``), its id the claim's and the values: ``C2.k10.d1e-5`` is C2 at
k = 10, δ = 1e-5; ``--relations C2`` selects every instance, ``'C*'`` every claim here.

Statements, checked against their papers (readings chosen are said where there was a choice):

* **C1** basic composition (Dwork, McSherry, Nissim, Smith 2006; Dwork–Roth 2014 Thm 3.16):
  ``ε_k(δ) ≤ kε``.
* **C2** advanced composition (Dwork, Rothblum, Vadhan 2010 Thm III.3; Dwork–Roth Thm 3.20 at
  δ = 0): ``ε_k(δ') ≤ ε√(2k ln(1/δ')) + kε(e^ε − 1)`` (the ``kε(e^ε−1)`` form of Thm 3.20, not
  Cor. 3.21's ``2kε²``, which needs ε' < 1).
* **C3** optimal composition (Kairouz, Oh, Viswanath 2015 Thm 3.3): ``δ_k(ε') ≤`` the k-fold
  RR_ε profile. The theorem states it at ``ε' = (k − 2i)ε``; the whole profile of k-fold RR_ε
  (SPEC §6's formula) is the reading audited, which equals it there and interpolates the
  hockey-stick curve between (RR_ε^⊗k dominates every k-fold ε-LDP composition at every ε').
* **C4** KOV 2015 Thm 3.4 at δ = 0 (composed δ = δ̃): ``ε_k(δ) ≤ min{kε, kε·tanh(ε/2) +
  ε√(2k log(e + √(kε²)/δ)), kε·tanh(ε/2) + ε√(2k log(1/δ))}`` (``(e^ε−1)/(e^ε+1) = tanh(ε/2)``).
* **C5** Mironov 2017 Prop. 1 (orders add under composition) and Prop. 3 (RDP ⇒ (ε, δ)):
  ``D_α ≤ r ⇒ ε_k(δ) ≤ kr + log(1/δ)/(α − 1)``, at α = 2 and 16.
* **C6** Bun–Steinke 2016 Lemma 1.7 (ρ adds under composition; SPEC cites Lemma 2.3) and Prop.
  1.3: ``ρ-zCDP ⇒ ε_k(δ) ≤ kρ + 2√(kρ log(1/δ))``.
* **C7** Dong, Roth, Su 2022, central limit theorem (Thm 3.5 without its Berry–Esseen error
  term γ, the way CLT accountants use it): k ε-LDP steps ``≈ μ``-GDP with ``μ = 2Σ kl/√(Σ(κ₂ −
  kl²))``, which for ``f_{ε,0}`` (``kl = ε·tanh(ε/2)``, ``κ₂ = ε²``) is ``μ = 2√k·sinh(ε/2)``;
  the claim read is ``ε_k(δ) ≤ ε_μ(δ)`` (:func:`jaxpriv.core.gaussian.gaussian_eps`). It is an
  approximation, not a theorem: the audit says where it fails.

Certificates (``docs/certified.md#c-relations``): where the premise is ε-LDP (C1–C4, C7) the
envelope is the value at binary randomized response RR_x, k uses (KOV 2015 Thm 3.3: every k-fold
composition of ε-LDP steps, adaptive ones too, is a post-processing of RR_x's), exact and
attained by a two-secret mechanism — so C3 reads tight, and the others' least slack is exact.

Examples:
  >>> from jaxpriv import families, registry
  >>> result = registry.get("C3.k10.e0.7").check(families.randomized_response(0.5))
  >>> round(float(result.slack), 9)  # RR_ε attains KOV's optimal composition
  1.0
"""

from __future__ import annotations

import functools
import math

import jax.numpy as jnp

from jaxpriv.catalog import notions as catalog  # noqa: F401  (the notions the relations use)
from jaxpriv.catalog.dp_literature import at_randomized_response
from jaxpriv.core import composition
from jaxpriv.core.gaussian import gaussian_eps
from jaxpriv.registry import REGISTRY, Relation, Sampling, Source
from jaxpriv.registry.claims import DELTA, EPSILON, ORDER, USES as K, Claim, register_claim, settings

USES = (1, 10, 100)
"""The numbers of uses ``k`` every C-claim is registered at."""
DELTAS = (1e-5, 1e-6)
"""The δ every ε(δ)-claim is registered at."""
CLT_DELTAS = (1e-3, 1e-5, 1e-6)
"""The δ C7 is registered at (1e-3 besides: where the CLT's error shows at every k)."""
EPS_PRIME = (0.7,)
"""The ε' C3's δ(ε') is registered at (not a multiple of the audit's grid levels: at ``kx = ε'``
exactly the profile's top atom sits on ε', where δ turns 0)."""
ORDERS = (2.0, 16.0)
"""The Rényi orders C5 is registered at."""
CERTIFIED = "docs/certified.md#c-relations"

C_RELATIONS: list[Relation] = []


# --------------------------------------------------------------------------------------------
# the worst case of ε-LDP steps
# --------------------------------------------------------------------------------------------


def _rr_eps(k: int, delta: float):
    """ε-LDP premise, ``eps_composed`` conclusion: the envelope is k-fold RR_x's ε at δ."""
    return at_randomized_response(lambda x: composition.rr_eps_composed(x, k, delta),
                                  f"eps_composed(k={k}, δ={delta:g})")


def _rr_delta(k: int, eps_prime: float):
    """ε-LDP premise, ``delta_composed`` conclusion: the envelope is k-fold RR_x's δ(ε')."""
    return at_randomized_response(lambda x: composition.rr_delta_composed(x, k, eps_prime),
                                  f"delta_composed(k={k}, ε'={eps_prime:g})")


# --------------------------------------------------------------------------------------------
# the claimed bounds (x: the single-use level; k, δ fixed per instance)
# --------------------------------------------------------------------------------------------


def basic(x, *p, k, delta):
    """C1: ``kε`` (δ: its parameter, not in the bound)."""
    return k * jnp.asarray(x)


def advanced(x, *p, k, delta):
    """C2: ``ε√(2k ln(1/δ)) + kε(e^ε − 1)``."""
    x = jnp.asarray(x)
    return jnp.sqrt(2.0 * k * -jnp.log(delta)) * x + k * x * jnp.expm1(x)


def kov_closed_form(x, *p, k, delta):
    """C4: KOV 2015 Thm 3.4 at δ = 0, the least of its three terms."""
    x = jnp.asarray(x)
    drift = k * x * jnp.tanh(x / 2.0)
    middle = drift + x * jnp.sqrt(2.0 * k * jnp.log(math.e + jnp.sqrt(k * x * x) / delta))
    last = drift + x * jnp.sqrt(2.0 * k * -jnp.log(delta))
    return jnp.minimum(k * x, jnp.minimum(middle, last))


def renyi_composed(x, *p, k, order, delta):
    """C5: ``kr + log(1/δ)/(α − 1)``."""
    return k * jnp.asarray(x) - jnp.log(delta) / (order - 1.0)


def zcdp_composed(x, *p, k, delta):
    """C6: ``kρ + 2√(kρ log(1/δ))``."""
    x = jnp.asarray(x)
    return k * x + 2.0 * jnp.sqrt(k * x * -jnp.log(delta))


def clt_mu(x, k: int):
    """C7's ``μ = 2√k·sinh(ε/2)``: DRS Thm 3.5's ``2Σkl/√(Σ(κ₂ − kl²))`` for k steps of
    ``f_{ε,0}`` (``kl = ε tanh(ε/2)``, ``κ₂ = ε²``; ``κ₂ − kl² = ε² sech²(ε/2)``)."""
    return 2.0 * math.sqrt(k) * jnp.sinh(jnp.asarray(x) / 2.0)


def clt(x, *p, k, delta):
    """C7: the ε at δ of μ-GDP with :func:`clt_mu`."""
    return gaussian_eps(clt_mu(x, k), delta)


def rr_composed_delta(x, *p, k, epsilon):
    """C3: k-fold RR_x's δ(ε') (KOV 2015 Thm 3.3)."""
    return composition.rr_delta_composed(x, k, epsilon)


# --------------------------------------------------------------------------------------------
# the relations
# --------------------------------------------------------------------------------------------

DMNS = Source("Dwork, McSherry, Nissim, Smith 2006 (TCC); Dwork, Roth 2014", "Thm 3.16")
DRV = Source("Dwork, Rothblum, Vadhan 2010 (FOCS); Dwork, Roth 2014",
             "Thm III.3; Dwork–Roth Thm 3.20 at δ = 0")
KOV = "Kairouz, Oh, Viswanath 2015 (ICML), arXiv 1311.0776"
MIRONOV = Source("Mironov 2017 (CSF), arXiv 1702.07476", "Prop. 1 and Prop. 3")
BUN_STEINKE = Source("Bun, Steinke 2016 (TCC), arXiv 1605.02065",
                     "Lemma 1.7 (composition) and Prop. 1.3")
DRS = Source("Dong, Roth, Su 2022 (JRSS-B), arXiv 1905.02383",
             "Thm 3.5 (CLT, without its error term) and Cor. 2.13")

QUICK = {(10, 1e-6), (10, 1e-3), (10, 0.7)}
"""The ``(k, δ or ε')`` of the instances the quick audit of every relation takes (8 of 48; the
others cost about 15 s each there): k = 10, δ = 1e-6, C7 at δ = 1e-3 (where its error shows)
and C3 at ε' = 0.7."""


def _sampling(k: int) -> Sampling | None:
    """Binary mechanisms are where ε-LDP's worst case lives (RR_x), and a composed level's cost
    grows like C(k + m − 1, m − 1) count vectors per pair: 3×3 mechanisms up to k = 10, 2×2
    beyond (k = 100: 101 count vectors per pair); the default shapes at k = 1."""
    if k == 1:
        return None
    return Sampling(shape=(3, 3) if k <= 10 else (2, 2))


def _relation(rid, statement, *, k, at, **fields) -> Relation:
    return Relation(id=rid, statement=statement, conclusion=fields.pop("conclusion",
                    "eps_composed"), sampling=_sampling(k), quick=(k, at) in QUICK, **fields)


def _g(v) -> str:
    return f"{v:.10g}"


def _c1(rid, k, delta):
    return _relation(rid, f"ε-LDP ⇒ ε_k(δ) ≤ kε at k = {k}, δ = {_g(delta)}", k=k, at=delta,
                     sources=(DMNS,), premise="ldp", options={"k": k, "delta": delta},
                     bound=functools.partial(basic, k=k, delta=delta),
                     certificate=_rr_eps(k, delta), proof=CERTIFIED)


def _c2(rid, k, delta):
    return _relation(rid, f"ε-LDP ⇒ ε_k(δ) ≤ ε√(2k ln(1/δ)) + kε(e^ε−1) at k = {k}, "
                          f"δ = {_g(delta)}", k=k, at=delta, sources=(DRV,), premise="ldp",
                     options={"k": k, "delta": delta},
                     bound=functools.partial(advanced, k=k, delta=delta),
                     certificate=_rr_eps(k, delta), proof=CERTIFIED)


def _c3(rid, k, epsilon):
    return _relation(rid, f"ε-LDP ⇒ δ_k(ε') ≤ k-fold RR_ε's δ(ε') at k = {k}, "
                          f"ε' = {_g(epsilon)}", k=k, at=epsilon,
                     sources=(Source(KOV, "Thm 3.3"),), premise="ldp",
                     conclusion="delta_composed", options={"k": k, "epsilon": epsilon},
                     bound=functools.partial(rr_composed_delta, k=k, epsilon=epsilon),
                     certificate=_rr_delta(k, epsilon), proof=CERTIFIED)


def _c4(rid, k, delta):
    return _relation(rid, f"ε-LDP ⇒ ε_k(δ) ≤ KOV's closed form (Thm 3.4) at k = {k}, "
                          f"δ = {_g(delta)}", k=k, at=delta,
                     sources=(Source(KOV, "Thm 3.4 at δ = 0"),), premise="ldp",
                     options={"k": k, "delta": delta},
                     bound=functools.partial(kov_closed_form, k=k, delta=delta),
                     certificate=_rr_eps(k, delta), proof=CERTIFIED)


def _c5(rid, k, order, delta):
    return _relation(rid, f"D_α ≤ r ⇒ ε_k(δ) ≤ kr + log(1/δ)/(α−1) at α = {_g(order)}, "
                          f"k = {k}, δ = {_g(delta)}", k=k, at=delta, sources=(MIRONOV,),
                     premise="renyi", options={"order": order, "k": k, "delta": delta},
                     bound=functools.partial(renyi_composed, k=k, order=order, delta=delta))


def _c6(rid, k, delta):
    return _relation(rid, f"ρ-zCDP ⇒ ε_k(δ) ≤ kρ + 2√(kρ log(1/δ)) at k = {k}, "
                          f"δ = {_g(delta)}", k=k, at=delta, sources=(BUN_STEINKE,),
                     premise="zcdp", options={"k": k, "delta": delta},
                     bound=functools.partial(zcdp_composed, k=k, delta=delta))


def _c7(rid, k, delta):
    return _relation(rid, f"ε-LDP ⇒ ε_k(δ) ≤ ε(δ) of μ-GDP, μ = 2√k sinh(ε/2) (CLT) at "
                          f"k = {k}, δ = {_g(delta)}", k=k, at=delta, sources=(DRS,),
                     premise="ldp", options={"k": k, "delta": delta}, bound=functools.partial(clt, k=k, delta=delta),
                     certificate=_rr_eps(k, delta), proof=CERTIFIED)


CLAIMS = (
    Claim("C1", "ε-LDP ⇒ ε_k(δ) ≤ kε", (K, DELTA), _c1, settings(k=USES, delta=DELTAS),
          bound=basic),
    Claim("C2", "ε-LDP ⇒ ε_k(δ) ≤ ε√(2k ln(1/δ)) + kε(e^ε−1)", (K, DELTA), _c2,
          settings(k=USES, delta=DELTAS), bound=advanced),
    Claim("C4", "ε-LDP ⇒ ε_k(δ) ≤ KOV's closed form (Thm 3.4)", (K, DELTA), _c4,
          settings(k=USES, delta=DELTAS), bound=kov_closed_form),
    Claim("C5", "D_α ≤ r ⇒ ε_k(δ) ≤ kr + log(1/δ)/(α−1)", (K, ORDER, DELTA), _c5,
          settings(k=USES, delta=DELTAS, order=ORDERS), bound=renyi_composed),
    Claim("C6", "ρ-zCDP ⇒ ε_k(δ) ≤ kρ + 2√(kρ log(1/δ))", (K, DELTA), _c6,
          settings(k=USES, delta=DELTAS), bound=zcdp_composed),
    Claim("C7", "ε-LDP ⇒ ε_k(δ) ≤ ε(δ) of μ-GDP, μ = 2√k sinh(ε/2) (CLT)", (K, DELTA), _c7,
          settings(k=USES, delta=CLT_DELTAS), bound=clt),
    Claim("C3", "ε-LDP ⇒ δ_k(ε') ≤ k-fold RR_ε's δ(ε')", (K, EPSILON), _c3,
          settings(k=USES, epsilon=EPS_PRIME), bound=rr_composed_delta),
)
"""The composition claims, k and δ (α, ε') their parameters, with the audit's grids."""


def _register_all() -> None:
    for claim in CLAIMS:
        register_claim(claim, replace=True, check_bound=False)
    # the registry lists them by k first (as before they were claims with parameters)
    order = sorted((values["k"], i, j, claim.instance_id(values))
                   for i, claim in enumerate(CLAIMS) for j, values in enumerate(claim.grid))
    for *_, rid in order:
        relation = REGISTRY.pop(rid)
        REGISTRY[rid] = relation
        C_RELATIONS.append(relation)


_register_all()
