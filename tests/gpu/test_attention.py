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
from tileproof.recipes.attention import (AttentionTile, attention, attention_views, causal_mask,  # noqa: E402
                                         one_tile_attention)

pytestmark = pytest.mark.gpu
TILES = [AttentionTile(rows=64), AttentionTile(rows=192, keys=128, value_dim=128),
         AttentionTile(rows=128, keys=256, value_dim=64), AttentionTile(rows=64, keys=16, value_dim=256, scale=0.5),
         AttentionTile(rows=320, keys=48, value_dim=192), AttentionTile(rows=70, keys=32),
         AttentionTile(rows=128, keys=128, head_dim=128, value_dim=128, batch=6, group=2),  # 3 x 2 kv heads, GQA 2
         AttentionTile(rows=64, keys=64, head_dim=128, value_dim=64, batch=2, group=4)]


# the online softmax over key tiles: the running max grows across tiles (scale 4 makes it jump), and
# a key tile of 16 runs many rescales
ONLINE = [AttentionTile(rows=100, keys=128, key_tile=64), AttentionTile(rows=128, keys=1024, key_tile=128, scale=4.0),
          AttentionTile(rows=192, keys=256, key_tile=16, value_dim=128),
          AttentionTile(rows=128, keys=512, key_tile=64, head_dim=128, value_dim=128, batch=6, group=2),
          AttentionTile(rows=64, keys=384, key_tile=128, head_dim=128, value_dim=64, batch=2, group=4),
          AttentionTile(rows=100, keys=1000, key_tile=64), AttentionTile(rows=64, keys=77, key_tile=128, scale=2.0),
          AttentionTile(rows=192, keys=300, key_tile=64, head_dim=128, value_dim=128, batch=2, group=2)]


def _ids(t):
    return f"z{t.batch}_g{t.group}_m{t.rows}_n{t.keys}_t{t.tile_keys}_d{t.head_dim}_dv{t.value_dim}"


@pytest.mark.parametrize("tile", ONLINE, ids=_ids)
def test_attention_matches_torch(tile):
    check(tp.compile(attention(tile), "sm_90a"), tile)


@pytest.mark.parametrize("options", [{"stages": 2}, {"stages": 3}, {"stages": 2, "producer": True},
                                     {"stages": 4, "producer": True}, {"warpgroups": 2},
                                     {"warpgroups": 2, "stages": 2, "producer": True},
                                     {"keys": 600, "warpgroups": 2, "stages": 3, "producer": True},
                                     {"in_place": True}, {"keys": 600, "in_place": True, "warpgroups": 2, "stages": 2,
                                                          "producer": True, "registers": (24, 240)}], ids=str)
def test_pipelined_attention_matches_torch(options):
    """K and V tiles in a circular buffer over the loop over key tiles (tp.Pipelined, or a producer
    warpgroup on TIDz): more tiles than stages, so every stage is refilled."""
    options = dict(options)
    tile = AttentionTile(rows=200, keys=options.pop("keys", 640), key_tile=64, head_dim=128, value_dim=128, batch=2,
                         group=2)
    check(tp.compile(attention(tile, **options), "sm_90a"), tile)


@pytest.mark.parametrize("tile, options", [
    (AttentionTile(rows=200, keys=300, key_tile=64, head_dim=256, value_dim=256, batch=2, group=2),
     {"in_place": True, "warpgroups": 2, "stages": 2, "producer": True, "registers": (24, 240)}),
    (AttentionTile(rows=100, keys=130, key_tile=32, head_dim=256, value_dim=128), {"stages": 2}),
    (AttentionTile(rows=64, keys=200, key_tile=64, head_dim=192, value_dim=192), {"in_place": True}),
], ids=lambda x: _ids(x) if isinstance(x, AttentionTile) else str(x))
def test_head_dims_past_128_match_torch(tile, options):
    """A head dim of 3 and 4 swizzle spans (Q and K tiles loaded as that many TMA boxes, S = Q K^T a
    wgmma per 16 of D over them), with tails of rows and keys."""
    check(tp.compile(attention(tile, **options), "sm_90a"), tile)


@pytest.mark.parametrize("tile", TILES, ids=_ids)
def test_one_tile_attention_matches_torch(tile):
    check(tp.compile(one_tile_attention(tile), "sm_90a"), tile)


