"""A reference for checking kernels: the fusion's ops evaluated with numpy in float64,
rounding each tensor to its dtype as the kernel stores it. Schedules do not change
values, so one reference serves every schedule of a fusion. An iota (no input) is start + i step.

Rounding to a dtype: float types round to nearest even, once from float64 (bfloat16 too,
arrays.to_raw); integer types keep the low bits of an integer that does not fit (two's
complement wrap, as the kernel's C++ stores it); bool is 0 or 1 (nonzero, NaN too, is 1). A cast from a float type to an integer
truncates toward zero, saturates to the integer's range and makes NaN 0 (PTX cvt.rzi, as the
kernel's conversions do); every other cast is that rounding. A binary op's number operand
enters as its value in the compute type (model/fusion.py Scalar.value).

float64 holds integers exactly up to 2^53 only: int64 values beyond are approximate here, and
2^63 stands for INT64_MAX. An integer division by zero has no value in CUDA; here it is inf or NaN.

A tensor's array has the axes of its shape: a reduction's output drops its reduced axes, and an
op names its input's axes by logical position (model/reduction.py element_axes). A reduction sums
(or takes the max or min) in float64; the kernel adds in the compute type, in another order, so sums
agree to a tolerance. The partial reduction of an rfactor is evaluated over its logical domain,
which derives from its root: each point maps back to an input element, a hole to the neutral value;
a tensor whose loop domain was committed to its logical domain (commit_leaf_to_logical, a
permutation of its root) has its array in that order.
"""

from __future__ import annotations

import math

from ...model.expr import Expr, evaluate
from ...model.fusion import Fusion
from ...model.reduction import element_axes
from ...model.types import OpKind
from ...model.welford import WELFORD_OPS
from .arrays import from_raw, to_raw
from ...model.iterdomain import Merge, Split
from ...model.scalar_value import ScalarValue

def _elementwise(function):
    """A float64 function of the math module applied to every element (numpy has no erf)."""
    def apply(np, a):
        return np.vectorize(function, otypes=[np.float64])(a)
    return apply


def _sigmoid(np, a):
    return 1.0 / (1.0 + np.exp(-a))


UNARY = {  # as codegen/emit/scalar_types.py computes them (sigmoid and silu in nvFuser's form)
    "neg": lambda np, a: -a,
    "abs": lambda np, a: np.abs(a),
    "exp": lambda np, a: np.exp(a),
    "exp2": lambda np, a: np.exp2(a),
    "expm1": lambda np, a: np.expm1(a),
    "log": lambda np, a: np.log(a),
    "log2": lambda np, a: np.log2(a),
    "log1p": lambda np, a: np.log1p(a),
    "sqrt": lambda np, a: np.sqrt(a),
    "rsqrt": lambda np, a: 1.0 / np.sqrt(a),
    "reciprocal": lambda np, a: 1.0 / a,
    "tanh": lambda np, a: np.tanh(a),
    "erf": _elementwise(math.erf),
    "erfc": _elementwise(math.erfc),
    "sigmoid": _sigmoid,
    "silu": lambda np, a: a * _sigmoid(np, a),
    "sin": lambda np, a: np.sin(a),
    "cos": lambda np, a: np.cos(a),
    "floor": lambda np, a: np.floor(a),
    "ceil": lambda np, a: np.ceil(a),
    "relu": lambda np, a: np.maximum(a, 0),
    "logical_not": lambda np, a: a == 0,
}
BINARY = {
    "add": lambda np, a, b: a + b,
    "sub": lambda np, a, b: a - b,
    "mul": lambda np, a, b: a * b,
    "div": lambda np, a, b: a / b,
    "maximum": lambda np, a, b: np.maximum(a, b),
    "minimum": lambda np, a, b: np.minimum(a, b),
    "pow": lambda np, a, b: np.power(a, b),
    "fmod": lambda np, a, b: np.fmod(a, b),
    "eq": lambda np, a, b: a == b,
    "ne": lambda np, a, b: a != b,
    "lt": lambda np, a, b: a < b,
    "le": lambda np, a, b: a <= b,
    "gt": lambda np, a, b: a > b,
    "ge": lambda np, a, b: a >= b,
    "logical_and": lambda np, a, b: (a != 0) & (b != 0),
    "logical_or": lambda np, a, b: (a != 0) | (b != 0),
}
TERNARY = {"where": lambda np, c, a, b: np.where(c != 0, a, b)}
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
        # (to_raw makes a 0-dimensional array 1-dimensional: the sum of every element keeps its shape)
        return from_raw(to_raw(values, dtype), dtype).astype(np.float64).reshape(np.shape(values))


