"""Split-K in one kernel (recipes/split_k.py split_k_grid) without a GPU: the schedule verifies and
compiles for sm_90a at shapes no tile divides, K's runs past its end included, in every major and
with M, N, K symbolic; the lowered kernel is one launch of (M tiles, N tiles, splits) blocks whose
rfactored MmaOp's accumulators the grid reduction over BIDz combines (a workspace and a semaphore,
the last block adding the splits in rank order) before the output's only store; recipes.matmul
runs it as its *_split_k_grid configurations, one kernel on A and B as given."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.codegen.ir import GridReduce, MmaIssue, walk
from tileproof.recipes.hopper_params import HopperTile, Operand, TmaPipeline
from tileproof.recipes.matmul import Matmul, config_fusions, epilogue_configs
from tileproof.recipes.matmul_heuristic import BY_NAME, CONFIGS, admits, choose, estimate
from tileproof.recipes.params import EpilogueOps
from tileproof.recipes.split_k import SplitKParams, split_k_grid

P = tp.ParallelType
GRID_CONFIGS = [c for c in CONFIGS if c.grid_reduce]
MAJORS = [("K", "K"), ("K", "MN"), ("MN", "K"), ("MN", "MN")]


def params(tile=(128, 128), a_major="K", b_major="K", stages=4, prefetch=2):
    return SplitKParams(tile=HopperTile(m=tile[0], n=tile[1]), pipeline=TmaPipeline(stages=stages, prefetch=prefetch),
                        a=Operand(major=a_major), b=Operand(major=b_major))


def compiled(fusion):
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, report.codes
    return tp.compile(fusion, "sm_90a")


@pytest.mark.parametrize("tile,shape,splits,out_dtype", [
    ((128, 128), (200, 296, 520), 4, tp.float32),  # K's 9 tiles in runs of 3: the last run wholly past K
    ((64, 256), (16, 4096, 4096), 8, tp.bfloat16),  # decode: 16 of 64 rows, 8 runs of 8 K tiles
    ((64, 128), (72, 1000, 1000), 3, tp.float16),  # M, N and K tails (16 tiles: runs of 6, 6, 4)
])
def test_one_kernel_verifies_compiles_and_launches_a_block_per_split_and_tile(tile, shape, splits, out_dtype):
    kernel = compiled(split_k_grid(params(tile), shape, splits, out_dtype))
    m, n, _ = shape
    assert kernel.launch_params_for().grid == (-(-m // tile[0]), -(-n // tile[1]), splits)
    src = kernel.cuda_source
    assert src.count("__global__") == 1 and "wgmma.mma_async" in src and "atomicAdd" in src
    assert kernel.resources.spill_store_bytes == 0 and kernel.resources.spill_load_bytes == 0
    assert kernel.fusion.outputs[0].dtype == out_dtype


def test_the_accumulators_are_combined_over_bidz_in_rank_order_before_the_only_store():
    """The MmaOp is rfactored: its partial (BIDz an iteration axis) issues the wgmmas of one K run,
    the sum over BIDz is a GridReduce of the C fragment's registers with no thread type reduced
    (each thread adds ranks 0, 1, .., S - 1 of its own lane: one order, whichever block is last),
    and the output's store comes after it, in the last block only."""
    fusion = split_k_grid(params(), (256, 512, 4096), 4)
    kernel = compiled(fusion)
    nodes = list(walk(kernel.ir.body))
    (grid,) = [n for n in nodes if isinstance(n, GridReduce)]
    assert (grid.combine, grid.elements, grid.dtype) == ("add", 64, tp.float32)  # a 64 x 128 C fragment a warpgroup
    assert grid.threads == (False, False, False) and not grid.allreduce and str(grid.ranks) == "4"
    issues = [i for i, n in enumerate(nodes) if isinstance(n, MmaIssue)]
    assert issues and nodes.index(grid) > max(issues)
    on_z = {t.name: t.loop[0] for t in fusion.tensors if t.loop and t.loop[0].parallel_type is P.BIDz}
    assert sorted(i.is_reduction for i in on_z.values()) == [False, False, False, True]  # A, B, the MmaOp; the sum
    assert [i.parallel_type for i in fusion.outputs[0].loop][:2] == [P.BIDx, P.BIDy]
    src = kernel.cuda_source
    assert src.index("tp_grid_reduce<64") < src.rindex("__float2bfloat16_rn")
    assert "tp_last_z_" in src


@pytest.mark.parametrize("a_major,b_major", MAJORS)
def test_the_shape_class_kernel_verifies_in_every_major(a_major, b_major):
    (fusion,) = config_fusions(BY_NAME["128x128_split_k_grid"], a_major, b_major, "float32", splits=3)
    assert set(fusion.symbols) == {"M", "N", "K"}
    assert tp.verify(fusion, "sm_90a").ok


@pytest.mark.parametrize("config", GRID_CONFIGS, ids=lambda c: c.name)
def test_every_grid_configuration_verifies_at_a_shape_in_both_majors_of_b(config):
    for b_major in ("K", "MN"):
        (fusion,) = config_fusions(config, "K", b_major, "bfloat16", shape=(1000, 2048, 4104), splits=5)
        kernel = compiled(fusion)
        assert not kernel.fusion.symbols


