"""A reference for checking kernels: the fusion's ops evaluated with numpy in float64,
rounding each tensor to its dtype as the kernel stores it. Schedules do not change
values, so one reference serves every schedule of a fusion.
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


def round_to(values, dtype):
    """float64 values as `dtype` would hold them, back in float64."""
    import numpy as np

    if dtype.name in INTEGER:
        return np.trunc(values).astype(dtype.name).astype(np.float64)
    return from_raw(to_raw(values, dtype), dtype).astype(np.float64)


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
        with np.errstate(all="ignore"):
            return BINARY[op.name](np, *args)
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
