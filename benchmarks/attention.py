"""Forward attention on the GPU: tileproof against PyTorch's scaled_dot_product_attention with the
cuDNN and the flash backends, in one process (issue 36).

    python3 benchmarks/attention.py [--out FILE] [--rep-ms MS] [--shapes I,..] [--configs NAME,..]

bfloat16 q [B, Hq, S, D], k and v [B, Hkv, S, D]; FLOPs 4 B Hq S^2 D, half that for causal shapes
(SDPA's is_causal; tileproof runs AttentionTile(causal=True): the mask is a predicate of the query
and key indices, two tp.iota, no Mask input; a block's loop ends at its last key tile with a kept
key, skip_masked_tiles, and the tiles every row keeps whole run without the mask). tileproof runs recipes/attention.py: one_tile_attention where the keys are
one tile (S <= 256), and attention (the online softmax over key tiles) in the configurations
CONFIGS (key tile, K / V stages, a warp-specialized producer), each timed; `tileproof` is the
fastest; `tileproof_sdpa` is the user's call, tileproof.recipes.sdpa(q, k, v, is_causal=...) (its
checks, its configuration chosen per shape, a new output each call; `--configs sdpa` selects it).
Each output is checked against float32 SDPA (math backend) within bf16 tolerance, then a shape's
entries are timed together in `--rounds` rounds (each entry once a round, starting one further
along each round: bench_common.interleaved), so that no entry always runs first or after the same
one. Times: triton.testing.do_bench (L2 flushed before each call; the call's host time inside it,
as a caller pays it: Kernel.run with the views of recipes.attention.attention_views), the median
of >= 20 calls a round, the median of the rounds; TFLOP/s; vs_cudnn = the median over the rounds
of cuDNN's time / tileproof's in the same round. Writes JSON (default
benchmarks/results/attention/<machine>.json) and prints a table.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

from bench_common import attempt, interleaved, results_path, round_ratio, warm_gpu, write_results  # benchmarks/bench_common.py

import tileproof as tp
from tileproof.recipes import Attention
from tileproof.recipes.attention import AttentionTile, attention, attention_views, one_tile_attention

# (B, Hq, Hkv, S, D): ViT-like and short-context shapes, then the issue's long ones
SHAPES = [(32, 16, 16, 256, 64), (32, 16, 16, 128, 128), (64, 12, 12, 256, 64), (16, 32, 8, 256, 128),
          (4, 32, 32, 4096, 128), (2, 16, 16, 16384, 128), (8, 32, 32, 4096, 64), (1, 16, 16, 16384, 64),
          (4, 32, 8, 4096, 128), (4, 32, 32, 4096, 128, True), (8, 32, 32, 4096, 64, True),
          (4, 16, 16, 4096, 256), (4, 16, 16, 4096, 256, True),  # head dim 256: K / V tiles of 64 keys fit
          (4, 32, 32, 4000, 128), (4, 32, 32, 4000, 128, True), (16, 32, 8, 250, 128), (8, 32, 32, 4000, 64),  # tails
          (2, 16, 16, 16384, 128, True), (1, 16, 16, 16384, 64, True)]  # the issue's long shapes, causal
# the online recipe's configurations: (name, key tile, attention() keywords); those that came within the
# best four at some shape of the previous runs (git log of results/attention), and the ping-pong forms of
# the best (the others, e.g. 64-key tiles behind a producer, never did)
_WS = {"warpgroups": 2, "producer": True}
_R240 = {**_WS, "registers": (24, 240)}
_R160_3 = {"warpgroups": 3, "producer": True, "registers": (24, 160)}  # 24 x 128 + 160 x 384 of 65536
CONFIGS = [("one_tile", None, {}), ("kt128", 128, {}), ("kt128_s2", 128, {"stages": 2}),
           ("kt128_ws3", 128, {"stages": 3, "producer": True}),
           ("kt64_wg2_s2", 64, {"warpgroups": 2, "stages": 2}),
           ("kt128_wg2_ws2", 128, {**_WS, "stages": 2}),
           ("kt128_wg2_ws2_r240", 128, {**_R240, "stages": 2}),
           ("kt256_wg2_ws2_r240", 256, {**_R240, "stages": 2}),
           # O rescaled in place (no tile's O added into it)
           ("kt128_wg2_ws2_ip", 128, {**_WS, "stages": 2, "in_place": True}),
           ("kt128_wg2_ws2_r240_ip", 128, {**_R240, "stages": 2, "in_place": True}),
           ("kt256_wg2_ws2_r240_ip", 256, {**_R240, "stages": 2, "in_place": True}),
           # three stages released one iteration late: each tile's P V in flight while the next Q K^T issues
           ("kt128_wg2_ws3_ip", 128, {**_WS, "stages": 3, "in_place": True}),
           ("kt128_wg2_ws3_r240", 128, {**_R240, "stages": 3}),
           ("kt128_wg2_ws3_r240_ip", 128, {**_R240, "stages": 3, "in_place": True}),
           ("kt256_wg2_ws3_r240_ip", 256, {**_R240, "stages": 3, "in_place": True}),
           # ping-pong: the consumer warpgroups issue each key tile's Q K^T in turn (named barriers, WS-PING-PONG)
           ("kt128_wg2_ws2_r240_pp", 128, {**_R240, "stages": 2, "ping_pong": True}),
           ("kt128_wg2_ws2_r240_ip_pp", 128, {**_R240, "stages": 2, "in_place": True, "ping_pong": True}),
           ("kt128_wg2_ws3_r240_ip_pp", 128, {**_R240, "stages": 3, "in_place": True, "ping_pong": True}),
           ("kt256_wg2_ws2_r240_pp", 256, {**_R240, "stages": 2, "ping_pong": True}),
           # head dim 256: two stages of 64 keys are what shared memory holds beside Q, and O in place keeps
           # the consumers' registers under 240 (the others at 256 are refused by SMEM-CAPACITY or spill)
           ("kt64_wg2_ws2_r240_ip", 64, {**_R240, "stages": 2, "in_place": True}),
           # ... or two of 80 keys (224 KiB beside Q), FlashAttention-3's key tile at head dim 256
           ("kt80_wg2_ws2_r240_ip", 80, {**_R240, "stages": 2, "in_place": True}),
           ("kt80_wg2_ws2_r240_ip_pst", 80, {**_R240, "stages": 2, "in_place": True, "persistent": 128}),
           ("kt80_wg2_ws2_r240_ip_ov_pst", 80, {**_R240, "stages": 2, "in_place": True, "overlap": True,
                                                 "persistent": 128}),
           ("kt80_wg2_ws2_r240_ip_ph16", 80, {**_R240, "stages": 2, "in_place": True, "per_head": 16}),
           # FlashAttention-3's intra-warpgroup overlap: the loop rotated, tile i + 1's Q K^T before tile i's P V
           # (docs/attention.md#intra-warpgroup-overlap: not faster yet; the two-stage form waits on its loads)
           ("kt128_wg2_ws3_r240_ip_ov", 128, {**_R240, "stages": 3, "in_place": True, "overlap": True}),
           ("kt128_wg2_ws4_r240_ip_ov", 128, {**_R240, "stages": 4, "in_place": True, "overlap": True}),
           ("kt64_wg2_ws2_r240_ip_ov", 64, {**_R240, "stages": 2, "in_place": True, "overlap": True}),
           # both, as FlashAttention-3 runs head dim 128: a warpgroup's turn holds tile i + 1's Q K^T and tile i's P V
           ("kt128_wg2_ws2_r240_ip_ov_pp", 128, {**_R240, "stages": 2, "in_place": True, "overlap": True,
                                                  "ping_pong": True}),
           ("kt128_wg2_ws3_r240_ip_ov_pp", 128, {**_R240, "stages": 3, "in_place": True, "overlap": True,
                                                  "ping_pong": True}),
           ("kt64_wg2_ws2_r240_ip_ov_pp", 64, {**_R240, "stages": 2, "in_place": True, "overlap": True,
                                                "ping_pong": True}),
           # persistent: 128 blocks, each computing tiles b, b + 128, ..
           ("kt128_wg2_ws3_r240_ip_ov_pst", 128, {**_R240, "stages": 3, "in_place": True, "overlap": True,
                                                   "persistent": 128}),
           ("kt128_wg2_ws3_r240_ip_ov_pp_pst", 128, {**_R240, "stages": 3, "in_place": True, "overlap": True,
                                                      "ping_pong": True, "persistent": 128}),
           ("kt128_wg2_ws2_r240_ip_pst", 128, {**_R240, "stages": 2, "in_place": True, "persistent": 128}),
           ("kt256_wg2_ws2_r240_ip_pst", 256, {**_R240, "stages": 2, "in_place": True, "persistent": 128}),
           # Q loaded by the producer, a row tile ahead (q_stages: a circular buffer over the block's row tiles);
           # two K / V stages beside two of Q at head dim 128 (three do not fit), and the same without it
           ("kt128_wg2_ws2_r240_ip_ov_pst", 128, {**_R240, "stages": 2, "in_place": True, "overlap": True,
                                                   "persistent": 128}),
           ("kt128_wg2_ws2_r240_ip_ov_pst_q2", 128, {**_R240, "stages": 2, "in_place": True, "overlap": True,
                                                      "persistent": 128, "q_stages": 2}),
           ("kt256_wg2_ws2_r240_ip_pst_q2", 256, {**_R240, "stages": 2, "in_place": True, "persistent": 128,
                                                   "q_stages": 2}),
           # three K / V stages of fewer keys beside two of Q (shared memory: 96 keys 208 KiB, 64 keys x 4 192 KiB)
           ("kt96_wg2_ws3_r240_ip_ov_pst", 96, {**_R240, "stages": 3, "in_place": True, "overlap": True,
                                                 "persistent": 128}),
           ("kt96_wg2_ws3_r240_ip_ov_pst_q2", 96, {**_R240, "stages": 3, "in_place": True, "overlap": True,
                                                    "persistent": 128, "q_stages": 2}),
           ("kt80_wg2_ws3_r240_ip_ov_pst_q2", 80, {**_R240, "stages": 3, "in_place": True, "overlap": True,
                                                    "persistent": 128, "q_stages": 2}),
           ("kt64_wg2_ws4_r240_ip_ov_pst_q2", 64, {**_R240, "stages": 4, "in_place": True, "overlap": True,
                                                    "persistent": 128, "q_stages": 2}),
           ("kt128_wg2_ws2_r240_ph16_q2", 128, {**_R240, "stages": 2, "per_head": 16, "q_stages": 2}),
           ("kt128_wg2_ws2_r240_ip_ov_ph16", 128, {**_R240, "stages": 2, "in_place": True, "overlap": True,
                                                    "per_head": 16}),
           ("kt128_wg2_ws2_r240_ip_ov_ph16_q2", 128, {**_R240, "stages": 2, "in_place": True, "overlap": True,
                                                       "per_head": 16, "q_stages": 2}),
           ("kt128_wg2_ws2_r240_ip_ov_ph4_q2", 128, {**_R240, "stages": 2, "in_place": True, "overlap": True,
                                                      "per_head": 4, "q_stages": 2}),
           ("kt128_wg2_ws2_r240_ph4_q2", 128, {**_R240, "stages": 2, "per_head": 4, "q_stages": 2}),
           ("kt128_wg2_ws3_r240_ip_ph16_q2", 128, {**_R240, "stages": 3, "in_place": True, "per_head": 16,
                                                    "q_stages": 2}),
           # after K's early release (pipeline.release_read_ahead): the two-stage overlap beside Q ahead, causal and at
           # head dims 64 and 256
           ("kt256_wg2_ws2_r240_ip_ph16_q2", 256, {**_R240, "stages": 2, "in_place": True, "per_head": 16,
                                                    "q_stages": 2}),
           ("kt128_wg2_ws2_r240_ip_ov_ph8_q2", 128, {**_R240, "stages": 2, "in_place": True, "overlap": True,
                                                      "per_head": 8, "q_stages": 2}),
           ("kt64_wg2_ws2_r240_ip_ov_pst", 64, {**_R240, "stages": 2, "in_place": True, "overlap": True,
                                                 "persistent": 128}),
           ("kt64_wg2_ws2_r240_ip_pst", 64, {**_R240, "stages": 2, "in_place": True, "persistent": 128}),
           ("kt64_wg2_ws2_r240_ip_ov_ph16", 64, {**_R240, "stages": 2, "in_place": True, "overlap": True,
                                                  "per_head": 16}),
           ("kt128_wg2_ws2_r240_ip_pst_q2", 128, {**_R240, "stages": 2, "in_place": True, "persistent": 128,
                                                   "q_stages": 2}),
           # persistent over each head's row tiles (causal too): as many blocks as heads times per_head, block x
           # of a head computing its row tiles x, x + per_head, ..; at one block a head (per_head 1) the blocks
           # run 128 heads at once and K / V leave L2 (docs/attention.md#a-persistent-causal-grid)
           ("kt128_wg2_ws2_r240_ph16", 128, {**_R240, "stages": 2, "per_head": 16}),
           ("kt128_wg2_ws2_r240_ph8", 128, {**_R240, "stages": 2, "per_head": 8}),
           ("kt128_wg2_ws3_r240_ip_ov_ph16", 128, {**_R240, "stages": 3, "in_place": True, "overlap": True,
                                                    "per_head": 16}),
           ("kt64_wg2_ws2_r240_ip_ph16", 64, {**_R240, "stages": 2, "in_place": True, "per_head": 16}),
           ("kt256_wg2_ws2_r240_ph16", 256, {**_R240, "stages": 2, "per_head": 16}),
           # the softmax's scale, shift, exp2, P's cast and row sum in one loop a thread or each in its own
           # (fused_softmax; by default fused where O is in place over key tiles of 128 or more), against the
           # default in the same run
           ("kt128_wg2_ws3_r240_ip_ov_ph16_sep", 128, {**_R240, "stages": 3, "in_place": True, "overlap": True,
                                                        "per_head": 16, "fused_softmax": False}),
           ("kt256_wg2_ws2_r240_ip_pst_sep", 256, {**_R240, "stages": 2, "in_place": True, "persistent": 128,
                                                    "fused_softmax": False}),
           ("kt128_wg2_ws2_r240_ph16_fs", 128, {**_R240, "stages": 2, "per_head": 16, "fused_softmax": True}),
           # causal, one block a row tile: the row tiles in forward block order (heaviest_first=False; the
           # default reverses them, the heaviest first: Fusion.reversed_blocks)
           ("kt128_wg2_ws2_r240_fwd", 128, {**_R240, "stages": 2, "heaviest_first": False}),
           ("kt64_wg2_ws2_r240_ip_fwd", 64, {**_R240, "stages": 2, "in_place": True, "heaviest_first": False}),
           # ping-pong beside Q from the producer: one warpgroup's softmax and epilogue while the other's products run
           ("kt128_wg2_ws2_r240_ip_ov_pp_pst_q2", 128, {**_R240, "stages": 2, "in_place": True, "overlap": True,
                                                         "ping_pong": True, "persistent": 128, "q_stages": 2}),
           ("kt128_wg2_ws2_r240_ip_pp_pst_q2", 128, {**_R240, "stages": 2, "in_place": True, "ping_pong": True,
                                                      "persistent": 128, "q_stages": 2}),
           ("kt128_wg2_ws2_r240_ip_ov_pp_ph16_q2", 128, {**_R240, "stages": 2, "in_place": True, "overlap": True,
                                                          "ping_pong": True, "per_head": 16, "q_stages": 2}),
           ("kt128_wg2_ws2_r240_ip_pp_ph16_q2", 128, {**_R240, "stages": 2, "in_place": True, "ping_pong": True,
                                                       "per_head": 16, "q_stages": 2}),
           # O written through shared memory: stmatrix into the TMA store's boxes, one TMA store a box (tma_store)
           ("kt128_wg2_ws2_r240_ip_ov_pp_pst_q2_tma", 128, {**_R240, "stages": 2, "in_place": True, "overlap": True,
                                                             "ping_pong": True, "persistent": 128, "q_stages": 2,
                                                             "tma_store": True}),
           ("kt128_wg2_ws2_r240_ip_ov_pst_q2_tma", 128, {**_R240, "stages": 2, "in_place": True, "overlap": True,
                                                          "persistent": 128, "q_stages": 2, "tma_store": True}),
           ("kt256_wg2_ws2_r240_ip_pst_q2_tma", 256, {**_R240, "stages": 2, "in_place": True, "persistent": 128,
                                                       "q_stages": 2, "tma_store": True}),
           ("kt128_wg2_ws2_r240_ip_ov_ph16_q2_tma", 128, {**_R240, "stages": 2, "in_place": True, "overlap": True,
                                                           "per_head": 16, "q_stages": 2, "tma_store": True}),
           ("kt128_wg2_ws2_r240_ip_pp_ph16_q2_tma", 128, {**_R240, "stages": 2, "in_place": True, "ping_pong": True,
                                                           "per_head": 16, "q_stages": 2, "tma_store": True}),
           # three consumer warpgroups (192 rows a block) at 160 registers each beside a 24-register producer
           # (FlashAttention-3's head dim 64 form): the exponentials of three warpgroups share the MUFU unit's slack
           ("kt128_wg3_ws2_r160_ip", 128, {**_R160_3, "stages": 2, "in_place": True}),
           ("kt128_wg3_ws2_r160_ip_ov", 128, {**_R160_3, "stages": 2, "in_place": True, "overlap": True}),
           ("kt128_wg3_ws2_r160_ip_pp", 128, {**_R160_3, "stages": 2, "in_place": True, "ping_pong": True}),
           ("kt128_wg3_ws2_r160_ip_pst_q2", 128, {**_R160_3, "stages": 2, "in_place": True, "persistent": 128,
                                                  "q_stages": 2}),
           ("kt128_wg3_ws2_r160_ip_ov_pst_q2", 128, {**_R160_3, "stages": 2, "in_place": True, "overlap": True,
                                                     "persistent": 128, "q_stages": 2}),
           ("kt128_wg3_ws2_r160_ip_ov_pst_q2_tma", 128, {**_R160_3, "stages": 2, "in_place": True, "overlap": True,
                                                         "persistent": 128, "q_stages": 2, "tma_store": True}),
           ("kt128_wg3_ws2_r160_ip_ph11_q2", 128, {**_R160_3, "stages": 2, "in_place": True, "per_head": 11,
                                                   "q_stages": 2}),
           ("kt128_wg3_ws2_r160_ip_ov_ph11_q2", 128, {**_R160_3, "stages": 2, "in_place": True, "overlap": True,
                                                      "per_head": 11, "q_stages": 2}),
           ("kt128_wg3_ws3_r160_ip_ph11_q2", 128, {**_R160_3, "stages": 3, "in_place": True, "per_head": 11,
                                                   "q_stages": 2}),
           ("kt128_wg3_ws2_r160_ip_pp_ph11_q2", 128, {**_R160_3, "stages": 2, "in_place": True, "ping_pong": True,
                                                      "per_head": 11, "q_stages": 2}),
           ("kt128_wg3_ws2_r160_ip_ph8_q2", 128, {**_R160_3, "stages": 2, "in_place": True, "per_head": 8,
                                                  "q_stages": 2})]


WARM_S = 0.02  # the clocks brought up before each timing (bench_common.warm_gpu); longer warms heat the GPU into lower clocks


def recipe_options(options: dict, heads: int) -> dict:
    """A configuration's attention() keywords at a shape of `heads` query heads (B Hq): per_head k
    is persistent=heads k."""
    out = dict(options)
    if "per_head" in out:
        out["persistent"] = heads * out.pop("per_head")
    return out


def shape_key(shape) -> str:
    """(4, 32, 8, 4096, 128, True) -> "4x32(8)x4096x128 causal": the results' key of a shape."""
    b, hq, hkv, s, d = shape[:5]
    return f"{b}x{hq}({hkv})x{s}x{d}" + (" causal" if len(shape) > 5 and shape[5] else "")


