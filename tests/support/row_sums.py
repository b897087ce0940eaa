"""A row sum read from TMA tiles by threads, for the warp-specialization tests: out[m] = sum(a[m, :]),
one row a block (BIDx), its 256-element tiles circular-buffered over a serial loop and summed by
256 threads on TIDx, which combine in a block reduction after the loop (tp_block_reduce)."""

from __future__ import annotations

import tileproof as tp

P = tp.ParallelType


def row_sums(circular) -> tp.Fusion:
    """`circular`: a function (TensorView -> None) circular-buffering the shared tile."""
    with tp.Fusion("row_sums") as fusion:
        a = tp.make_contig_tensor(2)
        fusion.add_input(a)
        fusion.assume("T0_1 % 4 == 0")  # TMA's row stride, a multiple of 16 bytes
        out = tp.sum(a, [-1])
        fusion.add_output(out)
    s = a.cache_after(tp.LoadStoreOpType.TMA)
    s.set_memory_type(tp.MemoryType.Shared)
    out.split(1, 256)  # [M, N/256, 256]
    tp.propagate_transforms(out)
    tp.inline_all_at(out, 2)
    for t in (s, out):
        t.axis(0).parallelize(P.BIDx)
    s.axis(-1).parallelize(P.Bulk)
    out.axis(-1).parallelize(P.TIDx)
    circular(s)
    return fusion
