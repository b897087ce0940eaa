"""An MmaOp's statement as the tensor cores run it. With a macro, one warp (mma.sync) or
warpgroup (wgmma) computes each M x N x K tile, and lane l's element v of each operand is the tile
position the instruction's fragment map gives (execution/mma.py `MacroFragments`).
`mma_execution` is D's execution model (execution/statements.py) with the Mma axes' indices
replaced by those positions, one view per operand role:

    A   the (m, k) of the tile that lane l's A element v holds   (D's N index 0)
    B   the (k, n) of B element v                                (D's M index 0)
    C   the (m, n) of accumulator element v                      (D's K index 0)

so "the element the schedule puts in (lane, register)" is the index algebra's, and the
verifier's register-ownership proof over these views is MMA-OPERAND-LAYOUT (A, B: the thread
that wrote the operand's register is the lane that the fragment map says holds it, at that
register) and MMA-ACCUM-LAYOUT (C: a consumer of D reads the accumulator in the lane that holds
it).
"""

from __future__ import annotations


from ..model.expr import Expr, add, const, mod, mul, try_int, var
from ..model.mma_op import ELEMENT_VARS, LANE
from ..model.tensor import TensorView
from ..model.types import ParallelType
from .mma import fragments, mma_axes
from .statements import CondKind, TensorExecution, store_execution, tensor_execution


TIDY = ParallelType.TIDy.cuda_name


def split_lanes(launch: dict, threads: int) -> int | None:
    """blockDim.x where the `threads` of an instruction (a warp's 32, a warpgroup's 128) are split
    over TIDx and TIDy: blockDim.x a constant below `threads` that divides it, blockDim.y a
    multiple of threads / blockDim.x (a wgmma's accumulators as TIDy{32} x TIDx{4}: a row's quad
    on TIDx alone, so that a row reduces over TIDx); None where TIDx is the warp(group) itself."""
    if LANE not in launch or ParallelType.TIDy not in launch:
        return None
    bdx = try_int(launch[LANE])
    if bdx is None or bdx >= threads or threads % bdx:
        return None
    bdy = try_int(launch.get(ParallelType.TIDy, const(1)))
    return bdx if bdy is not None and bdy % (threads // bdx) == 0 else None


def instruction_thread(launch: dict, threads: int) -> Expr:
    """The index of the running thread among the `threads` that issue an instruction together: the
    linear thread index threadIdx.x + blockDim.x threadIdx.y modulo `threads` (the hardware's), which
    is threadIdx.x where TIDx is the warp(group) (MMA-WARP-COLLECTIVE)."""
    bdx = split_lanes(launch, threads)
    lane = var(LANE.cuda_name)
    if bdx is None:
        return lane
    rows = threads // bdx
    y = var(TIDY) if try_int(launch[ParallelType.TIDy]) == rows else mod(var(TIDY), const(rows))
    return add(lane, mul(const(bdx), y))


def lane_types(launch: dict, threads: int) -> tuple[ParallelType, ...]:
    """The thread types instruction_thread is made of."""
    return (LANE,) if split_lanes(launch, threads) is None else (LANE, ParallelType.TIDy)


def lane_vars(launch: dict, threads: int) -> tuple[str, ...]:
    """The thread indices instruction_thread is made of."""
    return tuple(p.cuda_name for p in lane_types(launch, threads))


def mma_execution(tv: TensorView, launch: dict, role: str, names: dict[int, str] | None = None):
    """tv's execution model (execution/statements.py) seen from role's fragment: the Mma axes' indices
    are element `ELEMENT_VARS[role]` of the macro tile of the thread instruction_thread (threadIdx.x,
    or split over TIDx and TIDy) (the accumulate reads A and B at these points; C is where the
    accumulator's elements are stored)."""
    ex = (store_execution if role == "C" else tensor_execution)(tv, launch, names)
    axes = mma_axes(tv)
    frag = fragments(tv)
    lanes = lane_vars(launch, frag.inst.threads)
    row, col = frag.position(role, instruction_thread(launch, frag.inst.threads), var(ELEMENT_VARS[role]))
    value = {"A": {"M": row, "K": col, "N": const(0)}, "B": {"K": row, "N": col, "M": const(0)},
             "C": {"M": row, "N": col, "K": const(0)}}[role]
    subs = {}
    for r in ("M", "N", "K"):
        e = ex.env[axes.of(r).uid]
        if e.op == "var":
            subs[e.value] = value[r]
    out = ex.renamed(subs)
    # the lanes store different elements: no single writer along them
    conds = tuple(c for c in out.conds if not (c.kind is CondKind.SINGLE_WRITER and
                                               any(c.lhs == var(name) for name in lanes)))
    ranges = {k: v for k, v in out.ranges.items() if k not in subs}
    ranges[ELEMENT_VARS[role]] = const(frag.elements(role))
    if len(lanes) == 1:
        ranges[LANE.cuda_name] = const(frag.inst.threads)  # MMA-WARP-COLLECTIVE: blockDim.x is the warp(group)
    else:
        ranges.update({p.cuda_name: launch[p] for p in (LANE, ParallelType.TIDy)})
    return TensorExecution(out.tensor, out.env, ranges, out.indices, conds, out.launch_index)


def tile_conds(tv: TensorView, ex, conds) -> tuple[list, list]:
    """`conds` (of tv's plain execution `ex`) split into (those the whole warp shares, the holes of
    the K tile); the holes of the M and N tiles are dropped: they only make rows and columns of
    the tile that no store reads."""
    axes = mma_axes(tv)
    names = {}
    for role in ("M", "N", "K"):
        e = ex.env[axes.of(role).uid]
        if e.op == "var":
            names[e.value] = role
    uniform, k_holes = [], []
    for c in conds:
        used = {names[v] for v in (c.lhs.free_vars() | c.rhs.free_vars()) if v in names}
        if not used:
            uniform.append(c)
        elif "K" in used:
            k_holes.append(c)
    return uniform, k_holes
