"""Split-K GEMM on wgmma, as two verified kernels (or one: split_k_grid, below): D[M, N] =
sum_k A[M, K] B[K, N] with K cut into S slices of KS = K / S columns each (S, M, N and KS
symbolic: one kernel each for every split count; or given, `shape=`, a kernel compiled at one
shape, as recipes.matmul runs them).

    partials = split_k_partials(SplitKParams(...))   # P[s, M, N] = A_s @ B_s, float32
    total = split_k_sum(tp.bfloat16)                 # D = cast(sum_s P[s]), one kernel

split_k_partials is the Hopper recipe (hopper_gemm.py) with a batch axis in front: A is read as
[S, M, 1, KS] and B as [S, 1, N, KS], views of the same [M, K] and [K, N] (or [N, K]) memory (the
allocation domain says which axis is contiguous: split s of K starts s * KS columns in), and each
block computes one output tile of one split (blockIdx.z the split, x the M tile, y the N tile),
its wgmma accumulators stored as float32 partials. The grid has S times the output tiles,
so a shape with fewer output tiles than SMs and a long K still fills the GPU. With
transposed=True (at a shape) the partials are allocated [S, N, M]: recipes.matmul computes a decode
GEMM as its transpose (D^T = B^T A^T, M's few rows on the wgmma's N) and the sum reads them as
[S, M, N]. split_k_sum adds
the S partials of each output element in one thread (S is small: a serial loop of 16-byte vector
loads, no combine across threads or blocks), runs a fused epilogue's ops on the sums
(EpilogueOps: scale, bias, residual, activation; hopper_gemm.epilogue_ops's chain, the persistent
kernel's math and order) and casts the result to the output dtype.

One kernel, split_k_grid: the MmaOp's K tiles cut into S runs (K need not be a multiple of
anything: a run past K's end reads the TMA's zeros), the outer part rfactored as nvFuser's split-K
matmul does (the MmaOp's partial keeps S as an iteration axis on blockIdx.z; the sum of the
partials reduces it), and that sum a grid reduction over BIDz (execution/grid_reduction.py,
REDUCTION-GRID): each block writes its C fragment's registers to a workspace and counts itself on
the output tile's semaphore; the last block to arrive adds the S partials of each register in
rank order (the same bits whichever block is last), runs a fused epilogue's ops on the sums in
the fragment's registers (EpilogueOps, hopper_gemm.epilogue_ops's chain) and stores the tile in
the output dtype. No second launch; its pipeline is not warp-specialized (a grid combine needs
every thread of every block). Imports only the public `tileproof` API and the recipe's
pieces.
"""

from __future__ import annotations

from dataclasses import dataclass

import tileproof as tp

from .gemm_blocks import GRID_YZ, grid_fits, permute
from .hopper_gemm import epilogue_ops, gemm_fusion, mn_major_box, warpgroup_tiles
from .hopper_params import HopperTile, Operand, TmaPipeline, swizzled_box
from .params import EpilogueOps, Params

P = tp.ParallelType
SUM_THREADS = 128  # split_k_sum: threads a block, each summing VECTOR adjacent outputs
VECTOR = 4  # float32 partials read 16 bytes at a time
TMA_STRIDE_LIMIT = 2**40  # a TMA global stride's bytes stay below it
MAX_SPLITS = 64  # S: blockIdx.z, and K-major rows of S KS elements below 2^40 bytes
MN_MAJOR_KS = 2**20  # the longest split (K / S) of an MN-major operand, whose M or N is then below 2^19
GRID_X = 2**31 - 1  # the most blocks along blockIdx.x


@dataclass(frozen=True, kw_only=True, repr=False)
class SplitKParams(Params):
    """The partials kernel's choices: its block tile (HopperTile, a warpgroup per 64 rows), A's
    and B's TMA pipeline (TmaPipeline) and each operand's major (Operand). The grid is one block
    per (split, M tile, N tile); no cluster, float32 partials stored from the accumulators."""

    tile: HopperTile = HopperTile()
    pipeline: TmaPipeline = TmaPipeline()
    a: Operand = Operand()
    b: Operand = Operand()

    def __post_init__(self):
        for name, kind in (("tile", HopperTile), ("pipeline", TmaPipeline), ("a", Operand), ("b", Operand)):
            self._check_type(name, kind)
        if self.tile.split_n or self.tile.warpgroup_rows != 64:
            self._fail("tile", "a HopperTile of one warpgroup per 64 rows (no split_n)", self.tile)


