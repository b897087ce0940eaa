"""C++ for ldmatrix / stmatrix: one MatrixCopy (codegen/lower/ldsm.py) as inline PTX
(.sync.aligned.m8n8.x{1,2,4}.shared.b16) with the lane's row address and its registers.
32-bit elements (an ldmatrix of float32) use the same .b16 instruction: register i is one element.
Index math is rendered by the emitter's `x` (codegen/emit/__init__.py, cuda_expr.py)."""

from __future__ import annotations

from typing import Callable

from ...model.expr import Expr
from ..ir import MatrixCopy


def matrix_copy(n: MatrixCopy, x: Callable[[Expr], str]) -> list[str]:
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
