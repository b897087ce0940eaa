"""What a cp.async statement needs (LOWERING-SUPPORTED through lowering.py): global to shared,
its vector innermost, and a slot of its own for every hole it zero-fills. The copy itself is
execution/cp_async.py and hw/cp_async.py."""

from __future__ import annotations


from ...model.tensor import TensorView
from ...model.types import MemoryType, ParallelType
from ...model.expr import try_int
from ...model.iterdomain import Split
from ...model.fusion import symbol_bound
from ...hw.cp_async import is_cp_async
from ..allocation import compute_allocation
from ..promotion import needed_bounds
from ..problems import Problem
from ..zero_padding import zero_padded


def structure_problems(fusion, order: list[TensorView]):
    """What the lowering of a cp.async needs besides the CPASYNC rules: a copy from a global
    tensor into a shared one, its Vectorize axis (if any) innermost, and for a copy with holes a
    destination allocated along its own loop IDs (zero_fill_problems)."""
    out = []
    for tv in order:
        op = tv.definition
        if not is_cp_async(op):
            continue
        src = op.inputs[0]
        if src.memory_type is not MemoryType.Global or tv.memory_type is not MemoryType.Shared:
            out.append(Problem(
                f"`{op}` copies {src.name} ({src.memory_type.value.lower()} memory) into {tv.name} "
                f"({tv.memory_type.value.lower()} memory); cp.async copies global memory into shared memory",
                hint=f"put {tv.name} in shared memory (set_memory_type(tp.MemoryType.Shared)) and read a fusion "
                     f"input, or use a plain tp.set",
                tensor=tv.name, values={"ops": 1}, location=op.origin,
                memory=(tv.name, MemoryType.Shared) if src.memory_type is MemoryType.Global else None))
            continue
        vec = [k for k, i in enumerate(tv.loop) if i.parallel_type is ParallelType.Vectorize]
        if vec and vec != [len(tv.loop) - 1]:
            out.append(Problem(
                f"`{op}`: one cp.async moves the innermost Vectorize axis of {tv.name}; its Vectorize "
                f"{'axes are' if len(vec) > 1 else 'axis is'} {', '.join(map(str, vec))} of {tv.ndim}",
                hint=f"reorder {tv.name} so that its one Vectorize axis is innermost",
                tensor=tv.name, ids=tuple(tv.loop[k].name for k in vec),
                values={"vectorize_axis": vec[0], "axes": tv.ndim}, location=tv.origin))
        # the bound of K a zero path runs past is a point that executes (execution/zero_padding.py), whose
        # zeros every rule sees land; only the holes left are issued unseen
        allocation = compute_allocation(tv)
        allocated = {a.id.uid for a in allocation.allocated()}
        if _may_have_holes(tv, needed_bounds(tv) - {zero_padded(tv.fusion).get(tv.name)}, allocated):
            out += zero_fill_problems(tv, allocation)
    return out


def _may_have_holes(tv: TensorView, needed: set[int], allocated: set[int]) -> bool:
    """Whether a hole may put a point's zeros in the tile: an ID whose bound is needed is split
    by a factor its extent is not a known multiple of (the bound of an ID whose splits all
    divide is implied), or an ID derived from one (an outer output split again) on the path of
    an allocated ID (its ancestor or descendant: the hole moves the point's slot in the tile;
    a hole off that path, such as a split of the tile index over blocks, keeps the slot)."""
    ancestors: dict[int, set[int]] = {}  # ID -> the IDs it derives from, itself included
    for t in tv.history:
        for o in t.outputs:
            ancestors[o.uid] = {o.uid}.union(*(ancestors.get(x.uid, {x.uid}) for x in t.inputs))

    def of(uid: int) -> set[int]:
        return ancestors.get(uid, {uid})

    for t in tv.history:
        if not isinstance(t, Split):
            continue
        x = t.in_.uid
        on_path = any(x in of(a) or a in of(x) for a in allocated)
        if x in needed or (of(x) & needed and on_path):
            extent, factor = try_int(t.in_.extent_expr), try_int(t.inner.extent_expr)
            if extent is None and factor is not None and _assumed_multiple(tv.fusion, t.in_.extent_expr, factor):
                continue
            if extent is None or factor is None or extent % factor:
                return True
    return False


def _assumed_multiple(fusion, extent, factor: int) -> bool:
    """Whether an assumption states that the extent symbol `extent` is a multiple of `factor`
    (`fusion.assume("K % 64 == 0")` for a factor dividing 64)."""
    import sympy


    if extent.op != "var":
        return False
    for a in fusion.assumptions:
        for part in sympy.And.make_args(a):
            got = symbol_bound(part)
            if got is not None and got[0] == extent.value and got[3] % factor == 0:
                return True
    return False


def zero_fill_problems(tv: TensorView, allocation):
    """A hole of tv's statement is copied with src-size 0: zeros land at the hole's own slot,
    which no element uses only when every allocated ID is one of tv's loop IDs (each point of
    the loop box then has its own offset, holes included)."""
    loop = {i.uid for i in tv.loop}
    foreign = [a.id for a in allocation.allocated() if a.id.uid not in loop]
    if not foreign:
        return []
    return [Problem(
        f"{tv.name}'s cp.async has holes (an indivisible split), which it fills with zeros, but {tv.name} is "
        f"allocated along {', '.join(i.label() for i in foreign)}, not its loop IDs: a hole's zeros would land "
        f"outside its tile or on an element",
        hint=f"allocate {tv.name} along its loop domain (drop set_allocation_domain), or make its splits divide",
        tensor=tv.name, ids=tuple(i.name for i in foreign), values={"allocation_axes": len(foreign)},
        location=tv.origin)]