# the allocation order (outer first) of A [S, M, 1, KS] and B [S, 1, N, KS] as views of the 2-D
# operand in each major: A [M, K] is [M, S, KS], A [K, M] (M-major) [S, KS, M]; B [N, K] (K-major)
# is [N, S, KS], B [K, N] (N-major) [S, KS, N]; the broadcast axis beside the axis it stands for
ALLOCATION = {("A", "K"): (1, 0, 2, 3), ("A", "MN"): (0, 3, 2, 1), ("B", "K"): (2, 0, 1, 3),
              ("B", "MN"): (0, 3, 1, 2)}


def _tile_smnk(t, bm, bn, bk):
    """[S, M, N, K] -> [S, Mo, No, Ko, bm, bn, bk]; a broadcast axis (A's N, B's M) is not split."""
    t.split(3, bk)
    inner = [4]
    for axis, factor in ((2, bn), (1, bm)):
        if not t.axis(axis).is_broadcast:
            t.split(axis, factor)
            inner = [axis + 1] + [i + 1 for i in inner]
    outer = [i for i in range(len(t.get_loop_domain())) if i not in inner]
    permute(t, outer + inner)


def _extents(shape, names: tuple[str, ...], caller: str) -> tuple:
    """`names` (symbolic) where shape is None, else shape's positive ints, checked at the door."""
    if shape is None:
        return names
    if len(shape) != len(names) or not all(isinstance(d, int) and d > 0 for d in shape):
        raise tp.ScheduleError(f"{caller}: shape must be None or {len(names)} positive ints "
                               f"({', '.join(names)}), got {shape!r}")
    return tuple(shape)


def _shared_operands(a, b, params):
    """A's and B's tiles, loaded as params says into shared memory: (sa, sb)."""
    sa = a.cache_after(params.a.load)
    sb = b.cache_after(params.b.load)
    for t in (sa, sb):
        t.set_memory_type(tp.MemoryType.Shared)
    return sa, sb


def _wgmma_tile(t) -> None:
    """An MmaOp [S, Mo, No, K, bm, bn, kk] (K a split's or a run's K tiles) as wgmma instructions:
    [S, Mo, No, K, wg, kk (unrolled), M64, bn, K16], the last three the instruction's (Mma)."""
    t.split(6, 16)
    warpgroup_tiles(t, False, 64, at=4)
    permute(t, [0, 1, 2, 3, 4, 7, 5, 6, 8])
    t.set_allocation_domain(tp.mma_output_allocation(t), True)
    t.axis(5).parallelize(P.Unroll)
    for i in (-3, -2, -1):
        t.axis(i).parallelize(P.Mma)


