"""Tensor memory's addresses and the tcgen05.ld/st data-path patterns: which (lane, column)
each thread's register touches, relative to the warp's base address. Formulas from PTX ISA
9.7.16.1.1 (addresses) and 9.7.16.8 (tcgen05.ld / tcgen05.st data-path shapes) and CUTLASS copy_traits_sm100."""

from __future__ import annotations

import enum

from .expr import Expr, ExprLike, add, floordiv, mod, mul

TMEM_LANE_SHIFT = 16  # a tensor-memory address holds the lane in bits 31..16, the column in bits 15..0


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
