"""Transpose through tensor memory: the tmem store and load need not be scheduled alike, as
long as both match an allowed pattern (seed 000, "Transpose").

| Warp group   | 0 | 1 | 2 | 3 |
| Store column | 0 | 2 | 1 | 3 |
| Load column  | 0 | 1 | 2 | 3 |
"""

import tileproof as tp

P = tp.ParallelType


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING",),
                                allocations={"T2": {"lanes": 128, "columns": 4}}), target="sm_100a")
def tmem_transpose():
    with tp.Fusion("tmem_transpose") as fusion:
        tv0 = tp.make_contig_concrete_tensor([128, 2, 2])
        fusion.add_input(tv0)
        tv1 = tp.set(tv0)
        tv2 = tp.set(tv1)
        tv3 = tp.transpose(tv2, 1, 2)
        tv4 = tp.set(tv3)
        fusion.add_output(tv4)
    tv2.set_memory_type(tp.MemoryType.Tensor)

    for tv in (tv1, tv2, tv3, tv4):
        tv.axis(0).parallelize(P.TIDx)
        tv.axis(1).parallelize(P.TIDy)
        tv.axis(2).parallelize(P.TIDz)

    tv2.set_tmem_dim_sep_pos(1)
    return fusion
