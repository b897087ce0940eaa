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
"""

import importlib.util
from pathlib import Path

import tileproof as tp

P = tp.ParallelType
LS = tp.LoadStoreOpType

_spec = importlib.util.spec_from_file_location("_tileproof_example_ldst_matrix", Path(__file__).parent / "ldst_matrix.py")
_ldst_matrix = importlib.util.module_from_spec(_spec)  # swizzle_tma_box, for the stmatrix epilogue
_spec.loader.exec_module(_ldst_matrix)


def operands(m, n, k, dtype=tp.float32, a_m_major=False, out_dtype=None):
    """The fusion D[M, N] = sum_k A[M, 1, K] B[1, N, K] (A M-major in memory if `a_m_major`);
    with `out_dtype`, D stays an intermediate and its cast to out_dtype is the output."""
    with tp.Fusion("matmul") as fusion:
        a = tp.make_tensor([m, 1, k], dtype=dtype)
        b = tp.make_tensor([1, n, k], dtype=dtype)
        fusion.add_input(a)
        fusion.add_input(b)
        d = tp.fused_multiply_sum(a, b, [-1])
        fusion.add_output(d if out_dtype is None else tp.cast(d, out_dtype))
    if a_m_major:  # column-major A: M is the contiguous axis
        a.set_allocation_domain([a.axis(2), a.axis(1), a.axis(0)], True)
    return fusion, a, b, d


def tile_mnk(tv, bm, bn, bk):
    """[M, N, K] -> [Mo, No, Ko, bm, bn, bk]; a broadcast axis (A's N, B's M) is not split, so A
    becomes [Mo, 1, Ko, bm, bk] and B [1, No, Ko, bn, bk]."""
    inner = []
    for axis, factor in ((0, bm), (1, bn), (2, bk)):
        at = axis + len(inner)
        if tv.axis(at).is_broadcast:
            continue
        tv.split(at, factor)
        inner.append(at + 1)
    outer = [i for i in range(len(tv.get_loop_domain())) if i not in inner]
    tv.reorder({old: new for new, old in enumerate(outer + inner)})
    return tv


def moye_tile(m=16, n=8, k=8):
    """The seed's first kernel: one 16 x 8 x 8 tf32 tile per block, one warp. A is M-major:
    cp.async copies 16 bytes (4 M-consecutive floats) per thread, threads (4, 8) over (M, K);
    B is K-major: 8 bytes (2 K-consecutive floats) per thread, threads (8, 4):(4, 1) over
    (N, K); each operand is read from shared memory into its fragment element by element
    (UniversalCopy), then one mma.sync.m16n8k8."""
    fusion, a, b, d = operands(m, n, k, a_m_major=True)
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


@tp.schedule(expect=tp.accepted(), params={"size": ["16x8x100", "32x16x36"]})
def moye_tf32_tile_k_tail(size):
    """The seed's tile with a K the 8-wide K tile does not divide (100 = 12 x 8 + 4): both
    operands' cp.async copies write zeros past K (src-size 0), the fragment copies and the last
    mma.sync run past K on those zeros, so the products there are 0 x 0 (REDUCTION-K)."""
    m, n, k = (int(x) for x in size.split("x"))
    return moye_tile(m, n, k)


@tp.schedule(expect=tp.accepted(), params={"size": ["16x8x8", "64x32x8"]})
def moye_tf32_tile(size):
    """The seed's 16 x 8 x 8 tf32 tile per block, M-major A (cp.async 16 bytes, UniversalCopy
    to the fragment), K-major B (cp.async 8 bytes), one mma.sync.m16n8k8.row.col.tf32."""
    m, n, k = (int(x) for x in size.split("x"))
    return moye_tile(m, n, k)


def permute(tv, order):
    """Reorder tv's loop axes: `order` lists the old positions in their new order."""
    tv.reorder({old: new for new, old in enumerate(order)})


