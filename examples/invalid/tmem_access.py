"""Invalid tensor-memory loads/stores: not warp-collective, not a tcgen05 access pattern,
or a warp outside its subpartition (seed 000, "The loop domain of TMem load and store").

Every example is a copy gmem -> reg (tv1) -> tmem (tv2) -> reg (tv3) -> gmem, with tv4's
parallelization copied to every tensor, so the tmem store (issued by tv2's loop domain) and
the tmem load (issued by tv3's) behave alike. With no inlining every tensor is computed at 0
and the allocation domain of tv2 is its loop domain. Linear thread id t = tx + ty*bdx + tz*bdx*bdy.
"""

import tileproof as tp

P = tp.ParallelType


def _copy_chain(name, shape):
    """tv0 (gmem) -> tv1 (reg) -> tv2 (tmem) -> tv3 (reg) -> tv4 (gmem)."""
    with tp.Fusion(name) as fusion:
        tv0 = tp.make_contig_concrete_tensor(shape)
        fusion.add_input(tv0)
        tv1 = tp.set(tv0)
        tv2 = tp.set(tv1)
        tv3 = tp.set(tv2)
        tv4 = tp.set(tv3)
        fusion.add_output(tv4)
    tv2.set_memory_type(tp.MemoryType.Tensor)
    return fusion, (tv0, tv1, tv2, tv3, tv4)


# [TIDx{16}, (DimSep), 2]: the block has 16 threads, so warp 0 (threads 0..31) is half
# missing: TMEM-WARP-COLLECTIVE. Lanes 16, columns 2, 16 threads: nothing else applies
# (pattern and subpartition are only checked once the access is warp-collective).
@tp.schedule(expect=tp.rejected("TMEM-WARP-COLLECTIVE", warnings=("GLOBAL-COALESCING",)), target="sm_100a")
def not_warp_collective():
    fusion, (tv0, tv1, tv2, tv3, tv4) = _copy_chain("not_warp_collective", [16, 2])
    tv4.axis(0).parallelize(P.TIDx)
    tp.parallelize_all_like(tv4)
    tv2.set_tmem_dim_sep_pos(1)
    return fusion


# [TIDx{64}, TIDy{2}, (DimSep), 2]: 128 threads in 4 whole warps (warp-collective holds);
# lane = 2*tx + ty, so warp 0 (tx = 0..31, ty = 0) touches lanes 0, 2, 4, ..., 62: stride 2,
# not base + t % 32: TMEM-ACCESS-PATTERN. Lanes 64*2 = 128 fit; subpartition not checked.
@tp.schedule(expect=tp.rejected("TMEM-ACCESS-PATTERN", warnings=("GLOBAL-COALESCING",)), target="sm_100a")
def not_contiguous():
    fusion, (tv0, tv1, tv2, tv3, tv4) = _copy_chain("not_contiguous", [64, 2, 2])
    tv4.axis(0).parallelize(P.TIDx)
    tv4.axis(1).parallelize(P.TIDy)
    tp.parallelize_all_like(tv4)
    tv2.set_tmem_dim_sep_pos(2)
    return fusion


# [TIDy{32}, (DimSep), TIDx{32}]: 1024 threads = 32 whole warps; warp w = ty touches one lane
# (lane ty) and 32 columns (column tx depends on t within the warp): TMEM-ACCESS-PATTERN.
# 1024 threads is exactly the limit; lanes 32, columns 32 fit.
@tp.schedule(expect=tp.rejected("TMEM-ACCESS-PATTERN"), target="sm_100a")
def one_lane():
    fusion, (tv0, tv1, tv2, tv3, tv4) = _copy_chain("one_lane", [32, 32])
    tv4.axis(0).parallelize(P.TIDy)
    tv4.axis(1).parallelize(P.TIDx)
    tp.parallelize_all_like(tv4)
    tv2.set_tmem_dim_sep_pos(1)
    return fusion


# [TIDy{2}, 2, TIDx{32}, (DimSep), 2]: 64 threads = 2 whole warps, warp w = ty. In loop
# iteration i (axis 1), lane = 64*ty + 32*i + tx = base + t % 32: the 32x32b pattern holds.
# But warp 0 touches lanes 0..63 (subpartitions 0 and 1) and warp 1 lanes 64..127
# (subpartitions 2 and 3), while warp w may only touch subpartition w % 4: TMEM-SUBPARTITION.
# Lanes 2*2*32 = 128 fit.
@tp.schedule(expect=tp.rejected("TMEM-SUBPARTITION", warnings=("GLOBAL-COALESCING",)), target="sm_100a")
def wrong_subpartition():
    fusion, (tv0, tv1, tv2, tv3, tv4) = _copy_chain("wrong_subpartition", [2, 2, 32, 2])
    tv4.axis(0).parallelize(P.TIDy)
    tv4.axis(2).parallelize(P.TIDx)
    tp.parallelize_all_like(tv4)
    tv2.set_tmem_dim_sep_pos(3)
    return fusion


# [TIDx{32}, (DimSep), TIDy{2}]: 64 threads = 2 whole warps, warp w = ty; lane = tx = t % 32
# and column = ty is constant within a warp (pattern holds), but both warps touch lanes
# 0..31 (subpartition 0) and warp 1 may only touch subpartition 1: TMEM-SUBPARTITION.
@tp.schedule(expect=tp.rejected("TMEM-SUBPARTITION", warnings=("GLOBAL-COALESCING",)), target="sm_100a")
def wrong_subpartition2():
    fusion, (tv0, tv1, tv2, tv3, tv4) = _copy_chain("wrong_subpartition2", [32, 2])
    tv4.axis(0).parallelize(P.TIDx)
    tv4.axis(1).parallelize(P.TIDy)
    tp.parallelize_all_like(tv4)
    tv2.set_tmem_dim_sep_pos(1)
    return fusion
