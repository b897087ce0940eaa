"""Tensor creation and the ops of a fusion (set / load-store, unary, binary,
broadcast, transpose). Every op creates fresh logical IterDomains for its output
and records which input axis each output axis reads."""

from __future__ import annotations

from typing import TYPE_CHECKING

import math
import numbers
import struct
from typing import Sequence

import sympy

from .errors import ScheduleError
from .expr import Expr, const
from .extent_unification import unify_extents
from .fusion import Op, Scalar, symbol_range
from .iterdomain import IterDomain, as_index, wrong_enum
from .reduction import cache_before, element_axes
from .scalar_value import ScalarValue, as_extent, is_scalar_operand, scalar_binary, scalar_cast
from .simplify import bounds
from .tensor_base import TensorBase, check_tensor
from .types import (DTYPES, CacheOp, DataType, IterType, LoadStoreOpType, OpKind, as_dtype, bool_, float64,
                    promote_types)

if TYPE_CHECKING:
    from .tensor import TensorView


def _check_dtype(func: str, dtype) -> DataType:
    if not isinstance(dtype, DataType) and not (isinstance(dtype, str) and dtype in DTYPES):
        raise ScheduleError(f"{func}: unknown dtype {dtype!r} for dtype; expected tp.float32 or one of "
                            f"{', '.join(DTYPES)}")
    return as_dtype(dtype)


def _like(src: TensorView, dtype: DataType | None = None, order: Sequence[int] | None = None) -> TensorView:
    order = element_axes(src) if order is None else list(order)  # a reduced axis is not in the shape
    ids = [IterDomain(src.logical[k].extent_expr, number=src.fusion.next_iterdomain_number(),
                      iter_type=src.logical[k].iter_type) for k in order]
    return src.new_tensor(ids, dtype or src.dtype)


def set(tv: TensorView, op: LoadStoreOpType = LoadStoreOpType.Set,  # noqa: A001 - nvFuser's name
        cache_op: CacheOp = CacheOp.Unspecified) -> TensorView:
    """A copy of `tv` (a new tensor of the same shape and dtype); `op` (tp.LoadStoreOpType)
    names the instruction the copy becomes: Set, TMA, LdMatrix, StMatrix, TMemLoad, TMemStore,
    CpAsync. `cache_op` (tp.CacheOp) picks cp.async's `.ca` (AllLevels) or `.cg` (Global);
    Unspecified takes `.cg` for 16-byte copies and `.ca` otherwise. A plain copy (Set) of a
    fusion input takes AllLevels, Global or Streaming: ld.global.ca / .cg / .cs. nvFuser: set(tv)
    and LoadStoreOp(op_type, out, in, cache_op).

        t1 = tp.set(t0, op=tp.LoadStoreOpType.TMA)   # global -> shared by TMA"""
    check_tensor("set", tv)
    if not isinstance(op, LoadStoreOpType):
        raise wrong_enum("set", "op", LoadStoreOpType, op)
    check_cache_op("set", op, cache_op)
    out = _like(tv)
    tv.fusion._register_op(Op(OpKind.LOAD_STORE, [tv], out, [element_axes(tv)], name="set", op_type=op,
                              cache_op=cache_op))
    return out


def check_cache_op(func: str, op: LoadStoreOpType, cache_op) -> None:
    """A cache op is a tp.CacheOp; only cp.async (.ca, .cg) and a plain Set (ld.global.ca, .cg,
    .cs) take one other than Unspecified (nvFuser's LoadStoreOp constructor)."""
    if not isinstance(cache_op, CacheOp):
        raise wrong_enum(func, "cache_op", CacheOp, cache_op)
    if cache_op is CacheOp.Unspecified or op is LoadStoreOpType.Set:
        return
    if op is not LoadStoreOpType.CpAsync:
        raise ScheduleError(f"{func}: cache_op {cache_op.name} is for op=tp.LoadStoreOpType.Set (ld.global) or "
                            f"CpAsync (cp.async); a {op.value} copy takes no cache op")
    if cache_op is CacheOp.Streaming:
        raise ScheduleError(f"{func}: cp.async takes cache_op AllLevels (.ca) or Global (.cg), got Streaming "
                            f"(.cs is for a plain load, op=tp.LoadStoreOpType.Set)")


