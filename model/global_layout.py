"""Global-memory layout of fusion inputs and outputs: element strides from contiguity.

A contiguous allocation axis has the stride of the next inner one times that one's extent
(the innermost: 1); a discontiguous axis gets its stride as a kernel argument (the variable
`stride_var`), bound from the array at run time. Broadcast axes are never indexed (stride 0).
The code generator lays global tensors out with these strides (codegen/lower/gmem.py) and the
verifier's vectorization rules read the same offsets.
"""

from __future__ import annotations

from dataclasses import dataclass

from .expr import Expr, add, const, mul, var
from .tensor import TensorView


def stride_var(tensor: str, logical_axis: int) -> str:
    return f"stride.{tensor}.{logical_axis}"


@dataclass(frozen=True)
class GlobalStrides:
    """`alloc_axes[k]`: the logical axis of allocation axis k (outer first); `strides[k]` its
    element stride."""

    alloc_axes: tuple[int, ...]
    strides: tuple[Expr, ...]


def global_strides(tv: TensorView) -> GlobalStrides | None:
    """tv's strides, or None when its allocation domain is not a permutation of its logical
    domain (LOWERING-SUPPORTED reports that)."""
    alloc = tv.get_allocation_domain()
    logical_pos = {i.uid: k for k, i in enumerate(tv.logical)}
    if sorted(logical_pos.get(i.uid, -1) for i in alloc) != list(range(len(tv.logical))):
        return None
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
    return GlobalStrides(axes, tuple(strides))


def global_offset(tv: TensorView, layout: GlobalStrides, idx: dict[int, Expr]) -> Expr:
    """Element offset of the point whose IterDomain indices are idx."""
    terms = []
    for k, axis in enumerate(layout.alloc_axes):
        ident = tv.logical[axis]
        if not ident.is_broadcast:
            terms.append(mul(idx[ident.uid], layout.strides[k]))
    return add(*terms) if terms else const(0)
