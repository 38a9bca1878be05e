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
