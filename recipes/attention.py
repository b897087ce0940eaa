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
SWIZZLE = tp.MmaInputSmemSwizzle.B128
SPAN = 64  # bfloat16 elements in one 128-byte swizzle span


@dataclass(frozen=True)
class AttentionTile:
    """rows: Q's rows M (a multiple of 64: a block each 64); keys: N, the one key tile (16 to 256,
    a multiple of 16); head_dim: D (64: one swizzle span); value_dim: Dv (64 to 256, a multiple of
    64); scale: the softmax scale (default 1 / sqrt(D))."""

    rows: int
    keys: int = 64
    head_dim: int = 64
    value_dim: int = 64
    scale: float | None = None

    def __post_init__(self):
        problems = []
        if not (isinstance(self.rows, int) and self.rows > 0 and self.rows % ROWS == 0):
            problems.append(f"rows must be a positive multiple of {ROWS}, got {self.rows!r}")
        if not (isinstance(self.keys, int) and 16 <= self.keys <= 256 and self.keys % 16 == 0):
            problems.append(f"keys must be a multiple of 16 from 16 to 256 (one wgmma's N), got {self.keys!r}")
        if self.head_dim != SPAN:
            problems.append(f"head_dim must be {SPAN} (one 128-byte swizzle span of bfloat16), got {self.head_dim!r}")
        if not (isinstance(self.value_dim, int) and SPAN <= self.value_dim <= 256 and self.value_dim % SPAN == 0):
            problems.append(f"value_dim must be 64, 128, 192 or 256 (whole swizzle spans, one wgmma's N), "
                            f"got {self.value_dim!r}")
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
    with tp.Fusion("one_tile_attention") as fusion:
        q = tp.make_contig_concrete_tensor([tile.rows, 1, tile.head_dim], dtype=tp.bfloat16, name="Q")
        k = tp.make_contig_concrete_tensor([1, tile.keys, tile.head_dim], dtype=tp.bfloat16, name="K")
        v = tp.make_contig_concrete_tensor([1, tile.value_dim, tile.keys], dtype=tp.bfloat16, name="V")
        for t in (q, k, v):
            fusion.add_input(t)
        s = tp.fused_multiply_sum(q, k, [-1])
        row_max = tp.max(s, 1)
        shifted = tp.mul(tp.sub(s, tp.broadcast(row_max, [False, True])), tile.softmax_scale * math.log2(math.e))
        p = tp.exp2(shifted)
        row_sum = tp.sum(p, 1)
        p_a = tp.broadcast(tp.cast(p, tp.bfloat16), [False, True, False])  # [M, 1, N]: the A operand
        o = tp.fused_multiply_sum(p_a, v, [-1])
        normalized = tp.div(o, tp.broadcast(row_sum, [False, True]))
        out = tp.cast(normalized, tp.bfloat16)
        fusion.add_output(out)
    v.set_allocation_domain([v.axis(0), v.axis(2), v.axis(1)], True)  # V [N, Dv] row-major
    s.definition.set_macro(score)
    o.definition.set_macro(value)
    _operand_tiles(q, k, v)
    for t in (s, o):  # [Mo, K steps, 64, N, 16]: the accumulators as wgmma's C fragment, quads on TIDx
        t.split(0, ROWS).split(3, 16).reorder({3: 1})
        t.set_allocation_domain(tp.mma_output_allocation(t, quads=True), True)
        for i in range(2, 5):
            t.axis(i).parallelize(P.Mma)
    p_a.split(0, ROWS).split(3, 16).reorder({1: 3, 3: 1})  # [Mo, K steps, 1, 64, 16]: 16 keys a wgmma
    tp.schedule_mma_fragment(p_a, value, tp.MmaOperand.A, quads=True)
    p_a.inline_at(2)  # converted for each wgmma of the second product, inside its loop
    computed = [t for t in fusion.tensors if not t.is_fusion_input]
    for t in computed:
        if t.memory_type is not tp.MemoryType.Shared and t not in (s, o, p_a):
            # [Mo, 64, ..]: S's and O's tiles, row vectors and row reductions as the C fragment
            t.split(0, ROWS)
            tp.schedule_mma_fragment(t, value if t in (normalized, out) else score, "C", quads=True)
    for t in computed:
        if not t.axis(0).is_broadcast:
            t.axis(0).parallelize(P.BIDx)
    for t in computed:
        if t not in (out, p_a):
            t.inline_at(1)  # each tensor whole in the block's registers (or shared memory), in order
    return fusion


def _operand_tiles(q, k, v) -> None:
    """Q's 64 rows a block, K and V whole, loaded by TMA into shared memory in wgmma's 128-byte
    swizzle (V's as N-major boxes, read transposed)."""
    sq, sk, sv = (t.cache_after(tp.LoadStoreOpType.TMA) for t in (q, k, v))
    for t in (sq, sk, sv):
        t.set_memory_type(tp.MemoryType.Shared)
    sq.split(0, ROWS).reorder({2: 1})  # [Mo, 1, 64, D]
    sk.split(0, 1)  # [1, 1, N, D]
    sv.split(0, 1)  # [1, 1, Dv, N]
    sq.apply_mma_swizzle_for_tma_load(SWIZZLE)
    sk.apply_mma_swizzle_for_tma_load(SWIZZLE)
    mn_major_box(sv, 128)  # [1, 1, Dv / 64 (a loop of boxes), N, 64]
    for t in (sq, sk, sv):
        for i in t.get_loop_domain()[2 + (t is sv):]:
            i.parallelize(P.Bulk)
        t.set_allocation_domain(t.get_loop_domain(), True)


__all__ = ["AttentionTile", "one_tile_attention"]
