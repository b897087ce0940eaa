"""WGMMA-ASYNC-ORDER (verifier/analysis/wgmma_order.py): the fences, commits and waits placed
around wgmma (execution/wgmma_order.py) order it with the threads' register accesses and the stage
releases on every path. No schedule can misplace them, so each test removes or moves one on the
placed nest of a bundled schedule and checks the path reported, as the bugs it stands for
(nvFuser issue 3561, Triton PR 8964) would have it."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.execution.warp_roles import StageRelease, WarpRoles
from tileproof.execution.barriers import WgmmaFence, WgmmaWait, statement_paths
from tileproof.recipes import (GridOrder, HopperGemmParams, HopperTile, TmaPipeline, hopper_gemm, mma_gemm,
                               tile_multiples)
from tileproof.execution.nest import placed_nest
from tileproof.verifier.analysis.wgmma_order import check_order
from tileproof.verifier.context import VerifyContext
from tileproof.verifier.rules.wgmma import wgmma_async_order

from support.examples import example_module


WS = tp.WarpSpecialized(tp.ParallelType.TIDy, num_registers=(40, 232))
WIDE = HopperTile(m=128, n=256)
SCHEDULES = {
    "one tile": HopperGemmParams(),
    "pipelined": HopperGemmParams(tile=WIDE, pipeline=TmaPipeline(stages=4, prefetch=2), grid=GridOrder(group=8)),
    "pipelined, waiting at once": HopperGemmParams(pipeline=TmaPipeline(stages=4, prefetch=3)),
    "mbarrier WAR": HopperGemmParams(tile=WIDE, pipeline=TmaPipeline(stages=4, prefetch=2, war_mbarriers=True),
                                     grid=GridOrder(group=8)),
    "warp-specialized": HopperGemmParams(tile=WIDE, pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=WS),
                                         grid=GridOrder(group=8)),
    "persistent": HopperGemmParams(tile=WIDE, pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=WS),
                                   grid=GridOrder(group=8, persistent=132)),
}


def _ctx(params=HopperGemmParams()):
    fusion = tile_multiples(hopper_gemm("M", "N", "K", params), 64, n_multiple=params.tile.n)
    return VerifyContext(fusion.snapshot(), tp.get_target("sm_90a"))


def _scopes(nodes):
    """Every list of the nest that holds nodes, outermost first."""
    yield nodes
    for n in nodes:
        if hasattr(n, "body"):
            yield from _scopes(n.body)


def _remove(nest, test) -> int:
    removed = 0
    for scope in list(_scopes(nest.tree)):
        keep = [n for n in scope if not test(n)]
        removed += len(scope) - len(keep)
        scope[:] = keep
    return removed


def _violations(nest):
    return check_order(nest.tree, nest.hazards, nest.label)


@pytest.mark.parametrize("name", SCHEDULES)
def test_the_placed_fences_and_waits_keep_every_obligation(name):
    ctx = _ctx(SCHEDULES[name])
    nest = placed_nest(ctx.fusion)
    assert _violations(nest) == [] and list(wgmma_async_order(ctx)) == []
    assert any(isinstance(n, WgmmaFence) for s in _scopes(nest.tree) for n in s)  # the nest has wgmma to check


@pytest.mark.parametrize("name", SCHEDULES)
def test_without_the_fence_the_wgmma_follows_the_zeroing_unfenced(name):
    nest = placed_nest(_ctx(SCHEDULES[name]).fusion)
    assert _remove(nest, lambda n: isinstance(n, WgmmaFence)) == 1
    (v,) = _violations(nest)
    assert v.obligation == 1 and v.statement == "T2's wgmma"
    assert v.counterexample["register write"] == "T2's init (its accumulators zeroed)"
    assert "no wgmma.fence between" in v.message


def test_a_wgmma_needs_a_fence_even_with_nothing_written_before_it():
    """The kernel's start counts as a write of every register: PTX asks for a fence before the first wgmma."""
    nest = placed_nest(_ctx().fusion)
    _remove(nest, lambda n: isinstance(n, WgmmaFence) or (isinstance(n, tuple) and n[1].value == "init"))
    (v,) = _violations(nest)
    assert v.obligation == 1 and v.counterexample["register write"] == "the kernel's start"


