"""The work of an autotuning sweep, one candidate at a time, as plain functions of picklable values:
what a worker process or a Ray task runs (local.py and distributed.py ship these, nothing else).

    verify_candidate   build the candidate and verify it (pure CPU): a Verdict
    compile_candidate  compile a proved candidate with the report its verify gave (no second proof)
    compile_only       compile_candidate as a record (the proved set without a GPU)
    time_candidates    compile each proved candidate and time it on this process's GPU: Timings
    probe              the GPU the inputs are on and their shapes, strides and dtypes

A rejected candidate never reaches compile_candidate: it refuses any Verdict that is not proved.
Imports the model (fingerprints), the verifier (verify) and codegen (the kernel builder, the runtime's
array descriptions and device names).
"""

from __future__ import annotations

import os
import socket
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from ..codegen.compile import Kernel, build_kernel
from ..codegen.runtime import driver
from ..codegen.runtime.arrays import describe
from ..model.errors import InternalError, ScheduleError, TileproofError
from ..model.fingerprint import fingerprint
from ..model.fusion import Fusion
from ..model.targets import get_target
from ..verifier.diagnostics import Report
from ..verifier.verify import verify
from .space import Config, shown

PROVED, REJECTED, INVALID = "proved", "rejected", "invalid"


@dataclass
class Verdict:
    """One candidate after verification: `status` PROVED, REJECTED (the rule `codes` of its errors,
    the first error's `message`) or INVALID (the builder refused the configuration at the door: its
    ScheduleError in `message`); the `report`, the schedule's `fingerprint`, the `seconds` it took and
    the `worker` (host:pid) that verified it."""

    index: int
    config: Config
    status: str
    codes: tuple[str, ...] = ()
    message: str = ""
    fingerprint: str = ""
    report: Report | None = None
    seconds: float = 0.0
    builder_error: str = ""  # the builder raised something other than a ScheduleError, or returned no Fusion
    worker: str = ""

    @property
    def proved(self) -> bool:
        return self.status == PROVED

    def line(self) -> str:
        """One line for a summary: `rejected  tile=(256, 128), stages=4: SMEM-CAPACITY, WS-REGISTERS`."""
        why = ", ".join(self.codes) if self.status == REJECTED else self.message
        return f"{self.status:<8}  {shown(self.config)}" + (f": {why}" if why else "")


@dataclass
class Timing:
    """A proved candidate compiled and timed: `seconds` per launch, or the `error` that stopped it
    (a CompileError is a tileproof bug; a launch the GPU refuses is reported, not fatal), and the
    `device` that timed it."""

    index: int
    compiled: bool = False
    seconds: float | None = None
    error: str = ""
    device: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def build_fusion(build: Callable[..., Fusion], config: Config) -> Fusion:
    fusion = build(**config)
    if not isinstance(fusion, Fusion):
        raise ScheduleError(f"autotune: build({shown(config)}) must return a tp.Fusion, got "
                            f"{type(fusion).__name__}")
    return fusion


def verify_candidate(build: Callable[..., Fusion], index: int, config: Config, target: str) -> Verdict:
    """Build the candidate and verify it for `target`, with every rule and no bind (the proof that
    tp.compile would make)."""
    start, worker = time.perf_counter(), f"{socket.gethostname()}:{os.getpid()}"
    try:
        fusion = build(**config)
    except ScheduleError as e:
        return Verdict(index, config, INVALID, message=str(e), seconds=time.perf_counter() - start, worker=worker)
    except Exception as e:  # noqa: BLE001 - reported to the caller with its traceback, not swallowed
        return Verdict(index, config, INVALID, message=f"{type(e).__name__}: {e}", seconds=time.perf_counter() - start,
                       builder_error=f"build({shown(config)}) raised {type(e).__name__}: {e}\n{traceback.format_exc()}",
                       worker=worker)
    if not isinstance(fusion, Fusion):
        return Verdict(index, config, INVALID, message=f"build returned {type(fusion).__name__}", worker=worker,
                       builder_error=f"build({shown(config)}) must return a tp.Fusion, got {type(fusion).__name__}")
    tgt = get_target(target)
    report = verify(fusion, tgt)
    codes = tuple(sorted({d.code for d in report.errors}))
    return Verdict(index, config, PROVED if report.ok else REJECTED, codes=codes,
                   message=report.errors[0].message if report.errors else "",
                   fingerprint=fingerprint(fusion, tgt.name), report=report, seconds=time.perf_counter() - start,
                   worker=worker)


