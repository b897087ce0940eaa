"""Threads as the hardware groups them: warps of 32, warpgroups of 4 warps, and the linear id of
a thread in its block (threadIdx.x fastest), with its inverse.
"""

from __future__ import annotations

from ..model.expr import Expr, add, floordiv, mod, mul, var
from ..model.types import THREAD_TYPES

WARP = 32
WARPGROUP = 128


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
