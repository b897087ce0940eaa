"""`tileproof explain CODE`: a rule's docstring as a page (rustc --explain, ruff rule docs)."""

from __future__ import annotations

from ..verifier.registry import PROVED_BY, SECTIONS, Rule, all_rules, get_rule


def explain_text(code: str) -> str:
    """The rule's code, family, severity, summary and its fixed docstring sections.

    A condition another rule proves (PROVED_BY) is explained by that rule, said first.
    Raises KeyError (naming every known code) for a code no rule registers."""
    prover = PROVED_BY.get(code.upper())
    rule = get_rule(prover or code)
    lines = [f"{code.upper()} has no code of its own: {rule.code} proves it.", ""] if prover else []
    lines += [f"{rule.code} ({rule.family}, {rule.severity})", "", rule.summary]
    for name in SECTIONS:
        body = rule.section(name)
        if body:
            lines += ["", f"{name}:", *(f"    {line}" if line else "" for line in body.splitlines())]
    return "\n".join(lines) + "\n"


def list_text() -> str:
    """Every registered code with its family and one-line summary, sorted by code."""
    rules: list[Rule] = sorted(all_rules(), key=lambda r: r.code)
    if not rules:
        return "no rules are registered\n"
    width = max(len(r.code) for r in rules)
    family_width = max(len(r.family) for r in rules)
    return "".join(f"{r.code:<{width}}  {r.family:<{family_width}}  {r.summary}\n" for r in rules)
