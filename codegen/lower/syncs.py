"""Barriers of the kernel: model/barriers.py places them on the lowered loop tree (the same
placement the verifier's SMEM-RACE rule checks); this file says what each kernel IR node
accesses."""

from __future__ import annotations

from ...execution.barriers import Access, Async, Hazards
from ...execution.nest import place_syncs
from ...model.types import Direction
from ..ir import Compute, CpAsyncCopy, Loop, LoopKind, MatrixCopy, MmaIssue, TmaCopy


def access(n, circular: dict[str, tuple[int, int, int]]) -> Access | None:
    """What a lowered statement does to on-chip memory (a TMA store writes global memory);
    `circular`: the register circular buffers' (stages, prefetch, depth), by tensor."""
    if isinstance(n, CpAsyncCopy):
        return Access(n.out.tensor, frozenset(), Async.CP_ASYNC, circular=n.circular)
    if isinstance(n, TmaCopy):
        if n.direction is Direction.LOAD:
            return Access(n.smem, frozenset(), Async.TMA_LOAD, n.barrier, circular=n.circular,
                          specialized=n.specialized, war_mbarrier=n.war_mbarrier)
        return Access(None, frozenset({n.smem}), Async.TMA_STORE)
    if isinstance(n, MmaIssue) and n.descriptors:  # wgmma: the warpgroup reads its tiles asynchronously
        return Access(n.out.tensor, frozenset(o.tensor for o in n.ins), Async.WGMMA)
    if isinstance(n, (Compute, MatrixCopy)):
        return Access(n.out.tensor, frozenset(o.tensor for o in n.ins), circular=circular.get(n.out.tensor))
    return None


def insert_syncs(tree: list, on_chip: set[str], circular: dict[str, tuple[int, int, int]]) -> None:
    hazards = Hazards(lambda n: access(n, circular),
                      lambda loop: isinstance(loop, Loop) and loop.kind in (LoopKind.SERIAL, LoopKind.UNROLL),
                      lambda loop: loop.extent)
    place_syncs(tree, on_chip, hazards)
