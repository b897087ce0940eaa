"""Schedules whose kernels compile but that the GPU refuses to launch: a block dimension over
its limit (LAUNCH-THREADS), register tensors larger than a thread's local memory
(LOCAL-MEMORY-SIZE) and a grid dimension over its limit (LAUNCH-GRID). Each was accepted before
its rule and failed in cuLaunchKernel with "invalid argument" on an H100 (benchmarks/fuzz.py
--run), or was refused by Kernel.run before the launch. examples/valid/launch.py holds the fixes.
"""

import tileproof as tp

P = tp.ParallelType


def copy_96_rows(name: str, cols: int):
    """T0 [96, cols] -> registers T1 -> T2 -> output T3."""
    with tp.Fusion(name) as fusion:
        t0 = tp.make_contig_concrete_tensor([96, cols])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        t3 = tp.set(t2)
        fusion.add_output(t3)
    return fusion, (t1, t2, t3)


@tp.schedule(expect=tp.rejected("LAUNCH-THREADS", messages=["blockDim.z is 96, over the hardware's limit of 64"]))
def block_z_over_64():
    """96 x 8 = 768 threads fit a block, but blockDim.z may be at most 64."""
    fusion, tensors = copy_96_rows("block_z_over_64", 8)
    for t in tensors:
        t.axis(0).parallelize(P.TIDz)
        t.axis(1).parallelize(P.TIDx)
    return fusion


@tp.schedule(expect=tp.rejected("LOCAL-MEMORY-SIZE", messages=[
    "the register tensors of a thread take 786432 bytes (T1 393216, T2 393216)"], warnings=("REGISTER-BUDGET",)))
def local_frame_over_512_kib():
    """No axis is parallelized or inlined: every thread holds all of T1 and T2 (384 KiB each)."""
    fusion, _ = copy_96_rows("local_frame_over_512_kib", 1024)
    return fusion


def copy_rows(name: str, rows):
    """T0 [rows, 32] -> output T1, a column per thread (the caller binds the rows to blocks)."""
    with tp.Fusion(name) as fusion:
        t0 = tp.make_contig_concrete_tensor([rows, 32]) if isinstance(rows, int) else tp.make_tensor([rows, 32])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        fusion.add_output(t1)
    t1.axis(1).parallelize(P.TIDx)
    return fusion, t1


@tp.schedule(expect=tp.rejected("LAUNCH-GRID", messages=["gridDim.y is 70000, over the hardware's limit of 65535"]))
def rows_on_bidy_over_65535():
    """70000 rows, one block each along y: gridDim.y may be at most 65535."""
    fusion, t1 = copy_rows("rows_on_bidy_over_65535", 70000)
    t1.axis(0).parallelize(P.BIDy)
    return fusion


@tp.schedule(expect=tp.rejected("LAUNCH-GRID", messages=[
    "gridDim.y is 65536 when N = 65536, over the hardware's limit of 65535"]))
def symbolic_rows_on_bidy():
    """N rows on blockIdx.y, N any size: the grid fits only while N <= 65535, and nothing says so."""
    fusion, t1 = copy_rows("symbolic_rows_on_bidy", "N")
    t1.axis(0).parallelize(P.BIDy)
    return fusion


@tp.schedule(expect=tp.rejected("LAUNCH-GRID", messages=[
    "gridDim.x is 2147483648 when N = 1, over the hardware's limit of 2147483647"]))
def persistent_grid_of_2_31_blocks():
    """A persistent grid (each block loops over rows b, b + blocks, ...) of 2^31 blocks."""
    fusion, t1 = copy_rows("persistent_grid_of_2_31_blocks", "N")
    t1.split(0, 2**31)  # [ceil(N / 2^31) (a serial loop), 2^31 (blockIdx.x), 32]
    t1.axis(1).parallelize(P.BIDx)
    return fusion
