"""Errors of the code generator and the runtime, each saying what to do next.

A rejected schedule is the user's (ScheduleRejected, with the report); a schedule
feature the lowering does not cover yet is UnsupportedSchedule; NVRTC failing on
our source is CompileError, an InternalError (with the failing line); bad run()
arguments are InputError (naming the input); a machine without a GPU, driver or
NVRTC is NoDeviceError. All are TileproofErrors (model/errors.py). PerformanceWarning is a
Python warning, not an error: the kernel runs, slower than its schedule suggests.
"""

from __future__ import annotations

from ..model.errors import InternalError, TileproofError


class ScheduleRejected(TileproofError):
    """tp.compile of a schedule that did not verify; `.report` says why."""

    def __init__(self, report):
        self.report = report
        codes = ", ".join(report.codes)
        first = report.errors[0].message if report.errors else ""
        super().__init__(
            f"schedule {report.fusion} was rejected for {report.target} ({codes}): {first}; "
            f"see .report or run `tileproof verify` for the full report"
        )


class UnsupportedSchedule(TileproofError, NotImplementedError):
    """A verified schedule uses something the lowering does not emit yet."""


class CompileError(InternalError):
    """NVRTC rejected the source tileproof generated, or an NVRTC call failed: a tileproof bug
    (the schedule verified, so the lowering is at fault). The message quotes the failing line;
    `.log` is NVRTC's full log and `.source` the kernel."""

    def __init__(self, message: str, log: str = "", source: str = ""):
        self.log = log
        self.source = source
        super().__init__(message)


class NoDeviceError(TileproofError, RuntimeError):
    """The CUDA stack a step needs is missing: a GPU and driver for kernel.run, NVRTC for
    tp.compile (verification needs neither)."""


class InputError(TileproofError, ValueError):
    """kernel.run got arrays that do not match the fusion."""


class PerformanceWarning(UserWarning):
    """A kernel that runs correctly but slower than its schedule suggests, and why (a Python
    warning): at compile time, registers ptxas spilled to local memory; at launch, once per launch
    configuration, clusters that do not all fit on the GPU at once."""
