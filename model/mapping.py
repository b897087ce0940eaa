"""Which IterDomains of different tensors are the same iteration.

Logical axes connected by ops form root classes; a derived IterDomain's key is
its transform and its inputs' keys. Two IDs with equal keys iterate the same
index space the same way (nvFuser's exact map): that is what inlining, transform
propagation and parallelize_all_like compare."""

from __future__ import annotations

from .iterdomain import IterDomain, Merge, Split, Swizzle


class IdMap:
    """The exact map; with `map_broadcast`, also a broadcast axis with the axis an op meets it on
    (nvFuser's PairwiseLogicalDomainMap, which TransformPropagator replays through); with
    `permissive` (implies map_broadcast), also a merge of an axis with a broadcast its producer
    lacks (a tp.broadcast's new axis) with that axis (nvFuser's PERMISSIVE map, whose
    BestEffortReplay forwards such a merge to its other input: tv[i1] -> broadcast [b0, i1] merged
    to [b0*i1] maps i1 to b0*i1 and so to any [i0*i1] b0 meets)."""

    def __init__(self, fusion, *, map_broadcast: bool = False, permissive: bool = False):
        map_broadcast = map_broadcast or permissive
        self.fusion = fusion
        self._parent: dict[int, int] = {}
        for tv in fusion.tensors:
            for i in tv.root + tv.logical:
                self._parent.setdefault(i.uid, i.uid)
        self._broadcast_roots: set[int] = set()  # roots of the classes holding a broadcast axis
        for op in fusion.exprs:
            out = op.output
            for inp, mapping in zip(op.inputs, op.logical_map):
                for j, k in enumerate(mapping):
                    if k is None:
                        continue
                    a, b = out.root[j], inp.logical[k]
                    if map_broadcast or a.is_broadcast == b.is_broadcast:
                        self._union(a.uid, b.uid)
        for tv in fusion.tensors:
            self._broadcast_roots.update(self._find(i.uid) for i in tv.root + tv.logical if i.is_broadcast)
        # an rfactor's partial reduction has logical IDs derived from its root: the IDs mapped
        # to one of them iterate as it does (its transform's key)
        self._derived: dict[int, IterDomain] = {}
        for tv in fusion.tensors:
            own = {id(t) for t in tv.history}
            for i in tv.logical:
                if i.definition is not None and id(i.definition) in own:
                    self._derived[self._find(i.uid)] = i
        self._keys: dict[int, int] = {}
        self._intern: dict[tuple, int] = {}
        if permissive:
            self._forward_broadcast_merges()

    def _forward_broadcast_merges(self) -> None:
        """Give a merge of a new broadcast axis (one an input of its op lacks) with another ID
        that ID's key, so every merge with the same key (of an axis the broadcast meets) shares it."""
        for op in self.fusion.exprs:
            out = op.output
            new = {out.root[j].uid for mapping in op.logical_map for j, k in enumerate(mapping)
                   if k is None and out.root[j].is_broadcast}
            for t in out.history:
                if not isinstance(t, Merge):
                    continue
                for b, other in ((t.outer, t.inner), (t.inner, t.outer)):
                    if b.uid in new and other.uid not in new:
                        raw = ("merge", self.key(t.outer), self.key(t.inner))
                        self._intern.setdefault(raw, self.key(other))

    def _find(self, u: int) -> int:
        while self._parent[u] != u:
            self._parent[u] = self._parent[self._parent[u]]
            u = self._parent[u]
        return u

    def _union(self, a: int, b: int) -> None:
        ra, rb = self._find(a), self._find(b)
        if ra != rb:
            self._parent[max(ra, rb)] = min(ra, rb)

    def key(self, i: IterDomain) -> int:
        k = self._keys.get(i.uid)
        if k is not None:
            return k
        t = i.definition
        if t is None and i.uid in self._parent and self._derived.get(self._find(i.uid), i) is not i:
            k = self._keys[i.uid] = self.key(self._derived[self._find(i.uid)])
            return k
        if t is None:
            raw: tuple = ("root", self._find(i.uid)) if i.uid in self._parent else ("orphan", i.uid)
        elif isinstance(t, Split):
            raw = ("split", str(t.factor), t.inner_split, self.key(t.in_), t.outputs.index(i))
        elif isinstance(t, Merge):
            raw = ("merge", self.key(t.outer), self.key(t.inner))
        elif isinstance(t, Swizzle):
            raw = ("swizzle", self.key(t.x_in), self.key(t.y_in), t.outputs.index(i))
        else:  # pragma: no cover - every transform kind is listed above
            raise TypeError(f"unknown transform {t!r}")
        k = self._intern.setdefault(raw, len(self._intern))
        self._keys[i.uid] = k
        return k

    def same(self, a: IterDomain, b: IterDomain) -> bool:
        return self.key(a) == self.key(b)

    def by_key(self, tv) -> dict[int, IterDomain]:
        return {self.key(i): i for i in tv.all_ids()}

    def root_classes(self, i: IterDomain) -> set[int]:
        """The classes of the root or logical IDs i derives from."""
        t = i.definition
        if i.uid in self._parent:
            return {self._find(i.uid)}
        if t is None:
            return set()
        return set().union(*(self.root_classes(x) for x in t.inputs))

    def holds_broadcast(self, root_class: int) -> bool:
        """Whether some tensor has a broadcast axis in this class (of root_classes)."""
        return root_class in self._broadcast_roots


def unit_broadcast(i: IterDomain) -> bool:
    return i.is_broadcast and i.static_extent == 1


