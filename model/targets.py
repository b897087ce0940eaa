"""Targets as data: the limits the verifier checks against (measured on H200 for sm_90a;
from the PTX ISA and CUTLASS for sm_100a)."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ScheduleError


@dataclass(frozen=True)
class Target:
    """A GPU architecture as the verifier sees it: the limits its rules check (threads, block and
    grid dimensions, shared memory per block with and without opting in, tensor-memory lanes and
    columns, TMA). tp.TARGETS holds the two known ones, "sm_90a" (H100/H200) and "sm_100a"
    (Blackwell); everything that takes a target also takes its name.

        tp.get_target("sm_100a").tmem_columns   # 512"""

    name: str
    compute_capability: tuple[int, int]
    warp_size: int = 32
    max_threads_per_block: int = 1024
    max_block_dims: tuple[int, int, int] = (1024, 1024, 64)  # blockDim.x, .y, .z
    max_grid_dims: tuple[int, int, int] = (2 ** 31 - 1, 65535, 65535)  # gridDim.x, .y, .z
    smem_bytes_per_block: int = 232448  # opt-in maximum (227 KiB)
    smem_bytes_default: int = 49152  # without cudaFuncSetAttribute
    tmem_lanes: int = 0  # 0: no tensor memory
    tmem_columns: int = 0
    tmem_min_alloc_columns: int = 32
    tmem_subpartitions: int = 4
    has_tma: bool = True
    sm_count: int = 132  # SMs of the largest part (a grid of fewer blocks leaves SMs idle)
    sm_part: str = "an H100 SXM or H200"

    @property
    def has_tmem(self) -> bool:
        """Whether the target has tensor memory (tcgen05): sm_100a yes, sm_90a no."""
        return self.tmem_lanes > 0

    def __str__(self) -> str:
        return self.name


SM90A = Target("sm_90a", (9, 0))
SM100A = Target("sm_100a", (10, 0), tmem_lanes=128, tmem_columns=512, sm_count=148, sm_part="a B200")
TARGETS = {t.name: t for t in (SM90A, SM100A)}


def get_target(target) -> Target:
    """The Target named `target` ("sm_90a" or "sm_100a"), or `target` itself when it is one;
    ScheduleError for anything else.

        tp.get_target("sm_90a").smem_bytes_per_block   # 232448"""
    if isinstance(target, Target):
        return target
    if isinstance(target, str) and target in TARGETS:
        return TARGETS[target]
    raise ScheduleError(f"unknown target {target!r} for target; expected one of {', '.join(TARGETS)} or a tp.Target")
