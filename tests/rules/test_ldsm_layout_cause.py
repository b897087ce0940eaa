"""LDSM-THREAD-ROWS's verified fix where the shared tile is laid out in an order other than its
logical one (its loop domain's, which a propagation of the fragment's transforms changes with it,
or an allocation domain set so): the tile allocated in its logical order, and the misaligned rows
follow from it. Found by benchmarks/report_causes.py (seed 120, case 2: ldmatrix_x4 with
tp.propagate_transforms(T3)): the report opened with two blocks where one mistake was made."""

from __future__ import annotations

import tileproof as tp
from tileproof.rule_examples import ldmatrix_copy

from support.examples import example_module

P = tp.ParallelType
CODE = "LDSM-THREAD-ROWS"
FIX = "T1.set_allocation_domain(T1.get_logical_domain(), True)"


def rows(report):
    return next(d for d in report.errors if d.code == CODE)


def test_a_fragment_order_propagated_to_the_shared_tile_is_the_one_cause():
    fusion = example_module("valid", "ldst_matrix").ldmatrix_x4()
    tp.propagate_transforms(fusion.tensor("T3"))  # T1 (shared) laid out in the fragment's order
    report = tp.verify(fusion, "sm_90a")
    assert sorted(report.codes) == sorted([CODE, "LDSM-ALIGNMENT"])
    heads = [d for d in report.errors if d.follows_from is None]
    assert heads == [rows(report)] and FIX in heads[0].hint
    t1 = fusion.tensor("T1")
    t1.set_allocation_domain(t1.get_logical_domain(), True)
    assert tp.verify(fusion, "sm_90a").ok


def test_a_permuted_allocation_domain_is_given_the_logical_order():
    fusion, _, t1, _, _ = ldmatrix_copy("ldmatrix_rows")
    t1.split(1, 2)
    t1.set_allocation_domain([t1.axis(0), t1.axis(2), t1.axis(1)])  # column 2q + j of a row at j * 4 + q
    assert FIX in rows(tp.verify(fusion, "sm_90a")).hint


def test_a_tile_in_its_logical_order_is_not_given_it_again():
    """The register side is wrong (lane 8q + r holds row r): the tile's layout is no fix."""
    fusion, _, _, t2, t3 = ldmatrix_copy("ldmatrix_lanes", fragment=False)
    for t in (t2, t3):
        t.split(1, 2).merge(1, 0)
        t.axis(0).parallelize(P.TIDx)
    t2.axis(1).parallelize(P.Vectorize)
    d = rows(tp.verify(fusion, "sm_90a"))
    assert d.id is None and "set_allocation_domain" not in d.hint
