"""ld.global with a cache operator: a plain copy (LoadStoreOpType.Set) of a fusion input that
names a tp.CacheOp loads it with `ld.global.ca` (AllLevels: L1 and L2), `.cg` (Global: L2 only)
or `.cs` (Streaming: evict first, for data read once). PTX ISA 9.7.9.8 (ld) and 9.7.9.1 (cache
operators); nvFuser's loadGlobalToLocal<..., CacheOp> (runtime/array.cu).

Only a fusion input takes one: it is read-only for the whole kernel, so a line L1 keeps (.ca) is
never stale; another block's earlier store into a global intermediate could be.
"""

from __future__ import annotations

from ..model.fusion import Op
from ..model.types import CacheOp, LoadStoreOpType, OpKind

# tp.CacheOp -> the ld.global qualifier
LOAD_CACHE = {CacheOp.AllLevels: "ca", CacheOp.Global: "cg", CacheOp.Streaming: "cs"}
WORD_BYTES = (1, 2, 4, 8, 16)  # one ld.global moves 1, 2, 4, 8 (.v2.u32) or 16 (.v4.u32) bytes


def is_cached_load(op: Op | None) -> bool:
    """Whether `op` is a plain copy that names a cache operator."""
    return (op is not None and op.kind is OpKind.LOAD_STORE and op.op_type is LoadStoreOpType.Set
            and op.cache_op is not CacheOp.Unspecified)


def load_cache(op: Op) -> str:
    """The qualifier of a cached load's ld.global: "ca", "cg" or "cs"."""
    return LOAD_CACHE[op.cache_op]


__all__ = ["LOAD_CACHE", "WORD_BYTES", "is_cached_load", "load_cache"]
