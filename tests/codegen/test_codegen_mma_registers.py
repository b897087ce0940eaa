"""How the tensor-core lowering moves registers: a 16-bit operand pair that is one aligned 32-bit
word of a register array is read as that word (no repacking, which ptxas pays for in moves),
and the accumulators are stored two adjacent columns at a time where the solver proves the pair
adjacent and 8-byte aligned in D, with the same predicates (else one element at a time)."""

from __future__ import annotations

import tileproof as tp
from tileproof.codegen.emit.mma import _word
from tileproof.codegen.ir import Compute, Loop, Operand, WholeTile
from support.lowering import lowered
from tileproof.model.expr import add, const, mul, var
from tileproof.model.types import MemoryType, bfloat16, float32
from tileproof.recipes import CpAsyncPipeline, MmaGemmParams, mma_gemm

from support.examples import example_module

moye_tile = example_module("valid", "mma").moye_tile


def reg(offset, tensor="T5"):
    return Operand(tensor, MemoryType.Local, bfloat16, offset)


def test_a_pair_at_an_even_offset_of_one_array_is_one_word():
    i = var("i")
    assert _word(reg(mul(8, i)), reg(add(mul(8, i), const(1))))
    assert not _word(reg(add(mul(8, i), const(1))), reg(add(mul(8, i), const(2))))  # odd: straddles two words
    assert not _word(reg(mul(8, i)), reg(add(mul(8, i), const(2))))  # not adjacent
    assert not _word(reg(mul(8, i)), reg(add(mul(8, i), const(1)), "T6"))  # two arrays
    assert not _word(reg(i), reg(add(i, const(1))))  # parity unknown


def test_the_tuned_bfloat16_fragments_are_read_as_words():
    params = MmaGemmParams(dtype=tp.bfloat16, pipeline=CpAsyncPipeline(stages=2, prefetch=1))
    src = tp.compile(mma_gemm(256, 256, 128, params), "sm_90a").cuda_source
    assert "unsigned short" not in src and src.count("tp_a0 = *reinterpret_cast<const unsigned*>") == 1


def _stores(fusion):
    out = []

    def walk(nodes):  # the stores as lowered (a WholeTile's unpredicated copy aside)
        for n in nodes:
            if isinstance(n, WholeTile):
                walk([n.lowered])
            elif isinstance(n, Loop):
                walk(n.body)
            elif isinstance(n, Compute) and n.out.memory is MemoryType.Global:
                out.append(n)

    st = lowered(fusion, "sm_90a")
    walk(st.kernel.body)
    return st, out


def test_the_accumulators_are_stored_in_aligned_pairs():
    fusion = mma_gemm("M", "N", "K", MmaGemmParams(dtype=tp.bfloat16, pipeline=CpAsyncPipeline(stages=2, prefetch=1)))
    for a in ("M % 128 == 0", "N % 128 == 0", "K % 64 == 0"):
        fusion.assume(a)
    st, stores = _stores(fusion)
    assert [s.vector for s in stores] == [2] and stores[0].ins[0].dtype == float32
    assert st.globals[stores[0].out.tensor].vector_elements == 2  # Kernel.run checks the 8-byte alignment


def test_a_pair_split_by_a_hole_is_stored_one_element_at_a_time():
    """N = 12 in 8-wide tiles: the second tile's columns 12..15 are a hole, predicated per column."""
    assert [s.vector for s in _stores(moye_tile(16, 12, 8))[1]] == [1]
    assert [s.vector for s in _stores(moye_tile(16, 16, 8))[1]] == [2]


def test_tf32_operands_are_rounded_unless_truncation_is_declared():
    """cvt.rna.tf32.f32 per operand register by default; declared truncation passes the float32
    words as they are. The kernel cache tells the two apart."""
    sources = {}
    for rounding in tp.Tf32Rounding:
        fusion = mma_gemm(128, 128, 64, MmaGemmParams(dtype=float32, tf32_rounding=rounding))
        sources[rounding] = tp.compile(fusion, "sm_90a").cuda_source
    assert sources[tp.Tf32Rounding.RNA].count("cvt.rna.tf32.f32") == 4 + 2  # A's 4 and B's 2 registers
    assert "cvt.rna" not in sources[tp.Tf32Rounding.Truncate]
    assert sources[tp.Tf32Rounding.Truncate].count("tp_a0 = *reinterpret_cast<const unsigned*>(&T") == 1
