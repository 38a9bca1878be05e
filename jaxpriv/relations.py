"""The registry of published relations between privacy notions (SPEC §3), and their checks.

A :class:`Relation` is a typed record of a claim "premise level ``x`` (and a condition) ⇒
conclusion level ≤ ``f(x, ε)``" about a mechanism, carrying its source paper and theorem number.
The registry holds every relation of SPEC §3:

* R1–R6 on single-record notions (LDP, MBP, ABP, PAC);
* R7–R13 on database-level notions (DP, BDP, SP, BSP, MP; :mod:`jaxpriv.databases`). The SP and
  BSP levels are sups over all beliefs, computed exactly (closed form), so the converse relations
  R8, R10, R11 — whose *premise* is such a sup — are checked exactly too;
* R14 and R15, statistical claims about an estimator rather than a mechanism:
  :class:`StatisticalRelation` entries checked exactly by :mod:`jaxpriv.statistical`.

:meth:`Relation.check` evaluates a mechanism **in float64** and reports the premise level, the
condition parameter, the conclusion level, the claimed bound, the slack ``f/conclusion`` and
whether the bound is violated. A violation requires ``conclusion > bound·(1 + RTOL) + ATOL``, so
float rounding never turns a bound that holds into a reported violation.

Examples:
  >>> from jaxpriv import families, relations
  >>> result = relations.get("R2").check(families.randomized_response(1.0))
  >>> bool(result.violated), round(float(result.slack), 4)
  (False, 1.2402)
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpriv import databases, notions
from jaxpriv.errors import InputError
from jaxpriv.mechanisms import Mechanism

RTOL = 1e-9
"""Relative tolerance a conclusion must exceed its bound by to count as a violation."""
ATOL = 1e-12
"""Absolute tolerance, for bounds at or near 0."""
UNIFORM_TOL = 1e-9
"""A prior counts as uniform when ``ε_unif(π) ≤ UNIFORM_TOL`` (exact 1/n is not representable)."""

PAPERS = {
    "002": ("002_a929441205351d74.txt", "Zhang, Chen — Bridging Privacy and Robustness for "
            "Trustworthy Machine Learning"),
    "003": ("003_ed377a0eab1a130b.txt", "Zhang, Fei, Chen, Jin — Deciphering the Interplay "
            "between LDP, ABP and MBP"),
    "004": ("004_a00d4f65f210ea49.txt", "Zhao — Relations Among Different Privacy Notions"),
}


class Source(NamedTuple):
    paper: str  # key of PAPERS
    theorem: str

    def __str__(self) -> str:
        return f"{self.paper} {self.theorem}"


# A notion evaluator maps (float64 mechanism, options) to one level per mechanism of the batch.
NotionFn = Callable[[Mechanism, dict[str, Any]], jax.Array]


def _option(options: dict[str, Any], key: str, relation_hint: str):
    if options.get(key) is None:
        raise InputError(f"{relation_hint} need '{key}' (in the witness file or as an option)")
    return options[key]


def _pac(fn):
    def evaluate(mech, options):
        hint = "the PAC notions"
        return fn(mech, _option(options, "mu", hint), _option(options, "alpha", hint),
                  _option(options, "d_true", hint))
    return evaluate


def _abp_level(mech, options):
    law = options.get("q")
    if law is None:
        law = options.get("law") or "record"
    return notions.abp(mech, law).level


NOTIONS: dict[str, tuple[str, NotionFn]] = {
    "ldp": ("LDP level ε_LDP (SPEC §2.1)", lambda mech, o: notions.ldp(mech)),
    "mbp": ("MBP level ξ (SPEC §2.2)", lambda mech, o: notions.mbp(mech)),
    "abp": ("ABP level ε_pa, max over the observation law (SPEC §2.3)", _abp_level),
    "eps_unif": ("prior distance from uniform ε_unif (SPEC §2.4)",
                 lambda mech, o: notions.eps_unif(mech)),
    "eps_bel": ("belief distance from prior ε_bel (SPEC §2.4)",
                lambda mech, o: notions.eps_bel(mech)),
    "pac_beta": ("failure probability β(d_true) (SPEC §2.7)", _pac(notions.pac_beta)),
    "pac_gamma": ("robust failure probability max_{d'≠d_true} β(d') (SPEC §2.7)",
                  _pac(notions.pac_gamma)),
    "dp": ("DP level over neighbouring databases (SPEC §2.1, §2.6)",
           lambda mech, o: databases.dp(mech)),
    "bdp": ("BDP level, Yang et al. (SPEC §2.6, 004 eq. 19)",
            lambda mech, o: databases.bdp(mech)),
    "sp": ("SP level, the sup over every belief, exact (SPEC §2.6, 004 Def. 1)",
           lambda mech, o: databases.sp(mech)),
    "bsp": ("BSP level, the sup over every belief, exact (SPEC §2.6, 004 Def. 2)",
            lambda mech, o: databases.bsp(mech)),
    "mp": ("MP level over the family 𝔻_*, sup over p (SPEC §2.6, 004 Def. 3)",
           lambda mech, o: databases.mp(mech)),
    "sp_belief": ("SP level at the mechanism's belief β, a lower bound on the SP level "
                  "(SPEC §2.6, 004 Def. 1)", lambda mech, o: databases.sp_at(mech)),
    "bsp_belief": ("BSP level at the mechanism's belief b, a lower bound on the BSP level "
                   "(SPEC §2.6, 004 Def. 2)", lambda mech, o: databases.bsp_at(mech)),
    "bsp_games": ("1 if BSP's game i exists wherever BDP compares (the prior allows every "
                  "⊥-reset (⊥, x_S) of a partial database it allows), else 0",
                  lambda mech, o: databases.bsp_games_defined(mech).astype(mech.log_K.dtype)),
}
DATABASE_NOTIONS = frozenset({"dp", "bdp", "sp", "bsp", "mp", "sp_belief", "bsp_belief",
                              "bsp_games"})
"""Notions that need the mechanism's records layout (its secrets are databases)."""


