"""Schedules of every op of the public op set (model/ops.py, model/composite.py, tp.min), for
tests/codegen/test_codegen_ops.py (NVRTC, the emitted expressions, the CPU simulator) and
tests/gpu/test_ops.py (runs against PyTorch at three sizes).

Pointwise ops run over a symbolic [N] tensor, a block of 128 threads per 128 elements; a
reduction over the rows of [M, N] (N symbolic, or 1000 where a row is read back after its
reduction, as tests/support/reduction_schedules.py subtract_row_max), a block per row.
"""

from __future__ import annotations

import tileproof as tp

P = tp.ParallelType
FLOAT_UNARY = ("exp", "exp2", "expm1", "log", "log2", "log1p", "sqrt", "rsqrt", "reciprocal", "tanh", "erf", "erfc",
               "sigmoid", "silu", "sin", "cos", "floor", "ceil", "relu", "neg", "abs")
FLOAT_BINARY = ("add", "sub", "mul", "div", "maximum", "minimum", "pow", "fmod")
COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
INTEGER_BINARY = ("add", "sub", "mul", "maximum", "minimum", "fmod")
COMPOSITES = ("gelu", "tanh_gelu")
ROW_OPS = ("sum", "max", "min", "mean")


def _tile(fusion, threads: int = 128) -> None:
    """Every computed tensor [N] as [BIDx, TIDx{threads}], inlined."""
    fusion.assume("N <= 33554432")  # at most 2^18 blocks of 128 on BIDx
    for tv in fusion.tensors:
        if tv.definition is not None:
            while tv.ndim > 1:
                tv.merge(0)
            tv.split(0, threads)
            tv.axis(0).parallelize(P.BIDx)
            tv.axis(1).parallelize(P.TIDx)
    tp.inline_most(fusion)


def unary(name: str, dtype: str = "float32"):
    """out = name(a) over [N] (gelu and tanh_gelu: their chain of ops)."""
    with tp.Fusion(f"{name}_{dtype}") as fusion:
        a = tp.make_tensor(["N"], dtype=dtype)
        fusion.add_input(a)
        fusion.add_output(getattr(tp, name)(a))
    _tile(fusion)
    return fusion


def binary(name: str, dtype: str = "float32", value=None, value_first: bool = False):
    """out = name(a, b) over [N]; with `value` (a number or an extent symbol name) in place of b
    (of a, with value_first)."""
    with tp.Fusion(f"{name}_{dtype}") as fusion:
        a = tp.make_tensor(["N"], dtype=dtype)
        fusion.add_input(a)
        if value is None:
            b = tp.make_tensor(["N"], dtype=dtype)
            fusion.add_input(b)
        else:
            b = value
        out = getattr(tp, name)(b, a) if value_first else getattr(tp, name)(a, b)
        fusion.add_output(out)
    _tile(fusion)
    return fusion


def where(dtype_a: str = "float32", dtype_b: str = "float32", value=None):
    """out = where(c > 0, a, b) over [N], b of dtype_b (promoted with a's), or `value` for b;
    c float32."""
    with tp.Fusion(f"where_{dtype_a}_{dtype_b}") as fusion:
        c = tp.make_tensor(["N"])
        a = tp.make_tensor(["N"], dtype=dtype_a)
        fusion.add_input(c)
        fusion.add_input(a)
        if value is None:
            b = tp.make_tensor(["N"], dtype=dtype_b)
            fusion.add_input(b)
        else:
            b = value
        fusion.add_output(tp.where(tp.gt(c, 0.0), a, b))
    _tile(fusion)
    return fusion


def logical(dtype: str = "float32"):
    """Bool tensors end to end: out = (a > 0 and not b < 0) or a == b, stored as bool, and its
    cast to dtype."""
    with tp.Fusion(f"logical_{dtype}") as fusion:
        a = tp.make_tensor(["N"], dtype=dtype)
        b = tp.make_tensor(["N"], dtype=dtype)
        fusion.add_input(a)
        fusion.add_input(b)
        mask = tp.logical_or(tp.logical_and(tp.gt(a, 0), tp.logical_not(tp.lt(b, 0))), tp.eq(a, b))
        fusion.add_output(mask)
        fusion.add_output(tp.cast(mask, dtype))
    _tile(fusion)
    return fusion