def results_variant(keys: list[str]) -> str:
    """A run narrowed by --shapes: the shapes' keys as a file name's part ("4x16(16)x4096x256 causal"
    -> "4x16x16x4096x256c", joined by "-"); the default run (every SHAPES) has none."""
    return "-".join(k.replace("(", "x").replace(")", "").replace(" causal", "c") for k in keys)


def tflops(shape, ms: float) -> float:
    b, hq, _, s, d = shape[:5]
    causal = len(shape) > 5 and shape[5]  # half the products count (FlashAttention's convention)
    return round(4 * b * hq * s * s * d / (2 if causal else 1) / (ms * 1e-3) / 1e12, 1)


def median_ms(fn, rep_ms: int) -> float:
    """fn's median milliseconds by do_bench (L2 flushed before each call), after the clocks are warmed."""
    import torch  # here: torch is optional, imported only where the script runs on the GPU
    from triton.testing import do_bench

    warm_gpu(torch, WARM_S)
    return statistics.median(do_bench(fn, warmup=25, rep=rep_ms, return_mode="all"))


def checked(torch, got, want) -> dict:
    err = ((got.float() - want).abs().max() / want.abs().max()).item()
    if not err <= 2e-2:
        raise AssertionError(f"max |O - ref| / max |ref| = {err:.3g} (above 2e-2)")
    return {"ok": True, "rel_err": round(err, 5)}


