"""Hopper wgmma matmuls on the GPU (marker `gpu`; skipped without PyTorch or a CUDA device).

Every bundled wgmma example (examples/valid/wgmma.py) runs on random bfloat16 inputs into an
output poisoned with NaN, against a float64 reference within the float32 additions (bfloat16
products are exact in float32): the descriptors WGMMA-SMEM-LAYOUT proved read the elements the
TMA wrote, and the accumulators are stored through wgmma's D fragment.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402
from tileproof.codegen.runtime.binding import check_assumptions  # noqa: E402
from tileproof.recipes import (Cluster, Epilogue, GridOrder, HopperGemmParams, HopperTile, Operand, TmaPipeline,
                               hopper_gemm)
from tileproof.schedule_files import discover  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
from gpu.test_mma import run  # noqa: E402

pytestmark = pytest.mark.gpu
EXAMPLES = discover([str(ROOT / "examples" / "valid" / "wgmma.py")])


@pytest.mark.parametrize("case", EXAMPLES, ids=lambda c: c.name)
@pytest.mark.parametrize("m, n, k", [(128, 256, 64), (384, 512, 192), (1024, 512, 1024)])
def test_wgmma_example_matches_float64(case, m, n, k):
    fusion = case.build()
    sizes = {"M": m, "N": n, "K": k}
    try:
        check_assumptions(list(fusion.assumptions), sizes, list(fusion.symbols))
    except tp.InputError:
        pytest.skip(f"{sizes} is outside the schedule's assumptions")
    run(fusion, sizes)


@pytest.mark.parametrize("k", [200, 72, 8])
def test_a_tma_k_tail_runs_on_zeros(k):
    """K not a multiple of the 64-wide K tile: the TMA fills the box past K with zeros and the last
    wgmma batch adds 0 x 0 there (the output poisoned with NaN first)."""
    case = next(c for c in EXAMPLES if c.name == "hopper_matmul_k_tail")
    run(case.build(), {"M": 256, "N": 512, "K": k})


@pytest.mark.parametrize("name", ["hopper_matmul_warp_specialized_m_tiles_in_a_loop",
                                  "hopper_matmul_grouped_war_mbarriers"])
def test_a_circular_tma_load_in_an_inner_loop_runs(name):
    """Fuzz seed 15, case 2620: A's box rows made a serial loop of 16 copies per stage inside the
    circular loop; the stage mbarriers count all 16 (a launch failure before)."""
    case = next(c for c in EXAMPLES if c.name == name)
    fusion = case.build()
    next(t for t in fusion.tensors if t.name == "T4").axis(4).parallelize(tp.ParallelType.Serial)
    run(fusion, {"M": 384, "N": 512, "K": 192})


@pytest.mark.parametrize("specialized", [None, tp.WarpSpecialized(tp.ParallelType.TIDy, num_registers=(40, 232))],
                         ids=["grouped", "warp_specialized"])
@pytest.mark.parametrize("m, n", [(200, 200), (392, 776)])
def test_partial_tiles_store_column_pairs(specialized, m, n):
    """M and N not multiples of the tile, N even: D's column pairs are stored 8 bytes at a time,
    a pair wholly inside or outside N, rows past M skipped whole (SPLIT-DIVISIBILITY's
    whole-vector holes); the output poisoned with NaN first."""
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=specialized),
                              grid=GridOrder(group=8))
    run(hopper_gemm(m, n, 192, params), {})


@pytest.mark.parametrize("sms, m, n, k, cluster", [(132, 2048, 4096, 128, 1), (132, 1000, 5000, 200, 1),
                                                   (8, 384, 776, 200, 1), (8, 1000, 2000, 128, 2),
                                                   (132, 2048, 4096, 128, 2)])
def test_a_persistent_grid_computes_every_tile(sms, m, n, k, cluster):
    """A grid of `sms` blocks over the grouped tiles (tile t * sms + blockIdx.x at step t), more
    tiles than blocks, partial tiles in M, N and K, and the tiles past the last tile loaded as
    zeros and multiplied, never stored (execution/clipped_holes.py filled): every element right (the
    output poisoned with NaN first), with B multicast in clusters of two where `cluster` is 2."""
    ws = tp.WarpSpecialized(tp.ParallelType.TIDy, num_registers=(40, 232))
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=ws),
                              grid=GridOrder(group=8, persistent=sms), cluster=Cluster(size=cluster))
    run(hopper_gemm(m, n, k, params), {})


def test_a_persistent_grid_whose_clusters_do_not_all_fit_warns():
    """128 blocks in clusters of 4 on a persistent grid: the GPU holds 128 of these blocks at once
    (132 SMs) but, on an H100 or H200, only 30 clusters of 4 (a cluster's blocks share one GPC), so
    8 blocks wait for a second wave. The launch says so (tp.PerformanceWarning) exactly when the
    driver counts fewer clusters than the grid has, and every tile is still right."""
    import warnings

    from tileproof.codegen.runtime import driver

    ws = tp.WarpSpecialized(tp.ParallelType.TIDy, num_registers=(40, 232))
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=ws),
                              grid=GridOrder(group=8, persistent=128), cluster=Cluster(size=4))
    fusion = hopper_gemm(1024, 2048, 128, params)
    kernel = tp.compile(fusion)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run(fusion, {})
    grid, block, smem = kernel._config({})
    fit = driver.resident_clusters(kernel._function(0, smem), grid, block, smem)
    warned = [w for w in caught if issubclass(w.category, tp.PerformanceWarning)]
    assert len(warned) == (fit < 32), (fit, [str(w.message) for w in warned])
    if warned:
        assert f"only {fit} clusters" in str(warned[0].message)


@pytest.mark.parametrize("sms, m, n, k", [(None, 384, 512, 192), (132, 2048, 4096, 128), (8, 1024, 1024, 200)])
def test_a_stmatrix_epilogue_stores_bfloat16_through_shared_memory(sms, m, n, k):
    """D cast to bfloat16 in its fragment layout, written by stmatrix.x4 into the swizzled staging
    tile and stored by TMA, on the grouped grid or a persistent one (the staging tile reused from
    tile to tile), K's tail on the TMA's zeros; the output poisoned with NaN first."""
    ws = tp.WarpSpecialized(tp.ParallelType.TIDy, num_registers=(40, 232))
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=3, prefetch=1, warp_specialized=ws),
                              grid=GridOrder(group=8, persistent=sms),
                              epilogue=Epilogue(dtype=tp.bfloat16, stmatrix=True))
    run(hopper_gemm(m, n, k, params), {})


@pytest.mark.parametrize("tile", [HopperTile(m=256, n=128, warpgroup_rows=128), HopperTile(m=192, n=192, split_n=True)],
                         ids=["256_row_tiles", "split_n"])
@pytest.mark.parametrize("epilogue", ["registers", "stmatrix"])
@pytest.mark.parametrize("sms, cluster, m, n, k", [(None, 1, 1008, 784, 200), (8, 2, 1200, 992, 136)])
def test_warpgroup_tiles_of_several_wgmmas(tile, epilogue, sms, cluster, m, n, k):
    """Block tiles whose warpgroups issue several wgmmas each (a loop mi over 64-row tiles): 256 x
    128 (the rows split) and 192 x 192 (the columns split), bfloat16 out from the registers or by
    stmatrix and TMA, grouped or persistent with B multicast in clusters of two, partial tiles in
    M, N and K (M and N multiples of 16: stmatrix's tiles); the output poisoned with NaN first."""
    ws = tp.WarpSpecialized(tp.ParallelType.TIDy, num_registers=(40, 232))
    stages = 3 if epilogue == "stmatrix" else 4
    params = HopperGemmParams(tile=tile, pipeline=TmaPipeline(stages=stages, prefetch=stages - 2, warp_specialized=ws),
                              grid=GridOrder(group=8, persistent=sms), cluster=Cluster(size=cluster),
                              epilogue=Epilogue(dtype=tp.bfloat16, stmatrix=epilogue == "stmatrix"))
    run(hopper_gemm(m, n, k, params), {})


@pytest.mark.parametrize("tile, swizzle", [(HopperTile(m=128, n=256), 128),
                                           (HopperTile(m=256, n=128, warpgroup_rows=128), 128),
                                           (HopperTile(m=128, n=224), 64)],
                         ids=["128x256", "256_row_tiles", "128x224_boxes_of_32"])
@pytest.mark.parametrize("sms, cluster, m, n, k", [(None, 1, 1008, 784, 200), (8, 2, 1200, 992, 136)])
def test_a_stmatrix_epilogue_staged_box_by_box(tile, swizzle, sms, cluster, m, n, k):
    """Epilogue.by_box: the staging tile holds one 64-column TMA box (32 columns with swizzle=64:
    seven for a 224-wide tile), rewritten box after box once the previous box's store has read it,
    so that four stages fit beside it; grouped or persistent in clusters of two, partial tiles; the
    output poisoned with NaN first."""
    ws = tp.WarpSpecialized(tp.ParallelType.TIDy, num_registers=(40, 232))
    params = HopperGemmParams(tile=tile, pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=ws),
                              grid=GridOrder(group=8, persistent=sms), cluster=Cluster(size=cluster),
                              epilogue=Epilogue(dtype=tp.bfloat16, stmatrix=True, by_box=True, swizzle=swizzle))
    run(hopper_gemm(m, n, k, params), {})


@pytest.mark.parametrize("tile, by_box, swizzle", [(HopperTile(m=128, n=256), False, 128),
                                                   (HopperTile(m=128, n=256), True, 128),
                                                   (HopperTile(m=256, n=128, warpgroup_rows=128), True, 128),
                                                   (HopperTile(m=192, n=192, split_n=True), False, 128),
                                                   (HopperTile(m=128, n=224), True, 64)],
                         ids=["128x256", "128x256_by_box", "256_row_tiles_by_box", "split_n", "128x224_boxes_of_32"])
@pytest.mark.parametrize("sms, cluster, m, n, k", [(None, 1, 200, 200, 72), (8, 2, 1001, 1000, 136)])
def test_a_stmatrix_epilogue_at_edges_inside_its_16_by_16_tiles(tile, by_box, swizzle, sms, cluster, m, n, k):
    """M and N not multiples of 16 (M odd): the stmatrix tiles at the edges straddle them, and the
    cast and stmatrix run there unpredicated (execution/clipped_holes.py) while the TMA store clips
    what lies past M and N; the output poisoned with NaN first."""
    ws = tp.WarpSpecialized(tp.ParallelType.TIDy, num_registers=(40, 232))
    stages = 4 if by_box else 3
    params = HopperGemmParams(tile=tile, pipeline=TmaPipeline(stages=stages, prefetch=stages - 2, warp_specialized=ws),
                              grid=GridOrder(group=8, persistent=sms), cluster=Cluster(size=cluster),
                              epilogue=Epilogue(dtype=tp.bfloat16, stmatrix=True, by_box=by_box, swizzle=swizzle))
    run(hopper_gemm(m, n, k, params), {})


@pytest.mark.parametrize("a_major, b_major", [("MN", "MN"), ("K", "MN")])
def test_mn_major_tiles_under_mbarrier_war(a_major, b_major):
    """MN-major tiles (a loop of TMA boxes each) refilled after the empty mbarrier's release,
    without warp specialization (benchmarks/fuzz.py seed 18: rejected before, the loop of boxes
    was not seen as the refill)."""
    params = HopperGemmParams(tile=HopperTile(m=64, n=128),
                              pipeline=TmaPipeline(stages=2, prefetch=1, war_mbarriers=True), a=Operand(major=a_major),
                              b=Operand(major=b_major))
    run(hopper_gemm(248, 320, 680, params), {})


def test_the_hopper_gemm_walkthrough_runs():
    """docs/hopper_gemm.md on the GPU: every block, the kernel's run against float64 included."""
    from support import doc_blocks

    doc = ROOT / "docs" / "hopper_gemm.md"
    assert doc_blocks.run(doc, gpu=True) == len(doc_blocks.blocks(doc))


@pytest.mark.parametrize("swizzle, n", [(32, 8), (32, 24), (64, 8), (64, 24)])
@pytest.mark.parametrize("stages", [2, 4])
@pytest.mark.parametrize("m, k", [(128, 128), (192, 512), (320, 1008)])
def test_a_stage_starting_mid_way_through_a_128_byte_swizzle_s_1024_bytes_is_read_right(swizzle, n, stages, m, k):
    """A 32- or 64-byte swizzle repeats every 256 or 512 bytes: B's stages of n x 32 / 64 bytes start
    there (not on 1024), with descriptor base offset 0 (WGMMA-SMEM-LAYOUT accepts them since nvFuser's
    HopperSS.MultipleTile B32 schedules showed the 1024-byte start too strict)."""
    params = HopperGemmParams(tile=HopperTile(m=64, n=n, swizzle=swizzle), pipeline=TmaPipeline(stages=stages))
    fusion = hopper_gemm(m, 3 * n, k, params)
    assert tp.verify(fusion).ok
    run(fusion, {})


@pytest.mark.parametrize("stages", [2, 3])
def test_warpgroups_taking_turns_at_each_k_step_match_float64(stages):
    """WarpSpecialized(ping_pong=True) on a GEMM (rule_examples.hopper_gemm_tile, two warpgroups of
    64 rows on TIDy): each K step's wgmma issued by warpgroup 0, then 1 (WS-PING-PONG); the same
    values as float64, and bit for bit those of the kernel without turns."""
    from tileproof.rule_examples import hopper_gemm_tile

    kernels = []
    for ping_pong in (True, False):
        fusion, sa, sb, d, out = hopper_gemm_tile(f"turns_{ping_pong}", 128, 64)
        for t in (sa, sb):
            t.circular_buffer(stages, stages - 1, tp.WarpSpecialized(tp.ParallelType.TIDy, ping_pong=ping_pong))
        kernels.append(tp.compile(fusion, "sm_90a"))
    assert "bar.arrive %0" in kernels[0].cuda_source and "bar.arrive %0" not in kernels[1].cuda_source
    gen = torch.Generator().manual_seed(stages)
    a = torch.randn(128, 1, 256, generator=gen).to(torch.bfloat16).cuda()
    b = torch.randn(1, 64, 256, generator=gen).to(torch.bfloat16).cuda()
    (got,), (plain,) = (k.run(a, b) for k in kernels)
    torch.cuda.synchronize()
    want = a[:, 0].double() @ b[0].double().T
    torch.testing.assert_close(got.double().reshape(want.shape), want, rtol=1e-5, atol=1e-3)
    assert torch.equal(got, plain)
