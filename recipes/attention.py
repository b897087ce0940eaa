"""Attention's first building block on Hopper, scheduled with the public API: softmax(Q K^T) V
where the keys and values are one tile (issue 36's row reductions over a wgmma fragment and the
RS wgmma from P's registers; the online softmax over many key tiles builds on it).

    fusion = one_tile_attention(AttentionTile(rows=128, keys=64, head_dim=64, value_dim=64))

Inputs Q [M, 1, D] (row-major [M, D]), K [1, N, D] (row-major [N, D]) and V [1, Dv, N] (row-major
[N, Dv]: N-major for the second product), bfloat16; output O [M, Dv] bfloat16, float32 inside:

    S = Q K^T                      a wgmma m64nNk16 per 16 of D, both operands TMA tiles
    m = max(S, 1)                  each row's max over the C fragment
    P = exp2((S - m) * scale log2 e)
    l = sum(P, 1)
    O = cast(P, bf16) V / l        a wgmma with A from registers (RS), P's fragment reused as A

Every tile lives in one warpgroup's registers as wgmma's C fragment with a row's four threads on
TIDx (schedule_mma_fragment(..., quads=True): TIDy{32} x TIDx{4}, the warpgroup's thread
threadIdx.x + 4 threadIdx.y), so a row's max and sum are an in-thread reduction of the row's
registers then a reduction over TIDx by warp shuffles, and every thread of the row holds the
total. P, converted to bfloat16, is the second wgmma's A fragment in the same threads (hw/mma.py
accumulator_as_a); MMA-OPERAND-LAYOUT proves each thread's registers hold what the instruction
reads. A block computes 64 rows of Q (blockIdx.x).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import tileproof as tp

from .hopper_gemm import mn_major_box

P = tp.ParallelType
ROWS = 64  # a warpgroup's wgmma tile: the rows of Q a block computes
HEADS = 2  # the leading axes [Z (batch x key / value heads), G (query heads per key / value head)]
GRID_YZ = 65535  # gridDim.y and gridDim.z at most
SWIZZLE = tp.MmaInputSmemSwizzle.B128
SPAN = 64  # bfloat16 elements in one 128-byte swizzle span


@dataclass(frozen=True)
class AttentionTile:
    """rows: the queries M of each head (a multiple of 64: a block each 64); keys: N, the one key tile
    (16 to 256, a multiple of 16); head_dim: D (64 or 128: one or two 128-byte swizzle spans);
    value_dim: Dv (64 to 256, a multiple of 64); batch: the key / value heads times the batch (Z);
    group: the query heads sharing each key / value head (grouped-query attention, G; 1: one each);
    scale: the softmax scale (default 1 / sqrt(D))."""

    rows: int
    keys: int = 64
    head_dim: int = 64
    value_dim: int = 64
    batch: int = 1
    group: int = 1
    scale: float | None = None

    def __post_init__(self):
        problems = []
        if not (isinstance(self.rows, int) and self.rows > 0 and self.rows % ROWS == 0):
            problems.append(f"rows must be a positive multiple of {ROWS}, got {self.rows!r}")
        if not (isinstance(self.keys, int) and 16 <= self.keys <= 256 and self.keys % 16 == 0):
            problems.append(f"keys must be a multiple of 16 from 16 to 256 (one wgmma's N), got {self.keys!r}")
        if self.head_dim not in (SPAN, 2 * SPAN):
            problems.append(f"head_dim must be {SPAN} or {2 * SPAN} (128-byte swizzle spans of bfloat16), "
                            f"got {self.head_dim!r}")
        if not (isinstance(self.value_dim, int) and SPAN <= self.value_dim <= 256 and self.value_dim % SPAN == 0):
            problems.append(f"value_dim must be 64, 128, 192 or 256 (whole swizzle spans, one wgmma's N), "
                            f"got {self.value_dim!r}")
        for name in ("batch", "group"):
            value = getattr(self, name)
            if not (isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= GRID_YZ):
                problems.append(f"{name} must be an int from 1 to {GRID_YZ} (a grid dimension), got {value!r}")
        if self.scale is not None and not (isinstance(self.scale, (int, float)) and self.scale > 0):
            problems.append(f"scale must be a positive number, got {self.scale!r}")
        if problems:
            raise tp.ScheduleError("AttentionTile: " + "; ".join(problems))

    @property
    def softmax_scale(self) -> float:
        return self.scale if self.scale is not None else 1.0 / math.sqrt(self.head_dim)


def one_tile_attention(tile: AttentionTile) -> tp.Fusion:
    """The fusion of O = softmax(Q K^T scale) V over one key tile, scheduled (module docstring)."""
    score = getattr(tp.MmaMacro, f"Hopper_64_{tile.keys}_16")
    value = getattr(tp.MmaMacro, f"Hopper_64_{tile.value_dim}_16")
    z, g, d, dv, n = tile.batch, tile.group, tile.head_dim, tile.value_dim, tile.keys
    with tp.Fusion("one_tile_attention") as fusion:
        q = tp.make_contig_concrete_tensor([z, g, tile.rows, 1, d], dtype=tp.bfloat16, name="Q")
        k = tp.make_contig_concrete_tensor([z, 1, 1, n, d], dtype=tp.bfloat16, name="K")
        v = tp.make_contig_concrete_tensor([z, 1, 1, dv, n], dtype=tp.bfloat16, name="V")
        for t in (q, k, v):
            fusion.add_input(t)
        s = tp.fused_multiply_sum(q, k, [-1])  # [Z, G, M, N]
        row = [False, False, False, True]  # a row vector [Z, G, M] along the tile's columns
        row_max = tp.max(s, 3)
        shifted = tp.mul(tp.sub(s, tp.broadcast(row_max, row)), tile.softmax_scale * math.log2(math.e))
        p = tp.exp2(shifted)
        row_sum = tp.sum(p, 3)
        p_a = tp.broadcast(tp.cast(p, tp.bfloat16), [False, False, False, True, False])  # [Z, G, M, 1, N]: A
        o = tp.fused_multiply_sum(p_a, v, [-1])  # [Z, G, M, Dv]
        normalized = tp.div(o, tp.broadcast(row_sum, row))
        out = tp.cast(normalized, tp.bfloat16)
        fusion.add_output(out)
    v.set_allocation_domain([v.axis(i) for i in (0, 1, 2, 4, 3)], True)  # V [Z, N, Dv] row-major
    s.definition.set_macro(score)
    o.definition.set_macro(value)
    _operand_tiles(q, k, v)
    for t in (s, o):  # [Z, G, Mo, K steps, 64, N, 16]: the accumulators as wgmma's C fragment, quads on TIDx
        t.split(HEADS, ROWS).split(HEADS + 3, 16).reorder({HEADS + 3: HEADS + 1})
        t.set_allocation_domain(tp.mma_output_allocation(t, quads=True), True)
        for i in range(HEADS + 2, HEADS + 5):
            t.axis(i).parallelize(P.Mma)
    # [Z, G, Mo, K steps, 1, 64, 16]: 16 keys a wgmma of the second product
    p_a.split(HEADS, ROWS).split(HEADS + 3, 16).reorder({HEADS + 1: HEADS + 3, HEADS + 3: HEADS + 1})
    tp.schedule_mma_fragment(p_a, value, tp.MmaOperand.A, quads=True)
    p_a.inline_at(HEADS + 2)  # converted for each wgmma of the second product, inside its loop
    computed = [t for t in fusion.tensors if not t.is_fusion_input]
    for t in computed:
        if t.memory_type is not tp.MemoryType.Shared and t not in (s, o, p_a):
            # [Z, G, Mo, 64, ..]: S's and O's tiles, row vectors and row reductions as the C fragment
            t.split(HEADS, ROWS)
            tp.schedule_mma_fragment(t, value if t in (normalized, out) else score, "C", quads=True)
    for t in computed:  # the key / value heads on blockIdx.z, the group's query heads on y, 64 rows on x
        for axis, kind in zip(t.get_loop_domain()[:HEADS + 1], (P.BIDz, P.BIDy, P.BIDx)):
            if not axis.is_broadcast:
                axis.parallelize(kind)
    for t in computed:
        if t not in (out, p_a):
            t.inline_at(HEADS + 1)  # each tensor whole in the block's registers (or shared memory), in order
    return fusion


def _operand_tiles(q, k, v) -> None:
    """Q's 64 rows a block, K and V whole, loaded by TMA into shared memory in wgmma's 128-byte
    swizzle: a head dim of two spans as a loop of two boxes; V's as N-major boxes, read transposed."""
    sq, sk, sv = (t.cache_after(tp.LoadStoreOpType.TMA) for t in (q, k, v))
    for t in (sq, sk, sv):
        t.set_memory_type(tp.MemoryType.Shared)
    sq.split(HEADS, ROWS).reorder({HEADS + 2: HEADS + 1})  # [Z, G, Mo, 1, 64, D]
    sk.split(HEADS, 1)  # [Z, 1, 1, 1, N, D]
    sv.split(HEADS, 1)  # [Z, 1, 1, 1, Dv, N]
    for t in (sq, sk):
        if t.get_loop_domain()[-1].static_extent > SPAN:  # [.., rows, D / 64 (a loop of boxes), 64] -> [.., D / 64, rows, 64]
            t.split(-1, SPAN).reorder({-2: -3})
        t.apply_mma_swizzle_for_tma_load(SWIZZLE)
    mn_major_box(sv, 128)  # [Z, 1, 1, 1, Dv / 64 (a loop of boxes), N, 64]
    for t in (sq, sk, sv):
        boxes = t is sv or q.logical[-1].static_extent > SPAN
        for i in t.get_loop_domain()[HEADS + 2 + boxes:]:
            i.parallelize(P.Bulk)
        t.set_allocation_domain(t.get_loop_domain(), True)


def attention_views(q, k, v):
    """PyTorch's layout [B, H, S, D] (SDPA's: q [B, Hq, M, D], k [B, Hkv, N, D], v [B, Hkv, N, Dv],
    row-major, Hq a multiple of Hkv) as one_tile_attention's inputs: Q [Z, G, M, 1, D],
    K [Z, 1, 1, N, D], V [Z, 1, 1, Dv, N] (N-major) with Z = B Hkv and G = Hq / Hkv, views of the same
    memory. The output [Z, G, M, Dv] is [B, Hq, M, Dv] reshaped."""
    b, hq, m, d = q.shape
    hkv, n, dv = k.shape[1], k.shape[2], v.shape[3]
    z, g = b * hkv, hq // hkv
    return (q.reshape(z, g, m, 1, d), k.reshape(z, 1, 1, n, d),
            v.reshape(z, n, dv).transpose(1, 2).reshape(z, 1, 1, dv, n))


__all__ = ["AttentionTile", "attention_views", "one_tile_attention"]
