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

from .gemm_blocks import permute, store_boxes, through_shared
from .hopper_gemm import mn_major_box

P = tp.ParallelType
ROWS = 64  # a warpgroup's wgmma tile: the rows of Q a block computes
HEADS = 2  # the leading axes [Z (batch x key / value heads), G (query heads per key / value head)]
GRID_YZ = 65535  # gridDim.y and gridDim.z at most
SWIZZLE = tp.MmaInputSmemSwizzle.B128
SPAN = 64  # bfloat16 elements in one 128-byte swizzle span


@dataclass(frozen=True)
class AttentionTile:
    """rows: the queries M of each head, 2 or more (a block each 64, the last one's rows past M zeros that
    are not stored); keys: N, the one key tile (16 to 256, a multiple of 16), or with key_tile any number of
    keys in tiles of key_tile (16 to 256, a multiple of 16: one wgmma's N), run by attention()'s
    online softmax (the last tile's keys past N: K and V are TMA zeros, the row max and sum skip
    them, and P is written 0 there for the second product, execution/zero_padding.py); head_dim: D (64 to 256, a multiple of 64: whole 128-byte swizzle spans, a TMA box each); value_dim: Dv (64 to
    256, a multiple of 64); batch: the key / value heads times the batch (Z); group: the query heads
    sharing each key / value head (grouped-query attention, G; 1: one each); scale: the softmax
    scale (default 1 / sqrt(D)); masked: attention() adds a fourth input, Mask [M, N] bfloat16,
    to the scaled scores before the softmax, as SDPA's attn_mask: softmax(Q K^T scale + Mask) V (0 to
    keep a score, -inf to drop it: causal_mask builds the causal one; any additive bias works);
    causal: attention() keeps key j for query i where j <= i + N - M (the queries are the last M
    positions: SDPA's is_causal for M == N, FlashAttention's bottom-right alignment otherwise) and
    drops the others, a predicate of two tp.iota (no Mask input, no bytes read): scores =
    where(j <= i + N - M, S scale, -inf); M <= N, so that every query keeps key 0 (the first key
    tile's: no row's running max is -inf after it, and exp2(-inf - -inf) never runs)."""

    rows: int
    keys: int = 64
    head_dim: int = 64
    value_dim: int = 64
    batch: int = 1
    group: int = 1
    scale: float | None = None
    key_tile: int | None = None
    masked: bool = False
    causal: bool = False

    def __post_init__(self):
        problems = []
        if not (isinstance(self.rows, int) and not isinstance(self.rows, bool) and self.rows > 0):
            problems.append(f"rows must be a positive int (the last block's rows past it are zeros, not stored), "
                            f"got {self.rows!r}")
        elif self.rows == 1:  # found by the fuzzer: attention() failed in rfactor, one_tile_attention was rejected
            problems.append("rows must be at least 2: an extent-1 axis is a broadcast, so Q of one row has no row "
                            "axis for the wgmma's M (pad Q to two rows and drop the second output row)")
        if self.key_tile is None and not (isinstance(self.keys, int) and 16 <= self.keys <= 256 and self.keys % 16 == 0):
            problems.append(f"keys must be a multiple of 16 from 16 to 256 (one wgmma's N), got {self.keys!r}; "
                            f"more keys are tiles of key_tile")
        if self.key_tile is not None:
            if not (isinstance(self.key_tile, int) and 16 <= self.key_tile <= 256 and self.key_tile % 16 == 0):
                problems.append(f"key_tile must be a multiple of 16 from 16 to 256 (one wgmma's N), got {self.key_tile!r}")
            elif not (isinstance(self.keys, int) and not isinstance(self.keys, bool) and self.keys > 0):
                problems.append(f"keys must be a positive int (the last key tile's keys past it are masked), "
                                f"got {self.keys!r}")
            elif self.keys == 1:  # found by the fuzzer: the row max failed deep in tp.max
                problems.append("keys must be at least 2: an extent-1 axis is a broadcast, so one key has no key "
                                "axis for the row max and sum (pad K and V to two keys, masking the second)")
        if not (isinstance(self.head_dim, int) and SPAN <= self.head_dim <= 256 and self.head_dim % SPAN == 0):
            problems.append(f"head_dim must be 64, 128, 192 or 256 (whole 128-byte swizzle spans of bfloat16), "
                            f"got {self.head_dim!r}")
        if not (isinstance(self.value_dim, int) and SPAN <= self.value_dim <= 256 and self.value_dim % SPAN == 0):
            problems.append(f"value_dim must be 64, 128, 192 or 256 (whole swizzle spans, one wgmma's N), "
                            f"got {self.value_dim!r}")
        for name in ("batch", "group"):
            value = getattr(self, name)
            if not (isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= GRID_YZ):
                problems.append(f"{name} must be an int from 1 to {GRID_YZ} (a grid dimension), got {value!r}")
        if self.scale is not None and not (isinstance(self.scale, (int, float)) and not isinstance(self.scale, bool)
                                           and math.isfinite(self.scale) and self.scale > 0):
            problems.append(f"scale must be a positive finite number, got {self.scale!r}")
        if not isinstance(self.masked, bool):
            problems.append(f"masked must be True or False, got {self.masked!r}")
        if not isinstance(self.causal, bool):
            problems.append(f"causal must be True or False, got {self.causal!r}")
        elif self.causal and self.masked is True:
            problems.append("causal and masked exclude each other: causal is the mask computed from the indices "
                            "(for a causal mask plus a bias, pass masked=True and add causal_mask to the bias)")
        elif self.causal and isinstance(self.rows, int) and isinstance(self.keys, int) and self.rows > self.keys:
            problems.append(f"causal needs rows <= keys: with {self.rows} queries the last of {self.keys} keys, the "
                            f"first {self.rows - self.keys} queries see no key (an empty softmax)")
        if problems:
            raise tp.ScheduleError("AttentionTile: " + "; ".join(problems))

    @property
    def softmax_scale(self) -> float:
        return self.scale if self.scale is not None else 1.0 / math.sqrt(self.head_dim)

    @property
    def tile_keys(self) -> int:
        """The keys of one tile: key_tile, or all of them."""
        return self.key_tile if self.key_tile is not None else self.keys


