"""inline_most / inline_all_at stop before vectorized and Bulk axes, so their result verifies."""

from __future__ import annotations

import tileproof as tp

P = tp.ParallelType


def tma_tiles():
    with tp.Fusion("tma_tiles") as fusion:
        t0 = tp.make_contig_concrete_tensor([64, 64])
        fusion.add_input(t0)
        t1 = tp.set(t0, op=tp.LoadStoreOpType.TMA)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2):
        t.split(1, 32).split(0, 16).reorder({1: 2})  # [I0o, I1o, 16, 32]
        t.axis(0).parallelize(P.BIDy)
        t.axis(1).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    t2.axis(2).parallelize(P.TIDy)
    t2.axis(3).parallelize(P.TIDx)
    return fusion, t1


def test_inline_most_stops_before_bulk_axes():
    fusion, t1 = tma_tiles()
    tp.inline_most(fusion)
    assert t1.compute_at == 2
    report = tp.verify(fusion)
    assert report.ok, report.codes


def test_inline_all_at_stops_before_bulk_axes():
    fusion, t1 = tma_tiles()
    tp.inline_all_at(fusion.outputs[0], -1)
    assert t1.compute_at == 2
    assert tp.verify(fusion).ok
