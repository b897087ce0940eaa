"""Which statements run at their holes unpredicated: values that reach memory only through a TMA
store (clipped), and TMA loads with the copies and tensor-core MmaOps that read them (filled).

A hole of an indivisible split is a point past the extent of the split's input. A TMA store
writes its box through the tensor map, which clips every element past the global tensor's
extent (PTX ISA 5.5.3.3: out-of-bounds elements of a store are not written;
docs/hardware.md#tma-out-of-bounds-fill). So a shared tile that only a TMA store reads may hold
anything at its holes, and so may the registers that only such a tile is copied from.
Those statements need no hole predicates, and for a warp-collective one (stmatrix) that is the
difference between running and not: a 16 x 16 stmatrix tile that straddles M = 200 has lanes both
inside and past the edge, and `.aligned` forbids predicating some of them off.

A tensor is clipped when it lives on chip (registers or shared memory), is computed pointwise
from its operands (a copy, stmatrix, a cast, unary or binary arithmetic), has no broadcast axis
but loops of its own that run once (a batch of one), is no fusion output, every tensor reading it
is clipped or is a TMA store to global memory, and
every operand is clipped, filled (below) or in registers: an MmaOp's accumulators (which hold
every element, holes included: execution/statements.py store_execution), or a register tensor
whose statement is predicated at its holes (a residual read from global memory), whose registers
there hold what they held, which a clipped value carries only to the TMA store's clipping. The
greatest such set is found by removing tensors until none fails. The rules then see the holes as points that execute: distinct addresses
(ALLOCATION-DISTINCT), visibility of what they read, whole-warp stmatrix, all proved over them.

A TMA load is filled when it reads global memory, its element strides are 1, and each of its
holes is past the extent of a logical axis that is a dimension of its tensor map of its own (the
bound that fails leads there through outer split outputs and merge outputs: _holes_past_logical).
Its box coordinate there is out of the tensor map's bounds, and the TMA writes zeros
(out-of-bounds fill NONE), counting those bytes on the mbarrier as the ones in bounds. An
on-chip copy of a filled tensor (tp.set, ldmatrix) whose holes are past its logical extents is
filled too: it copies those zeros (the nvFuser tutorial's LdStMatrixSet at 200 x 200). An MmaOp
on the tensor cores whose operands are filled shared tiles (wgmma reads them through
descriptors), and whose own holes are past M or N likewise, runs at its holes on those zeros
into its own accumulators. So a tile past M (the grouped order's padding) is loaded and
multiplied like any other, with no branch in the K loop, and its output discarded by the
epilogue's own predicates or the TMA store's clipping. Only the holes of iteration IDs are lifted
for an MmaOp: a hole of a split of K stays a predicate (execution/zero_padding.py).

A register tensor is computed at its holes too (unread_holes) when its statement reads registers
alone and is defined on any value they may hold: a copy (broadcast), a comparison, floating-point
arithmetic (a cast, unary, binary or ternary op, operands and result float or bool; no integer
arithmetic, whose division by a hole's garbage or overflow C++ leaves undefined), an iota whose
values fit its type at the holes too; it is no fusion output (one ending a zero path past K,
zero_padding.py, keeps its zero select there: attention's P), its holes are past its logical extents, and at every point of its loops
the register it writes and those it reads are inside their arrays (model/simplify.py less_than
over the loop ranges). What a hole point computes is never read where it matters: a point that
executes reads the elements of its own logical indices, which a hole point does not write
(ALLOCATION-DISTINCT, proved over the holes that now execute), so a hole's value reaches only other
holes, as a predicated-off register's unwritten value already does. The statement then needs no
per-element hole branch: in attention at a sequence tail, exp2(S - max) with a row and a key
predicate on each of its 64 elements kept 64 predicates live and spilled (992 bytes at 300 rows).
A register reduction (a sum, max or min of float registers: attention's
row max and row sum) keeps the holes of its reduction axes, which must not contribute, and drops
those of its iteration axes (reduced_at_holes) on the same conditions: a row past M reduces that
row's values, holes all, into that row's register, which only other holes read. At a sequence tail
its loops then test the key bound alone, so a tile of whole keys runs unpredicated
(codegen/lower/whole_tile.py) in the last row tile as in the others; an MmaOp rescaled by such a
max runs its rescale there too (online.py rescale_conds).
"""

from __future__ import annotations


from ..model.expr import try_int
from ..model.ops import _INT_RANGE, COMPARISONS
from .allocation import compute_allocation
from .indexing import (indices_from_logical, indices_from_loop, linear_offset, loop_var, producer_logical,
                       valid_item_bounds)
from ..model.iterdomain import Merge, Split
from .promotion import loop_extents, needed_bounds
from ..model.simplify import Simplifier, less_than
from ..model.tensor import TensorView
from ..hw.tma import infer_tma, is_tma_op
from ..model.types import LoadStoreOpType, MemoryType, OpKind
from ..model.mma_op import is_mma
from .derive import per_fusion
from .zero_padding import zero_filled

