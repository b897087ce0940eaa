"""32-bit index math where it is proved enough.

Every index, bound and predicate of a kernel is an Expr rendered as C++ unsigned arithmetic
(codegen/emit/cuda_expr.py). 64-bit arithmetic is always safe; 32-bit arithmetic gives the
same values when no value the C++ computes, intermediate ones included, reaches 2^32.
This pass bounds every one of them from the ranges of the variables (loop counters below
their extents, thread and block indices below the launch, extent symbols up to the
admitted maximum that run() checks at launch) and chooses 32 bits only if all fit.
A run-time stride (a discontiguous global axis) has no bound: such kernels keep 64 bits.
"""

from __future__ import annotations

import dataclasses
import math

from ...execution.statements import Cond
from ...model.expr import Expr
from ...model.types import BLOCK_TYPES, THREAD_TYPES
from ...verifier.context import symbol_range
from ..ir import ELEMENT_VAR, Compute, KernelIR, Loop, LoopKind, ParamKind, walk

LIMIT = 1 << 32  # every value an unsigned 32-bit expression computes stays below this


def index_bits(ir: KernelIR) -> int:
    """32 when every index expression of `ir` (each subterm, as emitted) is below 2^32, else 64."""
    top = largest_index(ir)
    return 32 if top is not None and top < LIMIT else 64


def largest_index(ir: KernelIR) -> int | None:
    """The largest value any index expression of the kernel may compute (None: unbounded)."""
    ranges = _ranges(ir)
    top = 0
    for e in _exprs(ir):
        hi = _largest(e, ranges)
        if hi is None:
            return None
        top = max(top, hi)
    return top


def _ranges(ir: KernelIR) -> dict[str, int]:
    """Variable -> (its smallest value, its largest value)."""
    out: dict[str, tuple[int, int]] = {}
    for p in ir.params:
        if p.kind is ParamKind.EXTENT and p.symbol is not None:
            out[p.symbol] = symbol_range()
    launch = {**dict(zip(THREAD_TYPES, ir.block)), **dict(zip(BLOCK_TYPES, ir.grid))}
    for p, extent in launch.items():
        span = _span(extent, out)
        if span is not None:
            out[p.cuda_name] = (0, max(span[1] - 1, 0))
    algebra = {cxx: name for name, cxx in ir.names.items()}
    vector = 1
    for n in walk(ir.body):
        if isinstance(n, Loop) and n.kind in (LoopKind.SERIAL, LoopKind.UNROLL):
            span = _span(n.extent, out)
            if span is not None:
                out[algebra.get(n.var, n.var)] = (0, max(span[1] - 1, 0))
        if isinstance(n, Compute):
            vector = max(vector, n.vector)
    out[ELEMENT_VAR] = (0, vector - 1)
    return out


def _exprs(ir: KernelIR):
    """Every Expr the emitted kernel computes: in nodes (dataclass fields, nested), buffers."""
    def fields(obj):
        if isinstance(obj, Expr):
            yield obj
        elif isinstance(obj, Cond):
            yield obj.lhs
            yield obj.rhs
        elif isinstance(obj, (list, tuple)):
            for x in obj:
                yield from fields(x)
        elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            for f in dataclasses.fields(obj):
                yield from fields(getattr(obj, f.name))

    yield from fields(ir.body)
    yield from fields(ir.buffers)


def _largest(e: Expr, ranges: dict[str, tuple[int, int]]) -> int | None:
    """An upper bound on every value C++ computes for e (all values are non-negative),
    including a ceildiv's numerator a + b - 1 and the partial products and sums."""
    got = _span(e, ranges)
    return None if got is None else got[2]


def _span(e: Expr, ranges: dict[str, tuple[int, int]]) -> tuple[int, int, int] | None:
    """(smallest value, largest value, largest value computed on the way), None: unbounded."""
    if e.op == "const":
        v = int(e.value)  # type: ignore[arg-type]
        return v, v, v
    if e.op == "var":
        r = ranges.get(e.value)  # type: ignore[arg-type]
        return None if r is None else (r[0], r[1], r[1])
    spans = [_span(a, ranges) for a in e.args]
    if any(x is None for x in spans):
        return None
    los, his = [x[0] for x in spans], [x[1] for x in spans]  # type: ignore[index]
    peak = max(x[2] for x in spans)  # type: ignore[index]
    if e.op == "add":
        lo, hi = sum(los), sum(his)
    elif e.op == "mul":
        lo, hi = math.prod(los), math.prod(his)
        peak = max(peak, math.prod(max(h, 1) for h in his))  # partial products of factors >= 1 stay below
    elif e.op == "floordiv":
        lo, hi = los[0] // max(his[1], 1), his[0] // max(los[1], 1)
    elif e.op == "ceildiv":
        lo, hi = -(-los[0] // max(his[1], 1)), -(-his[0] // max(los[1], 1))
        peak = max(peak, his[0] + his[1])  # the numerator a + b - 1
    elif e.op == "mod":
        lo, hi = 0, min(his[0], max(his[1] - 1, 0))
    elif e.op == "xor":
        lo, hi = 0, (1 << max(his).bit_length()) - 1
    elif e.op == "max":
        lo, hi = max(los), max(his)
    else:
        return None  # an op this bound does not know: keep 64 bits
    return lo, hi, max(peak, hi)
