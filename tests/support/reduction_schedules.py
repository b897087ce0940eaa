"""Reduction schedules beyond the bundled examples, for the codegen tests (NVRTC), the CPU
simulator tests and tests/gpu/test_reductions.py: every dtype, sum and max, rows and columns,
block reductions over TIDx and TIDy (odd and partial-warp thread counts), rfactor with vector
loads, a total of every element, and a reduction read back by a pointwise consumer.
"""

from __future__ import annotations

import tileproof as tp

P = tp.ParallelType
DTYPE_NAMES = ("float32", "float64", "float16", "bfloat16", "int8", "int32", "int64")


def row_reduction(op: str = "sum", dtype: str = "float32", threads: int = 128, unroll: int = 1,
                  shape=("M", "N")):
    """op over the last axis of [M, N]: a block per row, `threads` TIDx threads summing a strided
    part each (a serial loop, its inner `unroll` steps unrolled), then the block's combine."""
    with tp.Fusion(f"row_{op}_{dtype}_{threads}") as fusion:
        t0 = tp.make_tensor(list(shape), contiguity=True, dtype=dtype)
        fusion.add_input(t0)
        t1 = getattr(tp, op)(t0, 1)
        fusion.add_output(t1)
    t1.split(1, threads)  # [M, r{N / threads}, rTIDx]
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.TIDx)
    if unroll > 1:
        t1.split(1, unroll)  # [M, r, rUnroll, rTIDx]
        t1.axis(2).parallelize(P.Unroll)
    return fusion


def column_reduction(op: str = "sum", dtype: str = "float32", tidx: int = 32, tidy: int = 8, shape=("M", "N")):
    """op over the first axis of [M, N]: `tidx` columns per block, the rows shared by `tidy`
    threads (a serial loop each), then the combine over TIDy."""
    with tp.Fusion(f"column_{op}_{dtype}_{tidx}x{tidy}") as fusion:
        t0 = tp.make_tensor(list(shape), contiguity=True, dtype=dtype)
        fusion.add_input(t0)
        t1 = getattr(tp, op)(t0, 0)
        fusion.add_output(t1)
    t1.split(0, tidy)  # [r{M / tidy}, r{tidy}, N]
    t1.split(2, tidx)  # [r, r{tidy}, N / tidx, tidx]
    t1.reorder({2: 0, 3: 1, 1: 2, 0: 3})  # [N / tidx, tidx, r{tidy}, r]
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.TIDx)
    t1.axis(2).parallelize(P.TIDy)
    return fusion


def row_reduction_rfactor(op: str = "sum", dtype: str = "float32", vector: int = 4, threads: int = 256,
                          unroll: int = 2, shape=("M", "N")):
    """op over rows with rfactor: a cached, vectorized load of `vector` elements per thread and
    step, `unroll` steps unrolled, summed serially into a register per thread (the partial), then
    the block's combine. N % (vector * threads * unroll) == 0 is assumed."""
    with tp.Fusion(f"row_{op}_rfactor_{dtype}") as fusion:
        t0 = tp.make_tensor(list(shape), contiguity=True, dtype=dtype)
        fusion.add_input(t0)
        t1 = getattr(tp, op)(t0, 1)
        fusion.add_output(t1)
    if isinstance(shape[1], str):
        fusion.assume(f"{shape[1]} % {vector * threads * unroll} == 0")
    t2 = t0.cache_after()
    for t in (t1, t2):
        t.split(1, vector).split(1, threads).split(1, unroll)  # [M, N / (v t u), u, t, v]
    t3 = t1.rfactor([1, 2, 4])  # the partial: [M, r, r{u}, i{t}, r{v}]; t1: [M, r{t}]
    for t in (t2, t3):
        t.axis(0).parallelize(P.BIDx)
        t.axis(2).parallelize(P.Unroll)
        t.axis(3).parallelize(P.TIDx)
    t2.axis(4).parallelize(P.Vectorize)
    t3.axis(4).parallelize(P.Unroll)
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.TIDx)
    t2.inline_at(4)
    return fusion


def total(op: str = "sum", dtype: str = "float32", shape=(48, 50)):
    """op over every element, in one block of TIDy{4} x TIDx{48}: a 0-dimensional output."""
    with tp.Fusion(f"total_{op}_{dtype}") as fusion:
        t0 = tp.make_contig_concrete_tensor(list(shape), dtype=dtype)
        fusion.add_input(t0)
        t1 = getattr(tp, op)(t0, [0, 1])
        fusion.add_output(t1)
    t1.split(0, 4)  # [r, r{4}, r{N}]
    t1.split(2, 48)  # [r, r{4}, r, r{48}]
    t1.axis(1).parallelize(P.TIDy)
    t1.axis(3).parallelize(P.TIDx)
    return fusion


def subtract_row_max(dtype: str = "float32", threads: int = 96, shape=("M", 1000)):
    """x - max(x, 1), the first step of a softmax: the row maxima in registers, combined over
    TIDx{96} (every thread of a row holds its row's maximum), then a pointwise consumer."""
    with tp.Fusion(f"subtract_row_max_{dtype}") as fusion:
        t0 = tp.make_tensor(list(shape), contiguity=True, dtype=dtype)
        fusion.add_input(t0)
        t1 = tp.max(t0, 1)
        t2 = tp.broadcast(t1, [False, True])
        t3 = tp.sub(t0, t2)
        fusion.add_output(t3)
    for t in (t1, t3):
        t.split(1, threads)
        t.axis(0).parallelize(P.BIDx)
        t.axis(2).parallelize(P.TIDx)
    t2.axis(0).parallelize(P.BIDx)
    tp.inline_most(fusion)
    return fusion


def shared_partials(shape=("M", "N")):
    """Row sums whose per-thread partials live in shared memory (the rfactor tensor), read back by
    the final reduction after a barrier: the partial's store is by each thread, its reader the
    combine over TIDx."""
    with tp.Fusion("shared_partials") as fusion:
        t0 = tp.make_tensor(list(shape), contiguity=True)
        fusion.add_input(t0)
        t1 = tp.sum(t0, 1)
        fusion.add_output(t1)
    t1.split(1, 64)  # [M, r, r{64}]
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.TIDx)
    t2 = t1.rfactor([1])
    t2.set_memory_type(tp.MemoryType.Shared)
    return fusion


BUILDERS = {
    "row": row_reduction, "column": column_reduction, "rfactor": row_reduction_rfactor, "total": total,
}

__all__ = ["BUILDERS", "DTYPE_NAMES", "column_reduction", "row_reduction", "row_reduction_rfactor",
           "shared_partials", "subtract_row_max", "total"]
