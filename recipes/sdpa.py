"""Attention on PyTorch tensors: the attention recipe (recipes/attention.py) behind one call in
scaled_dot_product_attention's layout, a configuration chosen per shape, its kernel verified and
compiled on first use.

    out = sdpa(q, k, v, is_causal=True)                 # q [B, Hq, M, D], k [B, Hkv, N, D], v [B, Hkv, N, Dv]
    op = tp.as_torch_op(Attention(is_causal=True), name="mylib::attn")   # for torch.compile

bfloat16 in and out, float32 inside; Hq a multiple of Hkv (grouped-query heads: query head h reads
key / value head h // (Hq / Hkv), as SDPA's enable_gqa); D and Dv 64, 128, 192 or 256; M and N at
least 2, any length (the last tiles' rows and keys past them are masked). `scale` defaults to
1 / sqrt(D). `is_causal` keeps key j for query i where j <= i, SDPA's mask (aligned at the top
left); with causal_alignment="bottom_right" where j <= i + N - M (FlashAttention's, the queries
the last M positions). The two agree where M == N; the kernel computes the bottom-right mask, so a
top-left causal call needs M == N. With `lse` the entry also returns each row's log-sum-exp of the
scaled scores, [B, Hq, M] float32 (FlashAttention's softmax_lse, natural log). Tensors of any
strides: one that is not row-major (x.transpose(1, 2) of [B, S, H, D]) runs on a row-major copy.

The configuration (AttentionConfig: key tile, consumer warpgroups, K / V stages, a producer
warpgroup, setmaxnreg, O in place, ping-pong, the intra-warpgroup overlap, a persistent grid) is
the first of `candidates` that verifies at the shape (and spills at most SPILL_TOLERANCE bytes
of registers): those measured fastest on an H200 at head
dims 64, 128 and 256, causal and not, short and long sequences (benchmarks/attention.py), then
simpler ones. A configuration the verifier rejects is never compiled; the entry says why each was
rejected if none verifies. Kernels are compiled per shape (the recipe's extents are numbers) and
kept in an LRU cache of `cache_size`. Imports only the public `tileproof` API; torch when called.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import warnings
from collections import OrderedDict

import tileproof as tp

from .attention import AttentionTile, attention
from .device import SMS, device_sms
from .entry_cache import lru_entry
from .matmul import tensor_signature

HEAD_DIMS = (64, 128, 192, 256)
ALIGNMENTS = ("top_left", "bottom_right")
CACHE_SIZE = 16  # compiled kernels an entry keeps (LRU), one per shape and configuration
ENTRY_CACHE_SIZE = 8  # entries sdpa() keeps, one per (is_causal, alignment, scale, lse, target)
SHORT_KEYS = 512  # up to this many keys, the short-sequence configurations
LONG_PERSISTENT_KEYS = 4096  # head dim 64: up to this many keys, the three warpgroups' persistent grid
# bytes of spill stores a candidate may have and still run: H200, at sequence tails (one run, 3 rounds): 8 bytes
# (causal head dim 128, the overlap with Q ahead) ran 0.74 of the spill-free next candidate's time; 52-96 bytes
# (head dim 256's overlap, 64's 256-key tiles) 1.05-2.1 of it; 20-24 bytes (head dim 64's three consumer
# warpgroups with the overlap, at 4096 and 16384 keys) 0.93-0.94 of it
SPILL_TOLERANCE = 24
# a causal per-head grid's choice (per_head_blocks): a row tile's own cost in key tiles' time (the wait for Q and
# the first K / V stage, the epilogue: c = 3.1 measured, docs/attention.md), and the model's gain that takes one
# block a row tile over the configured blocks a head (H200: 1 x 16 x 16384 causal, head dim 64, 11 blocks a head
# (176 blocks on 132 SMs) 298.8 TFLOP/s, one a row tile 435.5; gains under 0.02 were within the spread)
ROW_TILE_COST = 3
PER_HEAD_MARGIN = 0.02


@dataclasses.dataclass(frozen=True)
class AttentionConfig:
    """One schedule of recipes.attention.attention: `key_tile` keys a loop iteration (clamped to N
    rounded up to 16), the other fields its keywords; `persistent`: a persistent grid of
    persistent_blocks(row tiles, SMs) blocks where the shape has more row tiles than SMs and such a
    count divides them (else one block a tile); `per_head` (causal): a persistent grid of that
    many blocks a head (fewer where a head has fewer row tiles), or one a row tile where
    per_head_blocks finds those fill the SMs better, unless `per_head_exact`; `q_stages`: Q loaded by the producer into that many stages where the grid is
    persistent (else the consumers load it); `tma_store`: O written through shared memory, a TMA
    store a box (at a row tail the stmatrix runs at its holes, the TMA store clipping them)."""

    name: str
    key_tile: int
    warpgroups: int = 1
    stages: int = 1
    producer: bool = False
    registers: tuple[int, int] | None = None
    in_place: bool = False
    ping_pong: bool = False
    overlap: bool = False
    persistent: bool = False
    per_head: int | None = None
    per_head_exact: bool = False
    q_stages: int = 1
    tma_store: bool = False

    def keywords(self, tile: AttentionTile, sms: int = SMS) -> dict:
        """attention()'s keywords at `tile`, on a GPU of `sms` SMs."""
        heads, row_tiles = tile.batch * tile.group, -(-tile.rows // (64 * self.warpgroups))
        blocks = None
        if self.per_head and tile.causal:
            blocks = heads * (min(self.per_head, row_tiles) if self.per_head_exact else
                              per_head_blocks(tile, self.warpgroups, self.per_head, sms))
        elif self.persistent and not tile.causal and heads * row_tiles > sms:
            blocks = persistent_blocks(heads * row_tiles, sms)
        return dict(warpgroups=self.warpgroups, stages=self.stages, producer=self.producer, registers=self.registers,
                    in_place=self.in_place, ping_pong=self.ping_pong, overlap=self.overlap, persistent=blocks,
                    q_stages=self.q_stages if blocks else 1, tma_store=self.tma_store)


def persistent_blocks(tiles: int, sms: int = SMS) -> int | None:
    """A persistent grid's blocks over `tiles` equal row tiles: tiles / steps for the fewest steps
    `sms` blocks take, or one more where those are 20 or more (5 % at most), that divide the tiles;
    None where neither does (one block a tile). Blocks that do not divide the tiles leave their last
    step a guard around each wgmma, which ptxas then serializes (C7515): 8 x 32 heads of 22 row tiles
    (5632) on 131 blocks of 43 steps ran 357 TFLOP/s on an H200, on 128 of 44 460."""
    fewest = -(-tiles // sms)
    for steps in (fewest, fewest + 1) if fewest >= 20 else (fewest,):
        if tiles % steps == 0:
            return tiles // steps
    return None


def per_head_blocks(tile: AttentionTile, warpgroups: int, per_head: int, sms: int = SMS) -> int:
    """A causal tile's blocks a head on a per-head grid: `per_head` (at most the row tiles), or one
    block a row tile where that fills the SMs better by PER_HEAD_MARGIN or more in a model of the
    grid (grid_efficiency: row tile r costs ROW_TILE_COST plus its key tiles, one block an SM). Few
    heads leave a grid of few blocks a badly filled last wave (16 heads of 11 blocks: 176 on 132
    SMs, 0.65 of the SMs' time busy), which blocks of one row tile each fill (0.90)."""
    rows, row_tiles, heads = 64 * warpgroups, -(-tile.rows // (64 * warpgroups)), tile.batch * tile.group
    configured = min(per_head, row_tiles)
    if configured == row_tiles:
        return row_tiles
    # row tile r keeps keys j <= i + N - M (top left: M == N), in tiles of key_tile
    costs = [ROW_TILE_COST + -(-min(tile.keys, rows * (r + 1) + tile.keys - tile.rows) // tile.key_tile)
             for r in range(row_tiles)]

    def efficiency(p: int) -> float:
        return grid_efficiency([sum(costs[x::p]) for x in range(p)], heads, sms)

    return row_tiles if efficiency(row_tiles) >= efficiency(configured) + PER_HEAD_MARGIN else configured


def grid_efficiency(block_costs: list[float], repeats: int, sms: int) -> float:
    """The work over `sms` times the makespan of `repeats` copies of the blocks `block_costs`
    (a head's), launched in order onto SMs of one block each, each block to the SM free first."""
    free = [0.0] * sms
    for _ in range(repeats):
        for cost in block_costs:
            heapq.heappush(free, heapq.heappop(free) + cost)
    return repeats * sum(block_costs) / (sms * max(free))


_WS = dict(warpgroups=2, producer=True, registers=(24, 240))
CONFIGS = {c.name: c for c in (
    # H200 (benchmarks/README.md, "O through shared memory"): S <= 512 246-384 TFLOP/s (1.07-1.28 of the direct
    # stores), head dim 128 586-599 (0.99-1.03), causal head dim 128 516 (1.04), at row tails 534 at 4000 rows
    # (1.08) and 347 at 250 (1.52); at head dim 64's long and causal shapes it ran 0.92-0.97 of the direct stores
    AttentionConfig("kt128_wg2_ws2_r240_ip_ov_pst_q2_tma", 128, stages=2, in_place=True, overlap=True, persistent=True,
                    q_stages=2, tma_store=True, **_WS),
    AttentionConfig("kt128_wg2_ws2_r240_ip_ov_ph16_q2_tma", 128, stages=2, in_place=True, overlap=True, per_head=16,
                    q_stages=2, tma_store=True, **_WS),
    # H200 (benchmarks/results/attention/h200.json): the fastest at the long shapes ...
    AttentionConfig("kt128_wg2_ws2_r240_ip_ov_pst_q2", 128, stages=2, in_place=True, overlap=True, persistent=True,
                    q_stages=2, **_WS),  # head dim 128, 566-601 TFLOP/s (Q from the producer, K released early);
    # at S <= 512 also head dim 64: 133-300 (0.75-0.85 of cuDNN, where 64-key tiles or no producer ran 0.57-0.76)
    AttentionConfig("kt128_wg2_ws2_r240_ip_ov_pp_pst_q2", 128, stages=2, in_place=True, overlap=True, ping_pong=True,
                    persistent=True, q_stages=2, **_WS),  # S <= 512: 1.01-1.03 of the same without ping-pong
    AttentionConfig("kt128_wg2_ws3_r240_ip_ov_pst", 128, stages=3, in_place=True, overlap=True, persistent=True,
                    **_WS),  # head dim 128, 565-605 TFLOP/s the run before K was released early
    # head dim 64: three consumer warpgroups (192 rows a block) at 160 registers beside a 24-register producer,
    # FlashAttention-3's form (H200, benchmarks/README.md, "Head dim 64 with three consumer warpgroups"): 449.3
    # TFLOP/s at 4096 keys, 457.5 at 16384 (1.07 of kt256_wg2_ws2_r240_ip_pst_q2 in the same run), causal 370.9 (1.02)
    AttentionConfig("kt128_wg3_ws2_r160_ip_ov_pst_q2", 128, warpgroups=3, stages=2, producer=True,
                    registers=(24, 160), in_place=True, overlap=True, persistent=True, q_stages=2),
    AttentionConfig("kt128_wg3_ws2_r160_ip_ov", 128, warpgroups=3, stages=2, producer=True, registers=(24, 160),
                    in_place=True, overlap=True),
    AttentionConfig("kt128_wg3_ws2_r160_ip_ph11_q2", 128, warpgroups=3, stages=2, producer=True,
                    registers=(24, 160), in_place=True, per_head=11, q_stages=2),
    AttentionConfig("kt256_wg2_ws2_r240_ip_pst_q2", 256, stages=2, in_place=True, persistent=True, q_stages=2,
                    **_WS),  # head dim 64, 454-469 (Q loaded by the producer)
    AttentionConfig("kt256_wg2_ws2_r240_ip", 256, stages=2, in_place=True, **_WS),  # head dim 64, 426-459
    AttentionConfig("kt64_wg2_ws2_r240_ip_ov_pst", 64, stages=2, in_place=True, overlap=True, persistent=True,
                    **_WS),  # head dims 192 and 256, 577 (the overlap after K's early release)
    AttentionConfig("kt64_wg2_ws2_r240_ip_ov", 64, stages=2, in_place=True, overlap=True,
                    **_WS),  # causal head dims 192 and 256, 481
    AttentionConfig("kt64_wg2_ws2_r240_ip", 64, stages=2, in_place=True, **_WS),  # head dims 192 and 256, 543-555
    AttentionConfig("kt128_wg2_ws2_r240_ip_ov_ph16_q2", 128, stages=2, in_place=True, overlap=True, per_head=16,
                    q_stages=2, **_WS),  # causal head dims 128 and 64, 493 and 368 (the scores masked unscaled)
    AttentionConfig("kt128_wg2_ws2_r240", 128, stages=2, **_WS),  # causal head dim 128, 459-490
    AttentionConfig("kt128_wg2_ws3_r240_ip_ph16_q2", 128, stages=3, in_place=True, per_head=16, q_stages=2,
                    **_WS),  # causal head dim 64, 354 (347 before)
    AttentionConfig("kt128_s2", 128, stages=2),  # causal head dim 64, 328
    # ... at short sequences (S <= 256)
    AttentionConfig("kt128_wg2_ws2_r240_ip_pp", 128, stages=2, in_place=True, ping_pong=True, **_WS),
    AttentionConfig("kt128", 128),
    # the simplest schedule: one warpgroup, no pipeline, small tiles (the last candidate everywhere)
    AttentionConfig("kt64", 64),
)}


def candidates(rows: int, keys: int, head_dim: int, value_dim: int, causal: bool) -> tuple[AttentionConfig, ...]:
    """The configurations to try at a shape, in order (the first that verifies runs)."""
    wide = max(head_dim, value_dim)
    # O through shared memory first (tma_store) where it measured faster: head dim 128, short sequences (H200 at
    # row tails too: 4000 rows 508 against 495 TFLOP/s, 250 rows 261 against 228)
    staged = wide == 128 or (wide < 128 and keys <= SHORT_KEYS and not causal)
    if wide > 128:
        names = ["kt64_wg2_ws2_r240_ip_ov" if causal else "kt64_wg2_ws2_r240_ip_ov_pst", "kt64_wg2_ws2_r240_ip"]
    elif causal:
        names = (["kt128_wg3_ws2_r160_ip_ph11_q2"] if wide <= 64 else []) + ["kt128_wg2_ws2_r240_ip_ov_ph16_q2"] + (
            ["kt128_wg2_ws3_r240_ip_ph16_q2", "kt128_s2"] if wide <= 64 else []) + ["kt128_wg2_ws2_r240"]
    elif keys <= SHORT_KEYS:
        names = ["kt128_wg2_ws2_r240_ip_ov_pp_pst_q2", "kt128_wg2_ws2_r240_ip_ov_pst_q2",
                 "kt128" if wide <= 64 else "kt128_wg2_ws2_r240_ip_pp", "kt128"]
    else:
        # the persistent grid where it measured faster: 4096 keys (at 16384 it ran 332 against 458 one block a tile,
        # its 128 blocks not dividing the 1376 row tiles: ptxas serialized the guarded wgmma; persistent_blocks)
        wg3 = "kt128_wg3_ws2_r160_ip_ov_pst_q2" if keys <= LONG_PERSISTENT_KEYS else "kt128_wg3_ws2_r160_ip_ov"
        names = ([wg3, "kt256_wg2_ws2_r240_ip_pst_q2", "kt256_wg2_ws2_r240_ip"] if wide <= 64 else
                 ["kt128_wg2_ws2_r240_ip_ov_pst_q2", "kt128_wg2_ws3_r240_ip_ov_pst"]) + ["kt128_wg2_ws2_r240"]
    names.append("kt64")
    if staged:
        names.insert(0, "kt128_wg2_ws2_r240_ip_ov_ph16_q2_tma" if causal else "kt128_wg2_ws2_r240_ip_ov_pst_q2_tma")
    return tuple(CONFIGS[n] for n in dict.fromkeys(names))


@dataclasses.dataclass(frozen=True)
class Problem:
    """One call's sizes: batch B, query heads Hq, key / value heads Hkv, queries M, keys N, head
    dims D and Dv."""

    batch: int
    heads: int
    kv_heads: int
    rows: int
    keys: int
    head_dim: int
    value_dim: int

    @classmethod
    def of(cls, q_shape, k_shape, v_shape) -> "Problem":
        """The sizes of q [B, Hq, M, D], k [B, Hkv, N, D], v [B, Hkv, N, Dv], or an InputError
        naming what does not fit."""
        for name, shape in (("q", q_shape), ("k", k_shape), ("v", v_shape)):
            if len(shape) != 4:
                raise tp.InputError(f"sdpa: {name} must have 4 dimensions [B, H, S, D] (SDPA's layout), got shape "
                                    f"{list(shape)}")
        (b, hq, m, d), (bk, hkv, n, dk), (bv, hv, nv, dv) = (tuple(int(s) for s in x) for x in (q_shape, k_shape, v_shape))
        if not b == bk == bv:
            raise tp.InputError(f"sdpa: q, k and v must have the same batch B, got {b}, {bk} and {bv}")
        if hkv != hv or n != nv:
            raise tp.InputError(f"sdpa: k [B, Hkv, N, D] and v [B, Hkv, N, Dv] must have the same heads and keys, got "
                                f"k {list(k_shape)} and v {list(v_shape)}")
        if dk != d:
            raise tp.InputError(f"sdpa: q and k must have the same head dim D, got {d} and {dk}")
        if hkv < 1 or hq % hkv:
            raise tp.InputError(f"sdpa: q's heads Hq = {hq} must be a multiple of k's and v's Hkv = {hkv} (each key / "
                                f"value head serves Hq / Hkv query heads)")
        for what, value in (("q's head dim D", d), ("v's head dim Dv", dv)):
            if value not in HEAD_DIMS:
                raise tp.InputError(f"sdpa: {what} must be one of {', '.join(map(str, HEAD_DIMS))} (whole 128-byte "
                                    f"swizzle spans of bfloat16), got {value}")
        for what, value in (("queries M", m), ("keys N", n), ("batch B", b)):
            if value < (1 if what == "batch B" else 2):
                raise tp.InputError(f"sdpa: {what} = {value}: "
                                    + ("an empty batch" if what == "batch B" else
                                       "one row or key is a broadcast axis to the recipe; pad it to two"))
        problem = cls(b, hq, hkv, m, n, d, dv)
        if problem.z > 65535 or problem.group > 65535:
            raise tp.InputError(f"sdpa: B x Hkv = {problem.z} and Hq / Hkv = {problem.group} are grid dimensions: "
                                f"each at most 65535")
        return problem

    @property
    def z(self) -> int:
        return self.batch * self.kv_heads

    @property
    def group(self) -> int:
        return self.heads // self.kv_heads

    def tile(self, config: AttentionConfig, causal: bool, scale: float | None) -> AttentionTile:
        key_tile = min(config.key_tile, -(-self.keys // 16) * 16)
        return AttentionTile(rows=self.rows, keys=self.keys, head_dim=self.head_dim, value_dim=self.value_dim,
                             batch=self.z, group=self.group, scale=scale, key_tile=key_tile, causal=causal)


def _torch():
    try:
        import torch  # an optional extra: imported only when the entry is called
    except ImportError as e:
        raise ImportError(f"tileproof.recipes.sdpa takes PyTorch tensors ({e})") from None
    return torch


def _check_tensor(name: str, t, device, address: bool = True) -> None:
    """What the kernel needs of one operand: a bfloat16 CUDA tensor, 16-byte aligned (`address`:
    False for a fake tensor, which has none); any strides (Attention copies a strided one)."""
    if not all(hasattr(t, a) for a in ("shape", "dtype", "device", "is_contiguous", "data_ptr")):
        raise tp.InputError(f"sdpa: {name} must be a torch.Tensor, got {type(t).__name__}")
    dtype = str(t.dtype).removeprefix("torch.")
    if dtype != "bfloat16":
        raise tp.InputError(f"sdpa: {name} must be bfloat16, got {dtype}")
    if t.device.type != "cuda":
        raise tp.InputError(f"sdpa: {name} must be on a CUDA device, got {t.device}")
    if t.device != device:
        raise tp.InputError(f"sdpa: q, k and v must be on one device, got {name} on {t.device} and q on {device}")
    if address and t.data_ptr() % 16:
        raise tp.InputError(f"sdpa: {name}'s address must be a multiple of 16 bytes (TMA), got {t.data_ptr():#x}")


class Attention:
    """softmax(q k^T scale (+ the causal mask)) v on PyTorch tensors in SDPA's layout (see the
    module's text): call it on (q, k, v) for the output [B, Hq, M, Dv] bfloat16 (with lse=True,
    (output, lse)); tp.as_torch_op(Attention(...)) makes it an operator. config: None (each shape's
    candidates), or an AttentionConfig or its name (CONFIGS) to run every shape with."""

    input_names = ("q", "k", "v")

    def __init__(self, is_causal: bool = False, scale: float | None = None, lse: bool = False,
                 causal_alignment: str = "top_left", target: str = "sm_90a", config=None,
                 cache_size: int = CACHE_SIZE):
        for name, value in (("is_causal", is_causal), ("lse", lse)):
            if not isinstance(value, bool):
                raise tp.InputError(f"sdpa: {name} must be True or False, got {value!r}")
        if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))
                                  or not math.isfinite(scale) or scale <= 0):
            raise tp.InputError(f"sdpa: scale must be a positive finite number or None (1 / sqrt(D)), got {scale!r}")
        if causal_alignment not in ALIGNMENTS:
            raise tp.InputError(f"sdpa: causal_alignment must be one of {', '.join(ALIGNMENTS)}, got "
                                f"{causal_alignment!r}")
        if isinstance(config, str):
            if config not in CONFIGS:
                raise tp.InputError(f"sdpa: no configuration named {config!r}; one of {', '.join(CONFIGS)}")
            config = CONFIGS[config]
        if not isinstance(config, (AttentionConfig, type(None))):
            raise tp.InputError(f"sdpa: config must be an AttentionConfig, its name or None, got {config!r}")
        if not isinstance(cache_size, int) or isinstance(cache_size, bool) or cache_size < 1:
            raise tp.InputError(f"sdpa: cache_size must be a positive int, got {cache_size!r}")
        self.is_causal, self.scale, self.lse = is_causal, None if scale is None else float(scale), lse
        self.causal_alignment, self.target, self.config, self.cache_size = causal_alignment, target, config, cache_size
        self.output_count = 2 if lse else 1
        self._kernels: OrderedDict[tuple[Problem, int], tuple[AttentionConfig, tp.Kernel]] = OrderedDict()
        self._problems: dict[tuple, Problem] = {}  # per call signature: the checks' verdict
        self._ready: dict[tuple, _Ready] = {}  # per signature, addresses and stream: the packed launch

    def __repr__(self) -> str:
        parts = [f"is_causal={self.is_causal}"] + [f"{k}={v!r}" for k, v in (
            ("scale", self.scale), ("lse", self.lse or None), ("config", self.config and self.config.name),
            ("causal_alignment", None if self.causal_alignment == "top_left" else self.causal_alignment),
            ("target", None if self.target == "sm_90a" else self.target)) if v is not None]
        return f"Attention({', '.join(parts)})"

    def problem(self, q_shape, k_shape, v_shape) -> Problem:
        """The call's sizes (Problem.of), and for a causal call the alignment's condition."""
        problem = Problem.of(q_shape, k_shape, v_shape)
        if self.is_causal and self.causal_alignment == "top_left" and problem.rows != problem.keys:
            raise tp.InputError(f"sdpa: is_causal with M = {problem.rows} queries and N = {problem.keys} keys: SDPA's "
                                f"mask keeps key j for query i where j <= i (top left), this kernel's where j <= i + "
                                f"N - M (bottom right, FlashAttention's); they agree where M == N. Pass "
                                f"causal_alignment='bottom_right' for the latter")
        if self.is_causal and problem.rows > problem.keys:
            raise tp.InputError(f"sdpa: a bottom-right causal mask with M = {problem.rows} queries > N = "
                                f"{problem.keys} keys leaves the first {problem.rows - problem.keys} queries no key")
        return problem

    def kernel(self, problem: Problem, sms: int = SMS) -> tuple[AttentionConfig, tp.Kernel]:
        """The configuration and kernel this entry runs at `problem` on a GPU of `sms` SMs: the
        first candidate that verifies and compiles with at most SPILL_TOLERANCE bytes of register
        spills (ptxas spills some at sequence tails that the measured shapes do not have) and its
        wgmma.mma_async not serialized, else the first that verifies, with its PerformanceWarning
        (or the forced one, as it compiles), compiled on first use and kept (LRU)."""
        found = self._kernels.get((problem, sms))
        if found is not None:
            self._kernels.move_to_end((problem, sms))
            return found
        configs = (self.config,) if self.config is not None else candidates(
            problem.rows, problem.keys, problem.head_dim, problem.value_dim, self.is_causal)
        rejected, slow = [], None
        for config in configs:
            tile = problem.tile(config, self.is_causal, self.scale)
            try:  # tp.compile verifies first: a rejected configuration is never lowered or compiled
                with warnings.catch_warnings(record=True) as told:
                    warnings.simplefilter("always")
                    kernel = tp.compile(attention(tile, lse=self.lse, **config.keywords(tile, sms)), self.target)
            except tp.ScheduleRejected as e:
                rejected.append(f"{config.name}: {', '.join(e.report.codes)}")
                continue
            except tp.ScheduleError as e:  # the recipe refused the configuration at this shape
                rejected.append(f"{config.name}: {e}")
                continue
            spills = kernel.resources.spill_store_bytes if kernel.resources is not None else 0
            if spills > SPILL_TOLERANCE or (kernel.resources is not None and kernel.resources.wgmma_serialized):
                slow = slow or (config, kernel, told)
                continue
            if 0 < spills <= SPILL_TOLERANCE and self.config is None:  # measured harmless; our choice, not the caller's
                told = [w for w in told if not issubclass(w.category, tp.PerformanceWarning)]
            return self._keep((problem, sms), config, kernel, told)
        if slow is not None:
            return self._keep((problem, sms), *slow)
        raise tp.InputError(f"sdpa: no configuration verifies at {problem} for {self.target} ("
                            + "; ".join(rejected) + "); tp.verify(recipes.attention.attention(...)) shows why")

    def _keep(self, key: tuple, config: AttentionConfig, kernel: tp.Kernel, told) -> tuple:
        """(config, kernel) cached for `key` (the problem and the SMs), the warnings its compile gave passed on."""
        for w in told:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        found = self._kernels[key] = (config, kernel)
        while len(self._kernels) > self.cache_size:
            self._kernels.popitem(last=False)
        return found

    def _checked(self, q, k, v, address: bool = True) -> Problem:
        _check_tensor("q", q, getattr(q, "device", None), address)
        for name, t in (("k", k), ("v", v)):
            _check_tensor(name, t, q.device, address)
        return self.problem(tuple(q.shape), tuple(k.shape), tuple(v.shape))

    def __call__(self, q, k, v):
        if _strided(q, k, v):  # a view such as x.transpose(1, 2) of [B, S, H, D]: run on a row-major copy
            self._checked(q, k, v, address=False)
            return self._launch(q.contiguous(), k.contiguous(), v.contiguous(), keep=False)
        return self._launch(q, k, v)

    def _launch(self, q, k, v, keep: bool = True):
        """The call on row-major tensors; `keep`: pack the launch for these addresses (not for a
        copy made for this call alone, whose addresses the next call does not repeat)."""
        try:  # what the checks read of the tensors, all but their addresses; the stream the launch takes
            key = tensor_signature(q) + tensor_signature(k) + tensor_signature(v)
            stream = tp.Kernel.default_stream(q)
            ready = self._ready.get((key, q.data_ptr(), k.data_ptr(), v.data_ptr(), stream))
        except Exception:  # noqa: BLE001 - no tensor: the checks say what is wrong
            key = ready = None
        if ready is not None and ready.kernel.current(ready.launch):  # a repeated call: one packed launch
            return self._shaped(ready.problem, ready.launch.launch_new_outputs())
        problem = self._problems.get(key) if key is not None else None
        if problem is None or any(t.data_ptr() % 16 for t in (q, k, v)):
            problem = self._checked(q, k, v)  # every check (a known signature: the addresses)
            if key is not None:
                if len(self._problems) >= 4 * self.cache_size:
                    self._problems.clear()
                self._problems[key] = problem
        _, kernel = self.kernel(problem, device_sms(_torch(), q.device))
        z, g, m, n, d, dv = problem.z, problem.group, problem.rows, problem.keys, problem.head_dim, problem.value_dim
        # the recipe's operands, views of the same memory: Q [Z, G, M, 1, D], K [Z, 1, 1, N, D], V [Z, 1, 1, Dv, N]
        views = (q.view(z, g, m, 1, d), k.view(z, 1, 1, n, d), v.view(z, n, dv).transpose(1, 2).unsqueeze(1).unsqueeze(1))
        outs = kernel.run(*views)
        if key is not None and keep:
            if len(self._ready) >= 4 * self.cache_size:
                self._ready.clear()
            self._ready[(key, q.data_ptr(), k.data_ptr(), v.data_ptr(), stream)] = _Ready(
                problem, kernel, kernel.prepared(*views))
        return self._shaped(problem, outs)

    def _shaped(self, problem: Problem, outs):
        """The kernel's outputs [Z, G, M, Dv] (and [Z, G, M]) as [B, Hq, M, Dv] (and [B, Hq, M])."""
        out = outs[0].view(problem.batch, problem.heads, problem.rows, problem.value_dim)
        return (out, outs[1].view(problem.batch, problem.heads, problem.rows)) if self.lse else out

    def fake(self, q, k, v):
        """The outputs as __call__ allocates them, without running (tp.as_torch_op's fake implementation)."""
        problem = self._checked(q, k, v, address=False)
        torch = _torch()
        out = torch.empty(problem.batch, problem.heads, problem.rows, problem.value_dim, device=q.device,
                          dtype=torch.bfloat16)
        if not self.lse:
            return out
        return out, torch.empty(problem.batch, problem.heads, problem.rows, device=q.device, dtype=torch.float32)


def _strided(*tensors) -> bool:
    """Whether any of `tensors` (each with is_contiguous: else the checks say what it is) is not
    row-major."""
    return all(callable(getattr(t, "is_contiguous", None)) for t in tensors) and not all(
        t.is_contiguous() for t in tensors)


@dataclasses.dataclass(frozen=True)
class _Ready:
    """A call's launch packed once for one signature at one set of addresses on one stream
    (Kernel.prepared): a repeated call costs the launch and its outputs' allocation."""

    problem: Problem
    kernel: tp.Kernel
    launch: object


_entries: "OrderedDict[tuple, Attention]" = OrderedDict()


def sdpa(q, k, v, is_causal: bool = False, scale: float | None = None, *, lse: bool = False,
         causal_alignment: str = "top_left", target: str = "sm_90a"):
    """Attention(is_causal, scale, lse, causal_alignment, target)(q, k, v), the entries kept per
    their arguments (the last ENTRY_CACHE_SIZE used)."""
    def make() -> Attention:
        return Attention(is_causal, scale, lse, causal_alignment, target)

    try:
        entry = lru_entry(_entries, (is_causal, scale, lse, causal_alignment, target), make, ENTRY_CACHE_SIZE)
    except TypeError:  # an unhashable argument: the entry's checks name it
        entry = make()
    return entry(q, k, v)


__all__ = ["Attention", "AttentionConfig", "CONFIGS", "Problem", "candidates", "sdpa"]
