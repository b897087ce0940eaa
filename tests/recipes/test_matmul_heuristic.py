"""recipes.matmul's shape-aware choice without a GPU: the picks at representative shapes (the
large tile on large shapes, a small group where M has few tiles, split-K where few output tiles
have a long K, the 64-row tile at decode), the split counts each configuration admits, the balanced
persistent grid, every configuration the chooser can pick verifies and compiles at a shape (and the
128 x 128 ones per shape class in every major), the kernels cache per shape (LRU), split-K's
operand views bind and hold K's slices, and the one-kernel split-K that a grid reduction of the
accumulators would be is rejected."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.codegen.runtime import binding
from tileproof.model.fingerprint import fingerprint
from tileproof.recipes import HopperGemmParams, HopperTile, Matmul, hopper_gemm
from tileproof.recipes.matmul import config_fusions, config_params, matmul
from tileproof.recipes.matmul_heuristic import (BY_NAME, CONFIGS, WIDE, MatmulConfig, admits, balanced_grid,
                                                candidates, choose, estimate, shape_group)
from tileproof.recipes.split_k import SplitKParams, split_k_operands, split_k_partials

pytestmark = pytest.mark.usefixtures("private_cache")
try:
    import torch
except ImportError:
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="needs PyTorch")
MAJORS = [("K", "K"), ("K", "MN"), ("MN", "K"), ("MN", "MN")]
SPLIT_128 = BY_NAME["128x128_split_k"]


@pytest.mark.parametrize("shape", [(8192, 8192, 8192), (4096, 4096, 4096), (2048, 2048, 2048), (4096, 14336, 4096)])
def test_large_shapes_take_the_wide_persistent_tile(shape):
    assert choose(*shape).config is WIDE


def test_few_m_tiles_take_a_small_group():
    """M = 512 is 4 tiles of 128: groups of 16 would run 12 empty tiles per N tile. A kernel compiled
    at the shape takes groups of M's 4 tiles (shape_group); a shape class's kernel, whose M is
    symbolic, keeps its configuration's group, so its choice is the configuration of pairs."""
    choice = choose(512, 8192, 8192)
    assert (choice.config.tile, shape_group(choice.config, 512), choice.splits) == ((128, 256), 4, 1)
    assert config_params(choice.config, "K", "K", "bfloat16", shape=(512, 8192, 8192)).grid.group == 4
    assert config_params(choice.config, "K", "K", "bfloat16").grid.group == 16
    symbolic = choose(512, 8192, 8192, specialize=False)
    assert (symbolic.config.tile, symbolic.config.group, symbolic.splits) == ((128, 256), 2, 1)


def test_the_group_clamped_to_m_s_tiles_makes_one_wave_of_128_by_128_tiles():
    """256 x 8192 x 8192 (H200: 0.86 of cuBLAS with split-K, 0.94-0.95 this way): 2 x 64 tiles of
    128 x 128 in groups of M's 2 tiles are 128 slots, one round on 132 SMs, the whole K a tile; in
    the configuration's groups of 16 they would be 1024 slots. The group rounds up to the cluster."""
    small = BY_NAME["128x128_persistent_group_16_cluster_2"]
    assert shape_group(small, 256) == 2 and shape_group(small, 100) == 2 and shape_group(small, 4096) == 16
    assert estimate(small, 256, 8192, 8192, specialize=False) == pytest.approx(
        8 * estimate(small, 256, 8192, 8192), rel=0.01)
    assert choose(256, 8192, 8192).config is small
    assert balanced_grid((256, 8192), small.tile, shape_group(small, 256), 132, small.cluster) == 128


