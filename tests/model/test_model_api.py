"""Bad input gets a clear ScheduleError naming the problem, at the door."""

from __future__ import annotations

import numpy as np
import pytest

import tileproof as tp

P = tp.ParallelType


def copy_chain(shape=(8, 4)):
    with tp.Fusion("copy") as fusion:
        t0 = tp.make_contig_concrete_tensor(list(shape)); fusion.add_input(t0)
        t1 = tp.set(t0); t2 = tp.set(t1); fusion.add_output(t2)
    return fusion, t0, t1, t2


@pytest.mark.parametrize("call, message", [
    (lambda t: t.split(0, -4), "factor must be a positive int or symbol, got -4"),
    (lambda t: t.split(0, 2.5), "factor must be a positive int or symbol"),
    (lambda t: t.split(5, 2), "axis 5 is out of range for T1 with 2 loop axes"),
    (lambda t: t.merge(1), "no axis after axis 1"),
    (lambda t: t.reorder([0]), "needs 2 entries"),
    (lambda t: t.reorder({0: 0, 1: 0}), "positions repeat"),
    (lambda t: t.swizzle("xor", 0, 1), "expected a tp.SwizzleType"),
    (lambda t: t.axis(0).parallelize("TIDx"), "expected a tp.ParallelType"),
    (lambda t: t.set_tmem_dim_sep_pos(1), "only for tensor memory"),
    (lambda t: t.set_memory_type("shared"), "expected a tp.MemoryType"),
    (lambda t: t.inline_at(3), "out of range"),
])
def test_schedule_calls_check_their_arguments(call, message):
    _, _, t1, _ = copy_chain()
    with pytest.raises(tp.ScheduleError, match=message):
        call(t1)


def test_split_of_parallelized_axis_is_refused():
    _, _, t1, _ = copy_chain()
    t1.axis(0).parallelize(P.TIDx)
    with pytest.raises(tp.ScheduleError, match="it is parallelized"):
        t1.split(0, 2)


def test_transform_inside_compute_at_is_refused():
    _, _, t1, _ = copy_chain()
    t1.inline_at(1)
    with pytest.raises(tp.ScheduleError, match="inside its compute-at position"):
        t1.split(0, 2)


def test_inline_beyond_mapped_axes_is_refused():
    _, _, t1, t2 = copy_chain()
    t2.split(1, 2)
    with pytest.raises(tp.ScheduleError, match="does not map"):
        t1.inline_at(2)


def test_fusion_io_must_stay_global():
    _, t0, _, _ = copy_chain()
    with pytest.raises(tp.ScheduleError, match="must stay in global memory"):
        t0.set_memory_type(tp.MemoryType.Shared)


def test_ops_outside_a_fusion_are_refused():
    with pytest.raises(tp.ScheduleError, match="no active fusion"):
        tp.make_contig_concrete_tensor([4])


def test_tensor_shapes_are_checked():
    with tp.Fusion():
        with pytest.raises(tp.ScheduleError, match="extents must be positive ints"):
            tp.make_contig_concrete_tensor([4, 0])
        with pytest.raises(tp.ScheduleError, match="unknown dtype"):
            tp.make_contig_concrete_tensor([4], dtype="float17")


@pytest.mark.parametrize("kwargs, message", [
    ({"target": "sm_75"}, "unknown target 'sm_75'"),
    ({"bind": {"Q": 4}}, "unknown symbol 'Q'"),
    ({"bind": {"N": -1}}, "must be a positive int"),
])
def test_verify_checks_its_arguments(kwargs, message):
    with tp.Fusion() as fusion:
        t0 = tp.make_tensor(["N"]); fusion.add_input(t0)
        fusion.add_output(tp.set(t0))
    with pytest.raises(tp.ScheduleError, match=message):
        tp.verify(fusion, **kwargs)


