"""Circular buffering as the schedule asks for it (nvFuser's TensorView::circularBuffer;
`tv.circular_buffer(stages, prefetch, type)`, its options in model/options.py): which tensors are
circular-buffered (circular_tensors), over which loop (circular_axis: tv's loop axis just left of
its compute-at position), what barriers.py needs of a circular copy (circular_access), and which
form it takes (specialization: WarpSpecialized; war_mbarrier: Pipelined(uses_mbarrier_for_war=True)).

pipeline.py places the pipelines these describe on the loop nest. Pure data: no z3.
"""

from __future__ import annotations


from ..model.options import Pipelined, WarpSpecialized
from ..model.types import LoadStoreOpType, MemoryType, OpKind


def circular_axis(tv) -> int | None:
    """The position of tv's circular loop: its loop axis just left of its compute-at position
    (None where tv is not circular-buffered or not inlined)."""
    if getattr(tv, "circular", None) is None or tv.compute_at == 0:
        return None
    return tv.compute_at - 1


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


def is_register_copy(tv) -> bool:
    """A register tensor a plain copy or ldmatrix fills: circular-buffered without waits."""
    op = tv.definition
    return (tv.memory_type is MemoryType.Local and op is not None and op.kind is OpKind.LOAD_STORE
            and op.op_type in (LoadStoreOpType.Set, LoadStoreOpType.LdMatrix))
