"""The relations of the three seed papers (SPEC §3), registered as records, with their
certified envelopes.

Each :class:`~jaxpriv.registry.Relation` is a claim "premise level ``x`` (and a condition) ⇒
conclusion level ≤ ``f(x, ε)``" about a mechanism, carrying its source paper and theorem number,
how the sweep samples for it and how the search holds its condition, and — where the exact
envelope is known — its certificate with the link to the proof in ``docs/certified.md``:

* R1–R6 on single-record notions (LDP, MBP, ABP, PAC);
* R7–R13 on database-level notions (DP, BDP, SP, BSP, MP; :mod:`jaxpriv.core.databases`). The SP and
  BSP levels are sups over all beliefs, computed exactly (closed form), so the converse relations
  R8, R10, R11 — whose *premise* is such a sup — are checked exactly too;
* R14 and R15, claims about an estimator rather than a mechanism, are in
  :mod:`jaxpriv.catalog.statistical`.

:meth:`Relation.check` evaluates a mechanism **in float64** and reports the premise level, the
condition parameter, the conclusion level, the claimed bound, the slack ``f/conclusion`` and
whether the bound is violated. A violation requires ``conclusion > bound·(1 + RTOL) + ATOL``, so
float rounding never turns a bound that holds into a reported violation.

Examples:
  >>> from jaxpriv import families
  >>> from jaxpriv import registry
  >>> result = registry.get("R2").check(families.randomized_response(1.0))
  >>> bool(result.violated), round(float(result.slack), 4)
  (False, 1.2402)
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from jaxpriv.catalog import notions as catalog  # noqa: F401  (the built-in notions the relations use)
from jaxpriv.core import abp_envelope
from jaxpriv.registry import (ATOL, NOTIONS, PAPERS, REGISTRY, RTOL, CheckResult, Relation,
                              Sampling, SearchHints, Source, StatisticalRelation, check,
                              evaluate, get, register, slack)

__all__ = ["DATABASE_NOTIONS", "UNIFORM_TOL"]  # and the records R1–R13, by their ids

UNIFORM_TOL = 1e-9
"""A prior counts as uniform when ``ε_unif(π) ≤ UNIFORM_TOL`` (exact 1/n is not representable)."""

DATABASE_NOTIONS = frozenset(key for key, n in NOTIONS.items() if n.needs_records)
"""The built-in notions that need the mechanism's records layout (its secrets are databases)."""

PAC_OPTIONS = {"mu": 0.0, "alpha": 1.0, "d_true": 0}
"""R6 is swept and searched with output values in {0, 2}/{0, 10}: fail iff ``|v| > 1``."""


# --------------------------------------------------------------------------------------------
# certified envelopes (proofs in docs/certified.md)
# --------------------------------------------------------------------------------------------


def _close_prior(certificate):
    """A certificate over priors ε-close to uniform, which a uniform prior makes ``ε = 0``."""
    def at_prior(x, eps, *, n, r=None, prior="close"):
        if prior not in ("close", "uniform"):
            return None
        return certificate(x, jnp.zeros_like(eps) if prior == "uniform" else eps, n=n)
    at_prior.__doc__ = certificate.__doc__
    return at_prior


def _ldp_to_mbp(x, eps, *, n, r=None):
    """R1/R3: ``sup MBP`` at LDP ≤ x, ``ε_unif(π) ≤ ε``: ``log(e^x − (e^x − 1)/(1 + (n−1)e^ε))``
    (one secret with the least prior mass, its column entry ``e^x`` times smaller than the rest)."""
    return x + jnp.log1p(jnp.expm1(-x) / (1.0 + (n - 1) * jnp.exp(eps))), None


def _mbp_to_ldp(x, eps, *, n, r=None):
    """R2/R4: ``sup LDP`` at MBP ≤ x, ``ε_unif(π) ≤ ε``:
    ``x + log(min(e^x, 1 + (n−1)e^ε(1 − e^{−x})))``."""
    return x + jnp.log(jnp.minimum(jnp.exp(x), 1.0 - (n - 1) * jnp.exp(eps) * jnp.expm1(-x))), \
        None