def transpose(tv: TensorView, dim0: int, dim1: int) -> TensorView:
    """A copy of `tv` with logical axes dim0 and dim1 swapped (negative counts from the end).
    nvFuser: transpose(tv, dim0, dim1).

        t1 = tp.transpose(t0, 0, 1)   # [M, N] -> [N, M]"""
    check_tensor("transpose", tv)
    axes = element_axes(tv)
    n = len(axes)
    for arg, d in (("dim0", dim0), ("dim1", dim1)):
        if as_index(d) is None:
            raise ScheduleError(f"transpose: {arg} must be an int, got {type(d).__name__} {d!r}")
        if not -n <= as_index(d) < n:
            raise ScheduleError(f"transpose: {arg} {d!r} is out of range for {tv.name} with {n} dimensions")
    order = list(axes)
    a, b = as_index(dim0) % n, as_index(dim1) % n
    order[a], order[b] = order[b], order[a]
    out = _like(tv, order=order)
    tv.fusion._register_op(Op(OpKind.TRANSPOSE, [tv], out, [order], name="transpose"))
    return out


def broadcast(tv: TensorView, is_broadcast_dim: Sequence[bool]) -> TensorView:
    """A copy of `tv` with new broadcast axes (extent 1) where `is_broadcast_dim` is True; the
    False entries take tv's axes in order. nvFuser: broadcast(tv, is_broadcast_dim).

        t1 = tp.broadcast(t0, [False, True])   # [N] -> [N, b1], to add to an [N, K] tensor"""
    check_tensor("broadcast", tv)
    if not isinstance(is_broadcast_dim, (list, tuple)) or not all(isinstance(f, bool) for f in is_broadcast_dim):
        raise ScheduleError(f"broadcast: is_broadcast_dim must be a list of True / False, one per output axis, "
                            f"got {is_broadcast_dim!r}")
    flags = list(is_broadcast_dim)
    axes = element_axes(tv)
    if sum(1 for f in flags if not f) != len(axes):
        raise ScheduleError(
            f"broadcast: {len(flags) - sum(flags)} non-broadcast entries for {tv.name} with {len(axes)} dimensions"
        )
    ids, mapping, k = [], [], 0
    for f in flags:
        if f:
            ids.append(IterDomain(const(1), number=tv.fusion.next_iterdomain_number(), iter_type=IterType.Broadcast))
            mapping.append(None)
        else:
            src = tv.logical[axes[k]]
            ids.append(IterDomain(src.extent_expr, number=tv.fusion.next_iterdomain_number(), iter_type=src.iter_type))
            mapping.append(axes[k])
            k += 1
    out = tv.new_tensor(ids, tv.dtype)
    tv.fusion._register_op(Op(OpKind.BROADCAST, [tv], out, [mapping], name="broadcast"))
    return out


# nvFuser's UnaryOpType / BinaryOpType names (csrc/ops/arith.h). FLOAT_UNARY ops take a
# floating-point tensor only (tileproof does not promote an integer to float, nvFuser would):
# each is emitted as the CUDA function of nvFuser's runtime (codegen/emit/scalar_types.py), in
# float for the 16-bit types.
FLOAT_UNARY = ("exp", "exp2", "expm1", "log", "log2", "log1p", "sqrt", "rsqrt", "reciprocal", "tanh", "erf", "erfc",
               "sigmoid", "silu", "sin", "cos", "floor", "ceil")
UNARY = ("neg", "abs", "relu", *FLOAT_UNARY, "logical_not")
ARITHMETIC_BINARY = ("add", "sub", "mul", "div", "maximum", "minimum", "pow", "fmod")
FLOAT_BINARY = ("pow",)
COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")  # two operands of one dtype -> a bool tensor
LOGICAL = ("logical_and", "logical_or", "logical_not")  # bool operands -> a bool tensor
BINARY = (*ARITHMETIC_BINARY, *COMPARISONS, "logical_and", "logical_or")
# the unsigned 64-bit extent an op may take as a value (tp.extent, a symbol name): products and
# sums of extents, printed as signed 64-bit C++ (codegen/emit/scalar_types.py extent_value)
EXTENT_VALUE_OPS = ("const", "var", "add", "mul", "max")


def output_dtype(name: str, dtype: DataType) -> DataType:
    """The dtype of a unary or binary op `name` on operands of `dtype`: bool for comparisons and
    logical ops, the operands' otherwise."""
    return bool_ if name in COMPARISONS or name in LOGICAL else dtype


