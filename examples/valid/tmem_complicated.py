"""Complicated1 and Complicated2: tensor memory with a fancily XOR-swizzled logical domain
and many parallel types (seed 000, "a few more complicated examples"). The row and column of
tensor memory are unrelated to the row and column of the tensor; only the transforms between
tv2's allocation domain and the loop domains that access it matter. Both allocate 64 columns.

`complicated1_schedule(rows, cols)` and `complicated2_schedule(rows, cols)` apply the seed's
schedule, unchanged, to a tensor of another size (the seed uses 4096 x 4096).
"""

import tileproof as tp

P = tp.ParallelType


def fancy_transformations(tv):
    """Transform a [4096, 4096] tensor back to its original shape through XOR swizzles."""
    tv.swizzle(tp.SwizzleType.XOR, 0, 1)
    tv.split(1, 64)
    tv.split(0, 64)
    tv.reorder([3, 0, 2, 1])
    tv.swizzle(tp.SwizzleType.XOR, 0, 1)
    tv.swizzle(tp.SwizzleType.XOR, 2, 3)
    tv.swizzle(tp.SwizzleType.XOR, 1, 2)
    tv.reorder([3, 0, 2, 1])
    tv.merge(2)
    tv.merge(0)


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


def complicated1_schedule(rows=4096, cols=4096):
    fusion, (tv0, tv1, tv2, tv3, tv4) = _copy_chain(f"complicated1_{rows}x{cols}", [rows, cols])

    # apply fancy transformations, shape is still [4096, 4096]
    fancy_transformations(tv4)

    # The first 4096 goes into lanes, the second 4096 into columns.
    # Split the second 4096 into [2, 4, 8, 64]:
    # -  2: serial,  left of CA (not allocated)
    # -  4:   BIDy,  left of CA (not allocated)
    # -  8:   BIDz, right of CA (not allocated)
    # - 64: serial, right of CA (allocated)
    tv4.split(1, 64)
    tv4.split(1, 8)
    tv4.split(1, 4)

    # Split the first 4096 into [2, 16, 8, 2, 8, 1]:
    # -  2:   TIDz,  left of CA (allocated)
    # - 16: serial,  left of CA (not allocated)
    # -  8:   TIDy, right of CA (allocated)
    # -  2:   BIDx, right of CA (not allocated)
    # -  8:   TIDx, right of CA (allocated)
    # -  1: serial, right of CA (trivial allocated)
    tv4.split(0, 1)
    tv4.split(0, 8)
    tv4.split(0, 2)
    tv4.split(0, 8)
    tv4.split(0, 16)

    tv4.axis(0).parallelize(P.TIDz)
    tv4.axis(2).parallelize(P.TIDy)
    tv4.axis(3).parallelize(P.BIDx)
    tv4.axis(4).parallelize(P.TIDx)
    tv4.axis(7).parallelize(P.BIDy)
    tv4.axis(8).parallelize(P.BIDz)

    tp.propagate_transforms(tv4)
    tp.parallelize_all_like(tv4)

    # The allocation domain of the TMem tensor
    tv2.set_allocation_domain(tv2.get_loop_domain(), True)
    tv2.set_tmem_dim_sep_pos(6)

    # Reorder and inlining
    tv4.reorder({6: 2, 7: 3})
    tp.propagate_transforms(tv4)
    tp.inline_all_at(tv4, 4)
    return fusion


def complicated2_schedule(rows=4096, cols=4096):
    fusion, (tv0, tv1, tv2, tv3, tv4) = _copy_chain(f"complicated2_{rows}x{cols}", [rows, cols])

    # apply fancy transformations, shape is still [4096, 4096]
    fancy_transformations(tv4)

    # Split the second 4096 into [4, 8, 2, 16, 2, 2]:
    # -  4: serial,  left of CA (not allocated)
    # -  8:   BIDy,  left of CA (not allocated)
    # -  2:   TIDy,  left of CA (allocated)
    # - 16: serial, right of CA (allocated)
    # -  2:   BIDz, right of CA (not allocated)
    # -  2:   TIDz, right of CA (allocated)
    tv4.split(1, 2)
    tv4.split(1, 2)
    tv4.split(1, 16)
    tv4.split(1, 2)
    tv4.split(1, 8)

    # Split the first 4096 into [32, 128]:
    # -  32: serial,   left of CA (not allocated)
    # - 128:   TIDx,  right of CA (allocated)
    tv4.split(0, 128)

    tv4.axis(1).parallelize(P.TIDx)
    tv4.axis(3).parallelize(P.BIDy)
    tv4.axis(4).parallelize(P.TIDy)
    tv4.axis(6).parallelize(P.BIDz)
    tv4.axis(7).parallelize(P.TIDz)

    tp.propagate_transforms(tv4)
    tp.parallelize_all_like(tv4)

    # The allocation domain of the TMem tensor
    tv2.set_allocation_domain(tv2.get_loop_domain(), True)
    tv2.set_tmem_dim_sep_pos(2)

    # Reorder and inlining
    tv4.reorder({1: 4})
    tp.propagate_transforms(tv4)
    tp.inline_all_at(tv4, 4)
    return fusion


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING", "GRID-SIZE"),
                                allocations={"T2": {"columns_allocated": 64}}), target="sm_100a")
def complicated1():
    """Lanes [TIDz{2}, 16, TIDy{8}, BIDx{2}, TIDx{8}, 1] -> 2*8*8 = 128; columns
    [2, BIDy{4}, BIDz{8}, 64] -> 64."""
    return complicated1_schedule(4096, 4096)


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING", "GRID-SIZE"),
                                allocations={"T2": {"columns_allocated": 64}}), target="sm_100a")
def complicated2():
    """Lanes [32, TIDx{128}] -> 128; columns [4, BIDy{8}, TIDy{2}, 16, BIDz{2}, TIDz{2}] -> 64."""
    return complicated2_schedule(4096, 4096)