class CheckResult(NamedTuple):
    """Outcome of checking one relation on a (batch of) mechanism(s); float64 numpy arrays.

    Attributes:
      relation: the relation id.
      premise: premise level ``x``.
      parameter: the measured condition parameter (e.g. ``ε_unif(π)``), 0 if none.
      parameter_used: the parameter the bound is evaluated at (the measured one unless given).
      condition_holds: the relation's condition holds, so the bound is claimed.
      conclusion: conclusion level.
      bound: claimed bound ``f(x, parameter_used)``.
      slack: ``bound / conclusion`` (``+∞`` when the conclusion is 0 or the bound infinite).
      violated: condition holds and ``conclusion > bound·(1+RTOL) + ATOL``.
    """

    relation: str
    premise: np.ndarray
    parameter: np.ndarray
    parameter_used: np.ndarray
    condition_holds: np.ndarray
    conclusion: np.ndarray
    bound: np.ndarray
    slack: np.ndarray
    violated: np.ndarray


@dataclasses.dataclass(frozen=True)
class Claim:
    """What every registry entry carries.

    Attributes:
      id: ``"R1"`` … as in SPEC §3.
      statement: the claim in words.
      sources: papers and theorem numbers it is taken from.
      premise: what ``x`` is (a key of :data:`NOTIONS` for a :class:`Relation`).
      conclusion: what the bound caps (a key of :data:`NOTIONS` for a :class:`Relation`).
      condition: the condition in words.
    """

    id: str
    statement: str
    sources: tuple[Source, ...]
    premise: str
    conclusion: str
    condition: str


@dataclasses.dataclass(frozen=True)
class Relation(Claim):
    """A published claim ``premise ≤ x ∧ condition ⇒ conclusion ≤ bound(x, parameter)`` about a
    mechanism (the :class:`Claim` fields, then these).

    Attributes:
      parameter: key of :data:`NOTIONS` of the condition parameter (``ε``), or ``None``.
      parameter_limit: if set, the condition is ``parameter ≤ parameter_limit`` (e.g. a uniform
        prior); if ``None`` the parameter is free and the bound is evaluated at it.
      premise_limit: if set, the condition also requires ``x ≤ premise_limit``.
      requires: key of :data:`NOTIONS` of a 0/1 notion that must be 1 for the condition to hold
        (a condition with no parameter, e.g. R8's "every game is defined").
      bound: ``f(x, parameter)``, vectorized, float64-safe.
    """

    kind = "mechanism"

    bound: Callable[[jax.Array, jax.Array], jax.Array]
    parameter: str | None = None
    parameter_limit: float | None = None
    premise_limit: float | None = None
    requires: str | None = None

    @property
    def notions(self) -> frozenset[str]:
        """Every notion the relation's check evaluates."""
        return frozenset({self.premise, self.conclusion, self.parameter, self.requires} - {None})

    def check(self, mech: Mechanism, *, parameter=None, rtol: float = RTOL, atol: float = ATOL,
              **options: Any) -> CheckResult:
        """Evaluate the relation on ``mech`` in float64; see :func:`check`."""
        return check(self, mech, parameter=parameter, rtol=rtol, atol=atol, **options)