def test_verify_rejects_structurally_broken_fusions():
    with tp.Fusion() as fusion:
        t0 = tp.make_contig_concrete_tensor([4])
        tp.set(t0)
    with pytest.raises(tp.ScheduleError, match="has no outputs"):
        tp.verify(fusion)
    fusion.add_output(fusion.tensors[1])
    with pytest.raises(tp.ScheduleError, match="neither a fusion input"):
        tp.verify(fusion)
    with pytest.raises(tp.ScheduleError, match="expected a tp.Fusion"):
        tp.verify("not a fusion")


def test_assumptions_parse_and_refuse_nonsense():
    with tp.Fusion() as fusion:
        t0 = tp.make_tensor(["N"]); fusion.add_input(t0)
        fusion.add_output(tp.set(t0))
    fusion.assume("N % 4 == 0 and N >= 64")
    assert len(fusion.assumptions) == 1
    for bad, message in [("M > 3", "unknown extent symbol M"), ("N +", "cannot parse"),
                         ("__import__('os')", "unsupported syntax"), ("N", "not a condition")]:
        with pytest.raises(tp.ScheduleError, match=message):
            fusion.assume(bad)


def test_cache_after_and_before_rewire_the_dataflow():
    fusion, t0, t1, t2 = copy_chain()
    c = t0.cache_after()
    assert t1.definition.inputs == [c] and c.definition.inputs == [t0]
    b = t2.cache_before()
    assert b.definition.inputs == [t1] and t2.definition.inputs == [b]
    assert tp.verify(fusion).ok


def test_verify_works_on_a_snapshot():
    fusion, _, t1, t2 = copy_chain((1024, 1024))
    t1.set_memory_type(tp.MemoryType.Shared)
    report = tp.verify(fusion)
    t1.set_memory_type(tp.MemoryType.Local)  # later edits do not change an issued report
    assert report.codes == ["SMEM-CAPACITY"]
    assert "SMEM-CAPACITY" not in tp.verify(fusion).codes  # (4 MiB of registers has problems of its own)


def test_a_wrong_call_is_caught_as_tileproof_error_and_as_value_error():
    _, _, t1, _ = copy_chain()
    for root in (tp.TileproofError, ValueError):
        with pytest.raises(root, match="factor must be a positive int or symbol, got -4"):
            t1.split(0, -4)
    with pytest.raises(tp.ScheduleError) as e:
        t1.split(0, -4)
    assert not isinstance(e.value, tp.InternalError)  # your mistake, not our bug


# -- casts and number operands -------------------------------------------------------------------


def one_input(dtype="float32", shape=("M", 8)):
    fusion = tp.Fusion("ops")
    with fusion:
        t0 = tp.make_tensor(list(shape), dtype=dtype)
        fusion.add_input(t0)
    return fusion, t0


@pytest.mark.parametrize("dest", ["float32", "float64", "float16", "bfloat16", "int8", "int32", "int64"])
def test_cast_gives_a_tensor_of_the_new_dtype_and_the_same_shape(dest):
    fusion, t0 = one_input("bfloat16" if dest == "float32" else "float32")
    with fusion:
        t1 = tp.cast(t0, dest)
        t2 = tp.cast(t0, getattr(tp, dest))
    for t in (t1, t2):
        assert t.dtype is getattr(tp, dest)
        assert [str(i.extent) for i in t.logical] == ["M", "8"]
        assert t.definition.kind == "cast" and t.definition.inputs == [t0]
    assert str(t1.definition) == f"{t1.name} = cast(T0, {dest})"


def test_a_cast_to_the_same_dtype_is_a_set():
    fusion, t0 = one_input("bfloat16")
    with fusion:
        t1 = tp.cast(t0, tp.bfloat16)
    assert t1.dtype is tp.bfloat16 and t1.definition.kind == "load_store" and t1.definition.name == "set"


