"""A loop of the kernel has one parallel type, given to its Serial members (model/loop_map.py,
nvFuser's ComputeAtMap::validateAndPropagatePType), and best-effort inlining stops before an
Unroll axis (nvFuser's MaxPosCalculator::isAllowedID with best_effort)."""

from __future__ import annotations

import tileproof as tp
from tileproof.execution.loops import loop_groups
from tileproof.model.loop_map import propagated_types

P = tp.ParallelType


def row_sum(shape=None):
    """t1 = t0 + 1; t2 = sum(t1, [1]), split by 128, t1 inlined as far as it goes; only t2 is
    parallelized (axis 0 BIDx, axis 2 TIDx): nvFuser's loop map gives t1 both."""
    with tp.Fusion("row_sum") as fusion:
        t0 = tp.make_contig_tensor(2) if shape is None else tp.make_contig_concrete_tensor(shape)
        fusion.add_input(t0)
        t1 = tp.add(t0, 1.0)
        t2 = tp.sum(t1, [1])
        fusion.add_output(t2)
    t2.split(1, 128)
    tp.propagate_transforms(t2)
    tp.inline_most(fusion)
    t2.axis(0).parallelize(P.BIDx)
    t2.axis(2).parallelize(P.TIDx)
    return fusion, t1, t2


def test_a_serial_member_takes_its_loops_type():
    fusion, t1, t2 = row_sum()
    assert t1.compute_at == 3
    given = propagated_types(fusion)
    assert {given[t1.loop[0].uid][0], given[t1.loop[2].uid][0]} == {P.BIDx, P.TIDx}
    assert t1.loop[1].uid not in given  # a serial loop gives nothing
    groups = loop_groups(fusion)
    assert [groups.of[("T1", k)].parallel for k in range(3)] == [P.BIDx, P.Serial, P.TIDx]
    assert not groups.mismatched


def test_the_users_schedule_keeps_its_types_the_snapshot_takes_the_loops():
    fusion, t1, _ = row_sum()
    report = tp.verify(fusion)
    assert report.ok, report.codes
    assert t1.loop[0].parallel_type is P.Serial  # the user's schedule is not changed
    kernel = tp.compile(fusion)
    assert "blockIdx.x * s_T0_1" in kernel.cuda_source  # T1 reads its row at blockIdx.x


def test_a_propagated_thread_axis_is_not_allocated_in_registers():
    fusion, t1, _ = row_sum([8, 300])
    t1.inline_at(1)  # axes 1 and 2 right of the position: allocated unless distributed
    rows = tp.allocation(t1).ids
    assert [(r.allocated, r.rule) for r in rows] == [(False, "distributed"), (True, "compute-at"), (True, "compute-at")]
    t1.inline_at(3)
    rows = tp.allocation(t1).ids
    assert [r.rule for r in rows] == ["distributed", "compute-at", "distributed"]
    assert tp.allocation(t1).num_elements == 1


def test_two_different_types_in_one_loop_are_still_rejected():
    fusion, t1, _ = row_sum()
    t1.axis(0).parallelize(P.BIDy)
    report = tp.verify(fusion)
    assert "INLINE-PARALLEL-MATCH" in report.codes
    d = next(d for d in report.errors if d.code == "INLINE-PARALLEL-MATCH")
    assert "T2 axis 0 (BIDx) shares a loop with T1 axis 0 (BIDy)" in d.message
    assert not propagated_types(fusion).get(t1.loop[0].uid)


def test_a_vectorized_loop_is_not_given_to_an_inlined_axis():
    with tp.Fusion("vec") as fusion:
        t0 = tp.make_contig_concrete_tensor([64, 4])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t2.axis(1).parallelize(P.Vectorize)
    t1.compute_at = 2  # past the consumer's vector, as no inlining call would
    assert not propagated_types(fusion)
    report = tp.verify(fusion)
    assert "INLINE-PARALLEL-MATCH" in report.codes


def unrolled_copy(where: str):
    """t0 -> t1 -> t2 of [64, 128] as [16 (BIDx), 4, 128 (TIDx)]: axis 1 Unroll on `where`
    ("consumer", "producer", "both")."""
    with tp.Fusion("unrolled_copy") as fusion:
        t0 = tp.make_contig_concrete_tensor([64, 128])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    for t in (t1, t2):
        t.split(0, 4)  # [I0/4, 4, I1]
        t.axis(0).parallelize(P.BIDx)
        t.axis(2).parallelize(P.TIDx)
    if where in ("consumer", "both"):
        t2.axis(1).parallelize(P.Unroll)
    if where in ("producer", "both"):
        t1.axis(1).parallelize(P.Unroll)
    return fusion, t1, t2


def test_inline_most_stops_before_an_unroll_axis():
    for where in ("consumer", "producer", "both"):
        fusion, t1, _ = unrolled_copy(where)
        tp.inline_most(fusion)
        assert t1.compute_at == 1, where
        assert tp.verify(fusion).ok, where


def test_inline_all_at_stops_before_an_unroll_axis():
    fusion, t1, t2 = unrolled_copy("consumer")
    tp.inline_all_at(t2, -1)
    assert t1.compute_at == 1


def test_inline_at_may_go_past_an_unroll_axis_and_takes_it():
    fusion, t1, _ = unrolled_copy("consumer")
    t1.inline_at(-1)
    assert t1.compute_at == 3
    assert propagated_types(fusion)[t1.loop[1].uid][0] is P.Unroll
    report = tp.verify(fusion)
    assert report.ok, report.codes


def test_allocation_is_the_one_verify_and_the_kernel_see():
    """tp.allocation on the user's tensor gives loops their members' types as verify does: t2, a
    register circular buffer inlined under t3's Unroll loop, has its stages for each of that
    loop's iterations (nvFuser's SingleDimUnroll; before, tp.allocation said 2 and the kernel 8)."""
    with tp.Fusion("unrolled_member") as fusion:
        t0 = tp.make_contig_tensor(1)
        fusion.add_input(t0)
        t1 = tp.add(t0, 1.0)
        t1.set_memory_type(tp.MemoryType.Shared)
        t2 = tp.set(t1)
        t3 = tp.add(t2, 1.0)
        fusion.add_output(t3)
    t3.split(-1, 128).split(-1, 16).split(-2, 4).split(-2, 2)  # [N / 128, 2, 2, 2, 16]
    tp.propagate_transforms(t3)
    t1.inline_at(1)
    t2.inline_at(-1)
    t3.axis(2).parallelize(P.Unroll)
    t3.axis(4).parallelize(P.TIDx)
    t2.circular_buffer(2, 1)
    report = tp.verify(fusion)
    assert report.ok, report.codes
    (summary,) = [t for t in report.tensors if t.name == t2.name]
    assert str(tp.allocation(t2).num_elements) == summary.allocation_size["num_elements"] == "8"
    assert t2.loop[2].parallel_type is P.Serial  # the user's schedule is not changed