def split_k_partials(params: SplitKParams | None = None, shape: tuple[int, int, int, int] | None = None,
                     transposed: bool = False) -> tp.Fusion:
    """P[s, M, N] = sum_kc A[M, s KS + kc] B[s KS + kc, N] in float32 on wgmma, for s < S
    (S, M, N and KS symbolic, or `shape` = (S, M, N, KS); the contiguous extents of A, B and P
    multiples of 8, 16-byte rows for the TMA; see the module's text). Inputs A [S, M, 1, KS] and
    B [S, 1, N, KS] (the views of split_k_operands), output P [S, M, N] float32. `transposed`
    (at a shape): P allocated [S, N, M], M innermost, each element stored alone: the partials of
    a product computed as its transpose (recipes.matmul's swapped split-K: D^T = B^T A^T, so that
    a decode GEMM's few rows are the wgmma's N), which the sum kernel reads as [S, N, M]."""
    if not isinstance(transposed, bool):
        raise tp.ScheduleError(f"split_k_partials: transposed must be True or False, got {transposed!r}")
    if transposed and shape is None:
        raise tp.ScheduleError("split_k_partials: transposed partials are compiled at a shape (shape=(S, M, N, KS))")
    params = SplitKParams() if params is None else params
    if not isinstance(params, SplitKParams):
        raise tp.ScheduleError(f"split_k_partials: params must be a SplitKParams, got {type(params).__name__}")
    s_, m_, n_, ks_ = _extents(shape, ("S", "M", "N", "KS"), "split_k_partials")
    tile, pipeline = params.tile, params.pipeline
    bm, bn, bk = tile.m, tile.n, tile.swizzle // 2
    macro = tile.macro
    with tp.Fusion("split_k_partials") as fusion:
        a = tp.make_tensor([s_, m_, 1, ks_], dtype=tp.bfloat16)
        b = tp.make_tensor([s_, 1, n_, ks_], dtype=tp.bfloat16)
        fusion.add_input(a)
        fusion.add_input(b)
        d = tp.fused_multiply_sum(a, b, [-1])
        out = tp.set(d)
        fusion.add_output(out)
    for t, name, operand in ((a, "A", params.a), (b, "B", params.b)):
        t.set_allocation_domain([t.axis(i) for i in ALLOCATION[name, operand.major]], True)
    if transposed:  # P [S, N, M] in memory (below: each element stored alone)
        out.set_allocation_domain([out.axis(i) for i in (0, 2, 1)], True)
    if shape is None:  # at a shape the verifier checks these facts of its numbers
        _assume_partials_extents(fusion, params, bn)
    d.definition.set_macro(macro)
    sa, sb = _shared_operands(a, b, params)
    for t in (d, sa, sb):
        _tile_smnk(t, bm, bn, bk)
    _wgmma_tile(d)
    out.split(2, bn).split(1, bm)  # P [S, M, N] -> [S, Mo, No, wg, thread, v]: D's fragment
    permute(out, [0, 1, 3, 2, 4])
    warpgroup_tiles(out, False, 64, at=3)
    tp.schedule_mma_fragment(out, macro, "C", dtype=tp.bfloat16)
    if not transposed:  # N % 8 == 0: adjacent column pairs, 8-byte stores (transposed: M apart, one by one)
        out.split(-1, 2).axis(-1).parallelize(P.Vectorize)
    out.axis(-2 if not transposed else -1).parallelize(P.Unroll)
    for t, operand in ((sa, params.a), (sb, params.b)):  # one TMA box each per K tile, swizzled
        (mn_major_box if operand.major == "MN" else operand.layout)(t, tile.swizzle)
        for i in t.get_loop_domain()[4 + (operand.major == "MN"):]:  # past MN-major's loop of boxes
            i.parallelize(P.Bulk)
        t.set_allocation_domain(t.get_loop_domain(), True)
    for t in (d, out, sa, sb):  # blockIdx.z the split, x the M tile, y the N tile
        for i, p in ((0, P.BIDz), (1, P.BIDx), (2, P.BIDy)):
            if not t.axis(i).is_broadcast:
                t.axis(i).parallelize(p)
    for t in (sa, sb):
        t.inline_at(4)
        if pipeline.stages > 1:
            t.circular_buffer(pipeline.stages, pipeline.prefetch, pipeline.strategy)
    d.inline_at(3)
    fusion.dependent_launch = True  # the sum kernel after it launches as its blocks start (Fusion.dependent_launch)
    return fusion


def _assume_partials_extents(fusion: tp.Fusion, params: SplitKParams, bn: int) -> None:
    """The symbolic partials kernel's facts: contiguous extents multiples of 8, MN-major splits'
    strides and N's tiles in range."""
    for extent in ("KS", "N") + (("M",) if params.a.major == "MN" else ()):
        fusion.assume(f"{extent} % 8 == 0")
    for extent, operand in (("M", params.a), ("N", params.b)):  # an MN-major split's stride: KS rows of M or N,
        if operand.major == "MN":  # below 2^40 bytes (TMA-GLOBAL-STRIDE), bounded factor by factor (linear bounds)
            fusion.assume(f"KS <= {MN_MAJOR_KS}")
            fusion.assume(f"{extent} < {TMA_STRIDE_LIMIT // 2 // MN_MAJOR_KS}")
    fusion.assume(f"N <= {GRID_YZ * bn}")  # N's tiles on blockIdx.y (LAUNCH-GRID)
    fusion.assume(f"S <= {MAX_SPLITS}")  # a K-major row, S KS < 2^31 x 64 elements: below 2^40 bytes


