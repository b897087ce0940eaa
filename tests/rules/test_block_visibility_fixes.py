"""SMEM-BLOCK-VISIBILITY's verified fix where the consumer's axis does not map to the producer's
block axis through the IterDomain graph (the two scheduled by different transforms: an axis of the
same extent takes the block index), and where no consumer axis can take it (the producer's axis
given back its loop's type). Found by benchmarks/report_causes.py (seed 125, cases 94 and 120):
the reports opened with two blocks where one mistake was made."""

from __future__ import annotations

import re

import tileproof as tp
from tileproof.rule_examples import copy_chain

from support.examples import example_module

P = tp.ParallelType
CODE = "SMEM-BLOCK-VISIBILITY"


def by_another_route(t2_first=P.Serial):
    """examples/valid/visibility.py blocks_by_another_route (T2 merged and split: no ID maps to T1's
    BIDx{8}), T2's block axis given `t2_first`."""
    fusion = example_module("valid", "visibility").blocks_by_another_route()
    t2 = fusion.tensor("T2")
    t2.axis(0).parallelize(t2_first)
    return fusion, t2


def proposed(report, code: str) -> str:
    d = next(d for d in report.errors if d.code == code)
    found = re.match(r"(\S+\.axis\(\d+\)\.parallelize\(tp\.ParallelType\.\w+\)) \(verified", d.hint)
    assert found, d.hint
    return found.group(1)


def apply(call: str, tensors: dict) -> None:
    name, k, ptype = re.match(r"(\w+)\.axis\((\d+)\)\.parallelize\(tp\.ParallelType\.(\w+)\)", call).groups()
    tensors[name].axis(int(k)).parallelize(P[ptype])


def test_a_consumer_axis_of_the_block_axis_extent_takes_its_block_index():
    fusion, t2 = by_another_route()
    assert tp.verify(by_another_route(P.BIDx)[0], "sm_90a").ok  # the schedule the fix should reach
    report = tp.verify(fusion, "sm_90a")
    assert report.codes == [CODE]
    call = proposed(report, CODE)
    assert call == "T2.axis(0).parallelize(tp.ParallelType.BIDx)"
    apply(call, {"T2": t2})
    assert tp.verify(fusion, "sm_90a").ok


def test_a_bulk_axis_on_a_plain_copy_follows_from_the_block_index_it_lost():
    """report_causes seed 125 case 94: the block axis made Bulk. TMA-BULK-PLACEMENT's own fix
    (serial) leaves the block misread; the block index back removes both errors: one block."""
    fusion, _ = by_another_route(P.Bulk)
    report = tp.verify(fusion, "sm_90a")
    assert sorted(report.codes) == sorted([CODE, "TMA-BULK-PLACEMENT"])
    heads = [d for d in report.errors if d.follows_from is None]
    assert [d.code for d in heads] == [CODE]
    assert proposed(report, CODE) == "T2.axis(0).parallelize(tp.ParallelType.BIDx)"
    bulk = next(d for d in report.errors if d.code == "TMA-BULK-PLACEMENT")
    assert bulk.follows_from == heads[0].id


def test_a_producer_block_axis_no_consumer_axis_can_take_is_given_back_its_loop_type():
    """report_causes seed 125 case 120's form: the producer's block axis has no counterpart of its
    extent in the consumer: the fix un-parallelizes the producer's axis (verified)."""
    fusion, _, t1, t2 = copy_chain("producer_only_blocks", [64])
    t1.set_memory_type(tp.MemoryType.Shared)
    t1.split(0, 8)  # [BIDx{8}, TIDx{8}]
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.TIDx)
    t2.axis(0).parallelize(P.TIDx)  # [TIDx{64}]
    report = tp.verify(fusion, "sm_90a")
    assert CODE in report.codes
    call = proposed(report, CODE)
    assert call == "T1.axis(0).parallelize(tp.ParallelType.Serial)"
    apply(call, {"T1": t1})
    assert CODE not in tp.verify(fusion, "sm_90a").codes


def test_blocks_bound_the_other_way_round_get_no_call():
    """The consumer binds every block index the producer does, on the transposed axes: no axis
    lacks one, so no call is proposed (the general help only)."""
    fusion, _, t1, t2 = copy_chain("transposed_blocks", [8, 8])
    t1.set_memory_type(tp.MemoryType.Shared)
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.BIDy)
    t2.axis(0).parallelize(P.BIDy)  # T1's rows on the columns' blocks
    t2.axis(1).parallelize(P.BIDx)
    report = tp.verify(fusion, "sm_90a")
    d = next(d for d in report.errors if d.code == CODE)
    assert d.hint.startswith("parallelize the axes of T2"), d.hint
