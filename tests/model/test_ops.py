"""The public op set (model/ops.py, model/composite.py, tp.min): each op's output dtype and
shape, value operands (numbers, extents), where's promotion and broadcasting, and the
ScheduleError each bad operand gets at the door."""

from __future__ import annotations

import contextlib

import pytest

import tileproof as tp
from tileproof.model import ops
from tileproof.model.expr import var
from tileproof.model.types import OpKind, promote_types

FLOAT_UNARY = ops.FLOAT_UNARY
DTYPES = ("float32", "float64", "float16", "bfloat16", "int8", "int32", "int64")


@pytest.fixture
def fusion_with():
    """fusion_with(*dtypes): a fusion, active for the rest of the test, with one [M, N] input per
    dtype; every fusion made is left after the test."""
    with contextlib.ExitStack() as stack:
        def make(*dtypes, shape=("M", "N")):
            fusion = stack.enter_context(tp.Fusion("ops"))
            tensors = []
            for d in dtypes:
                t = tp.make_tensor(list(shape), dtype=d)
                fusion.add_input(t)
                tensors.append(t)
            return fusion, tensors
        yield make


def shape(tv):
    return [str(tv.logical[k].extent_expr) for k in range(len(tv.logical)) if not tv.logical[k].is_reduction]


@pytest.mark.parametrize("name", FLOAT_UNARY)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_float_unary_ops_keep_shape_and_dtype(fusion_with, name, dtype):
    _, (a,) = fusion_with(dtype)
    out = getattr(tp, name)(a)
    assert out.dtype == a.dtype and shape(out) == ["M", "N"]
    assert out.definition.kind is OpKind.UNARY and out.definition.name == name


@pytest.mark.parametrize("name", FLOAT_UNARY)
@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "bool"])
def test_float_unary_ops_refuse_other_dtypes_at_the_door(fusion_with, name, dtype):
    _, (a,) = fusion_with(dtype)
    with pytest.raises(tp.ScheduleError, match=rf"^{name}: a \(T0\) is {dtype}; .*(cast it first|takes numbers)"):
        getattr(tp, name)(a)