def one_tile_attention(tile: AttentionTile) -> tp.Fusion:
    """The fusion of O = softmax(Q K^T scale) V over one key tile, scheduled (module docstring)."""
    if tile.tile_keys != tile.keys or tile.masked or tile.causal:
        raise tp.ScheduleError(f"one_tile_attention: {tile.keys} keys in tiles of {tile.key_tile}{', masked' * tile.masked}"
                               f"{', causal' * tile.causal}; one tile holds every key, unmasked (attention() runs "
                               f"tiles and masks)")
    score = getattr(tp.MmaMacro, f"Hopper_64_{tile.keys}_16")
    value = getattr(tp.MmaMacro, f"Hopper_64_{tile.value_dim}_16")
    fusion, named = _attention_fusion(tile, "one_tile_attention")  # the same ops as attention()'s
    q, k, v, s, o, p_a, normalized, out = (named[n] for n in ("q", "k", "v", "s", "o", "p_a", "normalized", "out"))
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


def _attention_fusion(tile: AttentionTile, name: str, lse: bool = False):
    """O = softmax(Q K^T scale) V as the fusion's ops (unscheduled): the tensors by name; with `lse`
    a second output, each row's log-sum-exp of the scaled scores (m scale + ln l)."""
    z, g, d, dv, n = tile.batch, tile.group, tile.head_dim, tile.value_dim, tile.keys
    with tp.Fusion(name) as fusion:
        q = tp.make_contig_concrete_tensor([z, g, tile.rows, 1, d], dtype=tp.bfloat16, name="Q")
        k = tp.make_contig_concrete_tensor([z, 1, 1, n, d], dtype=tp.bfloat16, name="K")
        v = tp.make_contig_concrete_tensor([z, 1, 1, dv, n], dtype=tp.bfloat16, name="V")
        for t in (q, k, v):
            fusion.add_input(t)
        s = tp.fused_multiply_sum(q, k, [-1])  # [Z, G, M, N]
        scores, masked, factor = s, {}, tile.softmax_scale
        if tile.masked:  # S scale + Mask (SDPA's logits; the same [M, N] for every head)
            mask = tp.make_contig_concrete_tensor([1, 1, tile.rows, n], dtype=tp.bfloat16, name="Mask")
            fusion.add_input(mask)
            mask_f = tp.cast(mask, tp.float32)
            logits = tp.mul(s, tile.softmax_scale)
            scores, factor = tp.add(logits, mask_f), 1.0
            masked = dict(mask_f=mask_f, logits=logits, scores=scores)
        elif tile.causal:  # where(j <= i + N - M, S scale, -inf): query i at position i + N - M among the keys
            query = tp.iota(tile.rows, n - tile.rows, 1, tp.int32)
            key = tp.iota(n, 0, 1, tp.int32)
            query_b = tp.broadcast(query, [True, True, False, True])  # [1, 1, M, 1]
            key_b = tp.broadcast(key, [True, True, True, False])  # [1, 1, 1, N]
            keep = tp.le(key_b, query_b)  # [1, 1, M, N], the same for every head
            # S itself masked, the scale applied in the exponent's one FFMA an element as without the mask
            # (S scaled first took a multiply an element more: H200, 4 x 32 x 4096 causal d128, 30 of 385
            # million warp instructions; 327 million now, cuDNN's kernel 326)
            scores = tp.where(keep, s, float("-inf"))
            masked = dict(query=query, key=key, query_b=query_b, key_b=key_b, keep=keep, scores=scores)
        row = [False, False, False, True]  # a row vector [Z, G, M] along the tile's columns
        row_max = tp.max(scores, 3)
        max_b = tp.broadcast(row_max, row)
        # (S - m) c as S c - m c: one FFMA an element (NVRTC contracts the multiply into the subtraction),
        # the row's m c computed once for a row's elements
        c = factor * math.log2(math.e)
        shifted = tp.mul(scores, c)
        max_c = tp.mul(max_b, c)
        scaled = tp.sub(shifted, max_c)
        p = tp.exp2(scaled)
        row_sum = tp.sum(p, 3)
        p_bf16 = tp.cast(p, tp.bfloat16)
        p_a = tp.broadcast(p_bf16, [False, False, False, True, False])  # [Z, G, M, 1, N]: A
        o = tp.fused_multiply_sum(p_a, v, [-1])  # [Z, G, M, Dv]
        sum_b = tp.broadcast(row_sum, row)
        normalized = tp.div(o, sum_b)
        out = tp.cast(normalized, tp.bfloat16)
        fusion.add_output(out)
        rows = {}
        if lse:  # [Z, G, M] float32, after the loop: the final max and sum
            max_scaled = tp.mul(row_max, factor)
            log_sum = tp.log(row_sum)
            rows = dict(max_scaled=max_scaled, log_sum=log_sum, lse=tp.add(max_scaled, log_sum))
            fusion.add_output(rows["lse"])
    v.set_allocation_domain([v.axis(i) for i in (0, 1, 2, 4, 3)], True)  # V [Z, N, Dv] row-major
    fusion.fast_math = True  # as FlashAttention compiles: exp2 one MUFU.EX2 (H200 d128: 470 -> 493 TFLOP/s)
    return fusion, dict(q=q, k=k, v=v, s=s, m=row_max, m_b=max_b, m_c=max_c, shifted=shifted, scaled=scaled, p=p, l=row_sum,
                        p_bf16=p_bf16, p_a=p_a, o=o, l_b=sum_b, normalized=normalized, out=out, **masked, **rows)


