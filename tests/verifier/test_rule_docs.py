"""Every rule documents itself, and its Example / Fix are executable tests (rustc --explain style).
An Example or Fix starts from a builder of rule_examples.py and shows only the lines that differ;
`tileproof explain` shows it with the builder's import, and that runs as it stands."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

import tileproof as tp
from tileproof import rule_examples
from tileproof.model.fingerprint import fingerprint
from tileproof.reports.explain import builders_called, explain_text, shown_snippet
from tileproof.verifier.diagnostics import Severity
from tileproof.verifier.registry import SECTIONS, all_rules

from support.rule_docs import SNIPPET_FILE, build_snippet, run_snippet

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


# -- the builders the Examples and Fixes start from (tileproof/rule_examples.py) ---------------------

RUNNABLE = [(rule, section) for rule in RULES if not self_check(rule) for section in ("Example", "Fix")]
LONGEST_SNIPPET = 8  # lines: a longer Example or Fix repeats a schedule a builder should hold


def _runnable_id(case) -> str:
    rule, section = case
    return f"{rule.code}-{section}"


@pytest.mark.parametrize("case", RUNNABLE, ids=_runnable_id)
def test_explain_shows_a_snippet_that_runs_as_it_stands(case):
    """The page shows the builders' import; with it (and tp) alone the code builds the fusion the
    docs' run builds."""
    rule, section = case
    body = rule.section(section)
    shown = shown_snippet(body)
    assert textwrap.indent(shown, "    ") in explain_text(rule.code)
    scope = {"tp": tp, "target": "sm_90a"}
    exec(compile(shown, SNIPPET_FILE, "exec"), scope)
    fusion, target = build_snippet(body)
    assert (fingerprint(scope["fusion"], scope["target"]), scope["target"]) == (fingerprint(fusion, target), target)


@pytest.mark.parametrize("case", RUNNABLE, ids=_runnable_id)
def test_a_snippet_shows_only_what_differs_from_its_builder(case):
    rule, section = case
    lines = rule.section(section).splitlines()
    assert len(lines) <= LONGEST_SNIPPET, f"{rule.code}'s {section} has {len(lines)} lines: start it from a " \
                                          f"builder of rule_examples.py"


def test_the_docs_call_every_builder_and_only_builders():
    called = {name for rule, section in RUNNABLE for name in builders_called(rule.section(section))}
    assert called == set(rule_examples.__all__)


def test_builders_called_finds_the_unbound_calls_only():
    snippet = 'fusion, t0, t1 = copy_chain("x", [4], copies=1)\nfor i in range(2):\n    f = len\n    f(t1)\n'
    assert builders_called(snippet) == ["copy_chain"]
    assert builders_called("none: no schedule fails this rule") == []
    assert shown_snippet("t1 = tma_copy()") == "from tileproof.rule_examples import tma_copy\nt1 = tma_copy()"


def test_the_builders_import_only_the_public_api():
    """rule_examples.py is written as a user writes a schedule: `import tileproof as tp` and the
    standard library, nothing of tileproof's packages (and nothing of the library imports it)."""
    path = Path(rule_examples.__file__)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            assert all(a.name == "tileproof" or not a.name.startswith("tileproof") for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert not node.level and not (node.module or "").startswith("tileproof"), node.module
