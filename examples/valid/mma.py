"""Tensor-core matmuls (seed 002, MoYe's "Tensor Cores" tutorial): D = A B with mma.sync, the
operands staged global -> shared (cp.async) -> registers (the fragments) and the accumulators
stored from registers.

The operands are declared broadcast to D's [M, N, K] positions: A as [M, 1, K], B as [1, N, K]
(call the kernel with a.reshape(M, 1, K) and b.reshape(1, N, K)), so that every tensor on the
way to the MmaOp has the same axes and can be inlined into its loops. A register tile's schedule
names each lane's fragment: the axis bound to TIDx is the lane l = 4g + q, the innermost axis
the element v, in the order the instruction numbers them (tp.schedule_mma_fragment writes those
splits and merges; docs/hardware.md#tensor-core-fragment-layouts has the maps). MMA-OPERAND-LAYOUT and
MMA-ACCUM-LAYOUT prove the schedule places what the instruction expects.

How the seed is read: MoYe's A (16 x 8) is M-major and B' is the 8 x 8 N x K operand, K-major
(its `sB_layout`, (bN, bK):(bK, 1)); `C == A * B` compares exactly, which tf32 rounding cannot
pass on general data (tests compare with an fp64 reference within the tf32 tolerance). The
double-buffered kernel's `tile_to_shape(sB_atom_layout, ...)` names a layout it never defines
and discards the result; we read sB_layout as given ((128, 16, 2):(16, 1, 2048), K-major).

The moye_* schedules are the seed's kernels, written out; the tuned_* ones are the mma.sync GEMM
recipe (tileproof.recipes.mma_gemm: D = A B^T, both operands K-major) with its MmaGemmParams.
"""

import tileproof as tp
from tileproof.recipes import (CpAsyncPipeline, Epilogue, GridOrder, MmaGemmParams, matmul_fusion, mma_gemm,
                               tile_multiples)
from tileproof.recipes.gemm_blocks import permute, tile_mnk

P = tp.ParallelType
LS = tp.LoadStoreOpType


def moye_tile(m=16, n=8, k=8):
    """The seed's first kernel: one 16 x 8 x 8 tf32 tile per block, one warp. A is M-major:
    cp.async copies 16 bytes (4 M-consecutive floats) per thread, threads (4, 8) over (M, K);
    B is K-major: 8 bytes (2 K-consecutive floats) per thread, threads (8, 4):(4, 1) over
    (N, K); each operand is read from shared memory into its fragment element by element
    (UniversalCopy), then one mma.sync.m16n8k8."""
    fusion, a, b, d = matmul_fusion(m, n, k, a_m_major=True)
    d.definition.set_macro(tp.MmaMacro.Ampere_16_8_8)
    sa = a.cache_after(LS.CpAsync)
    sb = b.cache_after(LS.CpAsync)
    ra = sa.cache_after()  # the fragments, read element by element
    rb = sb.cache_after()
    for t in (sa, sb):
        t.set_memory_type(tp.MemoryType.Shared)
    for t in (d, sa, sb, ra, rb):
        tile_mnk(t, 16, 8, 8)
    for t in (d, sa, ra):
        t.axis(0).parallelize(P.BIDx)
    for t in (d, sb, rb):
        t.axis(1).parallelize(P.BIDy)
    for i in (3, 4, 5):
        d.axis(i).parallelize(P.Mma)
    # sA [Mo, 1, Ko, 16, 8]: M-major (the seed's (bM, bK):(1, bM)); threads (4, 8) over (M, K),
    # 4 M-consecutive floats each
    sa.split(3, 4)  # [Mo, 1, Ko, mg(4), mv(4), K(8)]
    sa.reorder({3: 4, 4: 5, 5: 3})  # [Mo, 1, Ko, K, mg, mv]
    sa.set_allocation_domain(sa.get_loop_domain(), True)
    sa.merge(3)  # [Mo, 1, Ko, K * mg (32), mv]
    sa.axis(3).parallelize(P.TIDx)
    sa.axis(4).parallelize(P.Vectorize)
    # sB [1, No, Ko, 8, 8]: K-major; threads (8, 4):(4, 1) over (N, K), 2 K-consecutive each
    sb.split(4, 2)  # [1, No, Ko, N, kq(4), kv(2)]
    sb.merge(3)  # [1, No, Ko, N * kq (32), kv]
    sb.axis(3).parallelize(P.TIDx)
    sb.axis(4).parallelize(P.Vectorize)
    tp.schedule_mma_fragment(ra, tp.MmaMacro.Ampere_16_8_8, tp.MmaOperand.A)  # [.., lane, v]
    tp.schedule_mma_fragment(rb, tp.MmaMacro.Ampere_16_8_8, tp.MmaOperand.B)
    tp.inline_most(fusion)
    return fusion


