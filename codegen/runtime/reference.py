"""A reference for checking kernels: the fusion's ops evaluated with numpy in float64,
rounding each tensor to its dtype as the kernel stores it. Schedules do not change
values, so one reference serves every schedule of a fusion.

Rounding to a dtype: float types round to nearest even, once from float64 (bfloat16 too,
arrays.to_raw); integer types keep the low bits of an integer that does not fit (two's
complement wrap, as the kernel's C++ stores it). A cast from a float type to an integer
truncates toward zero, saturates to the integer's range and makes NaN 0 (PTX cvt.rzi, as the
kernel's conversions do); every other cast is that rounding. A binary op's number operand
enters as its value in the compute type (model/fusion.py Scalar.value).

float64 holds integers exactly up to 2^53 only: int64 values beyond are approximate here, and
2^63 stands for INT64_MAX. An integer division by zero has no value in CUDA; here it is inf or NaN.
"""

from __future__ import annotations

from ...model.fusion import Fusion
from ...model.types import OpKind
from .arrays import from_raw, to_raw

UNARY = {
    "neg": lambda np, a: -a,
    "abs": lambda np, a: np.abs(a),
    "exp": lambda np, a: np.exp(a),
    "sqrt": lambda np, a: np.sqrt(a),
    "relu": lambda np, a: np.maximum(a, 0),
}
BINARY = {
    "add": lambda np, a, b: a + b,
    "sub": lambda np, a, b: a - b,
    "mul": lambda np, a, b: a * b,
    "div": lambda np, a, b: a / b,
    "maximum": lambda np, a, b: np.maximum(a, b),
    "minimum": lambda np, a, b: np.minimum(a, b),
}
INTEGER = ("int8", "int32", "int64")
_BITS = {"int8": 8, "int32": 32, "int64": 64}


def _range(dtype) -> tuple[float, float]:
    """An integer dtype's least and greatest value in float64 (2^63 for INT64_MAX, which it cannot hold)."""
    bits = _BITS[dtype.name]
    return -2.0 ** (bits - 1), 2.0 ** (bits - 1) - (1.0 if bits < 64 else 0.0)


def round_to(values, dtype):
    """float64 values as `dtype` would hold them, back in float64."""
    import numpy as np

    if dtype.name in INTEGER:
        whole = np.trunc(np.asarray(values, dtype=np.float64))
        lo, hi = _range(dtype)
        span = 2.0 ** _BITS[dtype.name]
        with np.errstate(invalid="ignore"):
            outside = np.isfinite(whole) & ((whole < lo) | (whole > hi))
            wrapped = whole - span * np.floor((whole - lo) / span)  # the low bits, two's complement
        return np.where(outside, wrapped, whole)
    with np.errstate(over="ignore"):  # beyond the dtype's range: inf, as the kernel's conversion
        return from_raw(to_raw(values, dtype), dtype).astype(np.float64)


def cast(np, values, source, dest):
    """`values` (of dtype `source`) converted to `dest`, before round_to(dest): from a float type
    to an integer, truncated toward zero, saturated, NaN to 0; otherwise unchanged (round_to
    rounds to nearest even, or wraps an integer)."""
    if dest.name not in INTEGER or source.name in INTEGER:
        return values.copy()
    lo, hi = _range(dest)
    with np.errstate(invalid="ignore"):
        return np.where(np.isnan(values), 0.0, np.clip(np.trunc(values), lo, hi))


def reference(fusion: Fusion, inputs: list) -> list:
    """The outputs (float64 numpy arrays) for numpy input values, in fusion.outputs order."""
    import numpy as np

    values = {t.name: round_to(np.asarray(a, dtype=np.float64), t.dtype) for t, a in zip(fusion.inputs, inputs)}
    pending = list(fusion.exprs)  # creation order; cache_after/cache_before insert producers later
    while pending:
        op = next(o for o in pending if all(t.name in values for t in o.inputs))
        pending.remove(op)
        values[op.output.name] = round_to(_apply(np, op, [values[t.name] for t in op.inputs]), op.output.dtype)
    return [values[t.name] for t in fusion.outputs]


def _apply(np, op, args):
    if op.kind is OpKind.LOAD_STORE:
        return args[0].copy()
    if op.kind is OpKind.UNARY:
        with np.errstate(all="ignore"):
            return UNARY[op.name](np, args[0])
    if op.kind is OpKind.BINARY:
        if op.scalar is not None:
            args = list(args)
            args.insert(op.scalar.position, np.float64(op.scalar.value))
        with np.errstate(all="ignore"):
            return BINARY[op.name](np, *args)
    if op.kind is OpKind.CAST:
        return cast(np, args[0], op.inputs[0].dtype, op.output.dtype)
    if op.kind is OpKind.TRANSPOSE:
        return np.transpose(args[0], op.logical_map[0])
    if op.kind is OpKind.BROADCAST:
        shape = [1 if k is None else args[0].shape[k] for k in op.logical_map[0]]
        return args[0].reshape(shape)
    raise ValueError(f"no reference for op kind {op.kind!r}")


def tolerance(dtype) -> tuple[float, float]:
    """(rtol, atol) for comparing a kernel's output with the reference: the kernel computes
    in float (one rounding per op), the reference in float64 then rounds."""
    return {"float64": (1e-12, 1e-12), "float32": (1e-5, 1e-6), "float16": (2e-3, 1e-4),
            "bfloat16": (1.6e-2, 1e-3)}.get(dtype.name, (0.0, 0.0))
