"""inline_most / inline_all_at stop before vectorized and Bulk axes, so their result verifies."""

from __future__ import annotations

import tileproof as tp

from support.examples import example_module

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


def _row_total_broadcast():
    """T1 = sum(T0, 1), T2 = broadcast(T1) [64, b], T3 = T0 - T2, each [BIDx, 2, TIDx{128}] (T2 [BIDx, b])."""
    with tp.Fusion("row_total_broadcast") as fusion:
        t0 = tp.make_contig_concrete_tensor([64, 256])
        fusion.add_input(t0)
        t1 = tp.sum(t0, 1)
        t2 = tp.broadcast(t1, [False, True])
        t3 = tp.sub(t0, t2)
        fusion.add_output(t3)
    for t in (t1, t3):
        t.split(1, 128)
        t.axis(0).parallelize(P.BIDx)
        t.axis(2).parallelize(P.TIDx)
    t2.axis(0).parallelize(P.BIDx)
    return fusion, t2


def test_inline_most_hoists_past_innermost_broadcast_axes():
    """nvFuser's inlineAt moves the position left past the tensor's innermost broadcast loop axes:
    T2 [BIDx, b] shares T3's row loop, not its loop over the row's two halves."""
    fusion, t2 = _row_total_broadcast()
    tp.inline_most(fusion)
    assert t2.compute_at == 1
    assert tp.verify(fusion).ok


def test_inline_at_hoists_past_innermost_broadcast_axes():
    fusion, t2 = _row_total_broadcast()
    t2.inline_at(2)
    assert t2.compute_at == 1


def test_inline_most_stops_before_a_consumer_s_tensor_core_axes():
    """Fuzz seed 120 (report_causes), case 147: inline_most over the bundled causal ping-pong
    attention put T19 (the row's rescale, broadcast) inside T20's Mma loop, which LOWERING-SUPPORTED
    refuses (one instruction computes the whole tile); best-effort inlining stops before an Mma axis
    as before a Bulk one. (The deeper positions it takes elsewhere still leave a nest LOOP-NEST-ORDER
    refuses: the example places its statements by hand.)"""
    fusion = example_module("valid", "attention").causal_attention_in_ping_pong()
    # (the case's T19 and T20: one tensor fewer since the causal scores are masked unscaled)
    rescale, o = fusion.tensor("T18"), fusion.tensor("T19")
    mma = next(k for k, i in enumerate(o.loop) if i.parallel_type is P.Mma)
    tp.inline_most(fusion)
    assert rescale.compute_at <= mma
    assert "LOWERING-SUPPORTED" not in tp.verify(fusion).codes
    rescale.inline_at(mma + 1)  # asked for exactly: allowed, and the rule says why it cannot run
    assert "LOWERING-SUPPORTED" in tp.verify(fusion).codes


def test_inline_most_keeps_positions_it_does_not_deepen():
    """Fuzz seed 125 (report_causes), case 54: inline_most() over the bundled double-buffered
    matmul moved its register tiles' positions out (T5 7 -> 5, T6 7 -> 6), out of the circular
    loop their cp.async sources are buffered over (8 findings of CPASYNC-WAIT and PIPELINE-STAGES).
    nvFuser's inlineAt never lowers a position ("if (pos <= compute_at_pos_) return"), so
    inline_most on a scheduled fusion changes nothing it cannot deepen."""
    fusion = example_module("valid", "mma").tuned_matmul_grouped_double_buffered("bfloat16")
    positions = {t.name: t.compute_at for t in fusion.tensors}
    tp.inline_most(fusion)
    tp.inline_all_at(fusion.outputs[0], 0)
    assert {t.name: t.compute_at for t in fusion.tensors} == positions
    assert tp.verify(fusion, "sm_90a").ok
    t5 = fusion.tensor("T5")
    t5.inline_at(5)  # asked for exactly: moved out, as the reports' inline_at(k) fixes need
    assert t5.compute_at == 5
