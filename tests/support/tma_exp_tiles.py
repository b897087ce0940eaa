"""nvFuser's TmaCircularBufferingTest.SingleDim as a schedule the rule tests share: out = exp(a),
256-element TMA tiles over a serial loop, read by 256 threads (no wgmma), circular-buffered
Pipelined(uses_mbarrier_for_war=True) or WarpSpecialized."""

from __future__ import annotations

import tileproof as tp

P = tp.ParallelType


def exp_tiles(circular, *, threads_outside: bool = False, tile: int = 256) -> tp.Fusion:
    """`circular`: a function (TensorView -> None) circular-buffering the shared tile;
    threads_outside: a TIDy axis of 2 outside the circular loop (rows split over threadIdx.y);
    tile: the elements of a tile (and the threads on TIDx)."""
    with tp.Fusion("exp_tiles") as fusion:
        a = tp.make_contig_tensor(1)
        fusion.add_input(a)
        out = tp.exp(a)
        fusion.add_output(out)
    s = a.cache_after(tp.LoadStoreOpType.TMA)
    s.set_memory_type(tp.MemoryType.Shared)
    out.split(0, tile)
    if threads_outside:
        out.split(0, 2, inner_split=False)  # [2 (TIDy), I/256/2, 256]
    tp.propagate_transforms(out)
    tp.inline_all_at(out, 2 if threads_outside else 1)
    if threads_outside:
        for t in (s, out):
            t.axis(0).parallelize(P.TIDy)
    s.axis(-1).parallelize(P.Bulk)
    out.axis(-1).parallelize(P.TIDx)
    circular(s)
    return fusion
