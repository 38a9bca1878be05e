"""The audit's verdicts: a relation's sweep and search run directories, and its certified
envelope where a closed form exists, condensed into one :class:`Verdict` (:func:`assess`).

Verdict rules (:func:`assess`; the label alone: :func:`verdict_label`):

* **violated**: at least one verified witness; the worst slack is the lowest verified one. A
  certified least slack below 1 with no witness at the budget reads "violated (certified)".
* otherwise the worst slack ``s`` is the least slack of any witness the sweep and search kept,
  and of the certified curve on the grid (each is attained by a real mechanism, so ``s`` is an
  upper bound on the true least slack, exact where certified): **tight** if ``s ≤ 1.01``, else
  **loose by ×s**.
* points where the bound is within 1% of the largest value the conclusion can take
  (:attr:`jaxpriv.registry.Notion.maximum`: TV, δ, probabilities 1; ABP √ln 2) say nothing: they
  never make a verdict (``Verdict.vacuous`` says where they are); a claim vacuous at every
  point found reads **vacuous**.
* a tight verdict whose least slack sits at the smallest (largest) premise found, with every
  point found at ≥ 10× (≤ ¼ of) that premise above 1.01, and the least slack above 1 + 1e-6
  (not met, only approached), reads **tight only as x → 0** (**tight only towards large x**):
  the bound is approached only at an extreme the audit reached. The searches also visit levels
  beyond the grid and the edge of where a claim turns vacuous
  (:func:`jaxpriv.audit.plans.probes`), so that a search, not the sweep's random extremes,
  says whether the claim is within 1.01 away from the extreme.

Examples:
  >>> from jaxpriv.audit.verdict import verdict_label
  >>> verdict_label(violated=False, worst_slack=1.5)
  'loose by ×1.5'
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from jaxpriv import registry
from jaxpriv.audit import plans
from jaxpriv.audit.plans import SUMMARY, TIGHT_SLACK
from jaxpriv.engines import certify, io

ATTAINED = 1e-6
"""A least slack within this of 1 is the bound met (to rounding), not only approached: such a
verdict is plainly "tight", never "tight only as x → 0 / towards large x" (D16, ``I ≤ ML``, is
met at ML = ln 2, ln 3 and ln 4 on 4×4 mechanisms, and read "tight only towards large
max_leakage (≥ 1.386)" when the stream's least slack, exactly 1, happened to sit at ln 4)."""

class Verdict(NamedTuple):
    """What the audit concludes about one relation (all paths relative to the audit directory).

    Attributes:
      relation, statement, sources, condition: from the registry.
      verdict: ``"violated"``, ``"violated (certified)"``, ``"tight"``, ``"loose by ×k"`` or
        ``"undetermined (certified bracket straddles 1)"`` (no witness, and a certified bracket
        of the least slack whose lower end is below 1 and upper end above).
      worst_slack: the least slack found (verified witness, envelope, or certified curve).
      where: ``{"premise", "parameter"}`` of the worst point.
      witness: the file behind the worst slack (``None`` if it is the certified curve).
      kind: ``"certified"`` (closed-form envelope: the least slack on the certified region is
        exact), ``"certified bracket"`` (a proved upper bound on the envelope and a reached
        lower one: the least slack lies in ``slack_bracket``) or ``"lower bound"`` (the
        envelope found is a lower bound on the true one, so the least slack found is an upper
        bound on the true least slack, and nothing bounds it from below).
      certified_slack: least certified slack on the certified region (:func:`certified_region`:
        the search grid, extended towards 0, across the parameter's range), reached by a real
        mechanism, or ``None``.
      slack_bracket: ``[lower, estimate, upper]`` of the least slack, in the manner of
        prv_accountant: with a certificate, ``lower`` and ``upper`` its proved and reached ends
        over the certified region's points; ``estimate`` the verdict's ``worst_slack`` (the
        least found or certified anywhere); without a certificate ``[None, found, found]``.
      violation_count: verified violations, sweep + search.
      violations: witness files of verified violations (at most 20 listed).
      worst_log_slack: natural log of the least slack, where the runs report it (a statistical
        claim's slack can underflow float64).
      sweep_worst_slack, search_worst_slack: each run's own worst slack.
      search_max_gap: the search's largest relative shortfall from the certified value.
      seconds: sweep + search time (excluding compilation).
      vacuous: where the claim says nothing — its bound within 1% of the largest value the
        conclusion can take (:attr:`Notion.maximum`) — which the verdict does not count
        (``None``: nowhere the audit looked).
      nan_count: the sweep's mechanisms with a NaN level or bound (a notion's or a plugin's
        bug: counted and reported, never read as holding).
      grid_slack: the least slack over the audit's premise grid — the points found (and the
        certified curve) whose premise is at most the budget's premise grid's largest level
        ``grid_top`` (the searches also visit :func:`jaxpriv.audit.plans.probes` above it), the
        region a reader of the claim cares about — beside ``worst_slack``,
        the least anywhere (a sweep draws far beyond the grid: D6 at α = 4, δ = 1e-5 has its least
        slack, 1.005, at Rényi level 139 and ×1.12 over levels ≤ 3). ``None`` where no point lies there or
        the relation has no premise grid (statistical claims).
      grid_premise: the premise of that point.
      grid_top: the budget's premise grid's largest level.
    """

    relation: str
    statement: str
    sources: list[str]
    condition: str
    verdict: str
    worst_slack: float | None
    where: dict[str, float | None]
    witness: str | None
    kind: str
    certified_slack: float | None
    slack_bracket: list[float | None]
    violation_count: int
    violations: list[str]
    worst_log_slack: float | None
    sweep_worst_slack: float | None
    search_worst_slack: float | None
    search_max_gap: float | None
    seconds: float
    vacuous: str | None = None
    nan_count: int = 0
    grid_slack: float | None = None
    grid_premise: float | None = None
    grid_top: float | None = None


def _candidates(out: Path, rid: str, kind: str) -> tuple[dict, list[dict]]:
    """A run's summary and every (slack, premise, parameter, witness) point it reports."""
    directory = out / rid / kind
    summary = io.read_json(directory / SUMMARY)
    prefix = f"{rid}/{kind}/"
    points = [{"slack": v["slack"], "premise": v.get("premise"),
               "parameter": v.get("parameter"),
               "witness": prefix + v["file"] if v.get("file") else None, "violation": True}
              for v in summary.get("violation_details", [])]
    for row in io.read_envelope(directory):
        if np.isfinite(row["slack"]):
            points.append({"slack": row["slack"], "premise": row["premise"],
                           "parameter": row["parameter"], "x": row["x"],
                           "witness": prefix + row["witness"] if row["witness"] else None,
                           "violation": False})
    worst = summary.get("worst")  # a sweep's lowest-slack mechanism, at its own levels
    if worst and worst.get("slack") is not None and not any(
            p["violation"] and p["witness"] == prefix + str(worst.get("file")) for p in points):
        points.append({"slack": worst["slack"], "premise": worst["premise"],
                       "parameter": worst["parameter"],
                       "witness": prefix + worst["file"] if worst.get("file") else None,
                       "violation": False})
    return summary, points


def _bounds_at(relation, points) -> np.ndarray:
    """The claimed bound at each point (its envelope row's, else the bound at its premise and
    parameter, all in one compiled call); NaN where it cannot be evaluated."""
    given = np.array([p["bound"] if p.get("bound") is not None else np.nan for p in points],
                     np.float64)
    missing = ~np.isfinite(given)
    if missing.any():
        try:
            at = [p for p, m in zip(points, missing) if m]
            given[missing] = registry.bound_at(
                relation, [np.nan if p["premise"] is None else p["premise"] for p in at],
                [p["parameter"] or 0.0 for p in at])
        except Exception:
            given[missing] = np.nan
    return given


def _split_vacuous(relation, points, ceiling):
    """``(informative, vacuous)``: the non-violation points whose bound is at least
    ``ceiling`` are vacuous (violations always count)."""
    informative, vacuous = [], []
    bounds = _bounds_at(relation, points) if points else np.zeros(0)
    for p, bound in zip(points, bounds):
        at_ceiling = not p["violation"] and bound >= ceiling
        (vacuous if at_ceiling else informative).append(p)
    return informative, vacuous


def _vacuous_note(relation, vacuous, informative, ceiling) -> str | None:
    """Where the claim is vacuous, in one phrase (``None``: nowhere the audit looked)."""
    if not vacuous:
        return None
    largest = ceiling * TIGHT_SLACK
    xs = [p["premise"] for p in vacuous if p["premise"] is not None]
    below = [p["premise"] for p in informative if p["premise"] is not None]
    where = f"at {len(vacuous)} of the {len(vacuous) + len(informative)} points found"
    if xs and (not below or min(xs) > max(below)):
        where = f"for {relation.premise} ≥ {min(xs):.4g}"
    return (f"vacuous {where}: the bound is within {TIGHT_SLACK - 1:.0%} of the largest value "
            f"{relation.conclusion} can take ({largest:.4g}); those points are not counted")


def _only_in_the_limit(relation, worst, points) -> str | None:
    """For a tight verdict: ``"as x → 0"`` where the least slack is at the smallest premise
    found and every point found at ≥ 10× that premise has slack above :data:`TIGHT_SLACK`;
    ``"towards large x (≥ x₀)"`` likewise at the largest premise found, against the points at
    ≤ ¼ of it; ``None`` where the bound is approached away from the extremes."""
    found = [p for p in points if p["premise"] is not None and np.isfinite(p["premise"])
             and p["premise"] > 0 and not p["violation"]]
    x0 = worst.get("premise")
    if len(found) < 4 or x0 is None or not np.isfinite(x0) or x0 <= 0:
        return None
    # met (the least slack, hence every slack ≥ it, is not only approached): plainly tight
    if worst["slack"] <= 1.0 + ATTAINED:
        return None
    xs = [p["premise"] for p in found]
    if x0 <= 1.5 * min(xs):
        away = [p["slack"] for p in found if p["premise"] >= 10 * x0]
        if away and min(away) > TIGHT_SLACK:
            return f"as {relation.premise} → 0"
    if x0 >= max(xs) / 1.5:
        away = [p["slack"] for p in found if p["premise"] <= x0 / 4]
        if away and min(away) > TIGHT_SLACK:
            return f"towards large {relation.premise} (≥ {x0:.4g})"
    return None


def _least_on_grid(relation, search_config, points, grid_top=None) -> dict:
    """``{grid_slack, grid_premise, grid_top}`` of :class:`Verdict`: the least slack among
    ``points`` (found, violations included, and the certified curve's) whose premise lies in
    ``[0, grid_top]``, the premise grid's largest level (the search grid's where not given: the
    audit's searches also visit :func:`jaxpriv.audit.plans.probes` above it)."""
    grid = getattr(search_config, "grid", None)
    if relation.kind != "mechanism" or grid is None or not len(grid):
        return {}
    top = float(np.max(np.asarray(grid, np.float64)) if grid_top is None else grid_top)
    inside = [p for p in points if p.get("premise") is not None and np.isfinite(p["premise"])
              and 0.0 <= p["premise"] <= top * (1 + 1e-9) and p.get("slack") is not None
              and not np.isnan(p["slack"])]
    if not inside:
        return {"grid_top": top}
    least = min(inside, key=lambda p: p["slack"])
    return {"grid_slack": _finite(least["slack"]), "grid_premise": _finite(least["premise"]),
            "grid_top": top}


def assess(rid: str, out: str | os.PathLike, search_config, grid_top: float | None = None
           ) -> Verdict:
    """Condense a relation's sweep and search run directories (and its certified envelope on
    the search grid) into a :class:`Verdict`; see the module docstring for the rules.
    ``grid_top``: the premise grid's top (:attr:`jaxpriv.audit.plans.Task.grid_top`; default the
    search grid's)."""
    out = Path(out)
    relation = registry.get(rid)
    sweep_summary, points = _candidates(out, rid, "sweep")
    search_summary, more = _candidates(out, rid, "search")
    points += more
    ceiling = plans.ceiling(relation)
    vacuous = []
    if ceiling is not None:
        points, vacuous = _split_vacuous(relation, points, ceiling)
        more = [p for p in more if p in points]
    violations = [p for p in points if p["violation"]]
    count = int(sweep_summary.get("violation_count", 0)) + \
        int(search_summary.get("violation_count", 0))
    certified = certified_lower = cert_point = None
    curve = []  # the certified curve's points, exact: they decide "tight only …" with the found
    certified_over = False
    exact = True
    if relation.kind == "mechanism":
        premise, param = certified_region(relation, search_config)
        premise, param, cert = _envelope_at_every_n(relation, premise, param, search_config,
                                                    sweep_summary)
        if cert is not None:
            # a certified violation is judged like a witness: by more than the tolerance
            # (a ratio certificate, NaN conclusion, by its least slack)
            over = np.where(np.isnan(cert.conclusion), cert.min_slack < 1 - registry.RTOL,
                            cert.conclusion > cert.bound * (1 + registry.RTOL) + registry.ATOL)
            said = np.ones(cert.min_slack.shape, bool)
            if ceiling is not None and cert.bound is not None:
                said = ~(np.asarray(cert.bound) >= ceiling)  # vacuous points never count
                vacuous += [{"premise": float(x)} for x in np.asarray(premise)[~said]]
            slack_said = np.where(said, cert.min_slack, np.inf)
            curve = [{"premise": float(x), "slack": float(v), "violation": False}
                     for x, v in zip(np.asarray(premise), slack_said) if np.isfinite(v)]
            i = int(np.argmin(slack_said))
            certified = float(slack_said[i]) if said.any() else None
            certified_over = bool(np.any(over))
            certified_lower = (float(np.min(np.where(said, cert.min_slack_lower, np.inf)))
                               if said.any() else None)
            exact = bool(np.all(cert.exact))
            gridded = relation.search.gridded_parameter
            cert_point = None if certified is None else {
                "slack": certified, "premise": float(premise[i]),
                "parameter": float(param[i]) if gridded else float(search_config.param),
                "witness": None, "violation": False}
    violated = bool(violations or count)
    if violated:
        worst = _worst_violation(out, points)
    else:
        worst = min(points, key=lambda p: p["slack"]) if points else None
        if cert_point and (worst is None or cert_point["slack"] < worst["slack"] * (1 - 1e-6)):
            # the exact least slack: name the search's witness at that grid point
            worst = cert_point
            # the search's witness at that grid point, if the search ran at that parameter
            same_parameter = not relation.search.gridded_parameter or abs(
                cert_point["parameter"] - float(search_config.param)) < 1e-12
            at = [p for p in more if same_parameter and not p["violation"]
                  and p.get("x") is not None and abs(p["x"] - cert_point["premise"]) < 1e-9]
            if at:
                worst = {**cert_point, "witness": min(at, key=lambda p: p["slack"])["witness"]}
    verdict = verdict_label(violated, None if worst is None else worst["slack"],
                            certified_slack=certified, certified_violated=certified_over,
                            certified_lower=certified_lower)
    if verdict == "tight" and worst is not None:
        limit = _only_in_the_limit(relation, worst, points + curve)
        if limit:
            verdict = f"tight only {limit}"
    on_grid = _least_on_grid(relation, search_config, points + curve, grid_top)
    note = _vacuous_note(relation, vacuous, points, ceiling) if ceiling is not None else None
    if worst is None and vacuous and not violated:
        verdict = (f"vacuous: the bound is within {TIGHT_SLACK - 1:.0%} of the largest value "
                   f"{relation.conclusion} can take wherever the audit looked")
        note = None
    return Verdict(
        relation=rid, statement=relation.statement, sources=[str(s) for s in relation.sources],
        condition=relation.condition, verdict=verdict,
        worst_slack=None if worst is None else _slack_value(worst["slack"]),
        where={} if worst is None else {"premise": _finite(worst["premise"]),
                                        "parameter": _finite(worst["parameter"])},
        witness=None if worst is None else worst["witness"],
        kind=("lower bound" if certified is None else "certified" if exact
              else "certified bracket"),
        certified_slack=certified,
        slack_bracket=_bracket(certified_lower, worst, certified),
        violation_count=count,
        violations=[p["witness"] for p in sorted(violations, key=lambda p: p["slack"])
                    if p["witness"]][:20],
        worst_log_slack=_least(s.get("worst_log_slack") for s in (sweep_summary, search_summary)),
        sweep_worst_slack=sweep_summary.get("worst_slack"),
        search_worst_slack=search_summary.get("worst_slack"),
        search_max_gap=search_summary.get("max_gap"),
        seconds=float(sweep_summary.get("seconds", 0.0)) + float(search_summary.get("seconds",
                                                                                    0.0)),
        vacuous=note, nan_count=int(sweep_summary.get("nan_count", 0) or 0), **on_grid)


def verdict_label(violated: bool, worst_slack: float | None, *,
                  certified_slack: float | None = None, certified_violated: bool = False,
                  certified_lower: float | None = None) -> str:
    """The verdict a relation's measured numbers read as (:attr:`Verdict.verdict`; the rules
    are in the module docstring), in this order:

    * ``"violated"``: a verified violation was found (``violated``), whatever else holds;
    * ``"violated (certified)"``: a certificate (``certified_slack`` not ``None``) whose
      envelope exceeds the bound by more than the tolerance somewhere
      (``certified_violated``);
    * ``"undetermined (certified bracket straddles 1)"``: the certified bracket's lower end
      ``certified_lower`` is below ``1 − registry.RTOL``;
    * ``"no data"``: nothing found (``worst_slack`` is ``None``);
    * ``"tight"``: ``worst_slack ≤`` :data:`TIGHT_SLACK`;
    * else ``"loose by ×s"``, ``s`` the worst slack to 3 significant digits.

    Args:
      violated: whether the sweep or the search verified a violation.
      worst_slack: the least slack found or certified (the verdict's worst point), ``None``
        with no point at all.
      certified_slack: the least certified slack on the certified region, ``None`` without a
        certificate.
      certified_violated: whether the certified envelope violates the claim beyond the
        tolerance at some point of the region.
      certified_lower: the certified bracket's lower end (``None`` without a certificate).

    Examples:
      >>> verdict_label(violated=False, worst_slack=1.01)
      'tight'
      >>> verdict_label(violated=False, worst_slack=0.5, certified_slack=0.5,
      ...               certified_violated=True, certified_lower=0.5)
      'violated (certified)'
    """
    if violated:
        return "violated"
    if certified_slack is not None and certified_violated:
        return "violated (certified)"
    if certified_lower is not None and certified_lower < 1 - registry.RTOL:
        return "undetermined (certified bracket straddles 1)"
    if worst_slack is None:
        return "no data"
    if worst_slack <= TIGHT_SLACK:
        return "tight"
    return f"loose by ×{worst_slack:.3g}"


CERTIFIED_TOWARDS_ZERO = 6
"""Decades below the search grid's least premise level the certified region reaches."""
CERTIFIED_PARAMETERS = 25
"""Condition-parameter points of the certified region (besides 0 and the search's own)."""


def drawn_ns(search_config, sweep_summary: dict) -> list[int]:
    """The numbers of secrets the audit drew: the search's and the sweep's (a certificate that
    depends on n is evaluated at each: the audited region holds both)."""
    ns = {int(search_config.n)}
    sweep_n = (sweep_summary.get("config") or {}).get("n")
    if sweep_n is not None and not search_config.r and not (sweep_summary.get("config") or
                                                             {}).get("r"):
        ns.add(int(sweep_n))
    return sorted(ns)


def _envelope_at_every_n(relation, premise, param, search_config, sweep_summary):
    """``(premise, parameter, certificate)`` over the certified region at every n drawn
    (:func:`drawn_ns`), the arrays side by side; the certificate ``None`` if unknown at any."""
    parts = []
    for n in drawn_ns(search_config, sweep_summary):
        cert = certify.envelope(relation, premise, param, n=n, r=search_config.r or None,
                                prior=search_config.setup.prior, options=search_config.options)
        if cert is None:
            return premise, param, None
        parts.append(cert)
    if len(parts) == 1:
        return premise, param, parts[0]
    fields = {}
    for name in ("conclusion", "min_slack", "upper", "min_slack_lower", "bound"):
        values = [getattr(c, name) for c in parts]
        fields[name] = None if any(v is None for v in values) else np.concatenate(
            [np.broadcast_to(v, np.shape(premise)) for v in values])
    count = len(parts)
    return (np.tile(premise, count), np.tile(param, count),
            registry.Certificate(source=parts[0].source, **fields))


def certified_region(relation, search_config) -> tuple[np.ndarray, np.ndarray]:
    """Where the audit evaluates a relation's certified envelope: ``(premise, parameter)``
    arrays (flattened grid). The premise levels are the search grid and, towards 0, one point
    per decade for :data:`CERTIFIED_TOWARDS_ZERO` decades (a least slack can be an infimum
    approached as the level goes to 0); for a relation claimed at a gridded parameter, every
    premise level is paired with 0, the search's parameter and a geometric grid up to the
    largest parameter the sweep draws (its ``param_max``), so the least slack is over the
    audited region of ``(x, ε)``, not one ε."""
    grid = np.asarray(search_config.grid, np.float64)
    low = float(grid.min())
    premise = np.unique(np.concatenate(
        [grid, low * 10.0 ** -np.arange(1, CERTIFIED_TOWARDS_ZERO + 1)]))
    if not relation.search.gridded_parameter:
        return premise, np.full_like(premise, float(search_config.param))
    top = max(float(search_config.param), float(relation.sampling.param_max or 0.0))
    params = np.unique(np.concatenate([[0.0, float(search_config.param)], np.geomspace(
        top * 1e-6, top, CERTIFIED_PARAMETERS) if top > 0 else []]))
    x, eps = np.meshgrid(premise, params, indexing="ij")
    return x.ravel(), eps.ravel()


def _bracket(certified_lower, worst, certified) -> list[float | None]:
    """``[lower, estimate, upper]`` of the least slack (see :class:`Verdict`): with a
    certificate, its two ends on the certified region's points (``lower ≤ upper`` there; a
    mechanism found off those points may sit lower, and is the estimate); without one, only
    what was found (``None`` below)."""
    estimate = None if worst is None else _slack_value(worst["slack"])
    if certified is None:
        return [None, estimate, estimate]
    return [_slack_value(certified_lower), estimate, _slack_value(certified)]


def _worst_violation(out: Path, points: list[dict]) -> dict | None:
    """The lowest-slack point that is a verified violation: a listed one, or an envelope point
    below 1 whose witness file re-checks as violated (the engines save only the first
    violations as files, so the worst one may be an envelope point)."""
    for point in sorted(points, key=lambda p: p["slack"]):
        if point["violation"]:
            return point
        if point["slack"] < 1 and point["witness"] and bool(
                certify.check_witness(out / point["witness"]).violated):
            return {**point, "violation": True}
    return None


def _least(values) -> float | None:
    finite = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    return min(finite) if finite else None


def _slack_value(v) -> float | None:
    """A least slack as the summary keeps it: ``None`` for none (or ``+∞``: nothing bounds it),
    ``−∞`` kept — a negative bound over a conclusion of 0 (autodp's pure-DP RDP read "n/a")."""
    if v is None or not float(v) < math.inf:
        return None
    return float(v)


def _finite(v) -> float | None:
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def format_number(x) -> str:
    """A level for a sentence: 4 significant digits, "n/a" for None (the audit's log lines and
    the report's text)."""
    return "n/a" if x is None else f"{x:.4g}"
