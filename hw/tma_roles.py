"""Role inference for TMA (the seed's steps 2-3, read backwards as nvFuser's tma.cpp does).

Walking the TMA consumer's transforms from its loop domain towards its logical domain,
every IterDomain gets a role: `bulk` (its loop descendants are all Bulk: part of a
dense box), `nonbulk` (none are Bulk: a coordinate), `box` (the input of a striding
split: a strided box), or `partitioned` (the input of a boxing split, possibly moved
by rotation). Transforms the walk consumes lie between the TMA domain and the loop
domain; the rest are the view from the global allocation domain to the TMA domain.

Rotating the partitioned role up through a split (Theorem 2.1) keeps the box a regular
tiling only when the box divides the split's inner extent. A TMA load does not need one:
the box is placed at the coordinate the split chain computes (32*i2 + 12*i3 for a box of
12 in rows of 32), and the elements past the row (the inner ID's holes) are other rows'
elements, landing in shared-memory slots of consumer points that are holes, which no
reader reads (TMA-TILE-CONTIGUITY and TMA-WHOLE-TILES still prove where those slots are).
So a load with a dense box rotates through any split (an `overhang`). A store would write
the overhang over other rows' global elements, and a strided box's holes are not its
elements: those rotate only when the box divides.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ..model.expr import Expr, ceildiv, const, mul, try_int
from ..model.global_layout import allocation_problem, global_strides
from ..model.iterdomain import IterDomain, Merge, Split, Swizzle, Transform
from ..model.tensor import TensorView
from ..model.tensor_base import loop_path
from ..model.types import MemoryType, ParallelType



class RoleKind(enum.Enum):
    """What an IterDomain is to the TMA (the module docstring says how each is found)."""

    BULK = "bulk"  # a dense part of the box
    NONBULK = "nonbulk"  # a coordinate
    BOX = "box"  # the input of a striding split
    PARTITIONED = "partitioned"  # the input of a boxing split


TILE_KINDS = (RoleKind.BULK, RoleKind.BOX)


class ViewKind(enum.Enum):
    """What a transform of the view is, and whether it is one."""

    SPLIT = "split"  # a view when it divides (ViewStep.divided by .factor)
    MERGE_OK = "merge-ok"  # adjacent IDs, the outer one contiguous
    MERGE_NOT_ADJACENT = "merge-not-adjacent"
    MERGE_DISCONTIGUOUS = "merge-discontiguous"
    SWIZZLE = "swizzle"  # never a view


@dataclass(frozen=True)
class Role:
    """What one IterDomain is to the TMA. For `box` and `partitioned`, `box` is the box
    extent, `element_stride` the striding split's factor (1 for a dense box)."""

    kind: RoleKind
    box: Expr | None = None
    element_stride: Expr = field(default_factory=lambda: const(1))
    box_ids: tuple[str, ...] = ()
    tile_ids: tuple[str, ...] = ()
    coordinate_ids: tuple[str, ...] = ()

    @property
    def tile(self) -> Expr | None:
        return None if self.box is None else ceildiv(self.box, self.element_stride)


@dataclass
class Inference:
    """Roles by uid, the consumed transforms, and why some splits could not be rotated."""

    roles: dict[int, Role]
    consumed: set[int]  # id() of transforms the role walk consumed
    rotation_notes: dict[int, str]  # id(split) -> why the box could not be rotated through it
    overhangs: set[int] = field(default_factory=set)  # id() of splits a load's box rotated through without dividing

    def role(self, i: IterDomain) -> Role | None:
        return self.roles.get(i.uid)

    def is_tile(self, i: IterDomain) -> bool:
        r = self.roles.get(i.uid)
        return r is not None and r.kind in TILE_KINDS


def divides_statically(n: Expr, d: Expr) -> bool:
    """d | n decided without a solver: concrete values, or d a factor of the product n.
    A store's or strided box's rotation whose condition is only provable with assumptions
    is not taken (conservative: it costs a dimension and makes the outer split part of the view)."""
    a, b = try_int(n), try_int(d)
    if a is not None and b is not None:
        return a % b == 0
    if n == d or b == 1:
        return True
    factors = list(n.args) if n.op == "mul" else [n]
    wanted = list(d.args) if d.op == "mul" else [d]
    for w in wanted:
        if w not in factors:
            return False
        factors.remove(w)
    return True


def _bulk(i: IterDomain) -> Role:
    return Role(RoleKind.BULK, i.extent_expr, const(1), (i.name,), (i.name,), ())


def _nonbulk(i: IterDomain) -> Role:
    return Role(RoleKind.NONBULK, coordinate_ids=(i.name,))


