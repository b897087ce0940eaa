"""The schedules of examples/invalid/visibility.py, fixed: every consumer of shared or tensor
memory runs in the block that wrote the elements it reads (SMEM-BLOCK-VISIBILITY)."""

import tileproof as tp

P = tp.ParallelType
TMA = tp.LoadStoreOpType.TMA


@tp.schedule(expect=tp.accepted())
def figure14a_output_per_block():
    """Figure 14 (a) with the output T2 split like I2 -> [I5, I6{32}] and I5 on BIDx: block k
    stores the columns 32k .. 32k + 31 it loaded. T2 needs only the split that makes the
    block axis; T1's other splits (the box, the element stride) stay T1's own."""
    with tp.Fusion("figure14a_output_per_block") as fusion:
        t0 = tp.make_contig_concrete_tensor([64, 256])
        fusion.add_input(t0)
        t1 = tp.set(t0, op=TMA)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    t1.split(0, 8).split(2, 32)  # [I3, I4{8}, I5{8}, I6{32}]
    t1.split(1, 2)  # [I3, I7{4}, I8{2}, I5, I6]
    t1.reorder({2: 1})  # [I3, I8, I7, I5, I6]
    t1.set_allocation_domain(t1.get_loop_domain(), True)  # as nvFuser's Figure14a (unset: I8 splits the tile)
    t1.axis(2).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.BIDx)
    t1.axis(4).parallelize(P.Bulk)
    t2.split(1, 32)  # [I1, I5{8}, I6{32}]
    t2.axis(1).parallelize(P.BIDx)
    return fusion


@tp.schedule(expect=tp.accepted())
def blocks_by_another_route():
    """T1 gives each of 8 blocks 8 rows of a [64, 64] tensor (split by 8); T2 reaches the same
    blocks by another schedule: merged to 4096 elements, split by 512 (8 rows of 64) on BIDx
    and then by 64 on TIDx. The block index of each element is the same function in both, which
    the proof shows (the schedules share no IterDomain)."""
    with tp.Fusion("blocks_by_another_route") as fusion:
        t0 = tp.make_contig_concrete_tensor([64, 64])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    t1.split(0, 8)  # [BIDx{8}, 8, TIDx{64}]
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.TIDx)
    t2.merge(0).split(0, 512).split(1, 64)  # [BIDx{8}, 8, TIDx{64}]
    t2.axis(0).parallelize(P.BIDx)
    t2.axis(2).parallelize(P.TIDx)
    return fusion


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING",)), target="sm_100a")
def tensor_memory_per_block():
    """gmem -> reg T1 -> tmem T2 -> reg T3 -> gmem T4 with rows on BIDx{4} and TIDx{128} in every
    tensor (tp.parallelize_all_like): each block loads the row it stored in its tensor memory."""
    with tp.Fusion("tensor_memory_per_block") as fusion:
        t0 = tp.make_contig_concrete_tensor([4, 128, 2])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        t3 = tp.set(t2)
        t4 = tp.set(t3)
        fusion.add_output(t4)
    t2.set_memory_type(tp.MemoryType.Tensor)
    t4.axis(0).parallelize(P.BIDx)
    t4.axis(1).parallelize(P.TIDx)
    tp.parallelize_all_like(t4)
    t2.set_tmem_dim_sep_pos(2)
    return fusion


@tp.schedule(expect=tp.accepted())
def broadcast_row_split_by_columns():
    """examples/invalid/visibility.py's broadcast_copies_read_at_the_first_copy, fixed: the
    broadcast row is not repeated across blocks; its six columns are split onto
    [BIDy{3}, TIDx{2}], so each block stores and reads its own two columns."""
    with tp.Fusion("broadcast_row_split_by_columns") as fusion:
        t0 = tp.make_contig_concrete_tensor([1, 6])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2):
        t.split(1, 2)  # [b{1}, BIDy{3}, TIDx{2}]
        t.axis(1).parallelize(P.BIDy)
        t.axis(2).parallelize(P.TIDx)
    return fusion