def split_k_sum(out_dtype: tp.DataType = tp.bfloat16, shape: tuple[int, int, int] | None = None,
                ops: EpilogueOps = EpilogueOps()) -> tp.Fusion:
    """D[M, N] = sum_s P[s, M, N] (P float32), `ops` fused (EpilogueOps: cast(activation(scale *
    D + bias + residual)), the chain of hopper_gemm.epilogue_ops), cast to out_dtype: the M x N
    outputs in runs of VECTOR (N % 8 == 0: no run crosses a row's end), SUM_THREADS threads a
    block, each loading its run of each split as one 16-byte vector, adding them in order, then
    running the ops on the run's VECTOR sums in registers (the residual's run read as one vector
    of the output dtype, the bias element by element). Both kernels are dependent launches
    (Fusion.dependent_launch): the sum's blocks launch while the partials run and wait for them. Inputs P, then the bias ([1, N] or [M, 1]
    float32) and the residual ([M, N] in out_dtype). S, M, N symbolic, or `shape` = (S, M, N)."""
    if not isinstance(out_dtype, tp.DataType):
        raise tp.ScheduleError(f"split_k_sum: out_dtype must be a tp.DataType, got {out_dtype!r}")
    if not isinstance(ops, EpilogueOps):
        raise tp.ScheduleError(f"split_k_sum: ops must be an EpilogueOps, got {ops!r}")
    s_, m_, n_ = _extents(shape, ("S", "M", "N"), "split_k_sum")
    with tp.Fusion("split_k_sum") as fusion:
        p = tp.make_tensor([s_, m_, n_], dtype=tp.float32)
        fusion.add_input(p)
        total = tp.sum(p, [0])
        x = epilogue_ops(total, ops, out_dtype, m_, n_)
        out = tp.set(x) if out_dtype == tp.float32 else tp.cast(x, out_dtype)
        fusion.add_output(out)
    if shape is None:  # at a shape the verifier checks these facts of its numbers
        fusion.assume("N % 8 == 0")
        fusion.assume(f"M * N <= {GRID_X * VECTOR * SUM_THREADS}")  # the runs' blocks on blockIdx.x (LAUNCH-GRID)
    chain = [t for t in fusion.tensors if t not in (p, total, out) and not t.is_fusion_input]  # total -> x, in order
    residual = fusion.consumers(fusion.inputs[-1]) if ops.residual else []  # its reader (epilogue_ops)
    loads = p.cache_after()  # registers: one vector, loaded in the loop over the splits
    for t in (loads, total):  # [S, M, N] -> [M N / (V T) (BIDx), T (TIDx), S, V]
        t.merge(1).split(1, VECTOR).split(1, SUM_THREADS)
        permute(t, [1, 2, 0, 3])
        t.axis(0).parallelize(P.BIDx)
        t.axis(1).parallelize(P.TIDx)
    loads.axis(3).parallelize(P.Vectorize)
    total.axis(3).parallelize(P.Unroll)
    for t in (*chain, out):  # [M, N] -> [M N / (V T), T, V]
        t.merge(0).split(0, VECTOR).split(0, SUM_THREADS)
        t.axis(0).parallelize(P.BIDx)
        t.axis(1).parallelize(P.TIDx)
        t.axis(2).parallelize(P.Vectorize if t is out or t in residual else P.Unroll)  # the residual's run: one load
    loads.inline_at(3)
    for t in chain:  # each run's ops in registers, in the thread's loop outside the vector
        t.inline_at(2)
    fusion.dependent_launch = True  # launched while the partials run, waiting for them at its start
    return fusion


# the allocation order (outer first) of A [M, 1, K] and B [1, N, K] in each major (split_k_grid's
# operands, hopper_gemm's): K-major rows of K, MN-major rows of M or N
GRID_ALLOCATION = {("A", "K"): (0, 1, 2), ("A", "MN"): (2, 1, 0), ("B", "K"): (1, 0, 2), ("B", "MN"): (2, 0, 1)}


