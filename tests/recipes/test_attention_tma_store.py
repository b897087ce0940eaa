"""attention(tma_store=True): O written through shared memory, stmatrix from O's fragment into the TMA
store's 128-byte-swizzled boxes (one set a warpgroup), then one TMA store a box. Verified and compiled
here; tests/gpu/test_attention.py runs it against the direct stores bit for bit."""

from __future__ import annotations

import re

import pytest

import tileproof as tp
from tileproof.recipes.attention import AttentionTile, attention

WS = dict(warpgroups=2, stages=2, producer=True, registers=(24, 240), in_place=True, overlap=True, q_stages=2)


@pytest.mark.parametrize("tile, options", [
    (AttentionTile(rows=256, keys=500, key_tile=128, head_dim=128, value_dim=128, batch=3, group=2),
     {"persistent": 4}),
    (AttentionTile(rows=320, keys=320, key_tile=128, head_dim=64, value_dim=64, batch=2, causal=True),
     {"persistent": 4}),
    (AttentionTile(rows=1024, keys=1024, key_tile=128, head_dim=128, value_dim=128, batch=2),
     {"persistent": 8, "ping_pong": True}),
], ids=["persistent", "causal_per_head", "ping_pong"])
def test_o_through_shared_memory_verifies_and_stores_a_box_a_warpgroup(tile, options):
    fusion = attention(tile, **WS, **options, tma_store=True)
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, report.codes
    kernel = tp.compile(fusion, "sm_90a")
    src = kernel.cuda_source
    assert "stmatrix.sync.aligned.m8n8.x4" in src
    stores = re.findall(r"tp_bulk_store_3d\(&tmap_T\d+, tp_smem\((T\d+)\) \+ (.*);", src)
    assert stores, "O leaves by TMA store"
    for staged, address in stores:
        assert "threadIdx.z * " in address, "each warpgroup stores its own boxes"
        assert f"tp_bulk_store_wait();  // {staged}'s TMA store of the previous iteration has read it" in src
    assert not kernel.resources.spills


def test_a_row_tail_is_refused_with_the_warp_that_would_skip_the_stmatrix():
    """stmatrix is warp-collective: the last row tile's rows past M would leave lanes out (recipes.sdpa
    offers tma_store only where the rows are whole 64-row tiles)."""
    tile = AttentionTile(rows=100, keys=120, key_tile=128, head_dim=128, value_dim=128)
    report = tp.verify(attention(tile, tma_store=True), "sm_90a")
    assert not report.ok and "LDSM-THREAD-ROWS" in report.codes
    rows = next(d for d in report.errors if d.code == "LDSM-THREAD-ROWS")
    assert rows.counterexample["blockIdx.x"] == 1 and rows.counterexample["lane"] == 0
    assert attention(tile).name and tp.verify(attention(tile), "sm_90a").ok  # the direct stores take the tail


def test_head_dim_256_does_not_fit_o_beside_q_and_two_key_value_stages():
    tile = AttentionTile(rows=256, keys=300, key_tile=64, head_dim=256, value_dim=256)
    options = dict(warpgroups=2, stages=2, producer=True, registers=(24, 240), in_place=True)
    assert tp.verify(attention(tile, **options), "sm_90a").ok
    report = tp.verify(attention(tile, **options, tma_store=True), "sm_90a")
    assert "SMEM-CAPACITY" in report.codes


def test_tma_store_must_be_a_bool():
    tile = AttentionTile(rows=128, keys=128, key_tile=128, head_dim=64, value_dim=64)
    with pytest.raises(tp.ScheduleError, match="tma_store must be True or False"):
        attention(tile, tma_store=1)
