"""Which statements run past the end of K on zeros: the operand paths of a tensor-core MmaOp.

An mma.sync adds the products of its whole K tile and is warp-collective: where the K tile does
not divide K, the last tile reaches past K and no lane can skip it, so the products past K must
be 0 in both operands (stale shared memory may hold NaN, and NaN x 0 is NaN); a wgmma likewise.
tileproof lowers such a tail as CUTLASS and nvFuser do. Each operand is staged global -> shared
by cp.async or by a TMA load, then by plain copies (tp.set, ldmatrix) through shared memory and
registers, its "zero path". The cp.async writes zeros past K (src-size 0: it reads no global
byte there); so does the TMA, where K is one dimension of its tensor map (of size K): the
coordinates past it are out of bounds, and the tensor map's out-of-bounds fill is NONE (zeros;
codegen/runtime/tensor_maps.py). Every later copy and
the MmaOp itself run at the points past K too, carrying those zeros: for them, the bound of
the logical K axis is not a predicate (TensorExecution.padding) but a point that executes.

A register operand computed by an op that is not a copy (attention's P, converted for the second
product: tp.cast, tp.broadcast of registers) ends its zero path itself, "zero-filled": its
statement runs past K too and writes 0 there, reading its inputs only within K (zero_filled;
TensorExecution.reads_within, and the code generator's select). Its inputs are registers, so
no shared or global access runs past K.

Only the bound of K itself is lifted; a hole of a split of K (a K tile split by a factor it is
not a multiple of) stays a predicate, and REDUCTION-K rejects it at the MmaOp. REDUCTION-K also
proves that every read past K finds a point its producer wrote. The other rules see the padded
points as points that execute: visibility, fragment layouts and distinct addresses are proved
over them as over any other.
"""

from __future__ import annotations

from ..model.tensor import TensorView
from ..model.types import LoadStoreOpType, MemoryType, OpKind
from ..model.mma_op import is_mma
from ..hw.tma import infer_tma
from ..hw.cp_async import is_cp_async
from .derive import per_fusion
from .mma import mma_axes, well_formed

COPIES = (LoadStoreOpType.Set, LoadStoreOpType.LdMatrix, LoadStoreOpType.CpAsync, LoadStoreOpType.TMA)
FILLABLE = (OpKind.UNARY, OpKind.BINARY, OpKind.TERNARY, OpKind.CAST, OpKind.BROADCAST)  # elementwise, in registers


def zero_path(d: TensorView, k: int) -> tuple[list[tuple[TensorView, int]], str | None]:
    """Operand k's path back from MmaOp d: the copies from its register (or shared) operand up
    to the cp.async or TMA load that reads global memory, each with the logical position of its
    K axis, and None; or ([], why it is not a zero path)."""
    op = d.definition
    axes = mma_axes(d)
    if axes is None:
        return [], f"{d.name} has no Mma K axis"
    pos = op.logical_map[k][list(d.root).index(axes.roots[2])]
    tv = op.inputs[k]
    out: list[tuple[TensorView, int]] = []
    while True:
        step = tv.definition
        if tv.memory_type not in (MemoryType.Shared, MemoryType.Local) or step is None:
            return [], f"{tv.name} is {tv.memory_type.value.lower()} memory, read past K without a cp.async before it"
        if _fills_zeros(tv) and (step.kind is not OpKind.LOAD_STORE or step.op_type not in COPIES):
            if pos is None or tv.logical[pos].is_broadcast:
                return [], f"{tv.name}'s K axis is a broadcast"
            return out + [(tv, pos)], None  # computed in registers: zeros past K (zero_filled)
        if step.kind is not OpKind.LOAD_STORE or step.op_type not in COPIES or len(step.inputs) != 1:
            return [], f"{tv.name} = {step.name}(...) is not a copy (tp.set, ldmatrix or cp.async)"
        if pos is None or tv.logical[pos].is_broadcast:
            return [], f"{tv.name}'s K axis is a broadcast"
        out.append((tv, pos))
        src = step.inputs[0]
        if is_cp_async(step) or step.op_type is LoadStoreOpType.TMA:
            kind = "cp.async" if is_cp_async(step) else "TMA"
            if src.memory_type is not MemoryType.Global:
                return [], f"{tv.name}'s {kind} reads {src.name}, not global memory"
            if kind == "TMA":
                info = infer_tma(step).info
                k_id = tv.logical[pos].name
                if not info.ok or not any(dim.ids == (k_id,) for dim in info.dims):
                    return [], (f"{tv.name}'s TMA does not have K ({tv.logical[pos].label()}) as a dimension of its "
                                f"own, so the elements past K are not out of its bounds (zeros)")
            return out, None
        if src.memory_type is MemoryType.Global:
            return [], (f"{tv.name} = {step.op_type.value}({src.name}) reads global memory with a copy that skips the "
                        f"elements past K (only a cp.async writes zeros there)")
        pos = step.logical_map[0][pos]
        tv = src


def _fills_zeros(tv: TensorView) -> bool:
    """A register tensor computed from registers by an elementwise op (no reduction, no copy from
    memory): its statement can write 0 past K instead of its value."""
    op = tv.definition
    return (tv.memory_type is MemoryType.Local and op is not None and op.kind in FILLABLE
            and all(t.memory_type is MemoryType.Local and not t.is_fusion_input for t in op.inputs))


def is_zero_filled(tv: TensorView) -> bool:
    """Whether tv ends a zero path computed (module docstring): past K its statement writes 0 and
    reads nothing."""
    return tv.name in zero_filled(tv.fusion)


@per_fusion
def zero_filled(fusion) -> frozenset[str]:
    """The tensors ending a zero path of a padded MmaOp computed, not copied from memory."""
    heads = set()
    for d in fusion.tensors:
        if not is_mma(d) or mma_axes(d) is None or d.name not in zero_padded(fusion):
            continue
        for k in (0, 1):
            path, _ = zero_path(d, k)
            head = path[-1][0]
            if head.definition.kind is not OpKind.LOAD_STORE or head.definition.op_type not in COPIES:
                heads.add(head.name)
    return frozenset(heads)


@per_fusion
def zero_padded(fusion) -> dict[str, int]:
    """Tensor name -> uid of the logical (for an MmaOp: root) K ID whose bound it runs past, for
    every well-formed MmaOp whose two operands have zero paths, and the tensors on those paths."""
    out: dict[str, int] = {}
    for d in fusion.tensors:
        if not is_mma(d) or mma_axes(d) is None:
            continue
        paths = [zero_path(d, k) for k in (0, 1)]
        if any(why is not None for _, why in paths) or not well_formed(d):
            continue
        out[d.name] = mma_axes(d).roots[2].uid
        for path, _ in paths:
            out.update({tv.name: tv.logical[pos].uid for tv, pos in path})
    return out


__all__ = ["COPIES", "is_zero_filled", "zero_filled", "zero_padded", "zero_path"]