def moye_double_buffered(m, n, k):
    """The seed's double-buffered kernel: block tile 128 x 128 x 16, four warps as the atom
    layout (2, 2, 1):(2, 1, 1) (warp w = 2 i_m + i_n; i_m on TIDz, i_n on TIDy), each warp
    repeating the 16 x 8 x 8 atom 4 x 8 times over rows 32 r + 16 i_m and columns 16 r + 8 i_n;
    sA M-major (128, 16):(1, 128) filled by cp.async 16 bytes with threads (16, 8) over (M, K),
    sB K-major (128, 16):(16, 1) with threads (32, 4):(4, 1); two stages (the copy of K tile
    i + 1 runs while tile i is multiplied); the fragments read from shared memory element by
    element (tileproof has no register double buffer: each K block's fragments are read just
    before its instructions)."""
    fusion, a, b, d = operands(m, n, k, a_m_major=True)
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


@tp.schedule(expect=tp.accepted(), params={"size": ["256x256x64", "symbolic"]})
def moye_tf32_double_buffered(size):
    """The seed's double-buffered 128 x 128 x 16 tf32 kernel (four warps, M-major A, K-major B,
    two cp.async stages)."""
    if size == "symbolic":
        fusion = moye_double_buffered("M", "N", "K")
        for s in ("M", "N"):
            fusion.assume(f"{s} % 128 == 0")
        fusion.assume("K % 16 == 0")
        return fusion
    return moye_double_buffered(*(int(x) for x in size.split("x")))


