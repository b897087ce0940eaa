"""`tileproof explain CODE`: a rule's docstring as a page (rustc --explain, ruff rule docs).

An Example or Fix starts from a builder of rule_examples.py and writes only the lines that make
it fail or pass; the docstring leaves out the builder's import (the docs run with the builders in
scope: tests/support/rule_docs.py), and the page shows it, so its code runs as it stands after
`import tileproof as tp`."""

from __future__ import annotations

import ast
import builtins

from ..verifier.registry import PROVED_BY, SECTIONS, Rule, all_rules, get_rule

# where the builders live (rule_examples.py); named, not imported: it imports tileproof itself
BUILDERS_MODULE = "tileproof.rule_examples"
RUNNABLE_SECTIONS = ("Example", "Fix")


def explain_text(code: str) -> str:
    """The rule's code, family, severity, summary, its fixed docstring sections and the premises
    (rules whose error skips it).

    A condition another rule proves (PROVED_BY) is explained by that rule, said first.
    Raises KeyError (naming every known code) for a code no rule registers."""
    prover = PROVED_BY.get(code.upper())
    rule = get_rule(prover or code)
    lines = [f"{code.upper()} has no code of its own: {rule.code} proves it.", ""] if prover else []
    lines += [f"{rule.code} ({rule.family}, {rule.severity})", "", rule.summary]
    for name in SECTIONS:
        body = rule.section(name)
        if body and name in RUNNABLE_SECTIONS:
            body = shown_snippet(body)
        if body:
            lines += ["", f"{name}:", *(f"    {line}" if line else "" for line in body.splitlines())]
    if rule.premises:  # registry.rule(premises=...): verify skips the rule where one of them failed
        *rest, last = rule.premises
        named = f"{', '.join(rest)} or {last}" if rest else last
        lines += ["", "Not run:", f"    where {named} reported an error (this rule's question "
                                  f"has no answer then; the report lists it in rules_not_run)"]
    return "\n".join(lines) + "\n"


def shown_snippet(body: str) -> str:
    """An Example or Fix as the page shows it: the import of the builders it calls, then its lines."""
    builders = builders_called(body)
    return f"from {BUILDERS_MODULE} import {', '.join(builders)}\n{body}" if builders else body


def builders_called(snippet: str) -> list[str]:
    """The names a snippet calls without binding them, Python's builtins aside: the builders it
    starts from (none for prose, such as a self-check rule's "none: ...")."""
    try:
        tree = ast.parse(snippet)
    except SyntaxError:
        return []
    bound = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}
    called = {node.func.id for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    return sorted(called - bound - set(dir(builtins)))


def list_text() -> str:
    """Every registered code with its family and one-line summary, sorted by code."""
    rules: list[Rule] = sorted(all_rules(), key=lambda r: r.code)
    if not rules:
        return "no rules are registered\n"
    width = max(len(r.code) for r in rules)
    family_width = max(len(r.family) for r in rules)
    return "".join(f"{r.code:<{width}}  {r.family:<{family_width}}  {r.summary}\n" for r in rules)
