"""tp.welford (model/welford.py): three sibling reduction outputs of one group, their shapes, the
rfactor of the three together (each final output then reads the three partial states), the
siblings inlined alike, and the clear errors for bad input."""

from __future__ import annotations

import pytest

import tileproof as tp


def test_welford_is_three_siblings_over_the_same_axes():
    with tp.Fusion("w") as fusion:
        x = tp.make_tensor(["M", "N", "K"], contiguity=True, dtype=tp.float32)
        fusion.add_input(x)
        result = tp.welford(x, [0, 2])
    avg, var_sum, n = result
    assert isinstance(result, tp.WelfordResult) and (result.avg, result.var_sum, result.n) == (avg, var_sum, n)
    assert [t.definition.name for t in result] == ["welford_avg", "welford_var_sum", "welford_n"]
    for t in result:
        assert t.definition.inputs == [x] and t.dtype == (tp.int64 if t is n else tp.float32)  # N: nvFuser's index type
        assert [i.is_reduction for i in t.logical] == [True, False, True]
    assert fusion.reduction_groups == [(avg, var_sum, n)]


def test_welford_of_float64_keeps_float64():
    with tp.Fusion("w") as fusion:
        x = tp.make_tensor(["M", "N"], contiguity=True, dtype=tp.float64)
        fusion.add_input(x)
        assert [t.dtype for t in tp.welford(x, -1)] == [tp.float64, tp.float64, tp.int64]


@pytest.mark.parametrize("dtype, match", [
    ("bfloat16", r"^welford: T0 is bfloat16; a Welford reduction is computed on float32 or float64: cast it first"),
    ("float16", r"^welford: T0 is float16; a Welford reduction is computed on float32"),
    ("int32", r"^welford: T0 is int32; a Welford reduction is computed on float32"),
])
def test_welford_refuses_what_is_not_float32_or_float64(dtype, match):
    with tp.Fusion("w") as fusion:
        x = tp.make_tensor(["M", "N"], contiguity=True, dtype=dtype)
        fusion.add_input(x)
        with pytest.raises(tp.ScheduleError, match=match):
            tp.welford(x, 1)


def test_welford_checks_its_axes_and_input():
    with tp.Fusion("w") as fusion:
        x = tp.make_tensor(["M", "N"], contiguity=True, dtype=tp.float32)
        fusion.add_input(x)
        with pytest.raises(tp.ScheduleError, match=r"^welford: axis 2 is out of range for T0 with 2 dimensions"):
            tp.welford(x, 2)
        with pytest.raises(tp.ScheduleError, match=r"^welford: axes is empty"):
            tp.welford(x, [])
        with pytest.raises(tp.ScheduleError, match=r"^welford: expected a TensorView for x, got float 1.0"):
            tp.welford(1.0, 0)
        b = tp.broadcast(tp.sum(x, 1), [False, True])
        with pytest.raises(tp.ScheduleError, match=r"^welford: axis 1 of T\d+ \(b\S+\) is a broadcast axis"):
            tp.welford(b, 1)
        assert not fusion.reduction_groups  # nothing recorded by a refused call


def test_a_welford_output_is_no_reduction_to_group_again():
    with tp.Fusion("w") as fusion:
        x = tp.make_tensor(["M", "N"], contiguity=True, dtype=tp.float32)
        fusion.add_input(x)
        avg, _, _ = tp.welford(x, 1)
        total = tp.sum(x, 1)
        with pytest.raises(tp.ScheduleError, match=r"^group_reductions: T1 is not the output of a reduction \(tp.sum, "
                                                   r"tp.max, tp.min\) but of `T1 = welford_avg\(T0\)`"):
            tp.group_reductions([avg, total])


def test_rfactor_of_one_output_rfactors_the_three_and_the_outputs_combine_the_partial_states():
    with tp.Fusion("w") as fusion:
        x = tp.make_tensor(["M", "N"], contiguity=True, dtype=tp.float32)
        fusion.add_input(x)
        avg, var_sum, n = tp.welford(x, 1)
        avg.split(1, 128)
        partials = avg.rfactor([1])
    assert [t.definition.name for t in partials] == ["welford_avg", "welford_var_sum", "welford_n"]
    assert all(t.definition.inputs == [x] for t in partials)
    for t in (avg, var_sum, n):  # each final output reads all three partial states
        assert t.definition.inputs == partials and len(t.definition.logical_map) == 3
        assert [i.extent for i in t.loop] == [avg.loop[0].extent, 128]  # var_sum and n were replayed like avg
    assert fusion.reduction_groups == [tuple(partials), (avg, var_sum, n)]
    with pytest.raises(tp.ScheduleError, match=r"^rfactor: tensors must be T1's group in its order"):
        avg.rfactor([1], [avg])


def test_inline_most_keeps_the_siblings_at_one_position():
    with tp.Fusion("w") as fusion:
        x = tp.make_tensor(["M", "N"], contiguity=True, dtype=tp.float32)
        fusion.add_input(x)
        var, mean = tp.var_mean(x, [1])  # var_sum has a consumer (the division), avg and n none
        fusion.add_output(var)
        fusion.add_output(mean)
    tp.propagate_transforms(mean)
    tp.inline_most(fusion)
    positions = {t.definition.name: t.compute_at for t in fusion.reduction_groups[0]}
    # var_sum's position (its reduction axis stops it at 1); avg and n, which nothing reads, bound nothing
    assert positions == {"welford_avg": 1, "welford_var_sum": 1, "welford_n": 1}, positions


def test_var_mean_returns_the_welford_avg():
    with tp.Fusion("w") as fusion:
        x = tp.make_tensor(["M", "N"], contiguity=True, dtype=tp.float32)
        fusion.add_input(x)
        var, mean = tp.var_mean(x, 1, correction=0)
    assert mean.definition.name == "welford_avg"
    assert var.definition.name == "div" and var.definition.inputs[0].definition.name == "welford_var_sum"
    assert str(var.definition.scalar) == "N"


def test_cache_before_of_a_welford_output_is_refused_clearly():
    with tp.Fusion("w") as fusion:
        x = tp.make_tensor(["M", "N"], contiguity=True, dtype=tp.float32)
        fusion.add_input(x)
        avg, _, _ = tp.welford(x, 1)
        with pytest.raises(tp.ScheduleError, match=r"^cache_before: T1 is an output of tp.welford \(with T2, T3\); "
                                                   r"tileproof does not cache one output of a multi-output op"):
            avg.cache_before()


def test_a_total_welford_of_a_1d_tensor():
    with tp.Fusion("w") as fusion:
        x = tp.make_tensor(["N"], contiguity=True, dtype=tp.float32)
        fusion.add_input(x)
        result = tp.welford(x, 0)
    assert all(len(t.logical) == 1 and t.logical[0].is_reduction for t in result)
