"""ALLOCATION-DISTINCT covers tensor memory (the block's, as shared memory is): a tile written in
blocks of columns whose allocation leaves the loop over the blocks out reuses one block's columns
(it was accepted before). tmem_copy's copy through tensor memory, sm_100a (verified on the CPU)."""

from __future__ import annotations

import tileproof as tp
from tileproof.rule_examples import tmem_copy

P = tp.ParallelType


def _column_blocks(name: str, whole: bool):
    fusion, t0, t1, t2, t3 = tmem_copy(name, [128, 64])
    for t in (t1, t2, t3):
        t.split(1, 16)  # [128 lanes, 4 blocks, 16 columns]
        t.axis(0).parallelize(P.TIDx)
    if not whole:
        t2.set_allocation_domain([t2.axis(0), t2.axis(2)], True)  # one block's columns for all four
        t2.set_tmem_dim_sep_pos(1)
    return fusion


def test_a_tensor_memory_tile_that_reuses_its_columns_is_refused_with_the_two_elements():
    report = tp.verify(_column_blocks("reused", whole=False), "sm_100a")
    (e,) = [d for d in report.errors if d.code == "ALLOCATION-DISTINCT"]
    assert e.counterexample["other element axis 1"] - e.counterexample["element axis 1"] == 16
    assert e.counterexample["offset"] == 0


def test_the_whole_tile_allocated_is_accepted():
    assert tp.verify(_column_blocks("whole", whole=True), "sm_100a").ok
