"""Grid Welfords (tp.welford reduced over block indices, execution/grid_reduction.py): REDUCTION-GRID
and REDUCTION-GRID-WORKSPACE hold for a Welford as for a grid sum, its three outputs one round.

Accepted: a row over BIDy (and TIDx), its mean read by a var_mean's division in the last block;
a mean (and a sum of squares) read in every block, an allreduce: the blocks meet at a grid-wide
barrier and each combines the states; refused: a 2-D grid whose segment the 32-bit semaphore cannot
count (REDUCTION-GRID-WORKSPACE, once for the three outputs, with the counterexample), an
allreduce's total in global memory (REDUCTION-GRID), a total read by another block (a visibility
counterexample). The lowered kernel has
one grid combine for the three outputs, three workspaces (avg, M2, N) at one layout, the leader's
semaphore, and that layout gives every partial its own slot, read by the last block (the brute force
of tests/rules/test_grid_reduction.py, run on a Welford with entrances, a reduced thread type and lanes).
"""

from __future__ import annotations

import tileproof as tp
from tileproof.codegen.ir import GridReduce, ParamKind, SiblingStep, walk
from tileproof.codegen.lower import lower
from tileproof.execution.grid_reduction import entrance_loops, grid_layout, grid_round, welford_work_names
from tileproof.execution.indexing import block_dims
from tileproof.execution.reduction import reduction_loops
from tileproof.model.expr import var
from tileproof.model.targets import get_target

import rules.test_grid_reduction as grid_sums
from support.welford_schedules import grid_welford, grid_welford_read_everywhere

P = tp.ParallelType


def _errors(fusion, code):
    return [d for d in tp.verify(fusion).diagnostics if d.code == code and d.severity.value == "error"]


def _two_d_grid(*assumptions):
    """The Welford of all of [M, N], M on BIDy and N on BIDx: one segment of M * N blocks."""
    with tp.Fusion("welford_over_a_2d_grid") as fusion:
        t0 = tp.make_tensor(["M", "N"]); fusion.add_input(t0)
        result = tp.welford(t0, [0, 1])
        for t in result:
            fusion.add_output(t)
    for a in assumptions:
        fusion.assume(a)
    result.avg.axis(0).parallelize(P.BIDy)
    result.avg.axis(1).parallelize(P.BIDx)
    tp.parallelize_all_like(result.avg)
    return fusion


def test_a_grid_welford_and_its_var_mean_read_in_the_last_block_are_accepted():
    for fusion in (grid_welford(), grid_welford(4, 32), grid_welford(3, 32, rfactor=True, outputs="var_mean")):
        report = tp.verify(fusion)
        assert report.ok, (fusion.name, [d.message for d in report.errors])


def test_a_segment_of_more_blocks_than_the_semaphore_counts_has_a_counterexample_once():
    (d,) = _errors(_two_d_grid("M <= 65535"), "REDUCTION-GRID-WORKSPACE")  # once for avg, var_sum and n
    blocks = d.counterexample["blocks per segment"]
    assert blocks > (1 << 32) - 1 and blocks == d.counterexample["M"] * d.counterexample["N"]
    assert d.message.startswith("T1 (a Welford: T1, T2, T3 count on one semaphore) is reduced over BIDx, BIDy")
    assert tp.verify(_two_d_grid("M <= 65535", "N <= 65535")).ok


def test_a_grid_welford_read_in_every_block_is_an_allreduce():
    for fusion in (grid_welford_read_everywhere(), grid_welford_read_everywhere(5, 16, centered_sum=True)):
        report = tp.verify(fusion)
        assert report.ok, (fusion.name, [d.message for d in report.errors])


def test_a_grid_welford_allreduce_s_total_in_global_memory_is_refused_for_the_output_read():
    fusion = grid_welford_read_everywhere(centered_sum=True)
    fusion.tensor("T2").set_memory_type(tp.MemoryType.Global)  # var_sum: stored by one block after the barrier
    (d,) = _errors(fusion, "REDUCTION-GRID")
    assert d.message.startswith("T2 is reduced over BIDy and ")
    assert "T7 reads its total in every block" in d.message and "in Global memory: one block stores it" in d.message


