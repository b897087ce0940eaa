"""Circular buffers of plain copies (tp.set) into shared memory: the threads write the next
tiles' stages while every thread reads this one's (nvFuser circular-buffers any copy). A plain
copy is complete when written, so no waits: one __syncthreads at the top of each iteration
orders this iteration's stage after every thread's writes and the refill after every thread's
reads of the stage it overwrites (prefetch >= 1), or one after the copies (prefetch 0).
"""

import tileproof as tp

P = tp.ParallelType


def transposed_k_loop(name: str, stages: int, prefetch: int = -1):
    """out = a, [M, K]: per K tile of 8 x 32, the shared tile is written on (TIDy, TIDx) and read
    on (TIDx, TIDy): each thread reads what another wrote."""
    with tp.Fusion(name) as fusion:
        a = tp.make_tensor(["M", "K"], contiguity=True)
        fusion.add_input(a)
        s = tp.set(a)
        out = tp.set(s)
        fusion.add_output(out)
    s.set_memory_type(tp.MemoryType.Shared)
    for t in (s, out):
        t.split(0, 8).split(2, 32).reorder({1: 2})  # [Mo, Ko, 8, 32]
        t.axis(0).parallelize(P.BIDx)
    s.axis(2).parallelize(P.TIDy)
    s.axis(3).parallelize(P.TIDx)
    out.split(3, 4).merge(2, 3)  # [Mo, Ko, 8 * 8, 4]: 64 threads, each 4 columns of a row
    out.axis(2).parallelize(P.TIDx)
    out.axis(3).parallelize(P.TIDy)
    s.inline_at(2)
    s.circular_buffer(stages, prefetch)
    return fusion


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING", "SMEM-BANK-CONFLICT"),
                                allocations={"T1": {"bytes": 3 * 8 * 32 * 4}}))
def transposed_tile_three_stages():
    """Three stages, two tiles ahead: iteration i writes the tile of i + 2 into stage (i + 2) % 3,
    after the barrier that also ends every thread's reads of that stage in iteration i - 1."""
    return transposed_k_loop("transposed_tile_three_stages", 3)


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING", "SMEM-BANK-CONFLICT")))
def transposed_tile_no_prefetch():
    """Two stages, no prefetch: each iteration writes its own tile, then the barrier, then the reads."""
    return transposed_k_loop("transposed_tile_no_prefetch", 2, 0)
