"""nvFuser's tests/cpp/test_welford.cpp, translated (tests/support/nvfuser.py says how): the
WelfordOp TESTs, which schedule a Welford(tv1, {1}) of tv1 = tv0 * 1.0 serially, over a block's
threads, over the grid, and rfactored. Not translated: SerialWelford, BlockWelford,
BlockWelfordNoInit and GridWelfordNoInit (they call the runtime's welford functions from a
hand-written kernel string, no fusion), WelfordSchedule and WelfordPersistence (nvFuser's
automatic schedulers).
"""

from __future__ import annotations

import pytest

import tileproof as tp
from support.nvfuser import VALID, Case, check, params

P = tp.ParallelType


def _welford():
    """tv0 [M, N] symbolic, tv1 = tv0 * 1.0, (avg, M2, N) = Welford(tv1, {1}), all three outputs."""
    with tp.Fusion("welford") as fusion:
        tv0 = tp.make_tensor([-1, -1])  # makeSymbolicTensor(2)
        fusion.add_input(tv0)
        tv1 = tp.mul(tv0, 1.0)
        tvs = tp.welford(tv1, [1])
        for t in tvs:
            fusion.add_output(t)
    return fusion, tv1, tvs


def welford_op():
    """WelfordTest.WelfordOp: avg split into [M/128, 4, r32, rN/32, 32] (the inner split of M left
    inside the reduction loops: 32 states a thread), tv1 computed at it; one thread."""
    fusion, tv1, tvs = _welford()
    avg = tvs.avg
    avg.split(1, 32)
    avg.split(0, 32)
    avg.split(0, 4)
    avg.reorder({-1: -3, -3: -1})
    tp.propagate_transforms(avg)  # computeAt replays avg's transforms on tv1 and the siblings
    tv1.inline_at(-1)
    return fusion


def block_welford_op():
    """WelfordTest.BlockWelfordOp: the row on TIDx (N threads), tv1 computed at avg."""
    fusion, tv1, tvs = _welford()
    fusion.assume("T0_1 <= 1024")  # the block: nvFuser checks at launch that it fits (N = 128)
    avg = tvs.avg
    avg.axis(-1).parallelize(P.TIDx)
    tp.parallelize_all_like(avg)
    tv1.inline_at(-1)
    return fusion


def grid_welford_op():
    """WelfordTest.GridWelfordOp: M on TIDx, the row on BIDx (a grid Welford)."""
    fusion, tv1, tvs = _welford()
    fusion.assume("T0_0 <= 1024")  # the block: nvFuser checks at launch that it fits (M = 64)
    avg = tvs.avg
    avg.axis(0).parallelize(P.TIDx)
    avg.axis(-1).parallelize(P.BIDx)
    tp.parallelize_all_like(avg)
    tv1.inline_at(-1)
    return fusion


def rfactor_welford_op():
    """WelfordTest.RfactorWelfordOp: avg split [M, rN/4, r4], the r4 rfactored (rFactorHelper: the
    three outputs together), tv1 computed at avg."""
    fusion, tv1, tvs = _welford()
    avg = tvs.avg
    avg.split(1, 4)
    tp.propagate_transforms(avg)  # computeAt's replay, done first: the siblings rfactor alike
    avg.rfactor([2])
    tp.inline_most(fusion)  # computeAt(tv_avg, -1) inlines tv1 and the partials between it and avg
    return fusion


def _run(shapes):
    """The TEST's validation (mean, var(unbiased=False) * N as var_sum, N) at its shape and others."""
    def run(kernel, torch):
        for m, n in shapes:
            t0 = torch.randn(m, n, device="cuda")
            avg, var_sum, count = kernel.run(t0)
            torch.testing.assert_close(avg, t0.mean(1), rtol=1e-4, atol=1e-5)
            torch.testing.assert_close(var_sum / n, t0.var(1, unbiased=False), rtol=1e-4, atol=1e-5)
            assert count.dtype == torch.int64 and bool((count == n).all())
    return run


CASES = [
    Case("WelfordTest.WelfordOp", welford_op, VALID, run=_run([(64, 128), (3, 7), (130, 1000)])),
    Case("WelfordTest.BlockWelfordOp", block_welford_op, VALID, run=_run([(64, 128), (3, 7), (130, 1000)])),  # N <= 1024
    Case("WelfordTest.GridWelfordOp", grid_welford_op, VALID, run=_run([(64, 128), (3, 7), (130, 1001)])),  # M <= 1024
    Case("WelfordTest.RfactorWelfordOp", rfactor_welford_op, VALID, run=_run([(64, 128), (3, 7), (130, 1001)])),
]


@pytest.mark.parametrize("case", params(CASES))
def test_verdict(case):
    check(case)
