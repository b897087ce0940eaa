"""cp.async (PTX ISA 9.7.9.25.3.1): one thread copies 4, 8 or 16 bytes from global to shared
memory, asynchronously. This file holds the instruction: which op issues it (is_cp_async), and one
copy (CpAsyncCopy) with its cp-size and cache operator:

    cp.async.ca.shared.global [dst], [src], cp-size, src-size   cp-size 4, 8 or 16 (L1 and L2)
    cp.async.cg.shared.global [dst], [src], 16, src-size        16 only (L2, bypassing L1)

The cache (tp.CacheOp) is the user's: AllLevels is .ca, Global .cg, Unspecified .cg where the
copy moves 16 bytes and .ca otherwise (CPASYNC-SIZE checks the bytes). How a statement issues its
copies (which predicates gate the issue, which become src-size 0) is execution/cp_async.py; where
the commits, waits and barriers go, execution/barriers.py.
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
