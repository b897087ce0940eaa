"""Which loop axes inlining makes one loop of the kernel (nvFuser's loop map), and the parallel
type each such loop has.

A tensor inlined at position p shares its loop axes 0..p-1 with each computed consumer's (where
they map: mapping.inline_mapped). A loop of the kernel runs on one index, so it has one parallel
type: the one of its members that are not Serial. As nvFuser's lowering does
(ComputeAtMap::validateAndPropagatePType), a Serial member takes it (grouped reductions'
loop axes are members of their siblings' loops: sibling_joins), so that a producer inlined
into its consumer's blockIdx.x / threadIdx.x / unrolled loop runs on that index; two members with
different non-Serial types are INLINE-PARALLEL-MATCH's problem (execution/loops.py), and take
nothing. Types covered by one instruction (Vectorize, Bulk, Mma) are not given to another
statement's axis: such a loop is not one to share.

A loop all of whose members are broadcasts runs once, with index 0 (runs_once: nvFuser's trivial
loops), whatever their extents (a split broadcast b{32}).

Broadcasts that share a loop (one point, computed at each index of it) neither give nor take a
type. Merges of one (mapping.merges_a_broadcast) and IDs a consumer merges with one (loop
promotion: execution/promotion.py) give none, their extent not being the loop's
(sizes_the_loop), but take the loop's: promoted, they run over its extent, on its index, as
nvFuser's validateAndPropagatePType gives a loop group's type to all its IDs.

Imports model/ only (mapping, loop_alignment, types).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

from .loop_alignment import align_inlined_loops
from .mapping import IdMap, inline_mapped, merges_a_broadcast
from .types import ParallelType

# the axes one instruction of a statement covers (a vector access, a TMA box, a tensor-core tile):
# no loop another statement's axis can share
COVERED_BY_AN_INSTRUCTION = (ParallelType.Vectorize, ParallelType.Bulk, ParallelType.Mma)
# the loop types a Serial member of the loop takes: an index (thread, block, device), Unroll, Unswitch
SHARED_TYPES = tuple(p for p in ParallelType if p is not ParallelType.Serial and p not in COVERED_BY_AN_INSTRUCTION)


@dataclass(frozen=True)
class Join:
    """What inlining `producer` into `consumer` joins: their loop axes 0..shared-1. `stop` says why
    it joins fewer than the producer's compute-at position: "changed" (the producer has fewer loop
    axes than its position; consumer is None), "short" (the consumer has fewer), "unmapped" (axis
    `shared` does not map, or is the producer's reduction axis); None where it joins them all."""

    producer: object
    consumer: object | None
    shared: int
    stop: str | None = None


def computed_tensors(fusion) -> list:
    """The tensors the kernel computes (a definition, needed by an output), in fusion order."""
    needed: set[str] = set()
    stack = list(fusion.outputs)
    while stack:
        tv = stack.pop()
        if tv.name in needed or tv.definition is None:
            continue
        needed.add(tv.name)
        stack.extend(fusion.producers(tv))
    return [t for t in fusion.tensors if t.name in needed]


def inline_joins(fusion, tensors: Sequence, idmap: IdMap) -> Iterator[Join]:
    """What each computed tensor's inlining joins, with each consumer among `tensors`."""
    computed = {t.name for t in tensors}
    for tv in tensors:
        ca = tv.compute_at
        if ca > len(tv.loop):  # a propagated transform merged axes left of the compute-at position
            yield Join(tv, None, 0, "changed")
            continue
        for c in fusion.consumers(tv):
            if c.name not in computed:
                continue
            if ca > len(c.loop):
                yield Join(tv, c, 0, "short")
                continue
            k = next((k for k in range(ca) if tv.loop[k].is_reduction or not inline_mapped(idmap, tv.loop[k], c, k)),
                     ca)
            yield Join(tv, c, k, None if k == ca else "unmapped")


def loop_sets(tensors: Sequence, joins: Sequence[Join]) -> dict[tuple[str, int], tuple[str, int]]:
    """(tensor name, loop position) -> the representative of its loop (union-find over the joins)."""
    parent = {(t.name, k): (t.name, k) for t in tensors for k in range(len(t.loop))}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for j in joins:
        for k in range(j.shared):
            ra, rb = find((j.producer.name, k)), find((j.consumer.name, k))
            if ra != rb:
                parent[rb] = ra
    return {x: find(x) for x in parent}


def sizes_the_loop(ids: Sequence, idmap: IdMap | None = None) -> list:
    """The members of one loop whose extent and type are the loop's: not a broadcast of extent 1
    or a merge of one (they stand for one point of it), and with `idmap` those that derive from
    every concrete logical class a member does (nvFuser's loop promotion picks the ID that covers
    the group: an ID a consumer merges with a broadcast iterates the consumer's extent); all of
    them where every one is a broadcast."""
    own = [i for i in ids if not (i.is_broadcast or merges_a_broadcast(i))]
    if idmap is not None and len(own) > 1:
        covers = [concrete_classes(idmap, i) for i in own]
        full = set().union(*covers)
        own = [i for i, c in zip(own, covers) if c == full] or own
    return own or list(ids)


# the loop types a loop over broadcast axes may have and still run once: a for loop of the kernel
# (a launched index or an instruction's axis is not a loop the kernel skips)
TRIVIAL_TYPES = (ParallelType.Serial, ParallelType.Unroll, ParallelType.Unswitch)


def runs_once(ids: Sequence, idmap: IdMap | None = None) -> bool:
    """Whether the loop whose members' IterDomains are `ids` runs once, with index 0: every member
    is a broadcast (derived from broadcast IDs only: a split or merge of broadcasts), so no member
    iterates a concrete axis, and the loop is a for loop of the kernel (nvFuser's
    kir::ForLoop::isTrivial: the loop of a broadcast ID, which loop promotion leaves a broadcast
    where no member of its loop group is concrete, is not materialized). Its iterations would
    compute one element again and again: a broadcast ID contributes nothing to an index
    (execution/conditions/broadcast_loops.py proves it of each statement, and rejects the
    schedule where it does not hold)."""
    return bool(ids) and all(i.is_broadcast for i in ids) and loop_type(ids, idmap) in TRIVIAL_TYPES


def concrete_classes(idmap: IdMap, i) -> set[int]:
    """The exact classes of the logical IDs i derives from that hold no broadcast."""
    return {c for c in idmap.root_classes(i) if not idmap.holds_broadcast(c)}


def loop_type(ids: Sequence, idmap: IdMap | None = None) -> ParallelType | None:
    """The parallel type of the loop whose members' IterDomains are `ids`: the non-Serial type of
    the members that size it, Serial where none has one, None where two differ."""
    kinds = {i.parallel_type for i in sizes_the_loop(ids, idmap)} - {ParallelType.Serial}
    if len(kinds) > 1:
        return None
    return kinds.pop() if kinds else ParallelType.Serial


def propagated_types(fusion) -> dict[int, tuple[ParallelType, str | None]]:
    """IterDomain uid -> (type, origin) for each Serial loop axis of a computed tensor that takes
    its loop's type (nvFuser's validateAndPropagatePType), the origin being the user's line that
    parallelized the member it comes from."""
    tensors = computed_tensors(fusion)
    idmap = IdMap(fusion)
    joins = [j for j in inline_joins(fusion, tensors, idmap) if j.consumer is not None]
    sets = loop_sets(tensors, joins + sibling_joins(fusion, tensors, idmap))
    members: dict[tuple[str, int], list] = {}
    for t in tensors:
        for k, i in enumerate(t.loop):
            members.setdefault(sets[(t.name, k)], []).append(i)
    given: dict[int, tuple[ParallelType, str | None]] = {}
    for ids in members.values():
        kind = loop_type(ids, idmap) if len(ids) > 1 else None
        if kind not in SHARED_TYPES:
            continue
        donor = next(i for i in sizes_the_loop(ids, idmap) if i.parallel_type is kind)
        given.update({i.uid: (kind, donor.parallel_origin) for i in takes_the_type(ids, idmap)})
    return given


def takes_the_type(ids: Sequence, idmap: IdMap | None = None) -> list:
    """The members of one loop a type of the loop goes to: its Serial members but broadcasts
    (those that size it, and promoted ones, which run over its extent on its index)."""
    sizing = {id(i) for i in sizes_the_loop(ids, idmap)}
    return [i for i in ids if i.parallel_type is ParallelType.Serial and (id(i) in sizing or not i.is_broadcast)]


def sibling_joins(fusion, tensors: Sequence, idmap: IdMap) -> list[Join]:
    """The loops grouped reductions (tp.group_reductions) share as siblings: each member's leading
    loop axes that are the same iteration as the group's first member's (nvFuser's loop map maps
    a multi-output expression's outputs), so a type given to one is its siblings' too."""
    computed = {t.name for t in tensors}
    out = []
    for group in fusion.reduction_groups:
        ref, *others = [t for t in group if t.name in computed] or [None]
        for tv in others:
            k = next((k for k, (a, b) in enumerate(zip(ref.loop, tv.loop)) if not idmap.same(a, b)),
                     min(len(ref.loop), len(tv.loop)))
            out.append(Join(ref, tv, k))
    return out


def parallel_type_in_kernel(i, given: dict[int, tuple[ParallelType, str | None]]) -> ParallelType:
    """The type loop axis i runs on in the kernel: its loop's where it takes it (`given`:
    propagated_types), else its own."""
    return given[i.uid][0] if i.uid in given else i.parallel_type


def propagate_parallel_types(fusion) -> None:
    """Give each loop's type to its Serial members (propagated_types) in a frozen
    snapshot (Fusion.snapshot, what verify and compile read; never the user's schedule), as
    nvFuser's lowering does, once its producers' loops are aligned to their consumers'
    (loop_alignment.align_inlined_loops). Idempotent: a snapshot already propagated takes nothing
    more."""
    if not getattr(fusion, "frozen", False):
        raise ValueError("propagate_parallel_types: only a frozen snapshot (Fusion.snapshot()) is lowered")
    align_inlined_loops(fusion)
    given = propagated_types(fusion)
    for tv in fusion.tensors:
        for i in tv.loop:
            if i.uid in given:
                i.set_parallel_type(*given[i.uid])
