"""hw/wgmma.py by brute force: the canonical layouts against the PTX ISA's worked
examples (CuTe shape:stride text, decoded by tests/support/cute_layout.py), the hardware swizzle
on concrete addresses, a TMA-written SW128 tile read back through the descriptor at every K
step, the descriptor's bit fields, and the Expr forms evaluating as the int forms do."""

from __future__ import annotations

import itertools

import pytest
from tileproof.model.errors import InternalError
from tileproof.model.expr import Expr, evaluate, var
from tileproof.model.options import MmaInputSmemSwizzle as Swizzle
from tileproof.hw.wgmma import (
    Descriptor, atom_aligned, canonical_offset, hardware_address, hardware_swizzle, swizzle_span,
)

from support.cute_layout import index, parse

NONE = Swizzle["None"]
ALL_SWIZZLES = [NONE, Swizzle.B32, Swizzle.B64, Swizzle.B128]


def cute_offset(text: str, mn: int, k: int) -> int:
    """The element offset CuTe's layout ((MN modes),(K modes)):((strides),(strides)) gives (mn, k)."""
    (mn_shape, k_shape), (mn_stride, k_stride) = parse(text)
    return index(mn_shape, mn_stride, mn) + index(k_shape, k_stride, k)


# PTX ISA 9.7.15.5.1.2, the canonical-layout examples: (major, swizzle, element bytes, CuTe layout in
# elements, LBO bytes, SBO bytes, mn extent, k extent)
PTX_EXAMPLES = {
    "K-major tf32 no swizzle": ("K", NONE, 4, "((8,2),(4,4)):((4,32),(1,64))", 256, 128, 16, 16),
    "K-major tf32 32B": ("K", Swizzle.B32, 4, "((8,2),(4,4)):((8,64),(1,4))", 16, 256, 16, 8),  # k * 4 < 32
    "MN-major bf16 no swizzle": ("MN", NONE, 2, "((8,1,2),(8,2)):((1,8,64),(8,128))", 256, 128, 16, 16),
    "MN-major bf16 64B": ("MN", Swizzle.B64, 2, "((8,4,2),(8,2)):((1,8,256),(32,512))", 512, 1024, 64, 16),
}


@pytest.mark.parametrize("name", PTX_EXAMPLES)
def test_canonical_offset_is_the_ptx_example(name):
    major, swizzle, es, layout, lbo, sbo, mn_extent, k_extent = PTX_EXAMPLES[name]
    for mn, k in itertools.product(range(mn_extent), range(k_extent)):
        got = canonical_offset(major, swizzle, es, mn, k, lbo, sbo)
        assert got == es * cute_offset(layout, mn, k), (name, mn, k)


def test_k_major_swizzled_refuses_k_beyond_the_row():
    assert canonical_offset("K", Swizzle.B32, 4, 0, 7, 16, 256) == 28
    with pytest.raises(ValueError, match="k = 8"):
        canonical_offset("K", Swizzle.B32, 4, 0, 8, 16, 256)
    with pytest.raises(ValueError, match="major"):
        canonical_offset("k", NONE, 2, 0, 0, 16, 16)


def test_swizzle_span():
    assert [swizzle_span(s) for s in ALL_SWIZZLES] == [16, 32, 64, 128]


def test_hardware_swizzle_on_concrete_addresses():
    assert hardware_swizzle(128, Swizzle.B128) == 144  # line 1, chunk 0 -> chunk 1
    a = 1024 + 16 * 3 + 128 * 5  # line 5 of a pattern, chunk 3
    assert hardware_swizzle(a, Swizzle.B128) == a ^ (5 << 4) == 1024 + 128 * 5 + 16 * (3 ^ 5)
    assert hardware_swizzle(a + 7, Swizzle.B128) == (a ^ (5 << 4)) + 7  # bytes inside a chunk stay
    # B64 takes address bits 7-8 (line 5 -> 1), B32 bit 7 only (line 5 -> 1; line 6 -> 0)
    assert hardware_swizzle(a, Swizzle.B64) == a ^ (1 << 4)
    assert hardware_swizzle(1024 + 128 * 6 + 16 * 3, Swizzle.B64) == 1024 + 128 * 6 + 16 * (3 ^ 2)
    assert hardware_swizzle(1024 + 128 * 6 + 16 * 3, Swizzle.B32) == 1024 + 128 * 6 + 16 * 3
    assert hardware_swizzle(a, Swizzle.B32) == a ^ (1 << 4)
    assert hardware_swizzle(a, NONE) == a


@pytest.mark.parametrize("swizzle", ALL_SWIZZLES, ids=lambda s: s.name)
def test_hardware_swizzle_is_a_bijection_and_an_involution(swizzle):
    image = [hardware_swizzle(a, swizzle) for a in range(2048)]
    assert sorted(image) == list(range(2048))
    assert all(hardware_swizzle(b, swizzle) == a for a, b in enumerate(image))


