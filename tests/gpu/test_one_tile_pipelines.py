"""Circular loops of one iteration on the GPU (marker `gpu`; skipped without PyTorch or a CUDA
device): K is one tile, concrete, so the circular K loop runs once; its prologue copies that tile
and predicates the others off, and nothing is refilled (issue 32, item 7). Each kernel runs into
an output poisoned with NaN, against PyTorch's sum bit for bit (cp.async tiles) or a float64
matmul within the float32 additions (tests/gpu/test_mma.py's run: TMA tiles read by wgmma,
Pipelined, mbarrier WAR and warp-specialized; mma.sync's cp.async tiles, its fragments in
registers single- or double-buffered). The symbolic schedules at the same K run beside them.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402
from tileproof.recipes import (CpAsyncPipeline, HopperGemmParams, MmaGemmParams, TmaPipeline, hopper_gemm,  # noqa: E402
                               mma_gemm)

from gpu.test_mma import run  # noqa: E402
from support.examples import example_module  # noqa: E402

pytestmark = pytest.mark.gpu
P = tp.ParallelType
WS = tp.WarpSpecialized(P.TIDy, num_registers=(40, 232))
k_loop_sum = example_module("valid", "cp_async").k_loop_sum  # K tiles of 32 columns


@pytest.mark.parametrize("stages,prefetch", [(2, 1), (3, 1), (3, 2), (4, 0)])
@pytest.mark.parametrize("k", [32, "K"])
@pytest.mark.parametrize("m", [64, 37])
def test_a_cp_async_k_loop_of_one_tile_adds_its_tile(stages, prefetch, k, m):
    kernel = tp.compile(k_loop_sum("one_tile_sum", vector=4, stages=stages, prefetch=prefetch, k=k))
    a, b = torch.randn(m, 32, device="cuda"), torch.randn(m, 32, device="cuda")
    out = torch.full((m, 32), float("nan"), device="cuda")
    kernel.run(a, b, out=[out])
    torch.cuda.synchronize()
    assert torch.equal(out, a + b)


TMA = {"pipelined": TmaPipeline(stages=4, prefetch=2), "prefetch_3": TmaPipeline(stages=4, prefetch=3),
       "war_mbarriers": TmaPipeline(stages=4, prefetch=2, war_mbarriers=True),
       "warp_specialized": TmaPipeline(stages=4, prefetch=2, warp_specialized=WS)}


@pytest.mark.parametrize("pipeline", TMA)
@pytest.mark.parametrize("k", [64, "K"])
def test_a_tma_wgmma_k_loop_of_one_tile_computes_the_matmul(pipeline, k):
    fusion = hopper_gemm(256, 512, k, HopperGemmParams(pipeline=TMA[pipeline]))
    if k == "K":
        fusion.assume("K % 64 == 0")
    run(fusion, {"K": 64})


@pytest.mark.parametrize("fragment_stages", [1, 2])
@pytest.mark.parametrize("k", [64, "K"])
def test_an_mma_sync_k_loop_of_one_tile_computes_the_matmul(fragment_stages, k):
    fusion = mma_gemm(256, 256, k, MmaGemmParams(pipeline=CpAsyncPipeline(stages=3, fragment_stages=fragment_stages)))
    if k == "K":
        fusion.assume("K % 64 == 0")
    run(fusion, {"K": 64})
