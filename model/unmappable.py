"""Logical axes a tensor cannot share a loop with its consumers: nvFuser's unmappable dims.

A row softmax computes e = exp(x - max) and reads it twice: sum(e) reduces the row, and e / sum
reads it again after the sum's total exists. If e were inlined along the row into both, the one
loop over the row would have to hold the sum's accumulation and, inside the same loop, the
division by its total: no order of statements does both (LOOP-NEST-ORDER). nvFuser's
ComputeAtLogicalDomainMap refuses to map such an axis (UnmappableReductionDomains: a reduction
axis and an axis of a tensor downstream of that reduction's output never join one class), so
inlineMost keeps e at the row loop, a persistent buffer each consumer reads whole. This module
builds that map and names the unmappable logical axes; model/inlining.py stops before them.

Imports model/ only (the fusion's ops and tensors).
"""

from __future__ import annotations


class _Classes:
    """A union-find over IterDomain uids."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, u: int) -> int:
        self.parent.setdefault(u, u)
        while self.parent[u] != u:
            self.parent[u] = self.parent[self.parent[u]]
            u = self.parent[u]
        return u

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def _downstream(fusion, tv) -> list:
    """Every tensor computed from tv, directly or through others (tv itself not)."""
    seen: dict[int, object] = {}
    stack = list(fusion.consumers(tv))
    while stack:
        t = stack.pop()
        if id(t) not in seen:
            seen[id(t)] = t
            stack.extend(fusion.consumers(t))
    return list(seen.values())


def unmappable_axes(fusion) -> dict[int, str]:
    """uid of each logical IterDomain a tensor may not be inlined along -> why (naming the
    reduction and the tensor after it). Built from the outputs back to the inputs, as nvFuser's
    ComputeAtLogicalDomainMapBuilder: a producer's logical axis joins the class of every consumer
    axis it is read as, unless those classes would put a reduction axis with an axis of a tensor
    computed after that reduction's total (UnmappableReductionDomains::isReductionOutputMapped);
    then it joins none and is unmappable. A broadcast axis too: softmax's broadcast max, read by
    x - max before the sum and again by the x - max after it, cannot share both loops.
    A tensor's axes join its consumers' through the op's map of logical to root axes; an rfactor's
    partial, whose logical axes are derived from its root ones, passes no class through."""
    classes = _Classes()
    # each reduction axis -> the uids that must never share its class (every axis after its total)
    conflicts: list[tuple[int, object, object, set[int]]] = []
    for tv in fusion.tensors:
        reduced = [i for i in tv.root if i.is_reduction]
        if not reduced or tv.definition is None or _running(fusion, tv):
            continue
        after = _downstream(fusion, tv)
        later = {i.uid for t in after for i in t.root + t.logical}
        for r in reduced:
            conflicts.append((r.uid, tv, after, later))
    out: dict[int, str] = {}
    for tv in reversed(list(fusion.topo_tensors())):
        readers = [(op, k) for op in fusion.uses_of(tv) for k, inp in enumerate(op.inputs) if inp is tv]
        for a, axis in enumerate(tv.logical):
            read_as = [op.output.root[j] for op, k in readers
                       for j, src in enumerate(op.logical_map[k]) if src == a]
            if not read_as:
                continue
            why = _conflict(classes, conflicts, read_as)
            if why is None:
                for c in read_as:
                    classes.union(axis.uid, c.uid)
            else:
                out[axis.uid] = why
    return out


def _running(fusion, tv) -> bool:
    """Whether tv's consumers may read it inside its loops: an online max (model/online.py), or a
    partial reduction an online max combines, directly or through further partials (its tile's
    max, read by the tile's consumers; the tile's max of partial maxes)."""
    if tv.online is not None:
        return True
    return any(op.name == "max" and op.inputs[0] is tv and _running(fusion, op.output) for op in fusion.uses_of(tv))


def _conflict(classes: _Classes, conflicts, read_as) -> str | None:
    """Why mapping one axis to all of `read_as` would join a reduction axis with an axis after
    its total; None when it would not."""
    joined = {classes.find(c.uid) for c in read_as}
    for r_uid, reduction, after, later in conflicts:
        if classes.find(r_uid) not in joined:
            continue
        for c in read_as:
            if c.uid in later or any(classes.find(u) == classes.find(c.uid) for u in later):
                cls = classes.find(c.uid)
                reader = next((t for t in after for i in t.root + t.logical
                               if not i.is_broadcast and classes.find(i.uid) == cls), None)
                name = reader.name if reader is not None else "a tensor"
                return f"{reduction.name} reduces it and {name}, computed after {reduction.name}'s total, reads it too"
    return None


__all__ = ["unmappable_axes"]
