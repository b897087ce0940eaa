"""__launch_bounds__ on every kernel: the most threads its block has at any admitted size, so that
ptxas fits the registers of a full block (the H200 refused a softmax over 32768-element rows:
its block of ceil(N / 32) threads had no bound, and ptxas gave each thread 74 registers)."""

from __future__ import annotations

import re

import pytest

import tileproof as tp
from tileproof.recipes import normalization as N
from tileproof.rule_examples import copy_chain

P = tp.ParallelType


def _bounds(kernel: tp.Kernel) -> str:
    (got,) = re.findall(r"__launch_bounds__\(([^)]*)\)", kernel.cuda_source)
    return got


def _rows_on_threads(assumption: str | None) -> tp.Fusion:
    """A copy of [N] with ceil(N / 4) threads of 4 elements each."""
    fusion, t0, t1, t2 = copy_chain("symbolic_block", ["N"])
    t2.split(0, 4)
    tp.propagate_transforms(t2)
    t2.axis(0).parallelize(P.TIDx)
    tp.parallelize_all_like(t2)
    if assumption:
        fusion.assume(assumption)
    return fusion


@pytest.mark.parametrize("assumption, most", [("N <= 4096", 1024), ("N <= 512", 128), ("N <= 130", 33)])
def test_a_symbolic_block_is_bounded_by_the_assumptions(assumption, most):
    assert _bounds(tp.compile(_rows_on_threads(assumption))) == str(most)


def test_a_block_past_the_limit_is_refused_before_any_bound():
    report = tp.verify(_rows_on_threads("N <= 8192"))
    assert "LAUNCH-THREADS" in {d.code for d in report.errors}


def test_a_concrete_block_is_its_own_bound():
    fusion, t0, t1, t2 = copy_chain("concrete_block", [8, 96])
    for t in (t1, t2):
        t.axis(0).parallelize(P.TIDy)
        t.axis(1).parallelize(P.TIDx)
    assert _bounds(tp.compile(fusion)) == "768"


def test_the_longest_softmax_rows_get_a_full_block_bound():
    rows = N.RowClass("bfloat16", 8, 4, 1024)  # 32768 elements held in registers (row_class stages them)
    assert rows.threads(32768) == 1024
    assert _bounds(tp.compile(N.softmax_fusion(rows))) == "1024"
