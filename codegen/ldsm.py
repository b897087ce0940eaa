"""Lowering ldmatrix / stmatrix (hardware.md 3; the model of verifier/rules/ldsm.py).

The issuing tensor's statement is built as for a copy; its Vectorize axis (2, 4 or 8 16-bit
elements per lane: .x1, .x2, .x4) becomes the instruction's registers. Lane T supplies the
address of row T%8 of matrix T/8: the schedule's shared offset E(t, v) at the lane
t = 4*(T%8) of its own warp and element v = 2*(T/8), which is what LDSM-THREAD-ROWS,
LDSM-ALIGNMENT and LDSM-REGISTER-LAYOUT proved to be the hardware's fragment layout.
"""

from __future__ import annotations

from ..model.expr import Expr, add, const, floordiv, mod, mul, substitute, var
from ..model.indexing import linear_thread, thread_env
from ..model.tensor import TensorView
from ..model.types import LoadStoreOpType
from .errors import UnsupportedSchedule
from .kernel_ir import Compute, MatrixCopy, Operand
from .predicates import always_equal
from .simplify import simplify

NUM = {2: 1, 4: 2, 8: 4}  # 16-bit elements per lane -> matrices


def is_ldsm(tv: TensorView) -> bool:
    op = tv.definition
    return op is not None and op.kind == "load_store" and op.op_type in (LoadStoreOpType.LdMatrix,
                                                                         LoadStoreOpType.StMatrix)


def lane_address(offset: Expr, vector_var: str, block: tuple[Expr, Expr, Expr], ranges) -> Expr:
    """E(4*(T%8) of this warp, 2*(T/8)) for this lane T, with E the element offset `offset`."""
    tid = linear_thread(block)
    lane = mod(tid, 32)
    row_owner = add(mul(floordiv(tid, 32), 32), mul(mod(lane, 8), 4))
    env = {**thread_env(row_owner, block), vector_var: mul(floordiv(lane, 8), 2)}
    return simplify(substitute(offset, env), ranges)


def matrix_copy(tv: TensorView, stmt: Compute, vector_var: str, elements: int, block, ranges) -> MatrixCopy:
    """The instruction for tv's statement (not yet vectorized: operands at element `vector_var`)."""
    op = tv.definition
    name = "ldmatrix" if op.op_type is LoadStoreOpType.LdMatrix else "stmatrix"
    if elements not in NUM or stmt.out.dtype.bytes != 2:
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

    return MatrixCopy(name, NUM[elements], first(stmt.out), [first(stmt.ins[0])], simplify(address, ranges),
                      stmt.comment)


def emit(n: MatrixCopy, x) -> list[str]:
    words = f"reinterpret_cast<unsigned*>(&{n.regs.tensor}[{x(n.regs.offset)}])"
    address = f"tp_smem({n.smem.tensor}) + (unsigned){x(n.address)}"
    lines = [f"unsigned* tp_regs = {words};"]
    if n.instruction == "ldmatrix":
        regs = ", ".join(f"%{k}" for k in range(n.num))
        outs = ", ".join(f'"=r"(tp_regs[{k}])' for k in range(n.num))
        lines.append(f'asm volatile("ldmatrix.sync.aligned.m8n8.x{n.num}.shared.b16 {{{regs}}}, [%{n.num}];" '
                     f': {outs} : "r"({address}) : "memory");')
    else:
        ins = ", ".join(f'"r"(tp_regs[{k}])' for k in range(n.num))
        operands = ", ".join(f"%{k + 1}" for k in range(n.num))
        lines.append(f'asm volatile("stmatrix.sync.aligned.m8n8.x{n.num}.shared.b16 [%0], {{{operands}}};" '
                     f':: "r"({address}), {ins} : "memory");')
    return ["{"] + [f"  {line}" for line in lines] + ["}"]