@pytest.mark.parametrize("call, message", [
    (lambda t: tp.cast(t, "float8"), "cast: unknown dtype 'float8'"),
    (lambda t: tp.cast(t, None), "cast: unknown dtype None"),
    (lambda t: tp.cast(2.0, tp.float32), "cast: expected a TensorView for tv, got float 2.0"),
    (lambda t: tp.mul(t, "2"), "mul: b '2' is no extent symbol of this fusion"),  # a string names an extent
    (lambda t: tp.add(None, t), "add: expected a TensorView or a number \\(int, float\\) for a, got NoneType None"),
    (lambda t: tp.sub(t, [1.0]), "sub: expected a TensorView or a number .* for b, got list \\[1.0\\]"),
    (lambda t: tp.div(t, np.ones(3)), "div: expected a TensorView or a number .* for b, got ndarray"),
    (lambda t: tp.mul(t, True), "mul: b is a bool \\(True\\); tileproof has no bool dtype: pass 1 or 1.0"),
    (lambda t: tp.add(1, 2.0), "add: one operand must be a TensorView, got two numbers 1 and 2.0"),
    (lambda t: tp.mul(t, 1e300), "mul: b 1e\\+300 overflows float32, the type float32 arithmetic is done in"),
    (lambda t: tp.mul(t, 10 ** 400), "overflows float32"),
    (lambda t: tp.neg(2.0), "neg: expected a TensorView for a, got float 2.0 \\(of the ops, only the binary ones"),
])
def test_casts_and_number_operands_check_their_arguments(call, message):
    fusion, t0 = one_input()
    with fusion, pytest.raises(tp.ScheduleError, match=message):
        call(t0)


def test_an_integer_tensor_takes_int_numbers_in_its_compute_range():
    fusion, t0 = one_input("int8")
    with fusion:
        with pytest.raises(tp.ScheduleError, match="mul: b is the float 2.0 but the tensor is int8; tileproof does "
                                                   "not promote .* cast the tensor first"):
            tp.mul(t0, 2.0)
        with pytest.raises(tp.ScheduleError, match="out of range for int8 arithmetic, which is done in int32"):
            tp.add(t0, 2 ** 31)
        t1 = tp.add(t0, 1000)  # computed in int32, stored back to int8
        t2 = tp.sub(np.int64(3), t0)
    assert t1.dtype is tp.int8 and t1.definition.scalar.value == 1000
    assert t2.definition.scalar.position == 0 and t2.definition.scalar.value == 3 and type(t2.definition.scalar.given) is int


@pytest.mark.parametrize("dtype, number, value", [
    ("float32", 0.1, float(np.float32(0.1))),
    ("bfloat16", 0.1, float(np.float32(0.1))),  # 16-bit floats compute in float32
    ("float16", 3, 3.0),
    ("float64", 0.1, 0.1),
    ("int32", 7, 7),
    ("int64", 2 ** 40, 2 ** 40),
    ("float32", float("inf"), float("inf")),
    ("float32", np.float32(2.5), 2.5),
])
def test_a_number_is_converted_to_the_compute_type(dtype, number, value):
    fusion, t0 = one_input(dtype)
    with fusion:
        t1 = tp.mul(t0, number)
    scalar = t1.definition.scalar
    assert scalar.value == value and type(scalar.value) is type(value) and scalar.position == 1
    assert t1.dtype is getattr(tp, dtype) and t1.definition.inputs == [t0]
    assert [str(i.extent) for i in t1.logical] == ["M", "8"]


def test_number_operands_keep_their_side_and_print_as_written():
    fusion, t0 = one_input(shape=(4, 8))
    with fusion:
        t1 = tp.sub(2, t0)
        t2 = tp.div(t1, 0.1)
        fusion.add_output(t2)
    assert str(t1.definition) == "T1 = sub(2, T0)" and str(t2.definition) == "T2 = div(T1, 0.1)"
    assert tp.verify(fusion).ok


def test_compute_types():
    assert [getattr(tp, d).compute for d in ("float16", "bfloat16", "float32", "float64", "int8", "int32", "int64")] \
        == [tp.float32, tp.float32, tp.float32, tp.float64, tp.int32, tp.int32, tp.int64]
    assert [d.is_integer for d in (tp.int8, tp.int64, tp.float16)] == [True, True, False]
