"""Running a rule docstring's Example or Fix the way `tileproof explain CODE` shows it: with `tp`
and the builders of tileproof/rule_examples.py in scope (explain prints their import)."""

from __future__ import annotations

import tileproof as tp
from tileproof import rule_examples

SNIPPET_FILE = "<rule doc>"  # the file name that `-->` locations into a snippet carry


def snippet_scope() -> dict:
    """The names a snippet starts with: tp, the default target, and every builder."""
    return {"tp": tp, "target": "sm_90a", **{name: getattr(rule_examples, name) for name in rule_examples.__all__}}


def build_snippet(code: str):
    """Execute a docstring snippet (it builds `fusion`; it may set `target`): (fusion, target)."""
    scope = snippet_scope()
    exec(compile(code, SNIPPET_FILE, "exec"), scope)
    return scope["fusion"], scope["target"]


def run_snippet(code: str):
    """Execute a docstring snippet (build_snippet) and verify it."""
    return tp.verify(*build_snippet(code))
