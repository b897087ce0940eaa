"""The Hopper GEMM recipe as an autotuning recipe (recipes/gemm_tuning.py), without a GPU: its
default configuration is matmul.py's schedule, its space covers tile, stages, cluster, persistence
and grid group, a configuration the recipe refuses is an invalid candidate, and a small sweep
proves, rejects (with the rules' codes) and compiles the proved ones only."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.model.fingerprint import fingerprint
from tileproof.recipes import HopperGemmTuning
from tileproof.recipes.matmul import shape_class_fusion
from tileproof.tuning.jobs import INVALID, PROVED, REJECTED

pytestmark = pytest.mark.usefixtures("private_cache")


@pytest.mark.parametrize("a_major,b_major,out_dtype", [("K", "K", "bfloat16"), ("MN", "K", "float32")])
def test_the_default_configuration_is_the_matmul_schedule(a_major, b_major, out_dtype):
    recipe = HopperGemmTuning("M", "N", "K", a_major=a_major, b_major=b_major, out_dtype=out_dtype)
    assert fingerprint(recipe.build(), "sm_90a") == fingerprint(shape_class_fusion(a_major, b_major, out_dtype), "sm_90a")
    assert fingerprint(recipe.build(stages=3), "sm_90a") != fingerprint(recipe.build(), "sm_90a")


def test_the_default_space_covers_tiles_stages_clusters_persistence_and_groups():
    space = HopperGemmTuning(4096, 4096, 4096).space
    assert set(space) == {"tile", "stages", "cluster", "persistent", "group"}
    assert len(tp.tuning.space.expand(space)) == 108
    params = HopperGemmTuning(4096, 4096, 4096).params(tile=(256, 128), stages=5, cluster=1, persistent=False,
                                                       group=8)
    assert (params.tile.m, params.tile.n, params.pipeline.stages, params.pipeline.prefetch) == (256, 128, 5, 3)
    assert (params.cluster.size, params.grid.persistent, params.grid.group) == (1, None, 8)
    with pytest.raises(tp.ScheduleError, match="a_major must be 'K' or 'MN'"):
        HopperGemmTuning(64, 64, 64, a_major="M")


def test_a_small_sweep_proves_rejects_and_compiles_the_proved_only():
    recipe = HopperGemmTuning(1024, 1024, 1024)
    space = {"tile": [(128, 128), (256, 128), (100, 128)], "stages": [4], "cluster": [1], "persistent": [False],
             "group": [1]}
    result = tp.autotune(recipe, space, time=False, workers=2)
    assert [v.status for v in result.candidates] == [PROVED, REJECTED, INVALID]
    assert result.candidates[1].codes == ("WS-REGISTERS",)  # four consumer warpgroups at 232 registers: past the register file
    assert "HopperTile: m must be" in result.candidates[2].message
    assert list(result.timings) == [0] and result.timings[0].compiled
    assert "HopperGemmTuning(1024, 1024, 1024" in tp.tuning.sweep.builder_name(recipe.build)
