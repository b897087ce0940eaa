"""Reductions (issue 12): tp.sum and tp.max over axes, scheduled as serial or unrolled loops per
thread and as block reductions across TIDx / TIDy, and split in two by rfactor (each thread sums
serially, then the block combines the threads' partials).

A reduction's output keeps each reduced axis in its logical domain as a reduction IterDomain
(`r5{N}`, `rTIDx{128}` in the schedule tree) and drops it from its shape: the row sums of an
[M, N] tensor are an [M] array. A reduction across blocks (a grid reduction) leaves its total in
the last block of each row, where the statements reading it run. examples/invalid/reductions.py
holds what is not lowered: a total every block reads (REDUCTION-GRID), a Vectorize reduction axis
(REDUCTION-PARALLEL) and running totals that do not fit registers (REDUCTION-ACCUMULATOR).
"""

import tileproof as tp

P = tp.ParallelType


@tp.schedule(expect=tp.accepted())
def row_sum_symbolic():
    """Row sums of [M, N]: a block per row, TIDx{128} threads each summing a strided part of the
    row (a serial loop of ceil(N / 128), its holes skipped), then the block combines its 128
    partials (warp shuffles, then shared memory); thread 0 stores the total."""
    with tp.Fusion("row_sum_symbolic") as fusion:
        t0 = tp.make_tensor(["M", "N"], contiguity=True)
        fusion.add_input(t0)
        t1 = tp.sum(t0, 1)
        fusion.add_output(t1)
    t1.split(1, 128)  # [M, r{ceil(N / 128)}, r{128}]
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.TIDx)
    return fusion


@tp.schedule(expect=tp.accepted())
def row_sum_ninety_six_threads():
    """Row sums of a concrete [512, 1000] tensor with TIDx{96}: three warps per row (a group size
    that is no power of two: each warp combines by shuffles, the three warp totals through shared
    memory), 11 serial steps of which the last has holes (1000 is no multiple of 96)."""
    with tp.Fusion("row_sum_ninety_six_threads") as fusion:
        t0 = tp.make_contig_concrete_tensor([512, 1000])
        fusion.add_input(t0)
        t1 = tp.sum(t0, -1)
        fusion.add_output(t1)
    t1.split(1, 96)  # [512, r{11}, r{96}]
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.Unroll)
    t1.axis(2).parallelize(P.TIDx)
    return fusion


@tp.schedule(expect=tp.accepted())
def column_sum_symbolic():
    """Column sums of [M, N]: a thread per column (BIDx x TIDx{128}), each walking down its column
    in a serial loop into one register: consecutive threads read consecutive addresses."""
    with tp.Fusion("column_sum_symbolic") as fusion:
        t0 = tp.make_tensor(["M", "N"], contiguity=True)
        fusion.add_input(t0)
        t1 = tp.sum(t0, 0)
        fusion.add_output(t1)
    t1.reorder({1: 0})  # [N, r{M}]
    t1.split(0, 128)  # [ceil(N / 128), 128, r{M}]
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.TIDx)
    return fusion


@tp.schedule(expect=tp.accepted())
def column_sum_across_tidy():
    """Column sums of a concrete [1024, 8192] tensor, 32 columns per block on TIDx and the rows
    shared by TIDy{16}: each thread sums 64 rows of its column, then the block combines over
    TIDy (threads of one warp belong to different columns, so the partials go through shared
    memory); the threads with threadIdx.y == 0 store."""
    with tp.Fusion("column_sum_across_tidy") as fusion:
        t0 = tp.make_contig_concrete_tensor([1024, 8192])
        fusion.add_input(t0)
        t1 = tp.sum(t0, 0)
        fusion.add_output(t1)
    t1.split(0, 16)  # [r{64}, r{16}, 8192]
    t1.split(2, 32)  # [r{64}, r{16}, 256, 32]
    t1.reorder({2: 0, 3: 1, 1: 2, 0: 3})  # [256, 32, r{16}, r{64}]
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.TIDx)
    t1.axis(2).parallelize(P.TIDy)
    return fusion


@tp.schedule(expect=tp.accepted())
def row_max_forty_eight_threads():
    """Row maxima of [M, 1000] with TIDx{48}: a warp and a half per row (groups of 16 lanes
    combine by shuffles, their three partials through shared memory); holes of the split of 1000
    by 48 are skipped, so they never compete with the row's values."""
    with tp.Fusion("row_max_forty_eight_threads") as fusion:
        t0 = tp.make_tensor(["M", 1000], contiguity=True)
        fusion.add_input(t0)
        t1 = tp.max(t0, 1)
        fusion.add_output(t1)
    t1.split(1, 48)  # [M, r{21}, r{48}]
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.TIDx)
    return fusion


