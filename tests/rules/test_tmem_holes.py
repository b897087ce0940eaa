"""SPLIT-DIVISIBILITY in a tensor-memory schedule (issue 33): a split that need not divide is
accepted where the tcgen05 access, run at its holes too (warp-collective, unpredicated, as
nvFuser issues it), touches only cells inside the tensor's allocation and (a store) none a
valid element is stored to (verifier/analysis/tmem_holes.py); rejected with a counterexample
where a hole falls outside the allocation or onto a valid element. The code generator issues
the instruction at the holes with only the data predicated (codegen/lower/tmem.py): compiled for
sm_100a (NVRTC) and run on the CPU simulator of tests/support/tmem_sim.py, whose tcgen05 checks
each cell against the allocation and the warp's sub-partition and loads a hole's cell as NaN.
"""

from __future__ import annotations

import numpy as np
import pytest

import tileproof as tp
from tileproof.codegen.lower import lower
from tileproof.codegen.runtime.reference import reference
from tileproof.model.expr import evaluate
from tileproof.model.targets import get_target
from tileproof.model.types import Direction
from tileproof.rule_examples import tmem_copy
from tileproof.verifier.analysis.tmem import access_models
from tileproof.verifier.analysis.tmem_holes import holes_inside
from tileproof.verifier.context import VerifyContext
from tileproof.verifier.solver import Verdict

from support.brute_force import split_divisibility
from support.lowering import decisions_for
from support.tmem_sim import check_addresses, run_kernel

P = tp.ParallelType
SM100 = "sm_100a"


def split_columns(name, shape, factor, allocation):
    """t1, t2 (tensor memory), t3 over `shape`: axis 0 on TIDx (the lanes), the last axis split by
    `factor`; t2 allocated along its loop domain ("loop": the split's holes get cells of their
    own) or its logical domain ("logical": a hole's column is the column of the next element)."""
    fusion, t0, t1, t2, t3 = tmem_copy(name, shape)
    for t in (t1, t2, t3):
        t.axis(0).parallelize(P.TIDx)
        t.split(-1, factor)
    domain = t2.get_loop_domain() if allocation == "loop" else t2.get_logical_domain()
    t2.set_allocation_domain(domain, True)
    t2.set_tmem_dim_sep_pos(1)
    return fusion


def symbolic_rows():
    """nvFuser's TMemTest.GmemRegTMemRegGmemCopy: [N] split by 32 onto [BIDx, TIDx{32}], t2 the
    lanes of its loop domain: the last block's warp runs lanes past N, which it allocated."""
    fusion, t0, t1, t2, t3 = tmem_copy("symbolic_rows", ["N"])
    for t in (t1, t2, t3):
        t.split(0, 32)
        t.axis(0).parallelize(P.BIDx)
        t.axis(1).parallelize(P.TIDx)
    t2.set_allocation_domain(t2.get_loop_domain(), True)
    t2.set_tmem_dim_sep_pos(-1)
    return fusion


def only(report, code):
    found = [d for d in report.errors if d.code == code]
    assert found and report.codes == [code], report.codes
    return found


@pytest.mark.parametrize("build", [
    lambda: split_columns("holes_own_cells", [32, 40], 16, "loop"),     # columns 48 of 64, holes 40..47
    lambda: split_columns("holes_past_the_end", [32, 40], 16, "logical"),  # columns 40..47 of 64, no element there
    symbolic_rows,
])
def test_holes_inside_the_allocation_are_accepted(build):
    report = tp.verify(build(), SM100)
    assert report.ok, report.codes


def test_a_hole_outside_the_allocation_is_rejected_with_the_cell():
    """[32, 32] split by 3, allocated along the logical 32 columns (32 allocated): the hole at
    3 * 10 + 2 = 32 is column 32, one past the allocation, for the store and for the load."""
    report = tp.verify(split_columns("hole_outside", [32, 32], 3, "logical"), SM100)
    found = only(report, "SPLIT-DIVISIBILITY")
    assert {d.tensor for d in found} == {"T2", "T3"}
    for d in found:
        assert d.counterexample["hole column"] == 32 and d.counterexample["columns allocated"] == 32
        assert any("its allocation has columns 0..31" in n for n in d.notes), d.notes


