"""Circular buffers on the lowered tree: model/pipeline.py places each pipelined loop's Prologue,
Prefetched copies and (TMA) waits; fill_pipelines gives them their loop's index and extent and
moves the prefetched copies `prefetch` iterations ahead (the same statement at iteration
i + prefetch), for cp.async, TMA and register copies alike."""

from __future__ import annotations

import dataclasses

from ...model.errors import InternalError
from ...model.expr import Expr, add, const, substitute, var
from ...execution.pipeline import Prefetched, Prologue
from ...execution.ping_pong import Turn
from ...execution.rotation import Rotated
from ...execution.warp_roles import StageEmptyWait, StageRelease
from ..ir import (
    Compute,
    CpAsyncCopy,
    Loop,
    LoopKind,
    MatrixCopy,
    Operand,
    TmaCopy,
    TmaWait,
)
from .loop_nest import NotLowered


def fill_pipelines(tree: list, index_of: dict[int, str]) -> None:
    """Each Prologue and Prefetched node of the placed tree (in place): its loop's index
    variable (`index_of`: loop class key -> index) and extent; a Prefetched node's copies run for
    iteration i + prefetch, so their loop index is shifted (offsets, predicates, inner extents).
    A warp-specialized loop's empty waits and releases, ping-pong's turns and a rotated loop's
    next iteration (execution/rotation.py) get its index and extent too."""
    for k, n in enumerate(tree):
        if isinstance(n, StageRelease) and n.tail:  # after its loop (and the loop's final wgmma wait)
            loop = next((m for m in reversed(tree[:k]) if isinstance(m, Loop)), None)
            if loop is None:
                raise InternalError("a warp-specialized loop's final release does not follow its loop")
            n.extent = loop.extent
        if isinstance(n, Prologue):
            loop = tree[k + 1] if k + 1 < len(tree) else None
            if not isinstance(loop, Loop):
                raise InternalError("a circular buffer's prologue is not followed by its loop")
            if loop.kind not in (LoopKind.SERIAL, LoopKind.UNROLL):
                raise NotLowered(f"a circular buffer's loop over {loop.label} is {loop.var}, a {loop.kind.value} "
                                 f"index and not a loop: no iterations to pipeline", rule="PIPELINE-STAGES")
            n.index, n.extent = index_of[loop.key], loop.extent
            for child in n.body:  # mbarrier WAR: the prologue's loads wait for their stages too
                if isinstance(child, StageEmptyWait):
                    child.index = n.index
        if isinstance(n, Rotated) and n.first:  # before its loop
            loop = tree[k + 1] if k + 1 < len(tree) else None
            if not isinstance(loop, Loop):
                raise InternalError("a rotated loop's first iteration is not followed by its loop")
            n.index, n.extent, n.var = index_of[loop.key], loop.extent, loop.var
            _stage_waits(n)
        if isinstance(n, Loop):
            for child in n.body:
                if isinstance(child, Rotated):
                    child.index, child.extent, child.var = index_of[n.key], n.extent, n.var
                    _stage_waits(child)
                if isinstance(child, (TmaWait, StageEmptyWait)) and child.stages:  # iteration i's stage and phase
                    child.index = index_of[n.key]
                if isinstance(child, (StageRelease, Turn)):  # iteration i of the loop's extent
                    child.index, child.extent = index_of[n.key], n.extent
                if isinstance(child, Prefetched):
                    child.index, child.extent = index_of[n.key], n.extent
                    for c in child.body:  # mbarrier WAR: the wait for the stage of iteration i + prefetch
                        if isinstance(c, StageEmptyWait):
                            c.index, c.ahead = child.index, child.prefetch
                    ahead = {child.index: add(var(child.index), const(child.prefetch))}
                    child.body[:] = [_shifted(c, ahead) for c in child.body]
        if hasattr(n, "body"):
            fill_pipelines(n.body, index_of)


def _stage_waits(n: Rotated) -> None:
    """A rotated scope's stage waits: on the stage of its iteration (the counter it declares again)."""
    for child in n.body:
        if isinstance(child, TmaWait) and child.stages:
            child.index = n.index


def _shifted(node, names: dict[str, Expr]):
    """node with its loop index renamed: a copy of iteration i + prefetch."""
    if isinstance(node, StageEmptyWait):  # its stage counts `ahead` iterations already
        return node
    if isinstance(node, Loop):
        return dataclasses.replace(node, extent=substitute(node.extent, names),
                                   body=[_shifted(c, names) for c in node.body])

    def operand(o: Operand) -> Operand:
        return dataclasses.replace(o, offset=substitute(o.offset, names))

    if isinstance(node, CpAsyncCopy):
        return dataclasses.replace(node, out=operand(node.out), ins=[operand(o) for o in node.ins],
                                   conds=[c.renamed(names) for c in node.conds],
                                   zero_fill=[c.renamed(names) for c in node.zero_fill])
    if isinstance(node, Compute):  # a register circular buffer's plain copy
        return dataclasses.replace(node, out=operand(node.out), ins=[operand(o) for o in node.ins],
                                   conds=[c.renamed(names) for c in node.conds])
    if isinstance(node, MatrixCopy):  # a register circular buffer's ldmatrix
        return dataclasses.replace(node, out=operand(node.out), ins=[operand(o) for o in node.ins],
                                   address=substitute(node.address, names), conds=[c.renamed(names) for c in node.conds])
    if isinstance(node, TmaCopy):  # a circular buffer's TMA load
        return dataclasses.replace(node, smem_offset=substitute(node.smem_offset, names),
                                   coords=tuple(substitute(c, names) for c in node.coords),
                                   stage=substitute(node.stage, names) if node.stage is not None else None,
                                   issuer=[c.renamed(names) for c in node.issuer],
                                   bounds=[c.renamed(names) for c in node.bounds])
    raise InternalError(f"a circular buffer's prefetched copies hold a {type(node).__name__}")


__all__ = ["fill_pipelines"]
