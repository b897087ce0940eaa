"""A K the MMA's K tile does not divide, differentially: the lowered kernel runs on the CPU
(tests/support/mma_sim.py, which refuses reads of memory no copy wrote or outside a buffer)
against numpy's float64 A @ B.

The tail runs on zeros (execution/zero_padding.py): each operand's cp.async writes zeros past K
(src-size 0), the fragment copies and the last instructions run past K on them. The same kernel
with the copies past K skipped instead (a plain copy's predicate) adds stale elements of the
previous K tile; a shared tile that ends at K (REDUCTION-K's rejected example) is read past its
end.
"""

from __future__ import annotations

import copy

import pytest

import tileproof as tp
from tileproof.codegen.ir import CpAsyncCopy, Loop
from tileproof.recipes import CpAsyncPipeline, MmaGemmParams, MmaTile, mma_gemm

from differential.test_differential_mma import check, check_tf32, inputs, lowered, moye_tile, simulate
from support.examples import example_module
from support.mma_sim import SimulationError, run_mma_kernel


def _invalid():
    return example_module("invalid", "mma")


def accepted(fusion):
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, [d.message for d in report.errors]
    return fusion


@pytest.mark.parametrize("m, n, k", [(16, 8, 100), (32, 16, 36), (16, 8, 4)])
def test_the_seed_tile_with_a_k_tail_computes_the_tf32_matmul(m, n, k):
    out, a, b, sim = simulate(accepted(moye_tile(m, n, k)), m, n, k)
    check_tf32(out, a, b)
    assert sim.mma_issues == (m // 16) * (n // 8) * -(-k // 8)  # the last K tile runs, past K on zeros


@pytest.mark.parametrize("k", [200, 72])
def test_a_pipelined_bfloat16_tile_with_a_k_tail_computes_the_matmul(k):
    """Two cp.async stages of 64-wide K tiles (K = 72: the second tile holds 8 elements of K),
    fragments copied element by element, symbolic sizes."""
    params = MmaGemmParams(dtype=tp.bfloat16, tile=MmaTile(m=64, n=64),
                           pipeline=CpAsyncPipeline(stages=2, ldmatrix=False))
    fusion = mma_gemm("M", "N", "K", params)
    for a in ("M % 64 == 0", "N % 64 == 0", "K % 8 == 0"):
        fusion.assume(a)
    m, n = 64, 64
    out, a, b, _ = simulate(accepted(fusion), m, n, k, {"M": m, "N": n, "K": k})
    check(out, a, b, 0.0)


def test_the_zero_path_with_the_copies_past_k_skipped_computes_a_wrong_product():
    """The accepted kernel with its cp.async past K turned from src-size 0 into a skipped copy
    (what a plain copy's predicate does): the last K tile's fragments read the slots past K as
    the previous tile left them, and the products of those stale elements land in D."""
    m, n, k = 16, 8, 100
    fusion = accepted(moye_tile(m, n, k))
    ir = copy.deepcopy(lowered(fusion).kernel)
    skipped = []

    def walk(nodes):
        for node in nodes:
            if isinstance(node, CpAsyncCopy) and node.zero_fill:
                node.conds, node.zero_fill = node.conds + node.zero_fill, []
                skipped.append(node)
            if isinstance(node, Loop) or hasattr(node, "body"):
                walk(node.body)

    walk(ir.body)
    assert skipped
    args, a, b = inputs(fusion, m, n, k)
    (out,), _ = run_mma_kernel(ir, fusion, args)
    with pytest.raises(AssertionError, match="max error"):  # the previous K tile's elements, added again
        check_tf32(out, a, b)


def test_a_shared_tile_that_ends_at_k_is_rejected_and_reads_past_it():
    invalid = _invalid()
    fusion = invalid.k_tail(100, 4)
    found = [d for d in tp.verify(fusion, "sm_90a").errors if d.code == "REDUCTION-K"]
    assert found and found[0].counterexample["index"] == 100
    args, _, _ = inputs(fusion, 16, 8, 100)
    with pytest.raises(SimulationError, match="reads T3.*outside it"):  # past the 16 x 100 tile
        run_mma_kernel(lowered(fusion).kernel, fusion, args)
    good = accepted(invalid.k_tail(100, 8))  # the same tiles with A's shared tile split by 8
    out, a, b, _ = simulate(good, 16, 8, 100)
    check_tf32(out, a, b)
