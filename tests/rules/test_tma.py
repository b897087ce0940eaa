"""TMA inference (hw/tma.py) and the descriptor rules (verifier/rules/tma.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import sympy

import tileproof as tp
from tileproof.hw.tma import InferredTma, TmaInfo, infer_tma
from tileproof.hw.tma_roles import ViewKind
from tileproof.model.types import Direction

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
P = tp.ParallelType
TMA = tp.LoadStoreOpType.TMA


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"_tma_examples_{path.stem}_{path.parent.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


VALID = load(EXAMPLES / "valid" / "tma_boxes.py")
INVALID = load(EXAMPLES / "invalid" / "tma_rules.py")


def info_of(fusion) -> TmaInfo:
    op = next(o for o in fusion.exprs if o.op_type is TMA)
    smem = op.output if op.output.memory_type is tp.MemoryType.Shared else op.inputs[0]
    return tp.tma_info(smem)


def inferred_of(fusion) -> InferredTma:
    """What the verifier and the code generator see: the info with the op, view and roles."""
    return infer_tma(next(o for o in fusion.exprs if o.op_type is TMA))


def table(info: TmaInfo):
    """(box, tile, element stride, size, global stride bytes) per dimension, innermost first."""
    return [(d.box, d.tile, d.element_stride, d.size, d.stride_bytes) for d in info.dims]


# -- inference ---------------------------------------------------------------------

def test_box_by_partitioning_symbolic():
    info = info_of(VALID.tma_box_by_partitioning())
    M, N = (tp.Fusion().symbol(n) for n in ("M", "N"))
    assert info.rank == 2 and info.direction is Direction.LOAD and info.swizzle_bytes == 0 and info.ok
    assert table(info) == [(64, 64, 1, N, 4), (32, 32, 1, M, 4 * N)]
    assert [d.kind for d in info.dims] == ["partitioned", "partitioned"]


def test_box_by_compositing():
    info = info_of(VALID.tma_box_by_compositing())
    assert info.rank == 1
    assert table(info) == [(32, 32, 1, 1024 * 2 * 4 * 8, 4)]
    assert info.dims[0].kind == "composited" and len(info.dims[0].box_ids) == 2


def test_box_by_rotation_left_and_right():
    left = info_of(VALID.tma_box_by_rotation())
    assert left.rank == 1 and left.dims[0].box == 8 and left.dims[0].kind == "partitioned"
    assert not inferred_of(VALID.tma_box_by_rotation()).view  # the split by 32 was rotated away: nothing divides
    right = info_of(VALID.tma_box_by_rotation_right())
    assert right.rank == 1 and right.dims[0].box == 32 and len(right.dims[0].box_ids) == 2


def test_indivisible_rotation_costs_a_dimension():
    """A load's dense box rotates through a split it does not divide (its overhang lands in
    shared-memory holes): one dimension over the whole tensor, nothing left to divide. A store's
    box does not (its overhang would overwrite global elements): the split becomes the view, a
    second dimension, and must divide."""
    load = inferred_of(VALID.tma_indivisible_rotation())
    assert load.info.rank == 1 and load.info.ok
    assert table(load.info) == [(12, 12, 1, 1000, 4)]
    assert not load.view and len(load.inference.overhangs) == 1
    store = inferred_of(INVALID.tma_store_indivisible_rotation())
    assert store.info.direction is Direction.STORE and store.info.rank == 2
    assert table(store.info) == [(12, 12, 1, 32, 4), (1, 1, 1, 32, 128)]
    assert [s.kind for s in store.view] == [ViewKind.SPLIT] and not store.inference.overhangs
    assert "cannot be rotated" in store.view[0].note and "TMA store" in store.view[0].note


def test_indivisible_rotation_of_a_strided_box_costs_a_dimension():
    """Only a dense box overhangs: a strided box of a load keeps the split in the view."""
    fusion, t1, t2 = VALID.tma_load("strided_rotation", [40, 64])
    for t in (t1, t2):
        t.split(0, 8).split(1, 6)  # [I2{5}, I3{2}, I4{6}, I1{64}]
        t.axis(0).parallelize(P.BIDx)
        t.axis(1).parallelize(P.BIDy)
    t1.split(2, 2)  # I4{6} -> [tile{3}, stride{2}]: a strided box of 6
    t1.reorder({3: 2})  # [I2, I3, stride, tile, I1]
    t1.axis(3).parallelize(P.Bulk)
    t1.axis(4).parallelize(P.Bulk)
    tma = inferred_of(fusion)
    assert tma.info.rank == 3 and not tma.inference.overhangs
    assert [s.kind for s in tma.view] == [ViewKind.SPLIT] and "strided" in tma.view[0].note


def test_overhanging_boxes_of_one_block_must_not_overlap():
    """Serial overhanging loads of one block, T1 [4, 32] boxed 12 in chunks of 32: kept 32
    elements a row (the allocation [R, C2{1}, C1{32}]), the third box of row r writes its
    overhang (zeros: past the 32 columns) over the first box of row r + 1, and the last row's
    past T1: reported as that (one cause, an allocation that does not hold the boxes; the
    overlap is not asked then; tests/golden/TMA-TILE-CONTIGUITY.txt has boxes that overlap inside
    their allocation); kept 36 a row (the loop domain [R, C3{3}, C4{12}]), the boxes are disjoint."""
    def fusion(rows_of_32: bool):
        fusion, t1, t2 = VALID.tma_load("overhang_overlap", [4, 32])
        for t in (t1, t2):
            t.split(1, 32)
            chunks = t.get_loop_domain()
            t.split(2, 12)  # [R{4}, C2{1}, C3{3}, C4{12}], all serial: one block
            if rows_of_32 and t is t1:
                t1.set_allocation_domain(chunks)
        t1.axis(3).parallelize(P.Bulk)
        return fusion

    rules = ["TMA-VIEW", "TMA-TILE-CONTIGUITY", "TMA-WHOLE-TILES"]
    report = tp.verify(fusion(True), "sm_90a", rules=rules)
    assert report.codes == ["TMA-WHOLE-TILES"]
    messages = [d.message for d in report.errors]
    assert len(messages) == 1 and "[480, 528) of T1" in messages[0] and "past its end" in messages[0], messages
    assert tp.verify(fusion(False), "sm_90a", rules=rules).ok


def test_dense_and_strided_tiles():
    dense = info_of(VALID.tma_strided_tile())
    assert table(dense) == [(16, 16, 1, 64, 4), (4, 2, 2, 1024, 256)]
    fttc = info_of(VALID.tma_strided_tile_fttc())
    assert table(fttc) == [(16, 16, 1, 64, 4), (4, 2, 3, 1024, 256)]
    composite = info_of(VALID.tma_strided_composited_box())
    assert table(composite) == [(16, 16, 1, 16, 4), (32, 8, 4, 64 * 32, 64)]
    assert composite.dims[0].kind == "implicit whole" and composite.dims[1].kind == "composited"


def test_figure11_five_dimensions():
    info = info_of(VALID.tma_figure11())
    assert info.rank == 5 and info.ok
    assert [d.kind for d in info.dims] == [
        "composited", "implicit whole", "implicit size-one", "partitioned", "composited"]
    assert [d.box for d in info.dims] == [16, 8, 1, 8, 2]
    assert [d.size for d in info.dims] == [48, 8, 5, 300, 8]
    assert info.dims[0].stride_bytes == 4 and info.dims[1].stride_bytes == 48 * 4
    # behind the discontiguous I4 the strides are launch-time values
    assert "stride.T0.3" in str(info.dims[2].stride_bytes)


def test_store_and_swizzle():
    store = info_of(VALID.tma_store())
    assert store.direction is Direction.STORE and store.gmem.name == "T2" and store.smem.name == "T1"
    assert table(store) == [(32, 32, 1, 512, 2), (16, 16, 1, 256, 1024)]
    swizzled = info_of(VALID.tma_swizzle_64b())
    assert swizzled.swizzle_bytes == 64 and swizzled.rank == 2 and swizzled.dims[0].box == 32


def test_bytes_per_transfer():
    info = info_of(VALID.tma_strided_tile_fttc())
    assert info.bytes_per_transfer == 16 * 2 * 4


def test_public_values_are_ints_or_sympy():
    """tp.tma_info speaks ints (concrete) and sympy (symbolic), never the index algebra; the
    Exprs are the `*_expr` fields, and the op, view and roles stay with the verifier."""
    info = info_of(VALID.tma_strided_tile())
    d = info.dims[1]
    assert d.box == 4 and d.tile == 2 and d.element_stride == 2 and d.size == 1024 and d.stride_bytes == 256
    values = [d.box, d.tile, d.element_stride, d.size, d.stride_bytes, d.stride_elements, info.bytes_per_transfer]
    assert all(type(v) is int for v in values), values
    assert d.box_expr.is_const and d.box_expr.value == 4  # the index algebra, for the verifier and codegen
    symbolic = info_of(VALID.tma_box_by_partitioning())
    N = tp.Fusion().symbol("N")
    inner, outer = symbolic.dims
    assert inner.box == 64 and type(inner.box) is int  # a concrete box of a symbolic tensor
    assert isinstance(inner.size, sympy.Expr) and inner.size == N
    assert isinstance(outer.stride_bytes, sympy.Expr) and outer.stride_bytes == 4 * N
    assert isinstance(symbolic.bytes_per_transfer, int)
    assert not any(hasattr(info, name) for name in ("op", "view", "inference"))


def test_problems_instead_of_exceptions():
    info = info_of(INVALID.tma_no_bulk())
    assert not info.ok and "no Bulk" in info.problems[0] and info.rank == 0


def test_tma_info_needs_a_tma_op():
    with tp.Fusion("plain") as fusion:
        t0 = tp.make_contig_concrete_tensor([8])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        fusion.add_output(t1)
    with pytest.raises(tp.ScheduleError, match="not read or written by a TMA op"):
        tp.tma_info(t1)
    with pytest.raises(tp.ScheduleError, match="expected a TensorView"):
        tp.tma_info("T1")


# -- rules -----------------------------------------------------------------------------

VALID_CASES = [n for n in dir(VALID) if n.startswith("tma_") and n != "tma_load"]
INVALID_CASES = [n for n in dir(INVALID) if n.startswith("tma_") and n != "tma_load"]


@pytest.mark.parametrize("name", VALID_CASES)
def test_valid_examples_are_accepted(name):
    report = tp.verify(getattr(VALID, name)(), "sm_90a")
    assert report.ok, [d.message for d in report.errors]
    warned = [d.code for d in report.warnings if d.code.startswith("TMA")]
    assert warned == (["TMA-FTTC"] if name == "tma_strided_tile_fttc" else [])


@pytest.mark.parametrize("name", INVALID_CASES)
def test_invalid_examples_fail_with_their_rule(name):
    func = getattr(INVALID, name)
    want = func.__tileproof_schedule__.expect
    report = tp.verify(func(), "sm_90a")
    assert report.codes == sorted(want.codes), [d.message for d in report.errors]
    for d in report.errors:
        assert d.hint and d.counterexample and d.tensor


def test_failure_names_dimension_ids_value_and_limit():
    report = tp.verify(INVALID.tma_box_too_big(), "sm_90a")
    (d,) = report.errors
    assert "TMA dimension 0" in d.message and "box 512" in d.message and "256" in d.message
    assert d.ids and d.counterexample["box"] == 512


def _symbolic_box_fusion():
    with tp.Fusion("box_n") as fusion:
        t0 = tp.make_tensor([64, "N"], dtype=tp.float16)
        fusion.add_input(t0)
        t1 = tp.set(t0, op=TMA)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    fusion.symbol("B")
    t1.set_memory_type(tp.MemoryType.Shared)
    t1.split(1, "B")
    t1.axis(0).parallelize(P.BIDy)
    t1.axis(1).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.Bulk)
    return fusion


@pytest.mark.parametrize("box, rows, expected", [
    (64, 128, []), (256, 1024, []), (512, 1024, ["TMA-BOX-SIZE"]), (12, 128, ["TMA-COORD-ALIGN", "TMA-INNER-BYTES"]),
    (64, 100, ["TMA-GLOBAL-STRIDE"]),
])
def test_symbolic_proof_agrees_with_bindings(box, rows, expected):
    fusion = _symbolic_box_fusion()
    symbolic = tp.verify(fusion, "sm_90a")
    assert set(symbolic.codes) >= {"TMA-BOX-SIZE", "TMA-INNER-BYTES", "TMA-GLOBAL-STRIDE"}
    bound = tp.verify(fusion, "sm_90a", bind={"B": box, "N": rows})
    assert [c for c in bound.codes if c.startswith("TMA")] == expected


def test_symbolic_proof_under_assumptions():
    fusion = _symbolic_box_fusion()
    fusion.assume("B % 8 == 0")
    fusion.assume("B <= 256")
    fusion.assume("N % 8 == 0")
    report = tp.verify(fusion, "sm_90a")
    assert not [c for c in report.codes if c.startswith("TMA")], [d.message for d in report.errors]


def _rotation_by_12_in_32(load: bool):
    """T0{N} -> T1 -> T2, the TMA (a load into T1 or a store from it) boxing 12 of each 32."""
    with tp.Fusion("view_n") as fusion:
        t0 = tp.make_tensor(["N"])
        fusion.add_input(t0)
        t1 = tp.set(t0, op=TMA) if load else tp.set(t0)
        t2 = tp.set(t1) if load else tp.set(t1, op=TMA)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2):  # each block stores the tile it loaded
        t.split(0, 32).split(1, 12)
        t.axis(0).parallelize(P.BIDx)
        t.axis(1).parallelize(P.BIDy)  # one 48-byte tile per block (serial ones would be misaligned)
    (t1 if load else t2).axis(2).parallelize(P.Bulk)
    return fusion


def test_view_split_symbolic_counterexample():
    """A store's box does not rotate through the split by 32, which it does not divide: the split
    is part of the view and must divide N. A load's box rotates (its overhang lands in holes):
    accepted for every N."""
    fusion = _rotation_by_12_in_32(load=False)
    report = tp.verify(fusion, "sm_90a")
    (d,) = [d for d in report.errors if d.code == "TMA-VIEW"]
    assert d.counterexample["N"] % 32 != 0
    assert "TMA-VIEW" not in tp.verify(fusion, "sm_90a", bind={"N": 1024}).codes
    assert "TMA-VIEW" in tp.verify(fusion, "sm_90a", bind={"N": 1000}).codes
    load = _rotation_by_12_in_32(load=True)
    report = tp.verify(load, "sm_90a")
    assert report.ok, [d.message for d in report.errors]


def test_fttc_is_a_warning_exactly_when_the_condition_holds():
    for stride, warns in ((3, True), (2, False), (4, False)):
        fusion, t1, t2 = VALID.tma_load(f"fttc{stride}", [1024, 64])
        t2.split(1, 32).split(0, 4)  # [I0o, I0i, I1o, I1i]: the blocks of T1
        t2.axis(0).parallelize(P.BIDx)
        t2.axis(2).parallelize(P.BIDy)
        t1.split(1, 32).split(0, 4).split(1, stride).reorder({2: 1})  # stride ID outside the tile
        t1.set_allocation_domain(t1.get_loop_domain(), True)  # allocated so (unset: the logical order)
        t1.axis(0).parallelize(P.BIDx)
        t1.axis(2).parallelize(P.Bulk)
        t1.axis(3).parallelize(P.BIDy)
        t1.axis(4).parallelize(P.Bulk)
        report = tp.verify(fusion, "sm_90a")
        assert report.ok
        assert ("TMA-FTTC" in [d.code for d in report.warnings]) == warns
    # a box as large as the tensor has no in-bounds holes: no warning
    fusion, t1, _ = VALID.tma_load("fttc_whole", [4, 64])
    t1.split(0, 3)
    t1.axis(0).parallelize(P.Bulk)
    t1.axis(2).parallelize(P.Bulk)
    assert "TMA-FTTC" not in [d.code for d in tp.verify(fusion, "sm_90a").warnings]
