"""The fuzzer's wgmma family (tests/support/wgmma_gen.py): its draws are reproducible, cover the
options hopper() combines, and are decided without a crash; the accepted ones compile for
sm_90a (the GPU run is benchmarks/fuzz.py --run)."""

from __future__ import annotations

import sys
from pathlib import Path

import tileproof as tp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from support.wgmma_gen import wgmma_case  # noqa: E402

SEEDS = range(12)


def test_draws_are_reproducible_and_cover_the_options():
    texts = [repr(wgmma_case(seed)) for seed in range(60)]
    assert texts == [repr(wgmma_case(seed)) for seed in range(60)]
    joined = " ".join(texts)
    for option in ("specialized=", "cluster=2", "persistent=", "stmatrix=True", "a_major=MN", "b_major=MN",
                   "war_mbarriers=True", "symbolic", "store_by_box=True", "store_swizzle=64", "group=", "split_n=True", "warpgroup_rows=128", "(192, 192)", "(192, 256)"):
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