@pytest.mark.parametrize("name", ["neg", "abs", "relu"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_sign_ops_take_every_number_type(fusion_with, name, dtype):
    _, (a,) = fusion_with(dtype)
    assert getattr(tp, name)(a).dtype == a.dtype


@pytest.mark.parametrize("name", ops.COMPARISONS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_comparisons_make_bool_tensors(fusion_with, name, dtype):
    _, (a, b) = fusion_with(dtype, dtype)
    out = getattr(tp, name)(a, b)
    assert out.dtype == tp.bool and shape(out) == ["M", "N"]
    assert getattr(tp, name)(a, 1).dtype == tp.bool
    assert getattr(tp, name)(1, a).definition.scalar.position == 0


def test_comparisons_of_two_dtypes_are_refused(fusion_with):
    _, (a, b) = fusion_with("float32", "bfloat16")
    with pytest.raises(tp.ScheduleError, match=r"^lt: dtypes differ \(float32 vs bfloat16\); cast first"):
        tp.lt(a, b)


def test_a_float_number_beside_an_integer_tensor_is_refused(fusion_with):
    _, (a,) = fusion_with("int32")
    with pytest.raises(tp.ScheduleError, match="gt: b is the float 0.5 but the tensor is int32"):
        tp.gt(a, 0.5)


@pytest.mark.parametrize("name", ["add", "mul", "maximum", "pow", "lt", "relu", "sum"])
def test_bool_tensors_take_no_arithmetic(fusion_with, name):
    _, (a, b) = fusion_with("float32", "float32")
    mask = tp.gt(a, b)
    with pytest.raises(tp.ScheduleError, match=rf"^{name}: .*bool"):
        if name == "sum":
            tp.sum(mask, 0)
        elif name == "relu":
            tp.relu(mask)
        else:
            getattr(tp, name)(mask, mask)


def test_bool_tensors_compare_equal_and_combine_logically(fusion_with):
    _, (a, b) = fusion_with("float32", "float32")
    p, q = tp.gt(a, 0), tp.lt(b, 0)
    for out in (tp.eq(p, q), tp.ne(p, q), tp.logical_and(p, q), tp.logical_or(p, q), tp.logical_not(p)):
        assert out.dtype == tp.bool
    with pytest.raises(tp.ScheduleError, match=r"^logical_and: a \(T0\) is float32; logical_and takes bool"):
        tp.logical_and(a, b)
    with pytest.raises(tp.ScheduleError, match="is bool and b is the number 1"):
        tp.eq(p, 1)


def test_pow_and_fmod(fusion_with):
    _, (a, i) = fusion_with("float32", "int32")
    assert tp.pow(a, 2.0).dtype == tp.float32 and tp.pow(2.0, a).definition.scalar.position == 0
    assert tp.fmod(i, 3).dtype == tp.int32
    with pytest.raises(tp.ScheduleError, match=r"^pow: a \(T1\) is int32; pow is computed on floating-point"):
        tp.pow(i, 2)


def test_where_promotes_its_values_and_broadcasts():
    with tp.Fusion("where"):
        c = tp.make_tensor(["M", "N"])
        a = tp.make_tensor(["M", "N"], dtype="bfloat16")
        b = tp.make_tensor(["N"], dtype="float16")
        bb = tp.broadcast(b, [True, False])
        out = tp.where(tp.gt(c, 0), a, bb)
        assert out.dtype == tp.float32 and shape(out) == ["M", "N"]
        assert out.definition.kind is OpKind.TERNARY and len(out.definition.inputs) == 3
        assert tp.where(tp.gt(c, 0), 0.0, a).dtype == tp.bfloat16
        assert str(tp.where(tp.gt(c, 0), a, -1.5).definition).endswith("where(T8, T1, -1.5)")
        i = tp.make_tensor(["M", "N"], dtype="int8")
        assert tp.where(tp.gt(c, 0), i, tp.make_tensor(["M", "N"], dtype="int64")).dtype == tp.int64
        assert tp.where(tp.gt(c, 0), i, a).dtype == tp.bfloat16


def test_promote_types_follows_pytorch():
    assert promote_types(tp.float16, tp.bfloat16) == tp.float32
    assert promote_types(tp.int64, tp.float16) == tp.float16
    assert promote_types(tp.float32, tp.float64) == tp.float64
    assert promote_types(tp.int8, tp.int32) == tp.int32
    assert promote_types(tp.bool, tp.int8) == tp.int8


def test_where_refuses_bad_operands():
    with tp.Fusion("where"):
        c = tp.make_tensor(["M", "N"])
        a = tp.make_tensor(["M", "N"])
        k = tp.make_tensor(["M", "K"])
        mask = tp.gt(c, 0)
        with pytest.raises(tp.ScheduleError, match=r"^where: condition \(T0\) is float32, not bool"):
            tp.where(c, a, a)
        with pytest.raises(tp.ScheduleError, match="where: a and b are both values"):
            tp.where(mask, 1.0, 0.0)
        with pytest.raises(tp.ScheduleError, match=r"where: b \(T\d+\) is bool"):
            tp.where(mask, a, mask)
        with pytest.raises(tp.ScheduleError, match="where: expected a TensorView, a number or an extent for b"):
            tp.where(mask, a, [1])
        with pytest.raises(tp.ScheduleError, match="where: T3 has 2 dimensions, T4 has 1; broadcast first"):
            tp.where(mask, a, tp.make_tensor(["N"]))
        out = tp.where(mask, a, k)  # N and K become one extent, as tp.add does
        assert shape(out) == ["M", "N"]
        with pytest.raises(tp.ScheduleError, match="extents 4 and 8 differ"):
            tp.where(tp.gt(tp.make_tensor([4]), 0), tp.make_tensor([8]), 0.0)


def test_extent_values_by_name_and_by_tp_extent(fusion_with):
    _, (a,) = fusion_with("float32")
    s = tp.sum(a, 1)
    by_name = tp.div(s, "N")
    by_axis = tp.div(s, tp.extent(a, -1))
    for out in (by_name, by_axis):
        assert out.definition.scalar.value == var("N") and str(out.definition).endswith("div(T1, N)")
    product = tp.mul(a, tp.extent(a, 0) * tp.extent(a, 1))
    assert str(product.definition.scalar) == "M*N"
    with pytest.raises(tp.ScheduleError, match=r"div: b 'K' is no extent symbol of this fusion \(its symbols: M, N\)"):
        tp.div(s, "K")
    with pytest.raises(tp.ScheduleError, match="extent: axis 2 is out of range for T0 with 2 dimensions"):
        tp.extent(a, 2)


def test_an_integer_tensor_takes_an_extent_it_holds(fusion_with):
    _, (a, b) = fusion_with("int32", "int64")
    assert tp.add(a, "N").definition.scalar.value == var("N")
    with pytest.raises(tp.ScheduleError, match=r"more than int32 holds .*cast the tensor to int64 or float"):
        tp.add(a, tp.extent(a, 0) * tp.extent(a, 1))
    assert tp.add(b, tp.extent(b, 0) * tp.extent(b, 1)).dtype == tp.int64


def test_an_extent_value_follows_extent_unification():
    with tp.Fusion("unify") as fusion:
        a = tp.make_tensor(["N"])
        b = tp.make_tensor(["K"])
        scaled = tp.mul(b, "K")
        tp.add(a, b)  # K becomes N
        assert scaled.definition.scalar.value == var("N") and "K" not in fusion.symbols


def test_min_reduces_like_max(fusion_with):
    _, (a,) = fusion_with("float32")
    out = tp.min(a, 1)
    assert out.definition.name == "min" and shape(out) == ["M"]
    from tileproof.model.reduction import neutral
    assert neutral("min", tp.float32) == float("inf") and neutral("min", tp.int8) == 127


def test_mean_is_a_sum_divided_by_the_extent_product(fusion_with):
    _, (a,) = fusion_with("bfloat16")
    m = tp.mean(a, [0, 1])
    assert m.definition.name == "div" and str(m.definition.scalar) == "M*N" and m.dtype == tp.bfloat16
    assert m.definition.inputs[0].definition.name == "sum"
    _, (i,) = fusion_with("int32")
    with pytest.raises(tp.ScheduleError, match=r"^mean: T0 is int32; mean is computed on floating-point types"):
        tp.mean(i, 1)


def test_var_mean_is_one_welford_and_a_division(fusion_with):
    fusion, (a,) = fusion_with("float32")
    var_, mean = tp.var_mean(a, [1])
    assert shape(var_) == ["M"] and shape(mean) == ["M"]
    assert [op.name for op in fusion.exprs] == ["welford_avg", "welford_var_sum", "welford_n", "div"]
    assert mean is fusion.exprs[0].output and var_.definition.inputs[0] is fusion.exprs[1].output
    assert fusion.reduction_groups == [tuple(op.output for op in fusion.exprs[:3])]  # siblings
    assert str(var_.definition.scalar) == "max(0, N - 1)"
    _, biased = tp.var_mean(a, 1, correction=0)
    assert str(fusion.exprs[-1].scalar) == "N"
    with pytest.raises(tp.ScheduleError, match="var_mean: correction must be a non-negative int, got -1"):
        tp.var_mean(a, 1, correction=-1)
    _, (h,) = fusion_with("bfloat16")
    with pytest.raises(tp.ScheduleError, match="var_mean takes float32 or float64, as nvFuser's variance_mean"):
        tp.var_mean(h, 1)


def test_gelu_is_nvfusers_chain(fusion_with):
    fusion, (a,) = fusion_with("float32")
    tp.gelu(a)
    assert [op.name for op in fusion.exprs] == ["mul", "erf", "add", "mul", "mul"]
    fusion, (b,) = fusion_with("float32")
    tp.tanh_gelu(b)
    assert [op.name for op in fusion.exprs] == ["mul", "mul", "mul", "add", "mul", "tanh", "add", "mul", "mul"]


def test_bool_is_a_public_dtype(fusion_with):
    assert tp.bool.bytes == 1 and tp.bool.is_bool and not tp.bool.is_integer
    _, (a,) = fusion_with("bool")
    assert tp.cast(a, tp.float32).dtype == tp.float32
    assert tp.cast(tp.make_tensor([4]), "bool").dtype == tp.bool
