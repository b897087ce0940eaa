"""Split-K GEMM on wgmma, as two verified kernels: D[M, N] = sum_k A[M, K] B[K, N] with K cut into
S slices of KS = K / S columns each (S, M, N and KS symbolic: one kernel each for every split count;
or given, `shape=`, a kernel compiled at one shape, as recipes.matmul runs them).

    partials = split_k_partials(SplitKParams(...))   # P[s, M, N] = A_s @ B_s, float32
    total = split_k_sum(tp.bfloat16)                 # D = cast(sum_s P[s]), one kernel

split_k_partials is the Hopper recipe (hopper_gemm.py) with a batch axis in front: A is read as
[S, M, 1, KS] and B as [S, 1, N, KS], views of the same [M, K] and [K, N] (or [N, K]) memory (the
allocation domain says which axis is contiguous: split s of K starts s * KS columns in), and each
block computes one output tile of one split (blockIdx.z the split, x the M tile, y the N tile),
its wgmma accumulators stored as float32 partials. The grid has S times the output tiles,
so a shape with fewer output tiles than SMs and a long K still fills the GPU. split_k_sum adds
the S partials of each output element in one thread (S is small: a serial loop of 16-byte vector
loads, no combine across threads or blocks), runs a fused epilogue's ops on the sums
(EpilogueOps: scale, bias, residual, activation; hopper_gemm.epilogue_ops's chain, the persistent
kernel's math and order) and casts the result to the output dtype.

Why not one kernel with a grid reduction: tileproof's grid reduction (execution/grid_reduction.py,
REDUCTION-GRID) combines a reduction's registers across blocks, but not an MmaOp's accumulators
(no rfactor of an MmaOp, and no grid combine in a warp-specialized kernel, whose producer returns
early); writing the partials and summing them in a second launch needs neither. Imports only the
public `tileproof` API and the recipe's pieces.
"""

from __future__ import annotations

from dataclasses import dataclass

import tileproof as tp

from .gemm_blocks import GRID_YZ, permute
from .hopper_gemm import epilogue_ops, mn_major_box, warpgroup_tiles
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


def split_k_partials(params: SplitKParams | None = None, shape: tuple[int, int, int, int] | None = None) -> tp.Fusion:
    """P[s, M, N] = sum_kc A[M, s KS + kc] B[s KS + kc, N] in float32 on wgmma, for s < S
    (S, M, N and KS symbolic, or `shape` = (S, M, N, KS); the contiguous extents of A, B and P
    multiples of 8, 16-byte rows for the TMA; see the module's text). Inputs A [S, M, 1, KS] and
    B [S, 1, N, KS] (the views of split_k_operands), output P [S, M, N] float32."""
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
    if shape is None:  # at a shape the verifier checks these facts of its numbers
        _assume_partials_extents(fusion, params, bn)
    d.definition.set_macro(macro)
    sa = a.cache_after(params.a.load)
    sb = b.cache_after(params.b.load)
    for t in (sa, sb):
        t.set_memory_type(tp.MemoryType.Shared)
    for t in (d, sa, sb):
        _tile_smnk(t, bm, bn, bk)
    d.split(6, 16)  # [S, Mo, No, Ko, bm, bn, kk, K16] -> [S, Mo, No, Ko, wg, kk, M64, bn, K16]
    warpgroup_tiles(d, False, 64, at=4)
    permute(d, [0, 1, 2, 3, 4, 7, 5, 6, 8])
    d.set_allocation_domain(tp.mma_output_allocation(d), True)
    d.axis(5).parallelize(P.Unroll)
    for i in (-3, -2, -1):
        d.axis(i).parallelize(P.Mma)
    out.split(2, bn).split(1, bm)  # P [S, M, N] -> [S, Mo, No, wg, thread, v]: D's fragment
    permute(out, [0, 1, 3, 2, 4])
    warpgroup_tiles(out, False, 64, at=3)
    tp.schedule_mma_fragment(out, macro, "C", dtype=tp.bfloat16)
    out.split(-1, 2).axis(-1).parallelize(P.Vectorize)  # N % 8 == 0: adjacent column pairs, 8-byte stores
    out.axis(-2).parallelize(P.Unroll)
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
    of the output dtype, the bias element by element). Inputs P, then the bias ([1, N] or [M, 1]
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
    return fusion


def split_k_operands(a, b, splits: int):
    """The views split_k_partials reads of 2-D PyTorch operands A [M, K] and B [K, N] (either major;
    K a multiple of splits): A [S, M, 1, KS], B [S, 1, N, KS], the same memory (splitting K's axis
    into (S, KS) is a view whatever its stride)."""
    (m, k), n = a.shape, b.shape[1]
    ks = k // splits
    return (a.reshape(m, splits, ks).permute(1, 0, 2).unsqueeze(2),
            b.reshape(splits, ks, n).permute(0, 2, 1).unsqueeze(1))


__all__ = ["ALLOCATION", "SplitKParams", "split_k_operands", "split_k_partials", "split_k_sum"]
