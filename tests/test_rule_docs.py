"""Every rule documents itself, and its Example / Fix are executable tests (rustc --explain style)."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.verifier.registry import SECTIONS, all_rules

RULES = all_rules()


def run_snippet(code: str):
    scope = {"tp": tp, "target": "sm_90a"}
    exec(compile(code, "<rule doc>", "exec"), scope)
    return tp.verify(scope["fusion"], scope["target"])


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_rule_has_every_section(rule):
    for name in SECTIONS:
        assert rule.section(name), f"{rule.code} lacks the section {name!r}"


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_example_is_rejected_with_exactly_that_code(rule):
    report = run_snippet(rule.section("Example"))
    assert report.codes == [rule.code], [d.message for d in report.errors]
    failing = [d for d in report.errors if d.code == rule.code]
    assert all(d.message and d.hint for d in failing)


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_fix_is_accepted(rule):
    report = run_snippet(rule.section("Fix"))
    assert report.ok, [f"{d.code}: {d.message}" for d in report.errors]
