"""Lowering a cp.async copy: the statement of the execution model (offsets, predicates), its
vector as one copy (model/cp_async.py: cp-size, .ca or .cg), and its predicates in two parts:
the thread-extent and single-writer conditions gate the issue, the holes of indivisible splits
become src-size 0 (the copy writes zeros and reads nothing). Waits and barriers are placed by
model/barriers.py (lower/syncs.py), a circular buffer's prologue and prefetched copies by
model/pipeline.py; fill_pipelines gives those their loop's index and extent and moves the
prefetched copies `prefetch` iterations ahead (the same statement at iteration i + prefetch)."""

from __future__ import annotations

import dataclasses

from ...model.cp_async import ISSUE_CONDS, ZERO_FILL_CONDS, cp_async_copy
from ...model.errors import InternalError
from ...model.expr import Expr, add, const, substitute, var
from ...model.pipeline import Prefetched, Prologue, circular_access
from ...model.tensor import TensorView
from ..ir import Compute, CpAsyncCopy, Loop, LoopKind, MatrixCopy, Operand, TmaCopy, TmaWait
from .loop_nest import NotLowered


def cp_async_statement(tv: TensorView, stmt: Compute) -> CpAsyncCopy:
    """tv's cp.async from its (vector) statement."""
    copy = cp_async_copy(tv)
    if copy is None or not copy.size_ok or copy.elements != stmt.vector:
        raise InternalError(f"{tv.name}'s cp.async moves {copy.bytes if copy else 'a symbolic number of'} bytes "
                            f"with {copy.instruction if copy else 'cp.async'}, yet the schedule verified",
                            rule="CPASYNC-SIZE")
    issue = [c for c in stmt.conds if c.kind in ISSUE_CONDS]
    zero_fill = [c for c in stmt.conds if c.kind in ZERO_FILL_CONDS]
    if len(issue) + len(zero_fill) != len(stmt.conds):
        raise InternalError(f"{tv.name}'s cp.async has a predicate of no known kind: "
                            f"{[c.why for c in stmt.conds if c.kind not in ISSUE_CONDS + ZERO_FILL_CONDS]}")
    return CpAsyncCopy(stmt.kind, stmt.name, stmt.out, stmt.ins, issue, stmt.vector, stmt.comment, stmt.scalar,
                       cache=copy.cache, nbytes=copy.bytes, zero_fill=zero_fill, circular=circular_access(tv))


def fill_pipelines(tree: list, index_of: dict[int, str]) -> None:
    """Each Prologue and Prefetched node of the placed tree (in place): its loop's index
    variable (`index_of`: loop class key -> index) and extent; a Prefetched node's copies run for
    iteration i + prefetch, so their loop index is shifted (offsets, predicates, inner extents)."""
    for k, n in enumerate(tree):
        if isinstance(n, Prologue):
            loop = tree[k + 1] if k + 1 < len(tree) else None
            if not isinstance(loop, Loop):
                raise InternalError("a circular buffer's prologue is not followed by its loop")
            if loop.kind not in (LoopKind.SERIAL, LoopKind.UNROLL):
                raise NotLowered(f"a circular buffer's loop over {loop.label} is {loop.var}, a {loop.kind.value} "
                                 f"index and not a loop: no iterations to pipeline", rule="PIPELINE-STAGES")
            n.index, n.extent = index_of[loop.key], loop.extent
        if isinstance(n, Loop):
            for child in n.body:
                if isinstance(child, TmaWait) and child.stages:  # the stage and phase of iteration i
                    child.index = index_of[n.key]
                if isinstance(child, Prefetched):
                    child.index, child.extent = index_of[n.key], n.extent
                    ahead = {child.index: add(var(child.index), const(child.prefetch))}
                    child.body[:] = [_shifted(c, ahead) for c in child.body]
        if hasattr(n, "body"):
            fill_pipelines(n.body, index_of)


def _shifted(node, names: dict[str, Expr]):
    """node with its loop index renamed: a copy of iteration i + prefetch."""
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


__all__ = ["cp_async_statement", "fill_pipelines"]
