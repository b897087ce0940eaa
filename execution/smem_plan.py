"""Where each shared-memory buffer sits in the block's dynamic shared memory.

One plan, used by the verifier (SMEM-ALIGNMENT, SMEM-CAPACITY) and by the code generator
(buffer offsets), so the addresses proved are the addresses used. Buffers are placed in
fusion order, each at the next multiple of its alignment: 16 bytes for plain buffers
(vector accesses), 128 for TMA buffers (the copy faults otherwise), the swizzle period
(256 / 512 / 1024 bytes) for TMA-swizzled buffers. The dynamic base itself is declared
`__align__(1024)`, so a buffer offset is also its address modulo 1024. Block reductions
(model/reduction.py) combine their threads' partials in one scratch buffer after the tensors.
"""

from __future__ import annotations

from dataclasses import dataclass

from .allocation import Allocation
from ..model.expr import Expr, add, ceildiv, const, mul
from ..model.fusion import Fusion
from ..model.mma_op import is_tcgen05_op
from ..hw.bulk_copy import is_async_bulk_op
from ..hw.tma import swizzle_bytes_of
from ..model.types import LoadStoreOpType, MemoryType, OpKind
from .circular import specialization, war_mbarrier
from .indexing import thread_dims
from .loops import execution_order
from .reduction import scratch_bytes

BASE_ALIGN = 1024
PLAIN_ALIGN, TMA_ALIGN = 16, 128
MBARRIER_BYTES = 8
TMEM_SLOT_BYTES = 4  # the shared word tcgen05.alloc writes tensor memory's address into
SCRATCH = "tp_scratch"  # the block reductions' partials (not a tensor)


@dataclass(frozen=True)
class SmemBuffer:
    tensor: str
    offset: Expr  # bytes from the dynamic base
    bytes: Expr
    align: int
    why: str  # why this alignment


@dataclass(frozen=True)
class SmemPlan:
    buffers: dict[str, SmemBuffer]
    total: Expr  # bytes of data buffers (mbarriers are static shared memory)

    def offset(self, name: str) -> Expr:
        return self.buffers[name].offset


def swizzle_period(swizzle_bytes: int) -> int:
    """The TMA swizzle pattern repeats every 8 rows of S bytes: 256 / 512 / 1024."""
    return 8 * swizzle_bytes


def is_tma_buffer(fusion: Fusion, tv) -> bool:
    ops = ([tv.definition] if tv.definition is not None else []) + list(fusion.uses_of(tv))
    return any(op.kind is OpKind.LOAD_STORE and op.op_type is LoadStoreOpType.TMA for op in ops)


def required_alignment(fusion: Fusion, tv) -> tuple[int, str]:
    if not is_tma_buffer(fusion, tv):
        return PLAIN_ALIGN, "16-byte vector accesses"
    s, _ = swizzle_bytes_of(tv)
    if s in (32, 64, 128):
        return swizzle_period(s), f"{s}-byte TMA swizzle repeats every {swizzle_period(s)} bytes"
    return TMA_ALIGN, "a TMA shared-memory address must be 128-byte aligned"


def plan_shared_memory(fusion: Fusion, allocations: dict[str, Allocation]) -> SmemPlan:
    buffers: dict[str, SmemBuffer] = {}
    cursor: Expr = const(0)
    for tv in fusion.tensors:
        if tv.memory_type is not MemoryType.Shared or tv.is_fusion_input:
            continue
        align, why = required_alignment(fusion, tv)
        offset = mul(ceildiv(cursor, align), align)
        size = allocations[tv.name].bytes_expr
        buffers[tv.name] = SmemBuffer(tv.name, offset, size, align, why)
        cursor = add(offset, size)
    scratch = _reduction_scratch(fusion)
    if scratch is not None:
        offset = mul(ceildiv(cursor, PLAIN_ALIGN), PLAIN_ALIGN)
        buffers[SCRATCH] = SmemBuffer(SCRATCH, offset, scratch, PLAIN_ALIGN, "block reductions' partials")
        cursor = add(offset, scratch)
    return SmemPlan(buffers, cursor)


def static_bytes(fusion: Fusion) -> int:
    """At least the static shared memory the kernel declares beside the dynamic plan: its mbarriers
    (8 bytes each: a stage's of every TMA- or bulk-loaded shared tensor, the stages of every
    circular buffer whose stages are released on an mbarrier, warp-specialized or
    Pipelined(uses_mbarrier_for_war), and one per tcgen05.mma accumulator, its commits') and tensor memory's address slot (4 bytes). The code generator
    checks the kernel declares no more (codegen/lower/__init__.py)."""
    barriers = 0
    for tv in fusion.tensors:
        if tv.memory_type is not MemoryType.Shared or tv.is_fusion_input:
            continue
        stages = tv.circular.stages if tv.circular is not None else 1
        if is_async_bulk_op(tv.definition):
            barriers += stages
        if tv.circular is not None and (specialization(tv) is not None or war_mbarrier(tv)):
            barriers += stages
    barriers += sum(1 for t in fusion.tensors if t.definition is not None and is_tcgen05_op(t.definition))
    tmem = any(t.memory_type is MemoryType.Tensor for t in fusion.tensors)
    return barriers * MBARRIER_BYTES + (TMEM_SLOT_BYTES if tmem else 0)


def dynamic_limit(fusion: Fusion, cap: int) -> int:
    """The dynamic shared memory a block may ask for under the target's per-block `cap`: static and
    dynamic shared memory count together, and the dynamic base (`__align__(1024)`) follows the
    static variables at the next multiple of 1024."""
    s = static_bytes(fusion)
    return cap - (-(-s // BASE_ALIGN) * BASE_ALIGN if s else 0)


def _reduction_scratch(fusion: Fusion) -> Expr | None:
    return scratch_bytes(fusion, execution_order(fusion), thread_dims(fusion))
