"""SPLIT-DIVISIBILITY on a vector's path: an indivisible split there is allowed where its holes
take vectors whole (two elements of one vector are both holes or neither), since the code
generator predicates a vector as one (codegen/lower/statements.py tests its last element)."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.recipes import GridOrder, HopperGemmParams, HopperTile, TmaPipeline, hopper_gemm


P = tp.ParallelType


def _rows_under_vectors(vector):
    """[3, 8] copied as rows split by 2 (a hole row: 3 % 2) merged with the columns, the merged
    index split by `vector` and vectorized: the row hole lies on the vector's path."""
    with tp.Fusion("rows") as fusion:
        t0 = tp.make_contig_concrete_tensor([3, 8]); fusion.add_input(t0)
        t1 = tp.set(t0); fusion.add_output(t1)
    t1.split(0, 2)  # [2, 2 (rows, one past 3), 8]
    t1.merge(1)  # [2, 16]
    t1.split(1, vector)  # [2, 16 / vector, vector]
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.Vectorize)
    return fusion


def _codes(fusion):
    return {d.code for d in tp.verify(fusion).errors}


def test_a_hole_of_whole_rows_under_vectors_of_columns_is_accepted():
    assert "SPLIT-DIVISIBILITY" not in _codes(_rows_under_vectors(2))
    assert "SPLIT-DIVISIBILITY" not in _codes(_rows_under_vectors(4))


def test_a_hole_inside_a_vector_is_still_rejected():
    """Vectors of 16 span both rows of a block, the second a hole for block 1: part of the
    vector is a hole."""
    report = tp.verify(_rows_under_vectors(16))
    found = [d for d in report.errors if d.code == "SPLIT-DIVISIBILITY"]
    assert found and "split of" in found[0].message and found[0].counterexample["remainder"] == 1


@pytest.mark.parametrize("n, vectorized", [(200, True), (8000, True), (201, False)])
def test_the_hopper_store_is_vectorized_on_partial_tiles_of_an_even_n(n, vectorized):
    """D's column pairs: an even N keeps each pair wholly inside or outside N, and rows past M
    are whole pairs; the schedule verifies with 8-byte stores."""
    params = HopperGemmParams(tile=HopperTile(m=128, n=256), pipeline=TmaPipeline(stages=4, prefetch=2),
                              grid=GridOrder(group=8))
    fusion = hopper_gemm(200, n, 128, params)
    assert any(i.parallel_type is P.Vectorize for i in fusion.outputs[0].loop) == vectorized
    assert tp.verify(fusion).ok
