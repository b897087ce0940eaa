"""The MmaOp: tp.fused_multiply_sum / tp.matmul (nvFuser's MmaOp on broadcast operands), its
macro and its Mma loop axes.

`D = fused_multiply_sum(A, B, axes)` is a reduction (OpKind.REDUCTION, name "fms"): D[.., m, n]
= sum over k of A[.., m, 1, k] * B[.., 1, n, k], added in float32. Each output axis is an M axis
(B broadcast there), an N axis (A broadcast there), a K axis (reduced) or a batch axis. Without a
macro it runs as any reduction (one fused multiply-add per term). With
`D.definition.set_macro(macro)` and the macro's M x N x K tile as D's three innermost loop IDs,
bound to ParallelType.Mma, one warp computes each tile with `macro.issues` mma.sync
instructions (a warpgroup, with wgmma; one thread, with tcgen05.mma, into tensor memory). How that runs on the tensor cores (each lane's fragment,
the statement seen from each operand's fragment) is derived in execution/mma.py and
execution/mma_execution.py, once for the verifier and the code generator.
"""

from __future__ import annotations


from .errors import ScheduleError
from .extent_unification import unify_extents
from .fusion import MMA_OP, Op, is_mma_op
from .iterdomain import IterDomain
from .options import MmaArch
from .ops import broadcast
from .reduction import _axes, element_axes, is_reduction_tensor
from .tensor import TensorView
from .tensor_base import check_tensor
from .types import IterType, OpKind, ParallelType, float32

OPERAND_DTYPES = ("float32", "bfloat16", "float16")
LANE = ParallelType.TIDx  # the lanes of the warp that issues an instruction
ROLES = ("A", "B", "C")
INSTRUCTION_AXES = 3  # an MmaOp's loop domain ends with its M, N and K Mma axes (MMA-SHAPE)
ELEMENT_VARS = {role: f"mma.{role}" for role in ROLES}  # the element index v of each role's fragment


# -- the op -----------------------------------------------------------------------------------

def fused_multiply_sum(a: TensorView, b: TensorView, axes) -> TensorView:
    """The sum over `axes` of a * b, in float32: nvFuser's fusedMultiplySum (an MmaOp). a and b
    have the same number of axes; on every axis that is not reduced one of them may be a
    broadcast (A is broadcast on the N axes, B on the M axes).

        a = tp.broadcast(a2, [False, True, False])   # [M, 1, K]
        b = tp.broadcast(b2, [True, False, False])   # [1, N, K]
        d = tp.fused_multiply_sum(a, b, [-1])         # [M, N, rK]"""

    func = "fused_multiply_sum"
    check_tensor(func, a, "a")
    check_tensor(func, b, "b")
    for arg, t in (("a", a), ("b", b)):
        if t.dtype.name not in OPERAND_DTYPES:
            raise ScheduleError(f"{func}: {arg} ({t.name}) is {t.dtype}; operands are float32 (tf32 on the tensor "
                                f"cores), bfloat16 or float16")
        if is_reduction_tensor(t) or any(i.is_reduction for i in t.logical):
            raise ScheduleError(f"{func}: {arg} ({t.name}) has reduction axes; copy it first (tp.set) so that its "
                                f"axes are the ones you see")
    if a.dtype != b.dtype:
        raise ScheduleError(f"{func}: a is {a.dtype} and b is {b.dtype}; the tensor cores take operands of one dtype "
                            f"(tp.cast one of them)")
    if len(a.logical) != len(b.logical):
        raise ScheduleError(f"{func}: a has {len(a.logical)} axes and b {len(b.logical)}; broadcast them to the "
                            f"same number (tp.broadcast), e.g. a [M, 1, K] and b [1, N, K]")
    reduced = _axes(func, a, axes)
    for k in reduced:
        if b.logical[k].is_broadcast:
            raise ScheduleError(f"{func}: axis {k} of b ({b.name}) is a broadcast axis, which cannot be reduced with "
                                f"a's {a.logical[k].label()}")
    for k, (x, y) in enumerate(zip(a.logical, b.logical)):  # mapped axes have one extent, as nvFuser's exact map
        if not x.is_broadcast and not y.is_broadcast:
            unify_extents(a.fusion, func, x, y, f"{a.name} axis {k}", f"{b.name} axis {k}")
    ids = []
    for k, (x, y) in enumerate(zip(a.logical, b.logical)):
        src = y if x.is_broadcast else x
        kind = IterType.Reduction if k in reduced else src.iter_type
        ids.append(IterDomain(src.extent_expr, number=a.fusion.next_iterdomain_number(), iter_type=kind))
    out = TensorView(a.fusion, ids, float32)
    mapping = list(range(len(ids)))
    a.fusion._register_op(Op(OpKind.REDUCTION, [a, b], out, [mapping, list(mapping)], name=MMA_OP))
    return out


def matmul(a: TensorView, b: TensorView) -> TensorView:
    """a @ b for a [M, K] and b [K, N], in float32: fused_multiply_sum of a broadcast to
    [M, K, 1] and b to [1, K, N] over axis 1 (the output's logical domain is [M, rK, N])."""

    for arg, t in (("a", a), ("b", b)):
        check_tensor("matmul", t, arg)
        if len(element_axes(t)) != 2:
            raise ScheduleError(f"matmul: {arg} ({t.name}) has {len(element_axes(t))} axes; matmul takes 2-D "
                                f"operands (use tp.fused_multiply_sum for others)")
    return fused_multiply_sum(broadcast(a, [False, False, True]), broadcast(b, [True, False, False]), [1])


def is_wgmma_op(op: Op | None) -> bool:
    """An MmaOp on a Hopper macro: a warpgroup's asynchronous wgmma."""
    return is_mma_op(op) and op.macro is not None and op.macro.arch is MmaArch.Hopper


def is_tcgen05_op(op: Op | None) -> bool:
    """An MmaOp on a Blackwell1CTA macro: one thread's asynchronous tcgen05.mma, its
    accumulators in tensor memory."""
    return is_mma_op(op) and op.macro is not None and op.macro.arch is MmaArch.Blackwell1CTA


def is_mma(tv: TensorView) -> bool:
    """Whether tv is computed on the tensor cores: an MmaOp with a macro."""
    return is_mma_op(tv.definition) and tv.definition.macro is not None


# -- the roles of D's axes and its Mma loop IDs ------------------------------------------------------



# -- the macro's tile as fragments -------------------------------------------------------------------



# -- the execution model of each role ----------------------------------------------------------------



__all__ = ["ELEMENT_VARS", "INSTRUCTION_AXES", "LANE", "fused_multiply_sum", "is_mma", "is_tcgen05_op", "is_wgmma_op",
           "matmul"]
