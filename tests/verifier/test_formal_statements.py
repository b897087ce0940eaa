"""Every rule states what its query decides (as Exo writes a `# Formal Statement` above each
of its Check_* functions): a `# Formal statement:` comment opens the rule function's body, right
after the docstring, so a reader of the rule sees what is proved without following helpers.

The statement is the quantified formula the z3 query decides ("for all admitted sizes s, ...:
claim"), or, for a rule that decides without z3, `none, structural: <the condition checked>`."""

from __future__ import annotations

import ast
import inspect
import re
import textwrap

import pytest

from tileproof.verifier.registry import all_rules

RULES = all_rules()
MARK = "# Formal statement:"



def statement(rule) -> tuple[str | None, str]:
    """(the text of the comment that opens the body after the docstring, continuation lines
    joined, or None when the body does not open with one; the line the body opens with)."""
    source = textwrap.dedent(inspect.getsource(rule.func))
    func = ast.parse(source).body[0]
    assert isinstance(func, ast.FunctionDef)
    lines = source.splitlines()
    first = func.body[0]
    assert isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant), f"{rule.code} has no docstring"
    rest = [line.strip() for line in lines[first.end_lineno:] if line.strip()]  # the lines after the docstring
    opening = rest[0] if rest else ""
    if not opening.startswith(MARK):
        return None, opening
    text = [opening[len(MARK):].strip()]
    for line in rest[1:]:
        if not line.startswith("#") or line.startswith(MARK):
            break
        text.append(line.lstrip("#").strip())
    return " ".join(t for t in text if t), opening


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_rule_opens_with_a_formal_statement(rule):
    text, opening = statement(rule)
    assert text is not None, (f"{rule.code}: the body of {rule.func.__qualname__} must open (after the docstring) "
                              f"with '{MARK} ...', not {opening!r}")
    assert text, f"{rule.code}: '{MARK}' says nothing"


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_structural_statement_names_the_condition(rule):
    text, _ = statement(rule)
    if text is None or not text.startswith("none"):
        return  # a formula (or no statement: the test above fails)
    assert re.match(r"none, structural\b", text), f"{rule.code}: a rule without a query says 'none, structural: ...'"
    condition = re.sub(r"^none, structural\s*[:(]?", "", text).strip(" )")
    assert condition, f"{rule.code}: say which condition is checked: '{MARK} none, structural: <condition>'"
