"""Visibility of on-chip memory: shared and tensor memory belong to one thread block,
registers to one thread of it, so a consumer may only read elements its own block (for
registers: its own thread) wrote, at the address where they were written. Proved over
the execution model (execution/statements.py) the code generator emits: every consumer point
that executes and every producer point that writes the element it reads, with their
predicates (thread/block extents, holes, single writer) and addresses. The claims and their
proofs are in verifier/analysis/visibility.py, which the tensor-core layout rules share."""

from __future__ import annotations

from typing import Iterator

from ..analysis.visibility import check_claims
from ..context import VerifyContext
from ..diagnostics import Diagnostic
from ..registry import rule


@rule("GLOBAL-VISIBILITY", family="visibility", premises=("INLINE-LOOP-MAP",))
def global_visibility(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A tensor the kernel stores to global memory is read in the kernel only by the thread that stored it.

    What it checks:
        For every op that reads a global tensor P computed in the same kernel (an output
        that another op also consumes), over the execution model the code generator emits:
        for every point of the consumer that executes and every point of P's statement that
        stores the element read there (with its single-writer predicate), the writer's
        threadIdx and blockIdx equal the reader's, for every launched thread and block type.
        A global intermediate a TMA store writes and its block reads back after the stores
        complete (GLOBAL-INTERMEDIATE accepts it: wait_group 0, the proxy fence, a barrier)
        needs the blockIdx alone to be equal: the barrier hands it to the block's threads.
        A global intermediate the kernel has no buffer for (GLOBAL-INTERMEDIATE refuses it, a
        TMA store's read-back aside) has no reads to check: that refusal is their one cause.
    Why the hardware needs it:
        A kernel has no grid-wide barrier, and tileproof places block barriers for on-chip
        memory only: a load of an element another thread or block stores in the same kernel
        may run before that store. Measured on H100: T2 = exp(T1), an output computed by
        block 0 alone (single writer), read by T3 in 128 blocks: 2433 of 524288 elements wrong.
    Example:
        with tp.Fusion("read_other_blocks_store") as fusion:
            t0 = tp.make_contig_concrete_tensor([8, 32]); fusion.add_input(t0)
            t1 = tp.neg(t0); t2 = tp.set(t1); fusion.add_output(t1); fusion.add_output(t2)
        t1.set_memory_type(tp.MemoryType.Global)
        t1.axis(1).parallelize(tp.ParallelType.TIDx)
        t2.axis(0).parallelize(tp.ParallelType.BIDx)
        t2.axis(1).parallelize(tp.ParallelType.TIDx)
    Fix:
        with tp.Fusion("read_own_store") as fusion:
            t0 = tp.make_contig_concrete_tensor([8, 32]); fusion.add_input(t0)
            t1 = tp.neg(t0); t2 = tp.set(t1); fusion.add_output(t1); fusion.add_output(t2)
        t1.set_memory_type(tp.MemoryType.Global)
        t2.axis(0).parallelize(tp.ParallelType.BIDx)
        t2.axis(1).parallelize(tp.ParallelType.TIDx)
        tp.parallelize_all_like(t2)
    References:
        CUDA C++ Programming Guide, memory fence functions and __syncthreads (ordering is
        per block; across blocks only a grid-wide synchronization orders memory); docs/hardware.md#memory-visibility
    """
    # Formal statement: for every op reading a global P computed in the kernel (input k) into C, with T = every
    #   launched thread and block type: for all admitted sizes, reader points r, writer points w:
    #   executes_C(r) and executes_P(w) and logical_P(w) == read_k(r) => index_t(w) == index_t(r) for t in T;
    #   where a split broadcast repeats elements: executes_C(r) => exists such a w (analysis/visibility.py _prove);
    #   T = the launched block types alone where P is TMA-stored and completed in the block before C reads it
    yield from check_claims(ctx, "GLOBAL-VISIBILITY")


@rule("SMEM-BLOCK-VISIBILITY", family="visibility", premises=("INLINE-LOOP-MAP",))
def smem_block_visibility(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A consumer reads only on-chip elements (shared, tensor, register memory) that its own block wrote.

    What it checks:
        For every op that reads a tensor P in shared, tensor or register (Local) memory
        into C, over the execution model the code generator emits: for every point of C's
        loop nest that executes (active threads and blocks, no hole, single writer) and
        every point of P's loop nest that writes the element of P read there, the writer's
        blockIdx equals the reader's for every block type a non-broadcast loop axis of P
        binds, and for shared memory the writer stored the element at the address the
        reader reads. Where P merges a split broadcast into a block axis, several blocks
        write each element, and the reader's block must be one of them, holding the
        element at the address read (a quantified query). Which thread of the block holds
        a register element is THREAD-VISIBILITY's claim.
    Why the hardware needs it:
        Each thread block has its own shared memory and tensor memory, and registers
        belong to one thread of one block; a block cannot see what another block wrote
        there. A consumer that runs in block 0 while the producer parallelized the same
        elements over blockIdx.x reads memory that block 0 never wrote: a silently wrong
        result. nvFuser rejects such a schedule when lowering (parallel-dimension
        validation of the sync map).
    Example:
        fusion, t0, t1, t2 = copy_chain("other_blocks_tile", [8, 32])
        t1.set_memory_type(tp.MemoryType.Shared)
        t1.axis(0).parallelize(tp.ParallelType.BIDx)
        t1.axis(1).parallelize(tp.ParallelType.TIDx)
        t2.axis(1).parallelize(tp.ParallelType.TIDx)
    Fix:
        fusion, t0, t1, t2 = copy_chain("own_blocks_tile", [8, 32])
        t1.set_memory_type(tp.MemoryType.Shared)
        t1.axis(0).parallelize(tp.ParallelType.BIDx)
        t1.axis(1).parallelize(tp.ParallelType.TIDx)
        tp.parallelize_all_like(t1)
    References:
        CUDA C++ Programming Guide, memory hierarchy (shared memory is visible to the threads
        of one block); PTX ISA, tensor memory (allocated per CTA); nvFuser
        csrc/device_lower/analysis/sync_information.cpp (SyncMap: inconsistent parallelization);
        docs/hardware.md#memory-visibility
    """
    # Formal statement: for every op reading an on-chip P (input k) into C, with T = the block types a
    #   non-broadcast loop ID of P binds, unless each t in T has one index expression on both sides by
    #   construction: for all admitted sizes, reader points r of C, writer points w of P:
    #   executes_C(r) and executes_P(w) and logical_P(w) == read_k(r)
    #   => blockIdx_t(w) == blockIdx_t(r) for t in T [and, P shared, address_P(w) == address_read(r)];
    #   where a split broadcast repeats elements: executes_C(r) => exists such a w with those equalities (analysis/visibility.py _prove)
    yield from check_claims(ctx, "SMEM-BLOCK-VISIBILITY")


@rule("THREAD-VISIBILITY", family="visibility", premises=("INLINE-LOOP-MAP",))
def thread_visibility(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A consumer reads only register elements that its own thread wrote, where it wrote them.

    What it checks:
        For every op that reads a register (Local) tensor P into C, over the execution
        model the code generator emits: for every point of C's loop nest that executes and
        every point of P's loop nest in the same block that writes the element of P read
        there, the writer's threadIdx equals the reader's for every thread type a
        non-broadcast loop axis of P binds, and the writer stored the element at the
        register the reader reads. Where a split broadcast makes several threads write one
        element, the reader's thread must be one of them (a quantified query). An
        stmatrix's registers are exempt: LDSM-REGISTER-LAYOUT proves which lane holds them.
    Why the hardware needs it:
        A register belongs to one thread. A kernel that reads T2[0] in every thread while
        thread i wrote element i into its own T2[0] computes a wrong value in every thread
        but one, and nothing faults. nvFuser rejects such schedules ("Producer is required
        to be in Global, Shared or Tensor Memory based on parallelization strategy").
    Example:
        fusion, t0, t1, t2 = copy_chain("other_threads_registers", [32])
        t1.axis(0).parallelize(tp.ParallelType.TIDx)
    Fix:
        fusion, t0, t1, t2 = copy_chain("own_threads_registers", [32])
        t1.axis(0).parallelize(tp.ParallelType.TIDx)
        t2.axis(0).parallelize(tp.ParallelType.TIDx)
    References:
        CUDA C++ Programming Guide, variable memory space specifiers (automatic variables
        live in registers private to a thread); nvFuser csrc/device_lower/validation.cpp
        (validateParallelize: producer memory type vs parallelization); docs/hardware.md#memory-visibility
    """
    # Formal statement: for every op other than stmatrix reading a register P (input k) into C, with T = the
    #   thread types and U = the block types P's non-broadcast loop IDs bind, unless same by construction
    #   and unless SMEM-BLOCK-VISIBILITY failed there: for all admitted sizes, reader points r, writer points w:
    #   executes_C(r) and executes_P(w) and logical_P(w) == read_k(r) and blockIdx_u(w) == blockIdx_u(r) (u in U)
    #   => threadIdx_t(w) == threadIdx_t(r) for t in T and address_P(w) == address_read(r);
    #   where a split broadcast repeats elements: executes_C(r) => exists such a w with those equalities (analysis/visibility.py _prove)
    yield from check_claims(ctx, "THREAD-VISIBILITY")
