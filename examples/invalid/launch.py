"""Schedules whose kernels compile but that the GPU refuses to launch: a block dimension over
its limit (LAUNCH-THREADS) and register tensors larger than a thread's local memory
(LOCAL-MEMORY-SIZE). Each was accepted before its rule and failed in cuLaunchKernel with
"invalid argument" on an H100 (benchmarks/fuzz.py --run). examples/valid/launch.py holds the fixes.
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
    "the register tensors of a thread take 786432 bytes (T1 393216, T2 393216)"]))
def local_frame_over_512_kib():
    """No axis is parallelized or inlined: every thread holds all of T1 and T2 (384 KiB each)."""
    fusion, _ = copy_96_rows("local_frame_over_512_kib", 1024)
    return fusion