def _uniform_prior(certificate):
    """The certificate at ``ε = 0`` (R1, R2: the prior is uniform)."""
    def at_uniform(x, eps, *, n, r=None):
        return certificate(x, jnp.zeros_like(x), n=n)
    return at_uniform


def _abp_of_mbp(x, eps, *, n, r=None, prior="free", law="record"):
    """R5: ``sup ABP`` at MBP ≤ ξ, ``ε_bel(b, π) ≤ ε``, for the record and output laws, the prior
    free or uniform (:mod:`jaxpriv.core.abp_envelope`): exact, except a certified bracket for two
    secrets with the prior free and ``ε > 0``."""
    if prior not in abp_envelope.PRIORS or not isinstance(law, str) or law not in \
            abp_envelope.LAWS or (prior == "uniform" and n > abp_envelope.MAX_UNIFORM_N):
        return None
    bracket = abp_envelope.envelope(np.asarray(x), np.asarray(eps), n=n, law=law, prior=prior)
    return bracket.attained, None, bracket.upper


def _pac_ratio(x, eps, *, n, r=None):
    """R6: ``sup γ/β(d_true) = e^{2ξ}`` at MBP ≤ ξ (free prior), so the least slack is
    ``(1+4ξ)/e^{2ξ}``; the envelope is a ratio, not a conclusion level."""
    return jnp.full_like(x, jnp.nan), (1.0 + 4.0 * x) / jnp.exp(2.0 * x)


def _database(sup):
    """R7–R13 (paper 004): the supremum of the conclusion over every mechanism on ``k^r``
    databases (any ``k ≥ 2``, ``m ≥ 2``) and every prior the relation allows; needs ``r``."""
    def certificate(x, eps, *, n, r=None):
        if not r:
            return None
        return sup(x, r), None
    return certificate


def _sp_of_dp(x, r):
    """R7, R9: ``(B)SP = tanh(Λ/4)`` with ``Λ ≤ 2·(B)DP`` (each ratio ``r(u)`` lies within
    ``e^{±(B)DP}``), attained for ``r ≥ 2``; for ``r = 1`` the reset database is a neighbour of
    every other, ``Λ ≤ (B)DP``: ``tanh(x/4)``."""
    return jnp.tanh(x / (2.0 if r >= 2 else 4.0))


def _dp_of_sp(x, r):
    """R8, R10, R11: ``(B)DP ≤ Λ = 4·atanh((B)SP)`` (a neighbour ratio is a quotient of two
    ``r(u)``), attained by randomized response on one record."""
    return jnp.where(x < 1.0, 4.0 * jnp.arctanh(jnp.minimum(x, 1.0 - 1e-16)), jnp.inf)


def _unbounded(x, r):
    """R12: ``+∞`` — a prior with zeros can make BDP 0 while MP over 𝔻_* sees every database
    (``examples/r12_counterexample.json``); with full-support priors it would be ``x``."""
    return jnp.full_like(x, jnp.inf)


def _identity(x, r):
    """R13: ``x`` — MP over 𝔻_* is ``max(DP, BDP over proper known sets) ≥ BDP``; equality for
    independent records."""
    return x


# --------------------------------------------------------------------------------------------
# the relations
# --------------------------------------------------------------------------------------------

UNIFORM = Sampling(prior="uniform")
CLOSE = Sampling(prior="close", param_max=3.0, param_bins=6)
CERTIFIED = "docs/certified.md#"


def _r5_bound(x, eps):
    """003 Thm 5.4 / 002 Thm IV.5–IV.6: ``sqrt(½(ξ+ε)(e^{ξ+ε} − 1))``."""
    s = x + eps
    return jnp.sqrt(0.5 * s * jnp.expm1(s))


R1 = register(Relation(
    id="R1", statement="ξ-LDP ⇒ ξ-MBP under a uniform prior",
    sources=(Source("003", "Lemma 5.1"), Source("002", "Lemma IV.1")),
    premise="ldp", conclusion="mbp", condition="π uniform",
    parameter="eps_unif", parameter_limit=UNIFORM_TOL,
    bound=lambda x, eps: x, sampling=UNIFORM, search=SearchHints(prior="uniform"),
    certificate=_uniform_prior(_ldp_to_mbp), proof=CERTIFIED + "r1"))
