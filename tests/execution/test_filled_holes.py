"""execution/clipped_holes.py filled: TMA loads whose boxes the hardware zero-fills past the extent,
and the copies and wgmmas reading them, run at their holes unpredicated; other loads keep their
predicates."""

from __future__ import annotations

import tileproof as tp
from tileproof.execution.clipped_holes import filled
from tileproof.execution.statements import CondKind, tensor_execution
from tileproof.execution.indexing import block_dims
from tileproof.recipes import (Cluster, Epilogue, GridOrder, HopperGemmParams, HopperTile, MmaGemmParams, MmaTile,
                               TmaPipeline, hopper_gemm, mma_gemm)

from support.examples import example_module

tma_boxes = example_module("valid", "tma_boxes")

WS = tp.WarpSpecialized(tp.ParallelType.TIDy, num_registers=(40, 232))


def _holes(fusion, name: str) -> list:
    tv = next(t for t in fusion.tensors if t.name == name)
    return tensor_execution(tv, block_dims(fusion)).conds_of(CondKind.HOLE)


def test_the_tiles_of_a_padded_group_are_loaded_and_multiplied():
    """8000 x 8000 in groups of 16 M tiles: the 63 M tiles pad to 64. A's and B's TMA loads (M, K
    and N each a dimension of their tensor maps) and the wgmma reading them run at those holes,
    on zeros; the schedule is still proved."""
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=WS),
                              grid=GridOrder(group=16, persistent=128), cluster=Cluster(size=2),
                              epilogue=Epilogue(dtype=tp.bfloat16, stmatrix=True, by_box=True))
    fusion = hopper_gemm(8000, 8000, 8192, params)
    assert filled(fusion) == {"T2", "T4", "T5"}
    assert _holes(fusion, "T4") == []
    d = next(t for t in fusion.tensors if t.name == "T2")
    k_ids = {f"hole of {i.label()}" for i in d.all_ids() if i.is_reduction}
    assert {c.why for c in _holes(fusion, "T2")} <= k_ids  # a hole of a split of K stays a predicate
    assert tp.verify(fusion, "sm_90a").ok


def test_a_box_whose_holes_lie_inside_the_extent_keeps_its_predicates():
    """tma_indivisible_rotation: I0{1000} split by 32, the 32 split by 12. A hole (I1 >= 32) is
    the next chunk's element, in bounds, not zero: the load keeps its predicate there. A box split
    of each axis (holes past M or N only) is filled."""
    fusion = tma_boxes.tma_indivisible_rotation()
    assert filled(fusion) == frozenset() and _holes(fusion, "T1")
    assert filled(tma_boxes.tma_box_by_partitioning()) == {"T1"}


def test_an_mma_sync_reading_registers_is_not_filled():
    """mma.sync reads its operands from registers (ldmatrix of cp.async tiles): it keeps its hole
    predicates, and so do the cp.async loads."""
    fusion = mma_gemm(200, 200, 64, MmaGemmParams(tile=MmaTile(m=128, n=128)))
    assert filled(fusion) == frozenset()
    assert _holes(fusion, "T4") or _holes(fusion, "T2")


def test_the_answer_follows_the_schedule_it_is_asked_about():
    """filled and clipped are remembered per schedule (by fingerprint): a fusion scheduled further
    after a first answer gets a new one."""
    P = tp.ParallelType
    fusion, t1, t2 = tma_boxes.tma_load("rescheduled", [1000])
    for t in (t1, t2):
        t.split(0, 32)  # [I2, I1{32}]: a hole past 1000
        t.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.Bulk)
    assert filled(fusion) == {"T1"}
    t1.axis(1).parallelize(P.Serial)
    for t in (t1, t2):
        t.split(1, 12)  # [I2, I3{3}, I4{12}]: holes inside the extent (I1 >= 32)
        t.axis(1).parallelize(P.BIDy)
    t1.axis(2).parallelize(P.Bulk)
    assert filled(fusion) == frozenset()
