"""PIPELINE-PHASE (verifier/analysis/pipeline.py prove_phase): every mbarrier wait of a TMA
pipeline is on its datum's stage and for the phase the datum's load (or the release of the datum
before it) completes, and no phase completes before the waits for the previous one. No schedule
can misplace the waits, so each test mutates the placed nest of a bundled schedule the way real
bugs did (a parity from the wrong stage count, tilelang PR 3087; a wait too many) and checks the
datum, stage and phase reported."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.execution.barriers import Sync, TmaWait
from tileproof.execution.warp_roles import StageEmptyWait, StageRelease
from tileproof.recipes import GridOrder, HopperGemmParams, HopperTile, TmaPipeline, hopper_gemm, tile_multiples
from tileproof.execution.nest import placed_nest
from tileproof.verifier.context import VerifyContext
from tileproof.verifier.rules.pipeline import _timelines, pipeline_phase
from tileproof.verifier.solver import Verdict
from tileproof.verifier.analysis.pipeline import prove_phase


WS = tp.WarpSpecialized(tp.ParallelType.TIDy, num_registers=(40, 232))
WIDE = HopperTile(m=128, n=256)
SCHEDULES = {
    "three stages": HopperGemmParams(pipeline=TmaPipeline(stages=3, prefetch=1)),
    "four stages": HopperGemmParams(tile=WIDE, pipeline=TmaPipeline(stages=4, prefetch=2), grid=GridOrder(group=8)),
    "mbarrier WAR": HopperGemmParams(tile=WIDE, pipeline=TmaPipeline(stages=4, prefetch=2, war_mbarriers=True),
                                     grid=GridOrder(group=8)),
    "warp-specialized": HopperGemmParams(tile=WIDE, pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=WS),
                                         grid=GridOrder(group=8)),
    "warp-specialized, three stages": HopperGemmParams(
        tile=WIDE, pipeline=TmaPipeline(stages=3, prefetch=1, warp_specialized=WS), grid=GridOrder(group=8)),
    "persistent": HopperGemmParams(tile=WIDE, pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=WS),
                                   grid=GridOrder(group=8, persistent=132)),
}


def _ctx(params):
    fusion = tile_multiples(hopper_gemm("M", "N", "K", params), 64, n_multiple=params.tile.n)
    return VerifyContext(fusion.snapshot(), tp.get_target("sm_90a"))


def _all(nodes):
    for n in nodes:
        yield n
        if hasattr(n, "body"):
            yield from _all(n.body)


def _outcomes(ctx):
    out = {}
    for tl, writer, _ in _timelines(ctx):
        if tl.tma:
            out[writer.name] = prove_phase(tl)
    assert set(out) == {"T4", "T5"}
    return out


@pytest.mark.parametrize("name", SCHEDULES)
def test_every_wait_is_for_its_datums_phase(name):
    ctx = _ctx(SCHEDULES[name])
    assert all(o.status is Verdict.PROVED for o in _outcomes(ctx).values())
    assert list(pipeline_phase(ctx)) == []


def test_a_wait_counting_two_stages_of_three_is_refuted_at_datum_2():
    """The stage count of the wait, not the buffer's: datum 2 lies in stage 2, the wait is on stage 0."""
    ctx = _ctx(SCHEDULES["three stages"])
    for n in _all(placed_nest(ctx.fusion).tree):
        if isinstance(n, TmaWait) and n.stages:
            n.stages = 2
    for out in _outcomes(ctx).values():
        assert out.status is Verdict.COUNTEREXAMPLE and out.model["iteration"] == 2
        assert out.values["stage waited"] == 0 and out.values["stage of the datum"] == 2
    (d, _) = list(pipeline_phase(ctx))
    assert d.code == "PIPELINE-PHASE" and "iteration 2" in d.message and "stage 0's mbarrier" in d.message


def test_a_second_wait_on_the_same_mbarrier_waits_for_the_next_phase():
    """Two waits per iteration flip the stage's bit twice: the second waits for a phase no load
    of this datum completes (a hang), and from datum S on the first is off too."""
    ctx = _ctx(SCHEDULES["warp-specialized"])
    for n in _all(placed_nest(ctx.fusion).tree):
        if hasattr(n, "body"):
            waits = [k for k, c in enumerate(n.body) if isinstance(c, TmaWait) and c.barrier == "tp_bar_T4"]
            for k in waits:
                n.body.insert(k, TmaWait("tp_bar_T4", "again", n.body[k].stages))
    out = _outcomes(ctx)["T4"]
    assert out.status is Verdict.COUNTEREXAMPLE and out.model["iteration"] == 0
    assert out.values["wait"] == "wait 1" and out.values["phase waited"] == 1 and out.values["phase of the datum"] == 0