def _check_operand_dtype(name: str, tv: TensorView, arg: str) -> None:
    """A ScheduleError where op `name` is not defined on tv's dtype."""
    dtype = tv.dtype
    if name in LOGICAL:
        if not dtype.is_bool:
            raise ScheduleError(f"{name}: {arg} ({tv.name}) is {dtype}; {name} takes bool tensors (a comparison's "
                                f"output: tp.gt(t, 0)), or compare first (tp.ne({tv.name}, 0))")
        return
    if dtype.is_bool and name not in ("eq", "ne"):
        raise ScheduleError(f"{name}: {arg} ({tv.name}) is bool; {name} takes numbers: cast it first "
                            f"(tp.cast({tv.name}, tp.float32)), or use tp.where / tp.logical_and")
    if not dtype.is_float and (name in FLOAT_UNARY or name in FLOAT_BINARY):
        raise ScheduleError(f"{name}: {arg} ({tv.name}) is {dtype}; {name} is computed on floating-point types "
                            f"only (tileproof does not promote): cast it first (tp.cast({tv.name}, tp.float32))")


def unary(name: str, tv: TensorView) -> TensorView:
    """Elementwise `name` of tv (nvFuser's unaryOp): a new tensor of tv's shape, of tv's dtype
    (bool for logical_not)."""
    check_tensor(name, tv, "a")
    if name not in UNARY:
        raise ScheduleError(f"unknown unary op {name!r}; supported: {', '.join(UNARY)}")
    _check_operand_dtype(name, tv, "a")
    out = _like(tv, output_dtype(name, tv.dtype))
    tv.fusion._register_op(Op(OpKind.UNARY, [tv], out, [element_axes(tv)], name=name))
    return out


def cast(tv: TensorView, dtype) -> TensorView:
    """A copy of `tv` whose values are converted to `dtype` (a tp.DataType or its name), with
    C++ / CUDA conversion semantics: to a float type, rounded to nearest even (inf and NaN stay,
    an overflow becomes inf); from a float to an integer, truncated toward zero, saturated to the
    integer's range (as PTX cvt.rzi does), NaN to 0; between integers, the low bits kept (two's
    complement wrap). A cast to tv's own dtype is tp.set(tv), as in nvFuser.
    nvFuser: castOp(dtype, tv).

        t1 = tp.cast(t0, tp.bfloat16)   # float32 -> bfloat16, round to nearest even"""
    if not isinstance(tv, (TensorBase, str)) and is_scalar_operand(tv) and not isinstance(tv, numbers.Real):
        return scalar_cast(tv, _check_dtype("cast", dtype))  # castOp of a scalar Val: an extent's value
    check_tensor("cast", tv)
    dtype = _check_dtype("cast", dtype)
    if dtype == tv.dtype:
        return set(tv)
    out = _like(tv, dtype)
    tv.fusion._register_op(Op(OpKind.CAST, [tv], out, [element_axes(tv)], name="cast"))
    return out


_INT_RANGE = {"int32": (-2**31, 2**31 - 1), "int64": (-2**63, 2**63 - 1)}


def _scalar_value(op: str, arg: str, number, dtype: DataType) -> int | float:
    """`number` converted to dtype's compute type, or a ScheduleError naming the argument."""

    if isinstance(number, bool):
        raise ScheduleError(f"{op}: {arg} is a bool ({number!r}); tileproof has no bool dtype: pass "
                            f"{int(number)} or {float(number)}")
    if not isinstance(number, numbers.Real):
        raise ScheduleError(f"{op}: expected a TensorView or a number (int, float) for {arg}, got "
                            f"{type(number).__name__} {number!r:.60}")
    compute = dtype.compute
    if compute.is_integer:
        if not isinstance(number, numbers.Integral):
            raise ScheduleError(
                f"{op}: {arg} is the float {number!r} but the tensor is {dtype}; tileproof does not promote "
                f"(nvFuser would make the result float): pass an int, or cast the tensor first "
                f"(tp.cast(t, tp.float32))")
        lo, hi = _INT_RANGE[compute.name]
        if not lo <= int(number) <= hi:
            raise ScheduleError(f"{op}: {arg} {int(number)} is out of range for {dtype} arithmetic, which is done "
                                f"in {compute} ({lo} .. {hi})")
        return int(number)
    try:
        value = float(number)
        if compute.bytes == 4:
            value = struct.unpack("f", struct.pack("f", value))[0]  # rounded to float32, nearest even
    except OverflowError:
        value = None
    if value is None or (math.isinf(value) and not math.isinf(float(number))):
        raise ScheduleError(f"{op}: {arg} {number!r:.60} overflows {compute}, the type {dtype} arithmetic is done in")
    return value


