"""A tcgen05.mma's accumulator in tensor memory (an MmaOp on a Blackwell1CTA macro, its output a
tensor-memory tensor): where the schedule's allocation puts D's elements, the cells the hardware
writes, and the instruction's descriptor fields. One derivation for the verifier
(TCGEN05-ACCUMULATOR proves the cells equal) and the code generator (the D address it gives the
instruction, its instruction descriptor).

For each instruction instance (a point of the MmaOp's non-Mma loops) and element (m, n) of the
macro's 128 x N tile, `lane` and `column` are the schedule's: the accumulator's allocation offsets
(execution/allocation.py: the IDs left of its dimension separator make the lane, the others the
32-bit column) at the indices D's statement gives that element (execution/mma_execution.py's C
view). The hardware writes D[m, n] at lane m, column first + n from the address the instruction
is given (hw/tcgen05.py accumulator_cell), where first is the schedule's column of (0, 0).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..hw.tcgen05 import ACCUMULATOR_BYTES, InstructionDescriptor, accumulator_cell
from ..model.expr import Expr, const, floordiv, mul, substitute, var
from ..model.mma_op import ELEMENT_VARS
from ..model.tensor import TensorView
from .allocation import compute_allocation
from .indexing import linear_offset
from .mma import fragments
from .mma_execution import mma_execution

ROW, COL = "tp_m", "tp_n"  # D's element (m, n) in the instruction tile


@dataclass(frozen=True)
class AccumulatorCells:
    """MmaOp output `tv`'s tile elements (ROW, COL) at the instance of `ex` (the C view, its
    element variable replaced by ROW * N + COL): the schedule's lane and 32-bit column of each,
    and the cells the hardware writes them to from the address of element (0, 0)."""

    tv: TensorView
    ex: object  # TensorExecution
    lane: Expr
    column: Expr

    @property
    def rows(self) -> int:
        return fragments(self.tv).inst.m

    @property
    def cols(self) -> int:
        return fragments(self.tv).inst.n

    @property
    def ranges(self) -> dict[str, Expr]:
        out = {k: v for k, v in self.ex.ranges.items() if k != ELEMENT_VARS["C"]}
        return {**out, ROW: const(self.rows), COL: const(self.cols)}

    @property
    def first_lane(self) -> Expr:
        return substitute(self.lane, {ROW: const(0), COL: const(0)})

    @property
    def first_column(self) -> Expr:
        """The schedule's column of D[0, 0] at this instance: the column the instruction's D address names."""
        return substitute(self.column, {ROW: const(0), COL: const(0)})

    def hardware(self) -> tuple[Expr, Expr]:
        """(lane, column) tcgen05.mma writes D[ROW, COL] to, from a D address at (lane 0, first_column)."""
        lane, col = accumulator_cell(var(ROW), var(COL))
        return lane, self.first_column + col


def accumulator_cells(tv: TensorView, launch: dict, names: dict[int, str] | None = None) -> AccumulatorCells:
    """tv's accumulator cells (AccumulatorCells) at the instance its loop names `names` give."""
    frag = fragments(tv)
    ex = mma_execution(tv, launch, "C", names)
    element = var(ROW) * const(frag.inst.n) + var(COL)
    ex = ex.renamed({ELEMENT_VARS["C"]: element})
    alloc = compute_allocation(tv)
    lane = linear_offset(alloc.strides("lane"), ex.indices)
    column = linear_offset(alloc.strides("column"), ex.indices)
    if tv.dtype.bytes != ACCUMULATOR_BYTES:
        column = floordiv(mul(column, const(tv.dtype.bytes)), const(ACCUMULATOR_BYTES))
    return AccumulatorCells(tv, ex, lane, column)


def instruction_descriptor(tv: TensorView, majors: tuple[str, str]) -> InstructionDescriptor:
    """tv's tcgen05.mma instruction descriptor: its macro's M and N, its operands' type, and each
    operand's transpose bit from its major-ness ("K" or "MN", execution/wgmma_operands.py)."""
    macro, (a, b) = tv.definition.macro, tv.definition.inputs
    return InstructionDescriptor(macro.m, macro.n, a.dtype.name, b.dtype.name, majors[0] == "MN", majors[1] == "MN")


__all__ = ["AccumulatorCells", "COL", "ROW", "accumulator_cells", "instruction_descriptor"]
