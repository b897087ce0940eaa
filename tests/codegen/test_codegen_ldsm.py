"""ldmatrix / stmatrix lowering without a GPU: the row address each lane supplies, against the
hardware's fragment order written out here (matrix T/8, row T%8), and the instruction forms."""

from __future__ import annotations

from pathlib import Path

import pytest

import tileproof as tp
from tileproof.codegen.ir import Loop, MatrixCopy
from tileproof.codegen.lower import lower
from support.lowering import lowered
from tileproof.model.expr import evaluate
from tileproof.model.targets import get_target
from tileproof.schedule_files import discover

ROOT = Path(__file__).resolve().parents[2]
CASES = {c.name: c for c in discover([str(ROOT / "examples" / "valid" / "ldst_matrix.py")])}


pytestmark = pytest.mark.usefixtures("private_cache")


def matrix_copies(nodes):
    out = []
    for n in nodes:
        if isinstance(n, Loop):
            out += matrix_copies(n.body)
        elif isinstance(n, MatrixCopy):
            out.append(n)
    return out


def copies_of(name):
    fusion = CASES[name].build()
    return matrix_copies(lowered(fusion, "sm_90a").kernel.body)


def lane_env(lane):
    return {"threadIdx.x": lane, "threadIdx.y": 0, "threadIdx.z": 0}


def row_major_16x16_fp16(lane):
    """Matrices in the seed's order 0 TL, 1 BL, 2 TR, 3 BR of a row-major 16 x 16 fp16 tile."""
    m, r = lane // 8, lane % 8
    return (r + 8 * (m % 2)) * 32 + (m // 2) * 16


@pytest.mark.parametrize("name,num,rows", [("ldmatrix_x1", 1, lambda t: t * 16),
                                           ("ldmatrix_x2", 2, lambda t: t * 16),
                                           ("ldmatrix_x4", 4, row_major_16x16_fp16)])
def test_each_lane_supplies_its_matrix_row(name, num, rows):
    (copy,) = copies_of(name)
    assert copy.instruction == "ldmatrix" and copy.num == num
    for lane in range(8 * num):  # the lanes whose addresses the instruction reads
        assert evaluate(copy.address, lane_env(lane)) == rows(lane), lane


def test_stmatrix_x4_supplies_the_rows_it_stores():
    (copy,) = copies_of("stmatrix_x4")
    assert copy.instruction == "stmatrix" and copy.num == 4
    for lane in range(32):
        assert evaluate(copy.address, lane_env(lane)) == row_major_16x16_fp16(lane), lane


@pytest.mark.parametrize("size", ["symbolic", "any", "8192x8192"])
def test_ldst_matrix_set_lowers_unpredicated_x4_pairs(size):
    kernel = tp.compile(CASES[f"ldst_matrix_set[size={size}]"].build(), target="sm_90a")
    src = kernel.cuda_source
    assert src.count("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {") == 1
    assert src.count("stmatrix.sync.aligned.m8n8.x4.shared.b16 [") == 1
    # the symbolic case's holes are ruled out by its assumptions (M % 128, K % 256), proved by z3; the
    # "any" case runs at them, on the TMA load's zeros (execution/clipped_holes.py)
    body = src[src.index("LdMatrix"):src.index("StMatrix")]
    assert "if (" not in body


# -- 32-bit elements (ldmatrix of float32: CuTe LDSM_U32x{1,2,4}_N) ----------------------------------


def row_major_16x8_fp32(lane):
    """.x4 of a row-major 16 x 8 float32 tile, matrices 0 rows 0-7 | 1 rows 8-15 of columns 0-3, then
    2 | 3 of columns 4-7 (the tf32 A operand): row r of matrix m at byte 32 (r + 8 (m % 2)) + 16 (m / 2)."""
    m, r = lane // 8, lane % 8
    return (r + 8 * (m % 2)) * 32 + (m // 2) * 16


@pytest.mark.parametrize("name,num,rows", [("ldmatrix_x1_float32", 1, lambda t: t * 16),
                                           ("ldmatrix_x2_float32", 2, lambda t: (t % 8) * 32 + (t // 8) * 16),
                                           ("ldmatrix_x4_float32", 4, row_major_16x8_fp32)])
def test_each_lane_supplies_its_float32_matrix_row(name, num, rows):
    (copy,) = copies_of(name)
    assert copy.instruction == "ldmatrix" and copy.num == num and copy.regs.dtype.bytes == 4
    for lane in range(8 * num):
        assert evaluate(copy.address, lane_env(lane)) == rows(lane), lane


def test_float32_swizzled_rows_stay_16_byte_chunks():
    """Four warps, chunks XOR-swizzled by row % 4: every supplied row address is 16-byte aligned and
    holds the row's column 0 at its swizzled place."""
    (copy,) = copies_of("ldmatrix_x4_float32_warps_swizzled")
    assert copy.num == 4
    seen = set()
    for thread in range(128):
        warp, lane = thread // 32, thread % 32
        m, r = lane // 8, lane % 8
        row = 16 * (warp // 2) + 8 * (m % 2) + r
        chunk = 2 * (warp % 2) + m // 2
        address = evaluate(copy.address, lane_env(thread))
        assert address == 64 * row + 16 * (chunk ^ (row % 4)), thread
        seen.add(address)
    assert len(seen) == 128


@pytest.mark.parametrize("name,num", [("ldmatrix_x1_float32", 1), ("ldmatrix_x2_float32", 2),
                                      ("ldmatrix_x4_float32", 4), ("ldmatrix_x4_float32_warps_swizzled", 4)])
def test_float32_ldmatrix_compiles_with_nvrtc(name, num):
    kernel = tp.compile(CASES[name].build(), target="sm_90a")
    regs = ", ".join(f"%{k}" for k in range(num))
    assert kernel.cuda_source.count(f"ldmatrix.sync.aligned.m8n8.x{num}.shared.b16 {{{regs}}}, [%{num}];") == 1
    assert "reinterpret_cast<unsigned*>(&T2[0U])" in kernel.cuda_source and "float T2[" in kernel.cuda_source
    assert kernel.cubin[:4] == b"\x7fELF"


def test_float32_stmatrix_is_refused_by_the_lowering():
    """stmatrix stays 16-bit: a float32 stmatrix is refused with a clear reason (LDSM-THREAD-ROWS rejects it
    first; the lowering says so too if asked directly)."""
    import importlib.util

    from tileproof.codegen.errors import UnsupportedSchedule

    path = ROOT / "examples" / "invalid" / "ldst_matrix.py"
    spec = importlib.util.spec_from_file_location("_ldst_matrix_invalid", path)
    invalid = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(invalid)
    fusion = invalid.stmatrix_float32()
    assert tp.verify(fusion, "sm_90a").codes.count("LDSM-THREAD-ROWS") == 1
    with pytest.raises(UnsupportedSchedule, match="stmatrix for 16-bit elements only"):
        lower(fusion.snapshot(), get_target("sm_90a"))
