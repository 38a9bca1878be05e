"""The audit's verdict label (jaxpriv.audit.verdict.verdict_label): every label it returns, in
its order of precedence, and the boundaries at the tolerances (``TIGHT_SLACK`` for tight,
``1 − registry.RTOL`` for a certified bracket's lower end). No runs: the numbers are given."""

import math

import pytest

from jaxpriv import registry
from jaxpriv.audit.verdict import TIGHT_SLACK, verdict_label

ABOVE_TIGHT = math.nextafter(TIGHT_SLACK, math.inf)
AT_TOLERANCE = 1 - registry.RTOL
BELOW_TOLERANCE = math.nextafter(AT_TOLERANCE, 0.0)

CASES = [
    # (violated, worst_slack, certified_slack, certified_violated, certified_lower) -> label
    # a verified violation decides, whatever else holds
    ((True, 0.5, None, False, None), "violated"),
    ((True, None, None, False, None), "violated"),
    ((True, 3.0, 0.5, True, 0.2), "violated"),
    ((True, 1.0, 1.0, False, 0.5), "violated"),
    # a certificate that violates the claim, no witness at the budget
    ((False, 0.5, 0.5, True, 0.5), "violated (certified)"),
    ((False, 2.0, 0.9, True, 0.9), "violated (certified)"),
    ((False, None, 0.5, True, 0.5), "violated (certified)"),
    # ... but only with a certificate: the flag alone does not count
    ((False, 2.0, None, True, None), "loose by ×2"),
    # a certified bracket whose lower end is below 1 − RTOL
    ((False, 1.0, 1.0, False, 0.8), "undetermined (certified bracket straddles 1)"),
    ((False, 1.0, 1.0, False, BELOW_TOLERANCE), "undetermined (certified bracket straddles 1)"),
    ((False, None, None, False, 0.8), "undetermined (certified bracket straddles 1)"),
    ((False, 5.0, 5.0, False, 0.0), "undetermined (certified bracket straddles 1)"),
    # at the tolerance itself the bracket does not straddle 1
    ((False, 1.0, 1.0, False, AT_TOLERANCE), "tight"),
    ((False, 1.0, 1.0, False, 1.0), "tight"),
    # nothing found, nothing certified
    ((False, None, None, False, None), "no data"),
    ((False, None, 2.0, False, 2.0), "no data"),
    # tight: worst slack at most TIGHT_SLACK (a slack below 1 without a violation included)
    ((False, 1.0, None, False, None), "tight"),
    ((False, 0.999, None, False, None), "tight"),
    ((False, 0.0, None, False, None), "tight"),
    ((False, TIGHT_SLACK, None, False, None), "tight"),
    ((False, TIGHT_SLACK, TIGHT_SLACK, False, TIGHT_SLACK), "tight"),
    # loose by ×s above it, s to 3 significant digits
    ((False, ABOVE_TIGHT, None, False, None), "loose by ×1.01"),
    ((False, 1.0151, None, False, None), "loose by ×1.02"),
    ((False, 2.0, None, False, None), "loose by ×2"),
    ((False, 4.0, 4.0, False, 4.0), "loose by ×4"),
    ((False, 123456.0, None, False, None), "loose by ×1.23e+05"),
    ((False, math.inf, None, False, None), "loose by ×inf"),
]


@pytest.mark.parametrize("numbers, label", CASES)
def test_verdict_label(numbers, label):
    violated, worst, certified, certified_violated, lower = numbers
    assert verdict_label(violated, worst, certified_slack=certified,
                         certified_violated=certified_violated,
                         certified_lower=lower) == label


def test_every_label_is_covered():
    kinds = {label.split(" by ×")[0] for _, label in CASES}
    assert kinds == {"violated", "violated (certified)",
                     "undetermined (certified bracket straddles 1)", "no data", "tight", "loose"}


def test_the_tolerances_are_the_registry_and_audit_ones():
    assert TIGHT_SLACK == 1.01
    assert BELOW_TOLERANCE < AT_TOLERANCE < 1.0


# -- vacuous points (issue 35): a bound within 1% of the largest value its conclusion can take
# never makes a verdict; run directories written here, no runs

ROWS_HEADER = "x,param,premise,parameter,conclusion,bound,slack,count,witness\n"


