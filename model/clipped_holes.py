"""Which statements run at their holes unpredicated: values that reach memory only through a TMA store.

A hole of an indivisible split is a point past the tensor's extent (in some logical axis: a hole
of a split or merge output is past the end of its input). A TMA store writes its box through the
tensor map, which clips every element past the global tensor's extent (PTX ISA 5.5.3.3: out-of-
bounds elements of a store are not written; docs/hardware.md#tma-out-of-bounds-fill). So a
shared tile that only a TMA store reads may hold anything at its holes, and so may the registers
that only such a tile is copied from.
Those statements need no hole predicates, and for a warp-collective one (stmatrix) that is the
difference between running and not: a 16 x 16 stmatrix tile that straddles M = 200 has lanes both
inside and past the edge, and `.aligned` forbids predicating some of them off.

A tensor is clipped when it lives on chip (registers or shared memory), is computed pointwise
from its operands (a copy, stmatrix, a cast, unary or binary arithmetic), has no broadcast axis,
is no fusion output, every tensor reading it is clipped or is a TMA store to global memory, and
every operand is clipped or an MmaOp's register accumulators (which hold every element, holes
included: model/execution.py store_execution). The greatest such set is found by removing
tensors until none fails. The rules then see the holes as points that execute: distinct addresses
(ALLOCATION-DISTINCT), visibility of what they read, whole-warp stmatrix, all proved over them.
"""

from __future__ import annotations

from .tensor import TensorView
from .tma import is_tma_op
from .types import LoadStoreOpType, MemoryType, OpKind

ON_CHIP = (MemoryType.Local, MemoryType.Shared)
POINTWISE = (OpKind.CAST, OpKind.UNARY, OpKind.BINARY)
POINTWISE_COPIES = (LoadStoreOpType.Set, LoadStoreOpType.StMatrix)


def clipped(fusion) -> frozenset[str]:
    """The names of the tensors whose statements run at their holes (module docstring)."""
    from .mma_op import is_mma_op  # mma_op builds on execution, which asks this module

    outputs = {t.name for t in fusion.outputs}
    found = {t.name for t in fusion.tensors if t.name not in outputs and _pointwise_on_chip(t)}

    def tma_store(t: TensorView) -> bool:
        return t.memory_type is MemoryType.Global and is_tma_op(t.definition)

    def accumulators(t: TensorView) -> bool:
        return t.memory_type is MemoryType.Local and is_mma_op(t.definition)

    while True:
        keep = {t.name for t in fusion.tensors if t.name in found
                and all(c.name in found or tma_store(c) for c in fusion.consumers(t))
                and all(p.name in found or accumulators(p) for p in fusion.producers(t))}
        if keep == found:
            return frozenset(found)
        found = keep


def _pointwise_on_chip(t: TensorView) -> bool:
    op = t.definition
    if op is None or t.memory_type not in ON_CHIP or any(i.is_broadcast for i in t.logical):
        return False
    return op.kind in POINTWISE or (op.kind is OpKind.LOAD_STORE and op.op_type in POINTWISE_COPIES)


__all__ = ["clipped"]