def test_bad_arguments_are_schedule_errors():
    with pytest.raises(tp.ScheduleError, match="must not be warp-specialized"):
        split_k_grid(SplitKParams(pipeline=TmaPipeline(stages=4, warp_specialized=tp.WarpSpecialized(P.TIDy))))
    with pytest.raises(tp.ScheduleError, match="splits must be an int from 2 to 64, got 1"):
        split_k_grid(params(), (64, 64, 1024), 1)
    with pytest.raises(tp.ScheduleError, match="shape must be 3 positive ints or names"):
        split_k_grid(params(), (64, 64), 2)
    with pytest.raises(tp.ScheduleError, match="params must be a SplitKParams"):
        split_k_grid("wide")
    with pytest.raises(tp.ScheduleError, match="ops must be an EpilogueOps, got 'relu'"):
        split_k_grid(params(), (64, 64, 1024), 2, tp.bfloat16, "relu")
    with pytest.raises(tp.ScheduleError, match="needs splits >= 2, got 1"):
        config_fusions(BY_NAME["64x256_split_k_grid"], "K", "K", "bfloat16", shape=(16, 4096, 4096), splits=1)


def test_the_one_kernel_configurations_are_forced_by_name_only():
    """Measured at 0.25-0.43 of cuBLAS on an H200 where the estimate chose them (matmul_heuristic's
    ONE_KERNEL_SPLIT_K): the choice keeps the two-kernel split-K at the decode shape."""
    decode = choose(16, 4096, 4096)
    assert decode.config.split_k and not decode.config.grid_reduce and decode.splits >= 2
    assert not any(c.grid_reduce for c in CONFIGS)
    assert not choose(8192, 8192, 8192).config.split_k
    grid = BY_NAME["64x128_split_k_grid"]
    assert admits(grid, 16, 4096, 4096, 4) and not admits(grid, 16, 4096, 576, 4)  # 9 tiles: runs of 3, 3, 3, none
    assert not admits(grid, 16, 4096, 4096, 1)
    assert estimate(grid, 16, 4096, 4096, 4) > 0


def test_the_last_block_runs_the_fused_ops_on_the_sums():
    """The epilogue's chain (hopper_gemm.epilogue_ops) in the C fragment's registers after the grid
    combine: its inputs the bias and the residual after A and B, its statements in the last block."""
    ops = EpilogueOps(scale=2.0, bias="column", residual=True, activation="gelu_tanh")
    (fusion,) = config_fusions(BY_NAME["64x128_split_k_grid"], "K", "MN", "bfloat16", shape=(200, 264, 1032),
                               splits=3, ops=ops)
    assert [t.dtype for t in fusion.inputs] == [tp.bfloat16, tp.bfloat16, tp.float32, tp.bfloat16]
    src = compiled(fusion).cuda_source
    assert src.index("tp_grid_reduce<") < src.index("tanhf(") and "blockIdx.z == tp_last_z_" in src
    relu = split_k_grid(params((128, 128)), ("M", "N", "K"), 4, tp.float32, EpilogueOps(bias="row", activation="relu"))
    relu.assume("N % 8 == 0")
    relu.assume("K % 8 == 0")
    assert tp.verify(relu, "sm_90a").ok


def test_gelu_runs_on_the_grid_tiles_of_at_most_128_columns():
    """gelu's 9 ops an element on 128 accumulators a thread (a 64 x 256 tile) unroll past 1024
    statements (UNROLL-LENGTH), as on the persistent kernels: epilogue_configs leaves that tile out."""
    ops = EpilogueOps(bias="column", residual=True, activation="gelu")
    wide = split_k_grid(params((64, 256)), (16, 4096, 4096), 4, tp.bfloat16, ops)
    assert "UNROLL-LENGTH" in tp.verify(wide, "sm_90a").codes
    kept = [c.name for c in epilogue_configs(ops) if c.grid_reduce]
    assert kept == ["128x128_split_k_grid", "64x128_split_k_grid"]
    assert set(GRID_CONFIGS) <= set(epilogue_configs(EpilogueOps(activation="relu")))
    with pytest.raises(tp.InputError, match="64x256_split_k_grid does not fuse"):
        Matmul(config="64x256_split_k_grid", epilogue=ops)


def test_the_entry_compiles_one_kernel_per_split_count(monkeypatch):
    compiled_fusions = []
    monkeypatch.setattr(tp, "compile", lambda fusion, target: compiled_fusions.append(fusion) or fusion)
    entry = Matmul(config="128x128_split_k_grid")
    assert len(entry.kernels(BY_NAME["128x128_split_k_grid"], "K", "K", shape=(256, 512, 4096), splits=2)) == 1
    entry.kernels(BY_NAME["128x128_split_k_grid"], "K", "K", shape=(256, 512, 4096), splits=4)
    symbolic = Matmul(config="128x128_split_k_grid", specialize=False)
    symbolic.kernels(BY_NAME["128x128_split_k_grid"], "K", "K", splits=4)
    symbolic.kernels(BY_NAME["128x128_split_k_grid"], "K", "K", splits=4)  # the shape class's S: one compile
    assert len(compiled_fusions) == 3
    assert set(compiled_fusions[-1].symbols) == {"M", "N", "K"}
