"""One nest: the barriers, waits, pipelines and wgmma fences that the verifier's proofs read
(execution/nest.py placed_nest) are the ones the kernel has (codegen/lower's nest pass lowers that
very object), in the same order, for a schedule of every kind of synchronisation; and a change to
the one classifier (statement_access) or to the placement changes the proof and the kernel alike."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.codegen.lower import lower
from tileproof.codegen.lower.loop_nest import lower_nest
from tileproof.execution import barriers, nest as nest_module, pipeline, warp_roles
from tileproof.model.errors import InternalError
from tileproof.schedule_files import discover

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
    """The placed nodes of the nest verify proved and of the kernel lowered from it."""
    (case,) = [c for c in discover([str(EXAMPLES)]) if c.name == name]
    fusion = case.build()
    report = tp.verify(fusion, case.target)
    assert report.ok, report.codes
    snapshot = fusion.snapshot()
    proved = nest_module.placed_nest(snapshot)
    kernel = lower(snapshot, tp.get_target(case.target), report.decisions, until="nest")
    return placed(proved.tree), placed(kernel.tree)


@pytest.mark.parametrize("name", CASES)
def test_the_kernel_has_the_syncs_the_verifier_proves(name):
    proved, emitted = _both(name)
    assert proved and proved == emitted


def test_the_kernel_is_lowered_from_the_proved_object_not_a_copy_of_its_placement(monkeypatch):
    """Were the classifier to see a cp.async copy as a plain write, the proof's nest loses its
    cp.async waits, and so does the kernel: there is no second placement to keep them."""
    classify = nest_module.statement_access

    def without_cp_async(tv, phase=nest_module.Phase.STATEMENT):
        found = classify(tv, phase)
        return None if found is not None and found.kind is barriers.Async.CP_ASYNC else found

    before = _both("cache_after_copy")[1]
    monkeypatch.setattr(nest_module, "statement_access", without_cp_async)
    proved, emitted = _both("cache_after_copy")
    assert proved == emitted and emitted != before
    assert not any(kind == "CpAsyncWait" for kind, _ in emitted)


def test_the_lowering_refuses_statements_that_are_not_the_nest_s():
    """The kernel's statements are matched to the nest's leaves one by one; a statement list that
    does not line up is a tileproof bug, never a kernel with statements moved."""
    (case,) = [c for c in discover([str(EXAMPLES)]) if c.name == "cache_after_copy"]
    fusion = case.build().snapshot()
    st = lower(fusion, tp.get_target(case.target), until="index")
    st.statements.pop()
    with pytest.raises(InternalError, match="not the placed nest's"):
        lower_nest(nest_module.placed_nest(fusion), st.order, st.statements, st.classes)