R2 = register(Relation(
    id="R2", statement="ξ-MBP ⇒ 2ξ-LDP under a uniform prior",
    sources=(Source("003", "Lemma 5.2"), Source("002", "Lemma IV.2")),
    premise="mbp", conclusion="ldp", condition="π uniform",
    parameter="eps_unif", parameter_limit=UNIFORM_TOL,
    bound=lambda x, eps: 2.0 * x, sampling=UNIFORM, search=SearchHints(prior="uniform"),
    certificate=_uniform_prior(_mbp_to_ldp), proof=CERTIFIED + "r2"))
R3 = register(Relation(
    id="R3", statement="ξ-LDP ⇒ (ξ+ε)-MBP when π is ε-close to uniform",
    sources=(Source("002", "Thm IV.4"), Source("002", "Lemma A.5")),
    premise="ldp", conclusion="mbp", condition="ε_unif(π) ≤ ε",
    parameter="eps_unif", bound=lambda x, eps: x + eps, sampling=CLOSE,
    search=SearchHints(prior="close", gridded_parameter=True),
    certificate=_close_prior(_ldp_to_mbp), proof=CERTIFIED + "r1"))
R4 = register(Relation(
    id="R4", statement="ξ-MBP ⇒ (2ξ+ε)-LDP when π is ε-close to uniform",
    sources=(Source("002", "Thm IV.4"), Source("002", "Lemma A.6")),
    premise="mbp", conclusion="ldp", condition="ε_unif(π) ≤ ε",
    parameter="eps_unif", bound=lambda x, eps: 2.0 * x + eps, sampling=CLOSE,
    search=SearchHints(prior="close", gridded_parameter=True),
    certificate=_close_prior(_mbp_to_ldp), proof=CERTIFIED + "r2"))
R5 = register(Relation(
    id="R5", statement="ξ-MBP ⇒ ABP ≤ sqrt(½(ξ+ε)(e^{ξ+ε}−1)) when ε_bel(b,π) ≤ ε",
    sources=(Source("003", "Thm 5.4"), Source("003", "Thm B.1"), Source("002", "Thm IV.5"),
             Source("002", "Thm IV.6")),
    premise="mbp", conclusion="abp", condition="ε_bel(b, π) ≤ ε",
    parameter="eps_bel", bound=_r5_bound,
    sampling=Sampling(belief_eps_max=1.0, param_max=2.0, param_bins=4),
    search=SearchHints(belief="close", gridded_parameter=True),
    certificate=_abp_of_mbp, proof=CERTIFIED + "r5"))
R6 = register(Relation(
    id="R6", statement="(ξ,β,α)-MBP ⇒ α-PAC-robust with γ = (1+4ξ)β, for 0 ≤ ξ ≤ 1",
    sources=(Source("002", "Thm IV.7"), Source("002", "Thm A.9")),
    premise="mbp", conclusion="pac_gamma", condition="0 ≤ ξ ≤ 1; β ≥ β(d_true)",
    parameter="pac_beta", premise_limit=1.0,
    bound=lambda x, beta: (1.0 + 4.0 * x) * beta, scales_with_parameter=True,
    options=PAC_OPTIONS, ratio_label="γ / β(d_true)",
    sampling=Sampling(values=True, x_max=1.0, param_max=1.0, param_bins=4),
    search=SearchHints(gates=True), certificate=_pac_ratio, proof=CERTIFIED + "r6"))


def _converse_bound(s, eps):
    """004 Thm 1 and Thm 2, second parts: ``½ − 1/(e^ε + 1)``-(B)SP ⇒ ε-(B)DP, read as the
    least such ε at (B)SP level ``s``: ``ε = log((1+2s)/(1−2s)) = 2·atanh(2s)``, ``+∞`` for
    ``s ≥ ½`` (no ε makes the premise that weak)."""
    below = s < 0.5
    safe = jnp.where(below, s, 0.0)
    return jnp.where(below, jnp.log1p(2.0 * safe) - jnp.log1p(-2.0 * safe), jnp.inf)


