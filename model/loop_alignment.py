"""Which consumer loop axes a producer's inlined loop axes share, past the consumer's own broadcasts
(nvFuser's TransformReplay::getMatchedLeafPosWithoutReplayCasP), and the frozen snapshot's loop
domains aligned to them.

A consumer loop ID that derives from no logical ID its producer maps to (the broadcast a
BroadcastOp makes: tv2 = broadcast(tv0_cache)[M, K, b] split like [M/64, b/64, K/64, ...]) is not
one the producer has: nvFuser passes over it when it matches the producer's loop IDs to the
consumer's, so the cache [M/64, K/64, ...] inlines at 2 into the consumer's position 3 and runs
inside the consumer's loop at b/64 (nvFuser's loop nest holds every loop a tensor's inner loops
depend on; b/64 shares the concrete loop it is promoted to, N/64). The rest of tileproof pairs a
producer's loop k with its consumer's loop k, so a frozen snapshot (what verify and compile read)
gets, for each such producer, a broadcast loop ID of extent 1 at each passed-over position
(derived from nothing, indexing nothing): the producer's inlined loops then line up with the
consumer's, and its statement lies in the passed-over loops as nvFuser's does.

Imports model/ only (mapping, iterdomain, types).
"""

from __future__ import annotations

from .iterdomain import IterDomain
from .mapping import IdMap, inline_mapped
from .types import IterType
from .expr import const


def own_ids(producer, consumer) -> set[int]:
    """uids of the consumer's IDs that derive from a logical ID mapped to one of the producer's
    (nvFuser's unskippable consumer IDs): its root IDs the op maps from the producer, and every ID
    a transform makes from one of them."""
    op = consumer.definition
    mine: set[int] = set()
    for inp, mapping in zip(op.inputs, op.logical_map):
        if inp is producer:
            mine.update(consumer.root[j].uid for j, k in enumerate(mapping) if k is not None)
    for t in consumer.history:
        if any(x.uid in mine for x in t.inputs):
            mine.update(o.uid for o in t.outputs)
    return mine


def consumer_positions(idmap: IdMap, producer, consumer, upto: int) -> list[int]:
    """The consumer loop positions the producer's loop positions 0, 1, ... share, as far as they
    match up to `upto` (shorter where one does not): consumer loop IDs the producer has no part in
    (own_ids) are passed over, as nvFuser's getMatchedLeafPosWithoutReplayCasP does."""
    return matched_positions(idmap, producer, consumer, upto)[0]


def matched_positions(idmap: IdMap, producer, consumer, upto: int) -> tuple[list[int], int]:
    """consumer_positions, and the consumer position the match stopped at (the one the producer's
    next loop ID would have to map to; past the consumer's loops where it ran out)."""
    mine = own_ids(producer, consumer)
    out: list[int] = []
    c = 0
    for k in range(upto):
        while c < len(consumer.loop) and consumer.loop[c].uid not in mine:
            c += 1
        if c == len(consumer.loop) or not inline_mapped(idmap, producer.loop[k], consumer, c):
            break
        out.append(c)
        c += 1
    return out, c


def align_inlined_loops(fusion) -> None:
    """Give each inlined producer of a frozen snapshot a broadcast loop ID at each consumer loop
    position it passes over (consumer_positions), so that its loop k is its consumers' loop k, and
    move its compute-at position to the consumers'. Consumers first (theirs are aligned when their
    producers are matched to them); a producer whose consumers place its loops differently is left
    as written (inlining joins fewer of its loops: INLINE-LOOP-MAP). Done once per snapshot."""
    if not getattr(fusion, "frozen", False):
        raise ValueError("align_inlined_loops: only a frozen snapshot (Fusion.snapshot()) is lowered")
    if getattr(fusion, "loops_aligned", False):
        return
    fusion.loops_aligned = True
    idmap = IdMap(fusion)
    for tv in reversed(list(fusion.topo_tensors())):
        ca = tv.compute_at
        consumers = fusion.consumers(tv)
        if tv.is_fusion_input or not ca or not consumers or ca > len(tv.loop):
            continue
        placed = {tuple(consumer_positions(idmap, tv, c, ca)) for c in consumers}
        if len(placed) != 1:
            continue
        positions = placed.pop()
        if len(positions) != ca or list(positions) == list(range(ca)):
            continue
        at = dict(zip(positions, tv.loop[:ca]))
        tv.loop[:ca] = [at.get(p) or _passed_over(fusion) for p in range(positions[-1] + 1)]
        tv.compute_at = positions[-1] + 1


def _passed_over(fusion) -> IterDomain:
    """A loop ID standing for a consumer's loop the producer has no part in: one point of it."""
    return IterDomain(const(1), number=fusion.next_iterdomain_number(), iter_type=IterType.Broadcast)
