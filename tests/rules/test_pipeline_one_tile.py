"""A circular loop of one iteration (K one tile) gets the verdict its symbolic schedule gets at that
K (issue 32, item 7): nvFuser accepts a circular loop shorter than its stages, down to one
iteration, with a predicated prologue (csrc/device_lower/analysis/circular_buffer.cpp), and so does
PIPELINE-STAGES now, for cp.async tiles, TMA tiles read by wgmma (Pipelined, mbarrier WAR,
warp-specialized) and mma.sync's cp.async tiles with register fragments. Every accepted one-tile
kernel compiles for sm_90a; PIPELINE-STAGES still rejects one stage, a prefetch of the stages or
more, and a circular loop that is no loop. tests/differential/test_differential_one_tile_pipeline.py
runs the cp.async kernels on the CPU simulator, tests/gpu/test_one_tile_pipelines.py on the GPU."""

from __future__ import annotations

import re

import pytest

import tileproof as tp
from tileproof.recipes import (CpAsyncPipeline, HopperGemmParams, MmaGemmParams, TmaPipeline, hopper_gemm,
                               mma_gemm)

from support.examples import example_module

P = tp.ParallelType
WS = tp.WarpSpecialized(P.TIDy, num_registers=(40, 232))
k_loop_sum = example_module("valid", "cp_async").k_loop_sum  # K tiles of 32 columns


def cp_async_sum(k, stages=3, prefetch=1):
    return k_loop_sum("one_tile_sum", vector=4, stages=stages, prefetch=prefetch, k=k)


def wgmma(pipeline):
    return lambda k: hopper_gemm(256, 256, k, HopperGemmParams(pipeline=pipeline))  # K tiles of 64


def mma_sync(pipeline):
    return lambda k: mma_gemm(128, 128, k, MmaGemmParams(pipeline=pipeline))  # K tiles of 64 (bfloat16)


PIPELINES = {
    "cp_async_2_stages": (lambda k: cp_async_sum(k, 2, 1), 32),
    "cp_async_3_stages_prefetch_1": (cp_async_sum, 32),
    "cp_async_4_stages_prefetch_0": (lambda k: cp_async_sum(k, 4, 0), 32),
    "tma_wgmma": (wgmma(TmaPipeline(stages=4, prefetch=2)), 64),
    "tma_wgmma_prefetch_3": (wgmma(TmaPipeline(stages=4, prefetch=3)), 64),
    "tma_wgmma_war_mbarriers": (wgmma(TmaPipeline(stages=4, prefetch=2, war_mbarriers=True)), 64),
    "tma_wgmma_warp_specialized": (wgmma(TmaPipeline(stages=4, prefetch=2, warp_specialized=WS)), 64),
    "cp_async_mma_sync": (mma_sync(CpAsyncPipeline(stages=3)), 64),
    "cp_async_mma_sync_register_fragments": (mma_sync(CpAsyncPipeline(stages=3, fragment_stages=2)), 64),
}


def symbolic(build, tile, *extra):
    """The schedule with K a symbol, a multiple of the tile (so it admits K = one tile)."""
    fusion = build("K")
    for a in (f"K % {tile} == 0", *extra):
        fusion.assume(a)
    return fusion


@pytest.mark.parametrize("name", PIPELINES)
def test_one_tile_of_k_is_accepted_concrete_as_symbolic(name):
    build, tile = PIPELINES[name]
    concrete = tp.verify(build(tile))
    assert concrete.ok, [f"{d.code}: {d.message}" for d in concrete.errors]
    assert tp.verify(symbolic(build, tile)).ok
    assert tp.verify(symbolic(build, tile, f"K <= {tile}")).ok  # K one tile and nothing else


@pytest.mark.parametrize("name", PIPELINES)
def test_the_one_tile_kernel_compiles_for_sm_90a(name):
    build, tile = PIPELINES[name]
    kernel = tp.compile(build(tile), "sm_90a")  # NVRTC: every name the source uses is declared
    assert kernel.cubin


def test_the_one_iteration_loop_reads_its_index_as_0():
    """The loop of one iteration is printed as a block without its index; the prefetched copies'
    predicate, which names the index, is printed at index 0: iteration 0 + 1 is past the loop."""
    source = tp.compile(cp_async_sum(32), "sm_90a").cuda_source
    index = re.search(r"prologue: the copies of iterations 0\.\.0 of the loop over (\w+) ", source).group(1)
    block = source[source.index("(extent 1)"):]
    assert not re.search(rf"\b{index}\b", block)
    assert re.search(r"if \(1U\w* < 1U\w*\) \{  // the copies of iteration 1", block)


@pytest.mark.parametrize("stages,prefetch,codes", [
    (1, -1, {"PIPELINE-STAGES"}),
    (2, 2, {"PIPELINE-STAGES"}),  # the symbolic schedule gets PIPELINE-WAR too (a refill for a symbolic iteration)
    (3, 5, {"PIPELINE-STAGES"}),
    (2, -3, {"PIPELINE-STAGES", "CPASYNC-WAIT"}),
])
def test_pipeline_stages_still_rejects_bad_numbers_at_one_tile(stages, prefetch, codes):
    concrete = tp.verify(cp_async_sum(32, stages, prefetch))
    symbolic_k = tp.verify(symbolic(lambda k: cp_async_sum(k, stages, prefetch), 4, "K <= 32"))
    assert set(concrete.codes) == codes and codes <= set(symbolic_k.codes)


@pytest.mark.parametrize("k", [32, "K"])
def test_pipeline_stages_still_wants_a_serial_loop_at_one_tile(k):
    fusion = cp_async_sum(k)
    tiles = [t for t in fusion.tensors if t.circular is not None]
    for t in tiles:
        t.inline_at(1)  # the axis left of the compute-at position is BIDx
    report = tp.verify(fusion, rules=["PIPELINE-STAGES"])
    # one finding for both tiles: the same line of the schedule broke each (causes.merge_repeats)
    (d,) = report.errors
    assert len(tiles) == 2 and "is parallelized on BIDx" in d.message
    assert any(n.startswith(f"the same finding holds for {tiles[1].name}") for n in d.notes)
    for t in tiles:
        t.inline_at(0)
    report = tp.verify(fusion, rules=["PIPELINE-STAGES"])
    (d,) = report.errors
    assert "not inlined into a loop" in d.message and any(tiles[1].name in n for n in d.notes)
