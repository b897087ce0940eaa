"""Warp-specialized circular loops nested in one another (execution/warp_roles.py split_roles):
attention(q_stages=2) circular-buffers Q over a persistent block's row-tile loop and K and V over
the key-tile loop inside it, all loaded by one producer warpgroup. The producer runs one nest
(Q's loads, then the key loop's, each row tile), the consumers release Q after the key loop's
last wgmma wait; PIPELINE-RAW and PIPELINE-WAR prove it and refute the mutations that break it;
WS-ROLES still refuses circular loops of which neither holds the other."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.codegen.ir import walk
from tileproof.execution.barriers import Async, TmaWait, WgmmaWait, statement_paths
from tileproof.execution.nest import placed_nest
from tileproof.execution.pipeline import specialized_timeline
from tileproof.execution.warp_roles import StageDrain, StageEmptyWait, StageRelease, WarpRoles
from tileproof.recipes.attention import AttentionTile, attention
from tileproof.verifier.analysis.pipeline import prove_complete, prove_free
from tileproof.verifier.solver import Verdict

from support.examples import example_module

P = tp.ParallelType
TILE = AttentionTile(rows=1000, keys=1000, key_tile=128, head_dim=64, value_dim=64, batch=2, group=2)
OPTIONS = dict(warpgroups=2, producer=True, registers=(24, 240), stages=2, in_place=True, persistent=8)


def _nest(**kw):
    return placed_nest(attention(TILE, **{**OPTIONS, "q_stages": 2, **kw}))


def _timelines(nest) -> dict:
    """{(loaded tensor, reader path index): Timeline} of every TMA load and its readers."""
    stmts = statement_paths(nest.tree, nest.hazards)
    out = {}
    for _, wa, wp in stmts:
        if wa.kind is Async.TMA_LOAD:
            for k, (_, ra, rp) in enumerate(stmts):
                if wa.writes in ra.reads:
                    tl = specialized_timeline(wa.writes, "reader", wp, rp, nest.hazards, wa.barrier)
                    if tl is not None:
                        out[(wa.writes, k)] = tl
    return out


def _q(nest):
    """Q's (producer loop, consumer loop, empty mbarriers, lag), then K's and V's."""
    roles = nest.tree[0]
    assert isinstance(roles, WarpRoles) and len(roles.loops) == 2
    (inner,) = roles.innermost
    (outer,) = [p for p in roles.loops if p is not inner]
    return outer, inner


def _q_name(nest) -> str:
    """Q's tile: the tensor the outer producer loop loads itself (outside the key loop)."""
    (made_q, _, _, _), (made_kv, _, _, _) = _q(nest)
    own = [c for c in made_q.body if not any(n is made_kv for n in walk([c]))]
    return next(n.name for n in walk(own) if isinstance(n, tp.TensorView))


def test_the_producer_loads_q_then_the_key_tiles_in_one_nest():
    nest = _nest()
    roles = nest.tree[0]
    (made_q, loop_q, empty_q, lag_q), (made_kv, loop_kv, empty_kv, _) = _q(nest)
    assert any(n is made_kv for n in walk([made_q.body[-1]]))  # inside the row-tile loop, after Q's loads
    assert isinstance(made_q.body[0], StageEmptyWait) and made_q.body[0].barrier == empty_q
    producer = roles.body[0].body
    assert len(producer) == 3 and [type(n).__name__ for n in producer[1:]] == ["StageDrain", "StageDrain"]
    assert {d.barrier for d in producer[1:]} == {empty_q, empty_kv}
    assert lag_q == 0 and isinstance(loop_q.body[0], TmaWait) and isinstance(loop_q.body[-1], StageRelease)
    assert any(n is loop_kv for n in walk(loop_q.body))


def test_q_is_released_after_the_key_loops_last_wgmma_wait_and_proved():
    nest = _nest()
    timelines = _timelines(nest)
    assert len({t for t, _ in timelines}) == 3  # Q, K and V
    for tl in timelines.values():
        assert prove_complete(tl).status is Verdict.PROVED and prove_free(tl).status is Verdict.PROVED
    q = [tl.describe() for (t, _), tl in timelines.items() if t == _q_name(nest)]
    assert q and all(d.endswith("[wait, read, wgmma wait, release of iteration i - 0]; then []") for d in q), q


def test_releasing_q_before_the_key_loop_is_refuted():
    nest = _nest()
    (_, loop_q, empty_q, _), _ = _q(nest)
    release = loop_q.body.pop()
    loop_q.body.insert(1, release)  # right after Q's full wait: before the key tiles' products read it
    outcomes = [prove_free(tl) for (t, _), tl in _timelines(nest).items() if t == _q_name(nest)]
    assert outcomes and all(o.status is Verdict.COUNTEREXAMPLE for o in outcomes)
    assert all(o.values["release position"] < o.values["reads done at"] for o in outcomes)


def test_a_key_loop_that_leaves_its_batch_in_flight_is_refuted():
    """Without a wgmma.wait_group 0 in the key loop's iterations or after it, the last Q K^T may still
    read Q's stage when it is released."""
    nest = _nest()
    consumer = nest.tree[0].body[1]
    for n in walk(consumer.body):
        for scope in (getattr(n, "body", None),):
            if isinstance(scope, list):
                scope[:] = [c for c in scope if not (isinstance(c, WgmmaWait) and c.pending == 0)]
    name = _q_name(nest)
    outcomes = [prove_free(tl) for (t, _), tl in _timelines(nest).items() if t == name]
    assert outcomes and all(o.status is Verdict.COUNTEREXAMPLE and o.values["reads done at"] < 0 for o in outcomes)


def test_a_producer_that_loads_q_without_waiting_for_its_release_is_refuted():
    nest = _nest()
    (made_q, _, empty_q, _), _ = _q(nest)
    made_q.body[:] = [n for n in made_q.body if not (isinstance(n, StageEmptyWait) and n.barrier == empty_q)]
    name = _q_name(nest)
    outcomes = [prove_free(tl) for (t, _), tl in _timelines(nest).items() if t == name]
    assert outcomes and all(o.values["refill waits for the release"] == 0 for o in outcomes)


def test_the_kernel_declares_each_loops_empty_mbarriers_with_its_own_stages():
    kernel = tp.compile(attention(TILE, **{**OPTIONS, "stages": 3, "q_stages": 2}), "sm_90a")
    src = kernel.cuda_source
    assert "tp_empty_T17[2];  // TMA into T17 (one per stage)" in src
    assert "tp_empty_T18[3];  // TMA into T18, T19 (one per stage)" in src


def test_circular_loops_side_by_side_are_refused_and_nested_ones_accepted():
    report = tp.verify(example_module("invalid", "tma_rules").warp_specialized_loops_side_by_side())
    roles = [d for d in report.errors if d.code == "WS-ROLES"]
    assert roles and "none inside another" in roles[0].message
    assert tp.verify(attention(TILE, **{**OPTIONS, "q_stages": 2})).ok


def test_q_stages_needs_a_producer_and_a_persistent_grid():
    for bad, message in (({"persistent": None}, "persistent grid"), ({"q_stages": 0}, "q_stages must be"),
                         ({"q_stages": True}, "q_stages must be")):
        with pytest.raises(tp.ScheduleError, match=message):
            attention(TILE, **{**OPTIONS, "q_stages": 2, **bad})