def slack(bound, conclusion):
    """``bound / conclusion`` with ``x/0 = +∞`` and ``∞/∞ = +∞`` (an infinite bound is vacuous)."""
    bound = jnp.asarray(bound)
    conclusion = jnp.asarray(conclusion)
    vacuous = (conclusion <= 0) | jnp.isinf(bound)
    ratio = bound / jnp.where(vacuous, 1.0, conclusion)
    return jnp.where(vacuous, jnp.inf, ratio)


def evaluate(relation: Relation, mech: Mechanism, *, parameter=None, rtol: float = RTOL,
             atol: float = ATOL, levels: dict[str, jax.Array] | None = None,
             **options: Any) -> CheckResult:
    """The check's arithmetic in the mechanism's own dtype, as JAX arrays (jit-able).

    The sweep runs this in float32 to find candidates; :func:`check` runs it in float64 to
    decide. ``levels`` may carry notion levels already computed for these options (the sweep's
    fused kernel); the others are computed here. Other arguments as in :func:`check`.
    """
    levels = levels or {}

    def level(notion):
        return levels[notion] if notion in levels else _evaluate(notion, mech, options)

    x = level(relation.premise)
    y = level(relation.conclusion)
    if relation.parameter is None:
        measured = jnp.zeros_like(x)
    else:
        measured = level(relation.parameter)
    used = measured if parameter is None else jnp.broadcast_to(
        jnp.asarray(parameter, x.dtype), measured.shape)
    holds = measured <= used
    if relation.parameter_limit is not None:
        holds &= measured <= relation.parameter_limit
    if relation.premise_limit is not None:
        holds &= x <= relation.premise_limit
    if relation.requires is not None:
        holds &= level(relation.requires) > 0
    bound = relation.bound(x, used)
    violated = holds & (y > bound * (1.0 + rtol) + atol)
    return CheckResult(relation.id, x, measured, used, holds, y, bound, slack(bound, y), violated)


def check(relation: Relation, mech: Mechanism, *, parameter=None, rtol: float = RTOL,
          atol: float = ATOL, **options: Any) -> CheckResult:
    """Check ``relation`` on ``mech`` (any batch shape), recomputing every level in float64.

    Args:
      relation: a registry entry.
      mech: the mechanism(s); cast to float64 here.
      parameter: the condition parameter the bound is claimed at (e.g. ``ε`` for R3–R5, ``β``
        for R6); default: the measured one, which gives the tightest claim.
      rtol, atol: violation tolerance.
      **options: what the notions need: ``law`` or ``q`` (ABP), ``mu``, ``alpha``, ``d_true`` (PAC).

    Returns:
      a :class:`CheckResult` of float64 numpy arrays.
    """
    with jax.enable_x64(True):
        result = evaluate(relation, mech.astype(jnp.float64), parameter=parameter, rtol=rtol,
                          atol=atol, **options)
        return CheckResult(relation.id, *(np.asarray(a) for a in result[1:]))


def _evaluate(notion: str, mech: Mechanism, options: dict[str, Any]) -> jax.Array:
    return NOTIONS[notion][1](mech, options)


# --------------------------------------------------------------------------------------------
# the registry
# --------------------------------------------------------------------------------------------

REGISTRY: dict[str, Any] = {}
"""Every registered relation by id: :class:`Relation` (``kind == "mechanism"``) or
:class:`StatisticalRelation` (``kind == "statistical"``)."""


def register(relation, *, replace: bool = False):
    """Add a :class:`Relation` or :class:`StatisticalRelation` to the registry
    (``replace=True`` to overwrite an id)."""
    if relation.id in REGISTRY and not replace:
        raise ValueError(f"relation {relation.id} is already registered")
    if relation.kind == "mechanism":
        for notion in relation.notions:
            if notion not in NOTIONS:
                raise ValueError(f"relation {relation.id} uses unknown notion {notion!r}")
    REGISTRY[relation.id] = relation
    return relation


