"""ldmatrix / stmatrix lowering without a GPU: the row address each lane supplies, against the
hardware's fragment order written out here (matrix T/8, row T%8), and the instruction forms."""

from __future__ import annotations

from pathlib import Path

import pytest

import tileproof as tp
from tileproof.codegen.ir import Loop, MatrixCopy
from tileproof.codegen.lower import lower
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
    return matrix_copies(lower(fusion.snapshot(), get_target("sm_90a")).kernel.body)


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


@pytest.mark.parametrize("size", ["symbolic", "8192x8192"])
def test_ldst_matrix_set_lowers_unpredicated_x4_pairs(size):
    kernel = tp.compile(CASES[f"ldst_matrix_set[size={size}]"].build(), target="sm_90a")
    src = kernel.cuda_source
    assert src.count("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {") == 1
    assert src.count("stmatrix.sync.aligned.m8n8.x4.shared.b16 [") == 1
    # the symbolic case's holes are ruled out by its assumptions (M % 128, K % 256), proved by z3
    body = src[src.index("LdMatrix"):src.index("StMatrix")]
    assert "if (" not in body
