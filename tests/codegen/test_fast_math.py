"""Fusion.fast_math (nvFuser's EnableOption::FastMath): off by default; on, the kernel compiles with
NVRTC's --use_fast_math, the option is part of the fingerprint (a kernel compiled without it is
never returned for a fusion with it) and the source says so."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.codegen.runtime import nvrtc
from tileproof.model.fingerprint import fingerprint

from support.codegen_schedules import elementwise_1d



def _exp2_fusion(fast_math: bool | None = None) -> tp.Fusion:
    fusion = elementwise_1d("fast_math", lambda x: tp.div(tp.exp2(x), tp.add(x, 3.0)))
    if fast_math is not None:
        fusion.fast_math = fast_math
    return fusion


def test_off_by_default_and_checked():
    fusion = _exp2_fusion()
    assert fusion.fast_math is False
    with pytest.raises(tp.ScheduleError, match="fast_math must be True or False, got 1"):
        fusion.fast_math = 1


def test_part_of_the_fingerprint_only_when_on():
    assert fingerprint(_exp2_fusion(), "sm_90a") == fingerprint(_exp2_fusion(False), "sm_90a")
    assert fingerprint(_exp2_fusion(True), "sm_90a") != fingerprint(_exp2_fusion(), "sm_90a")
    assert fingerprint(_exp2_fusion(True).snapshot(), "sm_90a") == fingerprint(_exp2_fusion(True), "sm_90a")


def test_the_kernel_compiles_with_use_fast_math():
    assert b"--use_fast_math" in nvrtc.options("sm_90a", None, fast_math=True)
    assert b"--use_fast_math" not in nvrtc.options("sm_90a", None)
    plain, fast = tp.compile(_exp2_fusion()), tp.compile(_exp2_fusion(True))
    assert "--use_fast_math" in fast.cuda_source and "--use_fast_math" not in plain.cuda_source
    # exp2 and the division lose their denormal and rounding fix-ups: a different (shorter) cubin
    assert fast.cubin != plain.cubin
