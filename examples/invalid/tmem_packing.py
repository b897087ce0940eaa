"""Tensor memory with 8- and 16-bit elements that do not fill whole 32-bit registers. A column
is 32 bits and tcgen05.ld/st move whole 32-bit registers, one column each, so a thread's
elements of one instruction must fill registers (2 bfloat16, 4 int8 each), consecutive in
their lane from a column's first byte. Each is the copy gmem -> reg (T1) -> tmem (T2) -> reg
(T3) -> gmem with TIDx{32} on the lanes, the dimension separator after it."""

import tileproof as tp

P = tp.ParallelType


def _copy_chain(name, shape, dtype):
    with tp.Fusion(name) as fusion:
        tv0 = tp.make_contig_concrete_tensor(shape, dtype=dtype)
        fusion.add_input(tv0)
        tv1 = tp.set(tv0)
        tv2 = tp.set(tv1)
        tv3 = tp.set(tv2)
        tv4 = tp.set(tv3)
        fusion.add_output(tv4)
    tv2.set_memory_type(tp.MemoryType.Tensor)
    for tv in (tv1, tv2, tv3, tv4):
        tv.axis(0).parallelize(P.TIDx)
    tv2.set_tmem_dim_sep_pos(1)
    return fusion, (tv1, tv2, tv3, tv4)


# [TIDx{32} | 8 bfloat16]: no vector, so each tcgen05.st/ld would move one bfloat16, half a
# register: thread 0 moves bytes 0..1 of (lane 0, column 0), whose bytes 2..3 hold element 1
# (the next loop iteration's): TMEM-PACKING, for the store and the load.
@tp.schedule(expect=tp.rejected("TMEM-PACKING", warnings=("GLOBAL-COALESCING",)), target="sm_100a")
def half_register_bfloat16():
    fusion, _ = _copy_chain("half_register_bfloat16", [32, 8], tp.bfloat16)
    return fusion


# [TIDx{32} | 16 int8] vectorized by 2 on both sides: 2 bytes per thread and instruction, half
# a column: TMEM-PACKING (TMEM-VECTORIZE leaves a partial register to it).
@tp.schedule(expect=tp.rejected("TMEM-PACKING", warnings=("GLOBAL-COALESCING",)), target="sm_100a")
def half_register_int8():
    fusion, (tv1, tv2, tv3, tv4) = _copy_chain("half_register_int8", [32, 16], tp.int8)
    for tv in (tv2, tv3):
        tv.split(1, 2)
        tv.axis(2).parallelize(P.Vectorize)
    return fusion


# [TIDx{32} | 2 x 2 bfloat16] vectorized over the outer column axis: a thread's register holds
# elements 0 and 2 of its lane (bytes 0..1 of column 0 and of column 1), not two consecutive
# elements: register 0's high half is byte 2 of column 0, where element 1 lies. Two
# registers' worth would still be whole (TMEM-PACKING holds); TMEM-ACCESS-PATTERN.
@tp.schedule(expect=tp.rejected("TMEM-ACCESS-PATTERN", warnings=("GLOBAL-COALESCING",)), target="sm_100a")
def packed_not_consecutive():
    fusion, (tv1, tv2, tv3, tv4) = _copy_chain("packed_not_consecutive", [32, 4], tp.bfloat16)
    for tv in (tv1, tv2, tv3, tv4):
        tv.split(1, 2)
    tv2.set_allocation_domain(tv2.get_loop_domain(), True)
    for tv in (tv2, tv3):
        tv.axis(1).parallelize(P.Vectorize)
    return fusion