def infer_roles(consumer: TensorView) -> Inference:
    """The roles of the TMA consumer's IDs. A consumer in shared memory is a load's, whose dense
    box may rotate through a split it does not divide (the module docstring says why)."""
    overhang = consumer.memory_type is MemoryType.Shared
    roles: dict[int, Role] = {}
    for i in consumer.loop:
        roles[i.uid] = _bulk(i) if i.parallel_type is ParallelType.Bulk else _nonbulk(i)
    consumed: set[int] = set()
    notes: dict[int, str] = {}
    overhangs: set[int] = set()
    for t in reversed(loop_path(consumer)):
        outs = [roles.get(o.uid) for o in t.outputs]
        if any(r is None for r in outs):
            continue  # an output is not explained by the walk: t belongs to the view
        assigned = _infer_one(t, outs, notes, overhangs if overhang else None)
        if assigned is None:
            continue
        roles.update(assigned)
        consumed.add(id(t))
    return Inference(roles, consumed, notes, overhangs)


def _infer_one(t: Transform, outs: list[Role], notes: dict[int, str],
               overhangs: set[int] | None) -> dict[int, Role] | None:
    kinds = [r.kind for r in outs]
    if isinstance(t, Merge):
        if kinds[0] in (RoleKind.BULK, RoleKind.NONBULK):
            make = _bulk if kinds[0] is RoleKind.BULK else _nonbulk
            return {t.outer.uid: make(t.outer), t.inner.uid: make(t.inner)}
        return None  # a merge feeding a box or a partitioned ID defines the TMA domain: view
    if isinstance(t, Swizzle):
        if kinds[0] == kinds[1] and kinds[0] in (RoleKind.BULK, RoleKind.NONBULK):
            make = _bulk if kinds[0] is RoleKind.BULK else _nonbulk
            return {t.x_in.uid: make(t.x_in), t.y_in.uid: make(t.y_in)}
        return None
    assert isinstance(t, Split)
    outer, inner = outs
    src = t.in_
    if outer.kind == inner.kind and outer.kind in (RoleKind.BULK, RoleKind.NONBULK):
        return {src.uid: _bulk(src) if outer.kind is RoleKind.BULK else _nonbulk(src)}
    if outer.kind is RoleKind.NONBULK and inner.kind in (RoleKind.BULK, RoleKind.BOX):
        # boxing split: the inner output is the box, the outer the coordinate
        box_ids = inner.box_ids if inner.kind is RoleKind.BOX else (t.inner.name,)
        return {src.uid: Role(RoleKind.PARTITIONED, t.inner.extent_expr, inner.element_stride, box_ids,
                              inner.tile_ids, (t.outer.name,))}
    if outer.kind is RoleKind.BULK and inner.kind is RoleKind.NONBULK:
        # striding split: outer = tile, inner = stride; the input is a strided box
        return {src.uid: Role(RoleKind.BOX, src.extent_expr, t.inner.extent_expr, (src.name,), outer.tile_ids, ())}
    if outer.kind is RoleKind.NONBULK and inner.kind is RoleKind.PARTITIONED:
        # rotation (Theorem 2.1): the partitioned role moves up when the box split divides, or,
        # for a load's dense box, past the inner ID's end (an overhang into its holes)
        rotated = {src.uid: Role(RoleKind.PARTITIONED, inner.box, inner.element_stride, inner.box_ids, inner.tile_ids,
                                 (t.outer.name,) + inner.coordinate_ids)}
        if divides_statically(t.inner.extent_expr, inner.box):
            return rotated
        if overhangs is not None and try_int(inner.element_stride) == 1:
            overhangs.add(id(t))
            return rotated
        why = (f"a TMA store's box may not overhang {t.inner.label()}: it would write shared-memory holes over "
               f"other global elements" if overhangs is None
               else f"the box is strided (element stride {inner.element_stride}), so it may not overhang")
        notes[id(t)] = (f"the box {inner.box} of {t.inner.label()} does not divide its extent "
                        f"{t.inner.extent}, so the box cannot be rotated through this split (Theorem 2.1; {why})")
        return None
    if outer.kind is RoleKind.PARTITIONED and inner.kind is RoleKind.BULK and try_int(outer.element_stride) == 1:
        # rotation: a dense box of the outer output merges with the bulk inner output
        return {src.uid: Role(RoleKind.PARTITIONED, mul(outer.box, t.inner.extent_expr), const(1),
                              outer.box_ids + (t.inner.name,), outer.tile_ids + (t.inner.name,),
                              outer.coordinate_ids)}
    return None


@dataclass
class ViewEntry:
    """One IterDomain of the replayed view: its stride in elements and whether it is
    contiguous with the next entry (stride == next stride * next extent); None for broadcast."""

    id: IterDomain
    stride: Expr
    contiguous: bool | None


@dataclass
class ViewStep:
    """A transform of the view with what it requires: a split must divide (`divided` by
    `factor`), a merge must join adjacent contiguous IDs, a swizzle is never a view."""

    transform: Transform
    kind: ViewKind
    divided: Expr | None = None
    factor: Expr | None = None
    note: str | None = None
    mixing: bool = False  # the failure comes from transforming tile and non-tile IDs together