MASKED = [(AttentionTile(rows=256, keys=256, key_tile=64, masked=True), "causal", {}),
          (AttentionTile(rows=100, keys=384, key_tile=128, head_dim=128, value_dim=128, batch=2, group=2, masked=True),
           "causal", {"stages": 2, "producer": True}),
          (AttentionTile(rows=256, keys=512, key_tile=64, head_dim=128, value_dim=128, masked=True), "causal",
           {"warpgroups": 2, "stages": 2, "producer": True, "registers": (24, 240)}),
          (AttentionTile(rows=128, keys=256, key_tile=64, masked=True), "random", {}),
          (AttentionTile(rows=64, keys=192, key_tile=64, masked=True), "bias", {"stages": 3}),
          (AttentionTile(rows=300, keys=300, key_tile=128, head_dim=128, value_dim=128, masked=True), "causal",
           {"warpgroups": 2, "stages": 2, "producer": True, "registers": (24, 240)}),
          (AttentionTile(rows=300, keys=500, key_tile=64, masked=True), "random", {"in_place": True, "stages": 2}),
          (AttentionTile(rows=200, keys=300, key_tile=64, head_dim=256, value_dim=256, masked=True), "causal",
           {"in_place": True, "warpgroups": 2, "stages": 2, "producer": True, "registers": (24, 240)})]


@pytest.mark.parametrize("tile, kind, options", MASKED, ids=lambda x: _ids(x) if isinstance(x, AttentionTile) else str(x))
def test_masked_attention_matches_torch(tile, kind, options):
    """softmax(Q K^T scale + Mask) V against SDPA's math in float64: the causal mask (whole key tiles
    of -inf for the first rows: the running max stays while they pass), a random one (every row keeps
    its first key), and a finite additive bias."""
    gen = torch.Generator().manual_seed(tile.rows + tile.keys)
    if kind == "causal":
        mask = causal_mask(torch, tile.rows, tile.keys)
    elif kind == "random":
        drop = torch.rand(tile.rows, tile.keys, generator=gen) < 0.5
        drop[:, 0] = False
        mask = torch.zeros(tile.rows, tile.keys).masked_fill(drop, float("-inf")).to(torch.bfloat16).cuda().view(
            1, 1, tile.rows, tile.keys)
    else:
        mask = (torch.randn(tile.rows, tile.keys, generator=gen) * 3).to(torch.bfloat16).cuda().view(1, 1, tile.rows, tile.keys)
    check(tp.compile(attention(tile, **options), "sm_90a"), tile, mask)


# causal by predicate (AttentionTile(causal=True): two iotas, no Mask input): M == N, M != N (the queries
# the last M positions), tails of rows and keys, grouped-query heads, every pipeline form
CAUSAL = [(AttentionTile(rows=256, keys=256, key_tile=64, causal=True), {}),
          (AttentionTile(rows=100, keys=300, key_tile=64, batch=2, group=2, causal=True), {}),
          (AttentionTile(rows=300, keys=300, key_tile=128, head_dim=128, value_dim=128, batch=2, group=2, causal=True),
           {"stages": 2, "producer": True}),
          (AttentionTile(rows=200, keys=500, key_tile=64, head_dim=128, value_dim=128, batch=3, group=4, causal=True),
           {"warpgroups": 2, "stages": 2, "producer": True, "registers": (24, 240), "in_place": True}),
          (AttentionTile(rows=77, keys=1000, key_tile=128, scale=2.0, causal=True), {"stages": 3}),
          (AttentionTile(rows=1000, keys=1000, key_tile=128, head_dim=128, value_dim=128, batch=2, group=4,
                         causal=True),
           {"warpgroups": 2, "stages": 2, "producer": True, "registers": (24, 240), "in_place": True})]


@pytest.mark.parametrize("tile, options", CAUSAL, ids=lambda x: _ids(x) if isinstance(x, AttentionTile) else str(x))
def test_causal_attention_matches_torch(tile, options):
    """Key j dropped for query i where j > i + N - M, computed from indices in the kernel: against
    softmax(Q K^T scale + causal_mask) V in float64 (the first rows keep few keys and whole key tiles
    are -inf for them: their running max stays while those pass)."""
    kernel = tp.compile(attention(tile, **options), "sm_90a")
    assert [t.display_name for t in kernel.fusion.inputs] == ["Q", "K", "V"]  # no Mask
    check(kernel, tile)


@pytest.mark.parametrize("tile, options", [CAUSAL[0], CAUSAL[2], CAUSAL[5]], ids=lambda x: str(x)[:40])
def test_causal_attention_matches_sdpa_is_causal(tile, options):
    """M == N: torch's scaled_dot_product_attention(is_causal=True) in float32, as benchmarks/attention.py
    checks it (max |O - ref| / max |ref| <= 2e-2)."""
    import torch.nn.functional as F

    kernel = tp.compile(attention(tile, **options), "sm_90a")
    gen = torch.Generator().manual_seed(3)
    b, hq, q, k, v = _sdpa_inputs(tile, gen)
    out = torch.full((b, hq, tile.rows, tile.value_dim), float("nan"), dtype=torch.bfloat16, device="cuda")
    kernel.run(*attention_views(q, k, v), out=[out.view(tile.batch, tile.group, tile.rows, tile.value_dim)])
    torch.cuda.synchronize()
    want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True, enable_gqa=tile.group > 1)
    err = ((out.float() - want).abs().max() / want.abs().max()).item()
    assert err <= 2e-2, err


