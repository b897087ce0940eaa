"""Loop promotion: a tensor's inlined loops that iterate another tensor's space (nvFuser's
loop promotion, csrc/id_model/loop_promotion.cpp).

A loop of the kernel joins loop IDs of several tensors (model/loop_map.py); its extent is the one
of the members that cover every concrete logical axis any member derives from (loop_map.py
sizes_the_loop). A member that does not is promoted to it: a merge of a broadcast of extent 1
with a concrete ID (tv2[b, I1] merged and split like its consumer's [I0, I1]; an MmaOp's
operand A[M, 1, K] tiled like D[M, N]) or an ID its consumer merges with such a broadcast (the
cache of tv2's input, [I1], inlined into tv2's merge of b and I1). As nvFuser does, such a
tensor's loops run over the extents of the tensor that sizes them (its reference), its IDs above
the inlined loops take their indices from the reference's IDs they map to exactly (tv2's I1: the
consumer's I1, i.e. (blockIdx.x / ...) % I1), so the index ignores the broadcast part, and the
IDs between those loops and the mapped ones (the merge of I1 with the broadcast) have no bound of
their own: the mapped IDs' bounds are the tensor's holes. A promoted loop whose tensor has a
concrete logical ID no mapped ID gives an index is rejected (promotion_problems: INLINE-LOOP-MAP).

Where the inlined loops leave a logical ID unindexed because the tensor's loops past its
compute-at position split it too (b2[I1] split [I1/4/32, 32, Vectorize{4}], inlined at 2 into
loops that iterate merge(I0, I1) split alike), nvFuser replays those transforms on the promoted
IDs: b2's Vectorize{4} is the inner of the promoted merge's split by 4, and b2's I1 is
((BIDx * 32 + TIDx) * 4 + v) % I1. Here such a loop, or an ID the tensor's loops there split
further (b2's vector split again into 2 x 2), is paired with the reference's loop it replays
(mapping.replayed_on, the same extent), and the reference's IDs are indexed with the tensor's own
index of it (Promotion.replays).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model.expr import Expr, const
from ..model.iterdomain import IterDomain, Merge, Split
from ..model.loop_map import computed_tensors, inline_joins, loop_sets, runs_once, sibling_joins, sizes_the_loop
from ..model.mapping import IdMap, replayed_on, unit_broadcast
from ..model.tensor import TensorView
from ..model.tensor_base import fixed_by
from .derive import per_fusion
from .problems import Problem


@dataclass(frozen=True)
class Promotion:
    """How tv's inlined loops iterate its reference's space (see the module docstring)."""

    consumer: TensorView  # the reference: the tensor whose loops at tv's inlined positions size them
    positions: int  # tv's first `positions` loops are the reference's
    seeds: dict[int, IterDomain]  # uid of an ID of tv -> the reference's ID it maps to exactly
    loop_only: frozenset[int]  # IDs of tv fixed by those loops but mapped to none: no index, no bound of their own
    holes: tuple[IterDomain, ...]  # the reference's IDs those loops fix whose bounds it needs: tv's holes too
    replays: tuple[tuple[int, int], ...] = ()  # (uid of tv's ID past the shared loops, the reference's loop it replays)

    def extent(self, tv: TensorView, k: int) -> Expr:
        """The extent of tv's loop k: the reference's where shared."""
        return (self.consumer.loop[k] if k < self.positions else tv.loop[k]).extent_expr

    def consumer_env(self, tv: TensorView, env: dict[int, Expr]) -> dict[int, Expr]:
        """The reference's loop indices at tv's loop point `env` (the shared loops, and the loops
        tv replays past them: a loop of tv's, or an ID its own loops there split further, indexed
        from them)."""
        out = {self.consumer.loop[k].uid: env[tv.loop[k].uid] for k in range(self.positions)}
        if self.replays:
            own = _past_shared_indices(tv, self.positions, env)
            out.update({self.consumer.loop[j].uid: own[u] for u, j in self.replays})
        return out


def _past_shared_indices(tv: TensorView, positions: int, env: dict[int, Expr]) -> dict[int, Expr]:
    """uid -> index of tv's IDs that its loops past the first `positions` fix alone (backward
    through its transforms from those loops' indices in `env`)."""
    idx = {i: env[i.uid] for i in tv.loop[positions:]}
    for t in reversed(tv.history):
        if all(o in idx for o in t.outputs) and not all(x in idx for x in t.inputs):
            idx.update(t.backward(idx))
    return {i.uid: e for i, e in idx.items()}


@dataclass(frozen=True)
class _Loops:
    """The fusion's loops as inlining joins them: (tensor name, position) -> its loop, and the
    loop's members that size it (ids of their IterDomains)."""

    idmap: IdMap
    loop_of: dict[tuple[str, int], tuple[str, int]]
    sizing: dict[tuple[str, int], frozenset[int]]
    tensors: tuple[TensorView, ...]


