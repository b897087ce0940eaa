"""A wgmma batch reads its shared tiles until a wgmma.wait_group covers it (execution/wgmma_order.py):
with TMA stages refilled at least two iterations after their reads, the batch of iteration i
is waited for in iteration i + 1 (wgmma.wait_group 1), otherwise at once. PIPELINE-WAR proves the
refill of a stage comes after a barrier that follows that wait; a wait leaving one batch too many
in flight (the refill racing the tensor cores' reads, nvFuser issue 3561's family) is refuted
with the iteration."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.execution.barriers import Async, statement_paths
from tileproof.execution.pipeline import in_prologue, timeline
from tileproof.execution.barriers import WgmmaFence, WgmmaWait
from tileproof.recipes import HopperGemmParams, TmaPipeline, hopper_gemm, tile_multiples
from tileproof.execution.nest import placed_nest
from tileproof.verifier.analysis.pipeline import prove_free
from tileproof.verifier.context import VerifyContext
from tileproof.verifier.solver import Verdict


def _nest(stages, prefetch):
    params = HopperGemmParams(pipeline=TmaPipeline(stages=stages, prefetch=prefetch))
    fusion = tile_multiples(hopper_gemm("M", "N", "K", params), 64)
    return placed_nest(fusion.snapshot())


def _nodes(nodes, kind):
    for n in nodes:
        if isinstance(n, kind):
            yield n
        if hasattr(n, "body"):
            yield from _nodes(n.body, kind)


def _free(nest):
    """prove_free of each TMA circular buffer read by the wgmma."""
    stmts = statement_paths(nest.tree, nest.hazards)
    out = {}
    for _, wa, wp in stmts:
        if wa.kind is Async.TMA_LOAD and not in_prologue(wp):
            for _, ra, rp in stmts:
                if wa.writes in ra.reads:
                    tl = timeline(wa.writes, "T2", wp, rp, nest.hazards, wa.barrier)
                    assert tl.async_read and tl.tma
                    out[wa.writes] = prove_free(tl)
    assert set(out) == {"T4", "T5"}
    return out


@pytest.mark.parametrize("stages, prefetch, pending", [(4, 2, 1), (3, 1, 1), (4, 3, 0), (2, 1, 0)])
def test_a_batch_stays_in_flight_only_where_its_stage_is_refilled_two_iterations_later(stages, prefetch, pending):
    nest = _nest(stages, prefetch)
    waits = list(_nodes(nest.tree, WgmmaWait))
    assert [w.pending for w in waits if w.commit] == [pending]
    assert [w.pending for w in waits if not w.commit] == ([0] if pending else [])  # after the loop
    assert len(list(_nodes(nest.tree, WgmmaFence))) == 1
    assert all(out.status is Verdict.PROVED for out in _free(nest).values())


@pytest.mark.parametrize("stages, prefetch, forced", [(4, 3, 1), (4, 2, 2)])
def test_a_wait_leaving_the_refilled_stages_batch_in_flight_is_refuted(stages, prefetch, forced):
    nest = _nest(stages, prefetch)
    for w in _nodes(nest.tree, WgmmaWait):
        if w.commit:
            w.pending = forced
    for out in _free(nest).values():
        assert out.status is Verdict.COUNTEREXAMPLE
        # the stage read in iteration 0 is refilled with iteration `stages`' data before its batch is waited for
        assert out.values == {"data": stages, "stage": 0} and out.model["read iteration"] == 0


def test_the_kernel_keeps_one_batch_in_flight_and_waits_for_all_before_the_store():
    params = HopperGemmParams(pipeline=TmaPipeline(stages=4, prefetch=2))
    fusion = tile_multiples(hopper_gemm("M", "N", "K", params), 64)
    src = tp.compile(fusion, "sm_90a").cuda_source
    body = src[src.index("for (unsigned long long i2 = 0; i2 < ((s_K"):]
    assert body.count("tp_wgmma_wait<1>();") == 1 and body.count("tp_wgmma_commit();") == 1
    assert body.index("tp_wgmma_wait<1>();") < body.index("tp_wgmma_wait<0>();") < body.index("T3[")


def _swap_sync_and_wait(nodes):
    """The barrier moved before the wgmma wait that completes the batch (nvFuser issue 3865's
    family): [.., batch, wait 0, sync] -> [.., batch, sync, wait 0]."""
    from tileproof.execution.barriers import Sync

    for k in range(len(nodes) - 1):
        if isinstance(nodes[k], WgmmaWait) and isinstance(nodes[k + 1], Sync):
            nodes[k], nodes[k + 1] = nodes[k + 1], nodes[k]
            return True
    return any(_swap_sync_and_wait(n.body) for n in nodes if hasattr(n, "body"))


def test_one_stage_the_barrier_before_the_refill_follows_the_wgmma_wait():
    from tileproof.verifier.rules.races import unordered

    nest = _nest(1, -1)
    assert unordered(nest) == []
    assert _swap_sync_and_wait(nest.tree)
    found = unordered(nest)
    assert {(h.kind, h.tensor, h.reader.name) for h in found} == {("write after read", t, "T2") for t in ("T4", "T5")}


def test_a_wgmma_wait_at_the_top_of_the_next_iteration_counts_from_there():
    """The batch's wait moved to the next iteration, after its barrier: the refill there races the
    tensor cores even with prefetch 3 (nothing in flight)."""
    from tileproof.execution.barriers import Sync

    nest = _nest(4, 3)

    def move(nodes):
        for k, n in enumerate(nodes):
            if isinstance(n, WgmmaWait) and n.commit:
                body = nodes
                del body[k]
                at = next(i for i, x in enumerate(body) if isinstance(x, Sync)) + 1
                body.insert(at, n)  # after the barrier, before the refill
                return True
            if hasattr(n, "body") and move(n.body):
                return True
        return False

    assert move(nest.tree)
    for out in _free(nest).values():
        assert out.status is Verdict.COUNTEREXAMPLE and out.values["stage"] == out.model["read iteration"] % 4


def _m_tiles_in_a_loop(stages=4, prefetch=2):
    """The pipelined Hopper schedule with each block looping over the M tiles (Mo serial): the
    circular loop runs once per M tile."""
    params = HopperGemmParams(pipeline=TmaPipeline(stages=stages, prefetch=prefetch))
    fusion = tile_multiples(hopper_gemm("M", "N", "K", params), 64)
    for t in fusion.tensors:
        if t.loop and t.loop[0].parallel_type is tp.ParallelType.BIDx:
            t.loop[0].parallelize(tp.ParallelType.Serial)
    return fusion


def test_a_circular_loop_in_an_outer_loop_ends_with_a_barrier_after_its_last_wait():
    """The next M tile's prologue refills stages the last K tiles' wgmma may still read: the
    barrier after the loop comes after its wgmma.wait_group 0; without it PIPELINE-WAR rejects."""
    from tileproof.execution.barriers import Sync
    from tileproof.verifier.rules.pipeline import pipeline_war

    fusion = _m_tiles_in_a_loop()
    assert tp.verify(fusion, "sm_90a").ok
    ctx = VerifyContext(fusion.snapshot(), tp.get_target("sm_90a"))
    nest = placed_nest(ctx.fusion)

    def after_loop(nodes):
        for k, n in enumerate(nodes):
            if isinstance(n, WgmmaWait) and not n.commit:
                assert isinstance(nodes[k + 1], Sync)
                del nodes[k + 1]
                return True
            if hasattr(n, "body") and after_loop(n.body):
                return True
        return False

    assert after_loop(nest.tree)
    found = [d for d in pipeline_war(ctx) if "runs again in an outer loop" in d.message]
    assert {d.tensor for d in found} == {"T4", "T5"}


def test_a_stage_waits_with_its_own_phase_bit_across_runs_of_the_loop():
    """Each run of the loop loads each stage as often as it waits for it: the k-th wait of a
    stage is for its k-th load however many runs came before, so the wait flips a per-stage
    phase bit instead of computing the parity from the iteration."""
    src = tp.compile(_m_tiles_in_a_loop(), "sm_90a").cuda_source
    assert "tp_mbar_wait(&tp_bar_T4[tp_s], (tp_bar_T4_phase >> tp_s) & 1u);" in src
    assert src.count("tp_bar_T4_phase ^= 1u << tp_s;") == 1 and "/ 4) % 2" not in src