def cast(np, values, source, dest):
    """`values` (of dtype `source`) converted to `dest`, before round_to(dest): from a float type
    to an integer, truncated toward zero, saturated, NaN to 0; otherwise unchanged (round_to
    rounds to nearest even, or wraps an integer)."""
    if dest.name not in INTEGER or source.name in INTEGER:
        return values.copy()
    lo, hi = _range(dest)
    with np.errstate(invalid="ignore"):
        return np.where(np.isnan(values), 0.0, np.clip(np.trunc(values), lo, hi))


def reference(fusion: Fusion, inputs: list, absolute_sums: frozenset = frozenset(),
              nudged_sums: dict[str, float] | None = None) -> list:
    """The outputs (float64 numpy arrays) for numpy input values, in fusion.outputs order. The
    sums (or MmaOps: sums of products) named in `absolute_sums` add the absolute values of their
    terms: the magnitudes a difference in the terms' rounding scales with (reduction_slack). A sum
    named in `nudged_sums` is moved by its factor times the sum of its terms' absolute values: a
    float sum's largest error, carried through what reads it (reduction_slack)."""
    import numpy as np

    values = {t.name: round_to(np.asarray(a, dtype=np.float64), t.dtype) for t, a in zip(fusion.inputs, inputs)}
    sizes = _sizes(fusion, values)
    # creation order (cache_after/cache_before insert producers later); a snapshot's views by the broadcasts
    # that define them in the schedule (model/producer_aliases.py)
    pending = list(fusion.exprs) + list(fusion.views.values())
    while pending:
        op = next(o for o in pending if all(t.name in values for t in o.inputs))
        pending.remove(op)
        args = [values[t.name] for t in op.inputs]
        if op.kind is OpKind.REDUCTION:
            value = _reduce(np, op, args, sizes, op.output.name in absolute_sums)
            if nudged_sums and op.output.name in nudged_sums:
                value = value + nudged_sums[op.output.name] * _reduce(np, op, args, sizes, True)
        else:  # over the output's root axes; a committed logical domain (commit_leaf_to_logical) permutes them
            value = _apply(np, op, args, sizes)
            if [i.uid for i in op.output.root] != [i.uid for i in op.output.logical]:
                value = _gather(np, op.output, value, sizes, 0.0)
        values[op.output.name] = round_to(value, op.output.dtype)
    return [values[t.name] for t in fusion.outputs]


def _sizes(fusion: Fusion, values: dict) -> dict[str, int]:
    """The extent symbols, from the inputs' shapes."""
    out = {}
    for t in fusion.inputs:
        for k, axis in enumerate(element_axes(t)):
            e = t.logical[axis].extent_expr
            if e.op == "var":
                out[e.value] = values[t.name].shape[k]
    return out


def _array_axis(tv, logical_axis: int) -> int:
    return element_axes(tv).index(logical_axis)


def _reduce(np, op, args, sizes: dict[str, int], absolute: bool = False):
    """A reduction's value: over the input's axes that the output's root axes mark reduced, or,
    for an rfactor's partial reduction, over the logical points that derive from its root; a sum
    of the terms' absolute values where `absolute`."""
    # fms: a sum of products; a rescaled sum's second input is its online max (model/online.py), read
    # at its final value by the terms already: the sum is of the first
    if op.name in WELFORD_OPS:
        return _welford(np, op, args, sizes)
    if op.name == "fms" and (summed := _product_sum(np, op, args, absolute)) is not None:
        return summed
    x = args[0] * args[1] if op.name == "fms" else args[0]
    total = op.name in ("sum", "fms")  # fms: an MmaOp, a sum of products
    if total and absolute:
        x = np.abs(x)
    fill = 0.0 if total else np.inf if op.name == "min" else -np.inf
    x, axes = _reduced(np, op, x, sizes, fill)
    with np.errstate(all="ignore"):
        return np.sum(x, axis=tuple(axes)) if total else (np.min if op.name == "min" else np.max)(x, axis=tuple(axes))


