"""cp.async copies from global into shared memory (issue 12): each thread copies 4, 8 or 16 bytes
(its Vectorize axis, or one element) asynchronously; the readers wait (cp.async.wait_group),
then the block synchronizes. A copy past the end of the tensor (a hole of an indivisible
split) reads nothing and writes zeros (src-size 0).

The K loops below copy an [M, K] tile of 16 rows x 32 columns per iteration and add it to
another, which is the shape of a GEMM's main loop without the multiply; the circular-buffered
ones copy the next tiles while the current one is read (TensorView.circular_buffer).
examples/invalid/cp_async.py holds the broken variants.
"""

import tileproof as tp

P = tp.ParallelType
CP_ASYNC = tp.LoadStoreOpType.CpAsync


def k_loop_sum(name: str, *, vector: int, dtype=tp.float32, cache_op=tp.CacheOp.Unspecified, rows: int = 16,
               stages: int | None = None, prefetch: int = -1, k: int | str = "K"):
    """out = a + b, [M, K]: per block `rows` rows; per iteration of the K loop, 32 columns of a and
    b copied into shared memory by cp.async, `vector` elements per copy (one thread per vector),
    then added by threads in another order (each reads what other threads copied). With `stages`,
    both tiles are circular-buffered over the K loop, `prefetch` copies ahead. `k`: K's extent,
    the symbol K or an int."""
    with tp.Fusion(name) as fusion:
        a = tp.make_tensor(["M", k], contiguity=True, dtype=dtype)
        b = tp.make_tensor(["M", k], contiguity=True, dtype=dtype)
        fusion.add_input(a)
        fusion.add_input(b)
        sa = tp.set(a, op=CP_ASYNC, cache_op=cache_op)
        sb = tp.set(b, op=CP_ASYNC, cache_op=cache_op)
        out = tp.add(sa, sb)
        fusion.add_output(out)
    if vector > 1 and isinstance(k, str):
        fusion.assume(f"{k} % {vector} == 0")  # each vector lies in one row, on a vector boundary
    for t in (sa, sb, out):
        t.split(1, vector).split(1, 32 // vector)  # [M, Ko, 32 / vector, vector]: the K loop outside
        t.split(0, rows).reorder({1: 2})  # [Mo, Ko, rows, 32 / vector, vector]
        t.axis(0).parallelize(P.BIDx)
    for t in (sa, sb):
        t.set_memory_type(tp.MemoryType.Shared)
        t.merge(2, 3)  # [Mo, Ko, rows * 32 / vector, vector]
        t.axis(2).parallelize(P.TIDx)
        t.axis(3).parallelize(P.Vectorize if vector > 1 else P.Serial)
        t.inline_at(2)
        if stages is not None:
            t.circular_buffer(stages, prefetch)
    out.merge(2, 3).merge(2, 3).split(2, rows * 32 // vector)  # [Mo, Ko, vector, threads]
    out.axis(3).parallelize(P.TIDx)
    return fusion


@tp.schedule(expect=tp.accepted())
def k_loop_sum_cg_16_bytes():
    """fp32, four per copy: 16-byte cp.async.cg (CacheOp.Unspecified picks .cg at 16 bytes). K is
    any multiple of 4; the last K tile's columns past K are zero-filled (src-size 0)."""
    return k_loop_sum("k_loop_sum_cg_16_bytes", vector=4)


@tp.schedule(expect=tp.accepted())
def k_loop_sum_ca_8_bytes():
    """bf16, four per copy: 8 bytes, cp.async.ca (CacheOp.AllLevels)."""
    return k_loop_sum("k_loop_sum_ca_8_bytes", vector=4, dtype=tp.bfloat16, cache_op=tp.CacheOp.AllLevels)


@tp.schedule(expect=tp.accepted())
def k_loop_sum_ca_4_bytes_any_k():
    """fp32, one element per copy: 4-byte cp.async.ca, for every K (no assumption): the tail of the
    last tile and the rows past M are zero-filled."""
    return k_loop_sum("k_loop_sum_ca_4_bytes_any_k", vector=1, rows=4)


@tp.schedule(expect=tp.accepted(allocations={"T2": {"bytes": 2 * 16 * 32 * 4}}))
def k_loop_sum_double_buffered():
    """k_loop_sum_cg_16_bytes with both tiles circular-buffered: 2 stages, the copy of the next K
    tile in flight while this one is added (prefetch 1: a barrier ends each iteration, before the
    tile it read is refilled). Shared memory holds both stages of each tile."""
    return k_loop_sum("k_loop_sum_double_buffered", vector=4, stages=2)


@tp.schedule(expect=tp.accepted())
def k_loop_sum_three_stages_prefetch_one():
    """3 stages, 1 copy ahead: the tile refilled in iteration i was read in iteration i - 2, before
    the wait's barrier of iteration i - 1, so no barrier ends the iteration."""
    return k_loop_sum("k_loop_sum_three_stages_prefetch_one", vector=4, stages=3, prefetch=1)


@tp.schedule(expect=tp.accepted())
def k_loop_sum_four_stages_bf16():
    """bf16, 8-byte cp.async.ca, 4 stages and 3 copies ahead (the default prefetch, stages - 1)."""
    return k_loop_sum("k_loop_sum_four_stages_bf16", vector=4, dtype=tp.bfloat16, cache_op=tp.CacheOp.AllLevels,
                      stages=4)


@tp.schedule(expect=tp.accepted())
def k_loop_sum_pipelined_any_k():
    """4-byte copies for every K, circular-buffered with 2 stages: the last tile's tail is
    zero-filled, and a K of fewer tiles than the prologue copies skips the missing ones."""
    return k_loop_sum("k_loop_sum_pipelined_any_k", vector=1, rows=4, stages=2)


@tp.schedule(expect=tp.accepted())
def k_loop_sum_pipelined_one_tile():
    """k_loop_sum_three_stages_prefetch_one at K = 32, one tile: a circular loop of one iteration.
    The prologue copies tile 0 (tile 1 is past K: predicated off), the loop reads it and refills
    nothing, as the symbolic schedule does at K = 32 (nvFuser accepts both)."""
    return k_loop_sum("k_loop_sum_pipelined_one_tile", vector=4, stages=3, prefetch=1, k=32)


@tp.schedule(expect=tp.accepted())
def cache_after_copy():
    """t0.cache_after(CpAsync, CacheOp.Global): a [64, 64] fp32 tile copied into shared memory with
    16-byte cp.async.cg (four rows per TIDy, four-element vectors on 16 TIDx), then read one element
    per thread by 64 TIDx (each thread reads what another copied) and stored."""
    with tp.Fusion("cache_after_copy") as fusion:
        t0 = tp.make_contig_concrete_tensor([64, 64])
        fusion.add_input(t0)
        t2 = tp.set(t0)
        fusion.add_output(t2)
    t1 = t0.cache_after(CP_ASYNC, tp.CacheOp.Global)
    t1.set_memory_type(tp.MemoryType.Shared)
    t1.split(0, 4).split(2, 4)  # [16, 4, 16, 4]
    t1.axis(0).parallelize(P.TIDy)
    t1.axis(2).parallelize(P.TIDx)
    t1.axis(3).parallelize(P.Vectorize)
    t2.split(0, 4)  # [16, 4, 64]
    t2.axis(0).parallelize(P.TIDy)
    t2.axis(2).parallelize(P.TIDx)
    return fusion


@tp.schedule(expect=tp.accepted())
def k_loop_sum_inlined_most_circular():
    """nvFuser's usual circular buffer: [M, K] + [M, K] with every tensor [Mo (BIDx), Ko, TIDx,
    vector] and the cp.async tiles inlined as far as they go (inline_most: through the TIDx axis
    they share with the sum). The circular loop is Ko, the innermost serial axis left of the
    compute-at position (nvFuser's choice; the TIDx axis is a thread, not a loop); the copies get a
    TIDx scope of their own, ahead of the sum's, so the next tile's copies run apart from the reads."""
    with tp.Fusion("k_loop_sum_inlined_most_circular") as fusion:
        a = tp.make_tensor(["M", "K"], contiguity=True)
        b = tp.make_tensor(["M", "K"], contiguity=True)
        fusion.add_input(a)
        fusion.add_input(b)
        sa = tp.set(a, op=CP_ASYNC)
        sb = tp.set(b, op=CP_ASYNC)
        out = tp.add(sa, sb)
        fusion.add_output(out)
    fusion.assume("K % 4 == 0")
    for t in (sa, sb, out):
        t.split(1, 4).split(1, 8)  # [M, Ko, 8, 4]
        t.axis(0).parallelize(P.BIDx)
        t.axis(2).parallelize(P.TIDx)
        t.axis(3).parallelize(P.Vectorize)
    for t in (sa, sb):
        t.set_memory_type(tp.MemoryType.Shared)
    tp.inline_most(fusion)
    for t in (sa, sb):
        t.circular_buffer(3, 2)
    return fusion
