"""The fixed schedules of examples/invalid/launch.py: the 96 rows on TIDy (up to 1024), and the
register tensors inlined so that a thread holds one element of each."""

import tileproof as tp

P = tp.ParallelType


def copy_96_rows(name: str, cols: int):
    """T0 [96, cols] -> registers T1 -> T2 -> output T3."""
    with tp.Fusion(name) as fusion:
        t0 = tp.make_contig_concrete_tensor([96, cols])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        t3 = tp.set(t2)
        fusion.add_output(t3)
    return fusion, (t1, t2, t3)


@tp.schedule(expect=tp.accepted())
def block_rows_on_tidy():
    fusion, tensors = copy_96_rows("block_rows_on_tidy", 8)
    for t in tensors:
        t.axis(0).parallelize(P.TIDy)
        t.axis(1).parallelize(P.TIDx)
    return fusion


@tp.schedule(expect=tp.accepted(allocations={"T1": {"num_elements": 1}, "T2": {"num_elements": 1}}))
def local_frame_inlined():
    fusion, _ = copy_96_rows("local_frame_inlined", 1024)
    tp.inline_most(fusion)
    return fusion
