"""What is allocated for a tensor, and why (the seed's three rules).

1. An IterDomain parallelized on a type the memory is distributed across is not allocated. Its type
   is the one it runs on in the kernel: a Serial axis inlined into a parallel loop takes the loop's
   (model/loop_map.py), as nvFuser's lowering gives it.
2. One parallelized on a type the memory is shared across is always allocated.
3. Otherwise IterDomains right of the compute-at position are allocated, left of it not (a register
   tensor circular-buffered over a loop outside serial or unrolled loops of its compute-at
   position: right of that circular loop, execution/circular.py allocation_position).
Extent-1 and broadcast IterDomains occupy nothing, nor do reduction IterDomains (the tensor holds
one value across them: the reduction's total). Global tensors are allocated whole.

The allocated IDs of a shared or register tensor without an allocation domain are laid out in the
order of its logical domain, not its loop (nvFuser's reorderAllocationDomains): a TMA tile loaded
from a [K, N] tensor is [64k][64n] in shared memory however its loop orders them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model.expr import Expr, ceildiv, const, mod, product, to_sympy, try_int
from ..model.iterdomain import IterDomain
from ..model.loop_map import parallel_type_in_kernel, propagated_types
from ..model.tensor import TensorView
from ..model.types import BLOCK_TYPES, DEVICE_TYPES, THREAD_TYPES, MemoryType, ParallelType
from .circular import allocation_position, circular_axis
from .derive import per_fusion

DISTRIBUTED: dict[MemoryType, tuple[ParallelType, ...]] = {
    MemoryType.Global: DEVICE_TYPES,
    MemoryType.Shared: BLOCK_TYPES + DEVICE_TYPES,
    MemoryType.Tensor: BLOCK_TYPES + DEVICE_TYPES,
    MemoryType.Local: THREAD_TYPES + BLOCK_TYPES + DEVICE_TYPES,
}
SHARED: dict[MemoryType, tuple[ParallelType, ...]] = {
    MemoryType.Global: THREAD_TYPES + BLOCK_TYPES,
    MemoryType.Shared: THREAD_TYPES,
    MemoryType.Tensor: THREAD_TYPES,
    MemoryType.Local: (),
}


@dataclass(frozen=True)
class AllocatedId:
    """One row of an allocation table: IterDomain `id`, whether it is `allocated`, the `rule` that
    decided ("distributed", "shared", "compute-at", "trivial" for extent 1, "global", "reduction") with its
    `reason` in words, and for tensor memory the `side` ("lane" or "column")."""

    id: IterDomain
    allocated: bool
    rule: str  # "distributed", "shared", "compute-at", "trivial", "global", "reduction"
    reason: str
    side: str | None = None  # "lane" / "column" for tensor memory

    @property
    def extent_expr(self) -> Expr:
        """The extent this row contributes to the allocation: the IterDomain's when allocated, else 1."""
        return self.id.extent_expr if self.allocated and self.rule != "trivial" else const(1)