def is_operand_value(x) -> bool:
    """Whether x is a value an op takes beside its tensors: a number, an extent symbol's name, an
    extent (tp.extent, IterDomain.extent) or a scalar of extents (model/scalar_value.py)."""
    return isinstance(x, str) or is_scalar_operand(x)


def _extent_value(op: str, arg: str, extent, tv: TensorView) -> Expr:
    """An extent operand (a symbol name of tv's fusion, or an Expr of extents: tp.extent) as the
    Expr the kernel computes; it must fit tv's compute type, or int64 for a float type (the
    kernel forms it in 64 bits and converts it once)."""
    fusion = tv.fusion
    if isinstance(extent, str):
        if extent not in fusion.symbols and extent not in fusion.extent_aliases:
            known = ", ".join(fusion.symbols) or "none"
            raise ScheduleError(f"{op}: {arg} {extent!r} is no extent symbol of this fusion (its symbols: {known})")
        value = fusion.extent(extent)
    else:
        value = extent
    bad = [e.op for e in _subterms(value) if e.op not in EXTENT_VALUE_OPS]
    unknown = [v for v in sorted(value.free_vars()) if v not in fusion.symbols]
    if bad or unknown:
        raise ScheduleError(f"{op}: {arg} {value} is not an extent of this fusion (a product or sum of its extent "
                            f"symbols and ints, as tp.extent gives)")
    compute = tv.dtype.compute
    high = _INT_RANGE["int32" if compute.name == "int32" else "int64"][1]
    span = bounds(value, {s: symbol_range() for s in fusion.symbols})
    top = None if span.lo is None or span.lo < -high else span.hi  # peak: products of sums past the ends
    if top is None or top > high or (span.peak is not None and span.peak > high):
        raise ScheduleError(f"{op}: {arg} {value} may reach {top if top is not None else 'an unbounded value'}, more "
                            f"than {compute if compute.is_integer else 'int64'} holds ({high}); "
                            f"{'cast the tensor to int64 or float' if compute.is_integer else 'use fewer extents'}")
    return value


def _scalar_of_extents(op: str, arg: str, value: ScalarValue, tv: TensorView) -> ScalarValue:
    """A float scalar of extents beside tv: a float tensor only (tileproof does not promote), each
    extent of the fusion and within int64 (the kernel forms it in 64 bits)."""
    if not tv.dtype.is_float:
        raise ScheduleError(f"{op}: {arg} {value} is {value.dtype} and {tv.name} is {tv.dtype}; cast {tv.name} to a "
                            f"float type first (tp.cast({tv.name}, tp.float32))")
    for extent in value.extents():
        _extent_value(op, arg, extent, tv)
    return value


def _subterms(e: Expr) -> list[Expr]:
    return [e] + [t for a in e.args for t in _subterms(a)]


def _operand_scalar(name: str, position: int, x, tv: TensorView) -> Scalar:
    """A value operand of op `name` at `position`, beside the tensor tv whose dtype it takes."""
    arg = "ab"[position] if name != "where" else ("condition", "a", "b")[position]
    if tv.dtype.is_bool:
        raise ScheduleError(f"{name}: {tv.name} is bool and {arg} is the number {x!r}; compare two bool tensors, "
                            f"or cast {tv.name} first (tp.cast({tv.name}, tp.float32))")
    if isinstance(x, ScalarValue):
        return Scalar(_scalar_of_extents(name, arg, x, tv), position, str(x))
    extent = x if isinstance(x, str) else as_extent(x)
    if isinstance(extent, (str, Expr)) and not isinstance(x, numbers.Integral):
        return Scalar(_extent_value(name, arg, extent, tv), position, x if isinstance(x, str) else str(extent))
    value = _scalar_value(name, arg, x, tv.dtype)
    given = int(x) if isinstance(x, numbers.Integral) else float(x)
    return Scalar(value, position, given)


