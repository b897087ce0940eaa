"""The mma.sync GEMM recipe: D = A B^T with A [M, K] and B [N, K] both K-major (A @ B.T), the
operands staged global -> swizzled shared memory (cp.async stages) -> registers (ldmatrix
fragments), the accumulators in registers, on the Turing / Ampere tensor cores (sm_80 on).

    fusion = mma_gemm("M", "N", "K", MmaGemmParams(pipeline=CpAsyncPipeline(stages=3, prefetch=2),
                                                   grid=GridOrder(group=8)))

MmaGemmParams groups the knobs as nvFuser's MatmulParams does: the block tile and its warps
(MmaTile), the operands' pipeline (CpAsyncPipeline), the grid's block order (GridOrder) and the
output's path (Epilogue). Imports only the public `tileproof` API.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import tileproof as tp

from .gemm_blocks import grid_fits, grouped_blocks, permute, through_shared, tile_mnk, tma_store_boxes
from .params import Epilogue, GridOrder, Params

P = tp.ParallelType
LS = tp.LoadStoreOpType


@dataclass(frozen=True, kw_only=True, repr=False)
class MmaTile(Params):
    """The block tile and its warps (nvFuser's cta_tile and warp_tile).

    m, n: the block tile's rows and columns of D.
    row_bytes: the K tile in bytes of the operand dtype (128 or 64): each shared row one
        swizzled line.
    warps: (along M, along N): TIDz x TIDy warps, each computing an (m / warps[0]) x
        (n / warps[1]) tile of macro tiles.
    """

    m: int = 128
    n: int = 128
    row_bytes: int = 128
    warps: tuple[int, int] = (2, 2)

    def __post_init__(self):
        self._check_int("m")
        self._check_int("n")
        self._check_choice("row_bytes", (128, 64))
        if not (isinstance(self.warps, tuple) and len(self.warps) == 2
                and all(isinstance(w, int) and not isinstance(w, bool) and w >= 1 for w in self.warps)):
            self._fail("warps", "a pair of ints >= 1 (warps along M, warps along N)", self.warps)


@dataclass(frozen=True, kw_only=True, repr=False)
class CpAsyncPipeline(Params):
    """The operands' way to the tensor cores (nvFuser's circular_buffer_options).

    stages: cp.async stages of each operand's shared tile, circular-buffered over the K loop.
    prefetch: the stages' copies in flight (-1: stages - 1; the verifier judges every value).
    ldmatrix: the fragments loaded by ldmatrix.x4; False: element by element.
    fragment_stages: 2 double-buffers the fragments over the k-slice loop: the next slice's
        loads are issued before this slice's mma.sync, into other registers.
    """

    stages: int = 4
    prefetch: int = -1
    ldmatrix: bool = True
    fragment_stages: int = 1

    def __post_init__(self):
        self._check_int("stages")
        self._check_type("prefetch", int)
        self._check_bool("ldmatrix")
        self._check_int("fragment_stages")


@dataclass(frozen=True, kw_only=True, repr=False)
class MmaGemmParams(Params):
    """Every choice of the mma.sync GEMM recipe (mma_gemm).

    dtype: the operands' dtype: bfloat16 or float16 (Ampere_16_16_16), float32 (tf32 on the
        tensor cores, Ampere_16_8_8).
    tile, pipeline, grid: see MmaTile, CpAsyncPipeline, GridOrder (group only: no persistent grid
        or patch here).
    epilogue: float32 from the registers (the default), or Epilogue(dtype=<16-bit>, stmatrix=True):
        D cast in registers, stored by stmatrix into the TMA store's 128-byte-swizzled boxes and
        by TMA (16-bit operands).
    tf32_rounding: the MmaOp's tf32 rounding of float32 operands: cvt.rna (None) or a declared
        truncation (tp.Tf32Rounding.Truncate).
    """

    dtype: tp.DataType = tp.bfloat16
    tile: MmaTile = MmaTile()
    pipeline: CpAsyncPipeline = CpAsyncPipeline()
    grid: GridOrder = field(default_factory=GridOrder)
    epilogue: Epilogue = field(default_factory=Epilogue)
    tf32_rounding: tp.Tf32Rounding | None = None

    def __post_init__(self):
        self._check_choice("dtype", (tp.bfloat16, tp.float16, tp.float32))
        self._check_type("tile", MmaTile)
        self._check_type("pipeline", CpAsyncPipeline)
        self._check_type("grid", GridOrder)
        self._check_type("epilogue", Epilogue)
        self._check_type("tf32_rounding", tp.Tf32Rounding, none_ok=True)
        if self.grid.persistent is not None or self.grid.patch is not None:
            self._fail("grid", "GridOrder(group=G) (mma_gemm has no persistent grid or patch)", self.grid)
        stmatrix = Epilogue(dtype=self.epilogue.dtype, stmatrix=True) if self.epilogue.dtype.bytes == 2 else None
        if self.epilogue not in (Epilogue(), stmatrix):
            self._fail("epilogue", "Epilogue() or Epilogue(dtype=<a 16-bit type>, stmatrix=True)", self.epilogue)
        if self.epilogue.stmatrix and self.dtype.bytes != 2:
            self._fail("epilogue", "Epilogue() with float32 operands (stmatrix stores the 16 x 16 tiles of "
                       "16-bit operands' accumulators)", self.epilogue)
        macro = self.macro
        for name, rows, warps, per_macro in (("m", self.tile.m, self.tile.warps[0], macro.m),
                                             ("n", self.tile.n, self.tile.warps[1], macro.n)):
            if rows % (warps * per_macro):
                self._fail("tile", f"a tile whose {name} ({rows}) is a multiple of its warps along it times "
                           f"the {macro.name} tile ({warps} x {per_macro})", self.tile)

    @property
    def macro(self) -> tp.MmaMacro:
        """The mma.sync instruction: m16n8k8 tf32 for float32 operands, m16n16k16 otherwise."""
        return tp.MmaMacro.Ampere_16_8_8 if self.dtype == tp.float32 else tp.MmaMacro.Ampere_16_16_16


def matmul_fusion(m, n, k, dtype=tp.float32, *, a_m_major=False, out_dtype=None):
    """The fusion D[M, N] = sum_k A[M, 1, K] B[1, N, K] (A M-major in memory if `a_m_major`);
    with `out_dtype`, D stays an intermediate and its cast to out_dtype is the output.
    Returns (fusion, A, B, D)."""
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
        raise tp.ScheduleError(f"cp_async_tile: a {rows} x {cols} tile is not a whole number of 16-byte copies "
                               f"per thread ({threads} threads)")
    tv.merge(-2)  # [.., rows * cols]
    tv.split(-1, per_chunk)  # [.., chunks, 16 bytes]
    tv.split(-2, threads)  # [.., repeats, threads, 16 bytes]
    tv.split(-2, 32)  # [.., repeats, warps, 32, 16 bytes]
    tv.split(-3, warps[1])  # [.., repeats, warps z, warps y, 32, 16 bytes]
    for k, p in ((-5, P.Unroll), (-4, P.TIDz), (-3, P.TIDy), (-2, P.TIDx), (-1, P.Vectorize)):
        tv.axis(k).parallelize(p)


def mma_gemm(m, n, k, params: MmaGemmParams | None = None) -> tp.Fusion:
    """D = A B^T on mma.sync (sizes ints or symbol names): block tile params.tile.m x .n x
    (row_bytes of K), warps[0] x warps[1] warps each computing a (block / warps) tile of macro
    tiles, `stages` cp.async stages of swizzled shared memory (conflict-free for cp.async and
    ldmatrix), `prefetch` of them in flight, fragments loaded by ldmatrix.x4, the blocks in
    groups of params.grid.group M tiles (blockIdx.x within the group, blockIdx.y the N tile,
    blockIdx.z the group): the blocks running at once share G tiles of A and few of B in L2.
    params None: MmaGemmParams()."""
    params = MmaGemmParams() if params is None else params
    if not isinstance(params, MmaGemmParams):
        raise tp.ScheduleError(f"mma_gemm: params must be a MmaGemmParams, got {type(params).__name__}")
    tile, pipeline = params.tile, params.pipeline
    bm, bn = block = (tile.m, tile.n)
    wm, wn = tile.warps
    bk = tile.row_bytes // params.dtype.bytes
    macro = params.macro
    mk = macro.k
    stmatrix = params.epilogue.stmatrix
    fusion, a, b, d = matmul_fusion(m, n, k, params.dtype, out_dtype=params.epilogue.dtype if stmatrix else None)
    epilogue = through_shared(fusion.outputs[0]) if stmatrix else []
    d.definition.set_macro(macro, tf32_rounding=params.tf32_rounding)
    sa = a.cache_after(LS.CpAsync)
    sb = b.cache_after(LS.CpAsync)
    op = LS.LdMatrix if pipeline.ldmatrix else LS.Set
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
        t.axis(8).parallelize(P.Vectorize if pipeline.ldmatrix else P.Unroll)
    for t, rows in ((sa, bm), (sb, bn)):
        swizzled_tile(t, tile.row_bytes)
        cp_async_tile(t, rows, bk, tile.warps)
    if epilogue:
        _stmatrix_epilogue(epilogue, macro, block, tile.warps)
    at = grouped_blocks((d, sa, sb, ra, rb, *epilogue), params.grid.group)
    group = params.grid.group
    grid_fits(fusion, m, n, n_per_y=bn, m_per_z=bm * group if group > 1 else None)
    for t in (sa, sb):
        t.inline_at(3 + at)
        t.circular_buffer(pipeline.stages, pipeline.prefetch)
    ra.inline_at(6 + at)
    rb.inline_at(6 + at)
    if epilogue:
        c, cs, _ = epilogue
        d.inline_at(2 + at)
        cs.inline_at(2 + at)
        c.inline_at(len(c.loop) - 1)
    if pipeline.fragment_stages > 1:
        ra.circular_buffer(pipeline.fragment_stages)
        rb.circular_buffer(pipeline.fragment_stages)
    return fusion


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


__all__ = ["CpAsyncPipeline", "MmaGemmParams", "MmaTile", "cp_async_tile", "matmul_fusion", "mma_gemm",
           "swizzled_tile"]
