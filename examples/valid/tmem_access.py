"""Valid tensor-memory loads/stores in the 32x32b pattern (seed 000, "Now, let's take a look
at some valid examples"): WarpXYZ, WarpGroupXYZ, WarpGroupXYColZ, WarpGroupXColYZ, X1WarpGroupYColZ.

Every example is a copy gmem -> reg (tv1) -> tmem (tv2) -> reg (tv3) -> gmem, with tv4's
parallelization copied to every tensor and no inlining.
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


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING",),
                                allocations={"T2": {"lanes": 32, "columns": 2}}), target="sm_100a")
def warp_xyz():
    """One warp split into TIDz{2} x TIDy{4} x TIDx{4}; a loop of 2, each iteration
    accesses a 32x1 box of tensor memory."""
    fusion, (tv0, tv1, tv2, tv3, tv4) = _copy_chain("warp_xyz", [2, 4, 4, 2])
    tv4.axis(0).parallelize(P.TIDz)
    tv4.axis(1).parallelize(P.TIDy)
    tv4.axis(2).parallelize(P.TIDx)
    tp.parallelize_all_like(tv4)
    tv2.set_tmem_dim_sep_pos(3)
    return fusion


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING",),
                                allocations={"T2": {"lanes": 128, "columns": 2}}), target="sm_100a")
def warp_group_xyz():
    """One warp group; it accesses a whole column, each warp its own subpartition."""
    fusion, (tv0, tv1, tv2, tv3, tv4) = _copy_chain("warp_group_xyz", [2, 8, 8, 2])
    tv4.axis(0).parallelize(P.TIDz)
    tv4.axis(1).parallelize(P.TIDy)
    tv4.axis(2).parallelize(P.TIDx)
    tp.parallelize_all_like(tv4)
    tv2.set_tmem_dim_sep_pos(3)
    return fusion


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING",),
                                allocations={"T2": {"lanes": 128, "columns": 8}}), target="sm_100a")
def warp_group_xy_col_z():
    """8 warp groups (TIDz); warp group i accesses column i."""
    fusion, (tv0, tv1, tv2, tv3, tv4) = _copy_chain("warp_group_xy_col_z", [8, 16, 8])
    tv4.axis(0).parallelize(P.TIDy)
    tv4.axis(1).parallelize(P.TIDx)
    tv4.axis(2).parallelize(P.TIDz)
    tp.parallelize_all_like(tv4)
    tv2.set_tmem_dim_sep_pos(2)
    return fusion


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING",),
                                allocations={"T2": {"lanes": 128, "columns": 4}}), target="sm_100a")
def warp_group_x_col_yz():
    """4 warp groups; warp group (ty + 2 tz) accesses column (2 ty + tz): 0, 2, 1, 3."""
    fusion, (tv0, tv1, tv2, tv3, tv4) = _copy_chain("warp_group_x_col_yz", [128, 2, 2])
    tv4.axis(0).parallelize(P.TIDx)
    tv4.axis(1).parallelize(P.TIDy)
    tv4.axis(2).parallelize(P.TIDz)
    tp.parallelize_all_like(tv4)
    tv2.set_tmem_dim_sep_pos(1)
    return fusion


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING",),
                                allocations={"T2": {"lanes": 128, "columns": 2}}), target="sm_100a")
def x1_warp_group_y_col_z():
    """TIDx{1}, TIDy{128}, TIDz{2}: 2 warp groups, warp group i accesses column i. The order
    of TIDx and TIDy looks wrong but TIDx has extent 1."""
    fusion, (tv0, tv1, tv2, tv3, tv4) = _copy_chain("x1_warp_group_y_col_z", [1, 128, 2])
    tv4.axis(0).parallelize(P.TIDx)
    tv4.axis(1).parallelize(P.TIDy)
    tv4.axis(2).parallelize(P.TIDz)
    tp.parallelize_all_like(tv4)
    tv2.set_tmem_dim_sep_pos(2)
    return fusion
