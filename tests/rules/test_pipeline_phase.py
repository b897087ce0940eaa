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
