"""attention(persistent=B): a grid of B blocks, block b computing row tiles b, b + B, .. of every head
(recipes/attention.py _persistent_tiles). Verified and compiled here; the GPU runs compare it with
the one-block-a-tile kernel bit for bit (tests/gpu/test_attention.py)."""

from __future__ import annotations

import re
import time

import pytest

import tileproof as tp
from tileproof.recipes.attention import AttentionTile, attention

WS = dict(warpgroups=2, stages=3, producer=True, registers=(24, 240), in_place=True, overlap=True)


@pytest.mark.parametrize("tile, blocks", [
    (AttentionTile(rows=4096, keys=4096, key_tile=128, head_dim=128, value_dim=128, batch=128), 128),
    (AttentionTile(rows=333, keys=777, key_tile=128, head_dim=128, value_dim=128), 2),  # a batch and group of one
    (AttentionTile(rows=256, keys=512, key_tile=128, head_dim=128, value_dim=128, batch=2, group=2), 3),
], ids=["benchmark", "one_head", "grouped"])
def test_a_persistent_grid_verifies_and_loops_over_its_tiles(tile, blocks):
    start = time.perf_counter()
    fusion = attention(tile, **WS, persistent=blocks)
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, report.codes
    assert time.perf_counter() - start < 5
    kernel = tp.compile(fusion, "sm_90a")
    assert kernel.launch_params.grid == (blocks, 1, 1)
    tiles = tile.batch * tile.group * -(-tile.rows // 128)
    loop = rf"for \(unsigned (i\d+) = 0; \1 < {-(-tiles // blocks)}U; \+\+\1\)"  # each block's loop over its tiles
    assert re.search(loop, kernel.cuda_source)
    assert not kernel.resources.spills


@pytest.mark.parametrize("value, match", [(0, "persistent must be a number of blocks >= 1"),
                                          (True, "persistent must be a number of blocks"),
                                          (2.0, "persistent must be a number of blocks")])
def test_a_bad_block_count_is_refused(value, match):
    tile = AttentionTile(rows=256, keys=512, key_tile=128, head_dim=64, value_dim=64)
    with pytest.raises(tp.ScheduleError, match=match):
        attention(tile, **WS, persistent=value)


def test_a_causal_tile_is_refused_with_the_reason():
    tile = AttentionTile(rows=256, keys=512, key_tile=128, head_dim=64, value_dim=64, causal=True)
    with pytest.raises(tp.ScheduleError, match="persistent with a causal tile"):
        attention(tile, **WS, persistent=4)


def test_a_masked_persistent_tile_with_the_lse_is_decided_fast():
    """Attention fuzz, seed 65 case 113 (a Mask input, the lse, 3 blocks over 9 tiles): ONLINE-RESCALE's
    ownership query (an existential over the writer's loop and launch points) ran out of time; the
    writer's launch indices are now the reader's and its few loop points tried one by one."""
    tile = AttentionTile(rows=128, keys=448, head_dim=128, value_dim=128, batch=3, group=3, key_tile=128,
                         masked=True)
    start = time.perf_counter()
    report = tp.verify(attention(tile, stages=2, warpgroups=1, lse=True, in_place=True, persistent=3), "sm_90a")
    assert report.ok, report.codes
    assert time.perf_counter() - start < 5
