"""The kernel's loop nest with its barriers and waits placed (model/barriers.py), leaves the
tensors computed: what SMEM-RACE, CPASYNC-WAIT and PIPELINE-WAR check, built once per verify."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...execution.barriers import Access, Async, Hazards
from ...execution.nest import place_syncs
from ...hw.cp_async import is_cp_async
from ...model.mma_op import is_wgmma_op
from ...execution.circular import circular_access, specialization, war_mbarrier
from ...execution.circular import is_register_copy
from ...execution.loops import execution_order, loop_groups, nest, statement_items
from ...execution.reduction import Phase
from ...model.tensor import TensorView
from ...hw.tma import is_tma_op
from ...model.types import BLOCK_TYPES, THREAD_TYPES, MemoryType
from ..context import VerifyContext

ON_CHIP = (MemoryType.Shared, MemoryType.Tensor)


def statement_access(tv: TensorView, phase: Phase = Phase.STATEMENT) -> Access | None:
    """What tv's statement does to on-chip memory, as the code generator lowers it (a reduction:
    its accumulation reads the inputs into registers, its store writes tv; init and the block's
    combine touch registers and their own scratch only)."""
    op = tv.definition
    if phase is not Phase.STATEMENT:
        reads = frozenset(t.name for t in op.inputs) if phase is Phase.ACCUMULATE else frozenset()
        if phase is Phase.ACCUMULATE and is_wgmma_op(op):  # its accumulators, as the code generator's MmaIssue
            return Access(tv.name, reads, Async.WGMMA)
        return Access(tv.name if phase is Phase.STORE else None, reads) if phase in (Phase.ACCUMULATE, Phase.STORE) \
            else None
    if is_tma_op(op):
        if tv.memory_type is MemoryType.Shared:
            return Access(tv.name, frozenset(), Async.TMA_LOAD, f"tp_bar_{tv.name}", circular=circular_access(tv),
                          specialized=specialization(tv), war_mbarrier=war_mbarrier(tv))
        return Access(None, frozenset(t.name for t in op.inputs), Async.TMA_STORE)
    if is_cp_async(op) and tv.memory_type is MemoryType.Shared:
        return Access(tv.name, frozenset(), Async.CP_ASYNC, circular=circular_access(tv))
    return Access(tv.name, frozenset(t.name for t in op.inputs),
                  circular=circular_access(tv) if is_register_copy(tv) else None)


@dataclass
class Nest:
    """The kernel's loop nest with its barriers: leaves are the tensors computed."""

    tree: list
    hazards: Hazards
    on_chip: set[str]
    loops: dict = field(default_factory=dict)  # a Nest's key -> its loop as the schedule tree prints it

    def label(self, loop) -> str:
        return f"the loop over {self.loops.get(getattr(loop, 'key', None), 'its index')}"


def barrier_nest(ctx: VerifyContext) -> Nest | None:
    """The nest the code generator emits, barriers placed; None where the loops do not form one
    nest (the lowering rules report why)."""
    return ctx.memo(("barrier-nest",), lambda: _build(ctx))


def _build(ctx: VerifyContext) -> Nest | None:
    fusion = ctx.fusion
    order = execution_order(fusion)
    groups = loop_groups(fusion, order)
    if groups.unmapped or groups.mismatched:
        return None
    tree, conflict = nest(statement_items(order, groups))  # leaves: tensors, (tensor, Phase) for reductions
    if conflict is not None:
        return None
    launched = THREAD_TYPES + BLOCK_TYPES
    hazards = Hazards(lambda n: statement_access(*n) if isinstance(n, tuple) else
                      statement_access(n) if isinstance(n, TensorView) else None,
                      lambda loop: groups.groups[loop.key].parallel not in launched,
                      lambda loop: groups.groups[loop.key].extent)
    on_chip = {t.name for t in order if t.memory_type in ON_CHIP}
    place_syncs(tree, on_chip, hazards)
    return Nest(tree, hazards, on_chip, {g.index: g.first.label() for g in groups.groups})


__all__ = ["ON_CHIP", "Nest", "barrier_nest", "statement_access"]