def _binary_with_number(name: str, a, b) -> TensorView:
    """A binary op with a value operand (a number or an extent): the tensor's dtype, the value
    in its compute type."""
    if not isinstance(a, TensorBase) and not isinstance(b, TensorBase):
        if any(isinstance(x, (Expr, ScalarValue, sympy.Basic)) for x in (a, b)):
            return scalar_binary(name, a, b)  # scalar arithmetic on extents: a value an op takes
        for arg, x in (("a", a), ("b", b)):
            if not isinstance(x, (str, Expr)):
                _scalar_value(name, arg, x, float64)  # a clear error for what is no number
        what = "numbers" if all(isinstance(x, numbers.Real) for x in (a, b)) else "values"
        raise ScheduleError(f"{name}: one operand must be a TensorView, got two {what} {a!r} and {b!r}")
    position, tv, number = (1, a, b) if isinstance(a, TensorBase) else (0, b, a)
    check_tensor(name, tv, "a" if position == 1 else "b")
    _check_operand_dtype(name, tv, "a" if position == 1 else "b")
    scalar = _operand_scalar(name, position, number, tv)
    out = _like(tv, output_dtype(name, tv.dtype))
    tv.fusion._register_op(Op(OpKind.BINARY, [tv], out, [element_axes(tv)], name=name, scalar=scalar))
    return out


def _pointwise_axes(name: str, tensors: list, args: list[str]) -> tuple[list[IterDomain], list[list[int]]]:
    """The output IDs of a pointwise op on `tensors` (axes mapped in order: a broadcast axis takes
    the others' extent, two others become one extent, model/extent_unification.py) and the
    logical axis of each tensor that each output axis reads."""
    axes = [element_axes(t) for t in tensors]
    for t, ax, arg in zip(tensors[1:], axes[1:], args[1:]):
        if len(ax) != len(axes[0]):
            raise ScheduleError(f"{name}: {tensors[0].name} has {len(axes[0])} dimensions, {t.name} has {len(ax)}; "
                                f"broadcast first")
    for j in range(len(axes[0])):  # mapped axes have one extent, as nvFuser's exact map
        concrete = [(t, ax[j]) for t, ax in zip(tensors, axes) if not t.logical[ax[j]].is_broadcast]
        for (x, i), (y, k) in zip(concrete, concrete[1:]):
            unify_extents(x.fusion, name, x.logical[i], y.logical[k], f"{x.name} axis {i}", f"{y.name} axis {k}")
    ids = []
    for j in range(len(axes[0])):  # after every unification: an extent read earlier may have been replaced
        members = [t.logical[ax[j]] for t, ax in zip(tensors, axes)]
        src = next((i for i in members if not i.is_broadcast), members[-1])
        ids.append(IterDomain(src.extent_expr, number=tensors[0].fusion.next_iterdomain_number(),
                              iter_type=src.iter_type))
    return ids, axes


def binary(name: str, a, b) -> TensorView:
    """Elementwise `name` of two tensors, or of a tensor and a value (a number, int or float,
    either side: converted to the tensor's compute type, DataType.compute; or an extent, a
    symbol name or tp.extent, converted in the kernel). The result has the tensors' dtype (bool
    for comparisons and logical ops). The two tensors' axes are mapped in order; a broadcast
    axis takes the other's extent, and two others become one extent (model/extent_unification.py:
    a symbol is unified with the other symbol or constant, as nvFuser's exact map; the launch
    checks that the inputs' sizes agree); two different constants are a ScheduleError."""
    if name not in BINARY:
        raise ScheduleError(f"unknown binary op {name!r}; supported: {', '.join(BINARY)}")
    if not isinstance(a, TensorBase) or not isinstance(b, TensorBase):
        return _binary_with_number(name, a, b)
    check_tensor(name, a, "a")
    check_tensor(name, b, "b")
    if len(element_axes(a)) != len(element_axes(b)):
        raise ScheduleError(f"{name}: {a.name} has {len(element_axes(a))} dimensions, {b.name} has "
                            f"{len(element_axes(b))}; broadcast first")
    if a.dtype != b.dtype:
        raise ScheduleError(f"{name}: dtypes differ ({a.dtype} vs {b.dtype}); cast first")
    _check_operand_dtype(name, a, "a")
    ids, axes = _pointwise_axes(name, [a, b], ["a", "b"])
    out = a.new_tensor(ids, output_dtype(name, a.dtype))
    a.fusion._register_op(Op(OpKind.BINARY, [a, b], out, axes, name=name))
    return out


