"""nvFuser's own tests, translated (tests/nvfuser/, one module per nvFuser file in NVIDIA/Fuser
tests/cpp/): each case builds the schedule the C++ TEST writes, with tileproof's names for
nvFuser's, and states nvFuser's verdict. `check` asserts tileproof's agrees: a schedule nvFuser
compiles and validates verifies clean and compiles (NVRTC, no GPU needed); one nvFuser throws on is
rejected, with the rule codes given (or, where nvFuser throws at the scheduling call, the build
raises a ScheduleError matching `raises`). Where tileproof does not agree yet, `gap` says which item of
the nvFuser-fidelity issue it waits for (the test is an expected failure, strict: it fails the day
it starts to agree, so the gap list stays true). Where the hardware says nvFuser is wrong,
`differs` says so and names the GPU run that shows it; tileproof's verdict is then asserted.

The GPU suite (tests/gpu/test_nvfuser.py) runs every accepted case that has a `run`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pytest

import tileproof as tp

VALID, THROWS = "valid", "throws"


@dataclass(frozen=True)
class Case:
    test: str  # the TEST as nvFuser names it: "Suite.Name" (a parameterised one: "Suite.Name/param")
    build: Callable[[], tp.Fusion]  # the scheduled fusion
    nvfuser: str  # VALID: nvFuser compiles and validates it; THROWS: nvFuser refuses it
    codes: tuple[str, ...] = ()  # THROWS: the rules tileproof rejects it with
    gap: str | None = None  # tileproof disagrees today: "item N: why" (issue 33)
    differs: str | None = None  # the hardware disagrees with nvFuser: what, and the GPU run showing it
    target: str = "sm_90a"
    run: Callable | None = None  # run(kernel, torch): runs it on the GPU at 3+ sizes, asserts the values
    raises: str | None = None  # THROWS at the scheduling call (nvFuser's NVF_CHECK there): the build's ScheduleError matches this

    @property
    def id(self) -> str:
        return self.test

    @property
    def expects_valid(self) -> bool:
        """tileproof's expected verdict: nvFuser's, or the hardware's where they differ."""
        return (self.nvfuser == VALID) != (self.differs is not None)


def params(cases: list[Case]) -> list:
    """pytest parameters for `cases`: a case with a gap is a strict expected failure."""
    return [pytest.param(c, id=c.id, marks=[pytest.mark.xfail(strict=True, reason=c.gap)] if c.gap else [])
            for c in cases]


def check(case: Case) -> None:
    """tileproof's verdict on the case is nvFuser's (or the hardware's, where `differs`)."""
    if case.raises is not None:
        with pytest.raises(tp.ScheduleError, match=case.raises):
            case.build()
        return
    fusion = case.build()
    report = tp.verify(fusion, case.target)
    if case.expects_valid:
        assert report.ok, f"{case.test}: nvFuser accepts it, tileproof rejects it: {report.codes}\n" + \
            "\n".join(d.message for d in report.errors)
        kernel = tp.compile(fusion, case.target)
        assert kernel.cuda_source, case.test
    else:
        assert not report.ok, f"{case.test}: nvFuser throws, tileproof accepts it"
        assert set(case.codes) <= set(report.codes), (case.test, report.codes)


def count(modules: list) -> dict[str, int]:
    """Translated TESTs per verdict over the modules' CASES: agree, gap, differs."""
    cases = [c for m in modules for c in m.CASES]
    return {"translated": len(cases), "agree": sum(c.gap is None and c.differs is None for c in cases),
            "gap": sum(c.gap is not None for c in cases), "differs": sum(c.differs is not None for c in cases)}
