"""The ldmatrix / stmatrix rules (verifier/rules/ldsm.py): each rule failing and passing, and the
counterexamples checked against the index arithmetic done by hand."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import tileproof as tp
from tileproof.model.expr import add, floordiv, mod, mul
from tileproof.hw import ldmatrix as ldsm_layout
from tileproof.hw.ldmatrix import B16, B32, fragment, holder, layout, supplier, supplier_lane
from tileproof.hw.mma import m16n8k8_tf32_a_position, m16n8k8_tf32_b_position
from tileproof.recipes import Epilogue, HopperGemmParams, HopperTile, TmaPipeline, hopper_gemm
from tileproof.verifier import solver
from tileproof.verifier.analysis import ldsm as ldsm_analysis

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
P = tp.ParallelType
LS = tp.LoadStoreOpType
CODES = ["LDSM-THREAD-ROWS", "LDSM-ALIGNMENT", "LDSM-REGISTER-LAYOUT"]


def _load(rel: str):
    path = EXAMPLES / rel
    spec = importlib.util.spec_from_file_location(f"_ldsm_{path.parent.name}_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


VALID = _load("valid/ldst_matrix.py")
INVALID = _load("invalid/ldst_matrix.py")


def verify(fusion, **kw):
    return tp.verify(fusion, "sm_90a", rules=CODES, **kw)


def only(report, code):
    found = [d for d in report.diagnostics if d.code == code]
    assert len(found) == 1, [f"{d.code}: {d.message}" for d in report.diagnostics]
    return found[0]


def x1(shape=(8, 8), dtype=tp.float16, lanes=("row", "pair")):
    """T0 -> T1 (smem) -ldmatrix-> T2 -> T3 on an [R, C] tile; T2/T3 = [(R * C/2) TIDx, 2 V]."""
    fusion, t1, t2, t3 = VALID.smem_to_registers(list(shape), dtype=dtype)
    for t in (t2, t3):
        t.split(1, 2)
        t.merge(0, 1) if lanes == ("row", "pair") else t.merge(1, 0)
        t.axis(0).parallelize(P.TIDx)
    t2.axis(1).parallelize(P.Vectorize)
    return fusion, t1, t2, t3


# -- the hardware map (hw/ldmatrix.py) --------------------------------------------------------------


def test_hardware_map_spot_values_and_inverses():
    """Figure 104 at a few points, and the laws the proofs rely on: holder inverts fragment on all 32 lanes x 8
    elements, supplier_lane inverts supplier, and the row lane T supplies starts at lane 4 (T % 8), element 2 (T / 8)."""
    assert fragment(5, 3) == (1, 1, 3) and fragment(31, 6) == (3, 7, 6)  # (matrix, row, column)
    assert supplier(13) == (5, 1)  # (row, matrix)
    for lane in range(32):
        for element in range(8):
            assert holder(*fragment(lane, element)) == (lane, element)
        row, matrix = supplier(lane)
        assert supplier_lane(row, matrix) == lane and holder(matrix, row) == (4 * (lane % 8), 2 * (lane // 8))


def ptx_register(lane, register):
    """PTX ISA 9.7.14.5.15 / Figure 104, in bytes: receiving lane t's register i is bytes
    4 (t % 4) .. 4 (t % 4) + 3 of row t / 4 of matrix i (the b16 columns 2 (t % 4), 2 (t % 4) + 1)."""
    return register, lane // 4, 4 * (lane % 4)


@pytest.mark.parametrize("L", [B16, B32], ids=["b16", "b32"])
def test_hardware_map_brute_force_against_ptx(L):
    """Every lane and element of .x4, for 16-bit and 32-bit elements: the element's bytes are the part
    of the register PTX hands the lane (element v: register v / k, bytes b (v % k) ..), holder inverts
    fragment, and the row lane T supplies starts at lane 4 (T % 8), element k (T / 8)."""
    b, k = L.element_bytes, L.elements_per_register
    assert (b, k, L.row_elements) == ((2, 2, 8) if b == 2 else (4, 1, 4))
    assert L.matrices == {k: 1, 2 * k: 2, 4 * k: 4} and layout(b) is L
    for lane in range(32):
        for element in range(4 * k):
            matrix, row, column = L.fragment(lane, element)
            register, ptx_row, first_byte = ptx_register(lane, element // k)
            assert (matrix, row) == (register, ptx_row), (lane, element)
            assert column * b == first_byte + b * (element % k), (lane, element)  # its bytes within the row
            assert 0 <= column < L.row_elements and L.holder(matrix, row, column) == (lane, element)
        row, matrix = supplier(lane)
        assert L.holder(matrix, row) == (4 * (lane % 8), k * (lane // 8))


def test_32bit_map_is_the_tf32_mma_fragment():
    """32-bit elements: lane t element v is (row t / 4, column t % 4) of matrix v, which is mma.sync m16n8k8
    tf32's A (the .x4 in the order rows 0-7 | 8-15 of columns 0-3, then of 4-7) and B (stored [n, k]:
    the .x2 of k 0-3, 4-7) fragment (hw/mma.py)."""
    assert [B32.fragment(5, v) for v in range(4)] == [(v, 1, 1) for v in range(4)]
    for lane in range(32):
        for v in range(4):
            m, r, c = B32.fragment(lane, v)
            assert (r + 8 * (m % 2), c + 4 * (m // 2)) == m16n8k8_tf32_a_position(lane, v)
        for v in range(2):
            m, n, c = B32.fragment(lane, v)
            assert (4 * m + c, n) == m16n8k8_tf32_b_position(lane, v)


def test_the_16bit_names_are_the_16bit_map():
    assert ldsm_layout.ELEMENT_BYTES == 2 and ldsm_layout.MATRICES == B16.matrices == {2: 1, 4: 2, 8: 4}
    assert fragment == B16.fragment and holder == B16.holder
    with pytest.raises(ValueError):
        layout(8)


# -- passing ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["ldmatrix_x1", "ldmatrix_x2", "ldmatrix_x4", "ldmatrix_x4_two_warps_swizzled",
                                  "stmatrix_x4", "ldmatrix_x1_float32", "ldmatrix_x2_float32", "ldmatrix_x4_float32",
                                  "ldmatrix_x4_float32_warps_swizzled"])
def test_small_valid_cases_pass(name):
    report = verify(getattr(VALID, name)())
    assert report.ok and report.rules_run == CODES, [d.message for d in report.diagnostics]


@pytest.mark.parametrize("size", ["symbolic", "any", "8192x8192"])
def test_seed_ld_st_matrix_set_passes(size):
    report = verify(VALID.ldst_matrix_set(size))
    assert report.ok, [d.message for d in report.diagnostics]
    assert report.queries == 2  # one per instruction: whole warps, rows, alignment and fragment share it


# -- LDSM-THREAD-ROWS ----------------------------------------------------------------------------------------


def test_rows_counterexample_is_the_interleaved_byte():
    report = verify(INVALID.ldmatrix_rows_interleaved())
    assert report.codes == ["LDSM-THREAD-ROWS"]
    ce = only(report, "LDSM-THREAD-ROWS").counterexample
    lane, v = ce["lane"], ce["element"]
    r, c = lane // 4, 2 * (lane % 4) + v % 2
    assert (ce["row"], ce["column"], ce["matrix"]) == (r, c, 0)
    assert ce["row address lane"] == r and ce["row address"] == 16 * r
    assert ce["expected byte offset"] == 16 * r + 2 * c
    # the shared tile is [row, column % 2, column / 2]
    assert ce["actual byte offset"] == 2 * (8 * r + 4 * (c % 2) + c // 2) != ce["expected byte offset"]


def test_rows_for_stmatrix():
    """stmatrix with the lane roles swapped on a row-major tile: the bytes land in the wrong place."""
    with tp.Fusion("st") as fusion:
        t0 = tp.make_contig_concrete_tensor([8, 8], dtype=tp.float16)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1, op=LS.StMatrix)
        t3 = tp.set(t2)
        fusion.add_output(t3)
    t2.set_memory_type(tp.MemoryType.Shared)
    t2.set_allocation_domain(t2.get_logical_domain(), True)
    for t in (t1, t2):
        t.split(1, 2).merge(1, 0)
        t.axis(0).parallelize(P.TIDx)
    t2.axis(1).parallelize(P.Vectorize)
    report = verify(fusion)
    d = only(report, "LDSM-THREAD-ROWS")
    assert "stmatrix from T1 into T2" in d.message and "writes to" in d.message
    ce = d.counterexample
    lane, v = ce["lane"], ce["element"]
    # lane t holds row t % 8, column 2 (t / 8) + v; row-major 8 x 8 fp16
    assert ce["actual byte offset"] == 2 * (8 * (lane % 8) + 2 * (lane // 8) + v)


def test_partial_warp():
    report = verify(INVALID.ldmatrix_partial_warp())
    d = only(report, "LDSM-THREAD-ROWS")
    assert report.codes == ["LDSM-THREAD-ROWS"]  # the other rules need a whole-warp instruction
    assert "not executed by whole warps" in d.message and "the block has 16 threads" in d.message
    assert d.counterexample["missing thread"] >= 16 and d.counterexample["lane"] < 16


def test_24_lanes_are_a_partial_warp():
    fusion, *_ = x1(shape=(8, 6))  # 8 rows x 3 column pairs: TIDx{24}
    d = only(verify(fusion), "LDSM-THREAD-ROWS")
    assert "not executed by whole warps" in d.message and d.counterexample["missing thread"] >= 24


def test_symbolic_rows_give_a_size():
    with tp.Fusion("rows") as fusion:
        t0 = tp.make_tensor(["M", 8], contiguity=True, dtype=tp.float16)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1, op=LS.LdMatrix)
        t3 = tp.set(t2)
        fusion.add_output(t3)
    t1.set_memory_type(tp.MemoryType.Shared)
    VALID.fragment_x1(t2, t3)  # TIDx{4M}: M / 8 warps, one matrix each
    t2.axis(1).parallelize(P.Vectorize)
    d = only(verify(fusion), "LDSM-THREAD-ROWS")
    assert d.counterexample["M"] % 8 != 0 and "not executed by whole warps" in d.message
    fusion.assume("M % 8 == 0")
    assert verify(fusion).ok


def test_a_hole_inside_a_threads_own_vector_is_named_as_such():
    """An [8, 7] fp16 tile copied into shared memory by plain loads (predicated at its holes), then
    ldmatrix.x1: lane 3 holds columns 6 (in bounds) and 7 (past the edge, a hole) of its row, so
    the instruction runs for its element 0 and skips its element 1."""
    fusion, _, t2, t3 = INVALID.smem_to_registers([8, 7])
    INVALID.fragment_x1(t2, t3)
    t2.axis(1).parallelize(P.Vectorize)
    d = next(d for d in verify(fusion).diagnostics if d.code == "LDSM-THREAD-ROWS")
    assert "executes it for element 0 but" in d.message and "skips element 1 of the same instruction (a hole)" in d.message
    assert "does not exist" not in d.message


def test_ld_st_matrix_set_runs_at_its_holes_on_the_tmas_zeros():
    """The seed's LdStMatrixSet at 200 x 200: lane 0's stmatrix.x4 holds columns 192..199 and 200..
    (past the edge). The TMA load writes zeros there, the ldmatrix copies them (filled) and the
    stmatrix, read only by the TMA store, which clips them, runs there too (clipped): whole warps
    issue both, with no hole predicate (execution/clipped_holes.py)."""
    from tileproof.execution.clipped_holes import clipped, filled

    fusion = VALID.ld_st_matrix_set([200, 200])
    assert verify(fusion).ok
    assert filled(fusion) == {"T2", "T3"} and clipped(fusion) == {"T4"}


def test_an_epilogue_that_only_a_tma_store_reads_runs_at_its_holes():
    """The Hopper GEMM recipe's stmatrix + TMA store epilogue at M = N = 200 (the 16 x 16 stmatrix
    tiles straddle both edges): its cast and stmatrix run at their holes too, which the TMA store
    clips, so whole warps issue every stmatrix; the same epilogue storing from registers keeps its
    predicates."""
    from tileproof.execution.clipped_holes import clipped

    spec = tp.WarpSpecialized(P.TIDy, num_registers=(40, 232))
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=3, prefetch=1, warp_specialized=spec),
                              epilogue=Epilogue(dtype=tp.bfloat16, stmatrix=True))
    fusion = hopper_gemm(200, 200, 128, params)
    assert verify(fusion).ok
    assert clipped(fusion) == {"T6", "T7"}  # the cast into registers and the stmatrix into the TMA store's box
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=3, prefetch=1, warp_specialized=spec),
                              epilogue=Epilogue(dtype=tp.bfloat16))
    registers = hopper_gemm(200, 200, 128, params)
    assert verify(registers).ok and not clipped(registers)  # its cast stores to global memory


@pytest.mark.parametrize("name,fragment", [("ldmatrix_float64", "moves float64 elements (8 bytes)"),
                                           ("stmatrix_float32", "stmatrix is modelled for 16-bit elements"),
                                           ("ldmatrix_six_elements", "gives each thread 6 elements")])
def test_instruction_shape(name, fragment):
    report = verify(getattr(INVALID, name)())
    assert report.codes == ["LDSM-THREAD-ROWS"]
    d = only(report, "LDSM-THREAD-ROWS")
    assert fragment in d.message and d.counterexample and d.hint


def test_float32_x1_without_a_vectorize_axis():
    """32-bit .x1: one element per lane, which the LDSM rules accept without a Vectorize axis."""
    fusion, t1, t2, t3 = VALID.smem_to_registers([8, 4], dtype=tp.float32)
    for t in (t2, t3):
        t.merge(0, 1)
        t.axis(0).parallelize(P.TIDx)
    assert verify(fusion).ok


def test_float32_elements_per_thread():
    fusion, t1, t2, t3 = VALID.smem_to_registers([16, 24], dtype=tp.float32)
    for t in (t2, t3):
        t.split(1, 3).merge(0, 1)  # [(16 * 8)(128), 3]
        t.axis(0).parallelize(P.TIDx)
    t2.axis(1).parallelize(P.Vectorize)
    d = only(verify(fusion), "LDSM-THREAD-ROWS")
    assert "gives each thread 3 elements; with 32-bit elements .x1, .x2 and .x4 give 1, 2 or 4" in d.message


def test_one_element_per_thread():
    fusion, t1, t2, t3 = VALID.smem_to_registers([8, 4])
    t2.axis(0).parallelize(P.TIDx)  # [8, 4]: no Vectorize
    d = only(verify(fusion), "LDSM-THREAD-ROWS")
    assert "gives each thread 1 elements" in d.message and d.counterexample["elements per thread"] == 1


def test_symbolic_elements_per_thread():
    with tp.Fusion("vec") as fusion:
        t0 = tp.make_tensor([32, "N"], contiguity=True, dtype=tp.float16)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1, op=LS.LdMatrix)
        t3 = tp.set(t2)
        fusion.add_output(t3)
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t2, t3):
        t.axis(0).parallelize(P.TIDx)
    t2.axis(1).parallelize(P.Vectorize)
    d = only(verify(fusion), "LDSM-THREAD-ROWS")
    n = d.counterexample["elements per thread"]
    assert n not in (2, 4, 8) and d.counterexample["N"] == n and f"gives each thread {n} elements when N = {n}" in d.message
    fusion.assume("N == 2")  # fixed by the assumptions: an .x1 of a contiguous [32, 2] tile, whose
    report = verify(fusion)  # quads read 16 contiguous bytes, but lane t holds row t, not row t / 4
    assert report.codes == ["LDSM-REGISTER-LAYOUT"]


def test_memory_types():
    with tp.Fusion("gmem") as fusion:
        t0 = tp.make_contig_concrete_tensor([8, 8], dtype=tp.float16)
        fusion.add_input(t0)
        t1 = tp.set(t0, op=LS.LdMatrix)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    VALID.fragment_x1(t1, t2)
    t1.axis(1).parallelize(P.Vectorize)
    d = only(verify(fusion), "LDSM-THREAD-ROWS")
    assert "T0 is in Global memory" in d.message


# -- LDSM-ALIGNMENT -------------------------------------------------------------------------------------------


def test_alignment_counterexample():
    report = verify(INVALID.ldmatrix_misaligned_rows())
    assert report.codes == ["LDSM-ALIGNMENT"]
    ce = only(report, "LDSM-ALIGNMENT").counterexample
    # rows padded to 9 fp16: row r of the (only) matrix starts at byte 18 r
    assert ce["matrix"] == 0 and ce["lane"] == ce["row"]
    assert ce["byte offset"] == 18 * ce["row"] and ce["address"] % 16 == ce["address % 16"] != 0


def test_alignment_counterexample_stmatrix_x4():
    report = verify(INVALID.stmatrix_misaligned_rows())
    assert report.codes == ["LDSM-ALIGNMENT"]
    d = only(report, "LDSM-ALIGNMENT")
    ce = d.counterexample
    assert "stmatrix from T1 into T2" in d.message
    # .x4 in the seed's order: matrix m covers rows 8 (m % 2) .., columns 8 (m / 2) ..; rows of 18 fp16
    m, r = ce["matrix"], ce["row"]
    assert ce["lane"] == 8 * m + r
    assert ce["byte offset"] == 2 * (18 * (8 * (m % 2) + r) + 8 * (m // 2))


def test_alignment_is_absolute():
    """The address includes the buffer's place in shared memory (execution/smem_plan.py)."""
    with tp.Fusion("two") as fusion:
        a = tp.make_contig_concrete_tensor([20], dtype=tp.float16)
        fusion.add_input(a)
        b = tp.set(a)
        c = tp.set(b)
        fusion.add_output(c)
        t0 = tp.make_contig_concrete_tensor([8, 8], dtype=tp.float16)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1, op=LS.LdMatrix)
        t3 = tp.set(t2)
        fusion.add_output(t3)
    b.set_memory_type(tp.MemoryType.Shared)  # 40 bytes first: T4 starts at byte 48
    t1.set_memory_type(tp.MemoryType.Shared)
    t1.split(1, 3)
    VALID.fragment_x1(t2, t3)
    t2.axis(1).parallelize(P.Vectorize)
    ce = only(verify(fusion), "LDSM-ALIGNMENT").counterexample
    assert ce["buffer offset"] == 48 and ce["address"] == 48 + ce["byte offset"]