ON_CHIP = (MemoryType.Local, MemoryType.Shared)
POINTWISE = (OpKind.CAST, OpKind.UNARY, OpKind.BINARY, OpKind.TERNARY)
POINTWISE_COPIES = (LoadStoreOpType.Set, LoadStoreOpType.StMatrix)
ZERO_COPIES = (LoadStoreOpType.Set, LoadStoreOpType.LdMatrix)  # on chip, carrying a TMA's zeros
REGISTER_ARITHMETIC = POINTWISE + (OpKind.BROADCAST, OpKind.IOTA)  # what may run at holes (unread_holes)
REDUCTIONS = ("sum", "max", "min")  # what may run at its iteration axes' holes (reduced_at_holes)


@per_fusion
def clipped(fusion) -> frozenset[str]:
    """The names of the tensors whose statements run at their holes (module docstring)."""
    return _clipped(fusion)


@per_fusion
def filled(fusion) -> frozenset[str]:
    """The names of the TMA loads, and the copies and MmaOps reading them, that run at their holes
    on the zeros the TMA writes past the extent (module docstring)."""
    return _filled(fusion)


@per_fusion
def unread_holes(fusion) -> frozenset[str]:
    """The names of the register tensors computed at their holes, unpredicated: arithmetic on
    registers whose hole values only other holes read (module docstring)."""
    skip = {t.name for t in fusion.outputs} | clipped(fusion)
    return frozenset(t.name for t in fusion.tensors
                     if t.name not in skip and _register_arithmetic(t) and needed_bounds(t) and _holes_harmless(t))


@per_fusion
def reduced_at_holes(fusion) -> frozenset[str]:
    """The names of the register reductions computed at the holes of their iteration axes,
    unpredicated there; the holes of their reduction axes stay predicates (module docstring)."""
    skip = {t.name for t in fusion.outputs} | clipped(fusion) | zero_filled(fusion) | unread_holes(fusion)
    return frozenset(t.name for t in fusion.tensors if t.name not in skip and _register_reduction(t) and _holes_harmless(t))


def _holes_harmless(t: TensorView) -> bool:
    """Whether t's statement may run at its holes (reductions aside): each is past a logical extent,
    and every register it writes or reads there lies inside its array."""
    return _holes_past_logical(t, [i for i in t.logical if not i.is_broadcast]) and _registers_in_arrays(t)


def _register_reduction(t: TensorView) -> bool:
    """A sum, max or min of floating-point registers into registers, each element of an iteration
    point its own (no Welford: several outputs), within the block (a grid reduction's partials go
    through a global workspace, whose rows past the extent are no registers)."""
    op = t.definition
    if op is None or op.kind is not OpKind.REDUCTION or op.name not in REDUCTIONS or t.memory_type is not MemoryType.Local:
        return False
    if not any(i.is_reduction for i in t.all_ids()) or not t.dtype.is_float:
        return False
    if any(i.is_reduction and i.parallel_type.is_block for i in t.all_ids()):
        return False
    return all(x.memory_type is MemoryType.Local and x.definition is not None and x.dtype.is_float for x in op.inputs)


def _register_arithmetic(t: TensorView) -> bool:
    op = t.definition
    if op is None or op.kind not in REGISTER_ARITHMETIC or t.memory_type is not MemoryType.Local:
        return False
    if not all(x.memory_type is MemoryType.Local and x.definition is not None for x in op.inputs):
        return False
    if op.kind is OpKind.BROADCAST or op.name in COMPARISONS:
        return True  # a copy, a comparison: defined on any value
    if op.kind is OpKind.IOTA:
        return t.dtype.is_float or _iota_fits(t)
    return all(x.dtype.is_float or x.dtype.is_bool for x in [t] + list(op.inputs))


def _iota_fits(t: TensorView) -> bool:
    """Whether an integer iota's values fit its compute type at every point of its loops, holes
    included (tp.iota checked them up to its length only)."""
    idx, ranges = _loop_points(t)
    last = Simplifier(ranges).bounds(idx[t.logical[0].uid]).hi
    lo, hi = _INT_RANGE.get(t.dtype.compute.name, (0, -1))
    start, step = t.definition.iota.start, t.definition.iota.step
    return last is not None and all(lo <= v <= hi for v in (start, step * last, start + step * last))


def _registers_in_arrays(t: TensorView) -> bool:
    """Whether at every point of t's loops, holes included, the register t writes and those it
    reads lie inside their arrays (so a hole point reads and writes registers, not the stack)."""
    idx, ranges = _loop_points(t)
    touched = [(t, idx)] + [(p, indices_from_logical(p, producer_logical(t.definition, k, idx)))
                            for k, p in enumerate(t.definition.inputs)]
    for x, at in touched:
        alloc = compute_allocation(x)
        try:
            offset = linear_offset(alloc.strides(), at)
        except KeyError:  # an ID without an index: not decided here, so predicated
            return False
        if not less_than(offset, alloc.tile_elements_expr, ranges):  # a circular buffer's stage: added in bounds
            return False
    return True


