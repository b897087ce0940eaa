"""The 1-D bulk copy (PTX ISA 9.7.9.25.4.1 cp.async.bulk): the copy engine moves `size` contiguous
bytes between global and shared memory, with no tensor map:

    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [dst], [src], size, [mbar]   a load
    cp.async.bulk.global.shared::cta.bulk_group [dst], [src], size                                 a store

`size` is a multiple of 16 and both addresses are 16-byte aligned; unlike a TMA it writes no zeros
past a tensor's end, so every copy issued lies inside the tensor. A load completes on an
mbarrier (its transaction count is `size`), a store is a bulk group, as a TMA's (hw/mbarrier.py).

This file holds the instruction: which op issues it (`is_bulk_copy`, nvFuser's
LoadStoreOpType::CpAsyncBulk), which ops are copies of the bulk-copy engine at all, with or
without a tensor map (`is_async_bulk_op`: the mbarriers, bulk groups and pipelines of both are
one), and the copy an op implies (`bulk_copy`): its direction, tensors, the consumer's Bulk
loop IDs (the copied run, outer to inner) and its bytes. Where each copy starts, and which
predicates skip it, is execution/bulk_copy.py; BULK-COPY-* (verifier/rules/bulk_copy.py) prove it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model.expr import Expr, mul, product
from ..model.iterdomain import IterDomain
from ..model.tensor import TensorView
from ..model.types import Direction, LoadStoreOpType, MemoryType, OpKind, ParallelType
from .tma import is_tma_op

SIZE_ALIGN = 16  # size % 16 == 0 (PTX ISA cp.async.bulk: "size must be a multiple of 16")
ADDRESS_ALIGN = 16  # both addresses 16-byte aligned (PTX ISA cp.async.bulk)


def is_bulk_copy(op) -> bool:
    """A 1-D bulk copy (cp.async.bulk, no tensor map)."""
    return op is not None and op.kind is OpKind.LOAD_STORE and op.op_type is LoadStoreOpType.CpAsyncBulk


def is_async_bulk_op(op) -> bool:
    """A copy of the bulk-copy engine, with a tensor map (TMA) or without (1-D): a load completes
    on an mbarrier, a store is read by the async proxy, its Bulk axes are no loops."""
    return op is not None and (is_tma_op(op) or is_bulk_copy(op))


@dataclass(frozen=True)
class BulkCopy:
    """One op's 1-D bulk copy: `consumer` (whose loop domain issues it) from or into `gmem` and
    `smem`; `bulk_ids`: the consumer's Bulk loop IDs, outer to inner, the run each copy moves;
    `problems`: why there is no such copy (wrong memories, no Bulk axis)."""

    direction: Direction  # LOAD: global -> shared; STORE: shared -> global
    consumer: TensorView
    gmem: TensorView
    smem: TensorView
    bulk_ids: tuple[IterDomain, ...]
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def element_bytes(self) -> int:
        return self.gmem.dtype.bytes

    @property
    def elements_expr(self) -> Expr:
        """The elements one copy moves: the product of the Bulk extents."""
        return product([i.extent_expr for i in self.bulk_ids])

    @property
    def bytes_expr(self) -> Expr:
        """`size`: the bytes one copy moves (a load's transaction count)."""
        return mul(self.elements_expr, self.element_bytes)


def bulk_copy(op) -> BulkCopy:
    """The 1-D bulk copy `op` (is_bulk_copy) implies."""
    consumer, producer = op.output, op.inputs[0]
    direction = Direction.STORE if consumer.memory_type is MemoryType.Global else Direction.LOAD
    gmem, smem = (consumer, producer) if direction is Direction.STORE else (producer, consumer)
    bulk = tuple(i for i in consumer.loop if i.parallel_type is ParallelType.Bulk)
    problems = []
    if gmem.memory_type is not MemoryType.Global or smem.memory_type is not MemoryType.Shared:
        problems.append(f"a bulk copy moves data between global and shared memory, but {producer.name} is in "
                        f"{producer.memory_type.value.lower()} and {consumer.name} in "
                        f"{consumer.memory_type.value.lower()} memory")
    if not bulk:
        problems.append(f"{consumer.name} has no Bulk loop IDs, so the bulk copy has no run to move")
    return BulkCopy(direction, consumer, gmem, smem, bulk, tuple(problems))


__all__ = ["ADDRESS_ALIGN", "SIZE_ALIGN", "BulkCopy", "bulk_copy", "is_async_bulk_op", "is_bulk_copy"]
