"""cp.async: one thread copies 4, 8 or 16 bytes from global to shared memory, asynchronously.

A `tp.set(t, op=tp.LoadStoreOpType.CpAsync)` statement becomes one cp.async per point of its
loop nest, moving the statement's Vectorize axis (or one element) as one copy
(PTX ISA 9.7.9.25.3.1):

    cp.async.ca.shared.global [dst], [src], cp-size, src-size   cp-size 4, 8 or 16 (L1 and L2)
    cp.async.cg.shared.global [dst], [src], 16, src-size        16 only (L2, bypassing L1)

The cache (tp.CacheOp) is the user's: AllLevels is .ca, Global .cg, Unspecified .cg where the
copy moves 16 bytes and .ca otherwise (CPASYNC-SIZE checks the bytes). Both addresses must be
multiples of cp-size (CPASYNC-ALIGN).

The statement's predicates split in two (execution model, model/execution.py): a thread
outside the tensor's extent, or not its single writer, issues nothing; a hole of an indivisible
split still issues, with src-size 0: the hardware reads no global byte and writes zeros, so a
tile's tail past the tensor's end reads as zero (strong correctness of the padded K of a
reduction). That write lands in the tile's own slot for the hole, which exists when the
tensor is allocated along its own loop IDs (zero_fill_problems).

A copy completes asynchronously: its thread commits it to a group (cp.async.commit_group) and
waits (cp.async.wait_group N: at most N of its groups still in flight); other threads see the
data after a __syncthreads that follows the wait. model/barriers.py places both.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model.types import CacheOp, LoadStoreOpType, OpKind


CA_BYTES = (4, 8, 16)  # cp.async.ca cp-size (PTX ISA 9.7.9.25.3.1)


CG_BYTES = (16,)  # cp.async.cg takes 16 only (ptxas: "expected to be 16")


def is_cp_async(op) -> bool:
    return op is not None and op.kind is OpKind.LOAD_STORE and op.op_type is LoadStoreOpType.CpAsync


@dataclass(frozen=True)
class CpAsyncCopy:
    """One statement point's cp.async: `elements` of `source` (global) into `tensor` (shared)."""

    tensor: str
    source: str
    elements: int
    element_bytes: int
    cache_op: CacheOp

    @property
    def bytes(self) -> int:
        """cp-size: the bytes one copy moves."""
        return self.elements * self.element_bytes

    @property
    def cache(self) -> str:
        """"cg" or "ca", as the instruction is written: the user's CacheOp, or by size."""
        if self.cache_op is CacheOp.Global or (self.cache_op is CacheOp.Unspecified and self.bytes == 16):
            return "cg"
        return "ca"

    @property
    def allowed_bytes(self) -> tuple[int, ...]:
        return CG_BYTES if self.cache == "cg" else CA_BYTES

    @property
    def size_ok(self) -> bool:
        return self.bytes in self.allowed_bytes

    @property
    def instruction(self) -> str:
        return f"cp.async.{self.cache}.shared.global"
