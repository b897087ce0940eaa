"""Loop promotion through merges: a tensor-core operand's tile inlined into loops its own IDs do not span.

An MmaOp's operand is broadcast along the other operand's axes (A[M, 1, K], B[1, N, K]). A
producer's broadcast loop ID of extent 1 may share a consumer's loop (mapping.promoted); this
module covers the same sharing one level down, where the broadcast was merged into a loop ID:
A's tile [Mo, 1] merged and split like the consumer's [Mo, No] (a persistent tile loop over
`Mo * No` tiles split by the number of SMs). Such a loop ID iterates the consumer's space, not
its own, so (as nvFuser's loop promotion does) the producer's IDs above its inlined loops take
their indices from the consumer's IDs they map to exactly (A's Mo: the consumer's Mo, i.e.
tile / No), its loops run over the consumer's extents, and the IDs between those loops and the
mapped ones (the merge of Mo with the broadcast) have no bound of their own: the mapped IDs'
bounds are the producer's holes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model.expr import Expr
from ..model.iterdomain import IterDomain, Merge, Split
from ..model.mapping import IdMap, merges_a_broadcast, unit_broadcast
from ..model.tensor import TensorView
from ..model.tensor_base import fixed_by
from ..model.fusion import is_mma_op
from .derive import per_fusion


@dataclass(frozen=True)
class Promotion:
    """How tv's inlined loops iterate its consumer's space (see the module docstring)."""

    consumer: TensorView
    positions: int  # tv's first `positions` loops are the consumer's
    seeds: dict[int, IterDomain]  # uid of an ID of tv -> the consumer's ID it maps to exactly
    loop_only: frozenset[int]  # IDs of tv fixed by those loops but mapped to none: no index, no bound of their own
    holes: tuple[IterDomain, ...]  # the consumer's IDs those loops fix whose bounds it needs: tv's holes too

    def extent(self, tv: TensorView, k: int) -> Expr:
        """The extent of tv's loop k: the consumer's where shared."""
        return (self.consumer.loop[k] if k < self.positions else tv.loop[k]).extent_expr

    def consumer_env(self, tv: TensorView, env: dict[int, Expr]) -> dict[int, Expr]:
        """The consumer's loop indices at tv's loop point `env` (the shared loops)."""
        return {self.consumer.loop[k].uid: env[tv.loop[k].uid] for k in range(self.positions)}


@per_fusion
def promotion(tv: TensorView) -> Promotion | None:
    """tv's promotion when an inlined loop ID of tv merges a broadcast (merges_a_broadcast);
    None otherwise, the usual case (every inlined loop ID the consumer's, or a broadcast)."""
    ca = tv.compute_at
    if not ca or not any(merges_a_broadcast(i) for i in tv.loop[:ca]) or tv.fusion is None:
        return None

    consumer = next((c for c in tv.fusion.consumers(tv) if is_mma_op(c.definition) and len(c.loop) >= ca), None)
    if consumer is None:
        return None
    idmap = IdMap(tv.fusion)
    # a plain broadcast loop stands for the consumer's loop without fixing any index of tv
    shared = [k for k in range(ca) if not unit_broadcast(tv.loop[k])]
    mine = fixed_by(tv, [tv.loop[k] for k in shared])
    theirs = fixed_by(consumer, [consumer.loop[k] for k in shared])
    by_key = {idmap.key(i): i for i in consumer.all_ids() if i.uid in theirs}
    seeds = {i.uid: by_key[idmap.key(i)] for i in tv.all_ids() if i.uid in mine and idmap.key(i) in by_key}
    loop_only = frozenset(mine - set(seeds) - {i.uid for i in tv.loop})
    holes = tuple(i for i in consumer.all_ids() if i.uid in theirs and i.uid in needed_bounds(consumer))
    return Promotion(consumer, ca, seeds, loop_only, holes)


def loop_extents(tv: TensorView) -> list[Expr]:
    """The extent of each loop of tv: the consumer's where tv's loop is promoted to it."""
    promo = promotion(tv)
    return [promo.extent(tv, k) if promo else i.extent_expr for k, i in enumerate(tv.loop)]


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
