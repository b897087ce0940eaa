"""Ops built from other ops, as nvFuser builds them (csrc/ops/composite.cpp: gelu, tanh_gelu;
csrc/ops/normalization.cpp: mean, variance_mean): each records the primitive ops of model/ops.py
and model/reduction.py in the fusion, so every tensor they make is scheduled, verified and
generated like one the user wrote.

var_mean is nvFuser's variance_mean: one Welford reduction (model/welford.py) over the axes, the
variance its M2 over max(N - correction, 0); x is read once.

Imports model/ only.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .errors import ScheduleError
from .expr import Expr, add, const, maximum, product
from .ops import binary, unary
from .reduction import _axes, reduction
from .tensor_base import check_tensor
from .welford import welford

if TYPE_CHECKING:
    from .tensor import TensorView  # type hints only: tensor.py imports the ops

GELU_KAPPA = math.sqrt(0.5)  # M_SQRT1_2
TANH_GELU_BETA = math.sqrt(2.0) * (2.0 / math.sqrt(math.pi)) * 0.5  # M_SQRT2 * M_2_SQRTPI * 0.5
TANH_GELU_KAPPA = 0.044715


def gelu(x: TensorView) -> TensorView:
    """x * 0.5 * (1 + erf(x / sqrt(2))), nvFuser's gelu (the exact, erf form)."""
    check_tensor("gelu", x, "x")
    cdf = binary("mul", 0.5, binary("add", 1.0, unary("erf", binary("mul", x, GELU_KAPPA))))
    return binary("mul", x, cdf)


def tanh_gelu(x: TensorView) -> TensorView:
    """0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))), nvFuser's tanh_gelu (PyTorch's
    gelu(approximate="tanh"))."""
    check_tensor("tanh_gelu", x, "x")
    x_cube = binary("mul", x, binary("mul", x, x))
    inner = binary("mul", TANH_GELU_BETA, binary("add", x, binary("mul", TANH_GELU_KAPPA, x_cube)))
    out = binary("mul", x, binary("add", 1.0, unary("tanh", inner)))
    return binary("mul", 0.5, out)


def _float_input(func: str, x: TensorView) -> None:
    if not x.dtype.is_float:
        raise ScheduleError(f"{func}: {x.name} is {x.dtype}; {func} is computed on floating-point types: cast it "
                            f"first (tp.cast({x.name}, tp.float32))")


def num_features(x: TensorView, axes: list[int]) -> Expr:
    """The count of elements each output of a reduction of x over `axes` (logical positions)
    combines: the product of their extents (nvFuser's numFeatures)."""
    return product([x.logical[k].extent_expr for k in axes])


def _shape_axes(func: str, x: TensorView, axes) -> list[int]:
    """`axes` of x's shape as logical positions."""
    return _axes(func, x, axes)


def mean(x: TensorView, axes) -> TensorView:
    """The mean of x over `axes`: tp.sum over them divided by the product of their extents (an
    extent value, converted to x's compute type in the kernel), nvFuser's mean. Stored in x's
    dtype after each of the two ops; cast a 16-bit x to float32 first for a float32 mean."""
    check_tensor("mean", x, "x")
    _float_input("mean", x)
    reduced = _shape_axes("mean", x, axes)
    return binary("div", reduction("sum", x, reduced), num_features(x, reduced))


def var_mean(x: TensorView, axes, correction: int = 1) -> tuple[TensorView, TensorView]:
    """(variance, mean) of x over `axes`, nvFuser's variance_mean (torch.var_mean): one Welford
    reduction (tp.welford: avg, M2, N in one pass over x), the mean its avg, the variance its M2
    over max(N - correction, 0), N the count of reduced elements (inf or NaN where that is 0, as
    PyTorch). x is float32 or float64 (nvFuser refuses 16-bit types here too: cast first). The
    mean is the Welford's avg output; the Welford's other outputs are its siblings
    (WelfordResult: schedule and rfactor them as one).

        var, mu = tp.var_mean(t0, [1])   # [M, N] -> two [M] tensors"""
    check_tensor("var_mean", x, "x")
    _float_input("var_mean", x)
    if x.dtype.bytes < 4:
        raise ScheduleError(f"var_mean: {x.name} is {x.dtype}; var_mean takes float32 or float64, as nvFuser's "
                            f"variance_mean: cast it first (tp.cast({x.name}, tp.float32))")
    if isinstance(correction, bool) or not isinstance(correction, int) or correction < 0:
        raise ScheduleError(f"var_mean: correction must be a non-negative int, got {correction!r:.60}")
    reduced = _shape_axes("var_mean", x, axes)
    count = num_features(x, reduced)
    avg, var_sum, _ = welford(x, axes)
    denominator = maximum(add(count, const(-correction)), const(0)) if correction else count
    return binary("div", var_sum, denominator), avg


__all__ = ["gelu", "mean", "num_features", "tanh_gelu", "var_mean"]
