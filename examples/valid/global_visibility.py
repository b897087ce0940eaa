"""The fixed schedule of examples/invalid/global_visibility.py: each thread reads back what it stored."""

import tileproof as tp

P = tp.ParallelType


@tp.schedule(expect=tp.accepted())
def output_read_by_its_own_threads():
    """The fix of output_read_by_other_blocks: T3 is scheduled like T2 (rows by 32 over
    blockIdx.x, columns on threadIdx.x), so each thread reads back what it stored."""
    with tp.Fusion("output_read_by_its_own_threads") as fusion:
        t0 = tp.make_contig_concrete_tensor([256, 64])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.exp(t1)
        t3 = tp.set(t2)
        fusion.add_output(t2)
        fusion.add_output(t3)
    for t in (t1, t2, t3):
        t.split(0, 32)
        t.axis(0).parallelize(P.BIDx)
        t.axis(2).parallelize(P.TIDx)
    return fusion
