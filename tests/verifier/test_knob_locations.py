"""Locations at the knob that broke (issue 35 item 4): a diagnostic about a setting made after the
tensor (the stages of circular_buffer, WarpSpecialized's num_registers, a parallelization, a
memory type, an allocation domain, an inline position, a macro, a multicast, the op a cache_after
chose, a split or merge) points at the user's line that set it, not at the line
that made the tensor."""

from __future__ import annotations

import sys

import pytest

import tileproof as tp
from tileproof.rule_examples import copy_chain, cp_async_k_loop, grid_allreduce, hopper_gemm_tile, tf32_operands


def _line() -> int:
    """The line of the caller (the statement on the same line)."""
    return sys._getframe(1).f_lineno


def _error(fusion, code: str, target: str = "sm_90a"):
    return next(d for d in tp.verify(fusion, target).errors if d.code == code)


def test_too_few_stages_point_at_the_circular_buffer_call():
    fusion, a, s, out = cp_async_k_loop("one_stage")
    s.circular_buffer(1); line = _line()
    assert _error(fusion, "PIPELINE-STAGES").location == f"{__file__}:{line}"


def test_register_counts_point_at_the_warp_specialized_that_names_them():
    fusion, sa, sb, d, out = hopper_gemm_tile("registers_past_the_pool", 128, 64)
    spec = tp.WarpSpecialized(tp.ParallelType.TIDy, num_registers=(40, 240)); line = _line()
    for t in (sa, sb):
        t.circular_buffer(2, 0, spec)
    assert _error(fusion, "WS-REGISTERS").location == f"{__file__}:{line}"


def test_a_reduction_over_too_many_blocks_points_at_the_parallelize_call():
    with tp.Fusion("sum_over_a_2d_grid") as fusion:
        t0 = tp.make_tensor(["M", "N"]); fusion.add_input(t0)
        t1 = tp.sum(t0, [0, 1]); fusion.add_output(t1)
    fusion.assume("M <= 65535")
    t1.axis(0).parallelize(tp.ParallelType.BIDy); line = _line()  # the first of the block axes it reduces over
    t1.axis(1).parallelize(tp.ParallelType.BIDx)
    assert _error(fusion, "REDUCTION-GRID-WORKSPACE").location == f"{__file__}:{line}"


def test_shared_memory_over_capacity_points_at_the_set_memory_type_call():
    fusion, t0, t1, t2 = copy_chain("big_smem", [1024, 1024])
    t1.set_memory_type(tp.MemoryType.Shared); line = _line()
    assert _error(fusion, "SMEM-CAPACITY").location == f"{__file__}:{line}"


def test_an_allocation_that_repeats_addresses_points_at_the_set_allocation_domain_call():
    fusion, t0, t1, t2 = copy_chain("alloc_drops_axis", [64, 32])
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2):
        t.axis(1).parallelize(tp.ParallelType.TIDx)
    t1.set_allocation_domain([t1.axis(1)]); line = _line()
    assert _error(fusion, "ALLOCATION-DISTINCT").location == f"{__file__}:{line}"


def test_an_indivisible_split_points_at_the_split_call():
    fusion, t0, t1 = copy_chain("vec6", [6], copies=1)
    t1.split(0, 4); line = _line()
    t1.axis(1).parallelize(tp.ParallelType.Vectorize)
    assert _error(fusion, "SPLIT-DIVISIBILITY").location == f"{__file__}:{line}"


def test_a_merge_of_strided_rows_points_at_the_merge_call():
    fusion, t0, t1 = copy_chain("strided_rows", [8, 6], copies=1, contiguity=[False, True])
    t1.merge(0); line = _line()
    t1.split(0, 4)
    t1.axis(1).parallelize(tp.ParallelType.Vectorize)
    assert _error(fusion, "VIEW-DISCONTIGUOUS-MERGE").location == f"{__file__}:{line}"


def _interleaved():
    """LOOP-NEST-ORDER's Example: t3 runs between t1 and t2, which share a loop once t1 is inlined."""
    fusion, t0, t1, t2 = copy_chain("interleaved", [8, 32])
    with fusion:
        t3 = tp.exp(t2); t4 = tp.add(t1, t3); fusion.add_output(t4)
    for t in (t1, t2, t3, t4):
        t.axis(1).parallelize(tp.ParallelType.TIDx)
    return fusion, t1