def get(relation_id: str):
    """The registered relation with this id (case-insensitive), or an InputError naming the ids."""
    key = relation_id.strip().upper()
    if key not in REGISTRY:
        raise InputError(f"unknown relation {relation_id!r}; registered: {', '.join(REGISTRY)}")
    return REGISTRY[key]


def _r5_bound(x, eps):
    """003 Thm 5.4 / 002 Thm IV.5–IV.6: ``sqrt(½(ξ+ε)(e^{ξ+ε} − 1))``."""
    s = x + eps
    return jnp.sqrt(0.5 * s * jnp.expm1(s))


register(Relation(
    id="R1", statement="ξ-LDP ⇒ ξ-MBP under a uniform prior",
    sources=(Source("003", "Lemma 5.1"), Source("002", "Lemma IV.1")),
    premise="ldp", conclusion="mbp", condition="π uniform",
    parameter="eps_unif", parameter_limit=UNIFORM_TOL,
    bound=lambda x, eps: x))
register(Relation(
    id="R2", statement="ξ-MBP ⇒ 2ξ-LDP under a uniform prior",
    sources=(Source("003", "Lemma 5.2"), Source("002", "Lemma IV.2")),
    premise="mbp", conclusion="ldp", condition="π uniform",
    parameter="eps_unif", parameter_limit=UNIFORM_TOL,
    bound=lambda x, eps: 2.0 * x))
register(Relation(
    id="R3", statement="ξ-LDP ⇒ (ξ+ε)-MBP when π is ε-close to uniform",
    sources=(Source("002", "Thm IV.4"), Source("002", "Lemma A.5")),
    premise="ldp", conclusion="mbp", condition="ε_unif(π) ≤ ε",
    parameter="eps_unif", bound=lambda x, eps: x + eps))
register(Relation(
    id="R4", statement="ξ-MBP ⇒ (2ξ+ε)-LDP when π is ε-close to uniform",
    sources=(Source("002", "Thm IV.4"), Source("002", "Lemma A.6")),
    premise="mbp", conclusion="ldp", condition="ε_unif(π) ≤ ε",
    parameter="eps_unif", bound=lambda x, eps: 2.0 * x + eps))
register(Relation(
    id="R5", statement="ξ-MBP ⇒ ABP ≤ sqrt(½(ξ+ε)(e^{ξ+ε}−1)) when ε_bel(b,π) ≤ ε",
    sources=(Source("003", "Thm 5.4"), Source("003", "Thm B.1"), Source("002", "Thm IV.5"),
             Source("002", "Thm IV.6")),
    premise="mbp", conclusion="abp", condition="ε_bel(b, π) ≤ ε",
    parameter="eps_bel", bound=_r5_bound))
register(Relation(
    id="R6", statement="(ξ,β,α)-MBP ⇒ α-PAC-robust with γ = (1+4ξ)β, for 0 ≤ ξ ≤ 1",
    sources=(Source("002", "Thm IV.7"), Source("002", "Thm A.9")),
    premise="mbp", conclusion="pac_gamma", condition="0 ≤ ξ ≤ 1; β ≥ β(d_true)",
    parameter="pac_beta", premise_limit=1.0,
    bound=lambda x, beta: (1.0 + 4.0 * x) * beta))
def _converse_bound(s, eps):
    """004 Thm 1 and Thm 2, second parts: ``½ − 1/(e^ε + 1)``-(B)SP ⇒ ε-(B)DP, read as the
    least such ε at (B)SP level ``s``: ``ε = log((1+2s)/(1−2s)) = 2·atanh(2s)``, ``+∞`` for
    ``s ≥ ½`` (no ε makes the premise that weak)."""
    below = s < 0.5
    safe = jnp.where(below, s, 0.0)
    return jnp.where(below, jnp.log1p(2.0 * safe) - jnp.log1p(-2.0 * safe), jnp.inf)


register(Relation(
    id="R7", statement="ε-BDP ⇒ (e^{2ε}−1)-BSP",
    sources=(Source("004", "Thm 1, first part"),),
    premise="bdp", conclusion="bsp", condition="—",
    bound=lambda x, eps: jnp.expm1(2.0 * x)))
register(Relation(
    id="R8", statement="(½ − 1/(e^ε+1))-BSP ⇒ ε-BDP",
    sources=(Source("004", "Thm 1, second part"),),
    premise="bsp", conclusion="bdp",
    condition="every game i exists (π(⊥, x_S) > 0 wherever π(x_i, x_S) > 0; implicit in 004's "
              "proof, true for every full-support prior)",
    requires="bsp_games", bound=_converse_bound))