def compile_candidate(build: Callable[..., Fusion], verdict: Verdict, target: str) -> Kernel:
    """The kernel of a proved candidate: the builder run again, its schedule checked to be the one
    proved (same fingerprint), lowered with the decisions of that proof."""
    if not verdict.proved or verdict.report is None or not verdict.report.ok:
        raise InternalError(f"tileproof bug, please report: autotune asked to compile candidate {verdict.index} "
                            f"({shown(verdict.config)}), which is {verdict.status}, not proved")
    tgt = get_target(target)
    fusion = build_fusion(build, verdict.config)
    if fingerprint(fusion, tgt.name) != verdict.fingerprint:
        raise ScheduleError(f"autotune: build({shown(verdict.config)}) gave another schedule when called again "
                            f"(its fingerprint changed); a builder must give the same fusion for the same "
                            f"configuration")
    return build_kernel(fusion.snapshot(), verdict.report, tgt)


def compile_only(build: Callable[..., Fusion], verdict: Verdict, target: str) -> Timing:
    """compile_candidate as a record: compiled, or the error (without timing)."""
    try:
        compile_candidate(build, verdict, target)
    except TileproofError as e:
        return Timing(verdict.index, error=f"{type(e).__name__}: {e}")
    return Timing(verdict.index, compiled=True)


def time_candidates(build: Callable[..., Fusion], verdicts: list[Verdict], target: str, inputs,
                    sizes: dict[str, int], iterations: int, warmup: int) -> list[Timing]:
    """Compile each proved candidate and time it on the inputs (made here when `inputs` is a
    function: a Ray task on its own GPU), one after another on one GPU."""
    arrays = make_inputs(inputs)
    device = device_of(arrays)
    timings = []
    for verdict in verdicts:
        timing = Timing(verdict.index, device=device)
        try:
            kernel = compile_candidate(build, verdict, target)
            timing.compiled = True
            timing.seconds = kernel.benchmark(*arrays, iterations=iterations, warmup=warmup, **sizes)
        except TileproofError as e:
            timing.error = f"{type(e).__name__}: {e}"
        timings.append(timing)
    return timings


def make_inputs(inputs) -> tuple:
    arrays = inputs() if callable(inputs) else inputs
    if not isinstance(arrays, (tuple, list)):
        raise ScheduleError(f"autotune: inputs must be a tuple of arrays or a function returning one, got "
                            f"{type(arrays).__name__}")
    return tuple(arrays)


def device_of(arrays: tuple) -> str:
    """The name of the GPU the first array is on (NoDeviceError without a GPU and driver)."""
    if not arrays:
        raise ScheduleError("autotune: inputs is empty; the kernels are timed on the fusion's input arrays")
    info = describe(arrays[0])
    if info.device != "cuda":
        raise ScheduleError(f"autotune: inputs must be on the GPU (the kernels are timed on them), the first is on "
                            f"{info.device}")
    device_id = info.device_id if info.device_id is not None else driver.pointer_device(info.ptr)
    return driver.device_name(device_id)


def probe(inputs) -> tuple[str, list]:
    """(the GPU's name, each input's [shape, strides, dtype]): what a cached winner is looked up by."""
    arrays = make_inputs(inputs)
    device = device_of(arrays)
    signature = []
    for array in arrays:
        info = describe(array)
        signature.append([list(info.shape), list(info.strides), info.dtype])
    return device, signature


__all__ = ["INVALID", "PROVED", "REJECTED", "Timing", "Verdict", "compile_candidate", "compile_only", "probe",
           "time_candidates", "verify_candidate"]