def test_a_loop_split_in_two_points_at_the_inline_at_call():
    fusion, t1 = _interleaved()
    t1.inline_at(1); line = _line()
    assert _error(fusion, "LOOP-NEST-ORDER").location == f"{__file__}:{line}"


def test_transforms_of_inlined_axes_are_refused_at_the_call():
    """The knob that would break an inlining is the call itself: nvFuser's split, merge and reorder
    refuse axes inside a compute-at or max producer position, and so does tileproof."""
    fusion, t0, t1, t2 = copy_chain("merged_after_inlining", [64, 32])
    tp.inline_most(fusion)
    with pytest.raises(tp.ScheduleError, match="merge: axis 0 of T2 is inside the loops its producer T1 is "
                                               r"inlined in \(position 2\); transform T2 before inlining T1"):
        t2.merge(0)
    with pytest.raises(tp.ScheduleError, match="split: axis 1 of T1 is inside its compute-at position 2"):
        t1.split(1, 4)
    assert tp.verify(fusion).ok


def test_a_consumer_made_after_the_inlining_points_at_where_it_was_made():
    fusion, t0, t1, t2 = copy_chain("consumer_made_after_inlining", [64, 32])
    for t in (t1, t2):
        t.split(0, 4)
    t1.inline_at(1)
    with fusion:
        t3 = tp.set(t1); line = _line()
        fusion.add_output(t3)
    assert _error(fusion, "INLINE-LOOP-MAP").location == f"{__file__}:{line}"


def test_inlined_axes_parallelized_differently_point_at_a_parallelize_call():
    fusion, t0, t1, t2 = copy_chain("unroll_and_tidx", [4, 32])
    t1.inline_at(1)
    t1.axis(0).parallelize(tp.ParallelType.Unroll); unroll = _line()
    t2.axis(0).parallelize(tp.ParallelType.TIDx); tidx = _line()
    location = _error(fusion, "INLINE-PARALLEL-MATCH").location
    assert location in (f"{__file__}:{unroll}", f"{__file__}:{tidx}")


def test_a_tma_copy_without_a_tile_points_at_the_cache_after_call():
    with tp.Fusion("tma_without_bulk") as fusion:
        t0 = tp.make_tensor([64, 64]); fusion.add_input(t0)
        t1 = tp.set(t0); fusion.add_output(t1)
    t0.cache_after(tp.LoadStoreOpType.TMA); line = _line()
    assert _error(fusion, "TMA-BULK-PLACEMENT").location == f"{__file__}:{line}"


def test_a_wrong_macro_points_at_the_set_macro_call():
    fusion, a, b, a3, b3, d = tf32_operands("tf32_tile")
    d.definition.set_macro(tp.MmaMacro.Ampere_16_8_16); line = _line()
    assert _error(fusion, "MMA-DTYPE").location == f"{__file__}:{line}"


def test_a_wgmma_macro_on_blackwell_points_at_the_set_macro_call():
    fusion, a, b, a3, b3, d = tf32_operands("tf32_tile")
    d.definition.set_macro(tp.MmaMacro.Hopper_64_8_16); line = _line()
    assert _error(fusion, "MMA-TARGET", "sm_100a").location == f"{__file__}:{line}"


def test_a_multicast_each_block_needs_points_at_the_multicast_call():
    fusion, sa, sb, d, out = hopper_gemm_tile("multicast_of_a", 256, 64, block_m=128)
    for t in (sa, sb):
        t.circular_buffer(2, 0, tp.WarpSpecialized(tp.ParallelType.TIDy))
    fusion.cluster_dims = (2, 1, 1)
    sa.multicast(tp.ParallelType.BIDx); line = _line()
    assert _error(fusion, "CLUSTER-MULTICAST").location == f"{__file__}:{line}"


def test_an_allreduce_in_clusters_points_at_the_cluster_dims_assignment():
    fusion, t1, t3 = grid_allreduce("allreduce_in_clusters")
    fusion.cluster_dims = (2, 1, 1); line = _line()
    assert _error(fusion, "REDUCTION-GRID").location == f"{__file__}:{line}"
