"""An output read back in the kernel that stores it, by threads that did not store it
(GLOBAL-VISIBILITY): no grid-wide barrier orders a store with another block's load.

examples/valid/global_visibility.py holds the fixed schedule.
"""

import tileproof as tp

P = tp.ParallelType


@tp.schedule(expect=tp.rejected("GLOBAL-VISIBILITY", messages=[
    "but only the thread with threadIdx.x = 0, blockIdx.x = 0 writes that element of global memory"]))
def output_read_by_other_blocks():
    """T2 = exp(T1) is an output and T3 = set(T2) reads it back in the same kernel. T2 is not
    parallelized, so thread 0 of block 0 stores all of it (the single-writer predicate), while
    T3's 8 blocks of 64 threads read it at once: no barrier orders blocks, and most reads come
    before the store. Found by benchmarks/fuzz.py --run (wrong output on H100)."""
    with tp.Fusion("output_read_by_other_blocks") as fusion:
        t0 = tp.make_contig_concrete_tensor([256, 64])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.exp(t1)
        t3 = tp.set(t2)
        fusion.add_output(t2)
        fusion.add_output(t3)
    t3.split(0, 32)
    t3.axis(0).parallelize(P.BIDx)
    t3.axis(2).parallelize(P.TIDx)
    tp.inline_most(fusion)
    return fusion
