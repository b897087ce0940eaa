"""Vector accesses: a statement whose loop domain ends in a Vectorize axis moves the axis'
elements with one instruction per shared- or global-memory operand.

That needs, for every such operand, a legal width (2, 4, 8 or 16 bytes: one ld/st.v* or a
32/64/128-bit scalar access; checked here, structurally) and consecutive, aligned elements
along the axis (offset(v + 1) == offset(v) + 1 and offset(0) a multiple of the width, at
every point: proved by the verifier with z3, VECTORIZE-CONTIGUOUS). A register operand is
accessed element by element where its offset is not `rest + v` or its width is not legal:
registers have no vector instruction, so any layout works. The code generator emits one
access per shared/global operand for every verified vector (codegen/lower/statements.py): a
vector the user asked for is never silently unrolled.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Mapping

from .expr import Expr, add, floordiv, mod, mul, var
from .simplify import multiple_of
from .types import DataType, MemoryType

VECTOR_BYTES = (2, 4, 8, 16)  # widths of one vector access (PTX ld/st .v2/.v4 of 8..32-bit words)


class VectorProblem(enum.Enum):
    CONTIGUOUS = "VECTORIZE-CONTIGUOUS"
    WIDTH = "VECTORIZE-WIDTH"


@dataclass(frozen=True)
class VectorOperand:
    tensor: str
    memory: MemoryType
    dtype: DataType
    offset: Expr  # simplified, over the statement's loop indices


@dataclass(frozen=True)
class Finding:
    problem: VectorProblem
    operand: VectorOperand
    bytes: int


def unit_stride(offset: Expr, name: str) -> bool:
    """offset == rest + name, with `name` nowhere in rest."""
    v = var(name)
    if offset == v:
        return True
    if offset.op != "add" or v not in offset.args:
        return False
    return all(a == v or name not in a.free_vars() for a in offset.args) and offset.args.count(v) == 1


def peel_vector(offset: Expr, name: str, n: int, steps: Mapping[str, int] | None = None) -> Expr:
    """offset with the vector index `name` (0 <= name < n) taken out of the divisions and modulos
    that split it off a multiple of n: (A + v) // d = A // d and (A + v) % d = A % d + v when n
    divides A and d (A = n a: floor((n a + v) / (n e)) = floor(a / e), and the remainder is
    (n a) % d + v < d). Indices are non-negative. What the merge-then-split of a vectorized tile
    leaves in an offset, decided without a solver. `steps`: symbols admitted only at multiples
    of a step (fusion.assume("N % 4 == 0")), so that a promoted vector's (n a + v) % N peels too."""
    v = var(name)

    def peel(e: Expr) -> Expr:
        if not e.args or name not in e.free_vars():
            return e
        args = tuple(peel(a) for a in e.args)
        # a divisor that is a constant or an extent symbol (steps names symbols only): positive
        if e.op in ("floordiv", "mod") and args[1].op in ("const", "var") and multiple_of(args[1], n, steps):
            x = args[0]
            if x.op == "add" and x.args.count(v) == 1:
                rest = [a for a in x.args if a != v]
                if all(name not in a.free_vars() for a in rest) and all(multiple_of(a, n, steps) for a in rest):
                    base = add(*rest)
                    return floordiv(base, args[1]) if e.op == "floordiv" else add(mod(base, args[1]), v)
        if e.op == "add":
            return add(*args)
        if e.op == "mul":
            return mul(*args)
        return Expr(e.op, args, e.value)

    return peel(offset)


def per_element(o: VectorOperand, name: str, n: int) -> bool:
    """A register operand the vector moves element by element (not contiguous along `name`,
    or not a legal vector width)."""
    return o.memory is MemoryType.Local and (not unit_stride(o.offset, name) or n * o.dtype.bytes not in VECTOR_BYTES)


def vector_findings(operands: list[VectorOperand], n: int) -> list[Finding]:
    """Shared/global operands whose `n` elements are not one legal access width ([] when all are)."""
    if n == 1:
        return []  # one element: a scalar access
    return [Finding(VectorProblem.WIDTH, o, n * o.dtype.bytes) for o in operands
            if o.memory is not MemoryType.Local and n * o.dtype.bytes not in VECTOR_BYTES]

