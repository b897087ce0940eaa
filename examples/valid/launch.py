"""The fixed schedules of examples/invalid/launch.py: the 96 rows on TIDy (up to 1024), the
register tensors inlined so that a thread holds one element of each, and grids within their
limits: rows on blockIdx.x (up to 2^31 - 1), on blockIdx.y with the rows assumed at most
65535, and a persistent grid of one block per SM."""

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


def copy_rows(name: str, rows):
    """T0 [rows, 32] -> output T1, a column per thread (the caller binds the rows to blocks)."""
    with tp.Fusion(name) as fusion:
        t0 = tp.make_contig_concrete_tensor([rows, 32]) if isinstance(rows, int) else tp.make_tensor([rows, 32])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        fusion.add_output(t1)
    t1.axis(1).parallelize(P.TIDx)
    return fusion, t1


@tp.schedule(expect=tp.accepted())
def rows_on_bidx():
    fusion, t1 = copy_rows("rows_on_bidx", 70000)
    t1.axis(0).parallelize(P.BIDx)
    return fusion


@tp.schedule(expect=tp.accepted())
def symbolic_rows_on_bidy_assumed_at_most_65535():
    fusion, t1 = copy_rows("symbolic_rows_on_bidy_assumed_at_most_65535", "N")
    fusion.assume("N <= 65535")
    t1.axis(0).parallelize(P.BIDy)
    return fusion


@tp.schedule(expect=tp.accepted())
def persistent_grid_of_132_blocks():
    fusion, t1 = copy_rows("persistent_grid_of_132_blocks", "N")
    t1.split(0, 132)  # [ceil(N / 132) (a serial loop), 132 (blockIdx.x, an H200's SMs), 32]
    t1.axis(1).parallelize(P.BIDx)
    return fusion
