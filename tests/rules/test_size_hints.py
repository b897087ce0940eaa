"""Help that can be acted on for symbolic sizes (issue 11 item 2): SPLIT-DIVISIBILITY names the
extent it splits, and TMA-GLOBAL-STRIDE the assumption that fixes a symbolic stride, written as
the Python a user pastes back (`fusion.assume("N % 4 == 0")`)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

import tileproof as tp
from tileproof.rule_examples import copy_chain

P = tp.ParallelType
ASSUME = re.compile(r'fusion\.assume\("([^"]+)"\)')


def vectorized_rows():
    """T1[M, N] copied with the rows split by 4 and vectorized: only N is split."""
    with tp.Fusion("vec_rows") as fusion:
        t0 = tp.make_tensor(["M", "N"])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        fusion.add_output(t1)
    t1.split(1, 4)
    t1.axis(2).parallelize(P.Vectorize)
    return fusion


def tma_rows(dtype, shape=("M", "N")):
    """A TMA load of tiles 8 x 32 of T0[M, N]: the row stride N x element bytes is symbolic
    (unless `shape` is concrete)."""
    with tp.Fusion("tma_rows") as fusion:
        concrete = all(isinstance(s, int) for s in shape)  # as make_contig_concrete_tensor
        t0 = tp.make_tensor(list(shape), contiguity=True if concrete else None, dtype=dtype)
        fusion.add_input(t0)
        t1 = tp.set(t0, op=tp.LoadStoreOpType.TMA)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    if not concrete:
        fusion.assume(f"{shape[1]} <= 65535 * 32")  # ceil(N / 32) blocks on BIDy (LAUNCH-GRID)
    t1.set_memory_type(tp.MemoryType.Shared)
    t1.split(1, 32).split(0, 8)
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.BIDy)
    t1.axis(1).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    tp.propagate_transforms(t1)
    tp.parallelize_all_like(t1, [P.BIDx, P.BIDy])
    return fusion


def only(report, code):
    (d,) = [d for d in report.diagnostics if d.code == code]
    return d


def test_split_divisibility_names_the_extent_it_splits():
    d = only(tp.verify(vectorized_rows()), "SPLIT-DIVISIBILITY")
    assert "M = " in d.message  # the counterexample has both sizes ...
    assert "M * N" not in d.hint and "split M" not in d.hint  # ... but only N is split
    assert "by a factor that always divides N" in d.hint and d.ids[0] in d.hint
    (claim,) = ASSUME.findall(d.hint)
    assert claim == "N % 4 == 0"
    fusion = vectorized_rows()
    fusion.assume(claim)
    assert not [x for x in tp.verify(fusion).diagnostics if x.code == "SPLIT-DIVISIBILITY"]


@pytest.mark.parametrize("dtype, claim", [(tp.float32, "N % 4 == 0"), (tp.float16, "N % 8 == 0"),
                                          (tp.float64, "N % 2 == 0")])
def test_tma_global_stride_suggests_the_assumption_that_fixes_it(dtype, claim):
    d = only(tp.verify(tma_rows(dtype)), "TMA-GLOBAL-STRIDE")
    assert ASSUME.findall(d.hint) == [claim]
    assert "pad the rows of T0" in d.hint  # and the fix for sizes that do not satisfy it
    fusion = tma_rows(dtype)
    fusion.assume(claim)  # pasted back as written
    assert tp.verify(fusion).ok


def test_tma_global_stride_of_a_concrete_size_suggests_no_assumption():
    fusion = tma_rows(tp.float32, shape=(64, 98))
    d = only(tp.verify(fusion), "TMA-GLOBAL-STRIDE")
    assert "assume" not in d.hint and d.hint.startswith("pad the rows of T0")


def test_no_assumption_is_suggested_that_contradicts_the_fusions_own():
    """N % 4 == 1 is assumed: no assumption can make the stride 16-byte aligned without
    contradicting it, so the hint only says to pad."""
    fusion = tma_rows(tp.float32)
    fusion.assume("N % 4 == 1")
    d = only(tp.verify(fusion), "TMA-GLOBAL-STRIDE")
    assert "assume" not in d.hint


def performant_copy(name):
    """The seed's tensor-memory copy (examples/valid/tmem_performant_copy.py) without its
    assumption: a symbolic T0_0 split by 4, 128, 2 and 2 in the history of every tensor."""
    path = Path(__file__).parents[2] / "examples" / "valid" / "tmem_performant_copy.py"
    spec = importlib.util.spec_from_file_location("_size_hints_performant_copy", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.performant_vectorized_copy_schedule(name)


def test_one_assumption_for_a_chain_of_splits():
    report = tp.verify(performant_copy("unaligned"), "sm_100a")
    found = [d for d in report.diagnostics if d.code == "SPLIT-DIVISIBILITY"]
    assert len(found) == 10
    cause, rest = found[0], found[1:]
    assert ASSUME.findall(cause.hint) == ["T0_0 % 2048 == 0"]
    assert "all 10 splits" in cause.hint and "verified" in cause.hint
    assert all(d.follows_from == cause.id for d in rest)
    fixed = performant_copy("aligned")
    fixed.assume(ASSUME.findall(cause.hint)[0])
    assert tp.verify(fixed, "sm_100a").ok


def test_a_single_failing_split_keeps_its_own_assumption():
    fusion = vectorized_rows()
    d = only(tp.verify(fusion, "sm_90a"), "SPLIT-DIVISIBILITY")
    assert ASSUME.findall(d.hint) == ["N % 4 == 0"] and "verified" in d.hint
    assert d.id == "SPLIT-DIVISIBILITY:T1"  # a verified fix: a root cause, like the chain's


def test_divisibility_help_proposes_the_weakest_assumption():
    """N split by 128 for the threads, then by 2 for vectors: N % 2 == 0 leaves the holes of the
    128 split as whole vectors, so it suffices; the product of the factors (N % 256) would give
    up N = 1000. With 4-element vectors the help shows the weaker N % 2 == 0 failing."""
    for vector, want in ((2, "N % 2 == 0"), (4, "N % 4 == 0")):
        fusion, t0, t1 = copy_chain(f"rows_by_128_vec{vector}", ["N"], copies=1)
        t1.split(0, 128).split(1, vector)
        t1.axis(2).parallelize(tp.ParallelType.Vectorize)
        t1.axis(1).parallelize(tp.ParallelType.TIDx)
        t1.axis(0).parallelize(tp.ParallelType.BIDx)
        d = only(tp.verify(fusion, "sm_90a"), "SPLIT-DIVISIBILITY")
        assert ASSUME.findall(d.hint) == [want], d.hint
        if vector == 4:
            assert "not with the weaker N % 2 == 0 (fails at N = " in d.hint
        fusion.assume(want)
        assert tp.verify(fusion, "sm_90a").ok