@per_fusion
def _loops(fusion) -> _Loops:
    tensors = computed_tensors(fusion)
    idmap = IdMap(fusion)
    joins = [j for j in inline_joins(fusion, tensors, idmap) if j.consumer is not None]
    loop_of = loop_sets(tensors, joins)
    members: dict[tuple[str, int], list[IterDomain]] = {}
    for t in tensors:
        for k, i in enumerate(t.loop):
            members.setdefault(loop_of[(t.name, k)], []).append(i)
    sizing = {key: frozenset(id(i) for i in sizes_the_loop(ids, idmap)) for key, ids in members.items()}
    return _Loops(idmap, loop_of, sizing, tuple(tensors))


def promoted_positions(tv: TensorView) -> list[int]:
    """tv's inlined loop positions whose loop another member sizes (tv's ID there is promoted);
    a broadcast of extent 1 stands for one point of any loop and is not."""
    ca = tv.compute_at
    if not ca or tv.fusion is None or ca > len(tv.loop):
        return []
    loops = _loops(tv.fusion)
    if (tv.name, 0) not in loops.loop_of:
        return []
    return [k for k in range(ca) if not tv.loop[k].is_broadcast
            and id(tv.loop[k]) not in loops.sizing[loops.loop_of[(tv.name, k)]]]


def reference(tv: TensorView) -> TensorView | None:
    """The tensor whose loop IDs size every loop tv is inlined in (its consumers first), None
    where no one does."""
    loops = _loops(tv.fusion)
    ca = tv.compute_at
    mine = [loops.loop_of[(tv.name, k)] for k in range(ca)]
    consumers = tv.fusion.consumers(tv)
    for t in consumers + [t for t in loops.tensors if t not in consumers]:
        if t is tv or len(t.loop) < ca or (t.name, 0) not in loops.loop_of:
            continue
        if all(loops.loop_of[(t.name, k)] == mine[k] and id(t.loop[k]) in loops.sizing[mine[k]] for k in range(ca)):
            return t
    return None


@per_fusion
def promotion(tv: TensorView) -> Promotion | None:
    """tv's promotion when an inlined loop ID of tv is promoted (promoted_positions) and a
    reference sizes its loops; None otherwise, the usual case (every inlined loop ID sizes its
    loop, or is a broadcast)."""
    if not promoted_positions(tv):
        return None
    ref = reference(tv)
    if ref is None:
        return None
    ca = tv.compute_at
    idmap = _loops(tv.fusion).idmap
    # a plain broadcast loop stands for the reference's loop without fixing any index of tv
    shared = [(k, k) for k in range(ca) if not tv.loop[k].is_broadcast]
    promo = _promotion(tv, ref, idmap, shared)
    if _unindexed(tv, promo, promoted_positions(tv)):  # its loops past the shared ones split them too
        replays = _replayed_loops(tv, ref, idmap)
        if replays:
            promo = _promotion(tv, ref, idmap, shared, tuple(replays))
    return promo


def _promotion(tv: TensorView, ref: TensorView, idmap: IdMap, shared: list[tuple[int, int]],
               replays: tuple[tuple[int, int], ...] = ()) -> Promotion:
    """tv's promotion to `ref` through the loop pairs `shared` and `replays` (tv's loop, ref's
    loop): tv's IDs those loops fix take the index of the ref's ID they map to exactly."""
    by_uid = {i.uid: i for i in tv.all_ids()}
    mine = fixed_by(tv, [tv.loop[k] for k, _ in shared] + [by_uid[u] for u, _ in replays])
    theirs = fixed_by(ref, [ref.loop[j] for _, j in shared + list(replays)])
    by_key = {idmap.key(i): i for i in ref.all_ids() if i.uid in theirs}
    seeds = {i.uid: by_key[idmap.key(i)] for i in tv.all_ids() if i.uid in mine and idmap.key(i) in by_key}
    loop_only = frozenset(mine - set(seeds) - {i.uid for i in tv.loop})
    holes = tuple(i for i in ref.all_ids() if i.uid in theirs and i.uid in needed_bounds(ref))
    return Promotion(ref, tv.compute_at, seeds, loop_only, holes, replays)


def _replayed_loops(tv: TensorView, ref: TensorView, idmap: IdMap) -> list[tuple[int, int]]:
    """(uid, j): tv's ID past its compute-at position that replays the reference's loop j past it
    (mapping.replayed_on, over the same extent, so tv's ID covers j's), each j once: tv's loops
    there first, then the IDs those loops split further (b2's vector split again into 2 x 2
    replays the reference's vector of 4), which they index alone."""
    ca = tv.compute_at
    own = set().union(*(idmap.root_classes(i) for i in tv.root + tv.logical))
    inner = fixed_by(tv, tv.loop[ca:])
    candidates = list(tv.loop[ca:]) + [i for i in tv.all_ids() if i.uid in inner and i not in tv.loop]
    out: list[tuple[int, int]] = []
    for p in candidates:
        j = next((j for j in range(ca, len(ref.loop)) if j not in {b for _, b in out}
                  and ref.loop[j].extent_expr == p.extent_expr and replayed_on(idmap, p, ref.loop[j], own)), None)
        if j is not None:
            out.append((p.uid, j))
    return out


