"""One nest: the barriers, waits, pipelines and wgmma fences that the verifier's proofs read
(verifier/analysis/barrier_nest.py) are the ones the kernel has (codegen/lower, after its sync
pass), in the same order, for a schedule of every kind of synchronisation. Both are placed by
execution/nest.py place_syncs; this checks that the two trees it runs on classify alike."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.codegen.lower import lower, syncs as lowered_syncs
from tileproof.execution import barriers, pipeline, warp_roles
from tileproof.schedule_files import discover
from tileproof.verifier.analysis.barrier_nest import barrier_nest
from tileproof.verifier.context import VerifyContext

from support.examples import EXAMPLES

PLACED = (barriers.Sync, barriers.TmaWait, barriers.CpAsyncWait, barriers.BulkStoreWait, barriers.CpAsyncCommit,
          barriers.WgmmaFence, barriers.WgmmaWait, pipeline.Prologue, pipeline.Prefetched,
          warp_roles.StageEmptyWait, warp_roles.StageRelease, warp_roles.StageDrain)
# between them, every kind of node place_syncs puts in a nest
CASES = ["tuned_matmul_stmatrix_epilogue[group=1]", "hopper_matmul_warp_specialized_256_row_tiles",
         "ldst_matrix_set[size=8192x8192]", "k_loop_sum_double_buffered", "cache_after_copy",
         "hopper_matmul_grouped_war_mbarriers", "hopper_matmul_grouped", "blocks_by_another_route",
         "figure14a_output_per_block"]


def placed(nodes: list, out: list | None = None) -> list[tuple[str, str]]:
    """(node type, why) of every placed node, depth first."""
    out = [] if out is None else out
    for n in nodes:
        if isinstance(n, PLACED):
            out.append((type(n).__name__, getattr(n, "why", "")))
        if hasattr(n, "body"):
            placed(n.body, out)
    return out


def _both(name: str) -> tuple[list, list]:
    (case,) = [c for c in discover([str(EXAMPLES)]) if c.name == name]
    fusion = case.build()
    report = tp.verify(fusion, case.target)
    assert report.ok, report.codes
    target = tp.get_target(case.target)
    proved = barrier_nest(VerifyContext(fusion.snapshot(), target))
    kernel = lower(fusion.snapshot(), target, report.decisions, until="sync")
    return placed(proved.tree), placed(kernel.tree)


@pytest.mark.parametrize("name", CASES)
def test_the_kernel_has_the_syncs_the_verifier_proves(name):
    proved, emitted = _both(name)
    assert proved and proved == emitted


def test_the_comparison_sees_a_classifier_that_differs(monkeypatch):
    """Were codegen to classify a cp.async copy as a plain write, its nest would lose the
    cp.async waits the proof has: the comparison fails."""
    classify = lowered_syncs.access

    def without_cp_async(n, circular):
        found = classify(n, circular)
        return None if found is not None and found.kind is barriers.Async.CP_ASYNC else found

    monkeypatch.setattr(lowered_syncs, "access", without_cp_async)
    proved, emitted = _both("cache_after_copy")
    assert proved != emitted