def merges_a_broadcast(i: IterDomain) -> bool:
    """Whether i is not a broadcast but derives from one of extent 1 through a merge: a loop ID
    that iterates another tensor's space once promoted."""
    if unit_broadcast(i):
        return False
    t = i.definition
    if isinstance(t, Merge):
        return any(unit_broadcast(x) or merges_a_broadcast(x) for x in t.inputs)
    if isinstance(t, (Split, Swizzle)):
        return any(merges_a_broadcast(x) for x in t.inputs)
    return False


def promoted_match(idmap: IdMap, p: IterDomain, c: IterDomain) -> bool:
    """Whether producer ID p iterates as consumer ID c once its broadcasts of extent 1 stand for
    the consumer's IDs they meet: the same transforms of matching inputs, a broadcast matching
    any iteration ID, a merge of the consumer's with a broadcast of extent 1 matching its other
    input."""
    if idmap.same(p, c):
        return True
    if unit_broadcast(p):
        return not c.is_reduction
    tp_, tc = p.definition, c.definition
    if isinstance(tc, Merge) and any(unit_broadcast(x) for x in tc.inputs) and not unit_broadcast(c):
        # the consumer merges in a broadcast of extent 1 p does not have: the merge iterates as its
        # other input (nvFuser's BestEffortReplay forwards such a merge to it)
        rest = tc.inner if unit_broadcast(tc.outer) else tc.outer
        if promoted_match(idmap, p, rest):
            return True
    if isinstance(tp_, Merge) and isinstance(tc, Merge):
        return promoted_match(idmap, tp_.outer, tc.outer) and promoted_match(idmap, tp_.inner, tc.inner)
    if isinstance(tp_, Split) and isinstance(tc, Split):
        return (tp_.factor == tc.factor and tp_.inner_split == tc.inner_split
                and tp_.outputs.index(p) == tc.outputs.index(c) and promoted_match(idmap, tp_.in_, tc.in_))
    if isinstance(tp_, Swizzle) and isinstance(tc, Swizzle):
        return (tp_.outputs.index(p) == tc.outputs.index(c) and promoted_match(idmap, tp_.x_in, tc.x_in)
                and promoted_match(idmap, tp_.y_in, tc.y_in))
    return False


def replayed_on(idmap: IdMap, p: IterDomain, c: IterDomain, own: set[int]) -> bool:
    """Whether reference ID c is producer ID p's transforms replayed on the IDs p's are promoted
    to (nvFuser's loop promotion replays them on the promoted IDs): the same iteration, the same
    transform of replayed inputs, or a merge of c's with IDs of logical classes the producer
    lacks (`own`: the exact classes of its logical IDs; the broadcast its consumer meets them
    on, resolved) where the merge's other input is p's replay: b2[I1] split by 4 replays on
    merge(I0, I1) split by 4, and b2's I1 is that merge's inner index. A broadcast of extent 1 of
    the producer's is promoted to whatever c is (one point of it)."""
    if idmap.same(p, c):
        return True
    if unit_broadcast(p):
        return not c.is_reduction
    tp_, tc = p.definition, c.definition
    if isinstance(tc, Merge):
        for lacked, rest in ((tc.outer, tc.inner), (tc.inner, tc.outer)):
            classes = idmap.root_classes(lacked)
            if classes and not classes & own and replayed_on(idmap, p, rest, own):
                return True
    if isinstance(tp_, Merge) and isinstance(tc, Merge):
        return replayed_on(idmap, tp_.outer, tc.outer, own) and replayed_on(idmap, tp_.inner, tc.inner, own)
    if isinstance(tp_, Split) and isinstance(tc, Split):
        return (tp_.factor == tc.factor and tp_.inner_split == tc.inner_split
                and tp_.outputs.index(p) == tc.outputs.index(c) and replayed_on(idmap, tp_.in_, tc.in_, own))
    return False


def promoted(idmap: IdMap, producer_id: IterDomain, consumer, k: int) -> bool:
    """Whether a producer's loop ID may share loop k of `consumer` without being the same
    iteration (nvFuser's loop promotion): a broadcast of extent 1 holds one element, which the
    producer computes (again) at every index of the consumer's loop; a merge of one iterates the
    consumer's loop where the broadcast meets the consumer's ID, and an ID the consumer merges
    with a broadcast of its own iterates as that merge (promoted_match; execution/promotion.py
    indexes the loop in the space of the tensor that sizes it). A bare broadcast shares any
    consumer loop (nvFuser's permissive map pairs it with the ID its consumer meets it on: an
    MmaOp's operand broadcast along the other operand's axes, tv2 = broadcast(tv0)[M, b] read by
    an add over [M, N]); nothing is promoted into a reduction loop (its consumers read totals,
    after it)."""
    c = consumer.loop[k]
    if c.is_reduction:
        return False
    if producer_id.is_broadcast:
        return True
    return (merges_a_broadcast(producer_id) or merges_a_broadcast(c)) and promoted_match(idmap, producer_id, c)


def inline_mapped(idmap: "IdMap", producer_id: IterDomain, consumer, k: int) -> bool:
    """Whether a producer inlined past position k shares loop k of `consumer`: the same
    iteration, two broadcasts of extent 1 (one point each), or a promoted broadcast."""
    c = consumer.loop[k]
    single = [unit_broadcast(i) for i in (producer_id, c)]
    return idmap.same(producer_id, c) or all(single) or promoted(idmap, producer_id, consumer, k)
