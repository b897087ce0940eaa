"""Running a rule docstring's Example or Fix the way `tileproof explain CODE` shows it."""

from __future__ import annotations

import tileproof as tp

SNIPPET_FILE = "<rule doc>"  # the file name that `-->` locations into a snippet carry


def run_snippet(code: str):
    """Execute a docstring snippet (it builds `fusion`; it may set `target`) and verify it."""
    scope = {"tp": tp, "target": "sm_90a"}
    exec(compile(code, SNIPPET_FILE, "exec"), scope)
    return tp.verify(scope["fusion"], scope["target"])
