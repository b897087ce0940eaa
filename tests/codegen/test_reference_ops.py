"""The float64 reference (codegen/runtime/reference.py) of every op of the public op set against
Python's math module at float64, element by element, and its rounding: a float32 op's value is the
float64 value rounded once, a comparison 0 or 1, where's values promoted, an extent value the
size converted to the compute type, min / mean / var_mean as their definitions."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tileproof as tp
from tileproof.codegen.runtime.reference import reference

X = [-3.5, -1.0, -0.25, 0.0, 0.5, 1.0, 2.75, 7.0]
POSITIVE = [0.125, 0.5, 1.0, 2.0, 3.5, 10.0, 100.0, 1e-3]


def _sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x))


MATH = {
    "exp": (math.exp, X), "exp2": (lambda x: 2.0 ** x, X), "expm1": (math.expm1, X), "log": (math.log, POSITIVE),
    "log2": (math.log2, POSITIVE), "log1p": (math.log1p, POSITIVE), "sqrt": (math.sqrt, POSITIVE),
    "rsqrt": (lambda x: 1.0 / math.sqrt(x), POSITIVE), "reciprocal": (lambda x: 1.0 / x, POSITIVE),
    "tanh": (math.tanh, X), "erf": (math.erf, X), "erfc": (math.erfc, X), "sigmoid": (_sigmoid, X),
    "silu": (lambda x: x * _sigmoid(x), X), "sin": (math.sin, X), "cos": (math.cos, X),
    "floor": (math.floor, X), "ceil": (math.ceil, X), "relu": (lambda x: max(x, 0.0), X), "neg": (lambda x: -x, X),
    "abs": (abs, X),
    "gelu": (lambda x: x * 0.5 * (1.0 + math.erf(x / math.sqrt(2.0))), X),
    "tanh_gelu": (lambda x: 0.5 * x * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3))), X),
}
BINARY = {
    "pow": lambda a, b: math.pow(abs(a), b), "fmod": math.fmod, "maximum": max, "minimum": min,
    "eq": lambda a, b: float(a == b), "ne": lambda a, b: float(a != b), "lt": lambda a, b: float(a < b),
    "le": lambda a, b: float(a <= b), "gt": lambda a, b: float(a > b), "ge": lambda a, b: float(a >= b),
}


def run(build, *inputs):
    """The reference of the fusion `build` makes from its inputs (one per array)."""
    with tp.Fusion("reference") as fusion:
        tensors = []
        for array, dtype in inputs:
            t = tp.make_tensor(list(np.shape(array)), dtype=dtype)
            fusion.add_input(t)
            tensors.append(t)
        outs = build(*tensors)
        for out in outs if isinstance(outs, tuple) else (outs,):
            fusion.add_output(out)
    return reference(fusion, [np.asarray(a, dtype=np.float64) for a, _ in inputs])


@pytest.mark.parametrize("name", MATH)
def test_unary_references_are_pythons_math_at_float64(name):
    function, xs = MATH[name]
    (got,) = run(getattr(tp, name), (xs, "float64"))
    np.testing.assert_allclose(got, [function(x) for x in xs], rtol=4e-16, atol=0)


@pytest.mark.parametrize("name", ["erf", "tanh", "rsqrt"])
def test_a_float32_op_is_its_float64_value_rounded_once(name):
    function, xs = MATH[name]
    (got,) = run(getattr(tp, name), (xs, "float32"))
    assert list(got) == [float(np.float32(function(float(np.float32(x))))) for x in xs]


@pytest.mark.parametrize("name", BINARY)
def test_binary_references(name):
    a = [-2.0, -0.5, 0.0, 1.5, 3.0, 3.0, 7.25, 0.5]
    b = [3.0, 0.5, 2.0, -1.5, 3.0, 2.0, 2.0, 4.0]
    if name == "pow":
        a = [abs(x) for x in a]
    (got,) = run(lambda x, y: getattr(tp, name)(x, y), (a, "float64"), (b, "float64"))
    np.testing.assert_allclose(got, [BINARY[name](x, y) for x, y in zip(a, b)], rtol=4e-16, atol=0)


def test_comparisons_with_nan_follow_ieee():
    nan = float("nan")
    (lt, ne, eq) = run(lambda x: (tp.lt(x, 1.0), tp.ne(x, x), tp.eq(x, x)), ([nan, 0.0], "float32"))
    assert list(lt) == [0.0, 1.0] and list(ne) == [1.0, 0.0] and list(eq) == [0.0, 1.0]


def test_where_and_logical_ops():
    c, a, b = [1.0, -1.0, 0.0, 2.0], [10.0, 20.0, 30.0, 40.0], [-1.0, -2.0, -3.0, -4.0]
    (picked, mixed, masked) = run(lambda c, a, b: (tp.where(tp.gt(c, 0), a, b), tp.where(tp.gt(c, 0), a, b),
                                                   tp.logical_or(tp.gt(c, 1.5), tp.logical_not(tp.ge(c, 0)))),
                                  (c, "float32"), (a, "bfloat16"), (b, "float32"))
    assert list(picked) == [10.0, -2.0, -3.0, 40.0] and list(masked) == [0.0, 1.0, 0.0, 1.0]
    (value,) = run(lambda c, a: tp.where(tp.lt(c, 0), -7, a), (c, "float32"), ([1, 2, 3, 4], "int32"))
    assert list(value) == [1.0, -7.0, 3.0, 4.0]


def test_bool_casts_are_zero_or_one():
    (back,) = run(lambda x: tp.cast(tp.cast(x, "bool"), "float32"), ([0.0, -0.0, 2.5, float("nan")], "float32"))
    assert list(back) == [0.0, 0.0, 1.0, 1.0]


def test_an_extent_value_is_the_size_in_the_compute_type():
    with tp.Fusion("extents") as fusion:
        t = tp.make_tensor(["M", "N"])
        fusion.add_input(t)
        fusion.add_output(tp.mul(t, "N"))
        fusion.add_output(tp.div(t, tp.extent(t, 0) * tp.extent(t, 1)))
    scaled, by_product = reference(fusion, [np.ones((3, 5))])
    assert (scaled == 5.0).all() and (by_product == float(np.float32(np.float32(1) / np.float32(15)))).all()


def test_min_mean_and_var_mean():
    x = np.array([[1.0, 4.0, -2.0, 8.0], [0.5, 0.5, 0.5, 0.5]])
    (low, average) = run(lambda t: (tp.min(t, 1), tp.mean(t, 1)), (x, "float64"))
    assert list(low) == [-2.0, 0.5] and list(average) == [2.75, 0.5]
    (var, mean) = run(lambda t: tp.var_mean(t, [1]), (x, "float64"))
    np.testing.assert_allclose(var, np.var(x, axis=1, ddof=1), rtol=1e-15)
    np.testing.assert_allclose(mean, np.mean(x, axis=1), rtol=1e-15)
    (var0, _) = run(lambda t: tp.var_mean(t, [0, 1], correction=0), (x, "float64"))
    np.testing.assert_allclose(var0, np.var(x), rtol=1e-15)
    (too_many, _) = run(lambda t: tp.var_mean(t, [1], correction=5), (x, "float64"))
    assert np.isinf(too_many[0]) and np.isnan(too_many[1])  # N - correction < 0: divided by 0, as PyTorch