@dataclass(frozen=True)
class Allocation:
    """What is allocated for `tensor` (tp.allocation(tv) returns it): one AllocatedId per IterDomain
    of its allocation domain in `ids`, and the sizes that follow, as ints (sympy expressions of
    the fusion's symbols when they depend on sizes).

        tp.allocation(t1).bytes   # 4194304"""

    tensor: TensorView
    ids: tuple[AllocatedId, ...]

    @property
    def memory(self) -> MemoryType:
        """The tensor's memory type."""
        return self.tensor.memory_type

    def allocated(self, side: str | None = None) -> list[AllocatedId]:
        """The rows that occupy memory (allocated, extent not 1), outermost first; `side`
        ("lane" / "column") keeps one side of a tensor-memory allocation."""
        return [a for a in self.ids if a.allocated and a.rule != "trivial" and (side is None or a.side == side)]

    @property
    def num_elements_expr(self) -> Expr:
        """num_elements in the index algebra (an Expr): the stages' tiles of a circular buffer."""
        return self.tile_elements_expr * self.stages

    @property
    def tile_elements_expr(self) -> Expr:
        """The elements of one tile: the product of the allocated extents."""
        return product([a.id.extent_expr for a in self.allocated()])

    @property
    def stages(self) -> int:
        """The tiles of a circular-buffered tensor (TensorView.circular_buffer): iteration i of
        its circular loop uses tile i % stages; 1 for every other tensor."""
        c = self.tensor.circular
        return c.stages if c is not None and circular_axis(self.tensor) is not None else 1

    def stage_offset(self, idx: dict[int, Expr]) -> Expr:
        """The element offset of the tile of the point with IterDomain indices `idx`: its
        circular loop index % stages, times the tile's elements (0 with one stage)."""
        if self.stages == 1:
            return const(0)
        loop_id = self.tensor.loop[circular_axis(self.tensor)]
        return mod(idx[loop_id.uid], self.stages) * self.tile_elements_expr

    @property
    def bytes_expr(self) -> Expr:
        """bytes in the index algebra (an Expr)."""
        return self.num_elements_expr * self.tensor.dtype.bytes

    @property
    def lanes_expr(self) -> Expr:
        """The tensor-memory lanes in the index algebra: the product of the lane-side extents."""
        return product([a.id.extent_expr for a in self.allocated("lane")])

    @property
    def columns_expr(self) -> Expr:
        """32-bit columns used (before rounding the allocation)."""
        elems = product([a.id.extent_expr for a in self.allocated("column")])
        return ceildiv(elems * self.tensor.dtype.bytes, 4)

    # user-facing values: ints when concrete, sympy otherwise
    @property
    def num_elements(self):
        """Elements allocated: the product of the allocated extents (per thread for registers,
        per block for shared and tensor memory, whole for global tensors)."""
        return _value(self.num_elements_expr)

    @property
    def bytes(self):
        """num_elements times the element size."""
        return _value(self.bytes_expr)

    @property
    def lanes(self):
        """Tensor-memory lanes used (at most 128: TMEM-LANES); None for other memory types."""
        return _value(self.lanes_expr) if self.memory is MemoryType.Tensor else None

    @property
    def columns(self):
        """32-bit tensor-memory columns used, before rounding (TMEM-COLUMNS); None for other memory types."""
        return _value(self.columns_expr) if self.memory is MemoryType.Tensor else None

    @property
    def columns_allocated(self):
        """tcgen05.alloc's column count: a power of two, at least 32 (None when symbolic)."""
        c = try_int(self.columns_expr) if self.memory is MemoryType.Tensor else None
        return None if c is None else max(32, 1 << max(c - 1, 0).bit_length())

    def strides(self, side: str | None = None) -> dict[int, Expr]:
        """uid -> contiguous stride over the allocated IDs (of one tmem side)."""
        out: dict[int, Expr] = {}
        stride: Expr = const(1)
        for a in reversed(self.allocated(side)):
            out[a.id.uid] = stride
            stride = stride * a.id.extent_expr
        return out


def _value(e: Expr):
    v = try_int(e)
    return v if v is not None else to_sympy(e)


@per_fusion
def compute_allocation(tv: TensorView) -> Allocation:
    mem = tv.memory_type
    alloc_ids = tv.get_allocation_domain()
    loop_pos = {i.uid: k for k, i in enumerate(tv.loop)}
    # an axis inlined into a parallel loop runs on its type (model/loop_map.py): a snapshot has it
    # already, a schedule still being written is asked
    given = {} if getattr(tv.fusion, "frozen", False) else propagated_types(tv.fusion)
    rows = []
    for k, i in enumerate(alloc_ids):
        side = None
        if mem is MemoryType.Tensor:
            side = "lane" if k < tv.tmem_dim_sep else "column"
        rows.append(_decide(tv, i, mem, loop_pos, side, parallel_type_in_kernel(i, given)))
    if tv.allocation is None and mem in (MemoryType.Shared, MemoryType.Local):
        rows = _in_logical_order(tv, rows)
    return Allocation(tv, tuple(rows))


