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
    start = time.process_time()
    fusion = attention(tile, **WS, persistent=blocks)
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, report.codes
    assert time.process_time() - start < 5
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


def test_a_causal_block_count_must_be_a_multiple_of_the_heads():
    tile = AttentionTile(rows=256, keys=512, key_tile=128, head_dim=64, value_dim=64, batch=3, causal=True)
    with pytest.raises(tp.ScheduleError, match="persistent must be a multiple of the 3 heads"):
        attention(tile, **WS, persistent=4)


@pytest.mark.parametrize("per_head", [1, 2])
def test_a_causal_persistent_grid_counts_each_row_tile_s_key_tiles(per_head):
    """A causal tile's persistent grid: each head's row tiles on per_head blocks (blockIdx.x; the
    heads on y and z), block x computing tiles x, x + per_head, .. in a serial loop; the skip counts
    read that loop's index (TensorView.loop_index), in the producer's loop and the consumers' alike,
    and ONLINE-SKIP proves them for every tile."""
    tile = AttentionTile(rows=1024, keys=1024, key_tile=128, head_dim=128, value_dim=128, batch=8, causal=True)
    start = time.process_time()
    fusion = attention(tile, **WS, persistent=8 * per_head)
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, report.codes
    assert time.process_time() - start < 5
    kernel = tp.compile(fusion, "sm_90a")
    assert kernel.launch_params.grid == (per_head, 1, 8)
    tiles = re.findall(r"for \(unsigned (i\d+) = 0; \1 < (\d+)U; \+\+\1\)", kernel.cuda_source)
    loop = next(i for i, n in tiles if int(n) == 1024 // 128 // per_head)  # the row tiles of a block
    counts = [line for line in kernel.cuda_source.splitlines() if "127U) / 128U) + 1U), 8U)" in line]
    assert all(loop in line and "blockIdx.x" in line for line in counts)
    assert sum(line.lstrip().startswith("for (") for line in counts) == 2  # the producer's loop, the consumers'
    assert not kernel.resources.spills


def test_a_skip_count_short_by_a_tile_of_the_row_tile_loop_is_refused():
    """ONLINE-SKIP reads the row-tile loop's index in the count: short by a key tile from row tile 1
    on, refused with a counterexample naming the iteration."""
    from tileproof.recipes import attention as recipe

    tile = AttentionTile(rows=512, keys=512, key_tile=128, head_dim=64, value_dim=64, batch=2, causal=True)
    fusion = attention(tile, **WS, persistent=4, skip_masked_tiles=False)
    m = next(x for x in fusion.tensors if getattr(x, "online", None) is not None)
    keep = next(x for x in fusion.tensors if x.definition is not None and x.definition.name == "le")
    row_tile = m.loop_index(2) * 2
    m.skip_masked(keep, lambda bx, by, bz: ((row_tile + bx) * 128 + 127) // 256 + 1)  # row tile 1: one short
    report = tp.verify(fusion, "sm_90a", rules=["ONLINE-SKIP"])
    assert report.codes == ["ONLINE-SKIP"]
    assert "skips iteration" in report.errors[0].message and report.errors[0].counterexample
    assert recipe.ROWS * 2 == 128  # two warpgroups of 64 rows: a row tile of 128


def test_a_skip_count_reading_a_thread_index_is_refused():
    tile = AttentionTile(rows=512, keys=512, key_tile=128, head_dim=64, value_dim=64, batch=2, causal=True)
    fusion = attention(tile, **WS, persistent=4, skip_masked_tiles=False)
    m = next(x for x in fusion.tensors if getattr(x, "online", None) is not None)
    keep = next(x for x in fusion.tensors if x.definition is not None and x.definition.name == "le")
    tz = m.loop_index(4)  # the warpgroup axis, on TIDz
    m.skip_masked(keep, lambda bx, by, bz: tz + 8)
    report = tp.verify(fusion, "sm_90a", rules=["ONLINE-SKIP"])
    assert report.codes == ["ONLINE-SKIP"] and "a thread index (threadIdx.z)" in report.errors[0].message


def test_loop_index_checks_its_axis():
    tile = AttentionTile(rows=512, keys=512, key_tile=128, head_dim=64, value_dim=64, causal=True)
    m = next(x for x in attention(tile, **WS).tensors if getattr(x, "online", None) is not None)
    with pytest.raises(tp.ScheduleError, match="loop_index: axis must be a position"):
        m.loop_index(99)


def test_a_masked_persistent_tile_with_the_lse_is_decided_fast():
    """Attention fuzz, seed 65 case 113 (a Mask input, the lse, 3 blocks over 9 tiles): ONLINE-RESCALE's
    ownership query (an existential over the writer's loop and launch points) ran out of time; the
    writer's launch indices are now the reader's and its few loop points tried one by one."""
    tile = AttentionTile(rows=128, keys=448, head_dim=128, value_dim=128, batch=3, group=3, key_tile=128,
                         masked=True)
    start = time.process_time()
    report = tp.verify(attention(tile, stages=2, warpgroups=1, lse=True, in_place=True, persistent=3), "sm_90a")
    assert report.ok, report.codes
    assert time.process_time() - start < 5
