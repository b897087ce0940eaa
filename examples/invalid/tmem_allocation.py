"""TooManyLanes and TooManyCols: tensor-memory allocations that do not fit in 128 lanes x
512 columns (seed 000, "Tensor memory"). Copy kernels gmem -> reg -> tmem -> reg -> gmem."""

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


# Scheduled as [BIDx{2}, TIDx{3}, 5, (CA), BIDy{7}, TIDy{11}, 13, (DimSep), 17].
# - TMEM-LANES: lanes = TIDx{3} * TIDy{11} (shared across TIDs: allocated) * 13 (right of CA)
#   = 429 > 128 (BIDx/BIDy are distributed, 5 is left of CA). Columns = 17: fine.
# - TMEM-WARP-COLLECTIVE: blockDim = 3 x 11 = 33 threads; thread 32 runs the tmem st/ld but its
#   warp (threads 32..63) has only one existing thread.
# - LAUNCH-THREADS: 33 <= 1024, fine. No split, no vectorization: nothing else applies.
# Note: setTMemDimSepPos(-2) wraps over ndims + 1 (nvFuser's wrapDim(pos, ndims + 1)): -2 is
# position 6 of 7 axes, i.e. between 13 and 17, as the seed's picture shows.
@tp.schedule(
    expect=tp.rejected("TMEM-LANES", "TMEM-WARP-COLLECTIVE", messages=["needs 429"], warnings=("GLOBAL-COALESCING",)),
    target="sm_100a",
)
def too_many_lanes():
    fusion, (tv0, tv1, tv2, tv3, tv4) = _copy_chain("too_many_lanes", [2, 3, 5, 7, 11, 13, 17])
    tv4.axis(0).parallelize(P.BIDx)
    tv4.axis(1).parallelize(P.TIDx)
    tv4.axis(3).parallelize(P.BIDy)
    tv4.axis(4).parallelize(P.TIDy)
    tp.parallelize_all_like(tv4)
    tp.inline_all_at(tv4, 3)
    # Tries to allocate (429, 17) for tv2.
    tv2.set_tmem_dim_sep_pos(-2)
    return fusion


# Scheduled as [TIDx{32}, (DimSep), BIDx{3}, TIDy{5}, 7, (CA), BIDy{11}, TIDz{13}, 17].
# - TMEM-COLUMNS: columns = TIDy{5} * TIDz{13} * 17 = 1105 > 512 (BIDs distributed, 7 left of CA).
#   Lanes = TIDx{32} = 32: fine.
# - LAUNCH-THREADS: blockDim = 32 x 5 x 13 = 2080 > 1024.
# - TMEM-WARP-COLLECTIVE holds (2080 = 65 whole warps, every thread runs the access);
#   TMEM-ACCESS-PATTERN holds (lane = TIDx = t % 32, the column depends only on TIDy/TIDz,
#   constant within a warp); TMEM-SUBPARTITION fails: warp w = TIDy + 5*TIDz touches lanes
#   0..31 for every w, but warps 1, 2, 3, 5, ... may only touch lanes 32*(w%4)...
@tp.schedule(
    expect=tp.rejected("TMEM-COLUMNS", "LAUNCH-THREADS", "TMEM-SUBPARTITION", messages=["needs 1105"],
                       warnings=("GRID-SIZE",)),
    target="sm_100a",
)
def too_many_cols():
    fusion, (tv0, tv1, tv2, tv3, tv4) = _copy_chain("too_many_cols", [32, 3, 5, 7, 11, 13, 17])
    tv4.axis(0).parallelize(P.TIDx)
    tv4.axis(1).parallelize(P.BIDx)
    tv4.axis(2).parallelize(P.TIDy)
    tv4.axis(4).parallelize(P.BIDy)
    tv4.axis(5).parallelize(P.TIDz)
    tp.parallelize_all_like(tv4)
    tp.inline_all_at(tv4, 4)
    # Tries to allocate (32, 1105) for tv2.
    tv2.set_tmem_dim_sep_pos(1)
    return fusion
