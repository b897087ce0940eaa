"""Tensor-memory allocation regions (issue 33): fusion.manage("tmem_regions", [[a, b]]) puts a and
b in one tcgen05.alloc region, b's columns right after a's (nvFuser's computeTMemAlllocationInfo;
execution/tmem_regions.py). TMEM-COLUMNS budgets the regions (a shared one's tensors together,
then every region rounded to a power of two >= 32), SPLIT-DIVISIBILITY's hole proof keeps a
tensor's accesses inside its own columns of a shared region, and the kernel places each tensor
at its region's column plus its offset inside it (compiled for sm_100a and run on the CPU
simulator of tests/support/tmem_sim.py, which checks every cell against the tensor's columns).
"""

from __future__ import annotations

import numpy as np
import pytest
import tileproof as tp
from support.lowering import decisions_for
from support.tmem_sim import run_kernel
from tileproof.codegen.lower import lower
from tileproof.codegen.runtime.reference import reference
from tileproof.model.fingerprint import fingerprint
from tileproof.model.targets import get_target

P = tp.ParallelType
SM100 = "sm_100a"


def two_tmem_copies(name, columns_a, columns_b, *, split_a=None, assume=None):
    """Two copies [32, columns_x] through tensor memory (ta, tb), each lane a thread (TIDx), the
    columns serial; `split_a` splits ta's chain's columns (ta allocated along its logical domain,
    so the split's holes fall past its columns). Returns (fusion, ta, tb)."""
    with tp.Fusion(name) as fusion:
        chains = []
        for cols in (columns_a, columns_b):
            t0 = tp.make_tensor([32, cols]); fusion.add_input(t0)
            t1 = tp.set(t0)
            t2 = tp.set(t1)
            t3 = tp.set(t2); fusion.add_output(t3)
            t2.set_memory_type(tp.MemoryType.Tensor)
            chains.append((t1, t2, t3))
    if assume:
        fusion.assume(assume)
    for k, (t1, t2, t3) in enumerate(chains):
        for t in (t1, t2, t3):
            t.axis(0).parallelize(P.TIDx)
            if k == 0 and split_a:
                t.split(-1, split_a)
        t2.set_allocation_domain(t2.get_logical_domain(), True)
        t2.set_tmem_dim_sep_pos(1)
    return fusion, chains[0][1], chains[1][1]


def only(report, code):
    found = [d for d in report.errors if d.code == code]
    assert found and report.codes == [code], report.codes
    return found[0]


# -- manage: the door -----------------------------------------------------------------------------


def test_manage_checks_its_arguments():
    fusion, ta, tb = two_tmem_copies("bad_manage", 32, 32)
    with tp.Fusion("other") as other:
        foreign = tp.make_tensor([4]); other.add_input(foreign)
    with pytest.raises(tp.ScheduleError, match="unknown key 'tmem_region'"):
        fusion.manage("tmem_region", [[ta, tb]])
    with pytest.raises(tp.ScheduleError, match="list of lists of tensors"):
        fusion.manage("tmem_regions", [ta, tb])
    with pytest.raises(tp.ScheduleError, match="list of lists of tensors"):
        fusion.manage("tmem_regions", ta)
    with pytest.raises(tp.ScheduleError, match="region 0 is empty"):
        fusion.manage("tmem_regions", [[]])
    with pytest.raises(tp.ScheduleError, match="does not belong to fusion bad_manage"):
        fusion.manage("tmem_regions", [[ta, foreign]])
    with pytest.raises(tp.ScheduleError, match=f"{ta.name} is in tmem_regions regions 0 and 1"):
        fusion.manage("tmem_regions", [[ta, tb], [ta]])
    assert fusion.tmem_regions == []  # nothing recorded by a refused call


def test_a_listed_tensor_outside_tensor_memory_is_refused_at_verify():
    """As nvFuser, the memory type may be set after manage: it is checked when verified."""
    fusion, ta, _ = two_tmem_copies("listed_register", 32, 32)
    register = fusion.producers(ta)[0]
    fusion.manage("tmem_regions", [[ta, register]])
    with pytest.raises(tp.ScheduleError, match=f"{register.name} is in Local memory, not tensor memory"):
        tp.verify(fusion, SM100)


# -- TMEM-COLUMNS ---------------------------------------------------------------------------------


def test_a_region_over_512_columns_is_rejected_with_a_counterexample():
    """Each tensor fits alone (N <= 300); side by side in one region they need 2N > 512 for N > 256."""
    fusion, ta, tb = two_tmem_copies("region_too_wide", "N", "N", assume="N <= 300")
    # (the registers of a symbolic row are rejected by REGISTER-SIZE-CONSTANT: the columns rule alone here)
    assert tp.verify(fusion, SM100, rules=["TMEM-COLUMNS"]).ok  # regions of their own: each fits
    fusion.manage("tmem_regions", [[ta, tb]])
    d = only(tp.verify(fusion, SM100, rules=["TMEM-COLUMNS"]), "TMEM-COLUMNS")
    assert f"the region {ta.name}+{tb.name} needs" in d.message and "has 512" in d.message
    n = d.counterexample["N"]
    assert 256 < n <= 300 and d.counterexample["columns"] == 2 * n and d.counterexample["limit"] == 512
    assert d.counterexample[f"{ta.name} columns"] == n == d.counterexample[f"{tb.name} columns"]