def test_a_hole_on_a_valid_element_is_rejected_for_the_store_only():
    """[32, 3, 10] split by 4 allocated along the logical domain (30 columns, 32 allocated): every
    hole lies inside, but row a's holes 10, 11 are row a + 1's columns 0, 1, so the store's
    garbage could replace them; the load only reads there (its write-back is predicated)."""
    report = tp.verify(split_columns("hole_on_element", [32, 3, 10], 4, "logical"), SM100)
    (d,) = only(report, "SPLIT-DIVISIBILITY")
    assert d.tensor == "T2"
    assert d.counterexample["hole column"] % 10 in (0, 1) and d.counterexample["hole column"] < 30
    assert any("where a valid element of the same allocation is stored" in n for n in d.notes), d.notes


def test_the_proof_is_per_access():
    """The hole proof of the clobbering schedule fails for the store with a witness and holds
    for the load."""
    fusion = split_columns("hole_on_element", [32, 3, 10], 4, "logical")
    ctx = VerifyContext(fusion.snapshot(), get_target(SM100), {})
    outcomes = {m.acc.direction: holes_inside(ctx, m) for m in access_models(ctx)}
    assert outcomes[Direction.STORE].status is Verdict.COUNTEREXAMPLE
    assert outcomes[Direction.LOAD].proved


@pytest.mark.parametrize("args, rejected", [
    (("own_cells", [32, 40], 16, "loop"), False), (("past_the_end", [32, 40], 16, "logical"), False),
    (("outside", [32, 32], 3, "logical"), True), (("on_element", [32, 3, 10], 4, "logical"), True),
    (("own_cells_33", [32, 33], 8, "loop"), False), (("outside_64", [32, 64], 5, "logical"), True),
])
def test_brute_force_enumeration_agrees(args, rejected):
    """tests/support/brute_force.py enumerates every thread, point and register of each access
    (its own tcgen05 tables) and agrees with the proof."""
    fusion = split_columns(*args)
    assert split_divisibility(fusion).violated is rejected
    assert ("SPLIT-DIVISIBILITY" in tp.verify(fusion, SM100).codes) is rejected


def test_divisible_splits_need_no_hole_proof():
    report = tp.verify(split_columns("divides", [32, 32], 4, "logical"), SM100)
    assert report.ok, report.codes


# -- the kernel ----------------------------------------------------------------------------------


def test_the_instruction_runs_at_the_holes_and_the_data_is_predicated():
    """GmemRegTMemRegGmemCopy's kernel: the tcgen05.st / ld under no hole predicate, the store's
    register read and the load's write-back (into the output T3) under 32 * blockIdx.x + threadIdx.x < N."""
    src = tp.compile(symbolic_rows(), target=SM100).cuda_source
    hole = "if (((blockIdx.x * 32U) + threadIdx.x) < s_N)"
    lines = src.splitlines()
    st = next(k for k, line in enumerate(lines) if "tcgen05.st.sync" in line)
    ld = next(k for k, line in enumerate(lines) if "tcgen05.ld.sync" in line)
    assert not any(line.strip().startswith("if (") for line in lines[st - 6:st] if "tmem_elements" not in line)
    assert f"{hole} tmem_elements[0] = T1[0U];" in [line.strip() for line in lines[st - 6:st]]
    assert "float tmem_elements[1] = {};" in [line.strip() for line in lines[st - 6:st]]
    assert f"{hole} T3[((blockIdx.x * 32U) + threadIdx.x)] = tmem_elements[0];" in [line.strip() for line in lines[ld:ld + 12]]


@pytest.mark.parametrize("n", [1, 31, 33, 100])
def test_simulated_copy_with_holes(n):
    fusion = symbolic_rows()
    snapshot = fusion.snapshot()
    st = lower(snapshot, get_target(SM100), decisions_for(snapshot, get_target(SM100)))
    a = np.random.default_rng(n).standard_normal(n).astype(np.float32).astype(np.float64)
    (out,) = run_kernel(st.kernel, snapshot, [a], {"N": n})
    np.testing.assert_array_equal(out, a)
    assert check_addresses(st, symbols={"N": n}) == 2 * 32 * -(-n // 32)  # every thread of every block, st and ld


@pytest.mark.parametrize("allocation", ["loop", "logical"])
def test_simulated_copy_with_column_holes(allocation):
    fusion = split_columns(f"column_holes_{allocation}", [32, 40], 16, allocation)
    assert tp.verify(fusion, SM100).ok
    snapshot = fusion.snapshot()
    st = lower(snapshot, get_target(SM100), decisions_for(snapshot, get_target(SM100)))
    a = np.random.default_rng(0).standard_normal([32, 40]).astype(np.float32).astype(np.float64)
    (out,) = run_kernel(st.kernel, snapshot, [a])
    np.testing.assert_array_equal(out, reference(snapshot, [a])[0])
    assert evaluate(st.kernel.block[0], {}) == 32
