"""wgmma's RS form (A in registers) as a user schedules it: rs_wgmma, shared by the rule tests
(tests/rules/test_wgmma_a_in_registers.py) and the GPU tests (tests/gpu/test_wgmma_rs.py). Public API only."""

from __future__ import annotations

import tileproof as tp


def rs_wgmma(name: str, n: int, k: int, *, blocks: int = 1, stages: int | None = None, quads: bool = False,
             a_fragment=None):
    """bfloat16 A ((64 blocks) x k, as [M, 1, k]) times B (n x k, as [1, n, k]), float32 out, by
    wgmma Hopper_<n> with A in registers (RS): ra = a copied into each thread's A fragment 16 of
    K at a time, inside d's K loop (tp.schedule_mma_fragment, A); d's 64 rows a block on BIDx,
    out written from d's C fragment. sb = b in shared memory by TMA, in wgmma's swizzle: whole,
    before the loop (k * 2 bytes: 32, 64 or 128), or with `stages`, 16 of K an iteration in a
    circular buffer of that many stages, prefetching stages - 2. `quads`: every fragment's thread axis
    as TIDy{32} x TIDx{4} (schedule_mma_fragment's quads). `a_fragment(ra)`: lays ra's [M tile, K loop,
    1, 64, 16] out instead of schedule_mma_fragment. Returns (fusion, ra, sb, d, out)."""
    macro = getattr(tp.MmaMacro, f"Hopper_64_{n}_16")
    with tp.Fusion(name) as fusion:
        a = tp.make_contig_concrete_tensor([64 * blocks, 1, k], dtype=tp.bfloat16); fusion.add_input(a)
        b = tp.make_contig_concrete_tensor([1, n, k], dtype=tp.bfloat16); fusion.add_input(b)
        d = tp.fused_multiply_sum(a, b, [-1]); out = tp.set(d); fusion.add_output(out)
    d.definition.set_macro(macro)
    ra = a.cache_after(); sb = b.cache_after(tp.LoadStoreOpType.TMA)
    d.split(0, 64).split(3, 16).reorder({3: 1})  # [M tile, K loop, M64, N, K16]
    d.set_allocation_domain(tp.mma_output_allocation(d, quads=quads), True)
    d.axis(0).parallelize(tp.ParallelType.BIDx)
    for i in range(2, 5):
        d.axis(i).parallelize(tp.ParallelType.Mma)
    out.split(0, 64)
    tp.schedule_mma_fragment(out, macro, "C", quads=quads)
    out.axis(0).parallelize(tp.ParallelType.BIDx)
    ra.split(0, 64).split(3, 16).reorder({1: 3, 3: 1})  # [M tile, K loop, 1, M64, K16]
    if a_fragment is None:
        tp.schedule_mma_fragment(ra, macro, tp.MmaOperand.A, quads=quads)  # [M tile, K loop, 1, thread, element]
    else:
        a_fragment(ra)
    ra.axis(0).parallelize(tp.ParallelType.BIDx)
    ra.inline_at(2)  # loaded in d's K loop, 16 of K at a time
    sb.set_memory_type(tp.MemoryType.Shared)
    if stages is None:
        sb.apply_mma_swizzle_for_tma_load({32: tp.MmaInputSmemSwizzle.B32, 64: tp.MmaInputSmemSwizzle.B64,
                                           128: tp.MmaInputSmemSwizzle.B128}[2 * k])
        box = sb.get_loop_domain()[1:]  # the broadcast axis first: not part of the box
    else:
        sb.split(2, 16).reorder({2: 0}).split(1, 1).reorder({1: 0})  # [1 (M tile), K loop, 1, N, K16]
        sb.apply_mma_swizzle_for_tma_load(tp.MmaInputSmemSwizzle.B32)
        box = sb.get_loop_domain()[3:]
    for i in box:
        i.parallelize(tp.ParallelType.Bulk)
    sb.set_allocation_domain(sb.get_loop_domain(), True)
    if stages is not None:
        sb.inline_at(2)
        sb.circular_buffer(stages, stages - 2)
    return fusion, ra, sb, d, out
