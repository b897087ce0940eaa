"""cp.async: one thread copies 4, 8 or 16 bytes from global to shared memory, asynchronously.

A `tp.set(t, op=tp.LoadStoreOpType.CpAsync)` statement becomes one cp.async per point of its
loop nest, moving the statement's Vectorize axis (or one element) as one copy
(PTX ISA 9.7.9.25.3.1):

    cp.async.ca.shared.global [dst], [src], cp-size, src-size   cp-size 4, 8 or 16 (L1 and L2)
    cp.async.cg.shared.global [dst], [src], 16, src-size        16 only (L2, bypassing L1)

The cache (tp.CacheOp) is the user's: AllLevels is .ca, Global .cg, Unspecified .cg where the
copy moves 16 bytes and .ca otherwise (CPASYNC-SIZE checks the bytes). Both addresses must be
multiples of cp-size (CPASYNC-ALIGN).

The statement's predicates split in two (execution model, execution/statements.py): a thread
outside the tensor's extent, or not its single writer, issues nothing; a hole of an indivisible
split still issues, with src-size 0: the hardware reads no global byte and writes zeros, so a
tile's tail past the tensor's end reads as zero (strong correctness of the padded K of a
reduction). That write lands in the tile's own slot for the hole, which exists when the
tensor is allocated along its own loop IDs (zero_fill_problems).

A copy completes asynchronously: its thread commits it to a group (cp.async.commit_group) and
waits (cp.async.wait_group N: at most N of its groups still in flight); other threads see the
data after a __syncthreads that follows the wait. execution/barriers.py places both.
"""

from __future__ import annotations


from .statements import CondKind, vector_axis
from ..model.tensor import TensorView
from ..hw.cp_async import CpAsyncCopy, is_cp_async

ISSUE_CONDS = (CondKind.THREAD_EXTENT, CondKind.SINGLE_WRITER)  # no copy issued where these fail
ZERO_FILL_CONDS = (CondKind.HOLE, CondKind.PADDING)  # issued with src-size 0 where these fail


def cp_async_copy(tv: TensorView) -> CpAsyncCopy | None:
    """The copy tv's cp.async statement issues; None where its Vectorize axis has a symbolic
    extent (CPASYNC-SIZE reports it)."""
    op = tv.definition
    axis = vector_axis(tv)
    n = 1 if axis is None else axis.static_extent
    if n is None:
        return None
    src = op.inputs[0]
    return CpAsyncCopy(tv.name, src.name, n, tv.dtype.bytes, op.cache_op)


def cp_async_tensors(fusion) -> list[TensorView]:
    """The tensors a cp.async statement writes, in fusion order."""
    return [t for t in fusion.tensors if is_cp_async(t.definition)]


__all__ = ["CpAsyncCopy", "cp_async_copy", "cp_async_tensors", "is_cp_async"]
