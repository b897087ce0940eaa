"""tileproof.testing.compile_unverified: builds rejected schedules, marked unverified; the
public tp.compile still refuses them."""

from __future__ import annotations

from pathlib import Path

import pytest

import tileproof as tp
from tileproof.schedule_files import discover
from tileproof.testing import UNVERIFIED_BANNER, compile_unverified

ROOT = Path(__file__).resolve().parent.parent
CASE = next(c for c in discover([str(ROOT / "examples" / "invalid" / "thread_visibility.py")])
            if c.name == "registers_on_tidx_read_on_tidy")


def test_a_rejected_schedule_is_built_and_marked_unverified():
    kernel = compile_unverified(CASE.build(), CASE.target)
    assert kernel.verified is False
    assert kernel.report.codes == ["THREAD-VISIBILITY"]
    assert kernel.cuda_source.startswith(UNVERIFIED_BANNER)


def test_tp_compile_still_refuses_it():
    with pytest.raises(tp.ScheduleRejected):
        tp.compile(CASE.build(), CASE.target)


def test_an_accepted_schedule_is_marked_verified():
    fixed = next(c for c in discover([str(ROOT / "examples" / "valid" / "thread_visibility.py")])
                 if c.name == "registers_stored_by_their_threads")
    kernel = compile_unverified(fixed.build(), fixed.target)
    assert kernel.verified is True and UNVERIFIED_BANNER not in kernel.cuda_source
    assert tp.compile(fixed.build(), fixed.target).verified is True
