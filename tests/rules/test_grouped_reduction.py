"""Grouped reductions (model/grouped_reduction.py): tp.group_reductions' checks at the call (nvFuser's
validateReductionGrouping), rfactor of a group, the parallel types siblings give each other, and
REDUCTION-GROUP on members scheduled differently after grouping (failing and passing), and the one
loop nest a group runs in (LOOP-NEST-ORDER without the group, failing, and with it, passing)."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.model.fingerprint import fingerprint

from support.grouped_schedules import shared_producer_sum_and_max

P = tp.ParallelType


def _sum_and_max(name="sum_and_max", shape=(64, 256)):
    """T1 = sum(T0, 1), T2 = max(T0, 1), T3 = T1 + T2 (the output)."""
    with tp.Fusion(name) as fusion:
        t0 = tp.make_contig_concrete_tensor(list(shape)); fusion.add_input(t0)
        t1 = tp.sum(t0, [1])
        t2 = tp.max(t0, [1])
        t3 = tp.add(t1, t2); fusion.add_output(t3)
    return fusion, t0, t1, t2, t3


def _codes(fusion):
    return tp.verify(fusion, "sm_90a").codes


# -- the checks at the call -------------------------------------------------------------------------

def test_grouping_two_inputs_whose_extents_may_differ_raises():
    """nvFuser's GroupedReduction4: root domains not exactly mapped."""
    with tp.Fusion("two_inputs"):
        t0 = tp.make_tensor([-1, -1]); t1 = tp.make_tensor([-1, -1])
        t2, t3 = tp.sum(t0, [1]), tp.sum(t1, [1])
    with pytest.raises(tp.ScheduleError, match="logical axis 0 of T2 .* and of T3 .* are not the same iteration"):
        tp.group_reductions([t2, t3])


def test_grouping_reductions_split_differently_raises():
    """nvFuser's GroupedReduction5: split by 128 and by 64."""
    _, _, t1, t2, _ = _sum_and_max()
    t1.split(1, 128)
    t2.split(1, 64)
    with pytest.raises(tp.ScheduleError, match="loop axis 1 of T1 .* transformed differently"):
        tp.group_reductions([t1, t2])


def test_grouping_a_reduction_with_one_that_reads_it_raises():
    """nvFuser's GroupedReduction7: T4 is computed from T1."""
    with tp.Fusion("dependent"):
        t0 = tp.make_tensor([8, 8])
        t1 = tp.sum(t0, [1])
        t4 = tp.sum(tp.add(t0, tp.broadcast(t1, [False, True])), [1])
    with pytest.raises(tp.ScheduleError, match="computed from T1, another reduction of the group"):
        tp.group_reductions([t1, t4])


@pytest.mark.parametrize("what, match", [
    ("copy", "not the output of a reduction"), ("input", "has no definition"), ("twice", "appears twice"),
    ("empty", "tensors is empty"), ("not a list", "must be a list"), ("regrouped", "already grouped"),
    ("logical", "has 1 logical axes, T1 2"), ("inlined", "inlined at 1 and T2 at 0")])
def test_group_reductions_checks_its_arguments(what, match):
    fusion, t0, t1, t2, t3 = _sum_and_max()
    args = {"copy": [t1, t3], "input": [t1, t0], "twice": [t1, t1], "empty": [], "not a list": t1,
            "regrouped": [t1, t2], "logical": None, "inlined": [t1, t2]}[what]
    if what == "regrouped":
        tp.group_reductions([t1, t2])
    if what == "logical":
        with fusion:
            t5 = tp.sum(tp.make_tensor([64]), [0])
        args = [t1, t5]
    if what == "inlined":
        t1.inline_at(1)
    with pytest.raises(tp.ScheduleError, match=match):
        tp.group_reductions(args)


def test_a_grouped_reduction_is_rfactored_with_its_group():
    """rfactor of one member alone raises (nvFuser: use rFactor(axes, tvs)); with the group, the
    others take its transforms and the partials form a group of their own."""
    fusion, _, t1, t2, _ = _sum_and_max()
    tp.group_reductions([t1, t2])
    t1.split(1, 32)
    with pytest.raises(tp.ScheduleError, match=r"rfactor the group together: T1.rfactor\(axes, \[T1, T2\]\)"):
        t1.rfactor([1])
    with pytest.raises(tp.ScheduleError, match="must be T1's group in its order"):
        t1.rfactor([1], [t2, t1])
    parts = t1.rfactor([1], [t1, t2])
    assert [p.definition.inputs[0].name for p in parts] == ["T0", "T0"]
    assert [[i.label() for i in p.loop] for p in parts] == [["i2{64}", "r7{8}", "i8{32}"], ["i4{64}", "r9{8}", "i10{32}"]]
    assert [len(t.loop) for t in (t1, t2)] == [2, 2]
    assert fusion.reduction_groups == [tuple(parts), (t1, t2)]
    with pytest.raises(tp.ScheduleError, match="cache_before before grouping"):
        t1.cache_before()