# masked key tiles skipped (attention's skip_masked_tiles, on by default; ONLINE-SKIP): M != N with row and
# key tails, grouped-query heads, two consumer warpgroups behind a producer, O rescaled in place, the lse
SKIPPING = [(AttentionTile(rows=100, keys=300, key_tile=64, batch=2, group=2, causal=True), {}),
            (AttentionTile(rows=200, keys=500, key_tile=64, head_dim=128, value_dim=128, batch=3, group=4, causal=True),
             {"warpgroups": 2, "stages": 2, "producer": True, "registers": (24, 240), "in_place": True}),
            (AttentionTile(rows=1000, keys=1000, key_tile=128, head_dim=128, value_dim=128, batch=2, group=4,
                           causal=True),
             {"warpgroups": 2, "stages": 3, "producer": True, "registers": (24, 240), "in_place": True}),
            (AttentionTile(rows=333, keys=777, key_tile=128, batch=2, causal=True), {"stages": 2, "lse": True})]


@pytest.mark.parametrize("tile, options", SKIPPING, ids=lambda x: _ids(x) if isinstance(x, AttentionTile) else str(x))
def test_skipping_masked_key_tiles_changes_no_bit(tile, options):
    """Each block's loop over key tiles ends at the last tile one of its rows keeps a key of (the count
    read from blockIdx.x in every role): O against float64 as the unskipped kernel is, and bit for bit
    the output of the same schedule computing every tile (skip_masked_tiles=False), since a skipped tile
    would add exp2(-inf) = 0 terms at a rescale of exp2(0) = 1."""
    skipping = tp.compile(attention(tile, **options), "sm_90a")
    every = tp.compile(attention(tile, skip_masked_tiles=False, **options), "sm_90a")
    for kernel, skips in ((skipping, True), (every, False)):  # the block index is tp_block_x heaviest first
        assert any("for (" in line and ("blockIdx.x" in line or "tp_block_x" in line)
                   for line in kernel.cuda_source.splitlines()) is skips
    if not options.get("lse"):
        check(skipping, tile)
    assert_same_outputs(skipping, every, tile, seed=5)


def assert_same_outputs(first, second, tile, seed: int) -> None:
    """Both kernels' outputs on the same random Q, K, V (SDPA's layout, one sequence) and, for a
    masked tile, a random Mask of -inf and finite biases, bit for bit."""
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(shape, generator=gen).to(torch.bfloat16).cuda() for shape in
               ((1, tile.batch * tile.group, tile.rows, tile.head_dim), (1, tile.batch, tile.keys, tile.head_dim),
                (1, tile.batch, tile.keys, tile.value_dim)))
    mask = []
    if tile.masked:  # every row keeps its first key
        bias = torch.randn(tile.rows, tile.keys, generator=gen) * 3
        drop = torch.rand(tile.rows, tile.keys, generator=gen) < 0.3
        drop[:, 0] = False
        mask = [bias.masked_fill(drop, float("-inf")).to(torch.bfloat16).cuda().view(1, 1, tile.rows, tile.keys)]
    outs = []
    for kernel in (first, second):
        got = kernel.run(*attention_views(q, k, v), *mask)
        torch.cuda.synchronize()
        outs.append([t.clone() for t in got])
    for a, b in zip(*outs):
        assert torch.equal(a, b)