@tp.schedule(expect=tp.accepted())
def row_sum_rfactor():
    """Row sums with rfactor: the row is split [r{N / 1024}, r{256}, r{4}]; rfactor moves the
    serial axis and the vector axis into a partial reduction T3, so each of 256 threads sums
    its float4 loads in a register (T2, the cached input, loads 16 bytes at a time), and T1 then
    sums the 256 partials across TIDx. N % 1024 == 0 is assumed: no holes, no predicate."""
    with tp.Fusion("row_sum_rfactor") as fusion:
        t0 = tp.make_tensor(["M", "N"], contiguity=True)
        fusion.add_input(t0)
        t1 = tp.sum(t0, 1)
        fusion.add_output(t1)
    fusion.assume("N % 1024 == 0")
    t2 = t0.cache_after()  # registers: the vectorized load
    t1.split(1, 4).split(1, 256)  # [M, r{N / 1024}, r{256}, r{4}]
    t3 = t1.rfactor([1, 3])  # T3: [M, r{N / 1024}, i{256}, r{4}]; T1: [M, r{256}]
    t2.split(1, 4).split(1, 256)  # [M, N / 1024, 256, 4]
    for t in (t2, t3):
        t.axis(0).parallelize(P.BIDx)
        t.axis(2).parallelize(P.TIDx)
    t2.axis(3).parallelize(P.Vectorize)
    t3.axis(3).parallelize(P.Unroll)
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.TIDx)
    t2.inline_at(3)
    return fusion


@tp.schedule(expect=tp.accepted())
def column_sum_rfactor_vectorized():
    """Column sums of [M, 1024] with rfactor: a block owns 128 columns, each of its TIDx{32}
    threads four adjacent columns (one 16-byte load per row, T2), and TIDy{8} share the rows.
    cache_before makes the reduction a register tensor T4 and the output T1 a copy of it;
    rfactor splits T4: T3 sums each thread's rows into four registers, T4 combines the eight
    TIDy partials of each column (every thread of a column ends with the total), and T1 stores
    the four totals of a thread in one 16-byte store, from threadIdx.y == 0."""
    with tp.Fusion("column_sum_rfactor_vectorized") as fusion:
        t0 = tp.make_tensor(["M", 1024], contiguity=True)
        fusion.add_input(t0)
        t1 = tp.sum(t0, 0)
        fusion.add_output(t1)
    fusion.assume("M % 8 == 0")
    t4 = t1.cache_before()  # T4 = sum(T0) in registers, T1 = set(T4)
    t2 = t0.cache_after()
    for t in (t4, t2):
        t.split(1, 4).split(1, 32)  # [M, 8, 32, 4]
        t.split(0, 8)  # [M / 8, 8, 8, 32, 4]
        t.reorder({2: 0, 1: 1, 3: 2, 0: 3})  # [8, 8, 32, M / 8, 4]
    t3 = t4.rfactor([3])  # T3: [8, i{8}, 32, r{M / 8}, 4]; T4: [8, r{8}, 32, 4]
    t1.split(0, 4).split(0, 32)  # [8, 32, 4]
    for t in (t2, t3, t4):
        t.axis(0).parallelize(P.BIDx)
        t.axis(1).parallelize(P.TIDy)
        t.axis(2).parallelize(P.TIDx)
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.TIDx)
    t1.axis(2).parallelize(P.Vectorize)
    t2.axis(4).parallelize(P.Vectorize)
    t2.inline_at(4)
    t3.inline_at(3)
    return fusion


@tp.schedule(expect=tp.accepted())
def bfloat16_row_sum_in_float32():
    """Row sums of a bfloat16 [256, 512] tensor, added in float32 (bfloat16's compute type) and
    rounded to bfloat16 once, when the total is stored."""
    with tp.Fusion("bfloat16_row_sum_in_float32") as fusion:
        t0 = tp.make_contig_concrete_tensor([256, 512], dtype=tp.bfloat16)
        fusion.add_input(t0)
        t1 = tp.sum(t0, 1)
        fusion.add_output(t1)
    t1.split(1, 64)  # [256, r{8}, r{64}]
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.TIDx)
    return fusion


@tp.schedule(expect=tp.accepted())
def int8_column_max():
    """Column maxima of an int8 [300, 256] tensor: compared in int32, starting from int8's
    lowest value (-128), a thread per column over TIDx{256}."""
    with tp.Fusion("int8_column_max") as fusion:
        t0 = tp.make_contig_concrete_tensor([300, 256], dtype=tp.int8)
        fusion.add_input(t0)
        t1 = tp.max(t0, 0)
        fusion.add_output(t1)
    t1.reorder({1: 0})  # [256, r{300}]
    t1.axis(0).parallelize(P.TIDx)
    return fusion