@per_fusion
def promotion_problems(fusion) -> list[Problem]:
    """INLINE-LOOP-MAP's problems with promoted loops: a tensor whose promoted loops no tensor
    sizes, or whose concrete logical IDs take an index from a promoted loop but map to no ID of
    the reference (the loop runs over the reference's extent, the tensor's own transforms would
    index past its extents)."""
    out = []
    for tv in _loops(fusion).tensors:
        ks = promoted_positions(tv)
        if not ks:
            continue
        promo = promotion(tv)
        if promo is None:
            out.append(_unpromotable(tv, ks[0], "no tensor sharing its loops sizes all of them"))
            continue
        unindexed = _unindexed(tv, promo, ks)
        if unindexed:
            out.append(_unpromotable(
                tv, ks[0], f"its logical {', '.join(i.label() for i in unindexed)} would take an index from "
                           f"the promoted loop but maps to no ID of {promo.consumer.name} it shares"))
    return out


def _unindexed(tv: TensorView, promo: Promotion, ks: list[int]) -> list[IterDomain]:
    """tv's concrete logical IDs whose index derives from a promoted loop through IDs no seed
    gives: computed backward from a loop index over the reference's extent, they would be wrong."""
    stale = {tv.loop[k].uid for k in ks}
    for t in reversed(tv.history):
        if any(o.uid in stale for o in t.outputs):
            stale.update(x.uid for x in t.inputs if x.uid not in promo.seeds)
    return [i for i in tv.root + [i for i in tv.logical if i not in tv.root]
            if i.uid in stale and not i.is_broadcast]


def _unpromotable(tv: TensorView, k: int, why: str) -> Problem:
    i = tv.loop[k]
    return Problem(
        f"{tv.name} is inlined at position {tv.compute_at} but its loop axis {k} ({i.label()}) iterates "
        f"another tensor's extent (loop promotion) and {why}",
        hint=f"inline {tv.name} at most at position {k} (inline_at({k})), or schedule it so that its inlined "
             f"loop axes derive from the logical axes its consumer's do (merge the broadcast first, or "
             f"split only the loops it shares)",
        tensor=tv.name, ids=(i.name,), values={"compute_at": tv.compute_at, "axis": k},
        notes=(f"{tv.name}'s axis {k} shares a loop whose extent is a consumer's: nvFuser's loop promotion "
               f"indexes {tv.name} through the IDs it maps to in that consumer",),
        location=i.origin or tv.origin)


@per_fusion
def broadcast_loops(fusion) -> frozenset[tuple[str, int]]:
    """(tensor name, loop position) of each loop of the kernel that runs once because all its
    members are broadcasts (model/loop_map.py runs_once: nvFuser's trivial loops), the loops joined
    as execution/loops.py loop_groups joins them (inlining and grouped reductions' siblings)."""
    tensors = computed_tensors(fusion)
    idmap = IdMap(fusion)
    joins = [j for j in inline_joins(fusion, tensors, idmap) if j.consumer is not None]
    sets = loop_sets(tensors, joins + sibling_joins(fusion, tensors, idmap))
    members: dict[tuple[str, int], list[IterDomain]] = {}
    for t in tensors:
        for k, i in enumerate(t.loop):
            members.setdefault(sets[(t.name, k)], []).append(i)
    once = {root for root, ids in members.items() if runs_once(ids, idmap)}
    return frozenset(key for key, root in sets.items() if root in once)


def loop_extents(tv: TensorView) -> list[Expr]:
    """The extent of each loop of tv: 1 where the loop runs once over broadcasts (broadcast_loops),
    the consumer's where tv's loop is promoted to it."""
    promo = promotion(tv)
    once = broadcast_loops(tv.fusion) if tv.fusion is not None else frozenset()
    return [const(1) if (tv.name, k) in once else promo.extent(tv, k) if promo else i.extent_expr
            for k, i in enumerate(tv.loop)]


def needed_bounds(tv: TensorView) -> set[int]:
    """The IDs whose bound is not implied by others: those reached backward from the loop
    domain, except the inputs of a merge (out < Eo * Ei implies out // Ei < Eo, and
    out % Ei < Ei always) and the outer output of a split (outer * Ei + inner < E implies
    outer < ceil(E / Ei)). Loop IDs are bounded by their loops; IDs computed forward from
    bounded ones (an allocation branch) are bounded by construction."""
    backward = fixed_by(tv, tv.loop)
    implied = set()
    for t in tv.history:
        if isinstance(t, Merge) and t.out.uid in backward:
            implied.update(x.uid for x in t.inputs)
        if isinstance(t, Split) and t.in_.uid in backward:
            implied.add(t.outer.uid)
    loops = {i.uid for i in tv.loop}
    promo = promotion(tv)
    if promo is None:
        return backward - implied - loops
    # the IDs mapped to the consumer's are bounded as the consumer's are, and the consumer's holes
    # at the shared loops are tv's; the loop IDs' merges of broadcasts have no bound of their own
    mapped = {u for u, c in promo.seeds.items() if not c.is_broadcast}
    return (backward - implied - promo.loop_only | mapped | {i.uid for i in promo.holes}) - loops
