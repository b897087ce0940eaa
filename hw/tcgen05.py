"""Tensor memory's addresses and the tcgen05.ld/st data-path patterns: which (lane, column)
each thread's register touches, relative to the warp's base address, and how elements of 8, 16,
32 or 64 bits pack into the 32-bit columns and registers. Formulas from PTX ISA 9.7.16.1.1
(addresses) and 9.7.16.8 (tcgen05.ld / tcgen05.st data-path shapes) and CUTLASS copy_traits_sm100.

tcgen05.mma (cta_group::1, .kind::f16, M = 128): its valid shapes, its 32-bit instruction
descriptor, the shared-memory descriptor's Blackwell encoding (wgmma's fields, version 1 at bits
46-47, a 3-bit swizzle mode at 61-63), where D's accumulators sit in tensor memory, and
tcgen05.alloc's column counts (PTX ISA 9.7.16.4, 9.7.16.7, 9.7.16.10; CUTLASS
include/cute/arch/mma_sm100_desc.hpp, UMMA::InstrDescriptor and UMMA::SmemDescriptor; nvFuser
csrc/device_lower/pass/inline_ptx.cpp handleBlackwellMma and index.cpp
constructBlackwellMatrixDescriptor, which builds the same LBO and SBO as for Hopper)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..model.errors import InternalError
from ..model.expr import Expr, ExprLike, add, const, floordiv, mod, mul

TMEM_LANE_SHIFT = 16  # a tensor-memory address holds the lane in bits 31..16, the column in bits 15..0
WORD_BYTES = 4  # a tensor-memory column, and each register a tcgen05.ld/st moves, is 32 bits


def tmem_address(lane: ExprLike, column: ExprLike) -> Expr:
    """The 32-bit tensor-memory address of (lane, column): lane << 16 | column (PTX ISA 9.7.16.1.1)."""
    return add(mul(lane, 1 << TMEM_LANE_SHIFT), column)


class TmemPattern(enum.Enum):
    P32x32b = "32x32b"
    P16x64b = "16x64b"
    P16x128b = "16x128b"
    P16x256b = "16x256b"
    P16x32bx2 = "16x32bx2"

    def __str__(self) -> str:
        return self.value

    @property
    def registers_per_repetition(self) -> int:
        return {"16x128b": 2, "16x256b": 4}.get(self.value, 1)


def pattern_offset(p: TmemPattern, lane_in_warp: Expr, reg: Expr, num_regs: int) -> tuple[Expr, Expr]:
    """(lane, column) offset of register `reg` of thread `lane_in_warp` from the warp base."""
    t, r = lane_in_warp, reg
    if p is TmemPattern.P32x32b:
        return t, r
    if p is TmemPattern.P16x64b:
        return add(floordiv(t, 4), mul(mod(t, 2), 8)), add(mul(r, 2), mod(floordiv(t, 2), 2))
    if p is TmemPattern.P16x128b:
        return add(floordiv(t, 4), mul(mod(r, 2), 8)), add(mul(floordiv(r, 2), 4), mod(t, 4))
    if p is TmemPattern.P16x256b:
        return (add(floordiv(t, 4), mul(mod(floordiv(r, 2), 2), 8)),
                add(mul(floordiv(r, 4), 8), mul(mod(t, 4), 2), mod(r, 2)))
    # 16x32bx2 with immHalfSplitoff = num_regs (CUTLASS's choice)
    return mod(t, 16), add(r, mul(floordiv(t, 16), num_regs))


@dataclass(frozen=True)
class Packing:
    """Elements of `element_bytes` (1, 2, 4 or 8) in 32-bit words. Element c of a lane occupies
    bytes c*b .. c*b+b-1 of the lane, so column (c*b) / 4 from byte (c*b) % 4 (a 64-bit element:
    two columns, low word first). A thread's elements fill its registers the same way: element v
    of one instruction sits in register (v*b) / 4 from byte (v*b) % 4, the lower column byte in
    the lower register bits, as tcgen05.ld/st move a register's 4 bytes to one column's."""

    element_bytes: int

    def __post_init__(self):
        if self.element_bytes not in (1, 2, 4, 8):
            raise ValueError(f"Packing: element bytes must be 1, 2, 4 or 8, got {self.element_bytes}")

    @property
    def per_word(self) -> int:
        """Elements in one 32-bit word (1 for 32- and 64-bit elements)."""
        return max(1, WORD_BYTES // self.element_bytes)

    @property
    def words(self) -> int:
        """32-bit words one element spans (2 for 64-bit elements, else 1)."""
        return max(1, self.element_bytes // WORD_BYTES)

    def registers(self, elements: int) -> int | None:
        """Registers that carry `elements` elements, None when they fill no whole number of them."""
        total = elements * self.element_bytes
        return None if total % WORD_BYTES else total // WORD_BYTES

    def word(self, index: ExprLike) -> Expr:
        """The word (a column for a column index, a register for an element of an instruction)
        where element `index` starts."""
        return floordiv(index, self.per_word) if self.per_word > 1 else mul(index, self.words)

    def byte(self, index: ExprLike) -> Expr:
        """The byte within that word where element `index` starts."""
        return mul(mod(index, self.per_word), self.element_bytes) if self.per_word > 1 else const(0)


# -- tcgen05.mma, cta_group::1, .kind::f16 (PTX ISA 9.7.16.10) ------------------------------------
#
# One thread issues it; it reads A (M x K) and B (K x N) from shared memory through matrix
# descriptors and accumulates D (M x N, f32) in tensor memory, asynchronously: its completion is
# signalled by tcgen05.commit to an mbarrier (9.7.16.11.1). tileproof issues M = 128 only: D's row
# i is lane i and its column j the 32-bit column j from D's address (9.7.16.10.8, "data path layout
# D" for M = 128, cta_group::1); M = 64 spreads rows over half-lanes and is not modelled.

MMA_M = 128  # the rows of D tileproof's tcgen05.mma writes: one per tensor-memory lane
MMA_K_16BIT = 16  # K of one .kind::f16 instruction (16-bit A and B)
MMA_KIND = "f16"
MMA_PTX = "tcgen05.mma.cta_group::1.kind::f16"
COMMIT_PTX = "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64"
ACCUMULATOR_BYTES = 4  # f32 accumulators: one 32-bit column per element
IDESC_TYPES = {"float16": 0, "bfloat16": 1}  # .kind::f16's atype / btype field values (F16 = 0, BF16 = 1)
IDESC_D_F32 = 1  # dtype field: F32
SM100_DESCRIPTOR_VERSION = 1  # bits 46-47 of a tcgen05 shared-memory descriptor (Hopper's wgmma: 0)
# the 3-bit swizzle field at bits 61-63 by MmaInputSmemSwizzle value (None, B128, B64, B32): 0, 2, 4, 6;
# 1 ("128-byte with 32-byte atomic") has no wgmma counterpart and tileproof does not lay it out
SM100_SWIZZLE_MODE = {0: 0, 1: 2, 2: 4, 3: 6}


def mma_shape_problems(m: int, n: int, k: int, dtype_name: str) -> list[str]:
    """Why m x n x k (operands of `dtype_name`) is no cta_group::1 .kind::f16 tcgen05.mma
    tileproof issues, [] when it is one: operands float16 / bfloat16, K = 16, M = 128 and N a
    multiple of 16 from 16 to 256 (PTX ISA 9.7.16.10.1, the valid shapes of .kind::f16 for
    cta_group::1; M = 64 also exists there, with N a multiple of 8, but writes D in half-lanes)."""
    out = []
    if dtype_name not in IDESC_TYPES:
        out.append(f"operands are {dtype_name}; .kind::f16 takes float16 or bfloat16")
    if k != MMA_K_16BIT:
        out.append(f"K is {k}; .kind::f16 takes K = {MMA_K_16BIT}")
    if m != MMA_M:
        out.append(f"M is {m}; tileproof issues M = {MMA_M} (row i of D in lane i)")
    if not (16 <= n <= 256 and n % 16 == 0):
        out.append(f"N is {n}; M = 128 takes N a multiple of 16 from 16 to 256")
    return out


@dataclass(frozen=True)
class InstructionDescriptor:
    """The 32-bit instruction descriptor of a dense .kind::f16 tcgen05.mma (PTX ISA 9.7.16.4.2,
    Table "instruction descriptor format for .kind::tf32, .kind::f16, ..."): bits 4-5 the D
    format (F32 = 1), 7-9 A's and 10-12 B's type (F16 = 0, BF16 = 1), 15 and 16 transpose A and
    B (0: K-major, 1: MN-major), 17-22 N >> 3, 24-28 M >> 4; sparsity, saturation, negation and
    the B shift all 0."""

    m: int
    n: int
    a_type: str  # "float16" or "bfloat16"
    b_type: str
    transpose_a: bool = False  # A M-major
    transpose_b: bool = False  # B N-major

    def field_problems(self) -> list[str]:
        """One line per field the instruction cannot take, [] when encodable."""
        out = [p for p in mma_shape_problems(self.m, self.n, MMA_K_16BIT, self.a_type)]
        if self.b_type != self.a_type:
            out.append(f"A is {self.a_type} and B {self.b_type}; one .kind::f16 type for both")
        return out

    def encode(self) -> int:
        problems = self.field_problems()
        if problems:
            raise InternalError(f"tcgen05 instruction descriptor {self}: {'; '.join(problems)}")
        return (IDESC_D_F32 << 4 | IDESC_TYPES[self.a_type] << 7 | IDESC_TYPES[self.b_type] << 10
                | int(self.transpose_a) << 15 | int(self.transpose_b) << 16
                | (self.n >> 3) << 17 | (self.m >> 4) << 24)


def encode_smem_descriptor(start_address: int, lbo: int, sbo: int, swizzle_value: int, base_offset: int = 0) -> int:
    """The 64-bit shared-memory descriptor of a tcgen05.mma operand (PTX ISA 9.7.16.4.1): the
    fields of wgmma's (hw/wgmma.py Descriptor: start, LBO, SBO >> 4 in 14 bits, base offset at
    49) and two differences, the version 1 at bits 46-47 and a 3-bit swizzle mode at bits
    61-63 (SM100_SWIZZLE_MODE: B128 = 2, B64 = 4, B32 = 6, where wgmma's 2-bit field at 62-63
    holds 1, 2, 3: the same bits set). `swizzle_value` is MmaInputSmemSwizzle's value."""
    for name, value in (("start_address", start_address), ("lbo", lbo), ("sbo", sbo)):
        if value % 16 or not 0 <= value < 1 << 18:
            raise InternalError(f"tcgen05 descriptor: {name} {value:#x} is not a multiple of 16 in [0, 2**18)")
    return ((start_address & 0x3FFFF) >> 4 | ((lbo & 0x3FFFF) >> 4) << 16 | ((sbo & 0x3FFFF) >> 4) << 32
            | SM100_DESCRIPTOR_VERSION << 46 | base_offset << 49 | SM100_SWIZZLE_MODE[swizzle_value] << 61)


def accumulator_cell(row: ExprLike, col: ExprLike) -> tuple[ExprLike, ExprLike]:
    """(lane, 32-bit column from D's address) where tcgen05.mma M = 128, cta_group::1 keeps the
    f32 accumulator D[row, col] (PTX ISA 9.7.16.10.8, data path layout D for M = 128): lane row,
    column col."""
    return row, col


def alloc_columns(columns: int) -> int:
    """The columns tcgen05.alloc takes for `columns` used ones: a power of two, at least 32
    (PTX ISA 9.7.16.7.1)."""
    return max(32, 1 << max(columns - 1, 0).bit_length())
