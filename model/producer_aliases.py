"""Broadcasts, copies and transposes that are views of a global input (nvFuser's producer aliases).

nvFuser's lowering (csrc/device_lower/analysis/tensor_producer_aliases.cpp, findTensorProducerAliases
and the pass removeTensorProducerAliases) finds a BroadcastOp, LoadStoreOp or SqueezeOp from a
global tensor to a global tensor that is no fusion output, whose non-broadcast allocation axes are
the input's in the same order and equally contiguous (isTrivialExpr): the output is an alias of its
input, the op is dropped, nothing is allocated, and every reader indexes the input's buffer with the
same linear index (a TMA load's tensor map is built over the input, csrc/device_lower/analysis/tma.cpp
getTMAInfo). HopperMatmulTest.HSH_NT_128BSwizzle_BroadcastOp sets its operands' broadcasts to global
memory for this and checks that the kernel allocates no global intermediate; TMemTestCompileOnly.
WrongStride sets a plain copy of its input to global memory.

tileproof does the same on the snapshot that verify and compile read (Fusion.snapshot): such an
op's output becomes a view, a tensor without a definition that the kernel is given (its
`is_fusion_input` is true), laid out by its own global strides, which `view_problem` requires to be
its input's stride for stride (a broadcast axis has none), and passed the input's pointer at launch.
So every rule sees reads of the input's memory, and nothing writes it. The ops: a broadcast, a
plain copy (`tp.set`, LoadStoreOpType.Set, with any cache op: isTrivialExpr reads neither the op
type nor the cache op, and the dropped load's cache hint changes no value) and a transpose
(nvFuser's permute is a LoadStoreOp; a view where its allocation domain keeps its input's order).
A copy of another type (TMA, cp.async, ldmatrix, tensor memory) moves data between other memories
and is never a view here; tileproof has no SqueezeOp. Imports model/ only.
"""

from __future__ import annotations

from .global_layout import global_strides
from .types import LoadStoreOpType, MemoryType, OpKind


def may_view(op) -> bool:
    """Whether `op` moves no data when both its tensors are in global memory and laid out alike:
    a broadcast, a plain copy (tp.set, LoadStoreOpType.Set) or a transpose (nvFuser's permute is
    a LoadStoreOp Set too), the ops nvFuser's isTrivialExpr takes that tileproof has."""
    return op.kind in (OpKind.BROADCAST, OpKind.TRANSPOSE) or (
        op.kind is OpKind.LOAD_STORE and op.op_type is LoadStoreOpType.Set)


def view_problem(op) -> str | None:
    """Why the output of `op` (a broadcast, a plain copy or a transpose) is not a view of its input,
    or None when it is: both in global memory, the output no fusion output, the input a fusion
    input (or such a view), and each non-broadcast axis of the output with the stride of the input
    axis it reads (nvFuser's isTrivialExpr)."""
    src, out = op.inputs[0], op.output
    if not may_view(op):
        kind = f"a {op.op_type.value} copy" if op.kind is OpKind.LOAD_STORE else str(op.kind)
        return f"{out.name} is computed by {kind}, not a broadcast, a plain copy (tp.set) or a transpose"
    if out.memory_type is not MemoryType.Global:
        return f"{out.name} is not in global memory"
    if out.is_fusion_output:
        return f"{out.name} is a fusion output, which the kernel writes"
    if src.memory_type is not MemoryType.Global:
        return (f"its input {src.name} is in {src.memory_type.value} memory, not a global tensor the kernel is "
                f"given, so the {_name(op)} would copy it into global memory")
    viewed = src.is_fusion_input or (src.definition is not None and may_view(src.definition)
                                     and view_problem(src.definition) is None)
    if not viewed:
        return (f"its input {src.name} is a global tensor the kernel computes, not a fusion input: a view reads "
                f"the memory of a tensor the kernel is given")
    return _layout_problem(op)


def _layout_problem(op) -> str | None:
    """Whether the output's layout reads the input's buffer at the same offsets (equal strides,
    axis for axis; the input's Exprs, since a broadcast's axes take its extents)."""
    src, out = op.inputs[0], op.output
    src_layout, out_layout = global_strides(src), global_strides(out)
    if src_layout is None or out_layout is None:
        return f"the allocation domain of {src.name if src_layout is None else out.name} is no layout of its axes"
    src_stride = dict(zip(src_layout.alloc_axes, src_layout.strides))
    out_stride = dict(zip(out_layout.alloc_axes, out_layout.strides))
    logical_axis = {d.uid: k for k, d in enumerate(out.logical)}  # the op maps root axes, which a commit permutes
    for r, i in enumerate(op.logical_map[0]):
        j = logical_axis[out.root[r].uid]
        if i is None or out.logical[j].is_broadcast or src.logical[i].is_broadcast:
            continue  # a broadcast axis is never indexed (stride 0)
        if out_stride[j] != src_stride[i]:
            return (f"axis {j} of {out.name} has stride {out_stride[j]} where axis {i} of {src.name} has "
                    f"{src_stride[i]} (another allocation order or contiguity), so the {_name(op)} would move data")
    return None


def _name(op) -> str:
    return {OpKind.BROADCAST: "broadcast", OpKind.TRANSPOSE: "transpose"}.get(op.kind, "copy")


def alias_views(fusion) -> None:
    """On a snapshot (a deep copy not yet frozen): each op whose output is a view of its input
    (may_view, view_problem) is dropped (nvFuser's removeTensorProducerAliases); its output keeps its domains
    and layout, has no definition, is inlined nowhere (a tensor the kernel is given), and is listed
    in `fusion.views` with the op that defined it (the reference computes it, the launch passes the
    input's pointer)."""
    for op in list(fusion.exprs):
        if may_view(op) and view_problem(op) is None:
            fusion.exprs.remove(op)
            op.output.definition = None
            op.output.compute_at = 0
            fusion.views[op.output.name] = op


def view_source(tv):
    """The fusion input whose buffer the view `tv` reads (through views of views)."""
    while tv.name in tv.fusion.views:
        tv = tv.fusion.views[tv.name].inputs[0]
    return tv