@pytest.mark.parametrize("name", ["pipelined", "warp-specialized", "persistent"])
def test_without_the_wait_after_the_loop_the_epilogue_reads_a_batch_in_flight(name):
    """Triton PR 8964: a persistent epilogue read the accumulators before wgmma.wait_group."""
    nest = placed_nest(_ctx(SCHEDULES[name]).fusion)
    assert _remove(nest, lambda n: isinstance(n, WgmmaWait) and not n.commit) == 1
    found = {(v.obligation, v.statement) for v in _violations(nest)}
    assert (2, "T2's store (its accumulators read)") in found
    v = next(v for v in _violations(nest) if v.obligation == 2)
    assert v.counterexample["in flight"] == "T2's wgmma" and v.counterexample["commits since"] == 0
    assert "may still write it" in v.message


def test_the_next_tiles_zeroing_waits_for_the_last_batch_too():
    """Persistent: with the epilogue's read taken away, the next tile's init still writes the
    accumulators of a batch in flight, in a later iteration of the tile loop."""
    nest = placed_nest(_ctx(SCHEDULES["persistent"]).fusion)
    _remove(nest, lambda n: (isinstance(n, WgmmaWait) and not n.commit)
            or (isinstance(n, tuple) and n[1].value == "store"))
    _remove(nest, lambda n: getattr(n, "name", None) == "T3")  # the output, which reads the store
    found = {v.obligation: v for v in _violations(nest)}
    assert set(found) == {2, 3}  # and the tail release, after the loop, leaves the last batch running
    assert found[2].statement == "T2's init (its accumulators zeroed)"
    assert "a later iteration of the loop over" in found[2].counterexample["path"]
    assert found[3].counterexample["lag"] == 0


@pytest.mark.parametrize("name", ["mbarrier WAR", "warp-specialized"])
def test_a_release_without_its_wait_lets_the_batch_run_on(name):
    """nvFuser issue 3561: the arrive on the stage's empty mbarrier before the wgmma.wait_group."""
    nest = placed_nest(_ctx(SCHEDULES[name]).fusion)
    assert _remove(nest, lambda n: isinstance(n, WgmmaWait) and n.commit) == 1
    v = next(v for v in _violations(nest) if v.obligation == 3)
    assert v.counterexample["commits since"] == -1 and "not yet committed" in v.message
    assert "the first iteration of the loop over" in v.counterexample["path"]


def test_a_wait_leaving_two_batches_in_flight_releases_too_early():
    nest = placed_nest(_ctx(SCHEDULES["warp-specialized"]).fusion)
    for scope in _scopes(nest.tree):
        for n in scope:
            if isinstance(n, WgmmaWait) and n.pending == 1:
                n.pending = 2
    v = next(v for v in _violations(nest) if v.obligation == 3)
    assert v.counterexample["commits since"] == 1 and v.counterexample["lag"] == 1
    assert "a later iteration" in v.counterexample["path"] and "the consumers" in v.counterexample["path"]


def test_a_release_moved_before_the_wait_is_reported_with_its_role():
    nest = placed_nest(_ctx(SCHEDULES["warp-specialized"]).fusion)
    roles = nest.tree[0]
    assert isinstance(roles, WarpRoles)
    body = roles.loops[0][1].body
    release = next(n for n in body if isinstance(n, StageRelease))
    body.remove(release)
    body.insert(next(k for k, n in enumerate(body) if isinstance(n, WgmmaWait)), release)
    (v,) = _violations(nest)
    assert v.obligation == 3 and v.counterexample["path"].startswith("the consumers")


def test_the_rule_reports_with_the_obligation_and_the_path():
    ctx = _ctx(SCHEDULES["pipelined"])
    nest = placed_nest(ctx.fusion)
    _remove(nest, lambda n: isinstance(n, WgmmaFence))
    (d,) = list(wgmma_async_order(ctx))
    assert d.code == "WGMMA-ASYNC-ORDER" and d.location is not None
    assert any(note.startswith("obligation 1:") for note in d.notes)
    assert d.counterexample["wgmma"] == "T2's wgmma"


