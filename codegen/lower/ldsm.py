"""Lowering ldmatrix / stmatrix (PTX ISA 9.7.14.5.15-16) to MatrixCopy nodes (their C++ in codegen/emit/ldsm.py).

The issuing tensor's statement is built as for a copy; its Vectorize axis (2, 4 or 8 16-bit
elements per lane: .x1, .x2, .x4) becomes the instruction's registers. Each lane supplies
model/ldsm_layout.py's `supplied_address` of the schedule's shared offset: the very
expression LDSM-ALIGNMENT proved aligned, at a fragment layout LDSM-THREAD-ROWS and
LDSM-REGISTER-LAYOUT proved to be the hardware's.
"""

from __future__ import annotations

from ...model.expr import Expr, add, const, mul, substitute, var
from ...model.ldsm_layout import ELEMENT_BYTES, MATRICES, supplied_address
from ...model.tensor import TensorView
from ...model.types import LoadStoreOpType, OpKind
from ..errors import UnsupportedSchedule
from ..ir import Compute, MatrixCopy, Operand
from .predicates import always_equal
from ...model.simplify import simplify

def is_ldsm(tv: TensorView) -> bool:
    op = tv.definition
    return op is not None and op.kind is OpKind.LOAD_STORE and op.op_type in (LoadStoreOpType.LdMatrix,
                                                                         LoadStoreOpType.StMatrix)


def lane_address(offset: Expr, vector_var: str, block: tuple[Expr, Expr, Expr], ranges) -> Expr:
    """The row address this lane supplies (ldsm_layout.supplied_address), with E the element
    offset `offset` and the element index the Vectorize loop variable `vector_var`."""
    return simplify(supplied_address(offset, block, lambda element: {vector_var: element}), ranges)


def matrix_copy(tv: TensorView, stmt: Compute, vector_var: str, elements: int, block, ranges) -> MatrixCopy:
    """The instruction for tv's statement (not yet vectorized: operands at element `vector_var`)."""
    op = tv.definition
    name = "ldmatrix" if op.op_type is LoadStoreOpType.LdMatrix else "stmatrix"
    if elements not in MATRICES or stmt.out.dtype.bytes != ELEMENT_BYTES:
        raise UnsupportedSchedule(f"{tv.name}: {name} moves 2, 4 or 8 16-bit elements per lane; the schedule gives "
                                  f"{elements} of {stmt.out.dtype}")
    if stmt.conds:
        raise UnsupportedSchedule(
            f"{tv.name}: {name} is warp-collective but the schedule predicates it "
            f"({', '.join(c.why for c in stmt.conds)}); make the tile divide the tensor")
    smem, regs = (stmt.ins[0], stmt.out) if name == "ldmatrix" else (stmt.out, stmt.ins[0])
    address = mul(lane_address(smem.offset, vector_var, block, ranges), smem.dtype.bytes)
    start = substitute(regs.offset, {vector_var: const(0)})
    if not always_equal(regs.offset, add(start, var(vector_var)), tv.fusion, None, ranges):
        raise UnsupportedSchedule(f"{tv.name}: the {elements} elements a lane gives {name} are not consecutive in "
                                  f"{regs.tensor}'s registers; allocate its Vectorize axis innermost")

    def first(o: Operand) -> Operand:
        return Operand(o.tensor, o.memory, o.dtype, simplify(substitute(o.offset, {vector_var: const(0)}), ranges))

    return MatrixCopy(name, MATRICES[elements], first(stmt.out), [first(stmt.ins[0])], simplify(address, ranges),
                      stmt.comment)