@tp.schedule(expect=tp.accepted(warnings=("SMEM-BANK-CONFLICT",)), params={"size": ["16x8x100", "32x16x36"]})
def moye_tf32_tile_k_tail(size):
    """The seed's tile with a K the 8-wide K tile does not divide (100 = 12 x 8 + 4): both
    operands' cp.async copies write zeros past K (src-size 0), the fragment copies and the last
    mma.sync run past K on those zeros, so the products there are 0 x 0 (REDUCTION-K)."""
    m, n, k = (int(x) for x in size.split("x"))
    return moye_tile(m, n, k)


@tp.schedule(expect=tp.accepted(warnings=("SMEM-BANK-CONFLICT",)), params={"size": ["16x8x8", "64x32x8"]})
def moye_tf32_tile(size):
    """The seed's 16 x 8 x 8 tf32 tile per block, M-major A (cp.async 16 bytes, UniversalCopy
    to the fragment), K-major B (cp.async 8 bytes), one mma.sync.m16n8k8.row.col.tf32."""
    m, n, k = (int(x) for x in size.split("x"))
    return moye_tile(m, n, k)


def moye_double_buffered(m, n, k):
    """The seed's double-buffered kernel: block tile 128 x 128 x 16, four warps as the atom
    layout (2, 2, 1):(2, 1, 1) (warp w = 2 i_m + i_n; i_m on TIDz, i_n on TIDy), each warp
    repeating the 16 x 8 x 8 atom 4 x 8 times over rows 32 r + 16 i_m and columns 16 r + 8 i_n;
    sA M-major (128, 16):(1, 128) filled by cp.async 16 bytes with threads (16, 8) over (M, K),
    sB K-major (128, 16):(16, 1) with threads (32, 4):(4, 1); two stages (the copy of K tile
    i + 1 runs while tile i is multiplied); the fragments read from shared memory element by
    element (tileproof has no register double buffer: each K block's fragments are read just
    before its instructions)."""
    fusion, a, b, d = matmul_fusion(m, n, k, a_m_major=True)
    d.definition.set_macro(tp.MmaMacro.Ampere_16_8_8)
    sa = a.cache_after(LS.CpAsync)
    sb = b.cache_after(LS.CpAsync)
    ra = sa.cache_after()
    rb = sb.cache_after()
    for t in (sa, sb):
        t.set_memory_type(tp.MemoryType.Shared)
    for t in (d, sa, sb, ra, rb):
        tile_mnk(t, 128, 128, 16)
    # D [Mo, No, Ko, 128, 128, 16] -> [Mo, No, Ko, wm, wn, kb, rm, rn, 16, 8, 8]
    d.split(5, 8)
    d.split(4, 8).split(4, 2)
    d.split(3, 16).split(3, 2)  # [Mo, No, Ko, rm, wm, 16, rn, wn, 8, kb, 8]
    permute(d, [0, 1, 2, 4, 7, 9, 3, 6, 5, 8, 10])
    for i, p in ((0, P.BIDx), (1, P.BIDy), (3, P.TIDz), (4, P.TIDy), (5, P.Unroll), (6, P.Unroll), (7, P.Unroll),
                 (8, P.Mma), (9, P.Mma), (10, P.Mma)):
        d.axis(i).parallelize(p)
    # A's fragments [Mo, 1, Ko, 128, 16] -> [Mo, 1, Ko, wm, 1, kb, rm, lane, v]
    ra.split(4, 8)
    ra.split(3, 16).split(3, 2)
    ra.split(1, 1)  # [Mo, 1, 1, Ko, rm, wm, 16, kb, 8]
    permute(ra, [0, 1, 3, 5, 2, 7, 4, 6, 8])
    ra.axis(0).parallelize(P.BIDx)
    ra.axis(3).parallelize(P.TIDz)
    ra.axis(5).parallelize(P.Unroll)
    ra.axis(6).parallelize(P.Unroll)
    tp.schedule_mma_fragment(ra, tp.MmaMacro.Ampere_16_8_8, tp.MmaOperand.A)
    ra.axis(8).parallelize(P.Unroll)
    # B's fragments [1, No, Ko, 128, 16] -> [1, No, Ko, 1, wn, kb, rn, lane, v]
    rb.split(4, 8)
    rb.split(3, 8).split(3, 2)
    rb.split(0, 1)  # [1, 1, No, Ko, rn, wn, 8, kb, 8]
    permute(rb, [0, 2, 3, 1, 5, 7, 4, 6, 8])
    rb.axis(1).parallelize(P.BIDy)
    rb.axis(4).parallelize(P.TIDy)
    rb.axis(5).parallelize(P.Unroll)
    rb.axis(6).parallelize(P.Unroll)
    tp.schedule_mma_fragment(rb, tp.MmaMacro.Ampere_16_8_8, tp.MmaOperand.B)
    rb.axis(8).parallelize(P.Unroll)
    # sA [Mo, 1, Ko, 128, 16], M-major: threads t = mg + 16 kt, 4 M-consecutive floats each
    sa.set_allocation_domain([sa.axis(i) for i in (0, 1, 2, 4, 3)], True)
    sa.split(3, 4).split(3, 16)  # [Mo, 1, Ko, rm(2), mg(16), mv(4), 16]
    sa.split(6, 8)  # [Mo, 1, Ko, rm, mg, mv, rk(2), kt(8)]
    permute(sa, [0, 1, 2, 6, 3, 7, 4, 5])  # [Mo, 1, Ko, rk, rm, kt, mg, mv]
    sa.merge(5)
    sa.split(5, 32).split(5, 2)  # [Mo, 1, Ko, rk, rm, z, y, x, mv]
    # sB [1, No, Ko, 128, 16], K-major: threads t = 4 n + kg, 4 K-consecutive floats each
    sb.split(3, 32)  # [1, No, Ko, rn(4), n(32), 16]
    sb.split(5, 4)  # [1, No, Ko, rn, n, kg(4), kv(4)]
    sb.merge(4)
    sb.split(4, 32).split(4, 2)  # [1, No, Ko, rn, z, y, x, kv]
    for t, blk, at in ((sa, P.BIDx, 5), (sb, P.BIDy, 4)):
        t.axis(0 if blk is P.BIDx else 1).parallelize(blk)
        t.axis(at).parallelize(P.TIDz)
        t.axis(at + 1).parallelize(P.TIDy)
        t.axis(at + 2).parallelize(P.TIDx)
        t.axis(-1).parallelize(P.Vectorize)
        t.inline_at(3)
        t.circular_buffer(2)
    ra.inline_at(6)
    rb.inline_at(6)
    return fusion


