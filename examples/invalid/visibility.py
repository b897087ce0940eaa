"""Invalid schedules that read shared or tensor memory written by another thread block
(SMEM-BLOCK-VISIBILITY). Each block has its own shared memory and tensor memory, so a
consumer must run in the block that produced the elements it reads. nvFuser rejects these
when lowering; a kernel generated from them computes silently wrong results.

examples/valid/visibility.py holds the fixed schedules.
"""

import tileproof as tp

P = tp.ParallelType
TMA = tp.LoadStoreOpType.TMA


@tp.schedule(expect=tp.rejected("SMEM-BLOCK-VISIBILITY", messages=["in the block with blockIdx.x = 0, but only "
                                                                    "the block with blockIdx.x = "]))
def figure14a_output_unscheduled():
    """Figure 14 (a) of the TMA tutorial (examples/valid/tma_smem.py) with the output T2 left
    unscheduled: T1[I1{64}, I2{256}] is loaded by TMA as [I3, I8, I7{4}, I5 (BIDx{8}), I6{32}],
    so block k holds columns 32k .. 32k + 31 of T1. T2 is not parallelized on BIDx, so its
    store runs in block 0 only (the single-writer predicate of a global store) and reads
    columns that blocks 1..7 loaded into their own shared memory."""
    with tp.Fusion("figure14a_output_unscheduled") as fusion:
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
    return fusion


@tp.schedule(expect=tp.rejected("SMEM-BLOCK-VISIBILITY"))
def blocks_of_different_size():
    """T1 (shared) gives each of 8 blocks 8 rows of a [64, 64] tensor; T2 gives each of 4
    blocks 16 rows: block 0 of T2 reads rows 8..15, which block 1 wrote."""
    with tp.Fusion("blocks_of_different_size") as fusion:
        t0 = tp.make_contig_concrete_tensor([64, 64])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    t1.split(0, 8)  # [8, 8, 64]
    t2.split(0, 16)  # [4, 16, 64]
    for t in (t1, t2):
        t.axis(0).parallelize(P.BIDx)
        t.axis(2).parallelize(P.TIDx)
    return fusion


@tp.schedule(expect=tp.rejected("SMEM-BLOCK-VISIBILITY", warnings=("GLOBAL-COALESCING",)), target="sm_100a")
def tensor_memory_read_in_every_block():
    """gmem -> reg T1 -> tmem T2 -> reg T3 -> gmem T4 with rows on BIDx{4} and TIDx{128}, but
    T3's block axis is reset to Serial: every block loads all 4 rows from its own tensor
    memory, which holds only the row its blockIdx.x names."""
    with tp.Fusion("tensor_memory_read_in_every_block") as fusion:
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
    t3.axis(0).parallelize(P.Serial)
    t2.set_tmem_dim_sep_pos(2)
    return fusion


@tp.schedule(expect=tp.rejected("SMEM-BLOCK-VISIBILITY", messages=["stored the element at offset"]))
def broadcast_copies_read_at_the_first_copy():
    """T1[b{1}, I{6}] in shared memory repeats its one row: the broadcast is split by 2 and
    merged with I into 12 copies-and-columns, then split onto [BIDy{3}, TIDx{4}], so block 1
    holds columns 4, 5, 0, 1 at offsets 0..3. T2, scheduled alike, reads column j at the
    offset of its first copy (j % 4): in block 1, offset 0 holds column 4, not column 0. Each
    column is also stored by a block that reads it right, so on a GPU the wrong value shows only
    where that block's store lands first: a race between blocks, not a certain failure."""
    with tp.Fusion("broadcast_copies_read_at_the_first_copy") as fusion:
        t0 = tp.make_contig_concrete_tensor([1, 6])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2):
        t.split(0, 2).merge(1).split(1, 4)  # [b{1}, BIDy{3}, TIDx{4}]
        t.axis(1).parallelize(P.BIDy)
        t.axis(2).parallelize(P.TIDx)
    return fusion
