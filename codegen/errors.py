"""Errors of the code generator and the runtime, each saying what to do next.

A rejected schedule is the user's (ScheduleRejected, with the report); a schedule
feature the lowering does not cover yet is UnsupportedSchedule; NVRTC failing on
our source is CompileError (with the failing line); bad run() arguments are
InputError (naming the input); a machine without a GPU is NoDeviceError.
"""

from __future__ import annotations


class ScheduleRejected(Exception):
    """tp.compile of a schedule that did not verify; `.report` says why."""

    def __init__(self, report):
        self.report = report
        codes = ", ".join(report.codes)
        first = report.errors[0].message if report.errors else ""
        super().__init__(
            f"schedule {report.fusion} was rejected for {report.target} ({codes}): {first}; "
            f"see .report or run `tileproof verify` for the full report"
        )


class UnsupportedSchedule(NotImplementedError):
    """A verified schedule uses something the lowering does not emit yet."""


class CompileError(RuntimeError):
    """NVRTC rejected the generated source: the message quotes the failing line."""

    def __init__(self, message: str, log: str = "", source: str = ""):
        self.log = log
        self.source = source
        super().__init__(message)


class NoDeviceError(RuntimeError):
    """No usable NVIDIA GPU or driver: only kernel.run needs one."""


class InputError(ValueError):
    """kernel.run got arrays that do not match the fusion."""
