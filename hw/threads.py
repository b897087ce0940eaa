"""Threads as the hardware groups them: warps of 32, warpgroups of 4 warps, and the linear id of
a thread in its block (threadIdx.x fastest), with its inverse; the warp-specialized producer's
indices (a warpgroup).
"""

from __future__ import annotations

from ..model.expr import Expr, add, floordiv, mod, mul, var
from ..model.types import THREAD_TYPES

WARP = 32
WARPGROUP = 128
CONSUMER_BARRIER = 1  # the named barrier of a warp-specialized kernel's consumers; 0 is __syncthreads()'s
TURN_BARRIER = 2  # ping-pong: consumer warpgroup w's turn is named barrier TURN_BARRIER + w (execution/ping_pong.py)
NAMED_BARRIERS = 16  # named barriers a block has (PTX ISA, bar.sync: ids 0 to 15)


def producer_indices(other: int | None) -> int:
    """The indices a warp-specialized axis is padded by for its producer, where each of its
    indices stands for `other` threads (the block's threads on the other axes): one where that
    is whole warpgroups, else WARPGROUP / other, so that the producer is one warpgroup (nvFuser's
    ParallelDimensionMap::adjustMappingsForWarpSpecialization: 128 threads on TIDx alone). One
    where `other` is symbolic or divides no warpgroup (WS-ROLES rejects those blocks)."""
    if other is None or other <= 0 or other % WARPGROUP == 0 or WARPGROUP % other:
        return 1
    return WARPGROUP // other


def linear_thread(dims: tuple[Expr, Expr, Expr]) -> Expr:
    """threadIdx.x + threadIdx.y * bdx + threadIdx.z * bdx * bdy."""
    bx, by, _ = dims
    x, y, z = (var(p.cuda_name) for p in THREAD_TYPES)
    return add(x, mul(y, bx), mul(z, bx, by))


def thread_env(linear: Expr, dims: tuple[Expr, Expr, Expr]) -> dict[str, Expr]:
    """threadIdx.{x,y,z} of the thread whose linear id is `linear`."""
    bx, by, _ = dims
    x, y, z = (p.cuda_name for p in THREAD_TYPES)
    return {x: mod(linear, bx), y: mod(floordiv(linear, bx), by), z: floordiv(linear, mul(bx, by))}
