"""The TMA a schedule implies (nvFuser doc/dev/tma.md, steps 1-4), inferred from the schedule.

For a `set(..., op=TMA)` between a global and a shared tensor, the consumer's Bulk loop
IDs are the tile. Role inference (tma_roles.py) finds the boxing and striding splits,
rotations included; the transforms it leaves are the view from the global allocation
domain to the TMA domain. The TMA domain is then collapsed into the hardware dimensions by
compositing adjacent contiguous IDs: a partitioned ID is one dimension; otherwise a
dimension is a slice [coordinate IDs..., box IDs...] (no box IDs: implicit size-one; no
coordinate IDs: implicit whole). Dimensions are listed innermost first, as PTX does.
Pure Python; never raises on a well-formed fusion (`problems` says what could not be inferred).

`infer_tma(op)` gives an InferredTma: the public TmaInfo (what tp.tma_info returns, its
quantities ints or sympy) with the op, the view and the role inference that the verifier and
the code generator work on.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from ..model.expr import Expr, ceildiv, const, mul, product, to_sympy, try_int
from ..model.fusion import Op
from ..model.iterdomain import IterDomain, Swizzle
from ..model.tensor import TensorView
from .tma_roles import Inference, RoleKind, ViewEntry, ViewStep, allocation_entries, infer_roles, replay_view
from ..model.types import Direction, LoadStoreOpType, MemoryType, OpKind, ParallelType

MAX_BOX = 256  # the limit when compositing: nvFuser does not merge boxes it knows exceed it


def _public(e: Expr) -> int | sympy.Expr:
    """A quantity as tp users see it: an int when concrete, else a sympy expression."""
    v = try_int(e)
    return v if v is not None else to_sympy(e)


@dataclass(frozen=True)
class TmaDim:
    """One hardware dimension. `box`, `tile`, `element_stride`, `size` (the tensor size on this
    dimension), `stride_bytes` (its global stride; the innermost one's is the element size) and
    `stride_elements` are ints, or sympy expressions of the fusion's symbols; the `*_expr` fields
    are the same quantities in the index algebra. `ids`: its TMA-domain IDs (outer to inner);
    `kind`: partitioned, composited, implicit size-one or implicit whole."""

    box_expr: Expr
    tile_expr: Expr
    element_stride_expr: Expr
    size_expr: Expr  # the partitioned extent
    stride_bytes_expr: Expr
    ids: tuple[str, ...]
    kind: str = "partitioned"
    box_ids: tuple[str, ...] = ()
    tile_ids: tuple[str, ...] = ()
    coordinate_ids: tuple[str, ...] = ()
    stride_elements_expr: Expr = const(1)

    @property
    def box(self) -> int | sympy.Expr:
        """Box size (boxDim of cuTensorMapEncodeTiled): elements one copy spans on this dimension."""
        return _public(self.box_expr)

    @property
    def tile(self) -> int | sympy.Expr:
        """Elements one copy moves on this dimension: ceil(box / element_stride)."""
        return _public(self.tile_expr)

    @property
    def element_stride(self) -> int | sympy.Expr:
        """The step between the elements the copy moves (elementStrides, 1 for a dense tile)."""
        return _public(self.element_stride_expr)

    @property
    def size(self) -> int | sympy.Expr:
        """The tensor's size on this dimension (globalDim)."""
        return _public(self.size_expr)

    @property
    def stride_bytes(self) -> int | sympy.Expr:
        """The global stride in bytes (globalStrides; the element size for the innermost dimension)."""
        return _public(self.stride_bytes_expr)

    @property
    def stride_elements(self) -> int | sympy.Expr:
        """The global stride in elements."""
        return _public(self.stride_elements_expr)


@dataclass(frozen=True)
class TmaInfo:
    """The TMA of one op, as tp.tma_info gives it: its dimensions (innermost first), the
    swizzle, the direction, the tensors and what could not be inferred (`problems`)."""

    rank: int
    dims: tuple[TmaDim, ...]  # innermost first
    swizzle_bytes: int  # 0: no swizzle
    direction: Direction  # LOAD: global -> shared; STORE: shared -> global
    gmem: TensorView
    smem: TensorView
    problems: tuple[str, ...]
    consumer: TensorView | None = None  # the tensor whose loop domain issues the TMA
    domain: tuple[str, ...] = ()  # the TMA domain, outer to inner

    @property
    def ok(self) -> bool:
        """Whether the TMA could be inferred (no `problems`)."""
        return not self.problems

    @property
    def bytes_per_transfer_expr(self) -> Expr:
        """bytes_per_transfer in the index algebra (an Expr)."""
        return mul(product([d.tile_expr for d in self.dims]), self.gmem.dtype.bytes)

    @property
    def bytes_per_transfer(self) -> int | sympy.Expr:
        """Bytes one copy moves: the product of the tiles times the element size (the mbarrier's
        transaction count for a load)."""
        return _public(self.bytes_per_transfer_expr)

    def id_map(self) -> dict[str, IterDomain]:
        """IterDomains of the tensors involved, by name (dimensions name their IDs)."""
        return {i.name: i for t in (self.consumer, self.smem, self.gmem) if t is not None for i in t.all_ids()}

    def describe(self, k: int) -> str:
        """`TMA dimension k [labels] (kind)`, k counted innermost first."""
        ids, d = self.id_map(), self.dims[k]
        labels = ", ".join(ids[n].label() if n in ids else n for n in d.ids)
        return f"TMA dimension {k} [{labels}] ({d.kind})"

    def __repr__(self) -> str:
        dims = ", ".join(f"(box {d.box}, e {d.element_stride}, size {d.size})" for d in self.dims)
        return f"TmaInfo({self.direction.value} {self.gmem.name}<->{self.smem.name}, rank {self.rank}: {dims})"


@dataclass(frozen=True)
class InferredTma:
    """A TMA op and everything its inference found, for the verifier and the code generator:
    the public `info`, the `view` from the global allocation domain to the TMA domain (the
    steps that must be a view) and the `inference` of the consumer IDs' roles (tile, coordinate, ...)."""

    op: Op
    info: TmaInfo
    view: tuple[ViewStep, ...] = ()
    inference: Inference | None = None

    @property
    def mixes_tile(self) -> bool:
        """A step of the view transforms tile and non-tile IDs together (TMA-MIXED-TRANSFORM)."""
        return any(s.mixing for s in self.view)


def is_tma_op(op: Op) -> bool:
    return op.kind is OpKind.LOAD_STORE and op.op_type is LoadStoreOpType.TMA


def tma_ops_of(tv: TensorView) -> list[Op]:
    ops = [tv.definition] if tv.definition is not None and is_tma_op(tv.definition) else []
    return ops + [op for op in tv.fusion.uses_of(tv) if is_tma_op(op)]


def infer_tma(op: Op) -> InferredTma:
    consumer, producer = op.output, op.inputs[0]
    direction = Direction.STORE if consumer.memory_type is MemoryType.Global else Direction.LOAD
    gmem, smem = (consumer, producer) if direction is Direction.STORE else (producer, consumer)
    empty = dict(rank=0, dims=(), swizzle_bytes=0, direction=direction, gmem=gmem, smem=smem, consumer=consumer)
    if gmem.memory_type is not MemoryType.Global or smem.memory_type is not MemoryType.Shared:
        return InferredTma(op, TmaInfo(problems=(f"a TMA copies between global and shared memory, but {producer.name} "
                                                 f"is in {producer.memory_type} and {consumer.name} in "
                                                 f"{consumer.memory_type} memory",), **empty))
    if not any(i.parallel_type is ParallelType.Bulk for i in consumer.loop):
        return InferredTma(op, TmaInfo(problems=(f"{consumer.name} has no Bulk loop IDs, so the TMA has no tile",),
                                       **empty))
    inference = infer_roles(consumer)
    if direction is Direction.STORE:
        to_consumer = {i.uid: i for i in consumer.logical}
    else:
        to_consumer = {producer.logical[p].uid: consumer.logical[j]
                       for j, p in enumerate(op.logical_map[0]) if p is not None}
    entries, problems = allocation_entries(gmem, to_consumer)
    domain, steps, replay_problems = replay_view(consumer, entries, inference)
    problems += replay_problems
    swizzle_bytes, swizzle_problems = swizzle_bytes_of(smem)
    problems += swizzle_problems
    dims, collapse_problems = _collapse(domain, inference, gmem.dtype.bytes, swizzle_bytes)
    problems += collapse_problems
    info = TmaInfo(rank=len(dims), dims=tuple(dims), swizzle_bytes=swizzle_bytes, direction=direction,
                   gmem=gmem, smem=smem, problems=tuple(problems), consumer=consumer,
                   domain=tuple(e.id.name for e in domain))
    return InferredTma(op, info, tuple(steps), inference)


def swizzle_bytes_of(smem: TensorView) -> tuple[int, list[str]]:
    """The TMA swizzle mode from the shared tensor's XOR swizzle: the inner (XORed) extent
    counts 16-byte units, so the mode is that extent x 16 bytes (the seed's [-1, s, 8/s, s, 16B])."""
    swizzles = [t for t in smem.history if isinstance(t, Swizzle)]
    if not swizzles:
        return 0, []
    units = try_int(swizzles[0].y_in.extent_expr)
    if units is None:
        return 0, [f"the swizzle of {smem.name} has a symbolic extent {swizzles[0].y_in.extent}; "
                   f"the TMA swizzle mode must be a constant"]
    return units * 16, []


def _collapse(domain: list[ViewEntry], inf: Inference, elem_bytes: int, swizzle_bytes: int):
    problems: list[str] = []
    entries = []
    for e in domain:
        r = inf.role(e.id)
        if r is None:
            problems.append(f"{e.id.label()} of the TMA domain has no role (neither tile, coordinate nor partitioned)")
        elif not (e.id.is_broadcast and r.kind is RoleKind.NONBULK):
            entries.append((e, r))  # a broadcast coordinate has extent 1 and no stride: no dimension
    if problems:
        return [], problems
    dims: list[TmaDim] = []
    k = len(entries) - 1
    while k >= 0:
        e, r = entries[k]
        if r.kind is RoleKind.PARTITIONED:
            dims.append(_dim([e], [], r.box, r.element_stride, "partitioned", elem_bytes, r.box_ids, r.tile_ids,
                             r.coordinate_ids))
            k -= 1
            continue
        box: list[ViewEntry] = []
        stride, box_ids, tile_ids = const(1), (), ()
        if r.kind is RoleKind.BULK:
            box = [e]
            k -= 1
            while k >= 0 and entries[k][1].kind is RoleKind.BULK and entries[k][0].contiguous \
                    and _fits(box + [entries[k][0]], not dims, elem_bytes, swizzle_bytes):
                box.insert(0, entries[k][0])
                k -= 1
            box_ids = tile_ids = tuple(x.id.name for x in box)
        elif r.kind is RoleKind.BOX:
            box = [e]
            stride, box_ids, tile_ids = r.element_stride, r.box_ids, r.tile_ids
            k -= 1
        coords: list[ViewEntry] = []
        if not box:
            coords = [e]
            k -= 1
        while k >= 0 and entries[k][1].kind is RoleKind.NONBULK and entries[k][0].contiguous:
            coords.insert(0, entries[k][0])
            k -= 1
        kind = "composited" if box and coords else "implicit whole" if box else "implicit size-one"
        box_extent = product([x.id.extent_expr for x in box]) if box else const(1)
        dims.append(_dim(coords + box, box, box_extent, stride, kind, elem_bytes, box_ids, tile_ids,
                         tuple(x.id.name for x in coords)))
    return dims, problems


def _fits(box: list[ViewEntry], innermost: bool, elem_bytes: int, swizzle_bytes: int) -> bool:
    """Composite bulk IDs into one box unless the box is known to exceed a limit."""
    n = try_int(product([x.id.extent_expr for x in box]))
    if n is None:
        return True
    if n > MAX_BOX:
        return False
    return not (innermost and swizzle_bytes and n * elem_bytes > swizzle_bytes)


def _dim(entries: list[ViewEntry], box: list[ViewEntry], box_extent: Expr, element_stride: Expr, kind: str,
         elem_bytes: int, box_ids, tile_ids, coordinate_ids) -> TmaDim:
    innermost = entries[-1]
    return TmaDim(
        box_expr=box_extent,
        tile_expr=ceildiv(box_extent, element_stride),
        element_stride_expr=element_stride,
        size_expr=product([x.id.extent_expr for x in entries]),
        stride_bytes_expr=mul(innermost.stride, elem_bytes),
        ids=tuple(x.id.name for x in entries),
        kind=kind,
        box_ids=tuple(box_ids),
        tile_ids=tuple(tile_ids),
        coordinate_ids=tuple(coordinate_ids),
        stride_elements_expr=innermost.stride,
    )


def id_by_name(tv: TensorView, name: str) -> IterDomain | None:
    for i in tv.all_ids():
        if i.name == name:
            return i
    return None