def _product_sum(np, op, args, absolute: bool):
    """A sum of products (an MmaOp) by np.einsum, without the product's array: A [M, 1, K] times
    B [1, N, K] summed over K (1024 each: 8 GiB of float64, 41 s, where einsum takes milliseconds);
    None where the output is an rfactor's partial sum (its points gathered: _reduced) or the
    operands' shapes do not broadcast axis by axis."""
    out, (a, b) = op.output, args
    if out.root is not out.logical and [i.uid for i in out.root] != [i.uid for i in out.logical]:
        return None
    if a.ndim != b.ndim or any(m != n and 1 not in (m, n) for m, n in zip(a.shape, b.shape)):
        return None
    source = [_array_axis(op.inputs[0], k) for k in op.logical_map[0]]  # as _reduced orders them
    kept = [source[j] for j, i in enumerate(out.root) if not i.is_reduction]
    letters = [chr(ord("a") + k) for k in range(a.ndim)]
    operands, subscripts = [], []
    for x, other in ((a, b), (b, a)):  # an axis of size 1 broadcast against the other's: squeezed out
        squeezed = [k for k in range(x.ndim) if x.shape[k] == 1 and other.shape[k] > 1]
        operands.append(np.abs(x).squeeze(tuple(squeezed)) if absolute else x.squeeze(tuple(squeezed)))
        subscripts.append("".join(letters[k] for k in range(x.ndim) if k not in squeezed))
    spec = f"{subscripts[0]},{subscripts[1]}->{''.join(letters[k] for k in kept)}"
    with np.errstate(all="ignore"):
        return np.einsum(spec, *operands, optimize=True)


def _reduced(np, op, x, sizes: dict[str, int], fill: float):
    """x (an array of the reduction's first input) over the output's points, and the axes to
    reduce: its root axes, or, for an rfactor's partial reduction, its logical points (a hole
    `fill`)."""
    out = op.output
    source = [_array_axis(op.inputs[0], a) for a in op.logical_map[0]]  # the input array axis of each root axis
    x = np.transpose(x, source)
    if out.root is not out.logical and [i.uid for i in out.root] != [i.uid for i in out.logical]:
        return _gather(np, out, x, sizes, fill), [k for k, i in enumerate(out.logical) if i.is_reduction]
    return x, [j for j, i in enumerate(out.root) if i.is_reduction]


def _welford(np, op, args, sizes: dict[str, int]):
    """A Welford output (model/welford.py) in float64, two passes: the count, the mean, the sum of
    squared deviations from it, of the elements (one input), or of the partial states (three
    inputs: avg, var_sum, n; a hole is an empty state). An empty state is 0, 0, 0, as the kernel's
    (an rfactor's partial of a thread that sees no element)."""
    if len(args) == 1:
        x, axes = _reduced(np, op, args[0], sizes, 0.0)
        count, _ = _reduced(np, op, np.ones_like(args[0]), sizes, 0.0)
        avg_in, m2_in = x, np.zeros_like(x)
    else:
        (avg_in, axes), (m2_in, _), (count, _) = (_reduced(np, op, a, sizes, 0.0) for a in args)
    with np.errstate(all="ignore"):
        n = np.sum(count, axis=tuple(axes))
        avg = np.where(n > 0, np.sum(count * avg_in, axis=tuple(axes)) / np.where(n > 0, n, 1), 0.0)  # empty: 0
        deviation = avg_in - np.expand_dims(avg, tuple(axes))
        m2 = np.sum(m2_in, axis=tuple(axes)) + np.sum(count * deviation * deviation, axis=tuple(axes))
    return {"welford_avg": avg, "welford_var_sum": m2, "welford_n": n}[op.name]


def _gather(np, tv, x, sizes: dict[str, int], fill: float):
    """x (an array over tv's root axes) at every point of tv's logical domain: each point's root
    indices backward through tv's transforms, `fill` where a point is a hole."""
    extents = [evaluate(i.extent_expr, sizes) for i in tv.logical]
    grid = np.indices(extents, sparse=False) if extents else np.zeros((0,), dtype=np.int64)
    idx = {i: grid[k] for k, i in enumerate(tv.logical)}
    valid = np.ones(extents, dtype=bool)
    for t in reversed(tv.history):
        if all(o in idx for o in t.outputs) and not all(i in idx for i in t.inputs):
            idx.update(_backward(np, t, idx, sizes))
    for i, v in idx.items():
        if i not in tv.logical:
            valid &= v < evaluate(i.extent_expr, sizes)
    root = tuple(np.where(valid, idx[i], 0) for i in tv.root)
    return np.where(valid, x[root], fill)


