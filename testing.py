"""For research and teaching: build kernels from schedules that tileproof REJECTS.

`tp.compile` never lowers a rejected schedule. This module does, so that the failure a rule
predicts can be shown on a GPU (wrong values, a fault, a refused tensor map). What it
builds is marked as unverified everywhere: the first line of its CUDA source, the
Kernel's `verified` attribute (False) and its `report`, which holds the rejection.

    from tileproof.testing import compile_unverified
    kernel = compile_unverified(fusion, target="sm_90a")
    assert not kernel.verified and kernel.report.codes == ["THREAD-VISIBILITY"]

Never use it to ship kernels: nothing it returns was proved.
"""

from __future__ import annotations

from .codegen.compile import Kernel, build_kernel
from .model.errors import ScheduleError
from .model.fusion import Fusion
from .model.targets import get_target
from .verifier.verify import verify

UNVERIFIED_BANNER = "// UNVERIFIED: built by tileproof.testing.compile_unverified from a rejected schedule"


def compile_unverified(fusion: Fusion, target="sm_90a") -> Kernel:
    """Lower and compile `fusion` whatever its verdict; the Kernel carries the report.
    Lowering may still refuse what the code generator cannot express (UnsupportedSchedule)."""
    if not isinstance(fusion, Fusion):
        raise ScheduleError(f"compile_unverified: expected a tp.Fusion, got {type(fusion).__name__}")
    tgt = get_target(target)
    report = verify(fusion, tgt)
    banner = "" if report.ok else f"{UNVERIFIED_BANNER} ({', '.join(report.codes)})\n"
    return build_kernel(fusion.snapshot(), report, tgt, banner)


__all__ = ["compile_unverified", "UNVERIFIED_BANNER"]
