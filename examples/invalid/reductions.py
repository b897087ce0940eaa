"""Reductions tileproof does not lower, and a reduction read in the wrong thread.

A grid reduction's total read in every block of a kernel launched in clusters (an allreduce, whose
grid-wide barrier needs a cooperative launch, which takes no clusters: REDUCTION-GRID), a Vectorize reduction axis would add a whole vector in one
instruction (REDUCTION-PARALLEL); running totals for every
column of a symbolic width do not fit registers (REDUCTION-ACCUMULATOR). examples/valid/
reductions.py holds the schedules that work: block reductions over TIDx / TIDy, rfactor.
"""

import tileproof as tp

P = tp.ParallelType


@tp.schedule(expect=tp.rejected("REDUCTION-GRID", messages=["an allreduce", "clusters of 2 x 1 x 1"]))
def rows_divided_by_their_sums_in_clusters():
    """Each row divided by its sum, whose reduction axis is on BIDx, with the division's columns on
    BIDx too (an allreduce: every block of a row needs the row's sum, so the blocks meet at a
    grid-wide barrier), in a kernel launched in clusters of 2: the barrier needs every block
    resident at once, which tileproof gets from a cooperative launch, and that takes no cluster
    dimensions. Fix: drop the cluster dims (examples/valid/reductions.py
    rows_divided_by_their_sums_across_blocks)."""
    with tp.Fusion("rows_divided_by_their_sums_in_clusters") as fusion:
        t0 = tp.make_contig_concrete_tensor([8, 4096])
        fusion.add_input(t0)
        t1 = tp.sum(t0, 1)
        t2 = tp.broadcast(t1, [False, True])
        t3 = tp.div(t0, t2)
        fusion.add_output(t3)
    for t in (t1, t3):
        t.split(1, 128)  # [8, {32}, {128}]: the sum's axes reduction axes, the division's iteration axes
        t.axis(0).parallelize(P.TIDy)
        t.axis(1).parallelize(P.BIDx)
        t.axis(2).parallelize(P.TIDx)
    t2.axis(0).parallelize(P.TIDy)
    fusion.cluster_dims = (2, 1, 1)
    return fusion


@tp.schedule(expect=tp.rejected("REDUCTION-PARALLEL", messages=["bound to Vectorize"]))
def row_sum_vectorized_reduction_axis():
    """The reduction's innermost axis Vectorize{4}: a reduction adds one term at a time. Fix:
    Unroll it and vectorize the load, a cache_after of the input (examples/valid/reductions.py
    row_sum_rfactor)."""
    with tp.Fusion("row_sum_vectorized_reduction_axis") as fusion:
        t0 = tp.make_contig_concrete_tensor([64, 4096])
        fusion.add_input(t0)
        t1 = tp.sum(t0, 1)
        fusion.add_output(t1)
    t1.split(1, 4).split(1, 128)  # [64, r{8}, r{128}, r{4}]
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.TIDx)
    t1.axis(3).parallelize(P.Vectorize)
    return fusion


@tp.schedule(expect=tp.rejected("REDUCTION-ACCUMULATOR", messages=["depends on N"], warnings=("GRID-SIZE",)))
def column_sum_unscheduled():
    """Column sums of [M, N] left unscheduled: the loop over M runs outside the loop over N, so
    one thread keeps N running totals at once, a size known only at launch. Fix: reorder N
    outside and parallelize it (examples/valid/reductions.py column_sum_symbolic)."""
    with tp.Fusion("column_sum_unscheduled") as fusion:
        t0 = tp.make_tensor(["M", "N"], contiguity=True)
        fusion.add_input(t0)
        t1 = tp.sum(t0, 0)
        fusion.add_output(t1)
    return fusion


@tp.schedule(expect=tp.rejected("THREAD-VISIBILITY", warnings=("GLOBAL-COALESCING",)))
def row_sums_read_by_another_thread():
    """Row sums kept in registers, one row per thread (TIDx{64}), read by a copy that puts the
    rows on blocks: thread 0 of block b reads row b's total, which only thread b holds, in its
    own registers. Fix: parallelize the copy like the sums (tp.parallelize_all_like)."""
    with tp.Fusion("row_sums_read_by_another_thread") as fusion:
        t0 = tp.make_contig_concrete_tensor([64, 256])
        fusion.add_input(t0)
        t1 = tp.sum(t0, 1)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.axis(0).parallelize(P.TIDx)
    t2.axis(0).parallelize(P.BIDx)
    return fusion
