"""The built-in notions (SPEC §2), registered as :class:`jaxpriv.registry.Notion` records.

Each record carries its float64 reference (:mod:`jaxpriv.core.notions`, :mod:`jaxpriv.core.databases`),
its unit and parameters, and what the engines use instead where it pays off: the fused float32
screen (:mod:`jaxpriv.kernels.fused`), a smooth surrogate for the search (log-sum-exp maxima, returned
as the **log** of the smoothed level, as the search works in logs), and a closed-form premise
retraction (:mod:`jaxpriv.core.retractions`). Everything ``jaxpriv eval`` prints is one of these.

Examples:
  >>> from jaxpriv import families, level
  >>> from jaxpriv.catalog import notions as catalog
  >>> round(float(level("mi", families.randomized_response(1.0))), 6)
  0.110944
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax.scipy.special import logsumexp

from jaxpriv.core import composition, databases, notions, pair_notions, retractions
from jaxpriv.core.divergences import safe_log
from jaxpriv.kernels import composed, pair_levels as kernel_levels
from jaxpriv.registry import REQUIRED, Notion, Source, register

# -- surrogates (log of a smoothed level; one mechanism) --------------------------------------


def _ldp_surrogate(mech, temperature):
    spread = mech.log_K[:, None, :] - mech.log_K[None, :, :]
    return safe_log(retractions.soft_max(spread, temperature))


def _mbp_surrogate(mech, temperature):
    log_p = notions.log_marginal_kernel(mech.log_K, mech.log_prior)
    return safe_log(retractions.soft_max(jnp.abs(mech.log_K - log_p[None, :]), temperature))


def _abp_surrogate(mech, temperature, law="record", q=None):
    if q is not None:
        laws = jnp.atleast_2d(jnp.asarray(q, mech.log_K.dtype))
    elif law == "record":
        laws = jnp.exp(mech.log_K)
    else:
        laws = jnp.eye(mech.m, dtype=mech.log_K.dtype)
    abp = notions.abp_kernel(mech.log_K, mech.log_prior, mech.log_belief, laws)
    return retractions.soft_max(safe_log(abp), temperature)


def _log_failures(mech, mu, alpha, gates=None):
    """``log β(d)`` per secret; with soft ``gates`` (logits per output) the failure indicator
    of output ``w`` is ``sigmoid(gates[w])``."""
    if gates is None:
        fail = jnp.abs(mech.values - mu) > alpha
        log_fail = jnp.where(fail, 0.0, -jnp.inf)
    else:
        log_fail = jax.nn.log_sigmoid(gates)
    return logsumexp(mech.log_K + log_fail[None, :], axis=-1)


def _pac_gamma_surrogate(mech, temperature, mu, alpha, d_true, gates=None):
    log_beta = _log_failures(mech, mu, alpha, gates)
    others = jnp.where(jnp.arange(mech.n) == d_true, -jnp.inf, log_beta)
    return retractions.soft_max(others, temperature)


def _pac_beta_surrogate(mech, temperature, mu, alpha, d_true, gates=None):
    return _log_failures(mech, mu, alpha, gates)[d_true]


# -- levels with parameters and details -------------------------------------------------------


def _abp_level(mech, law="record", q=None):
    return notions.abp(mech, law if q is None else q).level


def _abp_details(mech, law="record", q=None):
    record = notions.abp(mech, "record")
    output = notions.abp(mech, "output")
    details = {"abp_mean": record.mean, "abp_record": record.vector, "abp_output": output.level,
               "abp_output_vector": output.vector}
    if q is not None:
        details["abp_q"] = notions.abp(mech, q).level
    return details


def _pac_details(mech, mu=None, alpha=None, d_true=None):
    if mech.values is None or mu is None or alpha is None:
        return {}
    return {"pac_beta_vector": notions.failure_probabilities(mech, mu, alpha)}


def _mp_details(mech, family="004"):
    return {"mp_databases": databases.mp(mech, "databases")}


PAC_PARAMS = {"mu": REQUIRED, "alpha": REQUIRED, "d_true": REQUIRED}
SEED = {key: Source("SPEC", section) for key, section in
        (("2.1", "§2.1"), ("2.2", "§2.2 (003 Def. 4.2)"), ("2.3", "§2.3 (003 Def. 4.1)"),
         ("2.4", "§2.4 (002 Thm IV.4; 003 Thm 5.4)"), ("2.5", "§2.5"),
         ("2.6", "§2.6 (004)"), ("2.7", "§2.7 (002 Defs IV.4–IV.6)"))}

BUILTIN = (
    Notion("ldp", lambda mech: notions.ldp(mech), doc="LDP level ε_LDP (SPEC §2.1)",
           source=SEED["2.1"], post_processing=True, screen="ldp", surrogate=_ldp_surrogate,
           retract=retractions.ldp_keep, label="LDP level ε_LDP", unbounded=True),
    Notion("mbp", lambda mech: notions.mbp(mech), doc="MBP level ξ (SPEC §2.2)",
           source=SEED["2.2"], needs_prior=True, post_processing=True, screen="mbp",
           surrogate=_mbp_surrogate, retract=retractions.mbp_keep, label="MBP level ξ"),
    Notion("abp", _abp_level, doc="ABP level ε_pa, max over the observation law (SPEC §2.3)",
           source=SEED["2.3"], unit="√nats", params={"law": "record", "q": None},
           needs_prior=True, screen="abp", screen_requires={"law": "record", "q": None},
           surrogate=_abp_surrogate, label="ABP (record law, max over d*)",
           details=_abp_details, maximum=math.sqrt(math.log(2.0))),
    Notion("eps_unif", lambda mech: notions.eps_unif(mech),
           doc="prior distance from uniform ε_unif (SPEC §2.4)", source=SEED["2.4"],
           needs_prior=True, screen="eps_unif", label="prior vs uniform ε_unif",
           held_by="prior"),
    Notion("eps_bel", lambda mech: notions.eps_bel(mech),
           doc="belief distance from prior ε_bel (SPEC §2.4)", source=SEED["2.4"],
           needs_prior=True, screen="eps_bel", label="belief vs prior ε_bel",
           held_by="belief"),
    Notion("mi", lambda mech: notions.mutual_information(mech),
           doc="mutual information I(D;W) under the prior (SPEC §2.5)", source=SEED["2.5"],
           needs_prior=True, post_processing=True, label="mutual information I(D;W)"),
    Notion("pac_beta", notions.pac_beta, doc="failure probability β(d_true) (SPEC §2.7)",
           source=SEED["2.7"], unit="probability", params=PAC_PARAMS,
           surrogate=_pac_beta_surrogate, label="failure probability β(d_true)",
           details=_pac_details, maximum=1.0),
    Notion("pac_gamma", notions.pac_gamma,
           doc="robust failure probability max_{d'≠d_true} β(d') (SPEC §2.7)",
           source=SEED["2.7"], unit="probability", params=PAC_PARAMS,
           surrogate=_pac_gamma_surrogate, label="robust failure γ = max_{d'≠d_true} β(d')", maximum=1.0),
    Notion("dp", lambda mech: databases.dp(mech),
           doc="DP level over neighbouring databases (SPEC §2.1, §2.6)", source=SEED["2.6"],
           needs_records=True, post_processing=True, retract=retractions.database_retraction("dp"),
           screen="dp", label="DP level (neighbouring databases)", unbounded=True),
    Notion("bdp", lambda mech: databases.bdp(mech),
           doc="BDP level, Yang et al. (SPEC §2.6, 004 eq. 19)", source=SEED["2.6"],
           needs_records=True, needs_prior=True, post_processing=True, screen="bdp",
           retract=retractions.database_retraction("bdp"), label="BDP level (Yang et al.)",
           unbounded=True),
    Notion("sp", lambda mech: databases.sp(mech),
           doc="SP level, the sup over every belief, exact (SPEC §2.6, 004 Def. 1)",
           source=SEED["2.6"], unit="probability", needs_records=True, screen="sp",
           retract=retractions.database_retraction("sp"), label="SP level (sup over beliefs)", maximum=1.0),
    Notion("sp_belief", lambda mech: databases.sp_at(mech),
           doc="SP level at the mechanism's belief β, a lower bound on the SP level "
               "(SPEC §2.6, 004 Def. 1)", source=SEED["2.6"], unit="probability",
           needs_records=True, label="SP at the file's belief", maximum=1.0),
    Notion("bsp", lambda mech: databases.bsp(mech),
           doc="BSP level, the sup over every belief, exact (SPEC §2.6, 004 Def. 2)",
           source=SEED["2.6"], unit="probability", needs_records=True, needs_prior=True,
           screen="bsp", retract=retractions.database_retraction("bsp"),
           label="BSP level (sup over beliefs)", maximum=1.0),
    Notion("bsp_belief", lambda mech: databases.bsp_at(mech),
           doc="BSP level at the mechanism's belief b, a lower bound on the BSP level "
               "(SPEC §2.6, 004 Def. 2)", source=SEED["2.6"], unit="probability",
           needs_records=True, needs_prior=True, label="BSP at the file's belief", maximum=1.0),
    Notion("mp", lambda mech, family="004": databases.mp(mech, family),
           doc="MP level over the family 𝔻_*, sup over p (SPEC §2.6, 004 Def. 3)",
           source=SEED["2.6"], params={"family": "004"}, needs_records=True,
           post_processing=True, retract=retractions.database_retraction("mp"),
           screen="mp", screen_requires={"family": "004"},
           label="MP level (004 family 𝔻_*)", details=_mp_details, unbounded=True),
    Notion("bsp_games", databases.bsp_games,
           doc="1 if BSP's game i exists wherever BDP compares (the prior allows every ⊥-reset "
               "(⊥, x_S) of a partial database it allows), else 0", source=SEED["2.6"],
           unit="indicator", needs_records=True, needs_prior=True, show=False,
           screen="bsp_games", maximum=1.0),
)

for _notion in BUILTIN:
    register(_notion, replace=True)


# -- SPEC §5: the wider differential-privacy literature ---------------------------------------

SPEC5 = Source("SPEC", "§5")
PAIRS = {"neighbours": None}
LITERATURE = (
    Notion("tv", pair_notions.tv, doc="total variation ½Σ|P−Q|, max over ordered pairs of rows "
           "(= delta at ε = 0)", source=SPEC5, unit="probability", params=PAIRS,
           post_processing=True, label="total variation (max over pairs)", maximum=1.0,
           pair_rows="hull"),
    Notion("kl", pair_notions.kl, doc="KL divergence Σ P log(P/Q), max over ordered pairs",
           source=SPEC5, params=PAIRS, post_processing=True, label="KL divergence (max over pairs)",
           unbounded=True, pair_rows="hull"),
    Notion("chi2", pair_notions.chi2, doc="χ² divergence Σ (P−Q)²/Q, max over ordered pairs",
           source=SPEC5, unit="", params=PAIRS, post_processing=True,
           label="χ² divergence (max over pairs)", unbounded=True, pair_rows="hull"),
    Notion("renyi", pair_notions.renyi, doc="Rényi divergence D_α of order α = 'order' > 1 "
           "(default 2; inf: the LDP level), max over ordered pairs (Mironov 2017, Def. 3)",
           source=SPEC5, params={"order": 2.0, **PAIRS}, post_processing=True,
           label="Rényi divergence D_2 (max over pairs)", unbounded=True, pair_rows="hull"),
    Notion("zcdp", kernel_levels.zcdp, doc="zCDP level ρ = sup_{α>1} D_α/α, max over ordered pairs "
           "(Bun, Steinke 2016, Def. 1.1)", source=SPEC5, params=PAIRS, post_processing=True,
           label="zCDP level ρ", unbounded=True, pair_rows="hull"),
    Notion("delta", pair_notions.delta, doc="privacy profile δ(ε) = Σ max(0, P − e^ε Q) at ε = "
           "'epsilon' (default 1), max over ordered pairs", source=SPEC5, unit="probability",
           params={"epsilon": 1.0, **PAIRS}, post_processing=True,
           label="privacy profile δ(ε = 1)", maximum=1.0, rare_outputs=True,
           pair_rows="hull"),
    Notion("eps_at_delta", kernel_levels.eps_at_delta, doc="least ε ≥ 0 with δ(ε) ≤ 'delta' "
           "(default 1e-5), max over ordered pairs", source=SPEC5,
           params={"delta": 1e-5, **PAIRS}, post_processing=True, label="ε at δ = 1e-5",
           rare_outputs=True, unbounded=True, pair_rows="hull"),
    Notion("gdp", kernel_levels.gdp, doc="Gaussian-DP level μ: least μ with T(P,Q) ≥ G_μ, max "
           "over ordered pairs (Dong, Roth, Su 2022, Def. 2.6)", source=SPEC5, unit="",
           params=PAIRS, post_processing=True, label="Gaussian-DP level μ",
           unbounded=True, pair_rows="hull"),
    Notion("max_leakage", lambda mech: notions.max_leakage(mech),
           doc="maximal leakage log Σ_w max_{d: π(d)>0} K[d,w] (Issa, Wagner, Kamath 2020, "
               "Thm 1)", source=SPEC5, needs_prior=True, post_processing=True,
           label="maximal leakage"),
    Notion("pml", lambda mech: notions.pml(mech),
           doc="pointwise maximal leakage, max over outputs: log max_{d: π(d)>0} K[d,w]/p(w) "
               "(Saeidian, Cervia, Oechtering, Skoglund 2023)", source=SPEC5, needs_prior=True,
           post_processing=True, label="pointwise maximal leakage (max over outputs)"),
)

for _notion in LITERATURE:
    register(_notion, replace=True)


# -- SPEC §6: composition ------------------------------------------------------------------------

SPEC6 = Source("SPEC", "§6")
COMPOSITION = (
    Notion("delta_composed", composition.delta_composed,
           doc="privacy profile δ_k(ε) of 'k' uses (default 10) at ε = 'epsilon' (default 1): "
               "Σ over output sequences of max(0, P^⊗k − e^ε Q^⊗k), exact over count vectors, "
               "max over ordered pairs", source=SPEC6, unit="probability",
           params={"k": 10, "epsilon": 1.0, **PAIRS}, post_processing=True, show=False,
           label="privacy profile δ_k(ε) of k uses", maximum=1.0, rare_outputs=True,
           pair_rows="distinct"),
    Notion("eps_composed", composed.eps_composed,
           doc="least ε ≥ 0 with δ_k(ε) ≤ 'delta' (default 1e-5) for 'k' uses (default 10), "
               "exact, max over ordered pairs", source=SPEC6,
           params={"k": 10, "delta": 1e-5, **PAIRS}, post_processing=True, show=False,
           label="ε of k uses at δ", rare_outputs=True, unbounded=True,
           pair_rows="distinct"),
)

for _notion in COMPOSITION:
    register(_notion, replace=True)