def _backward(np, t, idx, sizes):
    """A transform's inputs' indices from its outputs' (model/iterdomain.py backward), on arrays."""
    if isinstance(t, Split):
        return {t.in_: idx[t.outer] * evaluate(t.inner.extent_expr, sizes) + idx[t.inner]}
    if isinstance(t, Merge):
        e = evaluate(t.inner.extent_expr, sizes)
        return {t.outer: idx[t.out] // e, t.inner: idx[t.out] % e}
    return {t.x_in: idx[t.x_out], t.y_in: idx[t.x_out] ^ idx[t.y_out]}


def operand_value(np, scalar, dtype, sizes: dict[str, int]):
    """A value operand in float64: a number as model/ops.py converted it; an extent evaluated at
    the sizes and rounded to `dtype`'s compute type, as the kernel converts it."""
    if isinstance(scalar.value, ScalarValue):
        return np.float64(round_to(np.array([scalar_value_at(np, scalar.value, sizes)]), dtype.compute)[0])
    if not isinstance(scalar.value, Expr):
        return np.float64(scalar.value)
    return np.float64(round_to(np.array([float(evaluate(scalar.value, sizes))]), dtype.compute)[0])


def _int_to_float32(x: int) -> float:
    """The int x rounded to float32's 24 significant bits, nearest even (float32's range holds every int64)."""
    shift = abs(x).bit_length() - 24
    if shift <= 0:
        return float(x)
    q, r = divmod(abs(x), 1 << shift)
    half = 1 << (shift - 1)
    if r > half or (r == half and q & 1):
        q += 1
    return math.copysign(float(q << shift), x)


def scalar_value_at(np, value, sizes: dict[str, int]) -> float:
    """A float scalar of extents (model/scalar_value.py) at the sizes, in float64, each node
    rounded to its dtype as the kernel computes it (codegen/emit/scalar_types.py
    scalar_value_cuda): an IEEE op of two float32 values rounded through float64 is the float32 op."""
    if value.op == "extent":
        return int(evaluate(value.value, sizes))
    if value.op == "number":
        return float(value.value)
    if value.op == "cast":
        inner = value.args[0]
        x = scalar_value_at(np, inner, sizes)
        if isinstance(x, int) and value.dtype.name == "float32":
            return _int_to_float32(x)  # rounded once, as __ll2float_rn (through float64 it could round twice)
        return float(round_to(np.array([float(x)]), value.dtype)[0])
    a, b = (scalar_value_at(np, v, sizes) for v in value.args)
    with np.errstate(all="ignore"):
        result = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[value.op](
            np.float64(a), np.float64(b))
    return float(round_to(np.array([float(result)]), value.dtype)[0])


def _apply(np, op, args, sizes: dict[str, int]):
    if op.kind is OpKind.IOTA:  # start + i step, exactly (the kernel rounds to the compute type on the way)
        length = int(evaluate(op.output.logical[0].extent_expr, sizes))
        return op.iota.start + np.arange(length, dtype=np.float64) * op.iota.step
    if op.kind is OpKind.LOAD_STORE:
        return args[0].copy()
    if op.kind is OpKind.UNARY:
        with np.errstate(all="ignore"):
            return UNARY[op.name](np, args[0])
    if op.kind in (OpKind.BINARY, OpKind.TERNARY):
        if op.scalar is not None:  # the value takes the dtype of the tensor beside it
            args = list(args)
            args.insert(op.scalar.position, operand_value(np, op.scalar, op.inputs[-1].dtype, sizes))
        with np.errstate(all="ignore"):
            return (BINARY if op.kind is OpKind.BINARY else TERNARY)[op.name](np, *args)
    if op.kind is OpKind.CAST:
        return cast(np, args[0], op.inputs[0].dtype, op.output.dtype)
    if op.kind is OpKind.TRANSPOSE:
        return np.transpose(args[0], [_array_axis(op.inputs[0], k) for k in op.logical_map[0]])
    if op.kind is OpKind.BROADCAST:
        shape = [1 if k is None else args[0].shape[_array_axis(op.inputs[0], k)] for k in op.logical_map[0]]
        return args[0].reshape(shape)
    raise ValueError(f"no reference for op kind {op.kind!r}")


# a 16-bit float's two roundings of one value apart, relative: one unit in the last place (bfloat16's 8
# significant bits, float16's 11), what rounding once on either side of a boundary, or at two scales, gives
ROUNDINGS_APART = {"bfloat16": 2.0 ** -7, "float16": 2.0 ** -10}


def reduction_slack(fusion: Fusion, inputs: list) -> list:
    """Per output, the absolute error a float reduction may add beyond `tolerance`: the kernel
    adds in float32 (float64 for float64) in another order than this float64 reference, so its
    error scales with the magnitudes of the terms (the outputs computed from |inputs|), not with
    the total, which may cancel. What reads a sum carries its error on (x / sum(x) of a row whose
    sum nearly cancels is off by the sum's error over the sum squared, far more than |x| / sum|x|),
    so each sum's largest error is also carried through the reference (`_carried_sum_error`). Where a computed tensor is rounded to a 16-bit float before a sum
    reads it (attention's P, bfloat16 for P V), the kernel's terms may each be one rounding from
    the reference's (its float32 value on the other side of a rounding boundary, or an online
    softmax's P rounded at the running max, then rescaled): that adds ROUNDINGS_APART times the
    sums of the terms' absolute values (reference(..., absolute_sums=those sums)). 0 for fusions without
    a reduction and for integers (exact)."""
    import numpy as np

    if not any(op.kind is OpKind.REDUCTION for op in fusion.exprs):
        return [0.0] * len(fusion.outputs)
    magnitudes = reference(fusion, [np.abs(np.asarray(a, dtype=np.float64)) for a in inputs])
    slack = [4 * tolerance(t.dtype)[0] * np.nan_to_num(np.abs(m), posinf=0.0) for t, m in zip(fusion.outputs, magnitudes)]
    slack = [s + c for s, c in zip(slack, _carried_sum_error(fusion, inputs))]
    unit, sums = _sums_after_a_rounding(fusion)
    if sums:
        terms = reference(fusion, inputs, absolute_sums=sums)
        slack = [s + unit * np.nan_to_num(np.abs(m), posinf=0.0) for s, m in zip(slack, terms)]
    return slack


def _carried_sum_error(fusion: Fusion, inputs: list) -> list:
    """Per output, how far it moves when one sum of the fusion moves by its largest float error
    (4 rtol of the sum's dtype times the sum of its terms' absolute values), up or down, summed
    over the sums: the first-order error the kernel's rounding of each sum carries to the output
    through the ops that read it (a division by it, an exp of it). Unbounded (inf) where a move
    makes the output NaN or infinite: its value there is not fixed by float arithmetic."""
    import numpy as np  # as the module's other functions: numpy only where a reference is computed

    sums = [op.output for op in fusion.exprs if op.kind is OpKind.REDUCTION and op.name in ("sum", "fms")
            and op.output.dtype.name in FLOAT_TOLERANCE]
    base = reference(fusion, inputs) if sums else []
    carried = [np.zeros(np.shape(b)) for b in base] or [0.0] * len(fusion.outputs)
    for s in sums:
        unit = 4 * tolerance(s.dtype)[0]
        with np.errstate(all="ignore"):
            moved = [np.maximum(np.abs(up - b), np.abs(down - b)) for b, up, down in zip(
                base, reference(fusion, inputs, nudged_sums={s.name: unit}),
                reference(fusion, inputs, nudged_sums={s.name: -unit}))]
        carried = [c + np.where(np.isnan(m) & ~np.isnan(b), np.inf, np.nan_to_num(m, nan=0.0))
                   for c, m, b in zip(carried, moved, base)]
    return carried


def _sums_after_a_rounding(fusion: Fusion) -> tuple[float, frozenset]:
    """(ROUNDINGS_APART of the narrowest 16-bit float a computed tensor is cast to where a sum or an
    MmaOp reads the result, directly or through other ops; the names of those sums), or (0, none)."""
    unit, sums = 0.0, set()
    for cast in fusion.exprs:
        if cast.kind is not OpKind.CAST or cast.output.dtype.name not in ROUNDINGS_APART or cast.inputs[0].is_fusion_input:
            continue
        reached, todo, found = set(), [cast.output], set()
        while todo:  # every op the rounded values reach
            for op in fusion.uses_of(todo.pop()):
                if op.output.name not in reached:
                    reached.add(op.output.name)
                    todo.append(op.output)
                    if op.kind is OpKind.REDUCTION and op.name in ("sum", "fms"):
                        found.add(op.output.name)
        if found:
            unit, sums = max(unit, ROUNDINGS_APART[cast.output.dtype.name]), sums | found
    return unit, frozenset(sums)


FLOAT_TOLERANCE = {"float64": (1e-12, 1e-12), "float32": (1e-5, 1e-6), "float16": (2e-3, 1e-4),
                   "bfloat16": (1.6e-2, 1e-3)}


def tolerance(dtype) -> tuple[float, float]:
    """(rtol, atol) for comparing a kernel's output with the reference: the kernel computes
    in float (one rounding per op), the reference in float64 then rounds."""
    return FLOAT_TOLERANCE.get(dtype.name, (0.0, 0.0))
