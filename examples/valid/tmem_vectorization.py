"""Vectorized tensor-memory loads and stores, factors 1..128 for the store and the load
independently (seed 000, "Vectorization of TMem load and store").

Allocated columns: the seed checks 256 for every pair, but that predates an upstream
correction of nvFuser's inlining. tv2's allocation domain is its loop domain
[TIDx{128}, 256/st_vec, Vectorize{st_vec}] and inline_most() inlines tv2 into tv3 as far as
their loop axes map (and never past a vectorized axis):
  - st_vec == ld_vec: tv2's and tv3's axis 1 are the same split of the same axis, so tv2 is
    computed at 2, the 256/st_vec loop is not allocated and only Vectorize{st_vec} is:
    st_vec columns, allocated as max(st_vec, 32) (tcgen05.alloc allocates a power of two >= 32).
  - st_vec != ld_vec: axis 1 differs (256/st_vec vs 256/ld_vec), tv2 is computed at 1 (only
    TIDx maps, and TIDx is shared across threads anyway): all 256 columns are allocated.
"""

import tileproof as tp

P = tp.ParallelType
VEC_FACTORS = [1, 2, 4, 8, 16, 32, 64, 128]


def expected_columns(st_vec, ld_vec):
    return max(st_vec, 32) if st_vec == ld_vec else 256


@tp.schedule(
    expect=lambda st_vec, ld_vec: tp.accepted(warnings=("GLOBAL-COALESCING",), 
        allocations={"T2": {"columns_allocated": expected_columns(st_vec, ld_vec)}}
    ),
    target="sm_100a",
    params={"st_vec": VEC_FACTORS, "ld_vec": VEC_FACTORS},
)
def tmem_vectorization(st_vec, ld_vec):
    with tp.Fusion(f"tmem_vectorization_st{st_vec}_ld{ld_vec}") as fusion:
        tv0 = tp.make_contig_concrete_tensor([128, 256])
        fusion.add_input(tv0)
        tv1 = tp.set(tv0)
        tv2 = tp.set(tv1)
        tv3 = tp.set(tv2)
        tv4 = tp.set(tv3)
        fusion.add_output(tv4)
    tv2.set_memory_type(tp.MemoryType.Tensor)

    for tv in (tv1, tv2, tv3, tv4):
        tv.axis(0).parallelize(P.TIDx)

    for tv in (tv2, tv1):
        tv.split(1, st_vec)
    tv2.axis(-1).parallelize(P.Vectorize)
    for tv in (tv3, tv4):
        tv.split(1, ld_vec)
    tv3.axis(-1).parallelize(P.Vectorize)

    tv2.set_allocation_domain(tv2.get_loop_domain(), True)
    tv2.set_tmem_dim_sep_pos(1)

    tp.inline_most(fusion)
    return fusion