def _sdpa_inputs(tile, gen):
    """(B, Hq, q, k, v): random bfloat16 inputs in SDPA's [B, H, S, D] layout for `tile` (its batch
    split into two sequences where it is even), drawn from `gen`."""
    b, hkv = (2, tile.batch // 2) if tile.batch % 2 == 0 else (1, tile.batch)
    hq = hkv * tile.group
    q, k, v = (torch.randn(shape, generator=gen).to(torch.bfloat16).cuda() for shape in
               ((b, hq, tile.rows, tile.head_dim), (b, hkv, tile.keys, tile.head_dim),
                (b, hkv, tile.keys, tile.value_dim)))
    return b, hq, q, k, v


def check(kernel, tile, mask=None):
    """The kernel's O against softmax(Q K^T scale) V in float64, and against the same with P rounded
    to bfloat16 as the kernel rounds it (FlashAttention does too). A causal tile's reference adds
    causal_mask (the kernel computes it: no input)."""
    gen = torch.Generator().manual_seed(tile.rows + tile.keys + tile.value_dim + tile.batch)
    b, hq, q, k, v = _sdpa_inputs(tile, gen)
    out = torch.full((b, hq, tile.rows, tile.value_dim), float("nan"), dtype=torch.bfloat16, device="cuda")
    inputs = list(attention_views(q, k, v)) + ([mask] if mask is not None else [])
    (got,) = kernel.run(*inputs, out=[out.view(tile.batch, tile.group, tile.rows, tile.value_dim)])
    assert got.data_ptr() == out.data_ptr()
    torch.cuda.synchronize()
    kk, vv = (t.double().repeat_interleave(tile.group, dim=1) for t in (k, v))  # each query head's kv head
    s = q.double() @ kk.transpose(-1, -2) * tile.softmax_scale
    bias = causal_mask(torch, tile.rows, tile.keys) if tile.causal else mask
    if bias is not None:
        s = s + bias.double().view(tile.rows, tile.keys)
    want = torch.softmax(s, dim=-1) @ vv
    # P is rounded to bfloat16 before its product with V (as FlashAttention does), the output too
    torch.testing.assert_close(out.double(), want, rtol=2e-2, atol=2e-2)
    p = torch.exp2((s - s.amax(dim=-1, keepdim=True)) * math.log2(math.e))
    exact = (p.to(torch.bfloat16).double() @ vv) / p.sum(dim=-1, keepdim=True)
    torch.testing.assert_close(out.double(), exact.to(torch.bfloat16).double(), rtol=1e-2, atol=4e-3)


@pytest.mark.parametrize("rows, keys, tile", [(32, 256, 64), (96, 1000, 8), (64, 64, 64)])
def test_online_logsumexp_matches_torch(rows, keys, tile):
    """rule_examples.online_logsumexp (examples/valid/attention.py): a thread per row, the running
    max over the row's tiles and the sum of exp(x - m) rescaled as it grows; rows that rise make it
    grow at every tile."""
    from tileproof.rule_examples import online_logsumexp

    fusion = online_logsumexp("online_lse", rows, keys, tile)[0]
    kernel = tp.compile(fusion, "sm_90a")
    x = torch.randn(rows, keys, generator=torch.Generator().manual_seed(rows + keys)) * 8
    x[0] = torch.linspace(-30, 30, keys)
    (got,) = kernel.run(x.cuda())
    torch.testing.assert_close(got.cpu().double(), torch.logsumexp(x.double(), dim=1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("tile, options", [
    (AttentionTile(rows=100, keys=1000, key_tile=64), {}),
    (AttentionTile(rows=256, keys=512, key_tile=128, head_dim=128, value_dim=128, batch=2, group=2, masked=True),
     {"warpgroups": 2, "stages": 2, "producer": True, "registers": (24, 240), "in_place": True})],
    ids=lambda x: str(x)[:60])
def test_attention_row_log_sum_exp_matches_torch(tile, options):
    """attention(lse=True)'s second output, m scale + ln l after the loop, against torch.logsumexp of
    the scaled (and masked) scores in float64; O as before."""
    kernel = tp.compile(attention(tile, lse=True, **options), "sm_90a")
    gen = torch.Generator().manual_seed(7)
    *_, q, k, v = _sdpa_inputs(tile, gen)
    mask = causal_mask(torch, tile.rows, tile.keys) if tile.masked else None
    out, lse = kernel.run(*attention_views(q, k, v), *([mask] if mask is not None else []))
    torch.cuda.synchronize()
    kk = k.double().repeat_interleave(tile.group, dim=1)
    s = q.double() @ kk.transpose(-1, -2) * tile.softmax_scale
    if mask is not None:
        s = s + mask.double().view(tile.rows, tile.keys)
    want = torch.logsumexp(s, dim=-1).reshape(tile.batch, tile.group, tile.rows)
    torch.testing.assert_close(lse.double(), want, rtol=1e-4, atol=1e-4)
    vv = v.double().repeat_interleave(tile.group, dim=1)
    o = (torch.softmax(s, dim=-1) @ vv).reshape(out.shape)
    torch.testing.assert_close(out.double(), o, rtol=2e-2, atol=2e-2)


# ping-pong (attention(ping_pong=True): the consumer warpgroups issue each key tile's Q K^T in turn through
# named barriers, WS-PING-PONG): tails, grouped-query heads, causal with skipping, three warpgroups in a ring
PING_PONG = [(AttentionTile(rows=300, keys=600, key_tile=128, head_dim=128, value_dim=128, batch=2, group=2),
              {"warpgroups": 2, "stages": 2, "producer": True, "registers": (24, 240), "in_place": True}),
             (AttentionTile(rows=1000, keys=1000, key_tile=128, head_dim=128, value_dim=128, batch=2, group=4,
                            causal=True),
              {"warpgroups": 2, "stages": 3, "producer": True, "registers": (24, 240), "in_place": True}),
             (AttentionTile(rows=200, keys=333, key_tile=64, batch=3, causal=True),
              {"warpgroups": 2, "stages": 2, "producer": True}),
             (AttentionTile(rows=400, keys=500, key_tile=64, batch=2), {"warpgroups": 3, "stages": 2, "producer": True})]


@pytest.mark.parametrize("tile, options", PING_PONG, ids=lambda x: _ids(x) if isinstance(x, AttentionTile) else str(x))
def test_ping_pong_attention_matches_torch_and_changes_no_bit(tile, options):
    """Against float64 as every schedule is, and bit for bit the output of the same schedule without
    ping-pong: the turns reorder when each warpgroup issues its products, never what they compute.
    Each run also proves the turns do not hang (a hang would time the test out)."""
    kernel = tp.compile(attention(tile, **options, ping_pong=True), "sm_90a")
    assert "bar.arrive %0" in kernel.cuda_source
    check(kernel, tile)
    plain = tp.compile(attention(tile, **options), "sm_90a")
    gen = torch.Generator().manual_seed(11)
    b, hq, q, k, v = _sdpa_inputs(tile, gen)
    views = attention_views(q, k, v)
    outs = [kern.run(*views) for kern in (kernel, plain)]
    torch.cuda.synchronize()
    for got, want in zip(*outs):
        assert torch.equal(got, want)


# 300 rows and keys with every warp-specialized option: the shapes tests/codegen/test_ptxas_resources.py
# compiles without spills, the softmax's register arithmetic computed at the tails' holes unpredicated
# (execution/clipped_holes.py unread_holes)
WS_TAILS = dict(warpgroups=2, stages=2, producer=True, registers=(24, 240), in_place=True)
TAILS = [(AttentionTile(rows=300, keys=300, key_tile=128, head_dim=128, value_dim=128, batch=4), WS_TAILS),
         (AttentionTile(rows=300, keys=300, key_tile=128, head_dim=128, value_dim=128, batch=4, causal=True), WS_TAILS),
         (AttentionTile(rows=300, keys=300, key_tile=128, head_dim=128, value_dim=128, batch=4, causal=True),
          {**WS_TAILS, "stages": 3}),
         (AttentionTile(rows=300, keys=300, key_tile=64, head_dim=64, value_dim=64, batch=4, causal=True), WS_TAILS)]


@pytest.mark.parametrize("tile, options", TAILS, ids=lambda x: _ids(x) if isinstance(x, AttentionTile) else str(x))
def test_attention_at_sequence_tails_matches_torch(tile, options):
    """Values computed at the holes (rows past 300, keys past 300) reach no output element: against float64."""
    kernel = tp.compile(attention(tile, **options), "sm_90a")
    assert not kernel.resources.spills
    check(kernel, tile)


# FlashAttention-3's intra-warpgroup overlap (attention(overlap=True): the loop over key tiles rotated,
# tile i + 1's Q K^T issued before tile i's P V): one key tile (the loop's rotated statements run only
# before it), tails of rows and keys, grouped-query heads, head dims 64 to 256, causal with and without
# skipping, a masked bias, three stages, the lse
_OV = {"warpgroups": 2, "stages": 2, "producer": True, "registers": (24, 240), "in_place": True}
OVERLAP = [(AttentionTile(rows=128, keys=100, key_tile=128, head_dim=128, value_dim=128), _OV),
           (AttentionTile(rows=200, keys=700, key_tile=128, head_dim=128, value_dim=128, batch=2, group=2), _OV),
           (AttentionTile(rows=300, keys=500, key_tile=64, head_dim=64, value_dim=64, batch=3, group=2), _OV),
           (AttentionTile(rows=200, keys=300, key_tile=64, head_dim=256, value_dim=256, batch=2), _OV),
           (AttentionTile(rows=1000, keys=1000, key_tile=128, head_dim=128, value_dim=128, batch=2, group=4,
                          causal=True), _OV),
           (AttentionTile(rows=1000, keys=1000, key_tile=128, head_dim=128, value_dim=128, batch=2, causal=True),
            {**_OV, "skip_masked_tiles": False}),
           (AttentionTile(rows=500, keys=900, key_tile=128, head_dim=128, value_dim=128, batch=2), {**_OV, "stages": 3}),
           (AttentionTile(rows=333, keys=777, key_tile=128, head_dim=128, value_dim=128), {**_OV, "lse": True}),
           # with ping-pong: a warpgroup's turn holds tile i + 1's Q K^T, the rescale and tile i's P V
           (AttentionTile(rows=1000, keys=1000, key_tile=128, head_dim=128, value_dim=128, batch=2, group=4,
                          causal=True), {**_OV, "ping_pong": True}),
           (AttentionTile(rows=300, keys=500, key_tile=64, head_dim=64, value_dim=64, batch=3, group=2),
            {**_OV, "ping_pong": True}),
           (AttentionTile(rows=200, keys=300, key_tile=64, head_dim=256, value_dim=256, batch=2), {**_OV, "ping_pong": True}),
           (AttentionTile(rows=500, keys=900, key_tile=128, head_dim=128, value_dim=128, batch=2),
            {**_OV, "stages": 3, "ping_pong": True}),
           (AttentionTile(rows=128, keys=100, key_tile=128, head_dim=128, value_dim=128), {**_OV, "ping_pong": True})]


@pytest.mark.parametrize("tile, options", OVERLAP, ids=lambda x: _ids(x) if isinstance(x, AttentionTile) else str(x))
def test_overlapped_attention_matches_torch_and_changes_no_bit(tile, options):
    """The rotated loop runs the same statements in the same order as the unrotated one, so its outputs
    are those of attention(overlap=False) bit for bit, and softmax attention within bfloat16's error."""
    overlapped = tp.compile(attention(tile, overlap=True, **options), "sm_90a")
    plain = tp.compile(attention(tile, **options), "sm_90a")
    rotated = tile.keys > tile.tile_keys  # one key tile: no next iteration, nothing rotated
    assert ("rotated: the next iteration" in overlapped.cuda_source) is rotated
    assert ("tp_wgmma_wait<1>" in overlapped.cuda_source) is rotated
    if not options.get("lse"):
        check(overlapped, tile)
    assert_same_outputs(overlapped, plain, tile, seed=11)


# a persistent grid (attention(persistent=B): block b computes row tiles b, b + B, ..): the per-tile
# statements are the one-block-a-tile kernel's, so the outputs are its bit for bit; tiles that the block
# count does not divide, row and key tails, grouped-query heads, a batch and group of one, the lse,
# ping-pong and the overlap
PERSISTENT = [(AttentionTile(rows=300, keys=500, key_tile=128, head_dim=128, value_dim=128, batch=3, group=2),
               {**_OV, "stages": 3, "overlap": True, "persistent": 4}),
              (AttentionTile(rows=333, keys=777, key_tile=128, head_dim=128, value_dim=128),
               {**_OV, "stages": 3, "overlap": True, "lse": True, "persistent": 2}),
              (AttentionTile(rows=256, keys=512, key_tile=128, head_dim=128, value_dim=128, batch=2, group=2),
               {**_OV, "stages": 3, "overlap": True, "ping_pong": True, "persistent": 3}),
              (AttentionTile(rows=300, keys=500, key_tile=64, head_dim=64, value_dim=64, batch=3, group=2),
               {**_OV, "persistent": 7}),
              (AttentionTile(rows=1024, keys=1024, key_tile=128, head_dim=128, value_dim=128, batch=4),
               {**_OV, "stages": 3, "overlap": True, "persistent": 8})]


@pytest.mark.parametrize("tile, options", PERSISTENT, ids=lambda x: _ids(x) if isinstance(x, AttentionTile) else str(x))
def test_persistent_attention_matches_torch_and_changes_no_bit(tile, options):
    persistent = tp.compile(attention(tile, **options), "sm_90a")
    assert persistent.launch_params.grid == (options["persistent"], 1, 1)
    one_each = tp.compile(attention(tile, **{**options, "persistent": None}), "sm_90a")
    if not options.get("lse"):
        check(persistent, tile)
    assert_same_outputs(persistent, one_each, tile, seed=5)


# a causal persistent grid (attention(persistent=B), B a multiple of the heads): each head's row tiles on
# B / heads blocks, block x computing tiles x, x + B / heads, .. in a serial loop whose index the skip counts
# read (TensorView.loop_index); bit for bit the one-block-a-tile kernel's, against the causal reference:
# a round with a tile past the rows, row and key tails, grouped heads, ping-pong, the overlap, the lse
_CAUSAL = {"warpgroups": 2, "stages": 2, "producer": True, "registers": (24, 240)}
PERSISTENT_CAUSAL = [
    (AttentionTile(rows=300, keys=500, key_tile=128, head_dim=128, value_dim=128, batch=3, group=2, causal=True),
     {**_CAUSAL, "persistent": 12}),
    (AttentionTile(rows=1024, keys=1024, key_tile=128, head_dim=128, value_dim=128, batch=4, causal=True),
     {**_CAUSAL, "persistent": 8}),
    (AttentionTile(rows=300, keys=500, key_tile=64, head_dim=64, value_dim=64, batch=3, group=2, causal=True),
     {**_OV, "persistent": 6}),
    (AttentionTile(rows=256, keys=512, key_tile=128, head_dim=128, value_dim=128, batch=2, group=2, causal=True),
     {**_OV, "stages": 3, "overlap": True, "ping_pong": True, "persistent": 8}),
    (AttentionTile(rows=333, keys=777, key_tile=128, head_dim=128, value_dim=128, causal=True),
     {**_OV, "stages": 3, "overlap": True, "lse": True, "persistent": 2})]


@pytest.mark.parametrize("tile, options", PERSISTENT_CAUSAL,
                         ids=lambda x: _ids(x) if isinstance(x, AttentionTile) else str(x))
def test_a_causal_persistent_grid_matches_torch_and_changes_no_bit(tile, options):
    persistent = tp.compile(attention(tile, **options), "sm_90a")
    heads = tile.batch * tile.group
    assert persistent.launch_params.grid == (options["persistent"] // heads, tile.group, tile.batch)
    one_each = tp.compile(attention(tile, **{**options, "persistent": None}), "sm_90a")
    if not options.get("lse"):
        check(persistent, tile)
    assert_same_outputs(persistent, one_each, tile, seed=7)


# Q loaded by the producer (attention(q_stages=S)): a circular buffer of S row tiles' Q over a persistent
# block's row-tile loop, around K's and V's over the key tiles; bit for bit the kernel whose consumers load
# Q: tails, grouped heads, more blocks than tiles, the overlap, ping-pong, the lse, a causal grid
Q_BY_PRODUCER = [
    (AttentionTile(rows=300, keys=500, key_tile=128, head_dim=128, value_dim=128, batch=3, group=2),
     {**_OV, "overlap": True, "persistent": 4, "q_stages": 2}),
    (AttentionTile(rows=1024, keys=1024, key_tile=128, head_dim=128, value_dim=128, batch=4),
     {**_OV, "overlap": True, "ping_pong": True, "persistent": 8, "q_stages": 2}),
    (AttentionTile(rows=333, keys=777, key_tile=256, head_dim=64, value_dim=64, batch=2),
     {**_OV, "lse": True, "persistent": 3, "q_stages": 3}),
    (AttentionTile(rows=256, keys=256, key_tile=128, head_dim=64, value_dim=64, batch=1),
     {**_OV, "stages": 3, "persistent": 16, "q_stages": 2}),
    (AttentionTile(rows=300, keys=500, key_tile=128, head_dim=128, value_dim=128, batch=3, group=2, causal=True),
     {**_CAUSAL, "persistent": 12, "q_stages": 2}),
    (AttentionTile(rows=1024, keys=1024, key_tile=128, head_dim=128, value_dim=128, batch=2, causal=True),
     {**_OV, "overlap": True, "persistent": 8, "q_stages": 2})]


@pytest.mark.parametrize("tile, options", Q_BY_PRODUCER, ids=lambda x: _ids(x) if isinstance(x, AttentionTile) else str(x))
def test_q_loaded_by_the_producer_matches_torch_and_changes_no_bit(tile, options):
    ahead = tp.compile(attention(tile, **options), "sm_90a")
    assert "tp_empty_T" in ahead.cuda_source and ahead.cuda_source.count("tp_mbar_wait(&tp_empty_") >= 4
    own = tp.compile(attention(tile, **{**options, "q_stages": 1}), "sm_90a")
    if not options.get("lse"):
        check(ahead, tile)
    assert_same_outputs(ahead, own, tile, seed=13)


def test_the_bundled_persistent_example_matches_torch():
    """examples/valid/attention.py persistent_attention_overlapped_in_ping_pong, as `tileproof verify`
    accepts it: against float64."""
    from support.examples import example_module

    fusion = example_module("valid", "attention").persistent_attention_overlapped_in_ping_pong()
    tile = AttentionTile(rows=700, keys=900, key_tile=128, head_dim=128, value_dim=128, batch=1, group=2)
    check(tp.compile(fusion, "sm_90a"), tile)


# the softmax's chain fused into the row sum's loop (attention(fused_softmax=True)) against
# each statement in a loop of its own: the same operations on each element in the same order, so the same
# bits; a Mask input, the causal predicate with and without skipping, the lse, tails, grouped heads, one
# key tile, 256-key tiles, the overlap with ping-pong, a persistent grid
FUSED = [(AttentionTile(rows=300, keys=500, key_tile=64, batch=2, group=2, masked=True), {"stages": 2}),
         (AttentionTile(rows=200, keys=500, key_tile=128, head_dim=128, value_dim=128, batch=3, group=2, causal=True),
          {**_OV, "lse": True}),
         (AttentionTile(rows=256, keys=256, key_tile=64, causal=True), {"skip_masked_tiles": False}),
         (AttentionTile(rows=100, keys=120, key_tile=128, head_dim=128, value_dim=128), {}),
         (AttentionTile(rows=333, keys=777, key_tile=256, batch=2), {**_OV, "in_place": False}),
         (AttentionTile(rows=256, keys=700, key_tile=128, head_dim=128, value_dim=128, batch=2, group=2),
          {**_OV, "stages": 3, "overlap": True, "ping_pong": True, "persistent": 3}),
         (AttentionTile(rows=200, keys=300, key_tile=64, head_dim=256, value_dim=256), _OV)]


@pytest.mark.parametrize("tile, options", FUSED, ids=lambda x: _ids(x) if isinstance(x, AttentionTile) else str(x))
def test_the_fused_softmax_loop_matches_torch_and_changes_no_bit(tile, options):
    fused = tp.compile(attention(tile, fused_softmax=True, **options), "sm_90a")
    separate = tp.compile(attention(tile, fused_softmax=False, **options), "sm_90a")
    if not (options.get("lse") or tile.masked):
        check(fused, tile)
    assert_same_outputs(fused, separate, tile, seed=3)


# attention(heaviest_first=True, a causal tile's default): each head's row tiles in reverse block order
# (Fusion.reversed_blocks),
# a relabelling of the blocks: bit for bit the forward order's, against the causal reference; tails,
# grouped heads, skipping, the overlap, the lse
HEAVIEST_FIRST = [
    (AttentionTile(rows=300, keys=500, key_tile=128, head_dim=128, value_dim=128, batch=3, group=2, causal=True),
     _CAUSAL),
    (AttentionTile(rows=333, keys=777, key_tile=128, head_dim=128, value_dim=128, batch=2, causal=True),
     {**_OV, "stages": 3, "overlap": True, "lse": True}),
    (AttentionTile(rows=1000, keys=1000, key_tile=64, causal=True), {"stages": 2})]


@pytest.mark.parametrize("tile, options", HEAVIEST_FIRST,
                         ids=lambda x: _ids(x) if isinstance(x, AttentionTile) else str(x))
def test_heaviest_first_matches_torch_and_changes_no_bit(tile, options):
    reversed_ = tp.compile(attention(tile, heaviest_first=True, **options), "sm_90a")
    assert "tp_block_x" in reversed_.cuda_source
    forward = tp.compile(attention(tile, heaviest_first=False, **options), "sm_90a")
    if not options.get("lse"):
        check(reversed_, tile)
    assert_same_outputs(reversed_, forward, tile, seed=5)


# O written through shared memory (attention(tma_store=True): stmatrix into the TMA store's boxes, one TMA
# store a box) against the direct stores, bit for bit, and against float64: key tails, grouped heads, a
# persistent grid with more row tiles than blocks, ping-pong, a causal per-head grid whose last row tile's
# second warpgroup lies past the rows, 256-key tiles with the lse, no producer, row tails
TMA_STORE = [
    (AttentionTile(rows=256, keys=500, key_tile=128, head_dim=128, value_dim=128, batch=3, group=2),
     {**_OV, "overlap": True, "persistent": 4, "q_stages": 2}),
    (AttentionTile(rows=1024, keys=1024, key_tile=128, head_dim=128, value_dim=128, batch=4),
     {**_OV, "overlap": True, "ping_pong": True, "persistent": 8, "q_stages": 2}),
    (AttentionTile(rows=320, keys=320, key_tile=128, head_dim=64, value_dim=64, batch=2, group=2, causal=True),
     {**_OV, "overlap": True, "persistent": 8, "q_stages": 2}),
    (AttentionTile(rows=192, keys=700, key_tile=256, head_dim=64, value_dim=64, batch=2),
     {**_OV, "lse": True, "persistent": 3, "q_stages": 2}),
    (AttentionTile(rows=128, keys=300, key_tile=64, head_dim=64, value_dim=64, batch=2),
     {"warpgroups": 2, "stages": 2}),
    # row tails: the last row tile's stmatrix at its holes, the TMA store clipping them (a batch of one too)
    (AttentionTile(rows=700, keys=900, key_tile=128, head_dim=128, value_dim=128, batch=1, group=2),
     {**_OV, "overlap": True, "persistent": 6, "q_stages": 2}),
    (AttentionTile(rows=1000, keys=1000, key_tile=128, head_dim=64, value_dim=64, batch=1, causal=True),
     {**_OV, "overlap": True, "persistent": 8, "q_stages": 2}),
    (AttentionTile(rows=100, keys=120, key_tile=128, head_dim=128, value_dim=128), {}),
    # one consumer warpgroup beside the producer: the staged tile's single writer implied by the role
    (AttentionTile(rows=200, keys=256, key_tile=64, head_dim=128, value_dim=128, batch=2),
     {"warpgroups": 1, "stages": 2, "producer": True, "in_place": True, "overlap": True})]


@pytest.mark.parametrize("tile, options", TMA_STORE, ids=lambda x: _ids(x) if isinstance(x, AttentionTile) else str(x))
def test_o_through_shared_memory_matches_torch_and_changes_no_bit(tile, options):
    staged = tp.compile(attention(tile, tma_store=True, **options), "sm_90a")
    assert "stmatrix" in staged.cuda_source and "tp_bulk_store" in staged.cuda_source
    direct = tp.compile(attention(tile, **options), "sm_90a")
    if not options.get("lse"):
        check(staged, tile)
    assert_same_outputs(staged, direct, tile, seed=17)
