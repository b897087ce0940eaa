"""Tensor creation and the ops of a fusion (set / load-store, unary, binary,
broadcast, transpose). Every op creates fresh logical IterDomains for its output
and records which input axis each output axis reads."""

from __future__ import annotations

from typing import TYPE_CHECKING

import math
import numbers
import struct
from typing import Sequence

from .errors import ScheduleError
from .expr import const
from .extent_unification import unify_extents
from .fusion import Op, Scalar
from .iterdomain import IterDomain, as_index, wrong_enum
from .reduction import cache_before, element_axes
from .tensor_base import TensorBase, check_tensor
from .types import DTYPES, CacheOp, DataType, IterType, LoadStoreOpType, OpKind, as_dtype, float64

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


UNARY = ("neg", "abs", "exp", "relu", "sqrt")
BINARY = ("add", "sub", "mul", "div", "maximum", "minimum")


def unary(name: str, tv: TensorView) -> TensorView:
    check_tensor(name, tv, "a")
    if name not in UNARY:
        raise ScheduleError(f"unknown unary op {name!r}; supported: {', '.join(UNARY)}")
    out = _like(tv)
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


def _binary_with_number(name: str, a, b) -> TensorView:
    """A binary op with a number operand: the tensor's dtype, the number in its compute type."""
    if not isinstance(a, TensorBase) and not isinstance(b, TensorBase):
        for arg, x in (("a", a), ("b", b)):
            _scalar_value(name, arg, x, float64)  # a clear error for what is no number
        raise ScheduleError(f"{name}: one operand must be a TensorView, got two numbers {a!r} and {b!r}")
    position, tv, number = (1, a, b) if isinstance(a, TensorBase) else (0, b, a)
    check_tensor(name, tv, "a" if position == 1 else "b")
    value = _scalar_value(name, "b" if position == 1 else "a", number, tv.dtype)
    given = int(number) if isinstance(number, numbers.Integral) else float(number)
    out = _like(tv)
    tv.fusion._register_op(Op(OpKind.BINARY, [tv], out, [element_axes(tv)], name=name,
                              scalar=Scalar(value, position, given)))
    return out


def binary(name: str, a, b) -> TensorView:
    """Elementwise `name` of two tensors, or of a tensor and a number (an int or float, either
    side: converted to the tensor's compute type, DataType.compute; the result has the
    tensor's dtype). The two tensors' axes are mapped in order; a broadcast axis takes the
    other's extent, and two others become one extent (model/extent_unification.py: a symbol
    is unified with the other symbol or constant, as nvFuser's exact map; the launch checks
    that the inputs' sizes agree); two different constants are a ScheduleError."""
    if name not in BINARY:
        raise ScheduleError(f"unknown binary op {name!r}; supported: {', '.join(BINARY)}")
    if not isinstance(a, TensorBase) or not isinstance(b, TensorBase):
        return _binary_with_number(name, a, b)
    check_tensor(name, a, "a")
    check_tensor(name, b, "b")
    axes_a, axes_b = element_axes(a), element_axes(b)
    if len(axes_a) != len(axes_b):
        raise ScheduleError(f"{name}: {a.name} has {len(axes_a)} dimensions, {b.name} has {len(axes_b)}; broadcast first")
    if a.dtype != b.dtype:
        raise ScheduleError(f"{name}: dtypes differ ({a.dtype} vs {b.dtype}); cast first")
    pairs = [(a.logical[i], b.logical[j]) for i, j in zip(axes_a, axes_b)]
    for (x, y), i, j in zip(pairs, axes_a, axes_b):  # mapped axes have one extent, as nvFuser's exact map
        if not x.is_broadcast and not y.is_broadcast:
            unify_extents(a.fusion, name, x, y, f"{a.name} axis {i}", f"{b.name} axis {j}")
    ids = []
    for x, y in pairs:  # after every unification: an extent read earlier may have been replaced
        src = y if x.is_broadcast else x
        ids.append(IterDomain(src.extent_expr, number=a.fusion.next_iterdomain_number(), iter_type=src.iter_type))
    out = a.new_tensor(ids, a.dtype)
    a.fusion._register_op(Op(OpKind.BINARY, [a, b], out, [axes_a, axes_b], name=name))
    return out


def redirect_definition(tv: TensorView, op_type: LoadStoreOpType) -> TensorView:
    """cache_before: `tv`'s definition now writes a new tensor, and tv = set(new)."""
    fusion = tv.fusion
    old = tv.definition
    if old.kind is OpKind.REDUCTION:  # the cache computes the reduction; tv becomes a copy of its shape

        return cache_before(tv, op_type)
    with fusion:
        new = _like(tv)
    old.output = new
    new.definition = old
    n = len(tv.logical)
    op = Op(OpKind.LOAD_STORE, [new], tv, [list(range(n))], name="set", op_type=op_type)
    fusion.exprs.insert(fusion.exprs.index(old) + 1, op)
    tv.definition = op
    return new

