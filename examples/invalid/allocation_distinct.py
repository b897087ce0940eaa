"""Two elements of an on-chip tensor, live together, at one address (ALLOCATION-DISTINCT): the
later write overwrites the other before its consumer reads it.

examples/valid/tma_smem.py holds figure14d_store_split_by_whole_extent, the schedule this one breaks.
"""

import tileproof as tp
from tileproof.rule_examples import tmem_copy

P = tp.ParallelType
TMA = tp.LoadStoreOpType.TMA


@tp.schedule(expect=tp.rejected("ALLOCATION-DISTINCT", "VECTORIZE-WIDTH", messages=[
    "are both stored at offset 0 of T1 in one block: the later write overwrites the other",
    "has a loop of each thread inside it"]))
def figure14d_block_axis_made_a_vector():
    """Figure 14 (d) (examples/valid/tma_smem.py) with T1's block axis turned into a Vectorize
    loop: T1's allocation domain [I4, I2] leaves that axis out (right while it was BIDx), so
    each block writes all eight row tiles of T1 to one 8 x 32 buffer. Found by
    benchmarks/fuzz.py --run: 1792 of 2048 elements wrong on H100. The Vectorize axis is
    outermost, loops of the thread inside it: no one access either (VECTORIZE-WIDTH)."""
    with tp.Fusion("figure14d_block_axis_made_a_vector") as fusion:
        t0 = tp.make_contig_concrete_tensor([64, 32])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1, op=TMA)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2):
        t.split(0, 8).split(2, 32)  # [I3, I4{8}, I5{1}, I6{32}]
    t1.axis(0).parallelize(P.Vectorize)
    t2.axis(0).parallelize(P.BIDx)
    t1.axis(3).parallelize(P.TIDx)
    t1.set_allocation_domain([t1.axis(1), t1.get_logical_domain()[1]])
    t2.axis(1).parallelize(P.Bulk)
    t2.axis(3).parallelize(P.Bulk)
    return fusion


@tp.schedule(target="sm_100a", expect=tp.rejected("ALLOCATION-DISTINCT", messages=[
    "T2[0, 0] and T2[0, 16] are both stored at offset 0 of T2 in one block"], warnings=("GLOBAL-COALESCING",)))
def tensor_memory_column_block_reused():
    """A 128 x 64 tensor-memory tile written in four blocks of 16 columns, its allocation domain
    [lanes, 16] leaving out the loop over the blocks: every block writes the same 16 columns, and
    the copy out reads only the last. Tensor memory is the block's, as shared memory is (accepted
    before ALLOCATION-DISTINCT covered tensor memory)."""
    fusion, t0, t1, t2, t3 = tmem_copy("tensor_memory_column_block_reused", [128, 64])
    for t in (t1, t2, t3):
        t.split(1, 16)  # [128 lanes, 4, 16]
        t.axis(0).parallelize(P.TIDx)
    t2.set_allocation_domain([t2.axis(0), t2.axis(2)], True)
    t2.set_tmem_dim_sep_pos(1)
    return fusion