@pytest.mark.parametrize("shape", [(1024, 1024, 16384), (512, 512, 32768)])
def test_few_tiles_with_a_long_k_split_k(shape):
    m, n, k = shape
    choice = choose(m, n, k)
    assert choice.config.split_k and choice.splits > 1
    bm, bn = choice.config.tile
    tiles = -(-m // bm) * -(-n // bn)
    assert tiles < 132 <= 2 * tiles * choice.splits  # the splits fill the SMs (to within a factor of two)
    assert choice.seconds < min(estimate(c, m, n, k) for c in CONFIGS if not c.split_k)


def test_few_rows_take_64_row_tiles_in_clusters_rather_than_split_k():
    """128 x 8192 x 8192: 2 x 64 tiles of 64 x 128 are one round on 132 SMs with the whole K a
    tile and no partials (H200: 1.0 of cuBLAS, where split-K's partials ran 0.91)."""
    choice = choose(128, 8192, 8192)
    assert choice.config is BY_NAME["64x128_persistent_group_2_cluster_2"] and choice.splits == 1
    assert choice.seconds < min(c.seconds for c in candidates(SPLIT_128, 128, 8192, 8192))


def test_a_swapped_split_k_takes_m_in_one_column_tile_and_the_operands_majors_swapped():
    """64 x 16 swapped split-K computes D^T = B^T A^T: the kernel's M is N, its N is M (at most 16);
    an N-major B is its A read MN-major, so MN-major's stride limit applies to N's splits."""
    swapped = BY_NAME["64x16_split_k_swapped"]
    assert admits(swapped, 16, 4096, 4096, 2) and not admits(swapped, 17, 4096, 4096, 2)
    assert not admits(swapped, 16, 2**19, 2**22, 2, b_major="MN") and admits(swapped, 16, 2**19, 2**22, 2)
    params = config_params(swapped, "K", "MN", "bfloat16")
    assert (params.a.major, params.b.major) == ("MN", "K")
    with pytest.raises(tp.ScheduleError, match="compiled at a shape only"):
        config_fusions(swapped, "K", "K", "bfloat16")
    with pytest.raises(tp.InputError, match="compiled at each shape only"):
        Matmul(config=swapped, specialize=False)
    with pytest.raises(ValueError, match="swap_ab is a two-kernel split-K"):
        MatmulConfig(name="x", tile=(64, 16), stages=4, prefetch=2, swap_ab=True)


def test_split_counts_follow_the_kernels_assumptions():
    assert admits(SPLIT_128, 1024, 1024, 16384, 4)
    assert not admits(SPLIT_128, 1024, 1024, 16384, 3)  # 16384 / 3 is no multiple of 8
    assert not admits(SPLIT_128, 1024, 1024, 1000, 2)  # 500 columns: rows of 1000 bytes, no multiple of 16
    assert not admits(SPLIT_128, 1024, 2**19, 2**22, 2, b_major="MN")  # N-major split's stride reaches 2^40
    assert admits(SPLIT_128, 1024, 2**19, 2**22, 2, b_major="K")
    assert not admits(WIDE, 1024, 1024, 16384, 2)
    assert [c.splits for c in candidates(SPLIT_128, 64, 64, 1536)] == [2, 3, 4, 6]  # splits of 4 K tiles at least
    assert candidates(SPLIT_128, 64, 64, 256) == []


def test_the_wave_quantization_counts_rounds_of_tiles():
    """1024 x 8192 is 8 x 32 = 256 tiles of 128 x 256: 2 rounds on 128 or 132 SMs, 3 on 127 SMs
    (126 blocks in clusters of 2); with groups of 16 the 8 M tiles pad to 16, 512 slots."""
    pairs = BY_NAME["128x256_persistent_group_2_cluster_2"]
    two = estimate(pairs, 1024, 8192, 8192, sms=128)
    assert two == pytest.approx(estimate(pairs, 1024, 8192, 8192, sms=132))
    assert estimate(pairs, 1024, 8192, 8192, sms=127) == pytest.approx(1.5 * two)
    assert estimate(WIDE, 1024, 8192, 8192, sms=128, specialize=False) == pytest.approx(2 * two)
    assert estimate(WIDE, 1024, 8192, 8192, sms=128) == pytest.approx(two)  # groups of M's 8 tiles
    assert choose(1024, 8192, 8192, specialize=False).config is pairs


def test_configurations_check_their_fields():
    with pytest.raises(ValueError, match="split_k runs one block a tile"):
        MatmulConfig(name="x", tile=(128, 128), stages=4, prefetch=2, split_k=True)
    with pytest.raises(ValueError, match="multiple of the cluster"):
        MatmulConfig(name="x", tile=(128, 128), stages=4, prefetch=2, cluster=2, group=3)


def test_decode_shapes_take_the_64_row_tile_or_split_k():
    """M <= 64 fills at most 64 rows of a tile: the 64 x 256 tile (one consumer warpgroup) where N
    has tiles enough for the SMs, else K's splits multiply the blocks."""
    assert choose(64, 28672, 4096).config is BY_NAME["64x256_persistent"]
    decode = choose(16, 4096, 4096)
    assert decode.config is BY_NAME["64x16_split_k_swapped"] and decode.splits >= 2
    assert choose(16, 4096, 4096, specialize=False).config is BY_NAME["64x256_split_k"]  # swapped: at a shape only
    assert choose(17, 4096, 4096).config is BY_NAME["64x256_split_k"]  # M past the swapped kernel's 16 columns
    assert BY_NAME["64x256_persistent"].registers == (40, 256)
    assert choose(65, 4096, 4096).config.tile[0] == 128  # past 64 rows the 128-row tiles compete again
    # one M tile: a cluster of 2 along M would pair it with an empty one (H200: 0.80 of cuBLAS, split-K 0.90)
    assert choose(16, 14336, 4096).config is BY_NAME["64x256_split_k"]
    only_wide = choose(16, 4096, 4096, configs=(WIDE,))  # no 64-row tile among them: the 128-row ones run
    assert only_wide.config is WIDE


def test_the_balanced_grid_takes_the_fewest_steps_with_the_fewest_blocks():
    assert balanced_grid((8192, 8192), (128, 256), 16, cluster=2) == 128  # 2048 tiles: 16 steps of 128, not 132
    assert balanced_grid((1024, 768), (128, 256), 8) == 24  # 24 tiles: one step each
    assert balanced_grid((128 * 8 * 3, 256 * 7), (128, 256), 8, cluster=2) == 84  # 168 tiles: 2 steps, 84 blocks
    assert balanced_grid((128 * 8, 256 * 17), (128, 256), 8, cluster=2) == 68  # 136 tiles: 2 steps, 68 blocks
    assert config_params(WIDE, "K", "K", "bfloat16", shape=(8192, 8192, 8192)).grid.persistent == 128
    assert config_params(WIDE, "K", "K", "bfloat16").grid.persistent == 132  # the shape class: every SM


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.name)
def test_every_configuration_verifies_and_compiles_at_a_shape(config):
    """At 1000 x 2048 x 4096 (M no tile divides, K in 4 splits of 1024): the kernels recipes.matmul
    runs, every extent a number."""
    m = config.tile[1] - 4 if config.swap_ab else 1000  # a swapped split-K: M in one of its column tiles
    shape, splits = (m, 2048, 4096), (4 if config.split_k else 1)
    fusions = config_fusions(config, "K", "K", "bfloat16", shape=shape, splits=splits)
    assert len(fusions) == (2 if config.split_k and not config.grid_reduce else 1)  # one-kernel split-K: one
    kernels = []
    for fusion in fusions:
        report = tp.verify(fusion, "sm_90a")
        assert report.ok, report.codes
        kernels.append(tp.compile(fusion, "sm_90a"))
        assert not kernels[-1].fusion.symbols and "__global__" in kernels[-1].cuda_source
    assert "wgmma.mma_async" in kernels[0].cuda_source
    grid = kernels[0].launch_params_for().grid
    if config.swap_ab:  # the kernel's rows are N's
        assert grid == (2048 // config.tile[0], 1, splits)
    elif config.split_k:
        assert grid == (-(-1000 // config.tile[0]), 2048 // config.tile[1], splits)
    else:
        group = shape_group(config, 1000)
        assert grid == (balanced_grid((1000, 2048), config.tile, group, cluster=config.cluster), 1, 1)


def test_the_entry_compiles_per_shape_and_keeps_the_least_recently_used(monkeypatch):
    compiled = []
    monkeypatch.setattr(tp, "compile", lambda fusion, target: compiled.append(fusion) or fusion)
    entry = Matmul(cache_size=2)
    shapes = [(256, 512, 1024), (512, 512, 1024), (256, 512, 1024), (1024, 512, 1024), (512, 512, 1024)]
    for shape in shapes:
        entry.kernels(WIDE, "K", "K", shape=shape)
    assert len(compiled) == 4  # the third call hit; the fifth came after 512 x 512 x 1024 was dropped
    assert [str(f.inputs[0].get_logical_domain()[0]) for f in compiled[:2]] == ["i0{256}", "i0{512}"]
    entry.kernels(SPLIT_128, "K", "K", shape=(256, 512, 1024), splits=2)
    entry.kernels(SPLIT_128, "K", "K", shape=(256, 512, 1024), splits=4)  # S and KS differ: a kernel each
    assert len(compiled) == 4 + 4
    symbolic = Matmul(specialize=False)
    assert set(symbolic.kernels(WIDE, "K", "K")[0].symbols) == {"M", "N", "K"}
    assert "specialize=False" in repr(symbolic)
    with pytest.raises(tp.InputError, match="cache_size must be a positive int"):
        Matmul(cache_size=0)


VERIFIED: dict[str, bool] = {}  # fingerprint -> verified: two fusions of one fingerprint verify alike


@pytest.mark.parametrize("a_major,b_major", MAJORS)
@pytest.mark.parametrize("config", [c for c in CONFIGS if c is not WIDE and c.tile == (128, 128)],
                         ids=lambda c: c.name)
def test_the_other_configurations_verify_in_every_major(config, a_major, b_major):
    """Split-K's sum kernel reads the partials alone: one schedule (one fingerprint) in every major,
    verified once (VERIFIED)."""
    for fusion in config_fusions(config, a_major, b_major, "float32", splits=4 if config.grid_reduce else 1):
        key = fingerprint(fusion, "sm_90a")
        if key not in VERIFIED:
            VERIFIED[key] = tp.verify(fusion, "sm_90a").ok
        assert VERIFIED[key]


def test_split_k_partials_launch_a_block_per_split_and_tile():
    kernel = tp.compile(split_k_partials(SplitKParams(tile=HopperTile(m=128, n=256))), "sm_90a")
    assert kernel.launch_params_for(S=4, M=1024, N=1024, KS=4096).grid == (8, 4, 4)


def test_a_split_k_in_one_kernel_without_rfactor_is_refused_its_grid_reduction_of_accumulators():
    """Binding an outer part of K to blockIdx.z makes the MmaOp itself a grid reduction, which
    tileproof does not combine (REDUCTION-GRID: an MmaOp's accumulators are combined within a block
    only; and the kernel is warp-specialized): split_k.py's split_k_grid rfactors the MmaOp and
    reduces the sum of its partials over BIDz instead (tests/recipes/test_split_k_grid.py)."""
    fusion = hopper_gemm("M", "N", "K", HopperGemmParams())
    d = fusion.tensor("T2")  # the accumulators [Mo, No, Ko, ...]
    with pytest.raises(tp.ScheduleError, match="inside the loops its producer"):
        d.split(2, 4, inner_split=False)  # the operands are inlined into T2 past its K axis
    for t in fusion.tensors:
        t.inline_at(0)
    d.split(2, 4, inner_split=False)  # [Mo, No, 4, Ko / 4, ...]
    d.axis(2).parallelize(tp.ParallelType.BIDz)
    tp.inline_most(fusion)
    report = tp.verify(fusion, "sm_90a")
    assert "REDUCTION-GRID" in report.codes
    assert any(e.message.startswith("T2 is") and "BIDz" in e.message for e in report.errors if e.code == "REDUCTION-GRID")




def operands(a_major, b_major, m=16, n=24, k=64):
    a = torch.randn(m, k) if a_major == "K" else torch.randn(k, m).t()
    b = torch.randn(k, n) if b_major == "MN" else torch.randn(n, k).t()
    return a.bfloat16(), b.bfloat16()


@needs_torch
@pytest.mark.parametrize("a_major,b_major", MAJORS)
def test_split_k_views_hold_k_slices_and_bind(a_major, b_major, monkeypatch):
    a, b = operands(a_major, b_major)
    a4, b4 = split_k_operands(a, b, 4)
    assert a4.data_ptr() == a.data_ptr() and b4.data_ptr() == b.data_ptr()  # views, no copy
    for s in range(4):
        assert torch.equal(a4[s, :, 0], a[:, 16 * s:16 * (s + 1)])
        assert torch.equal(b4[s, 0], b[16 * s:16 * (s + 1)].t())
    partials, _ = Matmul().kernels(SPLIT_128, a_major, b_major)
    monkeypatch.setattr(binding, "check_device", lambda g, info, position, device_id: 0)  # CPU tensors stand in
    bound = binding.bind(partials.ir.globals, [a4, b4], None, {}, list(partials.fusion.symbols), None)
    assert {s: bound.env[s] for s in ("S", "M", "N", "KS")} == {"S": 4, "M": 16, "N": 24, "KS": 16}


@needs_torch
def test_a_forced_configuration_runs_every_shape_with_its_splits():
    entry = Matmul(config="128x128_split_k")
    assert entry.choice("K", "K", 1024, 1024, 16384).config is SPLIT_128
    assert Matmul().choice("K", "K", 8192, 8192, 8192).config is WIDE
    with pytest.raises(tp.InputError, match="128x128_split_k does not take M = 64, N = 64, K = 200"):
        entry.choice("K", "K", 64, 64, 200)
    with pytest.raises(tp.InputError, match="config must be None"):
        matmul(*operands("K", "MN"), config="huge")


def test_a_configuration_of_ones_own_is_chosen_and_compiled_as_the_named_ones():
    """Matmul(config=MatmulConfig(...)) takes a configuration not in CONFIGS (refused before with a
    message about gelu when no op was fused); one that cannot fuse the ops is refused by name."""
    mine = MatmulConfig(name="mine_128x64_split_k", tile=(128, 64), stages=6, prefetch=4, persistent=False,
                        split_k=True)
    entry = Matmul(config=mine)
    choice = entry.choice("K", "K", 16, 4096, 4096)
    assert choice.config is mine and choice.splits >= 2
    partials, total = entry.kernels(mine, "K", "K", shape=(16, 4096, 4096), splits=choice.splits)
    assert "wgmma" in partials.cuda_source and total.fusion.outputs
    wide = MatmulConfig(name="mine_128x256", tile=(128, 256), stages=4, prefetch=2)
    with pytest.raises(tp.InputError, match="mine_128x256 does not fuse"):
        Matmul(config=wide, epilogue=tp.recipes.EpilogueOps(activation="gelu"))
    assert Matmul(config=wide, epilogue=tp.recipes.EpilogueOps(activation="relu")).config is wide
