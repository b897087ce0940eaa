"""tileproof.recipes: the GEMM recipes' parameter dataclasses check their fields at construction
(tp.ScheduleError naming the class and the field), print as the call that builds them, and the
package imports nothing of tileproof but its public API. The schedules the recipes build are
verified through examples/valid/wgmma.py and examples/valid/mma.py (tests/verifier/test_seed_examples.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tileproof as tp
from tileproof import recipes
from tileproof.recipes import (Cluster, CpAsyncPipeline, Epilogue, GridOrder, HopperGemmParams, HopperTile,
                               MmaGemmParams, MmaTile, Operand, TmaPipeline, hopper_gemm, mma_gemm)

RECIPES = Path(recipes.__file__).resolve().parent
WS = tp.WarpSpecialized(tp.ParallelType.TIDy, num_registers=(40, 232))

BAD = [  # (constructor, what the error says)
    (lambda: HopperTile(m=100), "HopperTile: m must be a positive multiple of 64, got 100"),
    (lambda: HopperTile(m=192, warpgroup_rows=128), "HopperTile: m must be a positive multiple of 128, got 192"),
    (lambda: HopperTile(n=264), "HopperTile: n must be a wgmma N"),
    (lambda: HopperTile(n=100), "HopperTile: n must be a positive multiple of 8, got 100"),
    (lambda: HopperTile(m=192, n=200, split_n=True), "HopperTile: n must be a positive multiple of 16, got 200"),
    (lambda: HopperTile(m=192, n=528, split_n=True), "HopperTile: n must be twice a wgmma N (8 to 256) with split_n"),
    (lambda: HopperTile(m=256, warpgroup_rows=128, split_n=True), "HopperTile: warpgroup_rows must be 64 with split_n"),
    (lambda: HopperTile(swizzle=96), "HopperTile: swizzle must be one of 128, 64, 32, got 96"),
    (lambda: HopperTile(split_n=1), "HopperTile: split_n must be True or False, got 1"),
    (lambda: TmaPipeline(stages=0), "TmaPipeline: stages must be an int >= 1, got 0"),
    (lambda: TmaPipeline(stages=True), "TmaPipeline: stages must be an int >= 1, got True"),
    (lambda: TmaPipeline(prefetch=1.5), "TmaPipeline: prefetch must be a int, got 1.5"),
    (lambda: TmaPipeline(warp_specialized=WS), "TmaPipeline: stages must be at least 2 with warp_specialized"),
    (lambda: TmaPipeline(stages=4, warp_specialized=WS, war_mbarriers=True),
     "TmaPipeline: war_mbarriers must be False with warp_specialized"),
    (lambda: TmaPipeline(stages=4, warp_specialized="TIDy"), "TmaPipeline: warp_specialized must be a WarpSpecialized"),
    (lambda: GridOrder(group=0), "GridOrder: group must be an int >= 1, got 0"),
    (lambda: GridOrder(persistent=-1), "GridOrder: persistent must be an int >= 1, got -1"),
    (lambda: GridOrder(patch=(2, 0)), "GridOrder: patch must be None or a pair of ints >= 1"),
    (lambda: GridOrder(patch=(2, 2), persistent=132), "GridOrder: patch must be None on a persistent grid"),
    (lambda: GridOrder(patch=(2, 2), group=8), "GridOrder: group must be 1 with a patch"),
    (lambda: Cluster(size=0), "Cluster: size must be an int >= 1, got 0"),
    (lambda: Cluster(spread=True), "Cluster: spread must be False without a cluster"),
    (lambda: Epilogue(dtype="bfloat16"), "Epilogue: dtype must be a DataType, got 'bfloat16'"),
    (lambda: Epilogue(stmatrix=True),
     "Epilogue: dtype must be a 16-bit type with stmatrix (stmatrix stores 16-bit elements), got tp.float32"),
    (lambda: Epilogue(dtype=tp.bfloat16, by_box=True), "Epilogue: by_box must be False without stmatrix"),
    (lambda: Epilogue(swizzle=16), "Epilogue: swizzle must be one of 128, 64, 32, got 16"),
    (lambda: Operand(major="M"), "Operand: major must be one of 'K', 'MN', got 'M'"),
    (lambda: Operand(layout=None), "Operand: layout must be a function of (tile, swizzle bytes), got None"),
    (lambda: Operand(major="MN", layout=lambda t, s: None), "Operand: layout must be swizzled_box for an MN-major"),
    (lambda: Operand(load="TMA"), "Operand: load must be a LoadStoreOpType, got 'TMA'"),
    (lambda: HopperGemmParams(tile=(128, 256)), "HopperGemmParams: tile must be a HopperTile, got (128, 256)"),
    (lambda: HopperGemmParams(tile=HopperTile(m=192, n=192, split_n=True),
                              epilogue=Epilogue(dtype=tp.bfloat16, stmatrix=True, by_box=True)),
     "HopperGemmParams: epilogue must be an Epilogue without by_box where the warpgroups split the columns"),
    (lambda: MmaTile(row_bytes=32), "MmaTile: row_bytes must be one of 128, 64, got 32"),
    (lambda: MmaTile(warps=(2,)), "MmaTile: warps must be a pair of ints >= 1"),
    (lambda: CpAsyncPipeline(fragment_stages=0), "CpAsyncPipeline: fragment_stages must be an int >= 1, got 0"),
    (lambda: CpAsyncPipeline(ldmatrix="yes"), "CpAsyncPipeline: ldmatrix must be True or False, got 'yes'"),
    (lambda: MmaGemmParams(dtype=tp.int8), "MmaGemmParams: dtype must be one of tp.bfloat16, tp.float16, tp.float32"),
    (lambda: MmaGemmParams(tile=MmaTile(m=80)), "MmaGemmParams: tile must be a tile whose m (80) is a multiple of its "
                                                "warps along it times the Ampere_16_16_16 tile (2 x 16)"),
    (lambda: MmaGemmParams(grid=GridOrder(persistent=132)), "MmaGemmParams: grid must be GridOrder(group=G)"),
    (lambda: MmaGemmParams(epilogue=Epilogue(dtype=tp.bfloat16)), "MmaGemmParams: epilogue must be Epilogue() or"),
    (lambda: MmaGemmParams(dtype=tp.float32, epilogue=Epilogue(dtype=tp.bfloat16, stmatrix=True)),
     "MmaGemmParams: epilogue must be Epilogue() with float32 operands"),
    (lambda: MmaGemmParams(tf32_rounding="truncate"), "MmaGemmParams: tf32_rounding must be a Tf32Rounding or None"),
]


@pytest.mark.parametrize("build, message", BAD, ids=[f"{m.split(' must')[0]}-{i}" for i, (_, m) in enumerate(BAD)])
def test_a_bad_field_is_refused_at_construction_naming_it(build, message):
    with pytest.raises(tp.ScheduleError) as raised:
        build()
    assert str(raised.value).startswith(message), str(raised.value)


def test_the_parameters_are_frozen_and_keyword_only():
    params = HopperGemmParams()
    with pytest.raises(AttributeError):
        params.tile = HopperTile(n=256)
    with pytest.raises(TypeError):
        HopperTile(128, 256)


@pytest.mark.parametrize("params", [
    HopperGemmParams(),
    HopperGemmParams(tile=HopperTile(m=192, n=192, split_n=True), grid=GridOrder(group=8, persistent=132),
                     pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=WS), cluster=Cluster(size=2),
                     epilogue=Epilogue(dtype=tp.bfloat16, stmatrix=True, swizzle=64), b=Operand(major="MN")),
    MmaGemmParams(dtype=tp.float32, tile=MmaTile(m=256, warps=(4, 2)), pipeline=CpAsyncPipeline(fragment_stages=2),
                  grid=GridOrder(group=8), tf32_rounding=tp.Tf32Rounding.Truncate),
])
def test_the_repr_is_the_call_that_builds_the_parameters(params):
    """Only the fields that differ from their defaults, spelled as a schedule file writes them."""
    names = {"tp": tp, **{name: getattr(recipes, name) for name in recipes.__all__}}
    assert eval(repr(params), names) == params  # noqa: S307 - our own repr
    assert "HopperTile(m=128" not in repr(params) and "GridOrder(group=1" not in repr(params)


def test_the_builders_take_their_own_parameters_only():
    with pytest.raises(tp.ScheduleError, match="hopper_gemm: params must be a HopperGemmParams, got MmaGemmParams"):
        hopper_gemm("M", "N", "K", MmaGemmParams())
    with pytest.raises(tp.ScheduleError, match="mma_gemm: params must be a MmaGemmParams, got dict"):
        mma_gemm("M", "N", "K", {"stages": 3})


def test_a_patch_of_tiles_a_block_is_proved():
    """GridOrder(patch=(pm, pn)): each block computes pm x pn tiles one after another (the
    benchmark's one-wave grids), here 2 x 1 tiles of 128 x 256 on 2 x 2 blocks."""
    params = HopperGemmParams(tile=HopperTile(m=128, n=256), grid=GridOrder(patch=(2, 1)),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=WS))
    fusion = hopper_gemm(512, 512, 256, params)
    d = fusion.tensor("T2")
    assert [d.axis(i).parallel_type for i in range(4)] == [tp.ParallelType.BIDx, tp.ParallelType.BIDy,
                                                           tp.ParallelType.Serial, tp.ParallelType.Serial]
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, report.codes


def test_the_recipes_import_only_the_public_api():
    """A recipe is written as a user writes a schedule: `import tileproof as tp`, the standard
    library and its sibling modules, nothing of tileproof's packages."""
    for path in sorted(RECIPES.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    assert alias.name == "tileproof" or not alias.name.startswith("tileproof"), (path.name, alias.name)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    assert node.level == 1, (path.name, node.module)  # a sibling, never the package above
                else:
                    assert not (node.module or "").startswith("tileproof"), (path.name, node.module)
