"""Running a rule docstring's Example or Fix the way `tileproof explain CODE` shows it."""

from __future__ import annotations

import tileproof as tp

SNIPPET_FILE = "<rule doc>"  # the file name that `-->` locations into a snippet carry


def build_snippet(code: str):
    """Execute a docstring snippet (it builds `fusion`; it may set `target`): (fusion, target)."""
    scope = {"tp": tp, "target": "sm_90a"}
    exec(compile(code, SNIPPET_FILE, "exec"), scope)
    return scope["fusion"], scope["target"]


def run_snippet(code: str):
    """Execute a docstring snippet (build_snippet) and verify it."""
    return tp.verify(*build_snippet(code))