@tp.schedule(expect=lambda size: tp.accepted(warnings=("SMEM-BANK-CONFLICT",) + ("GRID-SIZE",) * (size != "symbolic")),
             params={"size": ["256x256x64", "symbolic"]})
def moye_tf32_double_buffered(size):
    """The seed's double-buffered 128 x 128 x 16 tf32 kernel (four warps, M-major A, K-major B,
    two cp.async stages)."""
    if size == "symbolic":
        fusion = moye_double_buffered("M", "N", "K")
        for s in ("M", "N"):
            fusion.assume(f"{s} % 128 == 0")
        fusion.assume("N <= 65535 * 128")  # gridDim.y = N / 128 launches (LAUNCH-GRID)
        fusion.assume("K % 16 == 0")
        return fusion
    return moye_double_buffered(*(int(x) for x in size.split("x")))


@tp.schedule(expect=tp.accepted(), params={"dtype": ["bfloat16", "float32"]})
def tuned_matmul(dtype):
    """The tuned mma.sync schedule (tileproof.recipes.mma_gemm; benchmarks/matmul.py runs it at
    8192^3) at a symbolic size, with the recipe's defaults: 128 x 128 block tiles of four warps,
    four swizzled cp.async stages, ldmatrix fragments."""
    dt = getattr(tp, dtype)
    return tile_multiples(mma_gemm("M", "N", "K", MmaGemmParams(dtype=dt)), 128 // dt.bytes)


@tp.schedule(expect=tp.accepted(), params={"dtype": ["bfloat16", "float32"]})
def tuned_matmul_k_tail(dtype):
    """The tuned schedule with a K its 128-byte K tiles need not divide: the last tile's
    cp.async copies write zeros past K, and ldmatrix and mma.sync run on them. K stays a multiple
    of the 16-byte copy (8 bfloat16 or 4 float32), so that no copy straddles the end of K."""
    dt = getattr(tp, dtype)
    return tile_multiples(mma_gemm("M", "N", "K", MmaGemmParams(dtype=dt)), 16 // dt.bytes)


@tp.schedule(expect=tp.accepted(), params={"dtype": ["bfloat16", "float32"]})
def tuned_matmul_grouped_double_buffered(dtype):
    """The tuned schedule as benchmarks/matmul.py runs it fastest: three cp.async stages, the
    ldmatrix fragments circular-buffered over the k-slice loop (two register stages, one slice
    ahead: ldmatrix of slice s + 1 is issued before the mma.sync of slice s, into the other
    stage's registers; PIPELINE-RAW, PIPELINE-WAR), and the blocks in groups of 8 M tiles
    (blockIdx.z the group; M need only be a multiple of the 128-row tile: the last group's
    blocks past M do nothing)."""
    dt = getattr(tp, dtype)
    params = MmaGemmParams(dtype=dt, pipeline=CpAsyncPipeline(stages=3, prefetch=2, fragment_stages=2),
                           grid=GridOrder(group=8))
    return tile_multiples(mma_gemm("M", "N", "K", params), 128 // dt.bytes)


@tp.schedule(expect=tp.accepted())
def tuned_matmul_tf32_truncated():
    """The tuned float32 schedule with tf32 truncation declared (tp.Tf32Rounding.Truncate): the
    mma.sync reads the float32 bits as they are (the tensor cores use the upper 19: round toward
    zero, twice cvt.rna's error), as Triton's tf32 dot does; no conversion instruction is
    issued. Without the declaration each operand register is rounded by cvt.rna.tf32.f32."""
    params = MmaGemmParams(dtype=tp.float32, pipeline=CpAsyncPipeline(stages=3, prefetch=2, fragment_stages=2),
                           grid=GridOrder(group=8), tf32_rounding=tp.Tf32Rounding.Truncate)
    return tile_multiples(mma_gemm("M", "N", "K", params), 32)


@tp.schedule(expect=tp.accepted(), params={"group": [1, 8]})
def tuned_matmul_stmatrix_epilogue(group):
    """The tuned bfloat16 schedule with a bfloat16 output through stmatrix and a TMA store: the
    MmaOp's accumulators stay in registers, allocated as their C fragments (8 a lane per 16 x 16
    tile, ALLOCATION-DISTINCT on the lanes' own elements), are cast to bfloat16 in that layout,
    stored by stmatrix.x4 (one per 16 x 16 tile: its four 8 x 8 matrices are the fragment's
    register pairs) into the block's shared tile, laid out as two 128 x 64 TMA boxes with the
    128-byte swizzle, and written out by one TMA store per box."""
    params = MmaGemmParams(pipeline=CpAsyncPipeline(stages=3, prefetch=2, fragment_stages=2),
                           grid=GridOrder(group=group), epilogue=Epilogue(dtype=tp.bfloat16, stmatrix=True))
    return tile_multiples(mma_gemm("M", "N", "K", params), 64)