def allocation_entries(g: TensorView, to_consumer: dict[int, IterDomain]) -> tuple[list[ViewEntry], list[str]]:
    """The global tensor's memory order (model/global_layout.py: the allocation domain with its
    merges expanded into logical axes) as consumer IDs, with their element strides. A merged
    allocation axis becomes its logical axes, contiguous with each other, so a consumer that
    merges them back gets one TMA dimension of size product and the inner axis's stride. A
    discontiguous axis has a launch-time stride, the variable `stride.<tensor>.<logical axis>`."""
    layout = global_strides(g)
    if layout is None:
        return [], [f"{allocation_problem(g)}; a TMA dimension is taken over logical axes or merges of them"]
    problems: list[str] = []
    entries: list[ViewEntry] = []
    inner_stride: Expr | None = None
    for k in range(len(layout.alloc_axes) - 1, -1, -1):
        axis = layout.alloc_axes[k]
        a = g.logical[axis]
        c = to_consumer.get(a.uid)
        if c is None:
            problems.append(f"logical axis {axis} ({a.label()}) of {g.name} is not a logical axis of the TMA consumer")
            continue
        if layout.contiguous[k] is None:  # broadcast: never indexed
            entries.append(ViewEntry(c, inner_stride if inner_stride is not None else const(1), None))
            continue
        entries.append(ViewEntry(c, layout.strides[k], layout.contiguous[k]))
        inner_stride = layout.strides[k]
    entries.reverse()
    return entries, problems


def replay_view(consumer: TensorView, entries: list[ViewEntry], inf: Inference) -> tuple[list[ViewEntry], list[ViewStep], list[str]]:
    """Apply the unconsumed transforms, in schedule order, to the allocation-ordered list;
    the result is the TMA domain (outer to inner) with strides and contiguity."""
    current = list(entries)
    steps: list[ViewStep] = []
    problems: list[str] = []
    for t in loop_path(consumer):
        if id(t) in inf.consumed:
            continue
        pos = {e.id.uid: k for k, e in enumerate(current)}
        if any(i.uid not in pos for i in t.inputs):
            missing = ", ".join(i.label() for i in t.inputs if i.uid not in pos)
            problems.append(f"`{t}` transforms {missing}, which is not on the path from the global allocation domain")
            continue
        if isinstance(t, Split):
            k = pos[t.in_.uid]
            e = current[k]
            inner = ViewEntry(t.inner, e.stride, e.contiguous)
            outer = ViewEntry(t.outer, mul(e.stride, t.inner.extent_expr), True)
            current[k:k + 1] = [outer, inner]
            steps.append(ViewStep(t, ViewKind.SPLIT, t.in_.extent_expr, t.inner.extent_expr if t.inner_split else t.factor,
                                  note=inf.rotation_notes.get(id(t))))
        elif isinstance(t, Merge):
            ko, ki = pos[t.outer.uid], pos[t.inner.uid]
            eo, ei = current[ko], current[ki]
            trivial = eo.contiguous is None or try_int(t.outer.extent_expr) == 1
            kind = ViewKind.MERGE_OK
            if ki != ko + 1:
                kind = ViewKind.MERGE_NOT_ADJACENT
            elif not trivial and not eo.contiguous:
                kind = ViewKind.MERGE_DISCONTIGUOUS
            mixing = kind is not ViewKind.MERGE_OK and any(_sibling_is_tile(x, inf) for x in (t.outer, t.inner))
            steps.append(ViewStep(t, kind, mixing=mixing))
            merged = ViewEntry(t.out, ei.stride, ei.contiguous)
            current[min(ko, ki)] = merged
            del current[max(ko, ki)]
        else:
            assert isinstance(t, Swizzle)
            kx, ky = inf.role(t.x_out), inf.role(t.y_out)
            mixing = kx is not None and ky is not None and ((kx.kind in TILE_KINDS) != (ky.kind in TILE_KINDS))
            steps.append(ViewStep(t, ViewKind.SWIZZLE, mixing=mixing))
            kxi, kyi = pos[t.x_in.uid], pos[t.y_in.uid]
            current[kxi] = ViewEntry(t.x_out, current[kxi].stride, current[kxi].contiguous)
            current[kyi] = ViewEntry(t.y_out, current[kyi].stride, current[kyi].contiguous)
    return current, steps, problems


def _sibling_is_tile(i: IterDomain, inf: Inference) -> bool:
    """i came out of a split whose other output is a tile ID: i is that tile's coordinate
    (or the tile itself was merged away), so merging i transforms across the branches."""
    d = i.definition
    if not isinstance(d, Split):
        return False
    other = d.inner if d.outer is i else d.outer
    return inf.is_tile(other)
