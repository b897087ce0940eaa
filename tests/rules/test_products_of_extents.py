"""Claims over products of symbolic extents, on nvFuser's Tutorial.PointwiseBroadcastTMA (a
broadcast [I1, I2, I3] added to [I0, I1, I2, I3], TMA tiles of 256 elements, blockIdx.x over
I0 * I1 * ceil(I2 * I3 / 1024)). Under nvFuser's launch checks as assumptions (a row stride
I2 * I3 * 4 bytes a multiple of 16, at most 2^31 - 1 elements: a product of four extents),
LAUNCH-GRID, TMA-COORD-RANGE and TMA-GLOBAL-STRIDE are proved over the integers first (over
bit-vectors z3 gave no verdict in 20 s each), and SMEM-BLOCK-VISIBILITY proves the promoted
TMA tile by the thread that loaded the element read (it searched for that writer: 20 s). A
counterexample still comes from the bit-vector query, and one the assumptions leave is found."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import z3

import tileproof as tp

LAUNCH_CHECKS = ("(T0_1 * T0_2) % 4 == 0", "T1_0 * T0_0 * T0_1 * T0_2 <= 2147483647")
SIZE_RULES = ["LAUNCH-GRID", "TMA-COORD-RANGE", "TMA-GLOBAL-STRIDE"]


def _broadcast_tma(*assumptions) -> tp.Fusion:
    path = Path(__file__).resolve().parents[1] / "nvfuser" / "test_nvfuser_tutorial.py"
    spec = importlib.util.spec_from_file_location("translated_tutorial", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fusion = module.pointwise_broadcast_tma(launch_checks=False)
    for a in assumptions:
        fusion.assume(a)
    return fusion


def _grid_x(s) -> int:
    return s["T0_0"] * s["T1_0"] * -(-(-(-(s["T0_1"] * s["T0_2"]) // 256)) // 4)


def test_nvfusers_launch_checks_prove_the_grid_the_coordinates_and_the_strides():
    report = tp.verify(_broadcast_tma(*LAUNCH_CHECKS), "sm_90a", rules=SIZE_RULES)
    assert report.ok, [d.message for d in report.errors]


def test_each_tma_dimension_bounded_on_its_own_proves_the_coordinates():
    report = tp.verify(_broadcast_tma("(T0_1 * T0_2) % 4 == 0", "T0_1 * T0_2 <= 2147483647",
                                      "T0_0 * T1_0 <= 2147483647"), "sm_90a", rules=["TMA-COORD-RANGE"])
    assert report.ok, [d.message for d in report.errors]


def test_a_grid_the_assumptions_leave_unbounded_has_a_counterexample():
    report = tp.verify(_broadcast_tma(LAUNCH_CHECKS[0]), "sm_90a", rules=["LAUNCH-GRID"])
    (d,) = report.errors
    assert d.code == "LAUNCH-GRID" and d.counterexample["gridDim.x"] > 2**31 - 1
    assert _grid_x(d.counterexample) == d.counterexample["gridDim.x"]


def test_a_stride_the_assumption_leaves_misaligned_has_a_counterexample():
    report = tp.verify(_broadcast_tma("(T0_1 * T0_2) % 2 == 0"), "sm_90a",
                       rules=["TMA-GLOBAL-STRIDE"])
    assert report.codes == ["TMA-GLOBAL-STRIDE"]
    for d in report.errors:
        c = d.counterexample
        assert c["stride bytes"] == 4 * c["T0_1"] * c["T0_2"] and c["stride bytes"] % 16 != 0
        assert (c["T0_1"] * c["T0_2"]) % 2 == 0


def test_the_promoted_tma_tile_is_read_in_the_block_that_loaded_it(monkeypatch):
    """Proved by its witness, the tile's issuing thread (the reader's thread loaded another box):
    the quantified search for a writer is never asked."""
    def searched(*args, **kwargs):
        raise AssertionError("the writer was searched for")

    monkeypatch.setattr(z3, "Exists", searched)
    report = tp.verify(_broadcast_tma(), "sm_90a", rules=["SMEM-BLOCK-VISIBILITY"])
    assert report.ok, [d.message for d in report.diagnostics]


def test_a_tile_loaded_outside_the_consumers_loop_is_read_by_other_blocks():
    fusion = _broadcast_tma()
    next(t for t in fusion.tensors if t.name == "T4").inline_at(0)  # the broadcast's tile, not promoted
    report = tp.verify(fusion, "sm_90a", rules=["SMEM-BLOCK-VISIBILITY"], bind=dict(T0_0=1, T0_1=1, T0_2=4, T1_0=2))
    (d,) = report.errors
    assert d.code == "SMEM-BLOCK-VISIBILITY"
    assert d.counterexample["reader blockIdx.x"] == 1 and d.counterexample["writer blockIdx.x"] == 0
