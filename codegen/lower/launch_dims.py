"""A symbolic launch dimension, read from the hardware instead of computed.

A row softmax over N elements launches ceil(ceil(N / 8) / 2) threads a block, and its predicates
and offsets repeat that expression, ((((s_N + 8 - 1) / 8) + 2 - 1) / 2), in every element. The
kernel already holds the value: blockDim.x. The pass `read_launch_dims` replaces each subterm
structurally equal to a computed KernelIR.block[i] (or grid[i]; a constant or a bare extent
parameter is cheaper as it is) by the variable blockDim.x,
y, z (or gridDim.x, y, z). It is exact by construction: Kernel._config (codegen/compile.py)
launches with grid and block evaluated from these same Expr trees, KernelIR.grid and
KernelIR.block, at the bound sizes, and refuses sizes whose dimensions exceed the target's
limits rather than clamping them, so blockDim and gridDim hold exactly those values. The
index-width analysis gives each variable the range of its expression (lower/index_width.py); the
emitter reads them in the index type (codegen/emit), since gridDim.x * blockDim.x of two 32-bit
builtins could wrap where a 64-bit kernel's values pass 2^32.

A thread or block loop's extent, printed only in its comment, keeps its expression.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from ...model.expr import Expr, var
from ..ir import BLOCK_DIMS, GRID_DIMS, KernelIR, Loop, LoopKind

IR_MODULES = ("tileproof.codegen.", "tileproof.execution.")  # the node types whose Exprs the kernel renders


def launch_dim_vars(ir: KernelIR) -> dict[Expr, str]:
    """Each launch dimension of `ir` that the kernel would compute (neither a constant nor a bare
    extent parameter) -> the variable that reads it (blockDim.x, ...), block before grid and x
    before y before z where two are the same tree."""
    out: dict[Expr, str] = {}
    for dims, names in ((ir.block, BLOCK_DIMS), (ir.grid, GRID_DIMS)):
        for extent, name in zip(dims, names):
            if extent.op not in ("const", "var"):
                out.setdefault(extent, name)
    return out


def read_launch_dims(st) -> None:
    """The pass: every subterm of the kernel body equal to a symbolic launch dimension becomes it."""
    ir: KernelIR = st.kernel
    dims = launch_dim_vars(ir)
    if dims:
        ir.body = map_exprs(ir.body, lambda e: _replaced(e, dims))
        ir.names.update({name: name for name in dims.values()})


def _replaced(e: Expr, dims: dict[Expr, str]) -> Expr:
    if e in dims:
        return var(dims[e])
    if e.op in ("const", "var"):
        return e
    args = tuple(_replaced(a, dims) for a in e.args)
    return e if args == e.args else Expr(e.op, args, e.value)


def map_exprs(obj, f: Callable[[Expr], Expr]):
    """obj with f applied to every Expr in it: lists, tuples and the dataclasses of the kernel IR
    (nodes, conditions, operands), nested; an object nothing in which changes is returned as is.
    A thread or block loop's extent (its comment) is left."""
    if isinstance(obj, Expr):
        return f(obj)
    if isinstance(obj, (list, tuple)):
        items = [map_exprs(x, f) for x in obj]
        if all(a is b for a, b in zip(items, obj)):
            return obj
        return items if isinstance(obj, list) else tuple(items)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type) and type(obj).__module__.startswith(IR_MODULES):
        changes = {}
        for field in dataclasses.fields(obj):
            if not field.init or (isinstance(obj, Loop) and field.name == "extent"
                                  and obj.kind in (LoopKind.THREAD, LoopKind.BLOCK)):
                continue
            value = getattr(obj, field.name)
            mapped = map_exprs(value, f)
            if mapped is not value:
                changes[field.name] = mapped
        return dataclasses.replace(obj, **changes) if changes else obj
    return obj