def _loop_points(t: TensorView) -> tuple[dict, dict]:
    """The index of each ID of t at a point of its loops, and the ranges of the loop indices
    (holes included: a loop runs to its extent)."""
    env = {i.uid: loop_var(t, i) for i in t.loop}
    ranges = {env[i.uid].value: extent for i, extent in zip(t.loop, loop_extents(t)) if env[i.uid].op == "var"}
    return indices_from_loop(t, env), ranges


def _clipped(fusion) -> frozenset[str]:
    outputs = {t.name for t in fusion.outputs}
    found = {t.name for t in fusion.tensors if t.name not in outputs and _pointwise_on_chip(t)}

    def tma_store(t: TensorView) -> bool:
        return t.memory_type is MemoryType.Global and is_tma_op(t.definition)

    def registers(t: TensorView) -> bool:  # accumulators, or a value whose holes are predicated off (unwritten)
        return t.memory_type is MemoryType.Local and t.definition is not None

    zeros = filled(fusion)
    while True:
        keep = {t.name for t in fusion.tensors if t.name in found
                and all(c.name in found or tma_store(c) for c in fusion.consumers(t))
                and all(p.name in found or p.name in zeros or registers(p) for p in fusion.producers(t))}
        if keep == found:
            return frozenset(found)
        found = keep


def _filled(fusion) -> frozenset[str]:
    loads = {t.name for t in fusion.tensors if _zero_filled_load(t)}
    for t in fusion.topo_tensors():  # a copy after the load it copies
        op = t.definition
        if t.memory_type in ON_CHIP and op is not None and op.kind is OpKind.LOAD_STORE \
                and op.op_type in ZERO_COPIES and op.inputs[0].name in loads \
                and _holes_past_logical(t, [i for i in t.logical if not i.is_broadcast]):
            loads.add(t.name)
    mmas = {t.name for t in fusion.tensors
            if is_mma(t) and t.memory_type is MemoryType.Local and _holes_past_logical(t, t.logical)
            and all(p.memory_type is MemoryType.Shared and p.name in loads for p in t.definition.inputs)}
    return frozenset(loads | mmas)


def _zero_filled_load(t: TensorView) -> bool:
    op = t.definition
    if t.memory_type is not MemoryType.Shared or op is None or not is_tma_op(op) \
            or op.inputs[0].memory_type is not MemoryType.Global:
        return False
    info = infer_tma(op).info
    if not info.ok or any(try_int(dim.element_stride_expr) != 1 for dim in info.dims):
        return False  # an element stride that does not divide the box leaves elements unwritten
    own = {dim.ids[0] for dim in info.dims if len(dim.ids) == 1}
    return _holes_past_logical(t, [i for i in t.logical if i.name in own])


def _holes_past_logical(t: TensorView, axes) -> bool:
    """Whether every hole of t is past the extent of one of `axes` (logical IDs), reductions
    aside: each bound that can fail (one its loops do not imply) is of an ID that leads to one
    of them through outer outputs of splits (outer >= ceil(E / f) puts the input at >= E) and
    merge outputs (out >= Eo Ei puts the outer input at >= Eo). The inner output of a split,
    split again by a factor that does not divide it, has holes inside the extent: another
    tile's elements, in bounds (examples/valid/tma_boxes.py, tma_indivisible_rotation)."""
    made_by = {o.uid: tr for tr in t.history for o in tr.outputs}
    target = {i.uid for i in axes}

    def past_logical(uid: int) -> bool:
        while uid in made_by:
            tr = made_by[uid]
            if isinstance(tr, Split) and tr.outer.uid == uid:
                uid = tr.in_.uid
            elif isinstance(tr, Merge):
                uid = tr.outer.uid
            else:
                return False
        return uid in target

    env = {i.uid: loop_var(t, i) for i in t.loop}
    ranges = {env[i.uid].value: extent for i, extent in zip(t.loop, loop_extents(t))}
    needed = needed_bounds(t)
    return all(past_logical(b.id.uid) or less_than(b.value, b.extent, ranges)
               for b in valid_item_bounds(t, indices_from_loop(t, env)) if b.id.uid in needed and not b.id.is_reduction)


def _pointwise_on_chip(t: TensorView) -> bool:
    op = t.definition
    if op is None or t.memory_type not in ON_CHIP or not _broadcasts_run_once(t):
        return False
    return op.kind in POINTWISE or (op.kind is OpKind.LOAD_STORE and op.op_type in POINTWISE_COPIES)


def _broadcasts_run_once(t: TensorView) -> bool:
    """Whether each broadcast axis of t is a loop of t's own that runs once (not merged, split or
    promoted to a consumer's extent): then it is one element, as a concrete axis of extent 1 (a
    batch of one: attention's [1, G, M, Dv] output at a row tail), and adds no point to the holes."""
    extents = dict(zip((i.uid for i in t.loop), loop_extents(t)))
    return all(i.uid in extents and try_int(extents[i.uid]) == 1 for i in t.logical if i.is_broadcast)


__all__ = ["clipped", "filled", "reduced_at_holes", "unread_holes"]
