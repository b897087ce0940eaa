"""Tensor-core schedules that would compute wrong products (seed 002's traps): the bfloat16
register order used for a tf32 operand (MMA-OPERAND-LAYOUT), the seed's M-major A fed to an
ldmatrix that reads K-major rows (LDSM-THREAD-ROWS, LDSM-ALIGNMENT), a K of 100 that the 8-wide K tile does
not divide, with nothing making the tail zero (REDUCTION-K), and an epilogue that reads the
accumulators as if each thread held whole rows (MMA-ACCUM-LAYOUT).

examples/valid/mma.py holds the working forms.
"""

import tileproof as tp

P = tp.ParallelType
LS = tp.LoadStoreOpType


def tile(m, n, k, dtype=tp.float32, a_m_major=False, epilogue=False, copy=LS.Set):
    """D[M, N] = sum_k A[M, 1, K] B[1, N, K] on one block and one warp: shared-memory copies of
    both operands (by `copy`), their register fragments, and the MmaOp (or a register MmaOp and
    a copy of it to global memory, `epilogue`)."""
    with tp.Fusion("mma_tile") as fusion:
        a = tp.make_tensor([m, 1, k], dtype=dtype)
        b = tp.make_tensor([1, n, k], dtype=dtype)
        fusion.add_input(a)
        fusion.add_input(b)
        d = tp.fused_multiply_sum(a, b, [-1])
        out = tp.set(d) if epilogue else d
        fusion.add_output(out)
    if a_m_major:
        a.set_allocation_domain([a.axis(2), a.axis(1), a.axis(0)], True)
    sa, sb = a.cache_after(copy), b.cache_after(copy)
    for t in (sa, sb):
        t.set_memory_type(tp.MemoryType.Shared)
    return fusion, sa, sb, d, out


def mma_axes(d):
    for i in range(3):
        d.axis(i).parallelize(P.Mma)


def copy_threads(t):
    """A shared copy's loop [.., rows, cols] -> [.., 32 lanes, rest]: any thread mapping."""
    t.merge(-2).split(-1, 32, inner_split=False)
    t.axis(-2).parallelize(P.TIDx)


@tp.schedule(expect=tp.rejected("MMA-OPERAND-LAYOUT", messages=[
    "takes T5[0, 4] as lane 0's A element 2"], warnings=("GLOBAL-COALESCING", "SMEM-BANK-CONFLICT")))
def bf16_register_order_for_tf32():
    """The seed's tf32 16 x 8 x 8 tile with A's registers in the bfloat16 order: lane 4g + q
    holding columns 2q, 2q + 1 (the m16n8k8 f16 / bf16 A fragment) where tf32 wants q, q + 4.
    Measured on an H100 (the layout probe): 112 of the 128 outputs wrong."""
    fusion, sa, sb, d, _ = tile(16, 8, 8)
    d.definition.set_macro(tp.MmaMacro.Ampere_16_8_8)
    mma_axes(d)
    copy_threads(sa)
    copy_threads(sb)
    ra, rb = sa.cache_after(), sb.cache_after()
    # A [16, 1, 8] -> [1, (g, q), (mh, kl)]: k = 2q + kl, the 16-bit order
    ra.split(0, 8).split(3, 2)  # [mh, g, 1, q, kl]
    ra.reorder({0: 3, 2: 0, 3: 2})  # [1, g, q, mh, kl]
    ra.merge(1).merge(2)
    ra.axis(1).parallelize(P.TIDx)
    tp.schedule_mma_fragment(rb, tp.MmaMacro.Ampere_16_8_8, tp.MmaOperand.B)
    tp.inline_most(fusion)
    return fusion


@tp.schedule(expect=tp.rejected("REDUCTION-K", messages=["reaches index 100 of an axis of extent 100"],
                                warnings=("GLOBAL-COALESCING", "SMEM-BANK-CONFLICT")))
def k_of_100_without_zero_fill():
    """K = 100 in K tiles of 8: the last tile reads K indices 100..103, past the operands. The
    instruction is warp-collective, so the lanes holding them cannot skip it; their registers
    (and the shared memory behind them) hold whatever was there, NaN included."""
    fusion, sa, sb, d, _ = tile(16, 8, 100)
    k_tiles_of_8(d)
    for t in (sa, sb):
        t.split(2, 8)
        t.reorder({2: 0, 0: 1, 1: 2})  # [Ko, .., .., Ki]
        copy_threads(t)
    k_tiled_fragments(sa, sb)
    tp.inline_all_at(d, 1)
    return fusion


def k_tiles_of_8(d):
    """D [M, N, K] -> [Ko, M, N, Ki]: the seed's 16 x 8 x 8 tf32 macro tile per K tile of 8."""
    d.definition.set_macro(tp.MmaMacro.Ampere_16_8_8)
    d.split(2, 8)
    d.reorder({2: 0, 0: 1, 1: 2})  # [Ko, M, N, Ki]
    for i in (1, 2, 3):
        d.axis(i).parallelize(P.Mma)


