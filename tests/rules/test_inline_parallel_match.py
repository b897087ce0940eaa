"""INLINE-PARALLEL-MATCH after the loop map gives each loop's type to its Serial members
(model/loop_map.py): a Serial producer inlined into a TIDx / BIDx loop takes it and is accepted;
two members with different non-Serial types are rejected, with the loop's members in the note."""

from __future__ import annotations

import tileproof as tp
from tileproof.rule_examples import copy_chain

P = tp.ParallelType


def test_a_serial_producer_inlined_into_a_thread_loop_takes_it():
    fusion, t0, t1, t2 = copy_chain("serial_takes_tidx", [4, 32])
    t1.inline_at(1)
    t2.axis(0).parallelize(P.TIDx)
    report = tp.verify(fusion)
    assert report.ok, report.codes
    source = tp.compile(fusion).cuda_source
    # T1's statement runs at threadIdx.x, in no loop of its own over axis 0
    assert "T1[" in source and "threadIdx.x * 32" in source
    assert "i0 < 4" not in source


def test_two_types_in_one_loop_are_rejected_with_the_members():
    fusion, t0, t1, t2 = copy_chain("unroll_and_tidx", [4, 32])
    t1.inline_at(1)
    t1.axis(0).parallelize(P.Unroll)
    t2.axis(0).parallelize(P.TIDx)
    report = tp.verify(fusion)
    assert report.codes == ["INLINE-PARALLEL-MATCH"]
    (d,) = report.errors
    assert d.message.startswith("T2 axis 0 (TIDx) shares a loop with T1 axis 0 (Unroll) through inlining")
    assert any("T1 axis 0, T2 axis 0" in n for n in d.notes)
    assert d.counterexample == {"axis": 0, "loops_sharing": 2}


def test_a_serial_member_of_a_vectorized_loop_is_rejected():
    fusion, t0, t1, t2 = copy_chain("serial_in_vector", [64, 4])
    t2.axis(1).parallelize(P.Vectorize)
    t1.compute_at = 2  # what no inlining call gives: past the consumer's vector
    report = tp.verify(fusion)
    d = next(d for d in report.errors if d.code == "INLINE-PARALLEL-MATCH")
    assert "T1 axis 1 (Serial) shares a loop with T2 axis 1 (Vectorize)" in d.message
    assert any("covered by one instruction" in n for n in d.notes)
