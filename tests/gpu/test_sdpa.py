"""tileproof.recipes.sdpa on the GPU (marker `gpu`; skipped without PyTorch or a CUDA device): each
shape class's configuration (short and long sequences, head dims 64 to 256, D != Dv, grouped-query
heads, rows and keys past the tiles, a persistent grid) against PyTorch's SDPA in float32, causal
with both alignments, the log-sum-exp; the operator under torch.compile(fullgraph=True) and CUDA
graph capture; bad tensors get InputErrors."""

from __future__ import annotations

import math
import warnings

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import torch.nn.functional as F  # noqa: E402

import tileproof as tp  # noqa: E402
from tileproof.recipes import Attention, sdpa  # noqa: E402
from tileproof.recipes.attention import causal_mask  # noqa: E402
from tileproof.recipes.sdpa import candidates  # noqa: E402

pytestmark = pytest.mark.gpu


def operands(b, hq, hkv, m, n, d, dv=None, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(b, hq, m, d, device="cuda", dtype=torch.bfloat16, generator=g)
    k = torch.randn(b, hkv, n, d, device="cuda", dtype=torch.bfloat16, generator=g)
    v = torch.randn(b, hkv, n, dv or d, device="cuda", dtype=torch.bfloat16, generator=g)
    return q, k, v


def reference(q, k, v, causal=False, bottom_right=False, scale=None):
    """SDPA in float32 (the math backend), with the bottom-right causal mask as an additive one, and
    each row's log-sum-exp of the scaled (masked) scores."""
    group = q.shape[1] // k.shape[1]
    kf, vf = (x.float().repeat_interleave(group, 1) for x in (k, v))
    scale = scale if scale is not None else 1 / math.sqrt(q.shape[-1])
    scores = q.float() @ kf.transpose(-1, -2) * scale
    m, n = q.shape[2], k.shape[2]
    if causal:
        scores = scores + (causal_mask(torch, m, n).float() if bottom_right
                           else causal_mask(torch, m, m).float() if m == n else None)
    return torch.softmax(scores, -1) @ vf, torch.logsumexp(scores, -1)


def close(got, want):
    err = ((got.float() - want).abs().max() / want.abs().max()).item()
    assert err <= 2e-2, err


@pytest.mark.parametrize("shape,causal,config", [
    ((2, 4, 4, 300, 300, 64), False, "kt128_wg2_ws2_r240_ip_ov_pst_q2_tma"),  # 24 row tiles: one block each
    ((8, 16, 16, 256, 256, 64), False, "kt128_wg2_ws2_r240_ip_ov_pst_q2_tma"),  # 256 row tiles: persistent, O by TMA
    ((1, 1, 1, 2, 2, 64), False, "kt128_wg2_ws2_r240_ip_ov_pst_q2_tma"),  # one key tile of 16
    ((2, 4, 4, 300, 300, 64), True, "kt128_wg3_ws2_r160_ip_ph11_q2"),  # 2 blocks a head of one 192-row tile
    ((1, 2, 2, 4096, 4096, 64), True, "kt128_wg3_ws2_r160_ip_ph11_q2"),  # 2 heads: 22 blocks a head of one row tile
    ((1, 4, 2, 200, 200, 128), True, "kt128_wg2_ws2_r240_ip_ov_ph16_q2_tma"),  # a row tail, O by TMA store
    ((1, 4, 2, 256, 256, 128), True, "kt128_wg2_ws2_r240_ip_ov_ph16_q2_tma"),  # 2 blocks a head of one row tile
    ((1, 2, 2, 4096, 4096, 128), True, "kt128_wg2_ws2_r240_ip_ov_ph16_q2_tma"),  # 2 heads: 32 blocks a head of one
    ((1, 4, 4, 8192, 8192, 64), True, "kt128_wg3_ws2_r160_ip_ph11_q2"),  # 43 blocks a head (11: 44 blocks on 132 SMs)
    ((1, 8, 2, 256, 256, 128), False, "kt128_wg2_ws2_r240_ip_ov_pst_q2_tma"),
    ((1, 2, 2, 600, 700, 64), False, "kt128_wg3_ws2_r160_ip_ov_pst_q2"),  # 8 row tiles of 192, one block each
    ((1, 40, 40, 600, 700, 64), False, "kt128_wg3_ws2_r160_ip_ov_pst_q2"),  # 160: persistent, Q from the producer
    ((1, 2, 2, 5000, 5000, 64), False, "kt128_wg3_ws2_r160_ip_ov"),  # past 4096 keys: one block a tile, a row tail
    ((2, 16, 16, 1030, 1030, 128), False, "kt128_wg2_ws2_r240_ip_ov_pst_q2_tma"),  # 288 row tiles, a row tail
    ((1, 2, 2, 300, 300, 256), True, "kt64_wg2_ws2_r240_ip_ov"),  # a row tail: the overlap (it spilled before)
    ((1, 128, 128, 1000, 1000, 128), False, "kt128_wg2_ws2_r240_ip_ov_pst_q2_tma"),  # each block one row tile: the tail
    ((1, 2, 2, 512, 512, 256), True, "kt64_wg2_ws2_r240_ip_ov"),
    ((2, 4, 4, 1024, 1024, 256), False, "kt64_wg2_ws2_r240_ip_ov_pst"),  # 64 row tiles: one block each
    ((1, 2, 1, 130, 520, 192, 64), False, "kt64_wg2_ws2_r240_ip_ov_pst"),
    ((1, 32, 32, 1024, 1024, 256), False, "kt64_wg2_ws2_r240_ip_ov_pst"),  # 256 row tiles: persistent
], ids=str)
def test_each_shape_class_matches_sdpa(shape, causal, config):
    q, k, v = operands(*shape)
    entry = Attention(is_causal=causal)
    out = entry(q, k, v)
    assert entry.kernel(entry.problem(q.shape, k.shape, v.shape))[0].name == config
    want, _ = reference(q, k, v, causal)
    close(out, want)
    if q.shape[1] == k.shape[1]:  # SDPA's own bfloat16 kernels on the same inputs
        close(out, F.scaled_dot_product_attention(q, k, v, is_causal=causal).float())


def random_call(seed: int):
    """A call drawn from `seed`: (B, Hq, Hkv, M, N, D, Dv), causal (bottom-right aligned where M < N),
    lse; head dims 64, 128 and 256 (192 / 64 now and then), rows and keys 2 to 1500 past any tile."""
    import random

    rng = random.Random(f"sdpa:{seed}")
    hkv = rng.choice([1, 2, 4])
    d, dv = rng.choice([(64, 64), (64, 64), (128, 128), (128, 128), (256, 256), (192, 64)])
    n = rng.choice([rng.randint(2, 300), rng.randint(300, 1500), 128 * rng.randint(1, 8)])
    causal = rng.random() < 0.5
    m = rng.randint(2, n) if causal else rng.choice([n, rng.randint(2, 1500)])
    return (rng.randint(1, 3), hkv * rng.choice([1, 2, 4]), hkv, m, n, d, dv), causal, rng.random() < 0.3


@pytest.mark.parametrize("seed", range(16))
def test_random_calls_match_sdpa_in_the_chosen_and_the_first_candidates_configuration(seed):
    """What users run: a random call through sdpa's choice, and through the shape's first candidate
    forced (the fastest form, which the choice passes over where it spills), against float32 SDPA."""
    shape, causal, lse = random_call(seed)
    q, k, v = operands(*shape)
    want, want_lse = reference(q, k, v, causal, bottom_right=True)
    first = candidates(shape[3], shape[4], shape[5], shape[6], causal)[0]
    for config in dict.fromkeys([None, first.name]):
        entry = Attention(is_causal=causal, lse=lse, causal_alignment="bottom_right", config=config)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", tp.PerformanceWarning)
            got = entry(q, k, v)
        out, out_lse = got if lse else (got, None)
        close(out, want)
        if lse:
            torch.testing.assert_close(out_lse, want_lse, rtol=1e-3, atol=1e-3)


def test_the_bottom_right_mask_the_scale_and_the_lse():
    q, k, v = operands(1, 4, 2, 100, 700, 128)
    out, lse = sdpa(q, k, v, is_causal=True, scale=0.05, lse=True, causal_alignment="bottom_right")
    want, want_lse = reference(q, k, v, causal=True, bottom_right=True, scale=0.05)
    close(out, want)
    torch.testing.assert_close(lse, want_lse, rtol=1e-3, atol=1e-3)
    assert lse.dtype == torch.float32 and lse.shape == (1, 4, 100)


def test_the_operator_traces_under_torch_compile_and_cuda_graphs():
    op = tp.as_torch_op(Attention(is_causal=True), name="tileproof_gpu_test::sdpa_causal")
    q, k, v = operands(2, 4, 4, 256, 256, 64)
    want, _ = reference(q, k, v, causal=True)
    torch._dynamo.reset()
    compiled = torch.compile(lambda q, k, v: op(q, k, v).float() * 2, fullgraph=True)
    close(compiled(q, k, v) / 2, want)
    op(q, k, v)  # compiled before capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = op(q, k, v)
    q2, k2, v2 = operands(2, 4, 4, 256, 256, 64, seed=1)
    for x, x2 in ((q, q2), (k, k2), (v, v2)):
        x.copy_(x2)
    graph.replay()
    close(captured, reference(q2, k2, v2, causal=True)[0])


def test_strided_views_run_on_row_major_copies():
    """q, k and v as SDPA's callers often make them, x.transpose(1, 2) of [B, S, H, D] (and v a slice
    of a packed tensor): the same values as the row-major tensors, and no launch packed for the
    copies' addresses."""
    q, k, v = operands(2, 4, 2, 300, 300, 128)
    packed = torch.stack([k, v], dim=-2)  # [B, H, S, 2, D]: k and v interleaved rows
    strided = (q.transpose(1, 2).contiguous().transpose(1, 2), k.transpose(1, 2).contiguous().transpose(1, 2),
               packed[..., 1, :])
    assert not any(t.is_contiguous() for t in strided)
    entry = Attention(is_causal=True)
    close(entry(*strided), reference(q, k, v, causal=True)[0])
    assert not entry._ready
    close(entry(q, k, v), reference(q, k, v, causal=True)[0])
    assert len(entry._ready) == 1


def test_bad_tensors_get_input_errors():
    q, k, v = operands(1, 2, 2, 64, 64, 64)
    with pytest.raises(tp.InputError, match=r"k must be bfloat16, got float16"):
        sdpa(q, k.half(), v)
    with pytest.raises(tp.InputError, match=r"v must be on a CUDA device"):
        sdpa(q, k, v.cpu())


def test_a_repeated_call_launches_its_packed_launch_and_checks_the_addresses():
    """The second call with the same tensors skips the checks and the choice and launches the packed
    launch into new outputs; other tensors of the same signature are bound anew; a misaligned one
    after a good call gets the InputError a fresh entry gives."""
    q, k, v = operands(1, 2, 2, 200, 200, 64)
    entry = Attention()
    first, second = entry(q, k, v), entry(q, k, v)
    assert first.data_ptr() != second.data_ptr() and len(entry._ready) == 1 and len(entry._problems) == 1
    want, _ = reference(q, k, v)
    close(first, want)
    close(second, want)
    q2, k2, v2 = operands(1, 2, 2, 200, 200, 64, seed=1)
    close(entry(q2, k2, v2), reference(q2, k2, v2)[0])
    assert len(entry._problems) == 1 and len(entry._ready) == 2
    shifted = torch.empty(q.numel() + 8, device="cuda", dtype=q.dtype)[1:1 + q.numel()].view(q.shape).copy_(q)
    with pytest.raises(tp.InputError, match=r"q's address must be a multiple of 16 bytes"):
        entry(shifted, k, v)