def test_the_group_is_part_of_the_fingerprint():
    grouped, _, t1, t2, _ = _sum_and_max()
    tp.group_reductions([t1, t2])
    plain, *_ = _sum_and_max()
    assert fingerprint(grouped, "sm_90a") != fingerprint(plain, "sm_90a")


# -- REDUCTION-GROUP ----------------------------------------------------------------------------------

def test_a_member_split_after_grouping_is_rejected_with_both_loop_domains():
    fusion, _, t1, t2, _ = _sum_and_max("split_after_grouping")
    tp.group_reductions([t1, t2])
    t1.split(1, 32)
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.TIDx)
    tp.parallelize_all_like(t1)
    report = tp.verify(fusion, "sm_90a")
    assert report.codes == ["REDUCTION-GROUP"]
    (d,) = report.errors
    assert d.tensor == "T2"
    assert "T2 has 2 loop axes ([BIDx{64}, r5{256}]), T1 3 ([BIDx{64}, r7{8}, rTIDx{32}])" in d.message


def test_members_on_different_thread_indices_are_rejected_with_the_axis():
    fusion, _, t1, t2, t3 = _sum_and_max("tidx_and_tidy", (64, 32))
    tp.group_reductions([t1, t2])
    for t in (t1, t2, t3):
        t.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.TIDx)
    t2.axis(1).parallelize(P.TIDy)
    report = tp.verify(fusion, "sm_90a")
    assert "REDUCTION-GROUP" in report.codes
    (d,) = [d for d in report.errors if d.code == "REDUCTION-GROUP"]
    assert "loop axis 1 runs on TIDx in T1 (rTIDx{32}) but on TIDy in T2 (rTIDy{32})" in d.message
    assert d.counterexample == {"loop axis": 1}


def test_a_sibling_takes_the_parallel_types_of_its_group():
    """Only T1 is parallelized (nvFuser's GroupedReduction2 parallelizes one member): T2, its
    sibling, runs on the same indices in the kernel (in the same loops: one nest, as nvFuser's one
    GroupedReductionOp), and the group verifies and compiles."""
    fusion, _, t1, t2, _ = _sum_and_max("one_member_parallelized")
    tp.group_reductions([t1, t2])
    t1.split(1, 32)
    tp.propagate_transforms(t1)
    tp.inline_most(fusion)
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.TIDx)
    assert _codes(fusion) == []
    source = tp.compile(fusion, "sm_90a").cuda_source
    assert "// threadIdx.x over 32U: T1 axis 2, T2 axis 2" in source
    kernel = source[source.index("__global__ void"):]
    assert kernel.count("for (") == 1 and "// T1 axis 1, T2 axis 1" in kernel
    assert t2.axis(2).parallel_type is P.Serial  # the user's schedule is unchanged: the snapshot takes the type


# -- one loop nest: a producer inlined into two reductions ------------------------------------------

def test_two_reductions_of_one_inlined_producer_split_its_loop_unless_grouped():
    """Failing: T1 inlined into the partial sum T5 and the partial max T6, not grouped: each
    reduction's total is stored where its loop ends, so T6's accumulation would reopen the loop
    T5's store closed (LOOP-NEST-ORDER, whose help names the group)."""
    report = tp.verify(shared_producer_sum_and_max(grouped=False), "sm_90a")
    assert report.codes == ["LOOP-NEST-ORDER"]
    (d,) = report.errors
    assert d.counterexample and "tp.group_reductions([T5, T6])" in d.hint


def test_grouped_reductions_of_one_inlined_producer_share_its_loop():
    """Passing: the same schedule with the partials and the finals grouped (nvFuser's
    GroupedReductionAfterComputeAt): one nest, every init before the shared loop and every store
    after it."""
    assert _codes(shared_producer_sum_and_max(grouped=True)) == []
