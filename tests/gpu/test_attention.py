"""Attention's building blocks on the GPU (marker `gpu`; skipped without PyTorch or a CUDA device):
recipes/attention.py one_tile_attention, softmax(Q K^T scale) V over one key tile, against PyTorch
in float64 at several tile shapes and block counts. The row max and sum reduce wgmma's C fragment
over a row's four threads (TIDx{4}) by shuffles, and P is the second wgmma's A operand in the same
registers: a thread or register off by one permutes rows or columns, which random inputs show.
The output is poisoned with NaN first, so an element nobody stores fails too.
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402
from tileproof.recipes.attention import AttentionTile, attention_views, one_tile_attention  # noqa: E402

pytestmark = pytest.mark.gpu
TILES = [AttentionTile(rows=64), AttentionTile(rows=192, keys=128, value_dim=128),
         AttentionTile(rows=128, keys=256, value_dim=64), AttentionTile(rows=64, keys=16, value_dim=256, scale=0.5),
         AttentionTile(rows=320, keys=48, value_dim=192),
         AttentionTile(rows=128, keys=128, head_dim=128, value_dim=128, batch=6, group=2),  # 3 x 2 kv heads, GQA 2
         AttentionTile(rows=64, keys=64, head_dim=128, value_dim=64, batch=2, group=4)]


@pytest.mark.parametrize("tile", TILES, ids=lambda t: f"z{t.batch}_g{t.group}_m{t.rows}_n{t.keys}_d{t.head_dim}_dv{t.value_dim}")
def test_one_tile_attention_matches_torch(tile):
    kernel = tp.compile(one_tile_attention(tile), "sm_90a")
    gen = torch.Generator().manual_seed(tile.rows + tile.keys + tile.value_dim + tile.batch)
    b, hkv = (2, tile.batch // 2) if tile.batch % 2 == 0 else (1, tile.batch)
    hq = hkv * tile.group
    q, k, v = (torch.randn(shape, generator=gen).to(torch.bfloat16).cuda() for shape in
               ((b, hq, tile.rows, tile.head_dim), (b, hkv, tile.keys, tile.head_dim),
                (b, hkv, tile.keys, tile.value_dim)))
    out = torch.full((b, hq, tile.rows, tile.value_dim), float("nan"), dtype=torch.bfloat16, device="cuda")
    (got,) = kernel.run(*attention_views(q, k, v), out=[out.view(tile.batch, tile.group, tile.rows, tile.value_dim)])
    assert got.data_ptr() == out.data_ptr()
    torch.cuda.synchronize()
    kk, vv = (t.double().repeat_interleave(tile.group, dim=1) for t in (k, v))  # each query head's kv head
    s = q.double() @ kk.transpose(-1, -2) * tile.softmax_scale
    want = torch.softmax(s, dim=-1) @ vv
    # P is rounded to bfloat16 before its product with V (as FlashAttention does), the output too
    torch.testing.assert_close(out.double(), want, rtol=2e-2, atol=2e-2)
    p = torch.exp2((s - s.amax(dim=-1, keepdim=True)) * math.log2(math.e))
    exact = (p.to(torch.bfloat16).double() @ vv) / p.sum(dim=-1, keepdim=True)
    torch.testing.assert_close(out.double(), exact.to(torch.bfloat16).double(), rtol=1e-2, atol=4e-3)