def _mean_then_add(rows_on_bidy: bool):
    """T4 = T1 + 1, T1 the mean of each row of [M BIDy, rN/32 BIDx, r32 TIDx]; T4's row on BIDy or not."""
    with tp.Fusion("welford_then_add") as fusion:
        t0 = tp.make_tensor(["M", "N"]); fusion.add_input(t0)
        result = tp.welford(t0, [1])
        t4 = tp.add(result.avg, 1.0)
        fusion.add_output(t4)
    fusion.assume("M <= 65535")
    for t in result:
        t.split(1, 32)
        t.axis(0).parallelize(P.BIDy)
        t.axis(1).parallelize(P.BIDx)
        t.axis(2).parallelize(P.TIDx)
    if rows_on_bidy:
        t4.axis(0).parallelize(P.BIDy)
    return fusion


def test_a_grid_welford_total_read_in_its_last_block_is_accepted():
    assert tp.verify(_mean_then_add(True)).ok


def test_a_grid_welford_total_read_by_another_block_has_a_counterexample():
    """T4 not on BIDy: block (tp_last, 0) computes every row, but each row's mean is in the registers
    of its own row's last block (test_grid_reduction.py's grid sum, as a Welford)."""
    report = tp.verify(_mean_then_add(False))
    (d,) = [d for d in report.diagnostics if d.code == "SMEM-BLOCK-VISIBILITY"]
    ce = d.counterexample
    assert ce["reader blockIdx.x"] == ce["writer blockIdx.x"] == ce["tp_last_x_T1"]
    assert ce["reader blockIdx.y"] != ce["writer blockIdx.y"]
    assert "REDUCTION-GRID" not in report.codes


def test_the_kernel_combines_the_three_outputs_once_through_three_workspaces():
    fusion = grid_welford(4, 32)
    snap = fusion.snapshot()
    ir = lower(snap, get_target("sm_90a")).kernel
    (grid,) = [n for n in walk(ir.body) if isinstance(n, GridReduce)]
    assert grid.combine == "welford" and grid.welford_work == welford_work_names("T1") and grid.flag == "tp_grid_last_T1"
    assert sum(isinstance(n, SiblingStep) and "grid combine" in n.comment for n in walk(ir.body)) == 2
    works = {p.name: p for p in ir.params if p.kind is ParamKind.WORKSPACE}
    assert sorted(works) == sorted(welford_work_names("T1"))
    assert [works[w].dtype for w in welford_work_names("T1")] == [tp.float32, tp.float32, tp.int32]
    r = reduction_loops(snap.tensor("T1"))
    g = grid_layout(r, block_dims(snap), {uid: var(f"entrance {k}") for k, (uid, _) in enumerate(entrance_loops(r))})
    assert {str(p.elements) for p in works.values()} == {str(g.work_elements)}  # one layout, three fields
    assert [p.name for p in ir.params if p.kind is ParamKind.SEMAPHORES] == ["tp_sems_T1"]
    assert [t.name for t in grid_round(snap.tensor("T3"))] == ["T1", "T2", "T3"]  # one round, T1 its leader


def _welford_rows_in_a_loop():
    """grid_sums._rows_in_a_loop as a Welford: [2 serial, 3 TIDx, r6 BIDx, r2 TIDy]: entrances, a reduced
    thread type, lanes; its avg (the leader) lays out the partials of all three."""
    with tp.Fusion("welford_layout") as fusion:
        t0 = tp.make_contig_concrete_tensor([2, 3, 12]); fusion.add_input(t0)
        result = tp.welford(t0, [2])
        for t in result:
            fusion.add_output(t)
    avg = result.avg
    avg.split(2, 2)
    tp.propagate_transforms(avg)
    avg.axis(1).parallelize(P.TIDx)
    avg.axis(2).parallelize(P.BIDx)
    avg.axis(3).parallelize(P.TIDy)
    tp.parallelize_all_like(avg)
    return fusion, avg


def test_the_welford_workspace_layout_gives_each_partial_its_slot_and_the_last_block_reads_all():
    grid_sums.test_the_workspace_layout_gives_each_partial_its_slot_and_the_last_block_reads_all(_welford_rows_in_a_loop)
