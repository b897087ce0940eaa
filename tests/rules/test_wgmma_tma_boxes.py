"""wgmma B operands that apply_mma_swizzle_for_tma_load lays out as a loop of TMA boxes (nvFuser's
MmaSwizzler::scheduleTMALoadForMma): without a swizzle, 8 x 16-byte core matrices, one box each
(nvFuser's HopperRSStmatrix); with a swizzle, an MN-major tile wider than one span as a loop of
one box per span (nvFuser's HSH_NT_128BSwizzle). The TMA rules and WGMMA-SMEM-LAYOUT prove the
layout the boxes write, not the call: the same boxes allocated so that the descriptor cannot
name them, or bound to Bulk across the loop of spans, are refused."""

from __future__ import annotations

import re

import tileproof as tp

P = tp.ParallelType
SW = tp.MmaInputSmemSwizzle


def rs_boxes(n, swizzle, *, n_major=False, bulk=None, uneven=False):
    """bfloat16 A (64 x 16, in registers) times B (n x 16: [1, n, 16] K-major, or [1, 16, n]
    N-major), float32 out, one wgmma Hopper_64_<n>_16 with A from registers: sb = b loaded by TMA
    as apply_mma_swizzle_for_tma_load(swizzle) lays it out, its `bulk` innermost axes Bulk (the
    box: 2 for a core matrix, 5 for a swizzled box), allocated as the loop. `uneven`: B's groups of
    8 rows of N allocated [n / 32, K / 8, 4, ..], not evenly spaced. Returns (fusion, sb)."""
    macro = getattr(tp.MmaMacro, f"Hopper_64_{n}_16")
    with tp.Fusion("rs_boxes") as fusion:
        a = tp.make_contig_concrete_tensor([64, 16, 1] if n_major else [64, 1, 16], dtype=tp.bfloat16)
        b = tp.make_contig_concrete_tensor([1, 16, n] if n_major else [1, n, 16], dtype=tp.bfloat16)
        fusion.add_input(a)
        fusion.add_input(b)
        d = tp.fused_multiply_sum(a, b, [1 if n_major else 2])
        out = tp.set(d)
        fusion.add_output(out)
    d.definition.set_macro(macro)
    ra = a.cache_after()
    sb = b.cache_after(tp.LoadStoreOpType.TMA)
    if n_major:
        d.reorder({1: 2})  # [M, N, K]
    d.set_allocation_domain(tp.mma_output_allocation(d), True)
    for i in range(3):
        d.axis(i).parallelize(P.Mma)
    tp.schedule_mma_fragment(out, macro, "C")
    ra.reorder({2: 0} if n_major else {1: 0})  # [1, M, K]
    tp.schedule_mma_fragment(ra, macro, tp.MmaOperand.A)
    sb.set_memory_type(tp.MemoryType.Shared)
    sb.apply_mma_swizzle_for_tma_load(swizzle)
    if uneven:  # [1, N / 8, K / 8, 8, 16 bytes] -> [1, N / 32, K / 8, 4, 8, 16 bytes]
        sb.split(1, 4).reorder({2: 3})
    box = bulk or (2 if swizzle is SW.NoSwizzle else 5)
    for i in sb.get_loop_domain()[-box:]:
        i.parallelize(P.Bulk)
    sb.set_allocation_domain(sb.get_loop_domain(), True)
    return fusion, sb


def _descriptor(fusion):
    src = tp.compile(fusion, "sm_90a").cuda_source
    return re.search(r"tp_wgmma_desc16\(tp_smem16\(T\d+\) \+ \(unsigned\)\(0U\), (\d+)u, (\d+)u, (\d)u\)", src).groups()


def test_core_matrix_boxes_are_read_by_an_unswizzled_k_major_descriptor():
    fusion, sb = rs_boxes(64, SW.NoSwizzle)
    assert [i.static_extent for i in sb.get_loop_domain()] == [1, 8, 2, 8, 8]  # [1, N / 8, K / 8, 8, 8]
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, [e.message for e in report.errors]
    assert "WGMMA-SMEM-LAYOUT" in report.rules_run
    # K's core matrices 128 bytes apart (LBO), N's groups of 8 rows 256 (SBO), no swizzle
    assert _descriptor(fusion) == ("128", "256", "0")


def test_core_matrix_boxes_of_an_n_major_operand_are_proved():
    fusion, sb = rs_boxes(64, SW.NoSwizzle, n_major=True)
    assert [i.static_extent for i in sb.get_loop_domain()] == [1, 2, 8, 8, 8]  # [1, K / 8, N / 8, 8, 8]
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, [e.message for e in report.errors]


def test_core_matrix_groups_not_evenly_spaced_are_refused_with_a_counterexample():
    report = tp.verify(rs_boxes(64, SW.NoSwizzle, uneven=True)[0], "sm_90a")
    (d,) = [d for d in report.errors if d.code == "WGMMA-SMEM-LAYOUT"]
    assert d.counterexample
    assert "TMA-TILE-CONTIGUITY" not in report.codes  # each box is still one contiguous core matrix


def test_an_n_major_tile_of_two_spans_is_a_loop_of_two_swizzled_boxes():
    fusion, sb = rs_boxes(128, SW.B128, n_major=True)
    # [1, N / 64 (the loop of boxes), K / 8, 1, 8, 8 chunks, 8]
    assert [i.static_extent for i in sb.get_loop_domain()] == [1, 2, 2, 8, 1, 8, 8]
    assert sb.get_loop_domain()[1].parallel_type is P.Serial
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, [e.message for e in report.errors]
    assert _descriptor(fusion)[2] == "1"  # the 128-byte swizzle


def test_a_box_across_the_loop_of_spans_is_wider_than_the_swizzle():
    report = tp.verify(rs_boxes(128, SW.B128, n_major=True, bulk=6)[0], "sm_90a")
    assert "TMA-SWIZZLE-WIDTH" in report.codes