def test_regions_are_the_unit_of_allocation():
    """288 + 160 columns: regions of their own round to 512 + 256 (rejected); one region of 448
    rounds to 512 (accepted, as nvFuser's allocation would)."""
    fusion, ta, tb = two_tmem_copies("separate", 288, 160)
    d = only(tp.verify(fusion, SM100), "TMEM-COLUMNS")
    assert f"need 768 columns together ({ta.name} 512, {tb.name} 256)" in d.message
    fusion, ta, tb = two_tmem_copies("shared", 288, 160)
    fusion.manage("tmem_regions", [[ta, tb]])
    assert tp.verify(fusion, SM100).ok
    src = tp.compile(fusion, SM100).cuda_source
    assert f"// tensor memory: {ta.name} columns 0..287, {tb.name} columns 288..447;" in src
    assert src.count("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 512;") == 1


def test_two_shared_regions_are_budgeted_each_rounded():
    """[[a], [b]] is what no manage call gives: 512 + 256 columns, rejected as before."""
    fusion, ta, tb = two_tmem_copies("listed_alone", 288, 160)
    fusion.manage("tmem_regions", [[ta], [tb]])
    only(tp.verify(fusion, SM100), "TMEM-COLUMNS")


# -- holes inside a shared region -----------------------------------------------------------------


def test_a_hole_on_the_next_tensors_columns_is_rejected():
    """ta's 40 columns split by 16: its holes run at columns 40..47. Alone, its 64 allocated
    columns hold them; in a region with tb, tb's columns start at 40, so the holes would land on tb."""
    fusion, ta, tb = two_tmem_copies("alone_holes", 40, 32, split_a=16)
    assert tp.verify(fusion, SM100).ok
    fusion, ta, tb = two_tmem_copies("shared_holes", 40, 32, split_a=16)
    fusion.manage("tmem_regions", [[ta, tb]])
    report = tp.verify(fusion, SM100)
    assert set(report.codes) == {"SPLIT-DIVISIBILITY"}, report.codes
    d = report.errors[0]  # the store into ta (its load's holes fall on tb's columns too)
    assert d.counterexample["hole column"] >= 40 and d.counterexample["columns allocated"] == 40, d.counterexample
    assert f"of the tensor-memory region {ta.name}+{tb.name} it shares" in " ".join(d.notes)


def test_the_last_tensor_of_a_region_owns_only_its_own_columns():
    """The layout follows the list: tb first, then ta at columns 32..71. ta's holes (72..79) fall
    in the region's rounding (128 columns), which no one else uses, but the proof gives a tensor of
    a shared region exactly its own columns (conservative: rejected, never run wrong)."""
    fusion, ta, tb = two_tmem_copies("last_holes", 40, 32, split_a=16)
    fusion.manage("tmem_regions", [[tb, ta]])
    assert set(tp.verify(fusion, SM100).codes) == {"SPLIT-DIVISIBILITY"}


# -- the kernel -----------------------------------------------------------------------------------


@pytest.mark.parametrize("order", ["ab", "ba"])
def test_simulated_shared_region(order):
    fusion, ta, tb = two_tmem_copies(f"simulated_{order}", 40, 24)
    fusion.manage("tmem_regions", [[ta, tb] if order == "ab" else [tb, ta]])
    assert tp.verify(fusion, SM100).ok
    snapshot = fusion.snapshot()
    st = lower(snapshot, get_target(SM100), decisions_for(snapshot, get_target(SM100)))
    first, second = (ta, tb) if order == "ab" else (tb, ta)
    width = {ta.name: 40, tb.name: 24}
    assert [(n, o, c) for n, o, c in sorted(st.tree[0].regions, key=lambda r: r[1])] == \
        [(first.name, 0, width[first.name]), (second.name, width[first.name], width[second.name])]
    rng = np.random.default_rng(1)
    a = rng.standard_normal([32, 40]).astype(np.float32).astype(np.float64)
    b = rng.standard_normal([32, 24]).astype(np.float32).astype(np.float64)
    outs = run_kernel(st.kernel, snapshot, [a, b])
    for got, want in zip(outs, reference(snapshot, [a, b])):
        np.testing.assert_array_equal(got, want)


def test_the_regions_are_part_of_the_fingerprint():
    """tp.compile's cache (model/fingerprint.py) must not hand the one-region kernel to the same
    schedule without regions, or back."""
    fusion, ta, tb = two_tmem_copies("fingerprinted", 40, 24)
    alone = fingerprint(fusion, SM100)
    fusion.manage("tmem_regions", [[ta, tb]])
    ab = fingerprint(fusion, SM100)
    fusion.manage("tmem_regions", [[tb, ta]])
    assert len({alone, ab, fingerprint(fusion, SM100)}) == 3
