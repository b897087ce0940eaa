"""Scalar arithmetic on extents: nvFuser's scalar Vals (`castOp(DataType::Double, extent)`,
`mul(scalar, extent)`, `reciprocal(scalar)`) as a small frozen tree the kernel computes from its
size parameters and an op takes as a value operand (model/fusion.py Scalar).

Integer arithmetic of extents (add, sub, mul) stays an index Expr (model/expr.py), as tp.extent
gives; a float anywhere makes a ScalarValue of float32 or float64, its operands converted to that
type as nvFuser's scalar promotion does (a Python float is a Double scalar). Each node rounds to
its dtype (codegen/runtime/reference.py scalar_value_at computes the same in float64).
Imports model only."""

from __future__ import annotations

import math
import numbers
import struct
from dataclasses import dataclass
from typing import Mapping

import sympy

from .errors import ScheduleError
from .expr import Expr, add, as_expr, from_sympy, mul, substitute
from .types import DataType, as_dtype, float32, float64, int64

SCALAR_OPS = ("add", "sub", "mul", "div")
_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
SCALAR_DTYPES = (float32, float64, int64)


@dataclass(frozen=True)
class ScalarValue:
    """One node of a float scalar computed in the kernel: `op` is "extent" (`value` an int Expr
    of extents, signed 64-bit), "number" (`value` a float already in `dtype`), "cast" (args[0]
    converted to `dtype`) or one of SCALAR_OPS (two args, both of `dtype`)."""

    op: str
    dtype: DataType
    args: tuple["ScalarValue", ...] = ()
    value: Expr | float | None = None

    def free_vars(self) -> frozenset[str]:
        if self.op == "extent":
            return self.value.free_vars()  # type: ignore[union-attr]
        out: frozenset[str] = frozenset()
        for a in self.args:
            out |= a.free_vars()
        return out

    def extents(self) -> list[Expr]:
        """The extent Exprs at the leaves (model/ops.py checks each fits int64)."""
        if self.op == "extent":
            return [self.value]  # type: ignore[list-item]
        return [e for a in self.args for e in a.extents()]

    def substitute(self, env: Mapping[str, Expr]) -> "ScalarValue":
        if self.op == "extent":
            return ScalarValue("extent", self.dtype, (), substitute(self.value, env))  # type: ignore[arg-type]
        return ScalarValue(self.op, self.dtype, tuple(a.substitute(env) for a in self.args), self.value)

    def __str__(self) -> str:
        if self.op in ("extent", "number"):
            return str(self.value)
        if self.op == "cast":
            return f"{self.dtype}({self.args[0]})"
        return f"({self.args[0]} {_SYMBOLS[self.op]} {self.args[1]})"


def as_extent(x) -> Expr | None:
    """x as an int Expr of extents where it is one (an Expr, IterDomain.extent's sympy
    expression, an int), else None."""
    if isinstance(x, Expr):
        return x
    if isinstance(x, sympy.Basic):
        try:
            return from_sympy(x)
        except ValueError as e:
            raise ScheduleError(f"{x} is not an extent: {e}") from None
    if isinstance(x, numbers.Integral) and not isinstance(x, bool):
        return as_expr(int(x))
    return None


def is_scalar_operand(x) -> bool:
    """Whether x takes part in scalar arithmetic: an extent, a ScalarValue or a number."""
    return (isinstance(x, (Expr, ScalarValue, sympy.Basic)) or
            (isinstance(x, numbers.Real) and not isinstance(x, bool)))


def _float_in(value: float, dtype: DataType) -> float:
    if dtype == float32:
        try:
            return struct.unpack("f", struct.pack("f", value))[0]
        except OverflowError:
            return math.copysign(math.inf, value)
    return float(value)


def _convert(x, dtype: DataType) -> ScalarValue:
    """A scalar operand converted to the float type `dtype`."""
    if isinstance(x, ScalarValue):
        return x if x.dtype == dtype else ScalarValue("cast", dtype, (x,))
    extent = as_extent(x)
    if extent is not None and not (isinstance(x, numbers.Integral) and not isinstance(x, sympy.Basic)):
        return ScalarValue("cast", dtype, (ScalarValue("extent", int64, (), extent),))
    return ScalarValue("number", dtype, (), _float_in(float(x), dtype))


def _dtype_of(x) -> DataType | None:
    """The float type x brings to a scalar expression (None for an int or extent)."""
    if isinstance(x, ScalarValue):
        return x.dtype
    if isinstance(x, numbers.Real) and not isinstance(x, (numbers.Integral, sympy.Basic)):
        return float64  # a Python float is nvFuser's Double scalar
    return None


def scalar_binary(name: str, a, b):
    """`a name b` of two scalars (extents, numbers, ScalarValues), at least one not a plain
    number: an int Expr where both are integers (add, sub, mul), else a ScalarValue in the wider
    float type of the two (float64 for a Python float)."""
    if name not in SCALAR_OPS:
        raise ScheduleError(f"{name}: scalar arithmetic on extents takes {', '.join(SCALAR_OPS)}; {name} of "
                            f"{a} and {b} is not supported (apply it to a tensor)")
    for arg, x in (("a", a), ("b", b)):
        if isinstance(x, str):
            raise ScheduleError(f"{name}: {arg} {x!r} is a symbol's name, which an op takes only beside a tensor; in "
                                f"scalar arithmetic use the extent itself (tp.extent(tv, axis) or tv.axis(i).extent)")
        if not is_scalar_operand(x):
            raise ScheduleError(f"{name}: {arg} must be a TensorView, a number, an extent or a scalar of extents, "
                                f"got {type(x).__name__} {x!r:.60}")
    kinds = [_dtype_of(x) for x in (a, b)]
    if kinds == [None, None]:
        x, y = as_extent(a), as_extent(b)
        if name == "div":
            raise ScheduleError(f"div: integer division of extents ({a} / {b}) is not supported; convert one to a "
                                f"float type first (tp.cast({a}, tp.float64))")
        return add(x, mul(y, -1)) if name == "sub" else (add(x, y) if name == "add" else mul(x, y))
    dtype = float64 if float64 in kinds else float32
    return ScalarValue(name, dtype, (_convert(a, dtype), _convert(b, dtype)))


def scalar_cast(x, dtype) -> Expr | ScalarValue:
    """An extent or scalar converted to `dtype` (nvFuser's castOp on a scalar Val): float32 or
    float64 (a ScalarValue), or int64 of an extent (the extent itself)."""
    dtype = as_dtype(dtype)
    if dtype not in SCALAR_DTYPES:
        raise ScheduleError(f"cast: a scalar of extents ({x}) converts to float32, float64 or int64, not {dtype}")
    if dtype == int64:
        if isinstance(x, ScalarValue):
            raise ScheduleError(f"cast: {x} is {x.dtype}; a float scalar does not convert back to int64")
        return as_extent(x)  # type: ignore[return-value]
    return _convert(x, dtype)
