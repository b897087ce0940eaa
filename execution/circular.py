"""Circular buffering as the schedule asks for it (nvFuser's TensorView::circularBuffer;
`tv.circular_buffer(stages, prefetch, type)`, its options in model/options.py): which tensors are
circular-buffered (circular_tensors), over which loop (circular_axis: nvFuser's choice, the loop
axis left of the compute-at position that is neither thread-parallel nor broadcast), the position
from which it is allocated (allocation_position: right of its circular loop), what
barriers.py needs of a circular copy (circular_access), and which
form it takes (specialization: WarpSpecialized; war_mbarrier: Pipelined(uses_mbarrier_for_war=True)).

pipeline.py places the pipelines these describe on the loop nest. Pure data: no z3.
"""

from __future__ import annotations


from ..model.options import Pipelined, WarpSpecialized
from ..model.types import BLOCK_TYPES, THREAD_TYPES, LoadStoreOpType, MemoryType, OpKind, ParallelType

LAUNCHED = THREAD_TYPES + BLOCK_TYPES  # nvFuser's isParallelTypeThread: not a loop of the kernel


def circular_axis(tv) -> int | None:
    """The position of tv's circular loop (None where tv is not circular-buffered or not inlined).
    The axis just left of tv's compute-at position where that is a loop (serial; unrolled too for
    registers); otherwise nvFuser's choice (csrc/device_lower/analysis/circular_buffer.cpp,
    getCircularBufferAxisPosition): of the axes left of min(compute-at position, first Unroll axis)
    that are neither thread-parallel nor broadcast, the innermost, where every axis between it and
    the compute-at position is thread-parallel or broadcast, or for registers and plain copies into
    shared memory also a serial or unrolled loop (those are shared with the copy's readers; the
    pipeline gives the copy a nest of its own, execution/pipeline.py, and the tile is allocated
    across the loops, as nvFuser's getAllocPosInfo allocates registers from the first Unroll loop:
    execution/allocation.py). nvFuser takes
    the outermost for a warp-specialized buffer; tileproof pipelines one loop of copies per
    iteration, so it takes the outermost only where it is that innermost one. Otherwise the axis
    just left of the compute-at position (PIPELINE-STAGES says what it is)."""
    c = getattr(tv, "circular", None)
    if c is None or tv.compute_at == 0:
        return None
    last = tv.compute_at - 1
    loops = (ParallelType.Serial, ParallelType.Unroll) if tv.memory_type is MemoryType.Local else (ParallelType.Serial,)
    if tv.loop[last].parallel_type in loops and not tv.loop[last].is_broadcast:
        return last
    limit = next((k for k, i in enumerate(tv.loop) if i.parallel_type is ParallelType.Unroll), len(tv.loop))
    valid = [k for k in range(min(tv.compute_at, limit)) if not _shared_scope(tv.loop[k])]
    spans = (ParallelType.Serial, ParallelType.Unroll)
    between = (lambda i: _shared_scope(i) or i.parallel_type in spans) if _plain_copy(tv) else _shared_scope
    if not valid or not all(between(i) for i in tv.loop[valid[-1] + 1:tv.compute_at]):
        return last
    return valid[-1]


def allocation_position(tv) -> int:
    """The loop position from which tv's axes are allocated: its compute-at position, or for a
    register tensor circular-buffered over a loop outside serial or unrolled loops of its
    compute-at position, right of that circular loop: the copies of one iteration fill those
    loops' elements before any is read (execution/pipeline.py), as nvFuser's getAllocPosInfo
    (csrc/device_lower/utils.cpp) allocates registers from the first Unroll loop on."""
    pos = circular_axis(tv)
    if pos is None or not _plain_copy(tv):
        return tv.compute_at
    if all(_shared_scope(i) for i in tv.loop[pos + 1:tv.compute_at]):
        return tv.compute_at
    return pos + 1


def _plain_copy(tv) -> bool:
    """A register tensor, or a plain copy (tp.set) or cp.async into shared memory: the serial and
    unrolled loops between its circular loop and its compute-at position are split off with its
    copies (execution/pipeline.py isolate_circular_copies; a cp.async iteration's copies are one
    group) and its elements allocated across them."""
    op = tv.definition
    cp_async = (op is not None and op.kind is OpKind.LOAD_STORE and op.op_type is LoadStoreOpType.CpAsync
                and tv.memory_type is MemoryType.Shared)
    return tv.memory_type is MemoryType.Local or is_shared_copy(tv) or cp_async


def _shared_scope(axis) -> bool:
    """An axis that is no loop of the kernel (a thread or block index) or runs once (broadcast)."""
    return axis.parallel_type in LAUNCHED or axis.is_broadcast


def circular_access(tv) -> tuple[int, int, int] | None:
    """What execution/barriers.py needs of a circular-buffered copy: (stages, prefetch, the depth of
    its circular loop in the statement's loop path, which holds every loop axis left of it)."""
    pos = circular_axis(tv)
    return None if pos is None else (tv.circular.stages, tv.circular.prefetch, pos)


def specialization(tv) -> WarpSpecialized | None:
    """tv's WarpSpecialized circular buffering, None where it has none or is pipelined."""
    c = getattr(tv, "circular", None)
    return c.type if c is not None and isinstance(c.type, WarpSpecialized) else None


def war_mbarrier(tv) -> bool:
    """Whether tv's circular buffer is Pipelined(uses_mbarrier_for_war=True)."""
    c = getattr(tv, "circular", None)
    return c is not None and isinstance(c.type, Pipelined) and c.type.uses_mbarrier_for_war


def circular_tensors(fusion) -> list:
    """The tensors of `fusion` that circular_buffer was called on, in fusion order."""
    return [t for t in fusion.tensors if getattr(t, "circular", None) is not None]


def is_shared_copy(tv) -> bool:
    """A shared tensor a plain copy (tp.set) fills: circular-buffered with barriers, no waits."""
    op = tv.definition
    return (tv.memory_type is MemoryType.Shared and op is not None and op.kind is OpKind.LOAD_STORE
            and op.op_type is LoadStoreOpType.Set)


def is_register_copy(tv) -> bool:
    """A register tensor a plain copy or ldmatrix fills: circular-buffered without waits."""
    op = tv.definition
    return (tv.memory_type is MemoryType.Local and op is not None and op.kind is OpKind.LOAD_STORE
            and op.op_type in (LoadStoreOpType.Set, LoadStoreOpType.LdMatrix))
