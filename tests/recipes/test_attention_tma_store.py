"""attention(tma_store=True): O written through shared memory, stmatrix from O's fragment into the TMA
store's 128-byte-swizzled boxes (one set a warpgroup), then one TMA store a box. Verified and compiled
here; tests/gpu/test_attention.py runs it against the direct stores bit for bit."""

from __future__ import annotations

import re

import pytest

import tileproof as tp
from tileproof.execution.clipped_holes import clipped
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


@pytest.mark.parametrize("batch, group", [(2, 2), (1, 2), (1, 1)], ids=["heads", "batch_of_one", "one_head"])
def test_a_row_tail_runs_the_stmatrix_at_its_holes_and_the_store_clips_them(batch, group):
    """stmatrix is warp-collective: the last row tile's lanes past M cannot be predicated off. The cast
    and the staged tile reach memory only through the TMA store, which clips rows past M, so they run
    at their holes (execution/clipped_holes.py), a batch or a head of one (a broadcast axis that is a
    loop of its own running once) too."""
    tile = AttentionTile(rows=700, keys=900, key_tile=128, head_dim=128, value_dim=128, batch=batch, group=group)
    fusion = attention(tile, **WS, persistent=6, tma_store=True)
    staged = next(t for t in fusion.tensors if t.memory_type is tp.MemoryType.Shared
                  and t.definition.op_type is tp.LoadStoreOpType.StMatrix)
    assert staged.name in clipped(fusion)
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, report.codes
    src = tp.compile(fusion, "sm_90a").cuda_source
    stmatrix = src.index("stmatrix.sync.aligned")
    assert "if (" not in src[src.rindex("\n", 0, src.rindex("{", 0, stmatrix)):stmatrix], "no hole predicate"


def test_one_consumer_warpgroup_beside_a_producer_issues_the_stmatrix_unpredicated():
    """One consumer index on TIDz: the staged tile binds no TIDz, so its statement's single writer is
    threadIdx.z == 0, which every consumer thread satisfies by its role (execution/warp_roles.py
    role_implied); the warp-collective stmatrix needs no predicate (LOWERING-SUPPORTED refused it)."""
    tile = AttentionTile(rows=200, keys=256, key_tile=64, head_dim=128, value_dim=128, batch=2)
    fusion = attention(tile, warpgroups=1, stages=2, producer=True, in_place=True, overlap=True, tma_store=True)
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, report.codes
    src = tp.compile(fusion, "sm_90a").cuda_source
    stmatrix = src.index("stmatrix.sync.aligned")
    assert "threadIdx.z == 0" not in src[src.rindex("StMatrix", 0, stmatrix):stmatrix]


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
