"""MMA-WARP-COLLECTIVE's verified fix where the kernel binds nothing to TIDx: the epilogue's lane
axis (the accumulators' C fragment on TIDx{128}) given another type leaves a one-thread TIDx,
and the allocation, unroll, vector and warp-specialization findings follow from it. Found by
benchmarks/report_causes.py (seed 125, case 273: the warp-specialized cluster GEMM's epilogue
axis made Vectorize): the report opened with four blocks where one mistake was made."""

from __future__ import annotations

import re

import pytest

import tileproof as tp
from tileproof.rule_examples import hopper_gemm_tile

P = tp.ParallelType
CODE = "MMA-WARP-COLLECTIVE"


def lane_axis_retyped(ptype):
    """hopper_gemm_tile's 64 x 64 GEMM, out's TIDx{128} axis (the C fragment's lanes) given `ptype`."""
    fusion, _, _, _, out = hopper_gemm_tile("lanes_retyped", 64, 64)
    lanes = next(k for k, i in enumerate(out.get_loop_domain()) if i.parallel_type is P.TIDx)
    out.axis(lanes).parallelize(ptype)
    return fusion, out, lanes


def proposed(report) -> str | None:
    d = next(d for d in report.errors if d.code == CODE)
    found = re.search(r"verified: (\w+\.axis\(\d+\)\.parallelize\(tp\.ParallelType\.TIDx\))", d.hint)
    return found.group(1) if found else None


@pytest.mark.parametrize("ptype", [P.Vectorize, P.Serial])
def test_the_lane_axis_given_back_to_tidx_is_the_one_cause(ptype):
    fusion, out, lanes = lane_axis_retyped(ptype)
    report = tp.verify(fusion, "sm_90a")
    heads = [d for d in report.errors if d.follows_from is None]
    assert [d.code for d in heads] == [CODE]
    assert len(report.errors) > 1  # the one-thread TIDx breaks the accumulators' allocation too
    assert all(d.follows_from == heads[0].id for d in report.errors if d is not heads[0])
    assert proposed(report) == f"{out.name}.axis({lanes}).parallelize(tp.ParallelType.TIDx)"
    out.axis(lanes).parallelize(P.TIDx)
    assert tp.verify(fusion, "sm_90a").ok


def test_an_axis_of_the_warpgroup_extent_that_misreads_the_fragment_is_not_proposed():
    """The epilogue's tile merged and split again: its inner 128 is no lane of the C fragment, so
    TIDx there fails MMA-ACCUM-LAYOUT on the copy, and no call is proposed."""
    fusion, out, lanes = lane_axis_retyped(P.Serial)
    out.merge(lanes, lanes + 1).split(lanes, 128)  # [TIDy{1}, 32, 128]: element 128 j + x, not lane x
    report = tp.verify(fusion, "sm_90a")
    assert CODE in report.codes and proposed(report) is None
    out.axis(lanes + 1).parallelize(P.TIDx)
    assert "MMA-ACCUM-LAYOUT" in tp.verify(fusion, "sm_90a").codes


def test_a_kernel_that_binds_tidx_to_another_extent_is_not_given_a_second_axis():
    """TIDx{2} on the epilogue's columns: the warpgroup's extent is there (the Serial 128) but
    blockDim.x is not 1, so the fix would be another extent on TIDx, not a second TIDx axis."""
    fusion, out, lanes = lane_axis_retyped(P.Serial)
    out.split(lanes + 1, 2)  # [TIDy{1}, 128, 16, 2]
    out.axis(lanes + 2).parallelize(P.TIDx)
    report = tp.verify(fusion, "sm_90a")
    assert "launches 2" in next(d for d in report.errors if d.code == CODE).message
    assert CODE in report.codes and proposed(report) is None