def attention(tile: AttentionTile, *, stages: int = 1, producer: bool = False, registers=None,
              warpgroups: int = 1, lse: bool = False, in_place: bool = False,
              skip_masked_tiles: bool = True, ping_pong: bool = False, overlap: bool = False,
              persistent: int | None = None, fused_softmax: bool | None = None,
              heaviest_first: bool | None = None, q_stages: int = 1, tma_store: bool = False) -> tp.Fusion:
    """O = softmax(Q K^T scale) V over keys in tiles of tile.key_tile (the online softmax), scheduled:
    per block 64 rows of Q, and a loop over the key tiles in which S = Q K^T (a wgmma), the tile's
    row max (rfactored: in-thread, then the quad's shuffles), the running max m (online,
    tp.TensorView.set_online), P = exp2((S - m) scale log2 e), the tile's row sum and P V (a wgmma
    from P's registers, rfactored) run, and l and O add each tile's part at the running max
    (rescaled as it grows); after the loop O / l. The K and V tiles of each iteration are TMA
    copies: with `stages` > 1 a circular buffer of that many K and V tiles (tp.Pipelined, or with
    `producer` a warp-specialized producer warpgroup on TIDz, `registers` its and the consumers'
    setmaxnreg counts). `warpgroups` consumer warpgroups a block (on TIDz), each 64 rows of Q, share
    the K and V tiles. With `lse`, a second output: each row's log-sum-exp of the scaled scores,
    [Z, G, M] float32 (FlashAttention's softmax_lse). With `in_place`, O is one MmaOp over every key
    tile whose accumulators the running max rescales in place before each tile's products (as
    FlashAttention does) rather than a tile's O added into it. Verifier rule ONLINE-RESCALE proves
    the rescale exact. A causal tile skips the key tiles its mask drops whole for every row of the
    block (`skip_masked_tiles`, default on; off computes them, masked, for comparison): block b's
    loop ends after tile (last row + N - M) // key_tile, the last holding a key its last row keeps
    (tp.TensorView.skip_masked; rule ONLINE-SKIP proves the tiles skipped are masked whole and
    skipping them exact), in the producer's loads, the pipeline and the consumers alike. With
    `ping_pong` (a producer and two or more consumer warpgroups), the consumer warpgroups issue
    each key tile's Q K^T in turn through named barriers (tp.WarpSpecialized(..., ping_pong=True);
    rule WS-PING-PONG), so that one's softmax runs while the other's products do. With `overlap` (a
    producer, O in place), each warpgroup overlaps its own softmax with its wgmmas, as FlashAttention-3's
    intra-warpgroup overlap: the loop over key tiles is rotated (tp.rotate_loop) by the statements of
    S = Q K^T through P and the row sum, so iteration i issues tile i + 1's Q K^T, then tile i's P V,
    and waits for the first (wgmma.wait_group 1) before tile i + 1's softmax, for the second before
    P is overwritten (execution/wgmma_order.py); with `ping_pong` too, a warpgroup's turn holds both
    batches (execution/ping_pong.py). With `persistent` (a number of blocks) the grid is
    that many blocks, block b computing the row tiles b, b + persistent, .. of every head in turn (a
    serial loop over the tiles: Q, the online softmax and O's stores once a tile, the producer's
    K / V pipeline running on across tiles), as cuDNN's and FlashAttention-3's kernels run. A causal
    tile's persistent grid (persistent a multiple of the heads, batch x group) keeps the heads on
    blockIdx.z and y and gives each head persistent / heads blocks X on x, block x computing the
    head's row tiles x, x + X, .. in the serial loop, so that every head's blocks do the same causal
    work; the skip counts read that loop's index (TensorView.loop_index), computed per tile. With
    `fused_softmax` each thread's scale, shift, exp2, P's cast and its part of the row sum run in one
    loop over its elements (the elementwise chain inlined into the row sum's loop, as nvFuser's
    inlineMost places it; the fragments' element digits kept apart for that,
    schedule_mma_fragment(split_elements=True)), so that the exponentials interleave with the other
    instructions; False computes each in a loop of its own; None (the default) fuses where O is
    rescaled in place over key tiles of 128 keys or more, where an H200 ran it faster (1-5 %; beside
    a tile's O added, or over 64-key tiles, it ran slower: docs/attention.md). The values are the
    same bit for bit. With `heaviest_first` (one block a row tile) the row tiles run in reverse
    block order (Fusion.reversed_blocks on blockIdx.x): the GPU starts each head's last row tiles
    first, which a causal tile gives the most key tiles, and the grid's tail holds its lightest
    tiles (FlashAttention's causal order); the same values bit for bit. None (the default) is True
    for a causal tile without a persistent grid (H200: +1.7-3.5 % at head dim 256, within the
    run-to-run spread at 64 and 128), else False. With `q_stages` > 1 (a producer and a persistent
    grid) the producer warpgroup loads Q too, into a circular buffer of that many tiles over the
    loop over a block's row tiles (tp.WarpSpecialized, as K's and V's over the key tiles inside
    it): the next row tile's Q arrives while this one's key tiles run, as FlashAttention-3's
    producer loads it; 1 (the default): each consumer warpgroup loads its own Q rows at the start
    of each tile and waits for them. With `tma_store` each warpgroup writes its O rows through shared
    memory, as cuDNN's and FlashAttention-3's kernels do: stmatrix from O's fragment into the TMA
    store's 128-byte-swizzled boxes, then one TMA store a box (gemm_blocks.through_shared), where
    False stores each thread's pairs of columns to global memory directly."""
    if not isinstance(in_place, bool):
        raise tp.ScheduleError(f"attention: in_place must be True or False, got {in_place!r}")
    if not isinstance(lse, bool):
        raise tp.ScheduleError(f"attention: lse must be True or False, got {lse!r}")
    if not isinstance(skip_masked_tiles, bool):
        raise tp.ScheduleError(f"attention: skip_masked_tiles must be True or False, got {skip_masked_tiles!r}")
    if not isinstance(producer, bool):
        raise tp.ScheduleError(f"attention: producer must be True or False, got {producer!r}")
    if not isinstance(ping_pong, bool):
        raise tp.ScheduleError(f"attention: ping_pong must be True or False, got {ping_pong!r}")
    if not isinstance(overlap, bool):
        raise tp.ScheduleError(f"attention: overlap must be True or False, got {overlap!r}")
    if not isinstance(tma_store, bool):
        raise tp.ScheduleError(f"attention: tma_store must be True or False, got {tma_store!r}")
    if heaviest_first is not None and not isinstance(heaviest_first, bool):
        raise tp.ScheduleError(f"attention: heaviest_first must be True, False or None (True for a causal tile "
                               f"without a persistent grid), got {heaviest_first!r}")
    if heaviest_first is None:
        heaviest_first = tile.causal and persistent is None
    if heaviest_first and persistent is not None:
        raise tp.ScheduleError("attention: heaviest_first reverses the order of one block a row tile; a persistent "
                               "grid's blocks are all resident at once (drop persistent, or heaviest_first)")
    if fused_softmax is not None and not isinstance(fused_softmax, bool):
        raise tp.ScheduleError(f"attention: fused_softmax must be True, False or None (fused where O is in place "
                               f"over key tiles of 128 keys or more), got {fused_softmax!r}")
    if overlap and not (producer and in_place):
        raise tp.ScheduleError("attention: overlap rotates the loop of a warp-specialized consumer whose O is rescaled "
                               "in place: it needs producer=True and in_place=True")
    if persistent is not None and (not isinstance(persistent, int) or isinstance(persistent, bool) or persistent < 1):
        raise tp.ScheduleError(f"attention: persistent must be a number of blocks >= 1 (or None: one block a tile), "
                               f"got {persistent!r}")
    heads = tile.batch * tile.group
    if persistent is not None and tile.causal and persistent % heads:
        raise tp.ScheduleError(f"attention: persistent with a causal tile spreads each head's row tiles over "
                               f"persistent / heads blocks: persistent must be a multiple of the {heads} heads "
                               f"(batch x group), got {persistent}")
    if isinstance(q_stages, bool) or not isinstance(q_stages, int) or q_stages < 1:
        raise tp.ScheduleError(f"attention: q_stages must be an int >= 1 (1: the consumers load Q), got {q_stages!r}")
    if q_stages > 1 and not (producer and persistent is not None):
        raise tp.ScheduleError("attention: q_stages > 1 circular-buffers Q over a block's row tiles, loaded by the "
                               "producer: it needs producer=True and a persistent grid")
    if ping_pong and not producer:
        raise tp.ScheduleError("attention: ping_pong orders the consumer warpgroups of a producer's pipeline: it needs "
                               "producer=True (and stages >= 2)")
    if not isinstance(warpgroups, int) or isinstance(warpgroups, bool) or warpgroups not in (1, 2, 3, 4):  # 2.0 == 2
        raise tp.ScheduleError(f"attention: warpgroups must be 1 to 4 (consumer warpgroups a block), got {warpgroups!r}")
    if not (isinstance(stages, int) and not isinstance(stages, bool) and stages >= 1):
        raise tp.ScheduleError(f"attention: stages must be an int >= 1 (1: no circular buffer), got {stages!r}")
    if (producer or registers is not None) and stages < 2:
        raise tp.ScheduleError("attention: a producer warpgroup (producer, registers) needs stages >= 2")
    n, h = tile.tile_keys, HEADS
    score = getattr(tp.MmaMacro, f"Hopper_64_{n}_16")
    value = getattr(tp.MmaMacro, f"Hopper_64_{tile.value_dim}_16")
    fusion, t = _attention_fusion(tile, "attention", lse)
    t["s"].definition.set_macro(score)
    t["o"].definition.set_macro(value)
    sq, sk, sv = _operand_tiles(t["q"], t["k"], t["v"], n)
    s = t["s"]  # [Z, G, M, N, rD] -> [Z, G, Mo, KT, rD steps, 64, n, 16]
    s.split(h + 1, n).split(h, ROWS).split(h + 4, 16).reorder({h + 2: h + 1, h + 4: h + 2, h + 1: h + 3})
    s.set_allocation_domain(tp.mma_output_allocation(s, quads=True), True)
    o = t["o"]  # [Z, G, M, Dv, rN] -> [Z, G, Mo, rKT, rn steps, 64, Dv, 16]
    o.split(h + 2, n).split(h, ROWS).split(h + 4, 16).reorder({h + 3: h + 1, h + 4: h + 2, h + 1: h + 3, h + 2: h + 4})
    if in_place:  # O's accumulators rescaled in place each tile, the tile's products added by the wgmma
        o_tile = o
    else:  # the tile's part rfactored: [Z, G, Mo, KT, rn steps, 64, Dv, r16]; o: [Z, G, Mo, rKT, 64, Dv]
        o_tile = o.rfactor([h + 2, h + 5])
    o_tile.set_allocation_domain(tp.mma_output_allocation(o_tile, quads=True), True)
    for acc in (s, o_tile):
        for i in range(h + 3, h + 6):
            acc.axis(i).parallelize(P.Mma)
    if not in_place:
        tp.schedule_mma_fragment(o, value, "C", quads=True)
    p_a = t["p_a"]  # [Z, G, M, 1, N] -> [Z, G, Mo, KT, K steps, 1, 64, 16]: 16 keys a wgmma of the second product
    p_a.split(h + 2, n).split(h, ROWS).split(h + 4, 16).reorder({h + 3: h + 1, h + 4: h + 2, h + 1: h + 4, h + 2: h + 3})
    tp.schedule_mma_fragment(p_a, value, tp.MmaOperand.A, quads=True)
    tiles = {}
    if fused_softmax is None:
        fused_softmax = in_place and tile.tile_keys >= 128
    chain = ("shifted", "scaled", "p", "p_bf16") if fused_softmax else ()  # in the row sum's loop: its digits apart
    for name in ("m", "l"):  # [Z, G, M, rN] -> [Z, G, Mo, rKT, TIDy, rTIDx, v2, rv4, rv1], the tile's part rfactored
        r = t[name]
        r.split(h + 1, n).split(h, ROWS).reorder({h + 2: h + 1})
        split = name == "l" and fused_softmax  # [.., TIDy, rTIDx, rv4, v2, rv1]: the chain's digits, in its order
        tp.schedule_mma_fragment(r, score, "C", quads=True, split_elements=split)
        tiles[name] = r.rfactor([h + 3, h + 4, h + 6] if split else [h + 3, h + 5, h + 6])
    fragment = (("mask_f", "logits", "scores") if tile.masked else
                ("query_b", "key_b", "keep", "scores") if tile.causal else ())
    for name in fragment + ("m_b", "m_c", "shifted", "scaled", "p", "p_bf16"):  # [Z, G, Mo, KT, 64, n] as S's fragment
        t[name].split(h + 1, n).split(h, ROWS).reorder({h + 2: h + 1})
        tp.schedule_mma_fragment(t[name], score, "C", quads=True, split_elements=name in chain)
    epilogue = _stored_through_shared(t["out"], value) if tma_store else ()
    for name in ("l_b", "normalized") + (() if tma_store else ("out",)):  # [Z, G, Mo, 64, Dv] as O's fragment
        t[name].split(h, ROWS)
        tp.schedule_mma_fragment(t[name], value, "C", quads=True)
    if not tma_store:  # a thread's two adjacent columns (the fragment's v1): one 4-byte store of bf16x2
        t["out"].split(-1, 2)
        t["out"].axis(-1).parallelize(P.Vectorize)
    for name in ("max_scaled", "log_sum", "lse") if lse else ():  # [Z, G, Mo, TIDy, v2]: the fragment's rows
        _fragment_rows(t[name], h)
    t["m"].set_online(rescale=[t["l"], o])
    indices = [t["query"], t["key"]] if tile.causal else []  # 1-D: laid out as the fragment's rows, columns
    computed = [x for x in fusion.tensors if not x.is_fusion_input and x not in indices]
    w = warpgroups > 1  # [.., Mo, ..] -> [.., Mo / warpgroups, warpgroups (TIDz), ..]
    ones = [k for k in range(h) if t["s"].axis(k).is_broadcast]  # Z or G of extent 1: not merged (persistent)
    per_head = persistent // heads if persistent and tile.causal else None  # a causal head's blocks
    for x in computed:  # the key / value heads on blockIdx.z, the group's query heads on y, 64 rows on x
        if w:
            x.split(h, 1 if x.axis(h).is_broadcast else warpgroups)
        if per_head:  # [Z, G, Mo, ..] -> [Z, G, Mo / X (serial), X (blockIdx.x), ..]: block x computes x, x + X, ..
            x.split(h, per_head)
            for axis, kind in zip(x.get_loop_domain()[:h + 2 + w], (P.BIDz, P.BIDy, P.Serial, P.BIDx, P.TIDz)):
                if not axis.is_broadcast and kind is not P.Serial:
                    axis.parallelize(kind)
            continue
        if persistent:  # [Z, G, Mo, ..] -> [tiles / blocks, blocks (blockIdx.x), ..]: block b computes b, b + blocks, ..
            _persistent_tiles(x, ones, persistent)
            if w and not x.axis(len(ones) + 2).is_broadcast:
                x.axis(len(ones) + 2).parallelize(P.TIDz)
            continue
        for axis, kind in zip(x.get_loop_domain()[:h + 1 + w], (P.BIDz, P.BIDy, P.BIDx, P.TIDz)):
            if not axis.is_broadcast:
                axis.parallelize(kind)
    if tile.causal and skip_masked_tiles:  # a block's last row r keeps keys up to r + N - M: the tiles up to its
        last = ROWS * warpgroups - 1 + tile.keys - tile.rows  # (past KT: the loop's extent clamps the count)
        # and its first row r0 every key up to r0 + N - M: the tiles before (r0 + N - M + 1) // n, kept whole,
        # computed without the mask (the diagonal's tiles peeled); with a row-tile loop, tile s X + x's rows
        first = tile.keys - tile.rows + 1
        row_tile = (lambda bx: t["m"].loop_index(h) * per_head + bx) if per_head else (lambda bx: bx)
        t["m"].skip_masked(t["keep"], lambda bx, by, bz: (row_tile(bx) * (ROWS * warpgroups) + last) // n + 1,
                           unmasked=lambda bx, by, bz: (row_tile(bx) * (ROWS * warpgroups) + first) // n)
    if per_head:  # the block axes [Z, G, Mo] are now [Z, G, Mo / X, X]
        h += 1
    elif persistent:  # the block axes [Z, G, Mo] are now [ones.., tiles / blocks, blocks]
        h += len(ones) - 1
    if w:
        sq.set_allocation_domain(sq.get_loop_domain(), True)  # each warpgroup's Q rows a tile of their own
        if epilogue:  # and its O boxes: the block axes through TIDz, then the boxes' axes within a row tile
            staged = epilogue[1]
            loop = staged.get_loop_domain()
            wg = next(k for k, i in enumerate(loop) if i.parallel_type is P.TIDz)
            staged.set_allocation_domain(loop[:wg + 1] + staged.get_allocation_domain()[HEADS + 1:], True)
    if tile.causal:
        _causal_indices(t["query"], t["key"], n, warpgroups, per_head)
    if q_stages > 1:  # the producer loads both warpgroups' rows, at the row-tile loop (left of TIDz)
        for axis in sq.get_loop_domain()[:h + 1 + w]:
            if axis.parallel_type is P.TIDz:
                axis.parallelize(P.Serial)
        sq.inline_at(h + 1)
    else:
        sq.inline_at(h + 1 + w)
    in_tile = [sk, sv, s] + [t[name] for name in fragment] + [tiles["m"], t["m_b"], t["m_c"], t["shifted"], t["scaled"], t["p"],
                                                              t["p_bf16"], p_a, tiles["l"]] + ([] if in_place else [o_tile])
    for x in in_tile:
        x.inline_at(h + 2 + w)  # inside the loop over key tiles
    for name in chain[:-1]:  # each computed where the next reads it: P's cast and the row sum share the loop
        t[name].inline_at(len(t[name].get_loop_domain()))
    for x in [t["m"], t["l"], o, t["l_b"], t["normalized"]] + ([t["max_scaled"], t["log_sum"]] if lse else []):
        x.inline_at(h + 1 + w)  # the running max, the sums' accumulators and the epilogue: per warpgroup
    if epilogue:  # each box's shared tile per warpgroup, each cast vector where stmatrix reads it
        cast, staged, _ = epilogue
        staged.inline_at(h + 1 + w)
        cast.inline_at(len(cast.get_loop_domain()) - 1)
    if stages > 1:  # K and V tiles ahead of the loop's iteration
        kind = tp.WarpSpecialized(P.TIDz, num_registers=registers, ping_pong=ping_pong) if producer else tp.Pipelined()
        # a producer's stages: from three on, released one iteration late (prefetch stages - 2), so that
        # each tile's P V stays in flight while the next tile's Q K^T is issued (execution/wgmma_order.py);
        # with `overlap` the rotated loop orders that itself, and a stage released in its own iteration gives
        # the producer a whole iteration to load the next key tile, which the rotated loop waits for first
        prefetch = stages - 2 if producer and stages > 2 and not overlap else stages - 1
        for x in (sk, sv):
            x.circular_buffer(stages, prefetch, type=kind)
        if q_stages > 1:  # the next row tile's Q ahead, over the row-tile loop
            sq.circular_buffer(q_stages, q_stages - 1, type=kind)
    if overlap:  # the next tile's S through P and the row sum: the first statements of the body, rotated
        keys = [t["key"]] if tile.causal else []  # the causal mask's key indices, computed in the loop
        tp.rotate_loop(s, h + 1 + w, [s] + keys + [t[name] for name in fragment] + [
            tiles["m"], t["m"], t["m_b"], t["m_c"], t["shifted"], t["scaled"], t["p"], t["p_bf16"], p_a, tiles["l"], t["l"]])
    if heaviest_first:  # the row tiles on blockIdx.x, the last first
        fusion.reversed_blocks = (P.BIDx,)
    return fusion


def _stored_through_shared(out, value) -> tuple:
    """out [Z, G, M, Dv] written through shared memory (gemm_blocks.through_shared): c = cast(O / l)
    in O's fragment, cs = stmatrix(c) (a thread's 8 elements of a 16 x 16 tile a stmatrix.x4)
    allocated as the TMA store's boxes [Z, G, Mo, Dv / 64, 64 rows, 64 columns] in the 128-byte
    swizzle, out = their TMA store, a box at a time. Returns (c, cs, out)."""
    c, cs, out = through_shared(out)
    for x in (c, cs, out):  # [Z, G, Mo, 64, Dv]
        x.split(HEADS, ROWS)
    store_boxes(cs, out, HEADS + 1, SPAN * cs.dtype.bytes)  # [Z, G, Mo, Dv / span, 64, span]
    for x in (c, cs):  # [Z, G, Mo, .. O's fragment .., 8]: a stmatrix.x4's 8 elements last
        tp.schedule_mma_fragment(x, value, "C", quads=True)
        x.split(-1, 8)
        x.axis(-2).parallelize(P.Unroll)
    c.axis(-1).parallelize(P.Unroll)
    cs.axis(-1).parallelize(P.Vectorize)
    return c, cs, out


def _persistent_tiles(x, ones: list[int], blocks: int) -> None:
    """x's block axes [Z, G, Mo, ..] as a persistent grid: [ones.., Z G Mo / blocks, blocks (BIDx),
    ..], the axes of extent 1 in S (`ones`: batch or group of one) first and not merged, so that
    each merge is one of S's concrete axes, which K's and V's tiles (Mo and G of extent 1) follow
    (execution/promotion.py)."""
    front = ones + [k for k in range(3) if k not in ones]
    if front != [0, 1, 2]:
        permute(x, front + list(range(3, len(x.get_loop_domain()))))
    at = len(ones)
    for _ in range(2 - at):
        x.merge(at)
    x.split(at, blocks)
    if not x.axis(at).is_broadcast:  # K's and V's tiles of a batch of one: the same for every block
        x.axis(at + 1).parallelize(P.BIDx)


def _causal_indices(query, key, n: int, warpgroups: int, per_head: int | None = None) -> None:
    """The causal mask's iotas in the threads that read them: the queries [M] as the C fragment's
    rows, [Mo (BIDx), (TIDz,) TIDy{32}, v2], computed once per block (with `per_head` blocks a
    head, [Mo / X, X (BIDx), ..]: once per row tile) before the loop over key tiles; the keys [N]
    as its columns, [KT, TIDx{4}, v4 v1] (column 8 v4 + 2 TIDx + v1), in the loop, each thread its
    own (every quad the same)."""
    w = warpgroups > 1
    _fragment_rows(query, 0)
    if w:
        query.split(0, warpgroups)
    if per_head:
        query.split(0, per_head)
    for axis, kind in zip(query.get_loop_domain()[:1 + bool(per_head) + w], ((P.Serial,) if per_head else ()) + (P.BIDx, P.TIDz)):
        if kind is not P.Serial:
            axis.parallelize(kind)
    key.split(0, n).split(1, 2).split(1, 4)  # [KT, v4, q, v1]
    key.reorder({2: 1}).merge(2)  # [KT, q, v4 v1]
    key.axis(1).parallelize(P.TIDx)
    query.inline_at(1 + bool(per_head) + w)
    key.inline_at(1)


def _fragment_rows(t, h: int) -> None:
    """A row vector [.., M] (axis h) laid out as the C fragment's rows with quads: 64 rows a block,
    row 16 w + 8 v2 + g in threadIdx.y = 8 w + g, register v2 (every thread of the quad holds it):
    [.., Mo, TIDy{32}, v2], as the row reductions (schedule_mma_fragment quads=True) keep them."""
    t.split(h, ROWS).split(h + 1, 16).split(h + 2, 8)  # [.., Mo, w, v2, g]
    t.reorder({h + 3: h + 2}).merge(h + 1)  # [.., Mo, w g, v2]
    t.axis(h + 1).parallelize(P.TIDy)


def _operand_tiles(q, k, v, key_tile=None) -> None:
    """Q's 64 rows a block, K and V whole, loaded by TMA into shared memory in wgmma's 128-byte
    swizzle: a head dim of two spans as a loop of two boxes; V's as N-major boxes, read transposed."""
    sq, sk, sv = (t.cache_after(tp.LoadStoreOpType.TMA) for t in (q, k, v))
    for t in (sq, sk, sv):
        t.set_memory_type(tp.MemoryType.Shared)
    sq.split(HEADS, ROWS).reorder({HEADS + 2: HEADS + 1})  # [Z, G, Mo, 1, 64, D]
    if key_tile is None:
        sk.split(HEADS, 1)  # [Z, 1, 1, 1, N, D]
        sv.split(HEADS, 1)  # [Z, 1, 1, 1, Dv, N]
    else:  # a tile of keys an iteration
        sk.split(HEADS + 1, key_tile)  # [Z, 1, 1, KT, n, D]
        sv.split(HEADS + 2, key_tile).reorder({HEADS + 2: HEADS + 1})  # [Z, 1, 1, KT, Dv, n]
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
    return sq, sk, sv


def causal_mask(torch, rows: int, keys: int, device="cuda"):
    """The causal Mask input of a masked AttentionTile: [1, 1, rows, keys] bfloat16, 0 where key j <= query
    i + keys - rows (the queries are the last `rows` positions, SDPA's is_causal for rows == keys) and
    -inf elsewhere. `torch` is the caller's module (tileproof does not import it). AttentionTile(causal=True)
    computes this mask in the kernel from the indices instead (no input); this one serves a reference
    and a masked tile's bias."""
    keep = torch.ones(rows, keys, dtype=torch.bool, device=device).tril(keys - rows)
    mask = torch.zeros(rows, keys, dtype=torch.bfloat16, device=device).masked_fill(~keep, float("-inf"))
    return mask.view(1, 1, rows, keys)


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


__all__ = ["AttentionTile", "attention", "attention_views", "causal_mask", "one_tile_attention"]
