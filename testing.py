"""For research and teaching: build kernels from schedules that tileproof REJECTS.

`tp.compile` never lowers a rejected schedule. This module does, so that the failure a rule
predicts can be shown on a GPU (wrong values, a fault, a refused tensor map). What it
builds is marked as unverified everywhere: the first line of its CUDA source, the
Kernel's `verified` attribute (False) and its `report`, which holds the rejection.

    from tileproof.testing import compile_unverified
    kernel = compile_unverified(fusion, target="sm_90a")
    assert not kernel.verified and kernel.report.codes == ["THREAD-VISIBILITY"]

Never use it to ship kernels: nothing it returns was proved.

A rejected schedule may be one the code generator cannot express (its lowering refuses it) or
one whose lowered source NVRTC / ptxas rejects (an instruction the hardware does not have, say
a 6-D TMA): compile_unverified then raises NotBuilt, an UnsupportedSchedule naming the
rejection's codes. It never reports that as a tileproof bug: the rejection explains it.
"""

from __future__ import annotations

import re

from .codegen.compile import Kernel, build_kernel
from .codegen.errors import CompileError, UnsupportedSchedule
from .model.errors import InternalError
from .model.errors import ScheduleError
from .model.fusion import Fusion
from .model.targets import get_target
from .verifier.verify import rejected_decisions, verify

UNVERIFIED_BANNER = "// UNVERIFIED: built by tileproof.testing.compile_unverified from a rejected schedule"


class NotBuilt(UnsupportedSchedule):
    """compile_unverified could not build a REJECTED schedule: the code generator refuses it, or
    NVRTC / ptxas rejects the source lowered from it. `.report` is the rejection; the error of
    the lowering or of NVRTC is `__cause__`."""

    def __init__(self, message: str, report):
        super().__init__(message)
        self.report = report


def compile_unverified(fusion: Fusion, target="sm_90a") -> Kernel:
    """Lower and compile `fusion` whatever its verdict; the Kernel carries the report.
    A rejected schedule that cannot be built raises NotBuilt (an UnsupportedSchedule); for an
    accepted one, errors are those of tp.compile."""
    if not isinstance(fusion, Fusion):
        raise ScheduleError(f"compile_unverified: expected a tp.Fusion, got {type(fusion).__name__}")
    tgt = get_target(target)
    report = verify(fusion, tgt)
    if report.ok:
        return build_kernel(fusion.snapshot(), report, tgt)
    codes = ", ".join(report.codes)
    report.decisions = rejected_decisions(fusion, tgt, report)
    try:
        return build_kernel(fusion.snapshot(), report, tgt, f"{UNVERIFIED_BANNER} ({codes})\n")
    except CompileError as e:  # the lowered source uses what the target lacks: what the rule predicts
        why = f"NVRTC / ptxas rejected the kernel lowered from it: {e.args[0]}"
        raise NotBuilt(_not_built(fusion, tgt, codes, why), report) from e
    except InternalError as e:  # a lowering check of a condition the rejection already names
        rule = f" (its condition for {e.rule})" if e.rule else ""
        why = f"the code generator refuses it{rule}: {_VERIFIED_CLAIM.sub('', e.args[0])}"
        raise NotBuilt(_not_built(fusion, tgt, codes, why), report) from e
    except UnsupportedSchedule as e:
        raise NotBuilt(_not_built(fusion, tgt, codes, f"the code generator cannot express it: {e}"), report) from e


_VERIFIED_CLAIM = re.compile(r",? yet the schedule verified")  # the lowering's wording assumes tp.compile


def _not_built(fusion: Fusion, tgt, codes: str, why: str) -> str:
    return (f"compile_unverified: schedule {fusion.name} is rejected for {tgt.name} ({codes}) and cannot be built "
            f"anyway: {why}")


__all__ = ["compile_unverified", "NotBuilt", "UNVERIFIED_BANNER"]
