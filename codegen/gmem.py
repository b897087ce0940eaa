"""Global-memory layout of fusion inputs and outputs: element strides from contiguity.

A contiguous allocation axis has the stride of the next inner one times that one's
extent (the innermost: 1); a discontiguous axis gets its stride as a kernel argument,
bound from the array at run time. Broadcast axes are never indexed (stride 0).
"""

from __future__ import annotations

from ..model.expr import Expr, add, const, mul, var
from ..model.tensor import TensorView
from .errors import UnsupportedSchedule
from .kernel_ir import GlobalTensor


def stride_var(tensor: str, logical_axis: int) -> str:
    return f"stride.{tensor}.{logical_axis}"


def global_layout(tv: TensorView) -> GlobalTensor:
    alloc = tv.get_allocation_domain()
    logical_pos = {i.uid: k for k, i in enumerate(tv.logical)}
    if sorted(logical_pos.get(i.uid, -1) for i in alloc) != list(range(len(tv.logical))):
        raise UnsupportedSchedule(
            f"{tv.name}: a global tensor's allocation domain must be a permutation of its logical domain "
            f"(got {[i.label() for i in alloc]}); split or merged global allocations are not lowered yet"
        )
    axes = tuple(logical_pos[i.uid] for i in alloc)
    contiguity = tv.contiguity  # aligned with the allocation domain (logical when none is set)
    strides: list[Expr] = [const(0)] * len(alloc)
    running: Expr = const(1)
    for k in reversed(range(len(alloc))):
        ident = alloc[k]
        if ident.is_broadcast:
            continue
        if contiguity[k] is False:
            running = var(stride_var(tv.name, axes[k]))
        strides[k] = running
        running = mul(running, ident.extent_expr)
    return GlobalTensor(
        name=tv.name,
        dtype=tv.dtype,
        is_input=tv.is_fusion_input,
        extents=tuple(i.extent_expr for i in tv.logical),
        alloc_axes=axes,
        strides=tuple(strides),
        broadcast=tuple(i.is_broadcast for i in tv.logical),
    )


def global_offset(layout: GlobalTensor, tv: TensorView, idx: dict[int, Expr]) -> Expr:
    """Element offset of the point whose IterDomain indices are idx."""
    terms = []
    for k, axis in enumerate(layout.alloc_axes):
        ident = tv.logical[axis]
        if not ident.is_broadcast:
            terms.append(mul(idx[ident.uid], layout.strides[k]))
    return add(*terms) if terms else const(0)