def shape_job(torch, shape, rep_ms: int, only=None, rounds: int = 3) -> dict:
    """One shape (B, Hq, Hkv, S, D[, causal]): each peer and each tileproof configuration (of `only`'s
    names where given) checked, then all timed together in `rounds` rounds (bench_common.interleaved)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    b, hq, hkv, s, d = shape[:5]
    causal = len(shape) > 5 and shape[5]
    torch.manual_seed(0)
    q = torch.randn(b, hq, s, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, hkv, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    gqa = hq != hkv
    with sdpa_kernel([SDPBackend.MATH]):
        want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), enable_gqa=gqa, is_causal=causal)
    res: dict = {"shape": {"B": b, "Hq": hq, "Hkv": hkv, "S": s, "D": d}}

    calls: dict = {}  # entry -> its call, checked once: timed together in rounds below

    def sdpa(name, backend):
        def job():
            def call():
                with sdpa_kernel([backend]):
                    return F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa, is_causal=causal)
            check = checked(torch, call(), want)
            calls[name] = call
            return {"check": check}
        return job

    attempt(res, "cudnn", sdpa("cudnn", SDPBackend.CUDNN_ATTENTION))
    attempt(res, "flash", sdpa("flash", SDPBackend.FLASH_ATTENTION))

    def entry_job():  # the user's call: recipes.sdpa (its checks, its configuration, a new output each call)
        entry = Attention(is_causal=causal)
        start = time.perf_counter()
        first = entry(q, k, v)
        torch.cuda.synchronize()
        compiled_s = round(time.perf_counter() - start, 2)
        config = entry.kernel(entry.problem(q.shape, k.shape, v.shape))[0].name
        check = checked(torch, first, want)
        calls["tileproof_sdpa"] = lambda: entry(q, k, v)
        return {"check": check, "config": config, "verify_and_compile_s": compiled_s}

    if only is None or "sdpa" in only:
        attempt(res, "tileproof_sdpa", entry_job)

    def config_job(name, key_tile, options):
        def job():
            if key_tile is None and (s > 256 or s % 64 or causal):
                return {"skipped": "keys beyond one tile (S <= 256, a multiple of 64), or causal"}
            if key_tile is not None and key_tile > s:
                return {"skipped": "the key tile is longer than S"}
            if causal and options.get("persistent"):
                return {"skipped": "a causal persistent grid spreads each head's row tiles: per_head configurations"}
            tile = AttentionTile(rows=s, keys=s, head_dim=d, value_dim=d, batch=b * hkv, group=hq // hkv,
                                 key_tile=key_tile, causal=causal)
            start = time.perf_counter()
            fusion = one_tile_attention(tile) if key_tile is None else attention(tile, **recipe_options(options, b * hq))
            kernel = tp.compile(fusion, "sm_90a")
            views = list(attention_views(q, k, v))
            out = torch.empty(b, hq, s, d, device="cuda", dtype=torch.bfloat16)
            out_view = out.view(b * hkv, hq // hkv, s, d)

            def call():
                kernel.run(*views, out=[out_view])
                return out
            first = call()
            torch.cuda.synchronize()
            check = checked(torch, first, want)
            calls[name] = call
            return {"check": check, "verify_and_compile_s": round(time.perf_counter() - start, 2)}
        return job

    configs: dict = {}
    for name, key_tile, options in CONFIGS:
        if only is None or name in only:
            attempt(configs, name, config_job(name, key_tile, options))
    res["tileproof_configs"] = configs
    times = interleaved(calls, rounds, lambda call: median_ms(call, rep_ms))
    for name, ms in times.items():
        where = configs if name in configs else res
        where[name].update({"ms": round(statistics.median(ms), 4), "tflops": tflops(shape, statistics.median(ms)),
                            "rounds_ms": [round(t, 4) for t in ms]})
    timed_ones = {n: c for n, c in configs.items() if "ms" in c}
    best = min(timed_ones, key=lambda n: timed_ones[n]["ms"], default=None)
    res["tileproof"] = {**timed_ones[best], "config": best} if best else {"error": "no configuration ran"}
    for ours, name in (("tileproof", best), ("tileproof_sdpa", "tileproof_sdpa")):
        for peer in ("cudnn", "flash"):  # per round (timed side by side), then the median
            if name in times and peer in times:
                res[ours][f"vs_{peer}"] = round(round_ratio(times[peer], times[name]), 3)
    return res


def table(results: dict) -> str:
    lines = ["| B x Hq (Hkv) x S x D | cuDNN TFLOP/s | flash TFLOP/s | tileproof TFLOP/s | vs cuDNN | vs flash "
             "| sdpa() TFLOP/s | sdpa() vs cuDNN |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for key, r in results["shapes"].items():
        cells = [str(r.get(w, {}).get("tflops", (r.get(w, {}).get("skipped") or r.get(w, {}).get("error") or "")[:30]))
                 for w in ("cudnn", "flash", "tileproof")]
        t, e = r.get("tileproof", {}), r.get("tileproof_sdpa", {})
        lines.append(f"| {key} | {' | '.join(cells)} | {t.get('vs_cudnn', '')} | {t.get('vs_flash', '')} "
                     f"| {e.get('tflops', '')} | {e.get('vs_cudnn', '')} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="JSON path (default: benchmarks/results/attention/<machine>.json; with "
                                  "--shapes, <machine>_<the shapes>.json)")
    ap.add_argument("--rep-ms", type=int, default=200, help="do_bench's milliseconds per entry and round")
    ap.add_argument("--rounds", type=int, default=3, help="rounds timing every entry of a shape once each")
    ap.add_argument("--shapes", help="only these SHAPES, by index (comma-separated; default all)")
    ap.add_argument("--configs", help="only these CONFIGS, by name (comma-separated; default all)")
    args = ap.parse_args(argv)
    only = set(args.configs.split(",")) if args.configs else None
    names = {name for name, _, _ in CONFIGS} | {"sdpa"}
    if only and only - names:
        ap.error(f"--configs: no configuration named {', '.join(sorted(only - names))}")
    import torch

    if not torch.cuda.is_available():
        print("attention.py needs a CUDA GPU", file=sys.stderr)
        return 2
    device = torch.cuda.get_device_name(0)
    results = {"command": " ".join(["python3", "benchmarks/attention.py"] + (argv or sys.argv[1:])),
               "issue": 36, "environment": {"device": device, "torch": torch.__version__,
                                             "python": platform.python_version()}, "shapes": {}}
    warm_gpu(torch)
    picked = [SHAPES[int(k)] for k in args.shapes.split(",")] if args.shapes else SHAPES
    for shape in picked:
        key = shape_key(shape)
        attempt(results["shapes"], key, lambda shape=shape: shape_job(torch, shape, args.rep_ms, only, args.rounds))
        print(key, {w: results["shapes"][key].get(w, {}).get("tflops") for w in ("cudnn", "flash", "tileproof")},
              flush=True)
    variant = results_variant([shape_key(s) for s in picked]) if args.shapes else ""
    write_results(results, results_path("attention", device, variant) if args.out is None else Path(args.out),
                  table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
