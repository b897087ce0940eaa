"""Kernel-IR nodes for tensor memory (sm_100a), produced by codegen/tmem.py.

    TmemAccess        one warp-collective tcgen05.st or tcgen05.ld (a Compute, so barrier
                      placement in syncs.py sees which tensor it writes and reads)
    TmemAlloc         warp 0 allocates the CTA's columns; a fenced barrier publishes the address
    TmemFencedSync    __syncthreads between tcgen05.fence::before_thread_sync and ::after_thread_sync
    TmemDealloc       a fenced barrier, then warp 0 frees the columns

The barrier nodes are Syncs (each holds a __syncthreads). Every node prints itself through
`emit_cuda(emitter, depth)`, the hook codegen/emit.py offers to lowering extensions; the
C++ text is in codegen/emit_tmem.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model.expr import Expr, add, const
from ..model.tcgen05 import TmemPattern, tmem_address
from .kernel_ir import Compute, Cond, Sync

BASE_NAME = "tmem_base"  # the C++ name of the allocation's address (lane 0, first column)


@dataclass
class TmemRegister:
    """Register r of a TmemAccess: the element it carries for this thread.

    `data` is the scalar statement moving that element (for a store: tensor memory <- op(ins);
    for a load: out <- op(ins), its tensor-memory input read from register r). `lane` and
    `column` are the cell the verifier's model assigns to the element (per thread, relative
    to the tensor's first column): the tcgen05 pattern proves that the instruction's
    register r of this thread lands exactly there."""

    index: int
    data: Compute
    lane: Expr
    column: Expr


@dataclass
class TmemAccess(Compute):
    """`tcgen05.{st,ld}.sync.aligned.<pattern>.x<repeat>.b32` by a whole warp, then its wait.

    The warp's address is `tmem_base + tmem_address(lane, column + column_offset)`, with `lane`
    and `column` the verifier's access model at the warp's first thread and register 0
    (the same for all 32 threads: every thread computes it from its own threadIdx).
    `conds` predicate the instruction and are warp-uniform (see codegen/tmem.py);
    `data_conds` predicate only the write-back of loaded registers."""

    direction: str = "st"  # "st": registers -> tensor memory; "ld": tensor memory -> registers
    tensor: str = ""  # the tensor-memory tensor
    pattern: TmemPattern = TmemPattern.P32x32b
    repeat: int = 1  # .xN
    lane: Expr = const(0)
    column: Expr = const(0)
    column_offset: int = 0  # the tensor's first column within the CTA's allocation
    registers: list[TmemRegister] = field(default_factory=list)
    data_conds: list[Cond] = field(default_factory=list)
    tmem_input: int = -1  # loads: which input of `data` is the tensor-memory tensor

    @property
    def address_offset(self) -> Expr:
        """The warp's address minus tmem_base (model/tcgen05.py tmem_address)."""
        return tmem_address(self.lane, add(self.column, self.column_offset))

    @property
    def instruction(self) -> str:
        return f"tcgen05.{self.direction}.sync.aligned.{self.pattern}.x{self.repeat}.b32"

    @property
    def split_offset(self) -> int | None:
        """16x32bx2's immHalfSplitoff: threads 16..31 reach this many columns further (the
        verifier's pattern fixes it to the register count, CUTLASS's choice)."""
        return len(self.registers) if self.pattern is TmemPattern.P16x32bx2 else None

    def emit_cuda(self, emitter, depth: int) -> list[str]:
        from .emit_tmem import access_lines

        return access_lines(self, emitter, depth)


@dataclass
class TmemAlloc(Sync):
    """tcgen05.alloc of `columns` (a power of two, 32..512) by warp 0, relinquish, a fenced
    barrier, and every thread reads the address. `warp0` is true in exactly the threads
    of warp 0 (linear thread id < 32), a warp-uniform condition."""

    columns: int = 32
    linear_thread: Expr = const(0)
    regions: list[tuple[str, int, int]] = field(default_factory=list)  # (tensor, first column, columns)

    def emit_cuda(self, emitter, depth: int) -> list[str]:
        from .emit_tmem import alloc_lines

        return alloc_lines(self, emitter, depth)


@dataclass
class TmemFencedSync(Sync):
    """A barrier that also orders tcgen05 operations across the threads it joins."""

    def emit_cuda(self, emitter, depth: int) -> list[str]:
        from .emit_tmem import fenced_sync_lines

        return fenced_sync_lines(self, emitter, depth)


@dataclass
class TmemDealloc(Sync):
    """A fenced barrier (every warp's tcgen05 ld/st is complete), then warp 0 frees the columns."""

    columns: int = 32
    linear_thread: Expr = const(0)

    def emit_cuda(self, emitter, depth: int) -> list[str]:
        from .emit_tmem import dealloc_lines

        return dealloc_lines(self, emitter, depth)