def k_tiled_fragments(sa, sb):
    """The register fragments of the shared tiles, per K tile of 8: [Ko, .., lane, v]."""
    ra, rb = sa.cache_after(), sb.cache_after()
    for t, operand in ((ra, tp.MmaOperand.A), (rb, tp.MmaOperand.B)):
        t.split(2, 8)
        t.reorder({2: 0, 0: 1, 1: 2})
        if operand is tp.MmaOperand.A:
            t.reorder({1: 2, 2: 1})  # [Ko, 1, M, Ki]: the tile innermost
        tp.schedule_mma_fragment(t, tp.MmaMacro.Ampere_16_8_8, operand)
    return ra, rb


def k_tail(k, a_tile):
    """D[16, 8] over K = k in K tiles of 8, one warp: both operands staged by cp.async (zeros
    past K) into shared tiles that are not inlined (A's split of K by `a_tile`), then copied to
    the fragments inside the K loop."""
    fusion, sa, sb, d, _ = tile(16, 8, k, copy=LS.CpAsync)
    k_tiles_of_8(d)
    sa.split(2, a_tile)  # [16, 1, K / a_tile, a_tile]
    sa.axis(0).parallelize(P.TIDx)
    sb.split(2, 8)  # [1, 8, K / 8, 8]
    sb.axis(1).parallelize(P.TIDx)
    for t in k_tiled_fragments(sa, sb):
        t.inline_at(1)
    return fusion


@tp.schedule(expect=tp.rejected("REDUCTION-K", messages=["reads T3 at K index 100 (K = 100)"],
                                warnings=("SMEM-BANK-CONFLICT",)))
def shared_tile_ends_at_k():
    """K = 100 in K tiles of 8, both operands staged by cp.async, which writes zeros past K;
    but A's shared tile splits K by 4, so its copies end at index 99. The last K tile's fragment
    reads A's indices 100..103, which no copy wrote: shared memory holds whatever was there."""
    return k_tail(100, 4)


@tp.schedule(expect=tp.rejected("MMA-ACCUM-LAYOUT", messages=["T3 reads T2[0, 2] in lane 0"],
                                warnings=("GLOBAL-COALESCING", "SMEM-BANK-CONFLICT")))
def accumulators_read_as_rows():
    """The accumulators stay in registers (the MmaOp's output is Local) and a copy stores them,
    each thread taking four consecutive elements of a row; mma.sync left lane 4g + q holding
    rows g and g + 8, columns 2q and 2q + 1."""
    fusion, sa, sb, d, out = tile(16, 8, 8, epilogue=True)
    d.definition.set_macro(tp.MmaMacro.Ampere_16_8_8)
    mma_axes(d)
    copy_threads(sa)
    copy_threads(sb)
    ra, rb = sa.cache_after(), sb.cache_after()
    ra.reorder({0: 1, 1: 0})  # [1, M, K]: the tile innermost
    tp.schedule_mma_fragment(ra, tp.MmaMacro.Ampere_16_8_8, tp.MmaOperand.A)
    tp.schedule_mma_fragment(rb, tp.MmaMacro.Ampere_16_8_8, tp.MmaOperand.B)
    out.merge(0).split(0, 4)
    out.axis(0).parallelize(P.TIDx)
    tp.inline_most(fusion)
    return fusion


@tp.schedule(expect=tp.rejected("LDSM-THREAD-ROWS", "LDSM-ALIGNMENT", messages=[
    "does not move 16-byte matrix rows: lane 1 element 0 is row 0, column 1 of matrix 0"],
    warnings=("GLOBAL-COALESCING", "SMEM-BANK-CONFLICT")))
def m_major_a_through_ldmatrix():
    """The seed's A is M-major in shared memory ((bM, bK):(1, bM)); its double-buffered kernel
    notes "A is M-major so we cannot use LDSM_U32x4_N". Here A's fragment is loaded with
    ldmatrix.x4 anyway: each lane supplies the address of a row of 4 consecutive floats, which in
    an M-major tile are 4 rows of one column, so the registers get A's transpose."""
    fusion, sa, sb, d, _ = tile(16, 8, 8, a_m_major=True)
    d.definition.set_macro(tp.MmaMacro.Ampere_16_8_8)
    mma_axes(d)
    sa.set_allocation_domain([sa.axis(2), sa.axis(1), sa.axis(0)], True)  # M-major, as the seed's sA
    copy_threads(sa)
    copy_threads(sb)
    ra, rb = sa.cache_after(LS.LdMatrix), sb.cache_after()
    ra.reorder({0: 1, 1: 0})  # [1, M, K]: the tile innermost
    tp.schedule_mma_fragment(ra, tp.MmaMacro.Ampere_16_8_8, tp.MmaOperand.A)
    ra.axis(-1).parallelize(P.Vectorize)  # the lane's 4 registers: ldmatrix.x4
    tp.schedule_mma_fragment(rb, tp.MmaMacro.Ampere_16_8_8, tp.MmaOperand.B)
    tp.inline_most(fusion)
    return fusion
