"""The schedules that benchmarks/reductions.py times (issue 12): row and column sums of a
[16384, 16384] float32 tensor, plain tileproof schedules verified by tp.verify and lowered by the
general code generator (no hand-written CUDA).

    row_sum(threads, vector, unroll, accumulators)    a block per row
    column_sum(tidx, vector, tidy, unroll)            a block per tidx * vector columns
    plain_row_sum(threads)                            no rfactor, no vector load (a baseline)

Row sums: the row is split [N / (v t u), u, t, v]. T2 (a cache_after of the input) loads v
consecutive elements per thread as one 16-byte vector, and `unroll` such loads per step of the
serial loop, so a warp reads whole 512-byte runs and each thread has u loads in flight. rfactor
moves the serial axis and the vector axis into a partial reduction T3: each thread sums its part
of the row in registers (with accumulators=True, one register per unrolled load, so that the
adds of different loads do not wait on one another). T1 sums the partials across TIDx (warp
shuffles, then the warps' totals through shared memory) and thread 0 stores the row's total.

Column sums: a block owns tidx * vector adjacent columns and all rows. T2 loads a 16-byte vector
of `vector` columns per thread and row (a half-warp of tidx = 16 covers 256 contiguous bytes of a
row); tidy threads share the rows, each walking every tidy-th group of `unroll` rows. T3 (the
partial of rfactor) sums a thread's rows into `vector` registers; T4 (the reduction, put in
registers by cache_before) combines the tidy partials of each column across TIDy; T1 (the output,
a copy of T4) stores each thread's `vector` totals as one 16-byte store from threadIdx.y == 0.
"""

from __future__ import annotations

import tileproof as tp

P = tp.ParallelType
SIZE = 16384

ROW_CONFIGS = [dict(threads=t, vector=4, unroll=u, accumulators=a)
               for t in (128, 256, 512) for u in (2, 4) for a in (True, False)]
COLUMN_CONFIGS = [dict(tidx=x, vector=4, tidy=y, unroll=u)
                  for x, y in ((32, 8), (16, 16), (16, 32), (8, 32), (8, 64), (4, 64)) for u in (2, 4)]


def row_sum(m: int = SIZE, n: int = SIZE, threads: int = 256, vector: int = 4, unroll: int = 4,
            accumulators: bool = True, dtype: str = "float32") -> tp.Fusion:
    """out[i] = sum_j x[i, j]: a block per row (see the module's docstring)."""
    name = f"row_sum_t{threads}_v{vector}_u{unroll}{'_acc' if accumulators else ''}"
    with tp.Fusion(name) as fusion:
        t0 = tp.make_contig_concrete_tensor([m, n], dtype=dtype)
        fusion.add_input(t0)
        t1 = tp.sum(t0, 1)
        fusion.add_output(t1)
    t2 = t0.cache_after()  # registers: the vector loads
    for t in (t1, t2):
        t.split(1, vector).split(1, threads).split(1, unroll)  # [m, n / (v t u), u, t, v]
    # the partial T3 sums the serial steps and the vector (and, without accumulators, the unrolled loads)
    t3 = t1.rfactor([1, 4] if accumulators else [1, 2, 4])
    for t in (t2, t3):
        t.axis(0).parallelize(P.BIDx)
        t.axis(2).parallelize(P.Unroll)
        t.axis(3).parallelize(P.TIDx)
    t2.axis(4).parallelize(P.Vectorize)
    t3.axis(4).parallelize(P.Unroll)
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(-1).parallelize(P.TIDx)  # [m, (r{u},) rTIDx]
    if accumulators:
        t1.axis(1).parallelize(P.Unroll)
    t2.inline_at(4)
    return fusion


def plain_row_sum(m: int = SIZE, n: int = SIZE, threads: int = 256) -> tp.Fusion:
    """Row sums without rfactor or vector loads: [m, r{n / threads}, rTIDx] in one tensor (each
    thread loads one element per step)."""
    with tp.Fusion(f"plain_row_sum_t{threads}") as fusion:
        t0 = tp.make_contig_concrete_tensor([m, n])
        fusion.add_input(t0)
        t1 = tp.sum(t0, 1)
        fusion.add_output(t1)
    t1.split(1, threads)
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.TIDx)
    return fusion


def column_sum(m: int = SIZE, n: int = SIZE, tidx: int = 16, vector: int = 4, tidy: int = 16, unroll: int = 4,
               dtype: str = "float32") -> tp.Fusion:
    """out[j] = sum_i x[i, j]: a block per tidx * vector columns (see the module's docstring)."""
    with tp.Fusion(f"column_sum_x{tidx}_v{vector}_y{tidy}_u{unroll}") as fusion:
        t0 = tp.make_contig_concrete_tensor([m, n], dtype=dtype)
        fusion.add_input(t0)
        t1 = tp.sum(t0, 0)
        fusion.add_output(t1)
    t4 = t1.cache_before()  # T4 = sum(T0) in registers, T1 = set(T4): a vectorized store
    t2 = t0.cache_after()  # registers: the vector loads
    for t in (t4, t2):
        t.split(1, vector).split(1, tidx)  # [m, n / (x v), x, v]
        t.split(0, unroll).split(0, tidy)  # [m / (y u), y, u, n / (x v), x, v]
        t.reorder({3: 0, 1: 1, 4: 2, 0: 3, 2: 4})  # [n / (x v), y, x, m / (y u), u, v]
    t3 = t4.rfactor([3, 4])  # T3: [n / (x v), i{y}, x, r, r{u}, v]; T4: [n / (x v), r{y}, x, v]
    for t in (t2, t3, t4):
        t.axis(0).parallelize(P.BIDx)
        t.axis(1).parallelize(P.TIDy)
        t.axis(2).parallelize(P.TIDx)
    t2.axis(4).parallelize(P.Unroll)
    t3.axis(4).parallelize(P.Unroll)
    t2.axis(5).parallelize(P.Vectorize)
    t3.axis(5).parallelize(P.Unroll)
    t4.axis(3).parallelize(P.Unroll)
    t1.split(0, vector).split(0, tidx)  # [n / (x v), x, v]
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.TIDx)
    t1.axis(2).parallelize(P.Vectorize)
    t2.inline_at(5)
    t3.inline_at(3)
    return fusion


__all__ = ["COLUMN_CONFIGS", "ROW_CONFIGS", "SIZE", "column_sum", "plain_row_sum", "row_sum"]
