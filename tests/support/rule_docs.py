"""Running a rule docstring's Example or Fix the way `tileproof explain CODE` shows it."""

from __future__ import annotations

import contextlib
import itertools
from typing import Iterator

import tileproof as tp
from tileproof.model import iterdomain

SNIPPET_FILE = "<rule doc>"  # the file name that `-->` locations into a snippet carry


def run_snippet(code: str):
    """Execute a docstring snippet (it builds `fusion`; it may set `target`) and verify it."""
    scope = {"tp": tp, "target": "sm_90a"}
    exec(compile(code, SNIPPET_FILE, "exec"), scope)
    return tp.verify(scope["fusion"], scope["target"])


@contextlib.contextmanager
def fresh_iterdomain_names() -> Iterator[None]:
    """IterDomains made inside are numbered from i0, as in a process that ran nothing else.

    The numbering (model/iterdomain.py `_uids`) is process-wide, so without this a report's
    `i7` would depend on which tests ran before. Nothing keys on uids across fusions, so the
    reused numbers do not collide with older IterDomains; the process-wide count resumes after."""
    saved = iterdomain._uids
    iterdomain._uids = itertools.count()
    try:
        yield
    finally:
        iterdomain._uids = saved
