"""Lowering a cp.async copy: the statement of the execution model (offsets, predicates), its
vector as one copy (model/cp_async.py: cp-size, .ca or .cg), and its predicates in two parts:
the thread-extent and single-writer conditions gate the issue, the holes of indivisible splits
become src-size 0 (the copy writes zeros and reads nothing). Waits and barriers come with the
placed nest (execution/nest.py), a circular buffer's prologue and prefetched copies too
(execution/pipeline.py; lower/pipelines.py fills them in)."""

from __future__ import annotations

from ...execution.cp_async import ISSUE_CONDS, ZERO_FILL_CONDS, cp_async_copy
from ...model.errors import InternalError
from ...execution.circular import circular_access
from ...model.tensor import TensorView
from ..ir import Compute, CpAsyncCopy


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


__all__ = ["cp_async_statement"]
