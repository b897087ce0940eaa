"""cp.async copies from global into shared memory (issue 12): each thread copies 4, 8 or 16 bytes
(its Vectorize axis, or one element) asynchronously; the readers wait (cp.async.wait_group),
then the block synchronizes. A copy past the end of the tensor (a hole of an indivisible
split) reads nothing and writes zeros (src-size 0).

The K loops below copy an [M, K] tile of 16 rows x 32 columns per iteration and add it to
another, which is the shape of a GEMM's main loop without the multiply (tileproof has no
reduction of its own yet to consume the tiles); examples/invalid/cp_async.py holds the broken
variants.
"""

import tileproof as tp

P = tp.ParallelType
CP_ASYNC = tp.LoadStoreOpType.CpAsync


def k_loop_sum(name: str, *, vector: int, dtype=tp.float32, cache_op=tp.CacheOp.Unspecified, rows: int = 16):
    """out = a + b, [M, K]: per block `rows` rows; per iteration of the K loop, 32 columns of a and
    b copied into shared memory by cp.async, `vector` elements per copy (one thread per vector),
    then added by threads in another order (each reads what other threads copied)."""
    with tp.Fusion(name) as fusion:
        a = tp.make_tensor(["M", "K"], contiguity=True, dtype=dtype)
        b = tp.make_tensor(["M", "K"], contiguity=True, dtype=dtype)
        fusion.add_input(a)
        fusion.add_input(b)
        sa = tp.set(a, op=CP_ASYNC, cache_op=cache_op)
        sb = tp.set(b, op=CP_ASYNC, cache_op=cache_op)
        out = tp.add(sa, sb)
        fusion.add_output(out)
    if vector > 1:
        fusion.assume(f"K % {vector} == 0")  # each vector lies in one row, on a vector boundary
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
