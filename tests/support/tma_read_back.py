"""Global tensors a TMA store writes and the block reads back (nvFuser's TMAMiscTest.StoreSyncInsertion),
as a user schedules them: shared by the rule tests (tests/rules/test_tma_store_read_back.py), the
launch test (tests/codegen/test_read_back_launch.py) and the GPU tests (tests/gpu/test_tma_store_read_back.py).
Public API only."""

from __future__ import annotations

import tileproof as tp

P = tp.ParallelType
TMA = tp.LoadStoreOpType.TMA


def read_back(name: str, *, blocks: str = "same", inline: bool = False) -> tp.Fusion:
    """gmem -> (TMA) smem -> (TMA) gmem T2 -> T3 = set(T2): [N/512, 4, 128]; blocks: "none" (one
    block), "same" (T1, T2 and T3 on BIDx along axis 0), "other" (T3 reads along BIDx the rows
    other blocks stored); inline: T2 inlined into T3 at the serial axis 1 (they share its loop)."""
    with tp.Fusion(name) as fusion:
        t0 = tp.make_contig_tensor(1)
        fusion.add_input(t0)
        t1 = tp.set(t0, op=TMA)
        t2 = tp.set(t1, op=TMA)
        t3 = tp.set(t2)
        fusion.add_output(t3)
    t1.set_memory_type(tp.MemoryType.Shared)
    t2.set_memory_type(tp.MemoryType.Global)
    for t in (t1, t2, t3):
        t.split(0, 128).split(0, 4)
    t1.axis(-1).parallelize(P.Bulk)
    t2.axis(-1).parallelize(P.Bulk)
    t3.axis(-1).parallelize(P.TIDx)
    if blocks == "same":
        for t in (t1, t2, t3):
            t.axis(0).parallelize(P.BIDx)
    elif blocks == "other":
        for t in (t1, t2):
            t.axis(0).parallelize(P.BIDx)
        t3.axis(1).parallelize(P.BIDx)
    t1.inline_at(1)
    if inline:
        t2.inline_at(2)
    return fusion


def output_read_back(name: str, *, blocks: bool = False) -> tp.Fusion:
    """gmem -> (TMA) smem -> (TMA) the output T2, which T3 = set(T2) (a second output) reads back in
    its storing thread: [N/128, 128], one block or (blocks) a box per block along BIDx."""
    with tp.Fusion(name) as fusion:
        t0 = tp.make_contig_tensor(1)
        fusion.add_input(t0)
        t1 = tp.set(t0, op=TMA)
        t2 = tp.set(t1, op=TMA)
        t3 = tp.set(t2)
        fusion.add_output(t2)
        fusion.add_output(t3)
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2, t3):
        t.split(0, 128)
        if blocks:
            t.axis(0).parallelize(P.BIDx)
    t1.inline_at(1)
    t1.axis(-1).parallelize(P.Bulk)
    t2.axis(-1).parallelize(P.Bulk)
    return fusion
