"""32-bit index math where it is proved enough.

Every index, bound and predicate of a kernel is an Expr rendered as C++ unsigned arithmetic
(codegen/emit/cuda_expr.py). 64-bit arithmetic is always safe; 32-bit arithmetic gives the
same values when no value the C++ computes, intermediate ones included, reaches 2^32.
This pass bounds every one of them from the ranges of the variables (loop counters below
their extents, thread and block indices below the launch, extent symbols within the admitted
range and the fusion's assumptions that bound one symbol, `N <= 8192`, both of which run()
checks at launch) and chooses 32 bits only if all fit.
A run-time stride (a discontiguous global axis) has no bound: such kernels keep 64 bits.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from ...execution.statements import Cond
from ...model.expr import Expr, const
from ...model.simplify import Ranges, Simplifier
from ...model.types import BLOCK_TYPES, THREAD_TYPES
from ...model.fusion import symbol_range
from ...model.symbol_ranges import admitted
from ..ir import ELEMENT_VAR, Compute, IndexNames, KernelIR, Loop, LoopKind, ParamKind, walk
from .launch_dims import launch_dim_vars

LIMIT = 1 << 32  # every value an unsigned 32-bit expression computes stays below this


def choose_index_width(st) -> None:
    """The pass: 32-bit index math and extent parameters where index_bits says so."""
    if index_bits(st.kernel, st.fusion.assumptions) == 32:
        st.kernel.index_bits = 32
        st.kernel.params = [dataclasses.replace(p, ctype="unsigned") if p.kind is ParamKind.EXTENT else p
                            for p in st.kernel.params]


def index_bits(ir: KernelIR, assumptions: Sequence = ()) -> int:
    """32 when every index expression of `ir` (each subterm, as emitted) is below 2^32 under the
    fusion's `assumptions`, else 64."""
    top = largest_index(ir, assumptions)
    return 32 if top is not None and top < LIMIT else 64


def largest_index(ir: KernelIR, assumptions: Sequence = ()) -> int | None:
    """The largest value any index expression of the kernel may compute, intermediate values
    included (model/simplify.py's peak; None: unbounded), with each extent symbol in the range
    `assumptions` that bound it alone admit (model/symbol_ranges.py)."""
    analysis = Simplifier(_ranges(ir, assumptions))
    top = 0
    for e in _exprs(ir):
        peak = analysis.bounds(e).peak
        if peak is None:
            return None
        top = max(top, peak)
    return top


def _ranges(ir: KernelIR, assumptions: Sequence = ()) -> Ranges:
    """Variable -> its range: an extent symbol its admitted values, a thread or block index and a
    loop counter below its extent, a vector's element below the widest vector, a launch dimension
    read as blockDim / gridDim (lower/launch_dims.py) and a named index term (lower/invariants.py)
    the interval of its value."""
    symbols = [p.symbol for p in ir.params if p.kind is ParamKind.EXTENT and p.symbol is not None]
    out: dict = dict(admitted({name: symbol_range() for name in symbols}, assumptions).bounds())
    launch = {**dict(zip(THREAD_TYPES, ir.block)), **dict(zip(BLOCK_TYPES, ir.grid))}
    for p, extent in launch.items():
        out[p.cuda_name] = extent
    algebra = {cxx: name for name, cxx in ir.names.items()}
    vector = 1
    for n in walk(ir.body):
        if isinstance(n, Loop) and n.kind in (LoopKind.SERIAL, LoopKind.UNROLL):
            out[algebra.get(n.var, n.var)] = n.extent
        if isinstance(n, Compute):
            vector = max(vector, n.vector)
    out[ELEMENT_VAR] = const(vector)
    extents = Simplifier(dict(out))
    for extent, name in launch_dim_vars(ir).items():  # blockDim.x: exactly its expression's values
        r = extents.bounds(extent)
        if r.lo is not None and r.hi is not None:
            out[name] = (r.lo, r.hi)
    values = Simplifier(dict(out))  # a named term reads loop counters and indices, never another name
    for n in walk(ir.body):
        if isinstance(n, IndexNames):
            for name, value in n.names:
                r = values.bounds(value)
                if r.lo is not None and r.hi is not None:
                    out[name] = (r.lo, r.hi)
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
