"""The fuzzer's wgmma family (tests/support/wgmma_gen.py): its draws are reproducible, cover the
options the Hopper GEMM recipe combines, and are decided without a crash; the accepted ones compile for
sm_90a (the GPU run is benchmarks/fuzz.py --run)."""

from __future__ import annotations

import tileproof as tp

from support.wgmma_gen import wgmma_case

SEEDS = range(12)


def test_draws_are_reproducible_and_cover_the_options():
    texts = [repr(wgmma_case(seed)) for seed in range(60)]
    assert texts == [repr(wgmma_case(seed)) for seed in range(60)]
    joined = " ".join(texts)
    for option in ("warp_specialized=", "cluster=Cluster(size=2)", "persistent=", "stmatrix=True",
                   "a=Operand(major='MN')", "b=Operand(major='MN')", "war_mbarriers=True", "symbolic", "by_box=True",
                   "by_box=True, swizzle=64", "group=", "split_n=True", "warpgroup_rows=128", "HopperTile(m=192, n=192",
                   "HopperTile(m=192, n=256"):
        assert option in joined, option


def test_draws_are_decided_and_the_accepted_ones_compile():
    accepted = 0
    for seed in SEEDS:
        case = wgmma_case(seed)
        report = tp.verify(case.fusion, case.target)
        assert not [d for d in report.diagnostics if d.internal], repr(case)
        if report.ok:
            kernel = tp.compile(case.fusion, case.target)
            assert "wgmma.mma_async" in kernel.cuda_source
            accepted += 1
    assert 0 < accepted < len(SEEDS)  # both verdicts drawn
