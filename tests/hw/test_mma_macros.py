"""nvFuser's MMA vocabulary in hw/mma.py: the macro names and packed values of nvFuser's
csrc/mma_type.h, the instruction each macro issues, the operand layouts and the shared-memory
swizzles whose values are the wgmma descriptor's layout field."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.hw import mma
from tileproof.hw.mma import macro_instruction, macro_issues
from tileproof.model.options import encode_macro, MmaArch, MmaInputSmemSwizzle, MmaLayout, MmaMacro, MmaOperand

# nvFuser's MmaMacro list (csrc/mma_type.h: its Blackwell1CTA M = 64 and Blackwell2CTA macros left out),
# and tileproof's tf32 extension
NVFUSER_NAMES = (["Turing_16_8_8", "Turing_16_8_16", "Turing_16_16_16", "Ampere_16_8_16", "Ampere_16_16_16"]
                 + [f"Hopper_64_{n}_16" for n in range(8, 257, 8)]
                 + [f"Blackwell1CTA_128_{n}_16" for n in range(16, 257, 16)])


def test_names_are_nvfusers_plus_the_tf32_extension():
    assert {m.name for m in MmaMacro} == set(NVFUSER_NAMES) | {"Ampere_16_8_8"}
    assert len(MmaMacro) == len(NVFUSER_NAMES) + 1  # no value aliases another


@pytest.mark.parametrize("name, arch, m, n, k", [
    ("Turing_16_8_8", 2, 16, 8, 8), ("Turing_16_16_16", 2, 16, 16, 16), ("Ampere_16_8_16", 3, 16, 8, 16),
    ("Ampere_16_8_8", 3, 16, 8, 8), ("Hopper_64_8_16", 4, 64, 8, 16), ("Hopper_64_256_16", 4, 64, 256, 16),
    ("Blackwell1CTA_128_16_16", 5, 128, 16, 16), ("Blackwell1CTA_128_256_16", 5, 128, 256, 16),
])
def test_packed_encoding_is_nvfusers(name, arch, m, n, k):
    macro = MmaMacro[name]
    assert macro.value == (arch << 48) | (m << 32) | (n << 16) | k
    assert (int(macro.arch), macro.m, macro.n, macro.k) == (arch, m, n, k)
    assert MmaMacro(encode_macro(MmaArch(arch), m, n, k)) is macro


def test_ampere_16_8_16_is_the_value_nvfuser_compiles_in():
    assert MmaMacro.Ampere_16_8_16.value == 0x0003_0010_0008_0010
    assert MmaArch.Hopper == 4 and MmaArch.Blackwell2CTA == 6


@pytest.mark.parametrize("macro, dtype, ptx, issues", [
    (MmaMacro.Ampere_16_8_8, "float32", "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", 1),
    (MmaMacro.Ampere_16_8_16, "bfloat16", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", 1),
    (MmaMacro.Ampere_16_8_16, "float16", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 1),
    (MmaMacro.Ampere_16_16_16, tp.bfloat16, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", 2),
    (MmaMacro.Turing_16_8_8, "float16", "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32", 1),
    (MmaMacro.Turing_16_8_16, "float16", "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32", 2),
    (MmaMacro.Turing_16_16_16, "bfloat16", "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32", 4),
    (MmaMacro.Hopper_64_256_16, "bfloat16", "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16", 1),
    (MmaMacro.Hopper_64_8_16, "float16", "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16", 1),
    (MmaMacro.Blackwell1CTA_128_64_16, "float16", "tcgen05.mma.cta_group::1.kind::f16", 1),
    (MmaMacro.Blackwell1CTA_128_256_16, "bfloat16", "tcgen05.mma.cta_group::1.kind::f16", 1),
])
def test_each_macro_maps_to_its_instruction(macro, dtype, ptx, issues):
    inst = macro_instruction(macro, dtype)
    assert inst.ptx == ptx
    assert macro_issues(macro, dtype) == issues
    assert (macro.m, macro.n * macro.k) == (inst.m, inst.n * inst.k * issues)


def test_instruction_fragments_have_ptx_register_counts():
    # PTX ISA 9.7.14.5.7-8, 9.7.15.5.1.1: registers of A, B, C per thread
    tf32 = macro_instruction(MmaMacro.Ampere_16_8_8, "float32")
    assert (tf32.a.registers, tf32.b.registers, tf32.c.registers, tf32.threads) == (4, 2, 4, 32)
    assert tf32.converts_to_tf32 and not macro_instruction(MmaMacro.Ampere_16_8_16, "bfloat16").converts_to_tf32
    k16 = macro_instruction(MmaMacro.Ampere_16_8_16, "float16")
    assert (k16.a.registers, k16.b.registers, k16.c.registers) == (4, 2, 4)
    k8 = macro_instruction(MmaMacro.Turing_16_8_8, "bfloat16")
    assert (k8.a.registers, k8.b.registers, k8.c.registers) == (2, 1, 4)
    wg = macro_instruction(MmaMacro.Hopper_64_128_16, "bfloat16")
    assert (wg.a.registers, wg.b, wg.c.registers, wg.threads) == (4, None, 64, 128)
    assert wg.operand(MmaOperand.A) is wg.a and wg.operand(MmaOperand.B) is None
    assert mma.wgmma(64, "float32").ptx == "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32"
    assert k16.name == "mma.sync.m16n8k16 f16" and wg.name == "wgmma.m64n128k16 bf16"
    tc = macro_instruction(MmaMacro.Blackwell1CTA_128_64_16, "float16")  # one thread; D in tensor memory
    assert (tc.threads, tc.m, tc.n, tc.k, tc.name) == (1, 128, 64, 16, "tcgen05.mma.m128n64k16 f16")
    assert (tc.a.elements, tc.b.elements, tc.c.elements) == (128 * 16, 16 * 64, 128 * 64)
    assert tc.c.position(0, 64 * 5 + 7) == (5, 7)  # whole tiles: element v at (v / n, v % n)


def test_wrong_operand_types_and_shapes_are_refused_at_the_door():
    with pytest.raises(tp.ScheduleError, match="Ampere_16_8_8 takes float32 operands, got bfloat16"):
        macro_instruction(MmaMacro.Ampere_16_8_8, "bfloat16")
    with pytest.raises(tp.ScheduleError, match="float16 or bfloat16 operands, got float32"):
        macro_instruction(MmaMacro.Hopper_64_64_16, tp.float32)
    with pytest.raises(tp.ScheduleError, match="multiple of 8 from 8 to 256, got 12"):
        mma.wgmma(12, "bfloat16")
    with pytest.raises(tp.ScheduleError, match="got int8"):
        mma.wgmma(8, "int8")
    with pytest.raises(tp.ScheduleError, match="N is 24; M = 128 takes N a multiple of 16 from 16 to 256"):
        mma.tcgen05_mma(24, "float16")
    with pytest.raises(tp.ScheduleError, match="float16 or bfloat16 operands, got float32"):
        macro_instruction(MmaMacro.Blackwell1CTA_128_64_16, "float32")


def test_layouts_are_named_by_the_position_of_k():
    assert [x.value for x in MmaLayout] == [0, 1, 2, 3] and [x.name for x in MmaLayout] == ["NT", "TT", "TN", "NN"]
    # TN = [M, K] x [N, K]: both K-major; NT = [K, M] x [K, N]: neither
    assert MmaLayout.TN.k_major(MmaOperand.A) and MmaLayout.TN.k_major(MmaOperand.B)
    assert not MmaLayout.NT.k_major(MmaOperand.A) and not MmaLayout.NT.k_major(MmaOperand.B)
    assert MmaLayout.TT.k_major(MmaOperand.A) and not MmaLayout.TT.k_major(MmaOperand.B)
    assert not MmaLayout.NN.k_major(MmaOperand.A) and MmaLayout.NN.k_major(MmaOperand.B)


def test_swizzle_values_are_the_wgmma_descriptor_layout_field():
    assert [(s.name, s.value) for s in MmaInputSmemSwizzle] == [("None", 0), ("B128", 1), ("B64", 2), ("B32", 3)]
    assert MmaInputSmemSwizzle.NoSwizzle is MmaInputSmemSwizzle["None"]
    assert [s.swizzle_bytes for s in MmaInputSmemSwizzle] == [16, 128, 64, 32]
    assert [s.smem_alignment for s in MmaInputSmemSwizzle] == [128, 1024, 512, 256]
    assert [MmaInputSmemSwizzle.from_bytes(b).name for b in (16, 32, 64, 128)] == ["None", "B32", "B64", "B128"]
    with pytest.raises(tp.ScheduleError, match="no swizzle spans 48 bytes"):
        MmaInputSmemSwizzle.from_bytes(48)


def test_the_vocabulary_is_public():
    assert (tp.MmaMacro, tp.MmaOperand, tp.MmaLayout, tp.MmaInputSmemSwizzle) == (
        MmaMacro, MmaOperand, MmaLayout, MmaInputSmemSwizzle)


def _tf32_tile():
    with tp.Fusion("tile") as fusion:
        a = tp.make_contig_concrete_tensor([16, 8]); fusion.add_input(a)
        b = tp.make_contig_concrete_tensor([8, 8]); fusion.add_input(b)
        d = tp.fused_multiply_sum(tp.broadcast(a, [False, True, False]), tp.broadcast(b, [True, False, False]), [-1])
        fusion.add_output(d)
    return d.definition


def test_tf32_rounding_defaults_to_cvt_rna_and_truncation_is_declared():
    op = _tf32_tile()
    op.set_macro(MmaMacro.Ampere_16_8_8)
    assert op.tf32_rounding is tp.Tf32Rounding.RNA
    op.set_macro(MmaMacro.Ampere_16_8_8, tf32_rounding=tp.Tf32Rounding.Truncate)
    assert op.tf32_rounding is tp.Tf32Rounding.Truncate
    op.set_macro(MmaMacro.Ampere_16_8_16)  # 16-bit operands: nothing to round
    assert op.tf32_rounding is None


def test_tf32_rounding_names_a_wrong_value_or_macro():
    op = _tf32_tile()
    with pytest.raises(tp.ScheduleError, match=r"tp.Tf32Rounding for tf32_rounding.*use tp.Tf32Rounding.Truncate"):
        op.set_macro(MmaMacro.Ampere_16_8_8, tf32_rounding="truncate")
    with pytest.raises(tp.ScheduleError, match="applies to the tf32 macro.*Ampere_16_8_16 takes float16 or bfloat16"):
        op.set_macro(MmaMacro.Ampere_16_8_16, tf32_rounding=tp.Tf32Rounding.Truncate)
