"""The kernels of circular loops of one iteration (K one tile, concrete), run by the CPU simulator
of tests/support/mma_sim.py against the reference: the prologue copies the one tile (the others
past K are predicated off), the loop waits for it, reads it and refills nothing. The simulator
raises on a read of a tile still in flight or never copied, and on a copy never waited for.
tests/rules/test_pipeline_one_tile.py has the verdicts, tests/gpu/test_one_tile_pipelines.py
runs the kernels on the GPU."""

from __future__ import annotations

import numpy as np
import pytest

import tileproof as tp
from tileproof.codegen.lower import lower
from tileproof.recipes import CpAsyncPipeline, MmaGemmParams, mma_gemm

from support.examples import example_module
from support.mma_sim import run_mma_kernel

k_loop_sum = example_module("valid", "cp_async").k_loop_sum  # K tiles of 32 columns


def simulate(fusion, inputs, symbols=None):
    report = tp.verify(fusion)
    assert report.ok
    ir = lower(fusion.snapshot(), tp.get_target("sm_90a"), report.decisions).kernel
    return run_mma_kernel(ir, fusion, inputs, symbols)


@pytest.mark.parametrize("stages,prefetch", [(2, 1), (3, 1), (3, 2), (4, 0)])
def test_a_cp_async_k_loop_of_one_tile_adds_its_tile(stages, prefetch):
    """M = 20: a whole block of 16 rows and one of 4 (its other rows zero-filled, not stored)."""
    fusion = k_loop_sum("one_tile_sum", vector=4, stages=stages, prefetch=prefetch, k=32)
    rng = np.random.default_rng(stages * 10 + prefetch)
    a, b = rng.standard_normal((20, 32)).astype(np.float32), rng.standard_normal((20, 32)).astype(np.float32)
    (out,), sim = simulate(fusion, [a, b], {"M": 20})
    assert np.array_equal(out, a + b)
    assert sim.copies == 2 * 2 * 128  # two blocks of 128 threads, one copy of a and one of b each: no refill


@pytest.mark.parametrize("fragment_stages", [1, 2])
def test_an_mma_sync_k_loop_of_one_tile_computes_the_matmul(fragment_stages):
    """D = A B^T at M = N = 128, K = 64 (one 128-byte K tile of bfloat16, three stages), the
    fragments double-buffered in registers or not; small integers, so every sum is exact."""
    fusion = mma_gemm(128, 128, 64, MmaGemmParams(pipeline=CpAsyncPipeline(stages=3, fragment_stages=fragment_stages)))
    rng = np.random.default_rng(fragment_stages)
    a, b = rng.integers(-4, 5, size=(128, 1, 64)).astype(float), rng.integers(-4, 5, size=(1, 128, 64)).astype(float)
    (out,), sim = simulate(fusion, [a, b])
    assert np.array_equal(out, a[:, 0, :] @ b[0].T)
    assert sim.mma_issues > 0
