"""tp.parallelize_all_like maps the reference's loop IDs as nvFuser's scheduler_utils::parallelizeAllLike
does (ComputeAtMap PERMISSIVE_RESIZE): a broadcast to the axis an op meets it on, both ways, a merge with
a new broadcast to its other input; fusion inputs are left alone (device types aside); only the reference's
loop IDs left of `pos` are copied."""

from __future__ import annotations

import pytest

import tileproof as tp

P = tp.ParallelType


def types(tv) -> list[P]:
    return [i.parallel_type for i in tv.loop]


def allreduce():
    """nvFuser's ReductionTest.GroupAllreduce1 without the grouping: t5 = t0 + broadcast(sum(t0)),
    scheduled on the broadcast t2 only."""
    with tp.Fusion("allreduce") as fusion:
        t0 = tp.make_contig_tensor(1)
        fusion.add_input(t0)
        t1 = tp.sum(t0, [0])
        t2 = tp.broadcast(t1, [True])
        t5 = tp.add(t0, t2)
        fusion.add_output(t5)
    t2.split(0, 128)
    tp.propagate_transforms(t2)
    t2.axis(0).parallelize(P.BIDx)
    t2.axis(1).parallelize(P.TIDx)
    return fusion, t0, t1, t2, t5


def test_a_broadcast_reference_parallelizes_the_axes_it_meets():
    fusion, t0, t1, t2, t5 = allreduce()
    tp.parallelize_all_like(t2)
    assert types(t5) == [P.BIDx, P.TIDx]
    assert types(t1) == [P.BIDx, P.TIDx]  # the sum is a grid allreduce
    assert all(i.is_reduction for i in t1.loop)
    report = tp.verify(fusion)
    assert report.ok
    # t2's BIDx{1} (its broadcast split by 128) sizes nothing (nvFuser's ParallelDimensionMap skips
    # broadcasts): the grid is ceil(N / 128), not max(1, ceil(N / 128)), and needs no predicate
    assert report.launch == {"BIDx": "ceil(T0_0 / 128)", "TIDx": "128"}
    assert "blockIdx.x <" not in tp.compile(fusion).cuda_source


def test_a_concrete_reference_parallelizes_the_broadcasts_it_meets():
    with tp.Fusion("bias") as fusion:
        t0 = tp.make_contig_tensor(2)
        w = tp.make_contig_tensor(1)
        fusion.add_input(t0)
        fusion.add_input(w)
        t1 = tp.set(w)
        t2 = tp.broadcast(t1, [True, False])
        t3 = tp.add(t0, t2)
        fusion.add_output(t3)
    t3.split(1, 128)
    tp.propagate_transforms(t3)
    t3.axis(0).parallelize(P.BIDx)
    t3.axis(2).parallelize(P.TIDx)
    tp.parallelize_all_like(t3)
    assert t2.axis(0).is_broadcast and types(t2) == [P.BIDx, P.Serial, P.TIDx]
    assert types(t1) == [P.Serial, P.TIDx]


def test_a_merge_with_a_new_broadcast_maps_to_its_other_axis():
    """t1[i1] -> t2 = broadcast [b0, i1] merged to [b0*i1] (nvFuser's BestEffortReplay forwards the
    merge to i1): t1's split of i1 maps to the reference's split of i0*i1."""
    with tp.Fusion("forwarded") as fusion:
        t0 = tp.make_contig_tensor(2)
        w = tp.make_contig_tensor(1)
        fusion.add_input(t0)
        fusion.add_input(w)
        t1 = tp.set(w)
        t2 = tp.broadcast(t1, [True, False])
        t3 = tp.add(t0, t2)
        fusion.add_output(t3)
    t3.merge(0, 1)
    t3.split(0, 128)
    tp.propagate_transforms(t3)
    t3.axis(0).parallelize(P.BIDx)
    t3.axis(1).parallelize(P.TIDx)
    tp.parallelize_all_like(t3)
    assert types(t2) == [P.BIDx, P.TIDx]
    assert len(t1.loop) == 2 and types(t1) == [P.BIDx, P.TIDx]


def test_fusion_inputs_are_left_alone():
    fusion, t0, t1, t2, t5 = allreduce()
    t5.axis(0).parallelize(P.BIDx)
    t5.axis(1).parallelize(P.TIDx)
    tp.parallelize_all_like(t5)
    assert types(t0) == [P.Serial, P.Serial]  # the same iteration as t5's loops, but an input
    assert types(t1) == [P.BIDx, P.TIDx]


def test_inputs_take_device_types_when_asked():
    fusion, t0, t1, t2, t5 = allreduce()
    t2.axis(0).parallelize(P.DIDx)
    tp.parallelize_all_like(t2, parallelize_inputs_on_did=True)
    assert types(t0) == [P.DIDx, P.Serial]  # TIDx is not a device type
    assert types(t5) == [P.DIDx, P.TIDx]


def test_only_axes_left_of_pos_are_copied():
    fusion, t0, t1, t2, t5 = allreduce()
    tp.parallelize_all_like(t2, pos=1)
    assert types(t5) == [P.BIDx, P.Serial]
    fusion, t0, t1, t2, t5 = allreduce()
    tp.parallelize_all_like(t2, pos=-2)  # nvFuser: pos + nDims + 1
    assert types(t5) == [P.BIDx, P.Serial]


@pytest.mark.parametrize("pos", [3, -4, 1.0, True])
def test_a_bad_pos_is_a_schedule_error(pos):
    fusion, t0, t1, t2, t5 = allreduce()
    with pytest.raises(tp.ScheduleError, match="parallelize_all_like: pos"):
        tp.parallelize_all_like(t2, pos=pos)
