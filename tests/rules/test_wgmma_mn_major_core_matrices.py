"""WGMMA-SMEM-LAYOUT on an MN-major operand without a swizzle (nvFuser's HopperSS TT None_None: B
[K, N] row-major, N-major, in 8 x 16-byte core matrices): the descriptor (CUTLASS's INTERLEAVE
layout, read with the transpose bit) puts 16-byte chunks of N SBO apart and groups of 8 K rows LBO
apart, the reverse of a swizzled MN-major operand. The layout derived from the schedule is proved
element by element; the descriptor with the two offsets the swizzled way round is refuted, with the
elements whose distance disagrees with its LBO."""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
from pathlib import Path

import pytest

import tileproof as tp
from tileproof.execution.indexing import block_dims
from tileproof.execution.wgmma_operands import wgmma_operand
from tileproof.model.expr import evaluate, var
from tileproof.model.options import MmaInputSmemSwizzle
from tileproof.verifier.analysis import smem_operands  # WGMMA-SMEM-LAYOUT's proof (shared with tcgen05.mma)

NVFUSER_MMA = Path(__file__).resolve().parents[1] / "nvfuser" / "test_nvfuser_mma.py"


def _ss_tile(tiles):
    spec = importlib.util.spec_from_file_location("translated_mma", NVFUSER_MMA)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    none = MmaInputSmemSwizzle.NoSwizzle
    return module.ss_tile(tp.MmaMacro.Hopper_64_8_16, tp.bfloat16, "TT", none, none, tiles=tiles)


def _b(fusion):
    d = next(t for t in fusion.tensors if t.definition is not None and getattr(t.definition, "macro", None))
    return wgmma_operand(d, block_dims(fusion), "B")


@pytest.mark.parametrize("tiles, lbo", [(1, 128), (2, 256)])
def test_an_n_major_unswizzled_b_is_read_through_core_matrices(tiles, lbo):
    fusion = _ss_tile(tiles)
    assert tp.verify(fusion, "sm_90a").ok
    b = _b(fusion)
    assert (b.major, b.swizzle, b.lbo) == ("MN", MmaInputSmemSwizzle.NoSwizzle, lbo)
    env = {name: 0 for name in b.ex.ranges}
    for n, k in itertools.product(range(b.rows), range(b.depth)):
        env["mn"], env["k"] = n, k
        assert evaluate(b.hardware(var("mn"), var("k")), env) == evaluate(b.byte_offset(var("mn"), var("k")), env)
    assert "tp_wgmma_desc16(tp_smem16(T3)" in tp.compile(fusion, "sm_90a").cuda_source


def test_the_offsets_the_swizzled_way_round_are_refuted(monkeypatch):
    def swapped(tv, launch, role, names=None):
        op = wgmma_operand(tv, launch, role, names)
        return dataclasses.replace(op, lbo=op.sbo, sbo=op.lbo) if op.major == "MN" else op

    monkeypatch.setattr(smem_operands, "wgmma_operand", swapped)
    report = tp.verify(_ss_tile(1), "sm_90a")
    (d,) = [d for d in report.errors if d.code == "WGMMA-SMEM-LAYOUT"]
    # K rows 0 and 8 lie 128 bytes apart (two core matrices of 8 rows); the descriptor says 16
    assert d.tensor == "T3" and d.counterexample["element (0, 8)"] - d.counterexample["element (0, 0)"] == 128
    assert "LBO 16" in d.message