def where(condition, a, b) -> TensorView:
    """Elementwise `a` where `condition` holds, else `b` (nvFuser's where, a TernaryOp):
    `condition` is a bool tensor; a and b are tensors (of any dtypes: the result has the dtype
    they promote to, model/types.py promote_types) or one of them a value (a number or an
    extent, taking the other's dtype). The three tensors' axes are mapped in order, as tp.add's."""
    check_tensor("where", condition, "condition")
    if not condition.dtype.is_bool:
        raise ScheduleError(f"where: condition ({condition.name}) is {condition.dtype}, not bool; make it with a "
                            f"comparison (tp.gt({condition.name}, 0)) or tp.ne({condition.name}, 0)")
    tensors = [condition] + [x for x in (a, b) if isinstance(x, TensorBase)]
    if len(tensors) == 1:
        for arg, x in (("a", a), ("b", b)):
            if not is_operand_value(x):
                check_tensor("where", x, arg)
        raise ScheduleError(f"where: a and b are both values ({a!r}, {b!r}); one must be a tensor (for a 1 / 0 mask "
                            f"use tp.cast({condition.name}, tp.float32))")
    for arg, x in (("a", a), ("b", b)):
        if isinstance(x, TensorBase):
            check_tensor("where", x, arg)
            if x.dtype.is_bool:
                raise ScheduleError(f"where: {arg} ({x.name}) is bool; select numbers (cast it first, "
                                    f"tp.cast({x.name}, tp.float32)), or use tp.logical_and / tp.logical_or")
        elif not is_operand_value(x):
            raise ScheduleError(f"where: expected a TensorView, a number or an extent for {arg}, got "
                                f"{type(x).__name__} {x!r:.60}")
    values = tensors[1:]
    dtype = values[0].dtype if len(values) == 1 else promote_types(values[0].dtype, values[1].dtype)
    scalar = None
    if len(values) == 1:
        position = 2 if isinstance(a, TensorBase) else 1
        scalar = _operand_scalar("where", position, b if position == 2 else a, values[0])
    ids, axes = _pointwise_axes("where", tensors, ["condition"] + [arg for arg, x in (("a", a), ("b", b))
                                                                  if isinstance(x, TensorBase)])
    out = condition.new_tensor(ids, dtype)
    condition.fusion._register_op(Op(OpKind.TERNARY, tensors, out, axes, name="where", scalar=scalar))
    return out


def extent(tv: TensorView, axis: int) -> Expr:
    """The extent of tv's axis `axis` (of its shape; negative counts from the end) as a value an
    op takes (`tp.div(tp.sum(x, 1), tp.extent(x, 1))`); nvFuser's size(tv, dim)."""
    check_tensor("extent", tv)
    axes = element_axes(tv)
    k = as_index(axis)
    if k is None:
        raise ScheduleError(f"extent: axis must be an int, got {type(axis).__name__} {axis!r:.60}")
    if not -len(axes) <= k < len(axes):
        raise ScheduleError(f"extent: axis {k} is out of range for {tv.name} with {len(axes)} dimensions")
    return tv.logical[axes[k]].extent_expr


def redirect_definition(tv: TensorView, op_type: LoadStoreOpType) -> TensorView:
    """cache_before: `tv`'s definition now writes a new tensor, and tv = set(new)."""
    fusion = tv.fusion
    old = tv.definition
    if old.kind is OpKind.REDUCTION:  # the cache computes the reduction; tv becomes a copy of its shape

        return cache_before(tv, op_type)
    with fusion:
        new = _like(tv)
    if [i.uid for i in tv.root] != [i.uid for i in tv.logical]:
        # a committed logical domain (commit_leaf_to_logical): the definition writes the new tensor's root in
        # tv's root order, as nvFuser's cacheBefore gives the producer tv's domain; tv copies it in logical order
        position = {i.uid: k for k, i in enumerate(tv.logical)}
        new.root = [new.logical[position[i.uid]] for i in tv.root]
        tv.root = tv.logical
    old.output = new
    new.definition = old
    n = len(tv.logical)
    op = Op(OpKind.LOAD_STORE, [new], tv, [list(range(n))], name="set", op_type=op_type)
    fusion.exprs.insert(fusion.exprs.index(old) + 1, op)
    tv.definition = op
    return new

