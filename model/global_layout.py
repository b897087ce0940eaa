"""Global-memory layout of fusion inputs and outputs: element strides from contiguity.

The allocation domain is a list of logical axes, or of merges of them (nvFuser's
`set_allocation_domain([merge(M, N), K])`). A merge lays its inputs out outer then inner with
no gap, so memory order is the allocation domain with each merged axis replaced by the
logical axes it merges: every such axis but the innermost is contiguous, the innermost takes
the allocation axis's contiguity. A split in the allocation domain is not a layout of this
form (its outer stride depends on padding): `allocation_problem` says so.

A contiguous axis has the stride of the next inner one times that one's extent (the
innermost: 1); a discontiguous axis gets its stride as a kernel argument (the variable
`stride_var`), bound from the array at run time. Broadcast axes are never indexed (stride 0),
nor are the reduction axes of a reduction's output, which are not in its array (the allocation
domain may leave them out).
The code generator lays global tensors out with these strides (codegen/lower/gmem.py), the
TMA inference builds tensor maps from them (hw/tma_roles.py) and the verifier's
vectorization rules read the same offsets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .expr import Expr, add, const, mul, var
from .iterdomain import IterDomain, Merge

if TYPE_CHECKING:  # annotations only: model/producer_aliases.py (imported by fusion.py) reads these layouts
    from .tensor import TensorView


def stride_var(tensor: str, logical_axis: int) -> str:
    return f"stride.{tensor}.{logical_axis}"


@dataclass(frozen=True)
class GlobalStrides:
    """`alloc_axes[k]`: the logical axis at memory position k (outer first; the allocation
    domain with its merges expanded); `strides[k]` its element stride; `contiguous[k]` whether
    that stride is the next non-broadcast position's stride times its extent (None: broadcast)."""

    alloc_axes: tuple[int, ...]
    strides: tuple[Expr, ...]
    contiguous: tuple[bool | None, ...] = ()


def _leaves(a: IterDomain, logical_pos: dict[int, int]) -> list[IterDomain] | str:
    """The logical IDs allocation ID `a` merges, outer first, or what else defines it."""
    if a.uid in logical_pos:
        return [a]
    d = a.definition
    if isinstance(d, Merge):
        outer, inner = _leaves(d.outer, logical_pos), _leaves(d.inner, logical_pos)
        if isinstance(outer, str):
            return outer
        return inner if isinstance(inner, str) else outer + inner
    return f"{a.label()} is defined by `{d}`" if d is not None else f"{a.label()} is not derived from the logical domain"


def _memory_axes(tv: TensorView) -> list[tuple[int, bool | None]] | str:
    """(logical axis, contiguity) in memory order, or why the allocation domain has no such order."""
    alloc = tv.get_allocation_domain()
    logical_pos = {i.uid: k for k, i in enumerate(tv.logical)}
    out: list[tuple[int, bool | None]] = []
    for k, a in enumerate(alloc):
        leaves = _leaves(a, logical_pos)
        if isinstance(leaves, str):
            return (f"allocation axis {k} ({a.label()}) of {tv.name} is not a logical axis or a merge of logical "
                    f"axes: {leaves}")
        c = tv.contiguity[k]
        last = max((j for j, i in enumerate(leaves) if not i.is_broadcast and not i.is_reduction), default=-1)
        for j, i in enumerate(leaves):
            if i.is_broadcast or i.is_reduction:
                out.append((logical_pos[i.uid], None))
            else:  # inside a merge each axis is followed by the next without a gap
                out.append((logical_pos[i.uid], c is not False if j == last else True))
    listed = {a for a, _ in out}
    out += [(k, None) for k, i in enumerate(tv.logical) if i.is_reduction and k not in listed]  # not in the array
    axes = sorted(a for a, _ in out)
    if axes != list(range(len(tv.logical))):
        missing = [tv.logical[a].label() for a in range(len(tv.logical)) if a not in axes]
        twice = sorted({tv.logical[a].label() for a in axes if axes.count(a) > 1})
        what = f"misses {', '.join(missing)}" if missing else f"holds {', '.join(twice)} twice"
        return f"the allocation domain of {tv.name} {what}"
    return out


def allocation_problem(tv: TensorView) -> str | None:
    """Why tv's allocation domain is not a permutation of (merges of) its logical axes, or None."""
    axes = _memory_axes(tv)
    return axes if isinstance(axes, str) else None


def global_strides(tv: TensorView) -> GlobalStrides | None:
    """tv's strides, or None when its allocation domain is not a permutation of its logical
    axes and merges of them (LOWERING-SUPPORTED reports that, with `allocation_problem`)."""
    axes = _memory_axes(tv)
    if isinstance(axes, str):
        return None
    strides: list[Expr] = [const(0)] * len(axes)
    running: Expr = const(1)
    for k in reversed(range(len(axes))):
        axis, contiguous = axes[k]
        ident = tv.logical[axis]
        if ident.is_broadcast or ident.is_reduction:
            continue
        if contiguous is False:
            running = var(stride_var(tv.name, axis))
        strides[k] = running
        running = mul(running, ident.extent_expr)
    return GlobalStrides(tuple(a for a, _ in axes), tuple(strides), tuple(c for _, c in axes))


def global_offset(tv: TensorView, layout: GlobalStrides, idx: dict[int, Expr]) -> Expr:
    """Element offset of the point whose IterDomain indices are idx."""
    terms = []
    for k, axis in enumerate(layout.alloc_axes):
        ident = tv.logical[axis]
        if not ident.is_broadcast and not ident.is_reduction:
            terms.append(mul(idx[ident.uid], layout.strides[k]))
    return add(*terms) if terms else const(0)
