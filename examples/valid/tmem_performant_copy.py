"""PerformantVectorizedCopy: gmem -> reg -> tmem -> reg -> gmem with gmem vectorization 4 and
unroll 2; the tmem load/store is vectorized by 8 = Serial{2} * Vec'{4} (seed 000, last example).

tv2 allocates TIDy{2} * Vectorize{8} = 16 columns, rounded up to the 32-column minimum."""

import tileproof as tp

P = tp.ParallelType


def performant_vectorized_copy_schedule(name="performant_vectorized_copy", dtype=tp.float32):
    """The seed's schedule; for another dtype the gmem vector stays 16 bytes (`gmem_vector`
    elements) and the tmem vector Serial{2} * Vec' fills 8 32-bit registers, packed."""
    gmem_vector = 16 // dtype.bytes
    with tp.Fusion(name) as fusion:
        tv0 = tp.make_contig_tensor(1, dtype=dtype)  # symbolic extent T0_0
        fusion.add_input(tv0)
        tv1 = tp.set(tv0)
        tv2 = tp.set(tv1)
        tv3 = tp.set(tv2)
        tv4 = tp.set(tv3)
        fusion.add_output(tv4)
    tv2.set_memory_type(tp.MemoryType.Tensor)

    tv4.split(0, gmem_vector)
    tv4.axis(1).parallelize(P.Vectorize)
    tv4.split(0, 128)
    tv4.axis(1).parallelize(P.TIDx)
    tv4.split(0, 2)
    tv4.axis(1).parallelize(P.TIDy)
    tv4.split(0, 2)
    tv4.axis(1).parallelize(P.Serial)
    tv4.axis(0).parallelize(P.BIDx)

    tp.propagate_transforms(tv4)
    tp.parallelize_all_like(tv4, [P.TIDx, P.TIDy, P.BIDx])
    tv1.axis(-1).parallelize(P.Vectorize)

    # [BIDx, Serial, TIDy, TIDx, Vec'] -> [BIDx, TIDx, |, TIDy, Vec{Serial * Vec'}]
    # Vec' is the vectorization of the gmem access, Vec the vectorization of the tmem access.
    for tv in (tv2, tv3):
        tv.reorder({1: 3, 3: 1})
        tv.merge(-2)
        tv.axis(-1).parallelize(P.Vectorize)
    tv2.set_allocation_domain(tv2.get_loop_domain(), True)
    tv2.set_tmem_dim_sep_pos(2)

    tp.inline_most(fusion)
    return fusion


@tp.schedule(expect=tp.accepted(allocations={"T2": {"columns_allocated": 32}}), target="sm_100a")
def performant_vectorized_copy():
    fusion = performant_vectorized_copy_schedule()
    # The splits 4, 128, 2, 2 all lie on the path to the vectorized tmem access (and in tv2's
    # transforms), so they must divide: T0_0 % (4*128*2*2) == 0. The seed runs
    # 256 * 1024 * 1024 elements, which satisfies this.
    fusion.assume("T0_0 % 2048 == 0")
    return fusion