def tma_sw128_address(base: int, row: int, col: int, es: int = 2) -> int:
    """Where a TMA copy with CU_TENSOR_MAP_SWIZZLE_128B puts element (row, col) of a tile of 128-byte
    rows, as the tile-relative model states it: chunk c of row r at chunk c ^ (r % 8)."""
    byte = col * es
    return base + 128 * row + 16 * ((byte // 16) ^ (row % 8)) + byte % 16


@pytest.mark.parametrize("base", [0, 1024, 5 * 1024])
def test_sw128_tile_read_at_every_k_step(base):
    # bf16 K-major, 64 rows x 64 columns, one descriptor per 16-wide K step: start + 32 bytes each
    for s, mn, k in itertools.product(range(4), range(64), range(16)):
        got = hardware_address(base + 32 * s, "K", Swizzle.B128, 2, mn, k, lbo=16, sbo=1024)
        assert got == tma_sw128_address(base, mn, 16 * s + k), (s, mn, k)


def test_sw128_tile_only_128_byte_aligned_is_read_wrong():
    base = 128  # a stage aligned to 128 bytes, not to the 1024-byte pattern
    assert not atom_aligned(base, Swizzle.B128) and atom_aligned(1024, Swizzle.B128)
    wrong = [(mn, k) for mn, k in itertools.product(range(64), range(16))
             if hardware_address(base, "K", Swizzle.B128, 2, mn, k, 16, 1024) != tma_sw128_address(base, mn, k)]
    assert wrong and (0, 0) in wrong


def test_atom_aligned():
    assert [atom_aligned(256, s) for s in ALL_SWIZZLES] == [True, True, False, False]
    assert [atom_aligned(512, s) for s in ALL_SWIZZLES] == [True, True, True, False]
    assert atom_aligned(128, NONE) and not atom_aligned(64, NONE)


def test_descriptor_encode_fields():
    bits = Descriptor(start_address=0x400, lbo=16, sbo=1024, swizzle=Swizzle.B128).encode()
    assert bits & 0x3FFF == 0x400 >> 4
    assert (bits >> 16) & 0x3FFF == 1
    assert (bits >> 32) & 0x3FFF == 1024 >> 4
    assert (bits >> 49) & 0x7 == 0
    assert bits >> 62 == 1
    assert bits == 0x40 | 1 << 16 | 0x40 << 32 | 1 << 62
    # the reserved bits stay zero
    assert bits & ~(0x3FFF | 0x3FFF << 16 | 0x3FFF << 32 | 0x7 << 49 | 0x3 << 62) == 0


def test_descriptor_encode_base_offset_and_layouts():
    for swizzle in ALL_SWIZZLES:
        bits = Descriptor(0x3FFF0, 0x3FFF0, 0x3FFF0, swizzle, base_offset=5).encode()
        assert bits == 0x3FFF | 0x3FFF << 16 | 0x3FFF << 32 | 5 << 49 | swizzle.value << 62
    assert [s.value for s in ALL_SWIZZLES] == [0, 3, 2, 1]  # PTX's layout field: 128B = 1, 32B = 3


def test_descriptor_field_problems():
    assert Descriptor(0x400, 16, 1024, Swizzle.B128).field_problems() == []
    problems = Descriptor(0x408, 16, 2**18, Swizzle.B128, base_offset=9).field_problems()
    assert len(problems) == 3
    assert any("start_address" in p and "multiple of 16" in p for p in problems)
    assert any("sbo" in p and "2**18" in p for p in problems)
    assert any("base_offset 9" in p for p in problems)
    assert Descriptor(0, -16, 16, NONE).field_problems() == ["lbo -0x10 is outside [0, 2**18)"]
    with pytest.raises(InternalError, match="start_address"):
        Descriptor(0x408, 16, 1024, Swizzle.B128).encode()


# -- the same functions on Exprs ---------------------------------------------------------------

LAYOUTS = [(major, swizzle, es) for major in ("K", "MN") for swizzle in ALL_SWIZZLES for es in (2, 4)]


@pytest.mark.parametrize("major, swizzle, es", LAYOUTS, ids=lambda x: getattr(x, "name", str(x)))
def test_exprs_evaluate_as_ints(major, swizzle, es):
    mn, k, start, sbo = var("mn"), var("k"), var("start"), var("sbo")
    lbo = 256
    k_extent = swizzle_span(swizzle) // es if major == "K" and swizzle is not NONE else 24
    offset = canonical_offset(major, swizzle, es, mn, k, lbo, sbo)
    address = hardware_address(start, major, swizzle, es, mn, k, lbo, sbo)
    assert isinstance(offset, Expr) and isinstance(address, Expr)
    assert address.has_op("xor") == (swizzle is not NONE)
    for p_start, p_sbo in [(0, 1024), (1024 + 32, 2048), (384, 512)]:
        for p_mn, p_k in itertools.product(range(0, 72, 5), range(k_extent)):
            env = {"mn": p_mn, "k": p_k, "start": p_start, "sbo": p_sbo}
            assert evaluate(offset, env) == canonical_offset(major, swizzle, es, p_mn, p_k, lbo, p_sbo)
            assert evaluate(address, env) == hardware_address(p_start, major, swizzle, es, p_mn, p_k, lbo, p_sbo)


def test_hardware_swizzle_expr_evaluates_as_int():
    a = var("a")
    for swizzle in ALL_SWIZZLES:
        e = hardware_swizzle(a, swizzle)
        assert all(evaluate(e, {"a": x}) == hardware_swizzle(x, swizzle) for x in range(0, 4096, 3))