def test_no_wgmma_no_check():
    """An mma.sync kernel has no asynchronous MMA: nothing to order."""
    ctx = VerifyContext(mma_gemm("M", "N", "K").snapshot(), tp.get_target("sm_90a"))
    assert list(wgmma_async_order(ctx)) == []


def test_a_batch_whose_accumulators_are_read_in_its_own_loop_is_waited_for_at_once():
    """Found by benchmarks/fuzz.py (seed 17, case 2410: the M-tile loop made the circular loop by
    inline_most): the accumulators were stored in the loop that left the batch in flight. The
    placement waits for every batch (wgmma.wait_group 0) before a later statement of its scope
    touches its accumulators, and the rule finds nothing. (The propagation through broadcast
    axes and inline_most's stop at Unroll now place this schedule's store after the loop: the
    check is on every wait the placement leaves pending.)"""
    fusion = example_module("valid", "wgmma").hopper_matmul_m_tiles_in_a_loop()
    for t in fusion.tensors:  # propagation refuses to change inlined loops (nvFuser's validateDomain)
        t.inline_at(0)
    tp.propagate_transforms(fusion.tensor("T4"))
    tp.inline_most(fusion)
    ctx = VerifyContext(fusion.snapshot(), tp.get_target("sm_90a"))
    nest = placed_nest(ctx.fusion)
    waits = 0
    for scope in _scopes(nest.tree):
        for k, n in enumerate(scope):
            if isinstance(n, WgmmaWait) and n.commit:
                waits += 1
                batch = scope[k - 1]
                written = {a.writes for a in _accesses([batch], nest) if a.writes}
                later = [a for a in _accesses(scope[k + 1:], nest) if a.kind.name != "WGMMA"]
                assert n.pending == 0 or not any(a.writes in written or a.reads & written for a in later)
    assert waits and _violations(nest) == [] and list(wgmma_async_order(ctx)) == []


def _accesses(nodes, nest):
    """The accesses of the statements under `nodes`."""
    return [a for _, a, _ in statement_paths(list(nodes), nest.hazards)]


def _attention_ctx(stages: int):
    from tileproof.recipes.attention import AttentionTile, attention
    tile = AttentionTile(rows=256, keys=1024, key_tile=128, head_dim=128, value_dim=128)
    fusion = attention(tile, warpgroups=2, stages=stages, producer=True, in_place=True)
    return VerifyContext(fusion.snapshot(), tp.get_target("sm_90a"))


def _loop_waits(nest) -> list[int]:
    """The pending counts of the waits that follow a batch inside the circular loop, in order."""
    for scope in _scopes(nest.tree):
        waits = [n.pending for n in scope if isinstance(n, WgmmaWait) and n.commit]
        if len(waits) == 2:
            return waits
    return []


def test_attention_keeps_p_v_in_flight_across_the_next_q_k_wait_where_the_stages_allow():
    """The key-tile loop's second batch (P V, the RS wgmma) has its accumulators rescaled and its
    A registers rewritten in the next iteration, but only after the first batch's (Q K^T's)
    wait_group 0, which completes it too: with three stages (a release one iteration late) it
    stays in flight across the loop's back edge; with two, the release of its stage needs it done."""
    for stages, pending in ((3, [0, 1]), (2, [0, 0])):
        ctx = _attention_ctx(stages)
        nest = placed_nest(ctx.fusion)
        assert _loop_waits(nest) == pending
        assert _violations(nest) == [] and list(wgmma_async_order(ctx)) == []


def test_without_the_first_batchs_full_wait_the_rescale_touches_p_v_in_flight():
    ctx = _attention_ctx(3)
    nest = placed_nest(ctx.fusion)
    for scope in _scopes(nest.tree):
        waits = [n for n in scope if isinstance(n, WgmmaWait) and n.commit]
        if len(waits) == 2:
            waits[0].pending = 1  # Q K^T's wait now leaves one batch in flight: last iteration's P V
    found = _violations(nest)
    assert found and any(v.obligation == 2 for v in found)
