"""ParallelType.Group (nvFuser's cross-iteration grouped reduction): the door checks of
IterDomain.parallelize, REDUCTION-GROUP-AXIS on failing and passing schedules (a tensor that is
not a reduction, an axis inside an inlined loop, a symbolic extent given by parallelize_all_like,
more than 16 reductions together), and what the kernel does with a group: right of the reduction
axes its indices are the accumulator's elements, combined in one grid round (GridReduce with
`elements` = the group); left of them, an unrolled loop of rounds."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.codegen.ir import GridReduce, Loop, LoopKind, walk
from tileproof.codegen.lower import lower
from tileproof.model.targets import get_target
from tileproof.rule_examples import column_allreduce

P = tp.ParallelType


def _errors(fusion):
    return sorted({d.code for d in tp.verify(fusion, "sm_90a").diagnostics if d.severity.value == "error"})


def _group_diagnostics(fusion):
    return [d for d in tp.verify(fusion, "sm_90a").diagnostics if d.code == "REDUCTION-GROUP-AXIS"]


def _kernel(fusion):
    return lower(fusion.snapshot(), get_target("sm_90a")).kernel


def test_group_on_the_sums_column_pair_is_accepted_and_combined_in_one_grid_round():
    fusion, t1, t2, t4 = column_allreduce("grouped_sum")
    t2.axis(4).parallelize(P.Group)
    assert _errors(fusion) == []
    reduces = [n for n in walk(_kernel(fusion).body) if isinstance(n, GridReduce)]
    assert [(n.allreduce, n.elements) for n in reduces] == [(True, 2)]


def test_group_left_of_the_reduction_axes_is_an_unrolled_loop_of_rounds():
    """nvFuser's CrossIterationGroupedGridAllreduce4: [N/64 (BIDx), 32 (TIDx), 2 (Group), M/8 (BIDy), 8 (TIDy)]."""
    with tp.Fusion("grouped_outer") as fusion:
        t0 = tp.make_contig_concrete_tensor([64, 256]); fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.sum(t1, [0])
        t4 = tp.add(t0, tp.broadcast(t2, [True, False])); fusion.add_output(t4)
    t2.reorder({0: 1})
    t2.split(0, 2).split(0, 32).split(-1, 8)
    tp.propagate_transforms(t2)
    t2.axis(2).parallelize(P.Group)
    tp.inline_most(fusion)
    assert t2.compute_at == 2 and t1.compute_at == 2  # inlining stops at the grouped axis, as nvFuser's
    t4.axis(0).parallelize(P.BIDx)
    t4.axis(1).parallelize(P.TIDx)
    for t in (t1, t2, t4):
        t.axis(-2).parallelize(P.BIDy)
        t.axis(-1).parallelize(P.TIDy)
    assert _errors(fusion) == []
    loops = [n for n in walk(_kernel(fusion).body) if isinstance(n, Loop) and n.kind is LoopKind.UNROLL]
    assert any(any(isinstance(m, GridReduce) for m in walk(loop.body)) for loop in loops)


def test_group_on_a_tensor_that_is_no_reduction_is_refused():
    fusion, t1, t2, t4 = column_allreduce("grouped_add")
    t4.axis(4).parallelize(P.Group)
    [d] = _group_diagnostics(fusion)
    assert "T4 is not a reduction's output" in d.message


def test_group_inside_an_inlined_loop_is_refused():
    fusion, t1, t2, t4 = column_allreduce("grouped_inlined")
    t1.inline_at(5)  # the producer shares the grouped loop: T1's axis takes Group
    t2.axis(4).parallelize(P.Group)
    messages = [d.message for d in _group_diagnostics(fusion)]
    assert any("T1 is not a reduction's output" in m for m in messages)
    assert any("a producer is inlined into T2 at 5, past its grouped axis 4" in m for m in messages)


def test_group_of_more_than_16_reductions_is_refused():
    with tp.Fusion("grouped_32") as fusion:
        t0 = tp.make_contig_concrete_tensor([64, 2048]); fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.sum(t1, [0])
        t4 = tp.add(t0, tp.broadcast(t2, [True, False])); fusion.add_output(t4)
    t1.split(1, 32).split(1, 32).split(0, 8)
    tp.propagate_transforms(t1)
    for k, p in enumerate((P.BIDy, P.TIDy, P.BIDx, P.TIDx)):
        t1.axis(k).parallelize(p)
    tp.parallelize_all_like(t1)
    t2.axis(4).parallelize(P.Group)
    [d] = _group_diagnostics(fusion)
    assert "groups 32 reductions" in d.message and "16" in d.message
    t2.axis(4).parallelize(P.Serial)
    assert _group_diagnostics(fusion) == []


def test_a_symbolic_group_given_by_parallelize_all_like_is_refused():
    with tp.Fusion("grouped_symbolic") as fusion:
        t0 = tp.make_tensor(["M", "N"]); fusion.add_input(t0)
        t2 = tp.sum(t0, [0])
        t4 = tp.add(t0, tp.broadcast(t2, [True, False])); fusion.add_output(t4)
    fusion.assume("M <= 524280")
    t2.split(1, 32).split(0, 8)
    tp.propagate_transforms(t2)
    for k, p in enumerate((P.BIDy, P.TIDy)):
        t2.axis(k).parallelize(p)
    t2.axis(3).parallelize(P.TIDx)
    t2.axis(2).set_parallel_type(P.Group, None)  # what parallelize_all_like does: no door check
    tp.parallelize_all_like(t2)
    assert any("symbolic extent" in d.message for d in _group_diagnostics(fusion))


@pytest.mark.parametrize("axis, message", [(0, "reduction axis"), (1, "symbolic extent")])
def test_parallelize_refuses_group_on_a_reduction_axis_or_a_symbolic_extent(axis, message):
    with tp.Fusion("door"):
        t0 = tp.make_tensor(["M", "N"])
        t2 = tp.sum(t0, [0])
    t2.split(1, 4)
    with pytest.raises(tp.ScheduleError, match=message):
        t2.axis(axis).parallelize(P.Group)  # [r{M}, N/4, 4]: axis 2 (constant, iteration) is the groupable one
    t2.axis(2).parallelize(P.Group)
