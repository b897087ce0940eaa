"""Every rule documents itself, and its Example / Fix are executable tests (rustc --explain style)."""

from __future__ import annotations

import pytest

from tileproof.verifier.diagnostics import Severity
from tileproof.verifier.registry import SECTIONS, all_rules

from support.rule_docs import run_snippet

RULES = all_rules()


def self_check(rule) -> bool:
    """A rule no schedule of today's API can fail (it checks what tileproof itself places); its
    Example names the test that shows its failures instead."""
    return rule.section("Example").startswith("none:")


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_rule_has_every_section(rule):
    for name in SECTIONS:
        assert rule.section(name), f"{rule.code} lacks the section {name!r}"


def warned(report) -> list[str]:
    return sorted({d.code for d in report.warnings})


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_example_fails_with_exactly_that_code(rule):
    if self_check(rule):
        assert "tests/" in rule.section("Example") and rule.section("Fix").startswith("none:")
        return
    report = run_snippet(rule.section("Example"))
    if rule.severity is Severity.WARNING:
        assert report.ok and warned(report) == [rule.code], [d.message for d in report.diagnostics]
    else:
        assert report.codes == sorted([rule.code] + rule.reported_with), [d.message for d in report.errors]
    failing = [d for d in report.diagnostics if d.code == rule.code]
    assert failing and all(d.message and d.hint and d.counterexample for d in failing)


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_fix_is_accepted(rule):
    if self_check(rule):
        return
    report = run_snippet(rule.section("Fix"))
    assert report.ok, [f"{d.code}: {d.message}" for d in report.errors]
    if rule.severity is Severity.WARNING:
        assert rule.code not in warned(report), [d.message for d in report.warnings]