def test_a_producer_waiting_on_the_wrong_empty_stage_is_refuted():
    ctx = _ctx(SCHEDULES["warp-specialized"])
    for n in _all(placed_nest(ctx.fusion).tree):
        if isinstance(n, StageEmptyWait):
            n.stages = 2
    out = _outcomes(ctx)["T4"]
    assert out.status is Verdict.COUNTEREXAMPLE and out.values["wait"] == "empty wait 0"
    assert out.values["stage waited"] != out.values["stage of the datum"]


def test_a_release_on_the_wrong_stage_is_refuted():
    ctx = _ctx(SCHEDULES["mbarrier WAR"])
    for n in _all(placed_nest(ctx.fusion).tree):
        if isinstance(n, StageRelease):
            n.stages = 3
    out = _outcomes(ctx)["T4"]
    assert out.status is Verdict.COUNTEREXAMPLE and out.values["wait"] == "release"


def test_without_the_barrier_before_the_refill_the_next_phase_may_run_ahead():
    ctx = _ctx(SCHEDULES["four stages"])
    nest = placed_nest(ctx.fusion)
    for n in _all(nest.tree):
        if hasattr(n, "body"):
            n.body[:] = [c for c in n.body if not isinstance(c, Sync)]
    out = _outcomes(ctx)["T4"]
    assert out.status is Verdict.COUNTEREXAMPLE and out.values["phase order"] == 0
    assert out.values["wait"] == "-"  # the waits are right; the order is not
    d = next(d for d in pipeline_phase(ctx) if d.tensor == "T4")
    assert "runs a phase ahead of a waiter" in d.message


def test_a_producer_loading_before_its_empty_wait_may_run_ahead():
    ctx = _ctx(SCHEDULES["warp-specialized"])
    for n in _all(placed_nest(ctx.fusion).tree):
        if hasattr(n, "body"):
            waits = [c for c in n.body if isinstance(c, StageEmptyWait)]
            if waits:
                n.body[:] = [c for c in n.body if c not in waits] + waits  # after the loads
    out = _outcomes(ctx)["T4"]
    assert out.status is Verdict.COUNTEREXAMPLE and out.values["phase order"] == 0


def _tma_tiles_one_after_another(tiles=4):
    """nvFuser's Tutorial.BasicTMA with `tiles` boxes per block loaded one after the other on one
    mbarrier ([BIDx, tiles, Bulk{256}]) and copied out after the loop: the boxes land in distinct
    slices, so no tile is rewritten and SMEM-RACE places no barrier in the loop."""
    with tp.Fusion("tma_tiles_one_after_another") as fusion:
        t0 = tp.make_contig_concrete_tensor([1 << 16])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        fusion.add_output(t1)
    smem = t0.cache_after(tp.LoadStoreOpType.CpAsyncBulkTensorTile)
    smem.set_memory_type(tp.MemoryType.Shared)
    for tv in (smem, t1):
        tv.split(0, 256).split(0, tiles)
        tv.axis(0).parallelize(tp.ParallelType.BIDx)
    smem.axis(2).parallelize(tp.ParallelType.Bulk)
    t1.axis(2).parallelize(tp.ParallelType.TIDx)
    return fusion


def _ctx_of(fusion):
    return VerifyContext(fusion.snapshot(), tp.get_target("sm_90a"))


def test_a_tma_load_issued_again_on_its_mbarrier_waits_behind_a_barrier():
    """The load of the next box arms the mbarrier's next phase only after a __syncthreads that
    follows every thread's wait for this one (a tutorial kernel hung on an H200 without it)."""
    ctx = _ctx_of(_tma_tiles_one_after_another())
    loop = next(n for n in _all(placed_nest(ctx.fusion).tree) if hasattr(n, "body")
                and any(isinstance(c, TmaWait) for c in n.body))
    steps = [type(c).__name__ for c in loop.body]
    assert steps.index("TmaWait") < steps.index("Sync")
    assert list(pipeline_phase(ctx)) == []
    assert tp.verify(_tma_tiles_one_after_another(), "sm_90a").ok


def test_a_tma_load_of_one_box_per_block_needs_no_barrier_for_its_mbarrier():
    ctx = _ctx_of(_tma_tiles_one_after_another(tiles=1))
    assert not any(isinstance(n, Sync) and "armed again" in n.why for n in _all(placed_nest(ctx.fusion).tree))
    assert list(pipeline_phase(ctx)) == []


def test_without_that_barrier_a_late_waiter_sees_the_phase_after_next():
    ctx = _ctx_of(_tma_tiles_one_after_another())
    for n in _all(placed_nest(ctx.fusion).tree):
        if hasattr(n, "body"):
            n.body[:] = [c for c in n.body if not isinstance(c, Sync)]
    (d,) = list(pipeline_phase(ctx))
    assert d.code == "PIPELINE-PHASE" and d.tensor == "T2" and "issued again in the next iteration" in d.message
    assert d.counterexample["iteration"] == 0 and "phase 2" in d.counterexample["next issue"]
    assert "ISSUE, WAIT" in d.notes[0]
