"""The placed nest: the kernel's loop nest with its barriers, mbarrier and async-group waits,
circular-buffer pipelines, wgmma fences and waits and tcgen05.mma commits and waits, placed once
per fusion. Its leaves are the
statements of execution/loops.py statement_items (a tensor, or a (tensor, Phase) pair for a
reduction's steps), and `statement_access` is the one classifier of what each does to on-chip
memory. The verifier proves this nest (SMEM-RACE, CPASYNC-WAIT, PIPELINE-*, WGMMA-ASYNC-ORDER) and
the code generator lowers this very object (codegen/lower/loop_nest.py: each leaf becomes the
statement it lowers to, each placed node is kept).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..hw.cp_async import is_cp_async
from ..hw.bulk_copy import is_async_bulk_op
from ..hw.tma import is_tma_op
from ..model.fusion import Fusion
from ..model.mma_op import is_tcgen05_op, is_wgmma_op
from ..model.tensor import TensorView
from ..model.types import BLOCK_TYPES, THREAD_TYPES, MemoryType, ParallelType
from .barriers import Access, Async, BulkStoreWait, Hazards, insert_barriers, insert_store_completions, statement_paths
from .circular import circular_access, is_register_copy, is_shared_copy, specialization, war_mbarrier
from .derive import per_fusion
from .loops import LoopGroup, execution_order, launched_loops, loop_groups, nest, statement_items
from .ping_pong import insert_turns
from .pipeline import insert_pipelines, isolate_circular_copies, release_read_ahead
from .reduction import Phase
from .rotation import RotationPlan, rotate
from .skip import trip_counts
from .warp_roles import role_threads
from .wgmma_order import insert_wgmma_waits
from .tcgen05_order import insert_tcgen05_waits

ON_CHIP = (MemoryType.Shared, MemoryType.Tensor)


def statement_access(tv: TensorView, phase: Phase = Phase.STATEMENT) -> Access | None:
    """What tv's statement (or a reduction's step) does to on-chip memory (a reduction: its
    accumulation reads the inputs into registers, its store writes tv; init and the block's
    combine touch registers and their own scratch only; a TMA store writes global memory)."""
    op = tv.definition
    if phase is Phase.RESCALE:  # the accumulators, multiplied in registers by the max's growth
        return Access(tv.name, frozenset((tv.name, op.rescale_max.name)))
    if phase is not Phase.STATEMENT:
        reads = frozenset(t.name for t in op.inputs) if phase is Phase.ACCUMULATE else frozenset()
        if phase is Phase.ACCUMULATE and is_wgmma_op(op):  # the warpgroup reads its tiles asynchronously
            return Access(tv.name, reads, Async.WGMMA)
        if phase is Phase.ACCUMULATE and is_tcgen05_op(op):  # one thread's MMA: reads its tiles, writes tensor memory
            return Access(tv.name, reads, Async.TCGEN05)
        return Access(tv.name if phase is Phase.STORE else None, reads) if phase in (Phase.ACCUMULATE, Phase.STORE) \
            else None
    # a copy into shared memory reads global memory: its global source is a read (a TMA-stored
    # tensor's completion goes before it: barriers.insert_store_completions)
    sources = frozenset(t.name for t in op.inputs if t.memory_type is MemoryType.Global)
    if is_async_bulk_op(op):  # a TMA or a 1-D bulk copy: an mbarrier, or the async proxy's read
        if tv.memory_type is MemoryType.Shared:
            return Access(tv.name, sources, Async.TMA_LOAD, f"tp_bar_{tv.name}", circular=circular_access(tv),
                          specialized=specialization(tv), war_mbarrier=war_mbarrier(tv))
        return Access(None, frozenset(t.name for t in op.inputs), Async.TMA_STORE, stores=tv.name)
    if is_cp_async(op) and tv.memory_type is MemoryType.Shared:
        return Access(tv.name, sources, Async.CP_ASYNC, circular=circular_access(tv))
    circular = circular_access(tv) if is_register_copy(tv) or is_shared_copy(tv) else None
    return Access(tv.name, frozenset(t.name for t in op.inputs), circular=circular,
                  private=circular is not None and is_register_copy(tv))


def leaf_access(leaf) -> Access | None:
    """statement_access of a leaf of the nest (None for a node that is no statement)."""
    if isinstance(leaf, tuple):
        return statement_access(*leaf)
    return statement_access(leaf) if isinstance(leaf, TensorView) else None


@dataclass
class PlacedNest:
    """The kernel's loop nest with its synchronisation placed. `tree`: execution/loops.py Nest
    loops (keyed by loop group) around the statements and the placed nodes; `groups`: the loop
    groups by key."""

    tree: list
    hazards: Hazards
    on_chip: set[str]
    groups: dict[int, LoopGroup] = field(default_factory=dict)
    rotations: list[RotationPlan] = field(default_factory=list)  # tp.rotate_loop's, placed or with their problems

    def label(self, loop) -> str:
        group = self.groups.get(getattr(loop, "key", None))
        return f"the loop over {group.first.label() if group is not None else 'its index'}"


@per_fusion
def placed_nest(fusion: Fusion) -> PlacedNest | None:
    """The fusion's placed nest; None where its loops do not form one nest (INLINE-LOOP-MAP,
    INLINE-PARALLEL-MATCH and LOOP-NEST-ORDER report why)."""
    order = execution_order(fusion)
    groups = loop_groups(fusion, order)
    if groups.unmapped or groups.mismatched:
        return None
    tree, conflict = nest(statement_items(order, groups), launched_loops(groups))
    if conflict is not None:
        return None
    launched = THREAD_TYPES + BLOCK_TYPES
    trips = trip_counts(fusion)  # a loop that skips masked iterations runs its trip count (execution/skip.py)
    hazards = Hazards(leaf_access, lambda loop: groups.groups[loop.key].parallel not in launched,
                      lambda loop: trips.get(loop.key, groups.groups[loop.key].extent))
    on_chip = {t.name for t in order if t.memory_type in ON_CHIP}
    plans = [RotationPlan(groups.of[(tv.name, axis)].index, frozenset(t.name for t in chosen),
                          f"the loop over {groups.of[(tv.name, axis)].first.label()}", where)
             for (tv, axis, chosen), where in zip(fusion.loop_rotation, fusion.loop_rotation_origins)
             if (tv.name, axis) in groups.of]
    serial = (ParallelType.Serial, ParallelType.Unroll)
    rotated = {"rotations": plans, "serial": lambda loop: groups.groups[loop.key].parallel in serial} if plans else {}
    place_syncs(tree, on_chip, hazards, **rotated)
    insert_turns(tree, role_threads(fusion)[1])  # ping-pong: the consumer warpgroups' turns (execution/ping_pong.py)
    return PlacedNest(tree, hazards, on_chip, {g.index: g for g in groups.groups}, plans)


def read_back(tv: TensorView) -> bool:
    """A global intermediate (no fusion output) a TMA store writes and the kernel reads: the block
    waits for the store to complete before its reads (barriers.insert_store_completions);
    GLOBAL-INTERMEDIATE says when that is all it needs."""
    return (tv.memory_type is MemoryType.Global and not tv.is_fusion_output and tv.definition is not None
            and is_tma_op(tv.definition) and bool(tv.fusion.uses_of(tv)))


def place_syncs(tree: list, on_chip: set[str], hazards: Hazards, rotations: list[RotationPlan] = (),
                serial=None) -> None:
    """Place every synchronisation of `tree` (in place): circular copies apart from their readers'
    thread scopes, the barriers and waits of plain on-chip hand-offs, then the circular buffers'
    pipelines, then wgmma's fences and waits around them, then the completion of the TMA stores
    whose global tensor a statement reads back; a kernel whose TMA stores read shared memory ends
    waiting for those reads. tcgen05.mma's commits and waits follow wgmma's
    (execution/tcgen05_order.py)."""
    stmts = statement_paths(tree, hazards)
    stores = any(a.kind is Async.TMA_STORE for _, a, _ in stmts)
    stored = {a.stores for _, a, _ in stmts if a.stores} & {t for _, a, _ in stmts for t in a.reads}
    isolate_circular_copies(tree, hazards)
    insert_barriers(tree, on_chip, hazards)
    insert_pipelines(tree, hazards)
    for plan in rotations:
        rotate(tree, plan, hazards, on_chip, serial)
    insert_wgmma_waits(tree, hazards)
    if rotations:
        release_read_ahead(tree, hazards)  # a rotated loop's buffers read ahead released a step earlier
    insert_tcgen05_waits(tree, hazards)
    insert_store_completions(tree, stored, hazards)
    if stores:
        tree.append(BulkStoreWait("the TMA stores have read shared memory before the block exits"))


__all__ = ["ON_CHIP", "PlacedNest", "leaf_access", "place_syncs", "placed_nest", "read_back", "statement_access"]