def _tile_mnk_split(t, bm, bn, bk, splits):
    """[M, N, K] -> [S, Mo, No, Ks, bm, bn, bk]: K in K tiles of bk, the tiles in `splits` runs of
    Ks = ceil(K tiles / splits) (the last runs past K hold holes: zeros from the TMA); a broadcast
    axis (A's N, B's M) is not split."""
    t.split(2, bk).split(2, splits, inner_split=False)  # [M, N, S, Ks, bk]
    at = {"M": 0, "N": 1, "S": 2, "Ks": 3, "bk": 4}
    for name, factor in (("N", bn), ("M", bm)):
        if not t.axis(at[name]).is_broadcast:
            t.split(at[name], factor)
            at = {key: i + (i > at[name]) for key, i in at.items()} | {"b" + name: at[name] + 1}
    permute(t, [at[key] for key in ("S", "M", "N", "Ks", "bM", "bN", "bk") if key in at])


def split_k_grid(params: SplitKParams | None = None, shape: tuple[int, int, int] = ("M", "N", "K"), splits: int = 4,
                 out_dtype: tp.DataType = tp.bfloat16, ops: EpilogueOps = EpilogueOps()) -> tp.Fusion:
    """D[M, N] = cast(sum_k A[M, k] B[k, N]) on wgmma in ONE kernel: K's tiles cut into `splits`
    runs, blockIdx.z the run (nvFuser's split-K: the MmaOp's K split, its outer part rfactored).
    Each block of (split, M tile, N tile) runs its run's wgmmas (the MmaOp's rfactor, partial
    accumulators in the C fragment's registers), then the blocks of one output tile combine
    their accumulators by a grid reduction over BIDz (execution/grid_reduction.py: partials to
    a global workspace, a semaphore counts the blocks, the last to arrive adds the splits' partials
    in rank order, the same bits whichever arrives last, runs `ops` on the sums (EpilogueOps:
    cast(activation(scale * D + bias + residual)), hopper_gemm.epilogue_ops's chain, in the C
    fragment's registers of the last block) and stores the tile cast to out_dtype).
    Inputs A [M, 1, K] and B [1, N, K] (hopper_gemm's, either major: params.a, params.b), then the
    bias ([1, N] or [M, 1] float32) and the residual ([M, N] in out_dtype); output D [M, N] of
    out_dtype; `shape` (M, N, K) ints or names; K need not be a multiple of the splits
    (the last run's tiles past K are zeros of the TMA). The pipeline may not be warp-specialized:
    every thread of every block takes part in the grid combine (REDUCTION-GRID)."""
    params = SplitKParams() if params is None else params
    if not isinstance(params, SplitKParams):
        raise tp.ScheduleError(f"split_k_grid: params must be a SplitKParams, got {type(params).__name__}")
    if params.pipeline.warp_specialized is not None:
        raise tp.ScheduleError("split_k_grid: params.pipeline must not be warp-specialized (its producer warps "
                               "return early; every thread takes part in the grid combine)")
    if not isinstance(splits, int) or isinstance(splits, bool) or not 2 <= splits <= MAX_SPLITS:
        raise tp.ScheduleError(f"split_k_grid: splits must be an int from 2 to {MAX_SPLITS}, got {splits!r}")
    if not isinstance(out_dtype, tp.DataType):
        raise tp.ScheduleError(f"split_k_grid: out_dtype must be a tp.DataType, got {out_dtype!r}")
    if not isinstance(ops, EpilogueOps):
        raise tp.ScheduleError(f"split_k_grid: ops must be an EpilogueOps, got {ops!r}")
    if not (isinstance(shape, tuple) and len(shape) == 3
            and all(isinstance(d, str) or (isinstance(d, int) and d > 0) for d in shape)):
        raise tp.ScheduleError(f"split_k_grid: shape must be 3 positive ints or names (M, N, K), got {shape!r}")
    m_, n_, k_ = shape
    tile, pipeline = params.tile, params.pipeline
    bm, bn, bk = tile.m, tile.n, tile.swizzle // 2
    macro = tile.macro
    fusion, a, b, d, out, chain = gemm_fusion("split_k_grid", shape, ops, out_dtype)
    residual = fusion.consumers(fusion.inputs[-1]) if ops.residual else []  # its reader: a column pair, one vector
    for t, name, operand in ((a, "A", params.a), (b, "B", params.b)):
        t.set_allocation_domain([t.axis(i) for i in GRID_ALLOCATION[name, operand.major]], True)
    grid_fits(fusion, m_, n_, n_per_y=bn)  # a symbolic N: its tiles on blockIdx.y (LAUNCH-GRID)
    d.definition.set_macro(macro)
    sa, sb = _shared_operands(a, b, params)
    for t in (d, sa, sb):
        _tile_mnk_split(t, bm, bn, bk, splits)
    part = d.rfactor([3, 6])  # part: the MmaOp [S, Mo, No, rKs, bm, bn, rbk]; d = sum over rS of part
    _wgmma_tile(part)
    for t in (*chain, out):  # [M, N] -> [Mo, No, bm, bn], as d's [rS, Mo, No, bm, bn]
        t.split(1, bn).split(0, bm)
        permute(t, [0, 2, 1, 3])
    for t, at in ((d, 3), *((t, 2) for t in (*chain, out))):  # the C fragment: [.., wg (TIDy), thread (TIDx), v]
        warpgroup_tiles(t, False, 64, at=at)
        tp.schedule_mma_fragment(t, macro, "C", dtype=tp.bfloat16)
    d.axis(-1).parallelize(P.Unroll)
    pairs = not (isinstance(n_, int) and n_ % 2)  # an even N: no pair of adjacent columns straddles its end
    for t in (*chain, out):  # registers at constant indices; the output's (and residual's) pairs one vector
        if pairs:
            t.split(-1, 2).axis(-1).parallelize(P.Vectorize if t is out or t in residual else P.Unroll)
        t.axis(-2 if pairs else -1).parallelize(P.Unroll)
    for t, operand in ((sa, params.a), (sb, params.b)):  # one TMA box each per K tile, swizzled
        (mn_major_box if operand.major == "MN" else operand.layout)(t, tile.swizzle)
        for i in t.get_loop_domain()[4 + (operand.major == "MN"):]:  # past MN-major's loop of boxes
            i.parallelize(P.Bulk)
        t.set_allocation_domain(t.get_loop_domain(), True)
    for t in (part, d, sa, sb):  # blockIdx.z the split (d's a reduction: the grid combine), x M, y N
        for i, p in ((0, P.BIDz), (1, P.BIDx), (2, P.BIDy)):
            if not t.axis(i).is_broadcast:
                t.axis(i).parallelize(p)
    for t in (*chain, out):
        t.axis(0).parallelize(P.BIDx)
        t.axis(1).parallelize(P.BIDy)
    for t in (sa, sb):
        t.inline_at(4)
        if pipeline.stages > 1:
            t.circular_buffer(pipeline.stages, pipeline.prefetch, pipeline.strategy)
    part.inline_at(3)
    for t in chain:  # each element's ops in registers, in their consumers' loops (outside a vector)
        vectors = [t] if t in residual else fusion.consumers(t)  # the residual's reader is a vector itself
        t.inline_at(len(t.loop) - any(v.axis(-1).parallel_type is P.Vectorize for v in vectors))
    return fusion


def split_k_operands(a, b, splits: int):
    """The views split_k_partials reads of 2-D PyTorch operands A [M, K] and B [K, N] (either major;
    K a multiple of splits): A [S, M, 1, KS], B [S, 1, N, KS], the same memory (splitting K's axis
    into (S, KS) is a view whatever its stride)."""
    (m, k), n = a.shape, b.shape[1]
    ks = k // splits
    return (a.reshape(m, splits, ks).permute(1, 0, 2).unsqueeze(2),
            b.reshape(splits, ks, n).permute(0, 2, 1).unsqueeze(1))


__all__ = ["ALLOCATION", "GRID_ALLOCATION", "SplitKParams", "split_k_grid", "split_k_operands", "split_k_partials",
           "split_k_sum"]