def _runs(tmp_path, rid, rows):
    """``rid``'s sweep and search run directories holding ``rows`` (premise, conclusion,
    bound) as envelope rows, and a summary whose worst is the lowest-slack row."""
    import json
    for kind in ("sweep", "search"):
        directory = tmp_path / rid / kind
        directory.mkdir(parents=True)
        lines = [f"{x},,{x},0.0,{y},{b},{b / y},1,\n" for x, y, b in rows]
        (directory / "envelope.csv").write_text(ROWS_HEADER + "".join(lines))
        worst = min(rows, key=lambda r: r[2] / r[1])
        (directory / "summary.json").write_text(json.dumps({
            "worst_slack": worst[2] / worst[1], "violation_count": 0,
            "worst": {"premise": worst[0], "parameter": 0.0, "slack": worst[2] / worst[1]}}))


def _task(rid):
    """``rid``'s search task at the quick budget (its grid with the probes, ``grid_top``)."""
    import dataclasses

    from jaxpriv import audit
    small = dataclasses.replace(audit.BUDGETS["quick"], name="small-test")
    return next(t for t in audit.plan(small, [rid]) if t.kind == "search")


def _config(rid):
    return _task(rid).config


def test_points_where_the_bound_is_at_the_ceiling_never_read_tight(tmp_path):
    """D12 (Bretagnolle–Huber, TV ≤ √(1 − e^{−KL})): at KL = 6 the bound is 0.9988, within 1% of
    TV's largest value 1, and a mechanism with TV 0.998 there has slack 1.0008 — which says only
    that both are near 1. The verdict is the least slack elsewhere, and says where the claim is
    vacuous."""
    from jaxpriv import audit

    def bh(x):
        return math.sqrt(-math.expm1(-x))
    _runs(tmp_path, "D12", [(0.5, bh(0.5) / 1.25, bh(0.5)), (2.0, bh(2.0) / 1.5, bh(2.0)),
                            (6.0, 0.998, bh(6.0))])
    v = audit.assess("D12", tmp_path, _config("D12"))
    assert v.verdict == "loose by ×1.25" and v.worst_slack == pytest.approx(1.25)
    assert v.vacuous.startswith("vacuous for kl ≥ 6: the bound is within 1% of the largest "
                                "value tv can take (1)")


def test_a_claim_vacuous_everywhere_reads_vacuous(tmp_path):
    """A plugin claim "TV ≤ 1" says nothing anywhere: slack 1.0 at TV = 1 is not "tight"."""
    from jaxpriv import Relation, audit, registry
    registry.register(Relation(id="TVLE1", statement="anything ⇒ TV ≤ 1", premise="kl",
                               conclusion="tv", bound=lambda x, *p: 1.0 + 0.0 * x))
    try:
        _runs(tmp_path, "TVLE1", [(0.5, 0.4, 1.0), (3.0, 1.0, 1.0)])
        v = audit.assess("TVLE1", tmp_path, _config("TVLE1"))
    finally:
        registry.unregister("TVLE1")
    assert v.verdict.startswith("vacuous: the bound is within 1% of the largest value tv can")
    assert v.worst_slack is None and v.vacuous is None


def test_a_notions_maximum_is_checked_and_set_for_the_bounded_ones():
    from jaxpriv import InputError, Notion
    assert registry.notion("tv").maximum == registry.notion("delta").maximum == 1.0
    assert registry.notion("abp").maximum == pytest.approx(math.sqrt(math.log(2)))
    assert math.isinf(registry.notion("kl").maximum)
    with pytest.raises(InputError, match="maximum must be a number > 0"):
        Notion("bad_max", lambda mech: mech.log_K.sum(), maximum=0)