@tp.schedule(expect=tp.accepted())
def row_sum_then_subtract():
    """x - (row sum of x) for [64, 256]: the row sums stay in registers (T1), combined over TIDx
    so that every thread of the row holds the total, and each thread subtracts it from its own
    elements; T1's consumers read it after its loops (no inlining past a reduction axis)."""
    with tp.Fusion("row_sum_then_subtract") as fusion:
        t0 = tp.make_contig_concrete_tensor([64, 256])
        fusion.add_input(t0)
        t1 = tp.sum(t0, 1)
        t2 = tp.broadcast(t1, [False, True])
        t3 = tp.sub(t0, t2)
        fusion.add_output(t3)
    for t in (t1, t3):
        t.split(1, 128)  # [64, 2, 128]
        t.axis(0).parallelize(P.BIDx)
        t.axis(2).parallelize(P.TIDx)
    t2.axis(0).parallelize(P.BIDx)
    tp.inline_most(fusion)
    return fusion


@tp.schedule(expect=tp.accepted())
def sum_of_both_axes():
    """The sum of every element of a [64, 96] tensor, a 0-dimensional output, in one block of
    TIDy{8} x TIDx{96} threads: each thread sums 8 rows of its column serially, then the block
    combines over both thread indices (768 threads: 24 warps by shuffles, their partials through
    shared memory)."""
    with tp.Fusion("sum_of_both_axes") as fusion:
        t0 = tp.make_contig_concrete_tensor([64, 96])
        fusion.add_input(t0)
        t1 = tp.sum(t0, [0, 1])
        fusion.add_output(t1)
    t1.split(0, 8)  # [r{8}, r{8}, r{96}]
    t1.axis(1).parallelize(P.TIDy)
    t1.axis(2).parallelize(P.TIDx)
    return fusion


@tp.schedule(expect=tp.accepted())
def row_sum_across_blocks():
    """Row sums with the reduction axis on BIDx (a grid reduction, execution/grid_reduction.py): each
    of a row's 32 blocks combines its 128 threads, writes its partial to the workspace and counts
    itself on the row's semaphore; the last to arrive adds the 32 partials and stores the sum."""
    with tp.Fusion("row_sum_across_blocks") as fusion:
        t0 = tp.make_contig_concrete_tensor([8, 4096])
        fusion.add_input(t0)
        t1 = tp.sum(t0, 1)
        fusion.add_output(t1)
    t1.split(1, 128)  # [8, r{32}, r{128}]
    t1.axis(0).parallelize(P.TIDy)
    t1.axis(1).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.TIDx)
    return fusion


@tp.schedule(expect=tp.accepted())
def row_sum_across_blocks_then_scaled():
    """The row sums across blocks, each doubled in the same kernel: only the last of a row's 32
    blocks to arrive holds the row's sum, so the statements reading it run in that block only
    (`blockIdx.x == tp_last_x_T1` in place of a single writer's `blockIdx.x == 0`), as nvFuser
    predicates a grid reduction's consumers. A consumer spread over BIDx makes it an allreduce
    (rows_divided_by_their_sums_across_blocks)."""
    with tp.Fusion("row_sum_across_blocks_then_scaled") as fusion:
        t0 = tp.make_contig_concrete_tensor([8, 4096])
        fusion.add_input(t0)
        t1 = tp.sum(t0, 1)
        t2 = tp.mul(t1, 2.0)
        fusion.add_output(t2)
    t1.split(1, 128)  # [8, r{32}, r{128}]
    t1.axis(0).parallelize(P.TIDy)
    t1.axis(1).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.TIDx)
    t2.axis(0).parallelize(P.TIDy)
    return fusion


@tp.schedule(expect=tp.accepted())
def rows_divided_by_their_sums_across_blocks():
    """Each row divided by its sum, whose reduction axis is on BIDx, with the division's columns on
    BIDx too: every block of a row needs the row's sum (an allreduce, nvFuser's persistent grid
    reduction). The blocks of a row write their partials and meet at a grid-wide barrier on the
    row's semaphore, then each combines all of them (execution/grid_reduction.py); the kernel is
    launched cooperatively, so that every block is resident while the others wait."""
    with tp.Fusion("rows_divided_by_their_sums_across_blocks") as fusion:
        t0 = tp.make_contig_concrete_tensor([4, 512])
        fusion.add_input(t0)
        t1 = tp.sum(t0, 1)
        t2 = tp.broadcast(t1, [False, True])
        t3 = tp.div(t0, t2)
        fusion.add_output(t3)
    for t in (t1, t3):
        t.split(1, 128)  # [4, {4}, {128}]: the sum's axes reduction axes, the division's iteration axes
        t.axis(0).parallelize(P.TIDy)
        t.axis(1).parallelize(P.BIDx)
        t.axis(2).parallelize(P.TIDx)
    t2.axis(0).parallelize(P.TIDy)
    return fusion
