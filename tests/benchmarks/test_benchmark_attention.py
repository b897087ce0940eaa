"""benchmarks/attention.py's parts that need no GPU: the FLOP count, the table, that every short
shape is a one-key-tile attention tileproof verifies, and that the online configurations verify at
a long one."""

from __future__ import annotations

import attention as B  # benchmarks/attention.py (benchmarks/ is on pytest's pythonpath)

import tileproof as tp
from tileproof.recipes.attention import AttentionTile, one_tile_attention


def test_flops_count_both_products():
    assert B.tflops((1, 1, 1, 1000, 100), 1.0) == round(4 * 1000 * 1000 * 100 / 1e-3 / 1e12, 1)


def test_the_table_shows_a_skipped_or_failed_entry_by_its_reason():
    results = {"shapes": {"4x32(32)x4096x128": {"cudnn": {"tflops": 600.0}, "flash": {"error": "RuntimeError: x"},
                                                 "tileproof": {"skipped": "keys beyond one tile"}}}}
    row = B.table(results).splitlines()[-1]
    assert "600.0" in row and "RuntimeError" in row and "keys beyond one tile" in row


def test_the_short_shapes_verify_as_one_key_tile():
    short = [s for s in B.SHAPES if s[3] <= 256 and s[3] % 64 == 0]  # the one-tile form's sizes (250: no)
    assert short and len(short) < len(B.SHAPES)
    b, hq, hkv, s, d = short[-1]  # grouped-query attention, head dim 128
    tile = AttentionTile(rows=s, keys=s, head_dim=d, value_dim=d, batch=b * hkv, group=hq // hkv)
    assert tp.verify(one_tile_attention(tile)).ok


def test_every_online_configuration_verifies_at_a_long_shape():
    """Each of CONFIGS' online configurations (key tile, stages, producer, warpgroups, registers) at
    the issue's S = 4096, head dims 64 and 128: accepted at one at least, and where refused, for the
    shared memory its K and V stages take (the benchmark records such a refusal and times the rest)."""
    from tileproof.recipes.attention import attention

    for name, key_tile, options in B.CONFIGS:
        if key_tile is None:
            continue
        codes = []
        for d in (128, 64):  # the smaller head dim only where the larger does not fit
            tile = AttentionTile(rows=4096, keys=4096, head_dim=d, value_dim=d, batch=128, key_tile=key_tile)
            codes.append(tp.verify(attention(tile, **B.recipe_options(options, tile.batch * tile.group))).codes)
            if not codes[-1]:
                break
        assert codes[-1] == [] and all(c in ([], ["SMEM-CAPACITY"]) for c in codes), (name, codes)


def test_attention_tiles_refuse_what_the_recipe_cannot_run():
    import pytest

    for bad in (dict(rows=0), dict(rows=128, keys=0, key_tile=64), dict(rows=64, key_tile=24),
                dict(rows=64, keys=300), dict(rows=64, scale=float("inf")), dict(rows=64, scale=float("nan"))):
        with pytest.raises(tp.ScheduleError, match="AttentionTile"):
            AttentionTile(**bad)


def test_the_per_head_plan_forces_counts_up_to_one_block_a_row_tile_of_real_configurations():
    import attention_per_head as P  # benchmarks/attention_per_head.py

    from tileproof.recipes.sdpa import CONFIGS

    for (b, h, s, d), config, counts in P.PLAN:
        c = CONFIGS[config]
        assert c.per_head in counts and max(counts) == -(-s // (64 * c.warpgroups))  # the configured, one a tile
    results = {"shapes": {"1x16x16384x64": {"config": "c", "cudnn": {"tflops": 400.0}, "picked": 86,
                                            "per_head_86": {"tflops": 404.0, "vs_cudnn": 1.01}}}}
    assert "86: 404.0 (1.01)" in P.table(results).splitlines()[-1]