@pytest.mark.parametrize("rows, label", [
    # least slack at the smallest premise, ×1.05 and more from 10× it on
    ([(0.001, 1 / 1.001, 1.0), (0.05, 1 / 1.05, 1.0), (0.5, 1 / 1.2, 1.0), (2.0, 1 / 1.3, 1.0)],
     "tight only as kl → 0"),
    # least slack at the largest premise (a Rényi level of hundreds, say)
    ([(0.5, 1 / 1.6, 1.0), (5.0, 1 / 1.4, 1.0), (50.0, 1 / 1.2, 1.0), (380.6, 1 / 1.005, 1.0)],
     "tight only towards large kl (≥ 380.6)"),
    # met exactly away from the largest premise too (D16's I ≤ ML at ln 2, ln 3, ln 4): plain
    # tight, whichever of the equal slacks the stream put last
    ([(0.3, 1 / 1.5, 1.0), (0.693, 1 / 1.0000001, 1.0), (1.0986, 1 / 1.0000002, 1.0),
      (1.386, 1.0, 1.0)],
     "tight"),
    # met exactly (slack 1 to rounding) at the largest premise, nowhere else found: attained,
    # not only approached — plain tight (D16 at ML = ln 4 when the stream found no ln 2 point)
    ([(0.3, 1 / 1.5, 1.0), (0.68, 1 / 1.048, 1.0), (1.386, 1 / (1 + 7e-14), 1.0),
      (1.2, 1 / 1.2, 1.0)], "tight"),
    # tight in the middle too: plain tight
    ([(0.001, 1 / 1.001, 1.0), (0.05, 1 / 1.005, 1.0), (0.5, 1 / 1.2, 1.0), (2.0, 1 / 1.3, 1.0)],
     "tight"),
])
def test_a_bound_approached_only_at_an_extreme_says_so(tmp_path, rows, label):
    """Issue 35: D6 read tight with its worst point at Rényi level 380.6 where its slack over
    premise ≤ 10 is ≥ 1.6. An unbounded conclusion (KL ⇒ χ²: D3's notions) so no point is
    vacuous; the bound column is what the rows say."""
    from jaxpriv import Relation, audit, registry
    registry.register(Relation(id="LIMIT1", statement="KL ⇒ χ² ≤ 2x", premise="kl",
                               conclusion="chi2", bound=lambda x, *p: 2.0 * x))
    try:
        _runs(tmp_path, "LIMIT1", rows)
        task = _task("LIMIT1")
        v = audit.assess("LIMIT1", tmp_path, task.config, task.grid_top)
    finally:
        registry.unregister("LIMIT1")
    assert v.verdict == label
    # beside it, the least slack over the premise grid (levels ≤ the grid's largest, below the
    # probes the search also visits): the row at 380.6 is outside, so the grid's least is the
    # 2.0 or 0.5 row's
    assert max(task.config.grid) == 8 * task.grid_top  # KL grows without bound: probed
    top = task.grid_top
    inside = [(x, b / y) for x, y, b in rows if x <= top]
    x_least, least = min(inside, key=lambda r: r[1])
    assert v.grid_top == top == 3.0
    assert v.grid_slack == pytest.approx(least) and v.grid_premise == x_least
    from jaxpriv.report import grid_text
    text = grid_text(v._asdict())
    if least == pytest.approx(v.worst_slack, rel=1e-4):
        assert text == "same"
    else:
        assert text == f"{least:.4g} at x = {x_least:.4g} (x ≤ 3)"


def test_a_certificate_that_depends_on_n_is_taken_at_every_n_drawn(tmp_path):
    """Issue 35: D14's envelope ``log(n e^x/(e^x + n − 1))`` grows with n, so its least slack
    (→ n/(n − 1) as x → 0) is lower at the sweep's n = 4 (4/3) than at the quick search's n = 3
    (3/2). The certified least slack is the lower: the audited region holds both."""
    import json

    from jaxpriv import audit
    from jaxpriv.audit.verdict import drawn_ns

    def envelope(x, n):
        return x - math.log1p(math.expm1(x) / n)

    _runs(tmp_path, "D14", [(0.5, envelope(0.5, 3), 0.5), (2.0, envelope(2.0, 3), 2.0)])
    summary = tmp_path / "D14" / "sweep" / "summary.json"
    data = json.loads(summary.read_text())
    summary.write_text(json.dumps({**data, "config": {"n": 4, "r": 0}}))
    config = _config("D14")
    assert config.n == 3 and drawn_ns(config, {**data, "config": {"n": 4}}) == [3, 4]
    v = audit.assess("D14", tmp_path, config)
    x = min(config.grid) * 1e-6  # the certified region reaches towards 0
    assert v.worst_slack == pytest.approx(x / envelope(x, 4), rel=1e-6)
    assert v.worst_slack < 1.34 and v.verdict == "loose by ×1.33"
    # the sweep's n alone: 3/2 (the search's), as before
    summary.write_text(json.dumps(data))
    assert audit.assess("D14", tmp_path, config).worst_slack == pytest.approx(1.5, rel=1e-3)


def test_a_least_slack_of_minus_infinity_is_kept_not_read_as_none():
    """A negative bound over a conclusion of 0 (autodp's pure-DP RDP at ε = 1e-7) has least
    slack −∞: the summary keeps it (it read None, "n/a" in the report); +∞ (nothing bounds it)
    stays None."""
    from jaxpriv.audit.verdict import _bracket, _slack_value

    assert _slack_value(-math.inf) == -math.inf and _slack_value(0.98) == 0.98
    assert _slack_value(math.inf) is None and _slack_value(None) is None
    worst = {"slack": -math.inf}
    assert _bracket(-math.inf, worst, -math.inf) == [-math.inf, -math.inf, -math.inf]
