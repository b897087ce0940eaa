"""The sweep on this machine: candidates verified by a pool of worker processes (each proof is pure
CPU and independent of the others), the proved ones compiled and timed here, on this process's GPU.

On Linux the workers are forked from this process, as `tileproof verify -j` forks them, so that the
builder need not be picklable (a lambda, a closure); elsewhere they are spawned and the builder is
pickled to each once. A Verdict comes back pickled, its Report with it. Imports jobs.py.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from typing import Callable

from ..model.errors import ScheduleError
from ..model.fusion import Fusion
from .jobs import Timing, Verdict, compile_only, make_inputs, probe, time_candidates, verify_candidate
from .space import Config


def default_workers() -> int:
    """The CPUs this process may run on (its affinity, where the OS says)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


_BUILD: Callable[..., Fusion] | None = None  # what this worker's verify_candidate builds with


def _install_build(build: Callable[..., Fusion]) -> None:
    global _BUILD
    _BUILD = build


def _verify_in_worker(index: int, config: Config, target: str) -> Verdict:
    return verify_candidate(_BUILD, index, config, target)


class ProcessRunner:
    """tp.autotune(..., executor="processes"): `workers` processes verify (default: one per CPU)."""

    name = "processes"

    def __init__(self, workers: int | None = None):
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
            raise ScheduleError(f"autotune: workers must be a positive int (processes that verify), got {workers!r}")
        self.workers = workers if workers is not None else default_workers()
        self.inputs = None

    def __enter__(self) -> "ProcessRunner":
        return self

    def __exit__(self, *exc) -> None:
        self.inputs = None

    def verify(self, build: Callable[..., Fusion], configs: list[Config], target: str) -> list[Verdict]:
        workers = min(self.workers, len(configs))
        if workers == 1:
            return [verify_candidate(build, k, c, target) for k, c in enumerate(configs)]
        context = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
        with ProcessPoolExecutor(workers, mp_context=context, initializer=_install_build,
                                 initargs=(build,)) as pool:
            futures = [pool.submit(_verify_in_worker, k, c, target) for k, c in enumerate(configs)]
            return [f.result() for f in futures]

    def probe(self, inputs) -> tuple[str, list]:
        self.inputs = make_inputs(inputs)  # made once: probed, then timed
        return probe(self.inputs)

    def compile_only(self, build: Callable[..., Fusion], proved: list[Verdict], target: str) -> list[Timing]:
        return [compile_only(build, v, target) for v in proved]

    def time(self, build: Callable[..., Fusion], proved: list[Verdict], target: str, inputs, sizes: dict,
             iterations: int, warmup: int) -> list[Timing]:
        arrays = self.inputs if self.inputs is not None else inputs
        return time_candidates(build, proved, target, arrays, sizes, iterations, warmup)


__all__ = ["ProcessRunner", "default_workers"]
