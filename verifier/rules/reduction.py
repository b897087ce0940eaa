"""Reductions: what the code generator needs of a reduction's schedule (model/reduction.py).

A reduction's axes are added up in a register per thread (serial and unrolled loops) and across
the threads of a block (TIDx/TIDy/TIDz); nothing combines partials across blocks. Its holes
never contribute by construction: the accumulation is predicated on every hole bound of the
tensor's own loop nest, and the accumulator starts at the neutral element
(tests/differential/test_differential_reduction.py runs the lowered kernels on the CPU and counts
every term). The checks are structural, like the lowering family's; codegen calls the same
functions (codegen/lower/reduction.py) and treats a problem there as a tileproof bug.
"""

from __future__ import annotations

from typing import Iterator

from ...execution.conditions import reduction
from ...execution.loops import execution_order
from ..context import VerifyContext
from ..diagnostics import Diagnostic
from ..findings import report_problems
from ..registry import rule


@rule("REDUCTION-PARALLEL", family="reduction")
def reduction_parallel(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A reduction axis runs as a loop or across a block's threads, never across blocks or as a vector.

    What it checks:
        For every reduction tensor the kernel computes (tp.sum, tp.max, the partial one of an
        rfactor): no reduction axis of its loop domain is bound to BIDx, BIDy or BIDz (a grid
        reduction), to Vectorize or to Bulk; and no iteration axis of it is bound to Vectorize
        or Bulk. Serial, Unroll, TIDx, TIDy and TIDz reduction axes are lowered.
    Why the hardware needs it:
        Threads of one block combine partial sums through warp shuffles and shared memory,
        ordered by __syncthreads. Blocks share no memory but global memory, and nothing in a
        kernel orders one block's stores before another block's loads: summing a reduction
        axis over blockIdx would need a global workspace and a grid-wide barrier (a
        cooperative launch or a second kernel), which tileproof does not emit. A Vectorize
        axis is one access of consecutive elements in one instruction, but a reduction's
        statement adds one term at a time into a register and stores each total once, after
        its loops.
    Example:
        with tp.Fusion("grid_reduction") as fusion:
            t0 = tp.make_contig_concrete_tensor([64, 4096]); fusion.add_input(t0)
            t1 = tp.sum(t0, 1); fusion.add_output(t1)
        t1.split(1, 128)
        t1.axis(0).parallelize(tp.ParallelType.TIDx)
        t1.axis(1).parallelize(tp.ParallelType.BIDx)
    Fix:
        with tp.Fusion("block_reduction") as fusion:
            t0 = tp.make_contig_concrete_tensor([64, 4096]); fusion.add_input(t0)
            t1 = tp.sum(t0, 1); fusion.add_output(t1)
        t1.split(1, 128)
        t1.axis(0).parallelize(tp.ParallelType.BIDx)
        t1.axis(2).parallelize(tp.ParallelType.TIDx)
    References:
        CUDA C++ Programming Guide 7.6 (__syncthreads orders memory within a block only) and
        7.22 (warp shuffle functions); nvFuser grid reductions (csrc/runtime/grid_reduction.cu:
        a global work buffer and semaphores tileproof does not have);
        docs/hardware.md#reductions-across-threads-and-blocks
    """
    # Formal statement: none, structural: for each reduction tensor T and loop ID i of T:
    #   reduction(i) => parallel(i) in {Serial, Unroll, TIDx, TIDy, TIDz};
    #   not reduction(i) => parallel(i) not in {Vectorize, Bulk}
    order = execution_order(ctx.fusion)
    yield from report_problems("REDUCTION-PARALLEL", reduction.parallel_problems(ctx.fusion, order))


@rule("REDUCTION-ACCUMULATOR", family="reduction")
def reduction_accumulator(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A reduction's running totals fit in a thread's registers, with a compile-time size.

    What it checks:
        For every reduction tensor the kernel computes: the iteration loop axes right of its
        first reduction axis that are loops (Serial, Unroll) each need a running total per
        point while the reduction loops run; their extents' product times the compute type's
        bytes is a constant of at most 255 32-bit registers.
    Why the hardware needs it:
        A thread keeps each running total in a register until the reduction's loops end.
        Registers are assigned when the kernel is compiled, so their count cannot depend on
        a size known only at launch, and a thread has at most 255 of them; an array indexed
        by a run-time value would live in local memory, and one past 512 KiB cannot launch.
    Example:
        with tp.Fusion("totals_per_column") as fusion:
            t0 = tp.make_tensor(["M", "N"]); fusion.add_input(t0)
            t1 = tp.sum(t0, 0); fusion.add_output(t1)
        t1.split(1, 128)  # [r{M}, ceil(N / 128), 128]: the loop over M keeps N totals
    Fix:
        with tp.Fusion("totals_per_column") as fusion:
            t0 = tp.make_tensor(["M", "N"]); fusion.add_input(t0)
            t1 = tp.sum(t0, 0); fusion.add_output(t1)
        t1.reorder({1: 0})
        t1.split(0, 128)
        t1.axis(0).parallelize(tp.ParallelType.BIDx)
        t1.axis(1).parallelize(tp.ParallelType.TIDx)
    References:
        CUDA C++ Programming Guide, table "Technical Specifications per Compute Capability"
        (255 32-bit registers per thread, 512 KB local memory per thread); PTX ISA 5.1.1
        (registers are fixed at compile time); docs/hardware.md#registers-per-thread
    """
    # Formal statement: none, structural: for each reduction tensor T, with start the position of its first
    #   reduction loop ID: product of the extents of T's Serial/Unroll iteration loop IDs right of start
    #   * compute bytes / 4 is a constant <= 255
    order = execution_order(ctx.fusion)
    yield from report_problems("REDUCTION-ACCUMULATOR", reduction.accumulator_problems(ctx.fusion, order))
