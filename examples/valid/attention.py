"""Attention's building blocks on Hopper wgmma: a row's max and sum over the accumulators' fragment,
softmax(Q K^T) V over one key tile with P fed back to a wgmma from registers, and over many key
tiles by the online softmax (a running max, the sums rescaled as it grows: ONLINE-RESCALE).

A wgmma's accumulators are spread over the warpgroup's 128 threads by its C fragment: row
16 w + g + 8 ((v / 2) % 2) of thread 32 w + 4 g + q. Laid out with `quads=True`
(tp.mma_output_allocation, tp.schedule_mma_fragment), that thread is TIDy{32} (w, g) x TIDx{4}
(q): the same linear thread, with the four threads sharing each row alone on TIDx, so a row
reduction is a reduction over the thread's own registers, then over TIDx by warp shuffles, and
leaves every thread of the row with the total (MMA-ACCUM-LAYOUT proves each thread reads the
accumulators it holds). The outputs are stored from the fragment, two adjacent columns a thread:
half of each 32-byte sector a warp moves (GLOBAL-COALESCING, a warning).
"""

import tileproof as tp
from tileproof.recipes.attention import AttentionTile, attention, one_tile_attention
from tileproof.rule_examples import online_logsumexp, wgmma_row_max


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING",)))
def row_max_of_a_wgmma_tile():
    """The row maxima of a 64 x 64 wgmma tile: tp.max(d, 1) laid out as the fragment's rows,
    [TIDy{32}, rTIDx{4}, v2, rv4, rv1]: each thread's 16 accumulators of its two rows, then its
    quad by shuffles (xor 1, 2)."""
    fusion, d, out, m = wgmma_row_max("row_max_of_a_wgmma_tile")
    tp.schedule_mma_fragment(m, tp.MmaMacro.Hopper_64_64_16, "C", quads=True)
    return fusion


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING",)))
def one_key_tile_attention():
    """O = softmax(Q K^T / 8) V for 128 queries over one tile of 64 keys, head dims 64: two
    blocks of one warpgroup (recipes/attention.py)."""
    return one_tile_attention(AttentionTile(rows=128, keys=64, head_dim=64, value_dim=64))


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING",)))
def one_key_tile_attention_wide():
    """128 keys and value head dim 128: S and O each 64 accumulators a thread."""
    return one_tile_attention(AttentionTile(rows=192, keys=128, head_dim=64, value_dim=128))


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING",)))
def online_attention_over_key_tiles():
    """O = softmax(Q K^T / 8) V for 128 queries over 512 keys in tiles of 128: the running max, P
    and the tile's sums inside the loop over key tiles, l and O rescaled as the max grows."""
    return attention(AttentionTile(rows=128, keys=512, key_tile=128))


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING",)))
def online_row_logsumexp():
    """Each row's log(sum(exp(x - m))) + m, a thread per row and the row in tiles of 64: the sum of
    exp(x - m) rescaled by exp(m_old - m_new) each time the running max grows."""
    return online_logsumexp("online_row_logsumexp")[0]


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING",)))
def causal_attention_in_ping_pong():
    """Causal attention behind a producer warpgroup, two consumer warpgroups taking turns at each
    key tile's Q K^T (ping_pong: named barriers 2 and 3; WS-PING-PONG proves every turn met and no
    warpgroup waiting on itself), the key tiles past each block's diagonal skipped (ONLINE-SKIP),
    1000 rows: a tail of rows and of keys."""
    tile = AttentionTile(rows=1000, keys=1000, key_tile=128, head_dim=128, value_dim=128, causal=True)
    return attention(tile, stages=2, producer=True, warpgroups=2, registers=(24, 240), in_place=True, ping_pong=True)


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING",)))
def persistent_attention_overlapped_in_ping_pong():
    """FlashAttention-3's form at head dim 128 on a persistent grid: 6 blocks over the 12 row tiles of
    two grouped-query heads (block b computes tiles b and b + 6), each warpgroup's turn holding the
    next key tile's Q K^T and this one's P V (the loop rotated: tp.rotate_loop), three K / V stages
    whose producer runs on from one tile into the next."""
    tile = AttentionTile(rows=700, keys=900, key_tile=128, head_dim=128, value_dim=128, batch=1, group=2)
    return attention(tile, stages=3, producer=True, warpgroups=2, registers=(24, 240), in_place=True,
                     overlap=True, ping_pong=True, persistent=6)


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING",)))
def persistent_attention_with_q_from_the_producer():
    """The persistent grid above with Q loaded by the producer warpgroup too (q_stages=2): Q's tiles
    a circular buffer of two over each block's row-tile loop, around K's and V's over the key tiles
    inside it, so that the next row tile's Q arrives while this one's key tiles run. One producer
    nest loads both in the consumers' order; each consumer warpgroup releases Q's stage after its key
    loop's last wgmma.wait_group (PIPELINE-WAR proves it, PIPELINE-RAW the waits)."""
    tile = AttentionTile(rows=700, keys=900, key_tile=128, head_dim=128, value_dim=128, batch=1, group=2)
    return attention(tile, stages=2, producer=True, warpgroups=2, registers=(24, 240), in_place=True,
                     overlap=True, persistent=6, q_stages=2)


@tp.schedule(expect=tp.accepted())
def persistent_attention_with_o_through_shared_memory():
    """The persistent grid with Q from the producer, O written through shared memory (tma_store):
    each warpgroup's O fragment cast to bfloat16 and written by stmatrix.x4 into its own 128-byte-
    swizzled boxes, then one TMA store a box, as cuDNN's kernels end. ALLOCATION-DISTINCT proves the
    two warpgroups' boxes apart, the races rule that a warpgroup rewrites them for its next row tile
    only after the store has read them; no GLOBAL-COALESCING warning: the TMA moves whole rows. 700
    rows: the last row tile's stmatrix runs at its holes too (warp-collective, it cannot skip them),
    and the TMA store clips what lies past the rows (execution/clipped_holes.py)."""
    tile = AttentionTile(rows=700, keys=900, key_tile=128, head_dim=128, value_dim=128, batch=1, group=2)
    return attention(tile, stages=2, producer=True, warpgroups=2, registers=(24, 240), in_place=True,
                     overlap=True, persistent=6, q_stages=2, tma_store=True)


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING",)))
def three_consumer_warpgroups_at_head_dim_64():
    """recipes.sdpa's head dim 64 form (FlashAttention-3's): three consumer warpgroups, 192 rows of
    Q a block, beside the producer, at 160 registers each after setmaxnreg and 24 in the producer:
    24 x 128 + 160 x 384 = 64512 of the 65536 a 512-thread block launches with (WS-REGISTERS), on a
    persistent grid with Q from the producer and the overlap. 1000 rows: the last 192-row tile's third
    warpgroup lies past the rows."""
    tile = AttentionTile(rows=1000, keys=1000, key_tile=128, head_dim=64, value_dim=64, batch=1, group=2)
    return attention(tile, stages=2, producer=True, warpgroups=3, registers=(24, 160), in_place=True,
                     overlap=True, persistent=4, q_stages=2)
