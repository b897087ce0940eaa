"""Autotuning over proved configurations only: tp.autotune verifies every candidate of a space in
parallel, compiles and times the proved ones (never a rejected one: it reports why), and keeps the
winner on disk per (device, shapes, dtypes). docs/autotune.md explains its use.

    space.py        the space: its candidate configurations, checked at the door
    jobs.py         one candidate's work (verify, compile with that verify's report, time), as
                    functions of picklable values that a worker process or a Ray task runs
    local.py        the sweep on this machine: forked worker processes verify, this process times
    distributed.py  the sweep on a Ray cluster: CPU tasks verify, one GPU task per GPU times
    cache.py        the winners on disk, one JSON file per sweep
    sweep.py        tp.autotune and its AutotuneResult

May import model/, verifier/ (verify and its Report) and codegen/ (the kernel builder, the
runtime); Ray only when a sweep asks for executor="ray".
"""

from .jobs import Timing, Verdict
from .sweep import AutotuneResult, autotune

__all__ = ["AutotuneResult", "Timing", "Verdict", "autotune"]