# DP and SP do not depend on the prior (searched at a uniform one); BDP, BSP and MP are searched
# over every prior. SP and BSP are exact sups over beliefs: no belief to draw. The converse
# relations' premise (B)SP lives in [0, 1] and their bound is infinite from ½ on.
PRIOR_FREE = SearchHints(prior="free")
PRIOR_FIXED = SearchHints(prior="uniform")
CONVERSE = SearchHints(prior="uniform", grid_limit=0.45)

R7 = register(Relation(
    id="R7", statement="ε-BDP ⇒ (e^{2ε}−1)-BSP",
    sources=(Source("004", "Thm 1, first part"),),
    premise="bdp", conclusion="bsp", condition="—",
    bound=lambda x, eps: jnp.expm1(2.0 * x), search=PRIOR_FREE,
    certificate=_database(_sp_of_dp), proof=CERTIFIED + "r9"))
R8 = register(Relation(
    id="R8", statement="(½ − 1/(e^ε+1))-BSP ⇒ ε-BDP",
    sources=(Source("004", "Thm 1, second part"),),
    premise="bsp", conclusion="bdp",
    condition="every game i exists (π(⊥, x_S) > 0 wherever π(x_i, x_S) > 0; implicit in 004's "
              "proof, true for every full-support prior)",
    requires="bsp_games", bound=_converse_bound, sampling=Sampling(x_max=0.5),
    search=SearchHints(prior="free", grid_limit=0.45),
    certificate=_database(_dp_of_sp), proof=CERTIFIED + "r10"))
R9 = register(Relation(
    id="R9", statement="ε-DP ⇒ (e^{2ε}−1)-SP",
    sources=(Source("004", "Thm 2, first part"), Source("004", "after Kasiviswanathan–Smith")),
    premise="dp", conclusion="sp", condition="—",
    bound=lambda x, eps: jnp.expm1(2.0 * x), search=PRIOR_FIXED,
    certificate=_database(_sp_of_dp), proof=CERTIFIED + "r9"))
R10 = register(Relation(
    id="R10", statement="(½ − 1/(e^ε+1))-SP ⇒ ε-DP",
    sources=(Source("004", "Thm 2, second part"),),
    premise="sp", conclusion="dp", condition="—", bound=_converse_bound,
    sampling=Sampling(prior="uniform", x_max=0.5), search=CONVERSE,
    certificate=_database(_dp_of_sp), proof=CERTIFIED + "r10"))
R11 = register(Relation(
    id="R11", statement="(ε/6)-SP ⇒ ε-DP for ε ≤ 1.35",
    sources=(Source("004", "Kasiviswanathan–Smith, as quoted after Thm 2"),),
    premise="sp", conclusion="dp", condition="ε = 6·SP ≤ 1.35 (SP ≤ 0.225)",
    premise_limit=1.35 / 6.0, bound=lambda s, eps: 6.0 * s,
    sampling=Sampling(prior="uniform", x_max=0.225), search=CONVERSE,
    certificate=_database(_dp_of_sp), proof=CERTIFIED + "r10"))
R12 = register(Relation(
    id="R12", statement="ε-BDP ⇒ ε-MP (family 𝔻_*)",
    sources=(Source("004", "Thm 3"), Source("004", "Corollary 1, Lemma 1")),
    premise="bdp", conclusion="mp", condition="family 𝔻_* (two-point priors, every K)",
    bound=lambda x, eps: x, search=PRIOR_FREE,
    # BDP only constrains databases the prior allows, MP over 𝔻_* sees them all: priors with
    # zeros are where R12 can fail
    sampling=Sampling(prior_zero_fraction=0.3),
    certificate=_database(_unbounded), proof=CERTIFIED + "r12"))
R13 = register(Relation(
    id="R13", statement="ε-MP ⇒ ε-BDP (downward-scalable family)",
    sources=(Source("004", "Thm 4 (§III-B converse)"), Source("004", "after Li et al. Thm 3.6")),
    premise="mp", conclusion="bdp",
    condition="downward-scalable family (𝔻_* holds every weight p ∈ (0, 1))",
    bound=lambda x, eps: x, search=PRIOR_FREE,
    certificate=_database(_identity), proof=CERTIFIED + "r13"))
