"""Fusion.dependent_launch (nvFuser's wait_for_prior_grid + launch_dependent_grid, as programmatic
dependent launch): off by default and checked; part of the fingerprint only when on; the kernel's
first statements (after its declarations) wait for the kernels before it and let the next one launch,
before any memory access; verification is the same either way; the launch goes through
cuLaunchKernelEx with programmatic stream serialization (tests/gpu/test_dependent_launch.py runs it)."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.model.fingerprint import fingerprint

from support.codegen_schedules import elementwise_1d



def _scale(dependent: bool | None = None) -> tp.Fusion:
    fusion = elementwise_1d("dependent", lambda x: tp.mul(tp.add(x, 1.0), 2.0))
    if dependent is not None:
        fusion.dependent_launch = dependent
    return fusion


def test_off_by_default_and_checked():
    fusion = _scale()
    assert fusion.dependent_launch is False
    with pytest.raises(tp.ScheduleError, match="dependent_launch must be True or False, got 'yes'"):
        fusion.dependent_launch = "yes"


def test_part_of_the_fingerprint_only_when_on():
    assert fingerprint(_scale(), "sm_90a") == fingerprint(_scale(False), "sm_90a")
    assert fingerprint(_scale(True), "sm_90a") != fingerprint(_scale(), "sm_90a")
    assert fingerprint(_scale(True).snapshot(), "sm_90a") == fingerprint(_scale(True), "sm_90a")


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_the_wait_comes_before_any_memory_access(target):
    plain, dependent = tp.compile(_scale(), target), tp.compile(_scale(True), target)
    assert "griddepcontrol" not in plain.cuda_source and plain.ir.dependent_launch is False
    body = dependent.cuda_source.split(") {", 1)[1].splitlines()
    wait = body.index('  asm volatile("griddepcontrol.wait;" ::: "memory");')
    assert body[wait + 1] == '  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");'
    first_access = next(i for i, line in enumerate(body) if "x[(" in line or "T2[(" in line)  # global x, out
    assert wait < first_access
    assert dependent.ir.dependent_launch and dependent.cubin != plain.cubin


def test_what_is_proved_is_the_same():
    plain, dependent = tp.verify(_scale()), tp.verify(_scale(True))
    assert plain.ok and dependent.ok
    assert plain.rules_run == dependent.rules_run and plain.launch == dependent.launch