def swizzled_tile(tv, row_bytes=128):
    """Allocate tv's tile [.., rows, K] (K of `row_bytes` = 128 or 64 bytes) with its 16-byte chunks
    XOR-swizzled by the row: chunk c of row r at c ^ (r % 8) for 128-byte rows, c ^ ((r / 2) % 4)
    for 64-byte rows (two rows share a 128-byte line). The 8 rows an ldmatrix reads at one chunk,
    and the chunks cp.async writes along a row, fall in 8 different 16-byte bank groups."""
    tile = tv.get_loop_domain()
    per_chunk = 16 // tv.dtype.bytes
    chunks = row_bytes // 16
    tv.split(-1, per_chunk)  # [.., rows, chunks, 16 bytes]
    if chunks == 8:
        tv.split(-3, 8)  # [.., rows / 8, 8, chunks, 16 bytes]
        tv.swizzle(tp.SwizzleType.XOR, -3, -2)
    else:
        tv.split(-3, 8 // chunks).split(-4, chunks)  # [.., rows / 8, chunks, 8 / chunks, chunks, 16 bytes]
        tv.swizzle(tp.SwizzleType.XOR, -4, -2)
    tv.set_allocation_domain(tv.get_loop_domain(), True)
    tv.set_loop_domain(tile)


def cp_async_tile(tv, rows, cols, warps):
    """The loop of a cp.async copy of tv's tile [.., rows, cols]: 16 bytes per thread, the
    threads (TIDz = warps[0], TIDy = warps[1], TIDx = 32) along consecutive chunks of
    consecutive rows."""
    per_chunk = 16 // tv.dtype.bytes
    threads = warps[0] * warps[1] * 32
    if rows * cols % (per_chunk * threads):
        raise ValueError(f"a {rows} x {cols} tile is not a whole number of 16-byte copies per thread")
    tv.merge(-2)  # [.., rows * cols]
    tv.split(-1, per_chunk)  # [.., chunks, 16 bytes]
    tv.split(-2, threads)  # [.., repeats, threads, 16 bytes]
    tv.split(-2, 32)  # [.., repeats, warps, 32, 16 bytes]
    tv.split(-3, warps[1])  # [.., repeats, warps z, warps y, 32, 16 bytes]
    for k, p in ((-5, P.Unroll), (-4, P.TIDz), (-3, P.TIDy), (-2, P.TIDx), (-1, P.Vectorize)):
        tv.axis(k).parallelize(p)


def tuned(m, n, k, dtype=tp.bfloat16, block=(128, 128), warps=(2, 2), stages=4, prefetch=-1, ldmatrix=True,
          row_bytes=128, fragment_stages=1, group=1, stmatrix_epilogue=None, tf32_rounding=None):
    """A tuned mma.sync matmul, D = A B^T with A [M, K] and B [N, K] both K-major (A @ B.T):
    block tile block[0] x block[1] x (row_bytes = 128 or 64 bytes of K), warps[0] x warps[1]
    warps each computing a (block / warps) tile of macro tiles, `stages` cp.async stages of
    swizzled shared memory (conflict-free for cp.async and ldmatrix), `prefetch` of them in flight,
    fragments loaded by ldmatrix.x4 (bfloat16 / float16: Ampere_16_16_16, tf32: Ampere_16_8_8).
    fragment_stages=2 double-buffers the fragments over the k-slice loop: the next slice's
    ldmatrix is issued before this slice's mma.sync, into other registers. group=G orders the
    blocks in groups of G M tiles (blockIdx.x within the group, blockIdx.y the N tile,
    blockIdx.z the group): the blocks running at once share G tiles of A and few of B in L2.
    stmatrix_epilogue=dtype (a 16-bit type) makes the output D cast to it, stored through
    stmatrix into a swizzled shared tile and a TMA store (bfloat16 operands). tf32_rounding (a
    tp.Tf32Rounding, float32 operands) is the MmaOp's: cvt.rna (None) or declared truncation."""
    bm, bn = block
    wm, wn = warps
    bk = row_bytes // dtype.bytes
    macro = tp.MmaMacro.Ampere_16_8_8 if dtype == tp.float32 else tp.MmaMacro.Ampere_16_16_16
    mk = macro.k
    fusion, a, b, d = operands(m, n, k, dtype, out_dtype=stmatrix_epilogue)
    epilogue = [] if stmatrix_epilogue is None else through_shared(fusion.outputs[0])
    d.definition.set_macro(macro, tf32_rounding=tf32_rounding)
    sa = a.cache_after(LS.CpAsync)
    sb = b.cache_after(LS.CpAsync)
    op = LS.LdMatrix if ldmatrix else LS.Set
    ra = sa.cache_after(op)
    rb = sb.cache_after(op)
    for t in (sa, sb):
        t.set_memory_type(tp.MemoryType.Shared)
    for t in (d, sa, sb, ra, rb):
        tile_mnk(t, bm, bn, bk)
    # D [Mo, No, Ko, bm, bn, bk] -> [Mo, No, Ko, wm, wn, kb, rm, rn, M, N, K (the macro)]
    d.split(5, mk)  # K -> kb, mk
    d.split(4, macro.n).split(4, bn // wn // macro.n)  # N -> wn, rn, n
    d.split(3, macro.m).split(3, bm // wm // macro.m)  # M -> wm, rm, m: [Mo, No, Ko, wm, rm, m, wn, rn, n, kb, mk]
    permute(d, [0, 1, 2, 3, 6, 9, 4, 7, 5, 8, 10])
    if epilogue:
        d.set_allocation_domain(tp.mma_output_allocation(d), True)  # the C fragments: K axes first, then the tiles
    for i, p in ((3, P.TIDz), (4, P.TIDy), (5, P.Unroll), (6, P.Unroll), (7, P.Unroll),
                 (8, P.Mma), (9, P.Mma), (10, P.Mma)):
        d.axis(i).parallelize(p)
    # A's fragments [Mo, 1, Ko, bm, bk] -> [Mo, 1, Ko, wm, 1, kb, rm, lane, v]
    ra.split(4, mk)
    ra.split(3, macro.m).split(3, bm // wm // macro.m)  # [Mo, 1, Ko, wm, rm, m, kb, mk]
    ra.split(1, 1)  # [Mo, 1, 1, Ko, wm, rm, m, kb, mk]
    permute(ra, [0, 1, 3, 4, 2, 7, 5, 6, 8])
    ra.axis(3).parallelize(P.TIDz)
    # B's fragments [1, No, Ko, bn, bk] -> [1, No, Ko, 1, wn, kb, rn, lane, v]
    rb.split(4, mk)
    rb.split(3, macro.n).split(3, bn // wn // macro.n)  # [1, No, Ko, wn, rn, n, kb, mk]
    rb.split(0, 1)  # [1, 1, No, Ko, wn, rn, n, kb, mk]
    permute(rb, [0, 2, 3, 1, 4, 7, 5, 6, 8])
    rb.axis(4).parallelize(P.TIDy)
    for t, operand in ((ra, tp.MmaOperand.A), (rb, tp.MmaOperand.B)):
        t.axis(5).parallelize(P.Unroll)
        t.axis(6).parallelize(P.Unroll)
        tp.schedule_mma_fragment(t, macro, operand)
        t.axis(8).parallelize(P.Vectorize if ldmatrix else P.Unroll)
    for t, rows in ((sa, bm), (sb, bn)):
        swizzled_tile(t, row_bytes)
        cp_async_tile(t, rows, bk, warps)
    if epilogue:
        _stmatrix_epilogue(epilogue, macro, block, warps)
    at = grouped_blocks((d, sa, sb, ra, rb, *epilogue), group)
    for t in (sa, sb):
        t.inline_at(3 + at)
        t.circular_buffer(stages, prefetch)
    ra.inline_at(6 + at)
    rb.inline_at(6 + at)
    if epilogue:
        c, cs, _ = epilogue
        d.inline_at(2 + at)
        cs.inline_at(2 + at)
        c.inline_at(len(c.loop) - 1)
    if fragment_stages > 1:
        ra.circular_buffer(fragment_stages)
        rb.circular_buffer(fragment_stages)
    return fusion


def through_shared(out):
    """The cast output's path [c, c_smem, out]: c = cast(D) in registers, c_smem its shared tile
    (stmatrix) and out the output (TMA store)."""
    cs = out.cache_before(LS.TMA)  # out = TMA store(cs)
    c = cs.cache_before(LS.StMatrix)  # cs = stmatrix(c), c = cast(d)
    cs.set_memory_type(tp.MemoryType.Shared)
    return [c, cs, out]


def tma_store_boxes(epilogue, block, swizzle=128, by_box=False):
    """[c, cs, out] of through_shared tiled [Mo, No, bm, bn]; cs allocated as the TMA store's
    swizzled boxes of one swizzle span of columns, out's boxes [Mo, No, bn / span (a loop of
    stores), bm, span] Bulk. The caller lays out c and cs as the accumulators' fragment.
    by_box=True: cs's loop keeps the box axis [Mo, No, bn / span, bm, span], the axis of its
    allocation too, so that cs inlined past it holds one box."""
    c, cs, out = epilogue
    bm, bn = block
    for t in (c, cs, out):
        t.split(1, bn).split(0, bm)  # [Mo, bm, No, bn]
        permute(t, [0, 2, 1, 3])  # [Mo, No, bm, bn]
    tile = cs.get_loop_domain()
    for t in (cs, out):  # the TMA boxes [Mo, No, bn / span, bm, span], span = one swizzle's columns
        t.split(3, swizzle // cs.dtype.bytes)
        permute(t, [0, 1, 3, 2, 4])
    if by_box:
        tile = cs.get_loop_domain()
    _ldst_matrix.swizzle_tma_box(cs, swizzle)  # cs is allocated as the boxes, swizzled
    cs.set_allocation_domain(cs.get_loop_domain(), True)
    cs.set_loop_domain(tile)
    for k in range(3, len(out.loop)):
        out.axis(k).parallelize(P.Bulk)


def _stmatrix_epilogue(epilogue, macro, block, warps):
    """The cast c in the accumulators' layout (the C fragment), stmatrix.x4 of each 16 x 16
    macro tile into the block's shared tile cs (tma_store_boxes), and the TMA store of cs to the
    output."""
    tma_store_boxes(epilogue, block)
    c, cs, _ = epilogue
    bm, bn = block
    wm, wn = warps
    for t in (c, cs):  # [Mo, No, bm, bn] -> [Mo, No, wm, wn, rm, rn, lane, v]: the C fragment
        t.split(3, macro.n).split(3, bn // wn // macro.n)
        t.split(2, macro.m).split(2, bm // wm // macro.m)
        permute(t, [0, 1, 2, 5, 3, 6, 4, 7])
        tp.schedule_mma_fragment(t, macro, "C")
        t.axis(2).parallelize(P.TIDz)
        t.axis(3).parallelize(P.TIDy)
        t.axis(4).parallelize(P.Unroll)
        t.axis(5).parallelize(P.Unroll)
        t.axis(6).parallelize(P.TIDx)
    c.axis(7).parallelize(P.Unroll)
    cs.axis(7).parallelize(P.Vectorize)  # eight 16-bit elements a lane: stmatrix.x4


def grouped_blocks(tensors, group):
    """Bind the block tiles [Mo, No, ..] of `tensors` to blocks: blockIdx.x the M tile, blockIdx.y
    the N tile; with group > 1 the M tiles in groups [Mo / group, group, No], blockIdx.z the group
    and blockIdx.x the tile in it (x runs fastest: the blocks running at once share `group` tiles
    of A). Returns the axes the grouping added (0 or 1)."""
    at = 1 if group > 1 else 0
    for t in tensors:
        if group > 1:
            t.split(0, 1 if t.axis(0).is_broadcast else group)  # B's M: two broadcasts of extent 1
        for i, p in enumerate([P.BIDz, P.BIDx, P.BIDy][1 - at:]):
            if not t.axis(i).is_broadcast:
                t.axis(i).parallelize(p)
    return at


def tile_multiples(fusion, k_multiple, m_multiple=128, n_multiple=128):
    """Assume the symbolic sizes multiples of the block tile (M, N) and of `k_multiple` (K)."""
    for s, q in (("M", m_multiple), ("N", n_multiple), ("K", k_multiple)):
        fusion.assume(f"{s} % {q} == 0")
    return fusion


@tp.schedule(expect=tp.accepted(), params={"dtype": ["bfloat16", "float32"]})
def tuned_matmul(dtype):
    """The tuned mma.sync schedule (benchmarks/matmul.py runs it at 8192^3) at a symbolic size:
    128 x 128 block tiles of four warps, four swizzled cp.async stages, ldmatrix fragments."""
    dt = getattr(tp, dtype)
    return tile_multiples(tuned("M", "N", "K", dt), 128 // dt.bytes)


@tp.schedule(expect=tp.accepted(), params={"dtype": ["bfloat16", "float32"]})
def tuned_matmul_k_tail(dtype):
    """The tuned schedule with a K its 128-byte K tiles need not divide: the last tile's
    cp.async copies write zeros past K, and ldmatrix and mma.sync run on them. K stays a multiple
    of the 16-byte copy (8 bfloat16 or 4 float32), so that no copy straddles the end of K."""
    dt = getattr(tp, dtype)
    return tile_multiples(tuned("M", "N", "K", dt), 16 // dt.bytes)


@tp.schedule(expect=tp.accepted(), params={"dtype": ["bfloat16", "float32"]})
def tuned_matmul_grouped_double_buffered(dtype):
    """The tuned schedule as benchmarks/matmul.py runs it fastest: three cp.async stages, the
    ldmatrix fragments circular-buffered over the k-slice loop (two register stages, one slice
    ahead: ldmatrix of slice s + 1 is issued before the mma.sync of slice s, into the other
    stage's registers; PIPELINE-RAW, PIPELINE-WAR), and the blocks in groups of 8 M tiles
    (blockIdx.z the group; M need only be a multiple of the 128-row tile: the last group's
    blocks past M do nothing)."""
    dt = getattr(tp, dtype)
    fusion = tuned("M", "N", "K", dt, stages=3, prefetch=2, fragment_stages=2, group=8)
    return tile_multiples(fusion, 128 // dt.bytes)


@tp.schedule(expect=tp.accepted())
def tuned_matmul_tf32_truncated():
    """The tuned float32 schedule with tf32 truncation declared (tp.Tf32Rounding.Truncate): the
    mma.sync reads the float32 bits as they are (the tensor cores use the upper 19: round toward
    zero, twice cvt.rna's error), as Triton's tf32 dot does; no conversion instruction is
    issued. Without the declaration each operand register is rounded by cvt.rna.tf32.f32."""
    fusion = tuned("M", "N", "K", tp.float32, stages=3, prefetch=2, fragment_stages=2, group=8,
                   tf32_rounding=tp.Tf32Rounding.Truncate)
    return tile_multiples(fusion, 32)


@tp.schedule(expect=tp.accepted(), params={"group": [1, 8]})
def tuned_matmul_stmatrix_epilogue(group):
    """The tuned bfloat16 schedule with a bfloat16 output through stmatrix and a TMA store: the
    MmaOp's accumulators stay in registers, allocated as their C fragments (8 a lane per 16 x 16
    tile, ALLOCATION-DISTINCT on the lanes' own elements), are cast to bfloat16 in that layout,
    stored by stmatrix.x4 (one per 16 x 16 tile: its four 8 x 8 matrices are the fragment's
    register pairs) into the block's shared tile, laid out as two 128 x 64 TMA boxes with the
    128-byte swizzle, and written out by one TMA store per box."""
    fusion = tuned("M", "N", "K", tp.bfloat16, stages=3, prefetch=2, fragment_stages=2, group=group,
                   stmatrix_epilogue=tp.bfloat16)
    return tile_multiples(fusion, 64)