def vectorized_mask(vector: int = 4):
    """mask = a > 0 and out = where(c, a, 1.5) over [N] (c a bool input), `vector` elements per
    thread in one access of each operand: 4 bytes of bool beside 16 of float32 for vector 4."""
    with tp.Fusion(f"vectorized_mask_{vector}") as fusion:
        a = tp.make_tensor(["N"], contiguity=True)
        c = tp.make_tensor(["N"], contiguity=True, dtype="bool")
        fusion.add_input(a)
        fusion.add_input(c)
        mask = tp.gt(a, 0.0)
        out = tp.where(c, a, 1.5)
        fusion.add_output(mask)
        fusion.add_output(out)
    fusion.assume(f"N % {vector * 128} == 0")
    fusion.assume("N <= 33554432")
    for tv in (mask, out):
        tv.split(0, vector)
        tv.split(0, 128)
        tv.axis(0).parallelize(P.BIDx)
        tv.axis(1).parallelize(P.TIDx)
        tv.axis(2).parallelize(P.Vectorize)
    return fusion


def row(op: str, dtype: str = "float32", threads: int = 128):
    """op (sum, max, min, mean) over the rows of [M, N]: a block per row, TIDx{threads} threads
    each combining a strided part, then the block's combine (mean: then the division by N, an
    extent value, in the same thread)."""
    with tp.Fusion(f"row_{op}_{dtype}") as fusion:
        t0 = tp.make_tensor(["M", "N"], contiguity=True, dtype=dtype)
        fusion.add_input(t0)
        out = getattr(tp, op)(t0, 1)
        fusion.add_output(out)
    reduced = out.definition.inputs[0] if op == "mean" else out
    reduced.split(1, threads)  # [M, r{N / threads}, rTIDx]
    reduced.axis(0).parallelize(P.BIDx)
    reduced.axis(2).parallelize(P.TIDx)
    if op == "mean":
        out.axis(0).parallelize(P.BIDx)
        tp.inline_most(fusion)
    return fusion


def var_mean(dtype: str = "float32", threads: int = 96, length: int | str = 1000, correction: int = 1):
    """(var, mean) over the rows of [M, length] (length an int, or a symbol: "N"): the mean as
    row("mean"), then x - mean (each thread its strided part), its squares summed over the row and
    divided by max(length - correction, 0)."""
    with tp.Fusion(f"var_mean_{dtype}_{correction}") as fusion:
        t0 = tp.make_tensor(["M", length], contiguity=True, dtype=dtype)
        fusion.add_input(t0)
        var, mean = tp.var_mean(t0, [1], correction=correction)
        fusion.add_output(var)
        fusion.add_output(mean)
    for tv in fusion.tensors:
        if tv.definition is None:
            continue
        if len(tv.logical) == 2:  # the sums, the deviations and their squares: [M, r? length]
            tv.split(1, threads)
            tv.axis(2).parallelize(P.TIDx)
        tv.axis(0).parallelize(P.BIDx)
    tp.inline_most(fusion)
    return fusion


def extent_values(dtype: str = "float32"):
    """Extents as values over [M, N]: out = a * N - M, and out2 = a / (M * N) (the extent product
    converted once)."""
    with tp.Fusion(f"extent_values_{dtype}") as fusion:
        a = tp.make_tensor(["M", "N"], contiguity=True, dtype=dtype)
        fusion.add_input(a)
        fusion.add_output(tp.sub(tp.mul(a, tp.extent(a, 1)), "M"))
        fusion.add_output(tp.div(a, tp.extent(a, 0) * tp.extent(a, 1)))
    fusion.assume("M * N <= 33554432")
    for tv in fusion.tensors:
        if tv.definition is not None:
            tv.merge(0)
            tv.split(0, 128)
            tv.axis(0).parallelize(P.BIDx)
            tv.axis(1).parallelize(P.TIDx)
    tp.inline_most(fusion)
    return fusion


__all__ = ["COMPARISONS", "COMPOSITES", "FLOAT_BINARY", "FLOAT_UNARY", "INTEGER_BINARY", "ROW_OPS", "binary",
           "extent_values", "logical", "row", "unary", "var_mean", "vectorized_mask", "where"]
