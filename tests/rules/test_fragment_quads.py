"""A wgmma's fragments with a row's quad on TIDx (quads=True: TIDy{32} x TIDx{4}, the warpgroup's
thread the linear index threadIdx.x + 4 threadIdx.y): the examples of examples/valid/attention.py
and examples/invalid/attention.py, the RS operand proved over both thread indices
(MMA-OPERAND-LAYOUT), and schedule_mma_fragment's row reductions and row vectors."""

from __future__ import annotations

from pathlib import Path

import pytest

import tileproof as tp
from tileproof.rule_examples import wgmma_row_max
from tileproof.schedule_files import discover

from support.rs_wgmma import rs_wgmma

P = tp.ParallelType
ROOT = Path(__file__).resolve().parents[2]
VALID = {c.name: c for c in discover([str(ROOT / "examples" / "valid" / "attention.py")])}
INVALID = {c.name: c for c in discover([str(ROOT / "examples" / "invalid" / "attention.py")])}


@pytest.mark.parametrize("name", sorted(n for n in VALID if n != "online_row_logsumexp"))  # that one: no wgmma
def test_fragment_schedules_with_quads_are_proved_and_compile(name):
    fusion = VALID[name].build()
    assert tp.verify(fusion).ok
    assert "tp_block_reduce<2, true, false, false>" in tp.compile(fusion, "sm_90a").cuda_source  # over TIDx only


def test_a_row_reduced_in_threads_that_do_not_hold_it_shows_the_holder():
    report = tp.verify(INVALID["row_max_with_its_row_digits_swapped"].build())
    (d,) = [d for d in report.errors if d.code == "MMA-ACCUM-LAYOUT"][:1]
    assert "T2[16, 0]" in d.message and "threadIdx.y = 8" in d.message, d.message


def test_the_accumulators_cannot_bind_tidy_when_the_warpgroup_spans_it():
    report = tp.verify(INVALID["accumulator_loop_on_tidy_with_split_lanes"].build())
    assert "MMA-WARP-COLLECTIVE" in report.codes


@pytest.mark.parametrize("quads", [False, True])
def test_rs_operand_with_quads_is_proved(quads):
    fusion, *_ = rs_wgmma(f"rs_quads_{quads}", 64, 32, quads=quads)
    assert tp.verify(fusion).ok


def _a_rows(swapped: bool):
    """A's 64 x 16 fragment by hand: rows (w, v2, g), columns (v4, q, v1); the thread TIDy (w, g)
    or, swapped, (g, w), x TIDx (q), the elements (v4, v2, v1) merged."""
    def lay_out(ra):
        ra.split(3, 8).split(3, 2)  # [.., w, v2, g, 16]
        ra.split(6, 2).split(6, 4)  # [.., w, v2, g, v4, q, v1]
        w, v2, g, v4, q, v1 = range(3, 9)
        order = [g, w] if swapped else [w, g]
        ra.reorder({old: 3 + new for new, old in enumerate(order + [q, v4, v2, v1])})
        ra.merge(3).merge(5).merge(5)  # [.., TIDy, q, v]
        ra.axis(3).parallelize(P.TIDy)
        ra.axis(4).parallelize(P.TIDx)
    return lay_out


@pytest.mark.parametrize("swapped", [False, True])
def test_rs_operand_rows_are_proved_over_both_thread_indices(swapped):
    """Swapped, a thread's A registers hold another thread's rows: TIDy is part of the lane, so
    MMA-OPERAND-LAYOUT compares it too (the lane of thread (x, y) is x + 4 y)."""
    fusion, *_ = rs_wgmma(f"rs_quads_{swapped}", 64, 32, quads=True, a_fragment=_a_rows(swapped))
    report = tp.verify(fusion)
    assert report.ok != swapped, report.codes
    if swapped:
        (d, *_) = [d for d in report.errors if d.code == "MMA-OPERAND-LAYOUT"]
        assert "threadIdx.y" in d.message, d.message


def test_row_reductions_and_vectors_need_quads():
    fusion, d, out, m = wgmma_row_max("needs_quads")
    with pytest.raises(tp.ScheduleError, match="reduction axis: a row reduction of the C tile, laid out with quads=True"):
        tp.schedule_mma_fragment(m, tp.MmaMacro.Hopper_64_64_16, "C")
    with fusion:
        b = tp.broadcast(m, [False, True])
        fusion.add_output(b)
    with pytest.raises(tp.ScheduleError, match="broadcast axis: a row vector of the C tile"):
        tp.schedule_mma_fragment(b, tp.MmaMacro.Hopper_64_64_16, "C")
    tp.schedule_mma_fragment(b, tp.MmaMacro.Hopper_64_64_16, "C", quads=True)
    assert [str(i.parallel_type) for i in b.get_loop_domain()][:1] == ["TIDy"]
