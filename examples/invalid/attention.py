"""Attention's building blocks scheduled so that a thread reads accumulators another thread holds
(MMA-ACCUM-LAYOUT), or a wgmma's warpgroup is split over TIDy while its output binds TIDy
(MMA-WARP-COLLECTIVE). Each is examples/valid/attention.py's row max with one thing changed; and
online sums whose terms the running max's rescale cannot keep exact (ONLINE-RESCALE); and O written
through shared memory where shared memory cannot hold its boxes (SMEM-CAPACITY).
"""

import tileproof as tp
from tileproof.recipes.attention import AttentionTile, attention
from tileproof.rule_examples import online_logsumexp, wgmma_row_max

P = tp.ParallelType


@tp.schedule(expect=tp.rejected("MMA-ACCUM-LAYOUT", messages=[
    "T6 reads T2[16, 0] in lane 4 (threadIdx.x = 0, threadIdx.y = 1)",
    "only the thread with threadIdx.x = 0, threadIdx.y = 8 writes that element"], warnings=("GLOBAL-COALESCING",)))
def row_max_with_its_row_digits_swapped():
    """The row maxima with the row's digits merged g-major (TIDy = 4 g + w) where the fragment
    puts row 16 w + g in thread TIDy = 8 w + g: the thread with threadIdx.y = 1 reduces row 16
    (w = 1, g = 0), held by the thread with threadIdx.y = 8."""
    fusion, d, out, m = wgmma_row_max("row_max_with_its_row_digits_swapped")
    m.split(0, 8).split(0, 2)  # [w, v2, g, rN]
    m.split(3, 2).split(3, 4)  # [w, v2, g, rv4, rq, rv1]
    m.reorder({2: 0, 0: 1, 4: 2, 1: 3, 3: 4, 5: 5})  # [g, w, rq, v2, rv4, rv1]
    m.merge(0)
    m.axis(0).parallelize(P.TIDy)
    m.axis(1).parallelize(P.TIDx)
    return fusion


@tp.schedule(expect=tp.rejected("MMA-WARP-COLLECTIVE", "REDUCTION-PARALLEL", messages=[
    "T2's axis 0 (rTIDy{4}) is bound to TIDy, whose indices are part of the warpgroup"],
    warnings=("GLOBAL-COALESCING",)))
def accumulator_loop_on_tidy_with_split_lanes():
    """The wgmma's K loop bound to TIDy, where TIDy{32} x TIDx{4} are the warpgroup's threads: each
    TIDy index would be a quarter of a warpgroup issuing a different K step (whose operand tiles'
    descriptors then differ within the warpgroup), and the partial accumulators of the TIDy indices
    would need a combine tileproof does not lower for tensor-core tiles (REDUCTION-PARALLEL, a premise
    of WGMMA-SMEM-LAYOUT: with no serial K-step loop an instance has no one operand tile)."""
    fusion, d, out, m = wgmma_row_max("accumulator_loop_on_tidy_with_split_lanes")
    tp.schedule_mma_fragment(m, tp.MmaMacro.Hopper_64_64_16, "C", quads=True)
    d.axis(0).parallelize(P.TIDy)
    return fusion


@tp.schedule(expect=tp.rejected("ONLINE-RESCALE", messages=["is not exp2(a T1) times a value T1 does not change"],
                                warnings=("GLOBAL-COALESCING",)))
def online_terms_shifted_by_a_constant():
    """exp(x - m) - 0.5: one factor cannot bring a tile's terms to a new max (at maxima 0, 1, 2 a
    term is 2.218, 0.5, -0.132)."""
    return online_logsumexp("online_terms_shifted_by_a_constant",
                            term=lambda x, m_b: tp.sub(tp.exp(tp.sub(x, m_b)), 0.5))[0]


@tp.schedule(expect=tp.rejected("ONLINE-RESCALE", messages=["is a fusion output"], warnings=("GLOBAL-COALESCING",)))
def online_terms_as_an_output():
    """exp(x - m) computed in the loop at the running max is also an output: its first tiles hold
    values at a max that is not the row's."""
    fusion, x, m, p, l, lse = online_logsumexp("online_terms_as_an_output")
    fusion.add_output(p)
    return fusion


@tp.schedule(expect=tp.rejected("SMEM-CAPACITY", messages=["needs 262144 bytes", "232448 per block"]))
def o_through_shared_memory_at_head_dim_256():
    """examples/valid/attention.py's O through shared memory at head dim 256: the warpgroups' O boxes
    (64 KiB) do not fit beside Q (64 KiB) and two stages of 64 keys of K and V (128 KiB); the same
    schedule storing O from registers verifies. recipes.sdpa stores O directly at head dim 256."""
    tile = AttentionTile(rows=768, keys=900, key_tile=64, head_dim=256, value_dim=256, batch=1, group=2)
    return attention(tile, stages=2, producer=True, warpgroups=2, registers=(24, 240), in_place=True,
                     overlap=True, persistent=6, tma_store=True)