register(Relation(
    id="R9", statement="ε-DP ⇒ (e^{2ε}−1)-SP",
    sources=(Source("004", "Thm 2, first part"), Source("004", "after Kasiviswanathan–Smith")),
    premise="dp", conclusion="sp", condition="—",
    bound=lambda x, eps: jnp.expm1(2.0 * x)))
register(Relation(
    id="R10", statement="(½ − 1/(e^ε+1))-SP ⇒ ε-DP",
    sources=(Source("004", "Thm 2, second part"),),
    premise="sp", conclusion="dp", condition="—", bound=_converse_bound))
register(Relation(
    id="R11", statement="(ε/6)-SP ⇒ ε-DP for ε ≤ 1.35",
    sources=(Source("004", "Kasiviswanathan–Smith, as quoted after Thm 2"),),
    premise="sp", conclusion="dp", condition="ε = 6·SP ≤ 1.35 (SP ≤ 0.225)",
    premise_limit=1.35 / 6.0, bound=lambda s, eps: 6.0 * s))
register(Relation(
    id="R12", statement="ε-BDP ⇒ ε-MP (family 𝔻_*)",
    sources=(Source("004", "Thm 3"), Source("004", "Corollary 1, Lemma 1")),
    premise="bdp", conclusion="mp", condition="family 𝔻_* (two-point priors, every K)",
    bound=lambda x, eps: x))
register(Relation(
    id="R13", statement="ε-MP ⇒ ε-BDP (downward-scalable family)",
    sources=(Source("004", "Thm 4 (§III-B converse)"), Source("004", "after Li et al. Thm 3.6")),
    premise="mp", conclusion="bdp",
    condition="downward-scalable family (𝔻_* holds every weight p ∈ (0, 1))",
    bound=lambda x, eps: x))


# --------------------------------------------------------------------------------------------
# statistical relations (R14, R15): claims about an estimator, audited by jaxpriv.statistical
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class StatisticalRelation(Claim):
    """A published claim about an estimator rather than a mechanism (SPEC §3: R14, R15): the
    :class:`Claim` fields (premise and conclusion in words), then these.

    Attributes:
      fields: the keys a witness file carries (``{"relation": id, **fields}``).
      check_fn: ``(**witness fields) -> CheckResult``, exact, float64.
      rtol: the relative tolerance a violation must exceed.
    """

    fields: tuple[str, ...]
    check_fn: Callable[..., CheckResult]
    rtol: float = RTOL

    kind = "statistical"
    parameter = None
    premise_limit = None

    def check(self, **fields: Any) -> CheckResult:
        """Check the claim at one setting (the witness fields), exactly; see ``check_fn``."""
        missing = [f for f in self.fields if fields.get(f) is None]
        if missing:
            raise InputError(f"{self.id} needs {', '.join(repr(f) for f in missing)} "
                             f"(a witness file carries 'relation' and {', '.join(self.fields)})")
        return self.check_fn(**{f: fields[f] for f in self.fields})


def _register_statistical() -> None:
    from jaxpriv import statistical

    register(StatisticalRelation(
        id="R14", statement="P(|κ̂₁−κ₁| ≤ ε·κ₁) ≥ 1 − 2exp(−ε²Tκ₁/3) for κ̂₁ = X/T, "
                            "X ~ Binomial(T, κ₁)",
        sources=(Source("003", "Lemma C.1"), Source("002", "Lemma A.10")),
        premise="relative accuracy ε", conclusion="failure probability P(|κ̂₁−κ₁| > εκ₁)",
        condition="T samples (no range for ε is stated)", fields=("T", "kappa1", "eps"),
        check_fn=statistical.r14_check, rtol=statistical.R14_RTOL))
    register(StatisticalRelation(
        id="R15", statement="|κ̂₁−κ₁| ≤ εκ₁ ⇒ |Ĉ₁−C₁| ≤ sqrt((1+ε)log((1+ε)/(1−ε))/2 + "
                            "(ε + max(log(1+ε), log(1/(1−ε))))/2)",
        sources=(Source("003", "Thm D.1"), Source("002", "Thm A.11")),
        premise="relative accuracy ε", conclusion="worst |Ĉ₁ − C₁| over the estimates",
        condition="0 < ε < 1", fields=("kappa1", "kappa2", "eps"),
        check_fn=statistical.r15_check))


_register_statistical()
