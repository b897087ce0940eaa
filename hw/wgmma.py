"""The wgmma shared-memory matrix descriptor: where the hardware reads operand element (mn, k)
of A or B, and the descriptor's 64-bit encoding.

The offset functions take ints (exact) or Exprs of the index algebra (model/expr.py) alike, so
one definition is evaluated in Python, rendered to z3 by the verifier and to CUDA by the code
generator. Offsets and addresses are in bytes; mn is the row of A (M) or column of B (N), k the
reduction index, both counted in elements from the descriptor's start address.

Sources: PTX ISA 9.0 section 9.7.15.5.1.2 (Shared Memory Matrix Layout: the canonical layouts
per major-ness and swizzle; Matrix Descriptor Format: the bit fields); CUTLASS
include/cute/arch/mma_sm90_desc.hpp (GmmaDescriptor, the same fields).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model.errors import InternalError
from ..model.expr import ExprLike
from ..model.options import MmaInputSmemSwizzle

Index = ExprLike  # an int, or an Expr of the index algebra

CORE_ROW = 16  # bytes: one row of an 8 x 16-byte core matrix, the unit of every offset field
SWIZZLE_LINE = 128  # bytes: the swizzle XORs address bits 4.. with bits 7..
FIELD_LIMIT = 1 << 18  # start, LBO and SBO are 14-bit fields of bytes >> 4
MAJORS = ("K", "MN")
SWIZZLE_OF_BYTES = {0: MmaInputSmemSwizzle.NoSwizzle, 16: MmaInputSmemSwizzle.NoSwizzle, 32: MmaInputSmemSwizzle.B32,
                    64: MmaInputSmemSwizzle.B64, 128: MmaInputSmemSwizzle.B128}  # a TMA's swizzle span (0: none)


def swizzle_span(swizzle: MmaInputSmemSwizzle) -> int:
    """Bytes one swizzled row spans: 16 (no swizzle: a core-matrix row), 32, 64 or 128."""
    return swizzle.swizzle_bytes


def swizzle_lines(swizzle: MmaInputSmemSwizzle) -> int:
    """128-byte lines of one repeat of the swizzle pattern: the address bits 7.. the XOR reads
    (2, 4 or 8 for a 32, 64 or 128-byte swizzle; 1 without). A descriptor with base_offset 0
    starts on line 0 of a repeat: (start // 128) % lines == 0."""
    return swizzle_span(swizzle) // CORE_ROW


def atom_aligned(address: int, swizzle: MmaInputSmemSwizzle) -> bool:
    """Whether `address` starts a repeat of the swizzle pattern (8 rows of the span: 128 without
    swizzle, else 256, 512, 1024 bytes), as a descriptor with base_offset 0 assumes of the tile
    its layout is computed for. The start address alone cannot say: K steps inside a swizzled
    row move it by 32 bytes on purpose."""
    return address % (8 * swizzle_span(swizzle)) == 0


def hardware_swizzle(address: Index, swizzle: MmaInputSmemSwizzle) -> Index:
    """The XOR the hardware applies to the absolute shared-memory address it computes:
    a ^ (((a >> 7) & (W - 1)) << 4), W = span / 16; the identity without swizzle. An involution."""
    lines = swizzle_lines(swizzle)
    if lines == 1:
        return address
    # shifts and the mask as floordiv / mod by powers of two: the ops every renderer has
    return address ^ (address // SWIZZLE_LINE % lines * CORE_ROW)


def canonical_offset(major: str, swizzle: MmaInputSmemSwizzle, element_bytes: int, mn: Index, k: Index,
                     lbo: Index, sbo: Index) -> Index:
    """Bytes from the start address to element (mn, k) in the canonical layout, before the
    swizzle. S is the span, es = element_bytes:

        K-major,  no swizzle: (mn % 8) 16 + (mn / 8) SBO + (k es / 16) LBO + (k es) % 16
        K-major,  swizzled:   (mn % 8) S  + (mn / 8) SBO + k es          (k es < S; LBO unused)
        MN-major, no swizzle: (mn es) % 16 + (mn es / 16) SBO + (k % 8) 16 + (k / 8) LBO
        MN-major, swizzled:   (mn es) % S  + (mn es / S) LBO  + (k % 8) S  + (k / 8) SBO

    A K-major swizzled operand reaches further K through the start address (one descriptor
    per K step), so an int k with k es >= S is refused."""
    if major not in MAJORS:
        raise ValueError(f"canonical_offset: major must be 'K' or 'MN', got {major!r}")
    if element_bytes not in (1, 2, 4):
        raise ValueError(f"canonical_offset: element_bytes must be 1, 2 or 4, got {element_bytes!r}")
    span = swizzle_span(swizzle)
    if major == "K":
        if span == CORE_ROW:
            kb = k * element_bytes
            return mn % 8 * CORE_ROW + mn // 8 * sbo + kb // CORE_ROW * lbo + kb % CORE_ROW
        if isinstance(k, int) and not 0 <= k * element_bytes < span:
            raise ValueError(f"canonical_offset: K-major {span}-byte swizzle holds k * {element_bytes} < {span} "
                             f"bytes per row, got k = {k}")
        return mn % 8 * span + mn // 8 * sbo + k * element_bytes
    mb = mn * element_bytes
    if span == CORE_ROW:
        return mb % CORE_ROW + mb // CORE_ROW * sbo + k % 8 * CORE_ROW + k // 8 * lbo
    return mb % span + mb // span * lbo + k % 8 * span + k // 8 * sbo


def hardware_address(start: Index, major: str, swizzle: MmaInputSmemSwizzle, element_bytes: int,
                     mn: Index, k: Index, lbo: Index, sbo: Index) -> Index:
    """The shared-memory byte address wgmma reads element (mn, k) from, for a descriptor with
    base_offset 0: the canonical offset added to the start address, then the swizzle."""
    return hardware_swizzle(start + canonical_offset(major, swizzle, element_bytes, mn, k, lbo, sbo), swizzle)


@dataclass(frozen=True)
class Descriptor:
    """A wgmma matrix descriptor's fields, all bytes but base_offset (PTX ISA 9.7.15.5.1.2,
    Matrix Descriptor Format): bits 0-13 start address >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4,
    49-51 base offset, 62-63 the layout (the swizzle's value)."""

    start_address: int
    lbo: int
    sbo: int
    swizzle: MmaInputSmemSwizzle
    base_offset: int = 0

    def field_problems(self) -> list[str]:
        """One line per violated field rule, [] when the descriptor is encodable:
        start, LBO and SBO multiples of 16 in [0, 2**18), base_offset in 0..7."""
        problems = []
        for name in ("start_address", "lbo", "sbo"):
            value = getattr(self, name)
            if value % CORE_ROW:
                problems.append(f"{name} {value:#x} is not a multiple of 16 bytes")
            if not 0 <= value < FIELD_LIMIT:
                problems.append(f"{name} {value:#x} is outside [0, 2**18)")
        if not 0 <= self.base_offset <= 7:
            problems.append(f"base_offset {self.base_offset} is outside 0..7")
        return problems

    def encode(self) -> int:
        """The 64-bit descriptor wgmma takes. A field out of range is a generator bug: the
        masks would silently drop its bits, so it raises instead."""
        problems = self.field_problems()
        if problems:
            raise InternalError(f"wgmma descriptor {self}: {'; '.join(problems)}")
        return ((self.start_address & 0x3FFFF) >> 4
                | ((self.lbo & 0x3FFFF) >> 4) << 16
                | ((self.sbo & 0x3FFFF) >> 4) << 32
                | self.base_offset << 49
                | self.swizzle.value << 62)
