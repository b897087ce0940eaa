"""Blackwell matmuls on tcgen05.mma (sm_100a): both operands in shared memory (TMA loads in one of
the swizzles MmaInputSmemSwizzle names), read by one thread's tcgen05.mma.cta_group::1.kind::f16
through shared-memory descriptors, the accumulators in tensor memory (D's row i in lane i, its
column j in column j: the M axis left of the dimension separator), read back into registers by a
TMemLoad (tcgen05.ld 32x32b, a thread per row) after the MMA's commit and the wait on its
mbarrier, and stored.

Each schedule is verified and compiled for sm_100a (NVRTC and ptxas check the tcgen05 PTX);
none runs: tileproof has no Blackwell GPU (docs/hardware.md#tcgen05mma-blackwell).
"""

import tileproof as tp

P = tp.ParallelType
SW = tp.MmaInputSmemSwizzle


def _operands(name, m, n, k, dtype):
    """A [m, 1, k] and B [1, n, k] of `dtype`; d = A B^T (fused_multiply_sum over K) on
    Blackwell1CTA_128_<n>_16, r = d read by a TMemLoad, out = r; sa, sb: A and B loaded by TMA.
    Returns (fusion, sa, sb, d, r, out), unscheduled."""
    with tp.Fusion(name) as fusion:
        a = tp.make_contig_concrete_tensor([m, 1, k], dtype=dtype)
        b = tp.make_contig_concrete_tensor([1, n, k], dtype=dtype)
        fusion.add_input(a)
        fusion.add_input(b)
        d = tp.fused_multiply_sum(a, b, [-1])
        r = tp.set(d, op=tp.LoadStoreOpType.TMemLoad)  # tensor memory -> registers
        out = tp.set(r)
        fusion.add_output(out)
    d.definition.set_macro(getattr(tp.MmaMacro, f"Blackwell1CTA_128_{n}_16"))
    sa = a.cache_after(tp.LoadStoreOpType.TMA)
    sb = b.cache_after(tp.LoadStoreOpType.TMA)
    for t in (sa, sb):
        t.set_memory_type(tp.MemoryType.Shared)
    d.set_memory_type(tp.MemoryType.Tensor)
    return fusion, sa, sb, d, r, out


def _boxes(t, swizzle, first):
    """t's tile [.., rows, K] as TMA's `swizzle` writes it (apply_mma_swizzle_for_tma_load), the
    axes from `first` on the box (Bulk), allocated as loaded."""
    t.apply_mma_swizzle_for_tma_load(swizzle)
    for i in t.get_loop_domain()[first:]:
        i.parallelize(P.Bulk)
    t.set_allocation_domain(t.get_loop_domain(), True)


@tp.schedule(target="sm_100a", params={"n": [16, 64, 128]}, expect=lambda n: tp.accepted(
    warnings=("GLOBAL-COALESCING",), allocations={"T2": {"lanes": 128, "columns": n, "columns_allocated": max(32, n)}}))
def tcgen05_tile(n):
    """One 128 x n x 16 float16 tile: A and B in TMA boxes of the 32-byte swizzle (a 32-byte row of
    K per row of the tile), one tcgen05.mma, its 128 x n float32 accumulators in tensor memory (n
    columns; tcgen05.alloc takes a power of two of at least 32), read back a row per thread
    (TIDx{128}: warp w reads lanes 32w..32w + 31) and stored."""
    fusion, sa, sb, d, r, out = _operands("tcgen05_tile", 128, n, 16, tp.float16)
    sa.reorder({1: 0})  # [1, M, K]: the broadcast axis first, not part of the box
    for t in (sa, sb):
        _boxes(t, SW.B32, 1)
    for i in d.get_loop_domain():  # [M, N, rK]: one instruction
        i.parallelize(P.Mma)
    d.set_tmem_dim_sep_pos(1)  # M on the lanes, N on the columns
    for t in (r, out):
        t.axis(0).parallelize(P.TIDx)
    return fusion


@tp.schedule(target="sm_100a", expect=tp.accepted(warnings=("GLOBAL-COALESCING",)), params={"swizzle": ["B64", "B128"]})
def tcgen05_k_steps_in_a_swizzled_row(swizzle):
    """A 128 x 128 x K float16 tile, K one span of the swizzle (32 halves for B64, 64 for B128): A
    and B each one TMA box, and a K loop of K / 16 tcgen05.mma, each reading its 16 columns of K
    through a descriptor that starts 32 bytes further into the swizzled rows; the first writes D,
    the others add to it (enable-input-d), and one commit after the loop completes them all."""
    k = SW[swizzle].swizzle_bytes // 2
    fusion, sa, sb, d, r, out = _operands("tcgen05_k_steps", 128, 128, k, tp.float16)
    sa.reorder({1: 0})
    for t in (sa, sb):
        _boxes(t, SW[swizzle], 1)
    d.split(2, 16).reorder({2: 0})  # [rKo, M, N, rK16]
    for i in d.get_loop_domain()[1:]:
        i.parallelize(P.Mma)
    d.set_tmem_dim_sep_pos(2)  # [rKo, M | N, rK16]: the reduction axes take no lanes or columns
    for t in (r, out):
        t.axis(0).parallelize(P.TIDx)
    return fusion


@tp.schedule(target="sm_100a", expect=tp.accepted(warnings=("GLOBAL-COALESCING",)))
def tcgen05_k_loop():
    """A 256 x 128 x 64 bfloat16 GEMM in two blocks of 128 rows (BIDx): a K loop of four tiles,
    each loading 16 columns of K of A and B by TMA (the 32-byte swizzle) and issuing one
    tcgen05.mma that adds to the block's accumulators (the first writes them); each iteration
    commits its MMA and waits for it before the next iteration's TMA rewrites the tiles."""
    fusion, sa, sb, d, r, out = _operands("tcgen05_k_loop", 256, 128, 64, tp.bfloat16)
    for t in (sa, sb, d):
        t.split(2, 16).reorder({2: 0})  # [Ko, M, N, 16 of K]
        t.split(1, 1 if t is sb else 128).reorder({1: 0})  # [Mo, Ko, 128 of M, N, 16 of K]
    sa.reorder({3: 2})  # [Mo, Ko, 1, M128, K16]: the broadcast axis out of the box
    for t in (sa, sb):
        _boxes(t, SW.B32, 3)
    d.axis(0).parallelize(P.BIDx)
    for i in d.get_loop_domain()[2:]:  # [Mo, rKo, M128, N, rK16]
        i.parallelize(P.Mma)
    d.set_tmem_dim_sep_pos(3)  # lanes [Mo, rKo, M128]: the block's and the reduction's take none
    for t in (r, out):
        t.split(0, 128)
        t.axis(0).parallelize(P.BIDx)
        t.axis(1).parallelize(P.TIDx)
    sa.axis(0).parallelize(P.BIDx)
    for t in (sa, sb):
        t.inline_at(2)  # inside the K loop
    return fusion
