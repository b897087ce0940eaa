"""hw/tcgen05.py's tcgen05.mma: the valid shapes of .kind::f16 at cta_group::1, M = 128 (PTX ISA
9.7.16.10.1), the instruction descriptor's bit fields (9.7.16.4.2, Table "instruction descriptor
format for .kind::tf32, .kind::f16, ..."), the Blackwell shared-memory descriptor against wgmma's
(9.7.16.4.1: version 1 at bits 46-47, the 3-bit swizzle mode at 61-63), the accumulator's cells
and tcgen05.alloc's column counts; every Blackwell macro is a valid instruction."""

from __future__ import annotations

import pytest

from tileproof.hw.tcgen05 import (InstructionDescriptor, accumulator_cell, alloc_columns, encode_smem_descriptor,
                                  mma_shape_problems)
from tileproof.hw.wgmma import Descriptor
from tileproof.model.errors import InternalError
from tileproof.model.options import MmaArch, MmaInputSmemSwizzle as Swizzle, MmaMacro

BLACKWELL = [m for m in MmaMacro if m.arch is MmaArch.Blackwell1CTA]


def test_every_blackwell_macro_is_a_valid_kind_f16_shape():
    assert [m.n for m in BLACKWELL] == list(range(16, 257, 16))
    for m in BLACKWELL:
        for dtype in m.input_dtypes:
            assert mma_shape_problems(m.m, m.n, m.k, dtype) == []
            assert InstructionDescriptor(m.m, m.n, dtype, dtype).field_problems() == []


@pytest.mark.parametrize("m, n, k, dtype, why", [
    (128, 8, 16, "float16", "N is 8"), (128, 24, 16, "float16", "N is 24"), (128, 272, 16, "bfloat16", "N is 272"),
    (64, 64, 16, "float16", "M is 64"), (128, 64, 8, "float16", "K is 8"), (128, 64, 16, "float32", "float32"),
])
def test_other_shapes_and_types_are_refused(m, n, k, dtype, why):
    (problem,) = mma_shape_problems(m, n, k, dtype)
    assert why in problem


def test_the_instruction_descriptor_fields():
    d = InstructionDescriptor(128, 64, "float16", "float16").encode()
    assert d == 1 << 4 | (64 >> 3) << 17 | (128 >> 4) << 24 == 0x8100010  # nvFuser's for Blackwell1CTA_128_64_16
    bf = InstructionDescriptor(128, 256, "bfloat16", "bfloat16", transpose_a=True, transpose_b=True).encode()
    assert (bf >> 4) & 3 == 1 and (bf >> 7) & 7 == 1 and (bf >> 10) & 7 == 1  # D f32, A and B bf16
    assert (bf >> 15) & 1 == 1 and (bf >> 16) & 1 == 1  # both MN-major
    assert (bf >> 17) & 0x3F == 32 and (bf >> 24) & 0x1F == 8 and bf >> 29 == 0  # N >> 3, M >> 4, nothing above
    assert bf & 0b1111 == 0 and (bf >> 13) & 3 == 0 and (bf >> 23) & 1 == 0  # dense, no negation, reserved 0
    with pytest.raises(InternalError, match="one .kind::f16 type for both"):
        InstructionDescriptor(128, 64, "float16", "bfloat16").encode()
    with pytest.raises(InternalError, match="N is 40"):
        InstructionDescriptor(128, 40, "float16", "float16").encode()


@pytest.mark.parametrize("swizzle", list(Swizzle)[1:] + [Swizzle.NoSwizzle])
@pytest.mark.parametrize("start, lbo, sbo", [(0, 16, 1024), (49152 + 96, 16, 1024), (1024, 8192, 256),
                                             (2 ** 18 - 16, 2 ** 18 - 16, 16)])
def test_the_blackwell_descriptor_is_wgmma_s_with_the_version_bit(swizzle, start, lbo, sbo):
    """Bits 0-45 and 49-51 are wgmma's fields; bit 46 the version (1); the 3-bit mode at 61-63 sets
    the bits wgmma's 2-bit layout field at 62-63 does (B128: 2 vs 1, B64: 4 vs 2, B32: 6 vs 3)."""
    hopper = Descriptor(start, lbo, sbo, swizzle).encode()
    blackwell = encode_smem_descriptor(start, lbo, sbo, swizzle.value)
    assert blackwell == hopper | 1 << 46
    assert (blackwell >> 61) == {Swizzle.NoSwizzle: 0, Swizzle.B128: 2, Swizzle.B64: 4, Swizzle.B32: 6}[swizzle]
    assert (blackwell >> 46) & 3 == 1 and (blackwell >> 52) & 0x1FF == 0


def test_an_unencodable_field_is_a_generator_bug():
    with pytest.raises(InternalError, match="sbo 0x8 is not a multiple of 16"):
        encode_smem_descriptor(0, 16, 8, Swizzle.B128.value)
    with pytest.raises(InternalError, match=r"start_address 0x40000 is not a multiple of 16 in \[0, 2\*\*18\)"):
        encode_smem_descriptor(1 << 18, 16, 1024, Swizzle.B128.value)


def test_d_row_i_is_lane_i_and_alloc_takes_powers_of_two_from_32():
    assert [accumulator_cell(m, n) for m, n in ((0, 0), (127, 255), (5, 9))] == [(0, 0), (127, 255), (5, 9)]
    assert [alloc_columns(c) for c in (1, 16, 32, 33, 64, 80, 128, 144, 256, 512)] == \
        [32, 32, 32, 64, 64, 128, 128, 256, 256, 512]
