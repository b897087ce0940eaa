"""Lowering ldmatrix / stmatrix (PTX ISA 9.7.14.5.15-16) to MatrixCopy nodes (their C++ in codegen/emit/ldsm.py).

The issuing tensor's statement is built as for a copy; its Vectorize axis (2, 4 or 8 16-bit
elements per lane, or 1, 2 or 4 32-bit ones for an ldmatrix of float32: .x1, .x2, .x4) becomes
the instruction's registers (a 32-bit .x1 has a Vectorize axis of extent 1).
Each lane supplies model/ldsm_layout.py's `supplied_address` (in the map of the element width)
of the schedule's shared offset: the very
expression LDSM-ALIGNMENT proved aligned, at a fragment layout LDSM-THREAD-ROWS and
LDSM-REGISTER-LAYOUT proved to be the hardware's.
"""

from __future__ import annotations

from ...model.expr import Expr, const, mul, substitute
from ...hw.ldmatrix import B16, WIDTHS, Layout, layout
from ...model.tensor import TensorView
from ...model.types import LoadStoreOpType
from ..errors import UnsupportedSchedule
from ..ir import Compute, Cond, MatrixCopy, Operand
from ...execution.predicates import consecutive
from ...model.simplify import simplify
from .decisions import Answers


def lane_address(offset: Expr, vector_var: str, block: tuple[Expr, Expr, Expr], ranges, L: Layout = B16) -> Expr:
    """The row address this lane supplies (ldsm_layout's Layout.supplied_address), with E the
    element offset `offset` and the element index the Vectorize loop variable `vector_var`."""
    return simplify(L.supplied_address(offset, block, lambda element: {vector_var: element}), ranges)


def matrix_copy(tv: TensorView, stmt: Compute, vector_var: str, elements: int, block, ranges,
                answers: Answers) -> MatrixCopy:
    """The instruction for tv's statement (not yet vectorized: operands at element `vector_var`);
    its registers are consecutive where verify proved so (execution/predicates.py consecutive)."""
    op = tv.definition
    name = "ldmatrix" if op.op_type is LoadStoreOpType.LdMatrix else "stmatrix"
    width = stmt.out.dtype.bytes
    if width == 4 and name == "stmatrix":
        raise UnsupportedSchedule(f"{tv.name}: stmatrix of {stmt.out.dtype}: tileproof models stmatrix for 16-bit "
                                  f"elements only (ldmatrix takes 32-bit ones); store the registers with a plain set")
    if width not in WIDTHS or stmt.ins[0].dtype.bytes != width or elements not in layout(width).matrices:
        raise UnsupportedSchedule(f"{tv.name}: {name} moves 2, 4 or 8 16-bit elements per lane (ldmatrix: or 1, 2 "
                                  f"or 4 32-bit ones); the schedule gives {elements} of {stmt.out.dtype}")
    L = layout(width)
    smem, regs = (stmt.ins[0], stmt.out) if name == "ldmatrix" else (stmt.out, stmt.ins[0])
    address = mul(lane_address(smem.offset, vector_var, block, ranges, L), smem.dtype.bytes)
    fixed = {vector_var: const(0)}
    decided = answers.decided(consecutive(regs.offset, vector_var, ranges)) if elements > 1 else True
    if decided is None:
        raise UnsupportedSchedule(f"{tv.name}: no decision of tp.verify says whether the {elements} elements a lane "
                                  f"gives {name} are consecutive in {regs.tensor}'s registers (it decides when every "
                                  f"rule runs); a warp-collective instruction cannot be predicated per lane")
    if not decided:
        raise UnsupportedSchedule(f"{tv.name}: the {elements} elements a lane gives {name} are not consecutive in "
                                  f"{regs.tensor}'s registers; allocate its Vectorize axis innermost")

    def first(o: Operand) -> Operand:
        return Operand(o.tensor, o.memory, o.dtype, simplify(substitute(o.offset, fixed), ranges))

    # LDSM-THREAD-ROWS proved that a lane executes it only where its whole warp does (every element):
    # the predicates, a block past M say, hold in all lanes or in none, so they guard the instruction
    conds = [Cond(simplify(substitute(c.lhs, fixed), ranges), c.op, c.rhs, c.why, c.kind) for c in stmt.conds]
    return MatrixCopy(name, L.matrices[elements], first(stmt.out), [first(stmt.ins[0])], simplify(address, ranges),
                      stmt.comment, conds)