def _in_logical_order(tv: TensorView, rows: list[AllocatedId]) -> list[AllocatedId]:
    """rows with the allocated ones permuted among their places into the order of tv's logical
    domain (nvFuser's reorderAllocationDomains): replaying tv's transforms from its logical domain,
    each one's outputs take the place after the last of its inputs. The rows not allocated keep
    their places; an allocated ID not derived from the logical domain keeps the loop order."""
    order = list(tv.logical)
    for t in tv.history:
        consumed = {x.uid for x in t.inputs}
        places = [k for k, i in enumerate(order) if i.uid in consumed]
        if not places:  # a transform into the logical domain (rfactor's) or of IDs outside it
            continue
        at = max(places) + 1
        order[at:at] = t.outputs
        order = [i for i in order if i.uid not in consumed]
    rank = {i.uid: k for k, i in enumerate(order)}
    held = [r for r in rows if r.allocated and r.rule != "trivial"]
    if any(r.id.uid not in rank for r in held):
        return rows
    ordered = iter(sorted(held, key=lambda r: rank[r.id.uid]))
    return [next(ordered) if r.allocated and r.rule != "trivial" else r for r in rows]


def _decide(tv: TensorView, i: IterDomain, mem: MemoryType, loop_pos: dict[int, int], side,
            p: ParallelType) -> AllocatedId:
    if i.is_broadcast or try_int(i.extent_expr) == 1:
        return AllocatedId(i, True, "trivial", "extent 1: occupies nothing", side)
    if i.is_reduction:
        return AllocatedId(i, False, "reduction", "a reduction axis: the tensor holds its total, one value", side)
    if p in DISTRIBUTED[mem]:
        return AllocatedId(i, False, "distributed", f"{mem} memory is distributed across {p}", side)
    if p in SHARED[mem]:
        return AllocatedId(i, True, "shared", f"{mem} memory is shared across {p}", side)
    if mem is MemoryType.Global:
        return AllocatedId(i, True, "global", "global tensors are allocated whole", side)
    ca = tv.compute_at
    at = allocation_position(tv)
    related = _related_loop_positions(tv, i, loop_pos)
    if related and max(related) < at:
        where = f"loop position {related[0]}" if len(related) == 1 else f"loop positions {related}"
        return AllocatedId(i, False, "compute-at", f"left of compute-at position {ca} ({where})"
                           if at == ca else f"at or left of its circular loop {at - 1} ({where})", side)
    if not related:
        return AllocatedId(i, True, "compute-at", "not in the loop domain: allocated whole", side)
    if max(related) < ca:
        return AllocatedId(i, True, "compute-at", f"between its circular loop {at - 1} and compute-at position {ca}: "
                                                  f"one iteration's copies fill it before its reads", side)
    return AllocatedId(i, True, "compute-at", f"right of compute-at position {ca}", side)


def _related_loop_positions(tv: TensorView, i: IterDomain, loop_pos: dict[int, int]) -> list[int]:
    """Loop positions of i itself, or of the loop IDs derived from i, or of the loop ID i derives from."""
    if i.uid in loop_pos:
        return [loop_pos[i.uid]]
    # descendants
    frontier, seen, found = [i.uid], {i.uid}, []
    uses: dict[int, list] = {}
    for t in tv.history:
        for x in t.inputs:
            uses.setdefault(x.uid, []).append(t)
    while frontier:
        u = frontier.pop()
        for t in uses.get(u, []):
            for o in t.outputs:
                if o.uid in seen:
                    continue
                seen.add(o.uid)
                if o.uid in loop_pos:
                    found.append(loop_pos[o.uid])
                else:
                    frontier.append(o.uid)
    if found:
        return sorted(found)
    # ancestors
    node = i
    while node.definition is not None and node.definition in tv.history:
        for x in node.definition.inputs:
            if x.uid in loop_pos:
                return [loop_pos[x.uid]]
        node = node.definition.inputs[0]
    return []


def complete_cut_below(x: TensorView, domain) -> bool:
    """Whether `domain` is what x's loop domain becomes by the transforms between them: split
    (index = outer * factor + inner), merge and XOR swizzle (bijective, SWIZZLE-BIJECTIVITY) are
    one-to-one, so distinct loop points then have distinct coordinates in `domain`."""
    wanted, stack = set(), list(domain)
    while stack:  # domain's IDs and everything they derive from
        i = stack.pop()
        if i.uid not in wanted:
            wanted.add(i.uid)
            if i.definition is not None:
                stack.extend(i.definition.inputs)
    cut = {i.uid for i in x.loop}
    for t in x.history:
        ins, outs = {i.uid for i in t.inputs}, {o.uid for o in t.outputs}
        if ins <= cut and outs & wanted:
            cut = (cut - ins) | outs
    return cut == {i.uid for i in domain}
