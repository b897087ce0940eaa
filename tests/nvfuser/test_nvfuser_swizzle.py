"""nvFuser tests/cpp/test_swizzle.cpp, translated (tests/support/nvfuser.py says how).

Its one TEST, SwizzleTest.Transpose1, schedules a producer and its transposing consumer together
through an AbstractTensor whose axes zip one IterDomain of each; tileproof has no AbstractTensor, so
the same transforms are written on each tensor, the consumer's in its own (transposed) axis order.
"""

import pytest

import tileproof as tp
from support.nvfuser import VALID, Case, check, params

P = tp.ParallelType


def transpose1(shape):
    """SwizzleTest.Transpose1: tv1 = set(tv0) in shared memory, tv2 = transpose(tv1, 0, 1).
    Both tiled [BIDx (I0/32 * I1/32), 32 (I0), 32 (I1)]; tv1 allocated with the two 32s
    XOR-swizzled; tv2's inner axes swapped; then each [BIDx, 4, TIDx{256}] of its inner 32 * 32;
    inlineMost. `shape`: makeSymbolicTensor(2) (None), or the extents."""
    with tp.Fusion("swizzle_transpose1") as fusion:
        tv0 = tp.make_tensor(shape or [-1, -1])
        fusion.add_input(tv0)
        tv1 = tp.set(tv0)
        tv2 = tp.transpose(tv1, 0, 1)
        fusion.add_output(tv2)
    tv1.set_memory_type(tp.MemoryType.Shared)
    if shape is None:  # one block per 32 x 32 tile: more than 2^31 - 1 blocks fail to launch (in nvFuser too)
        fusion.assume("T0_0 * T0_1 < 2**31")

    # tv1 [I0, I1] -> [I0/32, 32, I1/32, 32] -> [BIDx, 32 (I0), 32 (I1)]
    tv1.split(1, 32).split(0, 32).reorder({1: 2}).merge(0)
    tv1.axis(0).parallelize(P.BIDx)
    loop = tv1.get_loop_domain()
    tv1.swizzle(tp.SwizzleType.XOR, 1, 2)
    tv1.set_allocation_domain(tv1.get_loop_domain(), True)
    tv1.set_loop_domain(loop)
    # tv2 [I1, I0] -> [I1/32, 32, I0/32, 32] -> [BIDx, 32 (I0), 32 (I1)] -> swapped [BIDx, 32 (I1), 32 (I0)]
    tv2.split(0, 32).split(2, 32).reorder({0: 1, 1: 3, 2: 0, 3: 2}).merge(0)
    tv2.axis(0).parallelize(P.BIDx)
    tv2.reorder({1: 2, 2: 1})
    for tv in (tv1, tv2):
        tv.merge(1).split(1, 256)
        tv.axis(2).parallelize(P.TIDx)
    tp.inline_most(fusion)
    return fusion


def _run_transpose(shapes):
    def run(kernel, torch):
        for shape in shapes:
            t = torch.randn(shape, device="cuda")
            (out,) = kernel.run(t)
            assert torch.equal(out, t.t()), shape
    return run


CASES = [
    Case("SwizzleTest.Transpose1", lambda: transpose1(None), VALID,
         run=_run_transpose([(10240, 10240), (64, 96), (33, 100)])),
    Case("SwizzleTest.Transpose1/10240x10240", lambda: transpose1([10240, 10240]), VALID,
         run=_run_transpose([(10240, 10240)])),
]


@pytest.mark.parametrize("case", params(CASES))
def test_verdict(case):
    check(case)
