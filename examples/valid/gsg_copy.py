"""GSGCopy: gmem -> smem -> gmem copies under six inlining/parallelization strategies
(seed 000, "Review of inlining and parallelization").

Each variant checks the seed's shared-memory size for T1 (the number of floats x 4 bytes):
  1. no inlining, no parallelization     -> 8 floats (allocated in full)
  2. no inlining, axis 1 on BIDx          -> 2 floats (smem is distributed across BIDx)
  3. inline at 1, no parallelization      -> 4 floats (axis 0 left of compute-at)
  4. inline at 1, axis 1 on BIDx          -> 1 float
  5. inline at 1, axis 0 on TIDx          -> 8 floats (smem is shared across TIDx: overrides inlining)
  6. inline at 1, TIDx and BIDx           -> 2 floats
"""

import tileproof as tp

FLOAT = 4  # bytes


def _gsg_fusion(name):
    """tv0 (gmem [2, 4]) -> tv1 (smem) -> tv2 (gmem)."""
    with tp.Fusion(name) as fusion:
        tv0 = tp.make_contig_concrete_tensor([2, 4])
        fusion.add_input(tv0)
        tv1 = tp.set(tv0)
        tv2 = tp.set(tv1)
        fusion.add_output(tv2)
    tv1.set_memory_type(tp.MemoryType.Shared)
    return fusion, tv1, tv2


@tp.schedule(expect=tp.accepted(allocations={"T1": {"bytes": 8 * FLOAT}}))
def gsg_copy_naive():
    """No inlining, no parallelization: T1 is allocated in full size."""
    fusion, tv1, tv2 = _gsg_fusion("gsg_copy_naive")
    return fusion


@tp.schedule(expect=tp.accepted(allocations={"T1": {"bytes": 2 * FLOAT}}))
def gsg_copy_bidx():
    """No inlining, BIDx on axis 1: smem is distributed across CTAs, only axis 0 is allocated."""
    fusion, tv1, tv2 = _gsg_fusion("gsg_copy_bidx")
    tv1.axis(1).parallelize(tp.ParallelType.BIDx)
    tv2.axis(1).parallelize(tp.ParallelType.BIDx)
    return fusion


@tp.schedule(expect=tp.accepted(allocations={"T1": {"bytes": 4 * FLOAT}}))
def gsg_copy_inline1():
    """Inline at 1, no parallelization: axis 0 is left of compute-at, not allocated."""
    fusion, tv1, tv2 = _gsg_fusion("gsg_copy_inline1")
    tv1.inline_at(1)
    return fusion


@tp.schedule(expect=tp.accepted(allocations={"T1": {"bytes": 1 * FLOAT}}))
def gsg_copy_inline1_bidx():
    """Inline at 1 and BIDx on axis 1: axis 0 inlined, axis 1 distributed: size 1."""
    fusion, tv1, tv2 = _gsg_fusion("gsg_copy_inline1_bidx")
    tv1.inline_at(1)
    tv1.axis(1).parallelize(tp.ParallelType.BIDx)
    tv2.axis(1).parallelize(tp.ParallelType.BIDx)
    return fusion


@tp.schedule(expect=tp.accepted(allocations={"T1": {"bytes": 8 * FLOAT}}))
def gsg_copy_inline1_tidx():
    """Inline at 1, TIDx on axis 0: smem is shared across TIDx, which overrides the
    inlining, so axis 0 is allocated; axis 1 is right of compute-at: full size."""
    fusion, tv1, tv2 = _gsg_fusion("gsg_copy_inline1_tidx")
    tv1.inline_at(1)
    tv1.axis(0).parallelize(tp.ParallelType.TIDx)
    tv2.axis(0).parallelize(tp.ParallelType.TIDx)
    return fusion


@tp.schedule(expect=tp.accepted(allocations={"T1": {"bytes": 2 * FLOAT}}))
def gsg_copy_inline1_tidx_bidx():
    """Inline at 1, TIDx on axis 0 (allocated: shared) and BIDx on axis 1 (not allocated: distributed)."""
    fusion, tv1, tv2 = _gsg_fusion("gsg_copy_inline1_tidx_bidx")
    tv1.inline_at(1)
    tv1.axis(0).parallelize(tp.ParallelType.TIDx)
    tv2.axis(0).parallelize(tp.ParallelType.TIDx)
    tv1.axis(1).parallelize(tp.ParallelType.BIDx)
    tv2.axis(1).parallelize(tp.ParallelType.BIDx)
    return fusion