# -- LDSM-REGISTER-LAYOUT --------------------------------------------------------------------------------------


def test_register_layout_counterexample():
    report = verify(INVALID.ldmatrix_columns_swapped())
    assert report.codes == ["LDSM-REGISTER-LAYOUT"]
    ce = only(report, "LDSM-REGISTER-LAYOUT").counterexample
    lane, v = ce["lane"], ce["element"]
    # lane t holds row t % 8, column 2 (t / 8) + v; the fragment wants row t / 4, column 2 (t % 4) + v
    assert (ce["row"], ce["column"]) == (lane % 8, 2 * (lane // 8) + v)
    assert (ce["expected row"], ce["expected column"]) == (lane // 4, 2 * (lane % 4) + v)


def test_float32_register_layout_counterexample():
    """32-bit .x4 with the lane roles swapped: lane t holds row t % 8, column t / 8 of each 8x4 block; the
    fragment wants row t / 4, column t % 4 (CuTe LDSM_U32x4_N, the tf32 A operand)."""
    report = verify(INVALID.ldmatrix_float32_columns_swapped())
    assert report.codes == ["LDSM-REGISTER-LAYOUT"]
    d = only(report, "LDSM-REGISTER-LAYOUT")
    ce = d.counterexample
    lane, v = ce["lane"], ce["element"]
    origin = (8 * (v % 2), 4 * (v // 2))  # matrix v: the block the Vectorize order (column / 4, row / 8) gives
    assert (ce["row"], ce["column"]) == (origin[0] + lane % 8, origin[1] + lane // 8)
    assert (ce["expected row"], ce["expected column"]) == (origin[0] + lane // 4, origin[1] + lane % 4)
    assert "32-bit elements: lane t element v is (row t/4, column t%4) of matrix v" in d.notes[0]


def test_float32_with_the_16bit_fragment_breaks_every_rule():
    """Two adjacent float32 columns per lane (the 16-bit fragment) are two 32-bit matrices (.x2)."""
    report = verify(INVALID.ldmatrix_float32_pairs())
    assert report.codes == sorted(CODES)
    rows = only(report, "LDSM-THREAD-ROWS").counterexample
    lane, v = rows["lane"], rows["element"]
    # row-major 8 x 8 float32: the schedule keeps (t / 4, 2 (t % 4) + v); the hardware reads column t % 4 of
    # matrix v, whose row starts at lane 4 (t / 4)'s element v: column v
    assert rows["actual byte offset"] == 4 * (8 * (lane // 4) + 2 * (lane % 4) + v)
    assert rows["expected byte offset"] == 4 * (8 * (lane // 4) + v + lane % 4)
    align = only(report, "LDSM-ALIGNMENT").counterexample
    assert align["matrix"] == 1 and align["byte offset"] == 32 * align["row"] + 4


def test_rows_permuted_move_correct_bytes_but_not_the_fragment():
    report = verify(INVALID.ldmatrix_rows_permuted())
    assert report.codes == ["LDSM-REGISTER-LAYOUT"]
    ce = only(report, "LDSM-REGISTER-LAYOUT").counterexample
    q = ce["lane"] // 4
    assert ce["row"] == 2 * (q % 4) + q // 4 and ce["expected row"] == q


def test_scrambled_lanes_break_every_rule():
    assert verify(INVALID.ldmatrix_rows_scrambled()).codes == sorted(CODES)


def test_overlapping_matrices(monkeypatch):
    """Every matrix of an .x2 placed on the same 8x8 block. The index algebra is bijective, so no
    schedule reaches this; the register expressions are replaced to exercise the check."""
    def same_block(a):
        lane = mod(a.m.tid, 32)
        return floordiv(lane, 4), add(mul(mod(lane, 4), 2), mod(a.m.reg, 2))

    monkeypatch.setattr(ldsm_analysis, "_row_col", same_block)
    d = only(verify(VALID.ldmatrix_x2()), "LDSM-REGISTER-LAYOUT")
    assert "overlapping matrices" in d.message
    ce = d.counterexample
    assert {ce["matrix a"], ce["matrix b"]} == {0, 1} and (ce["row a"], ce["column a"]) == (ce["row b"], ce["column b"])


# -- solver discipline and neighbours ---------------------------------------------------------------------------


def test_unknown_is_a_rejection(monkeypatch):
    monkeypatch.setattr(solver.Query, "prove", lambda self, claim, **kw: solver.Outcome(solver.Verdict.UNKNOWN, reason="timeout"))
    report = verify(VALID.ldmatrix_x1())
    assert report.codes == ["LDSM-THREAD-ROWS"]
    assert "could not prove" in report.errors[0].message


def test_bank_conflict_rule_skips_ldmatrix_and_stmatrix():
    report = tp.verify(VALID.ldst_matrix_set("8192x8192"), "sm_90a", rules=["SMEM-BANK-CONFLICT"])
    assert not report.diagnostics
