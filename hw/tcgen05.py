"""Tensor memory's addresses and the tcgen05.ld/st data-path patterns: which (lane, column)
each thread's register touches, relative to the warp's base address, and how elements of 8, 16,
32 or 64 bits pack into the 32-bit columns and registers. Formulas from PTX ISA 9.7.16.1.1
(addresses) and 9.7.16.8 (tcgen05.ld / tcgen05.st data-path shapes) and CUTLASS copy_traits_sm100."""

from __future__ import annotations

import enum
from dataclasses import dataclass

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
