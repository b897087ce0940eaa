"""Bad input gets a clear ScheduleError naming the problem, at the door."""

from __future__ import annotations

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
