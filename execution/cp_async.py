"""cp.async: one thread copies 4, 8 or 16 bytes from global to shared memory, asynchronously.

A `tp.set(t, op=tp.LoadStoreOpType.CpAsync)` statement becomes one cp.async per point of its
loop nest, moving the statement's Vectorize axis (or one element) as one copy
(PTX ISA 9.7.9.25.3.1):

    cp.async.ca.shared.global [dst], [src], cp-size, src-size   cp-size 4, 8 or 16 (L1 and L2)
    cp.async.cg.shared.global [dst], [src], 16, src-size        16 only (L2, bypassing L1)

The cache (tp.CacheOp) is the user's: AllLevels is .ca, Global .cg, Unspecified .cg where the
copy moves 16 bytes and .ca otherwise (CPASYNC-SIZE checks the bytes). Both addresses must be
multiples of cp-size (CPASYNC-ALIGN).

The statement's predicates split in two (execution model, execution/statements.py): a thread
outside the tensor's extent, or not its single writer, issues nothing; a hole of an indivisible
split still issues, with src-size 0: the hardware reads no global byte and writes zeros, so a
tile's tail past the tensor's end reads as zero (strong correctness of the padded K of a
reduction). That write lands in the tile's own slot for the hole, which exists when the
tensor is allocated along its own loop IDs (zero_fill_problems).

A copy completes asynchronously: its thread commits it to a group (cp.async.commit_group) and
waits (cp.async.wait_group N: at most N of its groups still in flight); other threads see the
data after a __syncthreads that follows the wait. execution/barriers.py places both.
"""

from __future__ import annotations


from .statements import CondKind, vector_axis
from ..model.tensor import TensorView
from ..model.types import MemoryType, ParallelType
from ..model.expr import try_int
from ..model.iterdomain import Split
from ..model.fusion import symbol_bound
from ..hw.cp_async import CpAsyncCopy, is_cp_async
from .allocation import compute_allocation
from .promotion import needed_bounds
from .problems import Problem
from .zero_padding import zero_padded

ISSUE_CONDS = (CondKind.THREAD_EXTENT, CondKind.SINGLE_WRITER)  # no copy issued where these fail
ZERO_FILL_CONDS = (CondKind.HOLE, CondKind.PADDING)  # issued with src-size 0 where these fail


def cp_async_copy(tv: TensorView) -> CpAsyncCopy | None:
    """The copy tv's cp.async statement issues; None where its Vectorize axis has a symbolic
    extent (CPASYNC-SIZE reports it)."""
    op = tv.definition
    axis = vector_axis(tv)
    n = 1 if axis is None else axis.static_extent
    if n is None:
        return None
    src = op.inputs[0]
    return CpAsyncCopy(tv.name, src.name, n, tv.dtype.bytes, op.cache_op)


def cp_async_tensors(fusion) -> list[TensorView]:
    """The tensors a cp.async statement writes, in fusion order."""
    return [t for t in fusion.tensors if is_cp_async(t.definition)]


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
                tensor=tv.name, values={"ops": 1}, location=op.origin))
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


__all__ = ["CA_BYTES", "CG_BYTES", "CpAsyncCopy", "cp_async_copy", "cp_async_tensors", "is_cp_async",
           "structure_problems", "zero_fill_problems"]
