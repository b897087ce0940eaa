"""One 1-D bulk copy (hw/bulk_copy.py) as functions of its consumer's loop indices, shared by the
verifier (which proves them, verifier/rules/bulk_copy.py) and the code generator (which issues
them, codegen/lower/tma.py).

A statement `tp.set(t, op=tp.LoadStoreOpType.CpAsyncBulk)` issues one cp.async.bulk per point of
its consumer's non-Bulk loops; the Bulk loop variables run over the copied run and are zero at its
first element. For a point: the element offset it touches in the shared buffer (the allocation's
strides, the circular-buffer stage included) and from the global tensor's base (the global
layout), and the element's position in the run (row-major over the Bulk IDs). The copy is the
run starting where the Bulk variables are zero; it is what the schedule means exactly when both
offsets advance by one element per position (BULK-COPY-CONTIGUOUS). It is issued by the
statement's issuers (thread extent, single writer) where the holes at its first element pass,
and then every element of the run must be no hole (BULK-COPY-BOUNDS): the hardware has no zero
fill and no clipping.
"""

from __future__ import annotations

from dataclasses import dataclass

from .allocation import Allocation
from .statements import Cond, CondKind, TensorExecution, element_offset, tensor_execution
from ..hw.bulk_copy import BulkCopy, bulk_copy
from ..model.expr import Expr, add, const, mul, substitute
from ..model.tensor import TensorView
from ..model.types import Direction, ParallelType

ISSUE_CONDS = (CondKind.THREAD_EXTENT, CondKind.SINGLE_WRITER)  # who issues: not a hole test


@dataclass(frozen=True)
class BulkIssue:
    """tv's bulk copy at a loop point (`ex`: tv's execution model)."""

    copy: BulkCopy
    ex: TensorExecution
    tile_vars: tuple[str, ...]  # the Bulk loop variables: zero at the run's first element
    position: Expr  # the element's position in the run
    smem_offset: Expr  # elements from the shared buffer's start (stage included)
    gmem_offset: Expr  # elements from the global tensor's base

    def at_start(self, e: Expr) -> Expr:
        return substitute(e, {v: const(0) for v in self.tile_vars})

    @property
    def issuer(self) -> list[Cond]:
        """The threads that issue the copy (thread extent, single writer)."""
        return [c for c in self.ex.conds if c.kind in ISSUE_CONDS]

    @property
    def holes(self) -> list[Cond]:
        """The hole predicates at the point (functions of the Bulk variables)."""
        return [c for c in self.ex.conds if c.kind not in ISSUE_CONDS]

    @property
    def issue_bounds(self) -> list[Cond]:
        """The holes at the run's first element: the copy is skipped where one fails."""
        zero = {v: const(0) for v in self.tile_vars}
        return [c.renamed(zero) for c in self.holes]

    @property
    def ranges(self) -> dict[str, Expr]:
        """Each loop variable's bound, the Bulk variables' included."""
        return self.ex.guarded_ranges

    @property
    def src_offset(self) -> Expr:
        """The source's element offset at the run's first element (global for a load)."""
        return self.at_start(self.gmem_offset if self.copy.direction is Direction.LOAD else self.smem_offset)

    @property
    def dst_offset(self) -> Expr:
        return self.at_start(self.smem_offset if self.copy.direction is Direction.LOAD else self.gmem_offset)


def bulk_issue(tv: TensorView, launch, smem_alloc: Allocation, names: dict[int, str] | None = None) -> BulkIssue:
    """tv's bulk copy (its op must be is_bulk_copy and bulk_copy(op).ok); `names`: the loop
    variables' names (the code generator's loop classes), `smem_alloc`: the shared tensor's."""
    op = tv.definition
    copy = bulk_copy(op)
    ex = tensor_execution(tv, launch, names)
    bulk = [ex.env[i.uid] for i in tv.loop if i.parallel_type is ParallelType.Bulk]
    tile_vars = tuple(e.value for e in bulk if e.op == "var")
    position: Expr = const(0)
    for i in copy.bulk_ids:
        position = add(mul(position, i.extent_expr), ex.env[i.uid])
    own = element_offset(tv, ex.indices, smem_alloc if copy.direction is Direction.LOAD else None)
    source = element_offset(op.inputs[0], ex.operand_indices(0),
                            None if copy.direction is Direction.LOAD else smem_alloc)
    smem, gmem = (own, source) if copy.direction is Direction.LOAD else (source, own)
    return BulkIssue(copy, ex, tile_vars, position, smem, gmem)


__all__ = ["BulkIssue", "bulk_issue"]
