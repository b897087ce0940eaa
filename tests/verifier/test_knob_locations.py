"""Locations at the knob that broke (issue 35 item 4): a diagnostic about a setting made after the
tensor (the stages of circular_buffer, WarpSpecialized's num_registers, a parallelization, a
memory type, an allocation domain) points at the user's line that set it, not at the line
that made the tensor."""

from __future__ import annotations

import sys

import tileproof as tp
from tileproof.rule_examples import copy_chain, cp_async_k_loop, hopper_gemm_tile


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
