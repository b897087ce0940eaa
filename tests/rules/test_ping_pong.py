"""WS-PING-PONG: the consumer warpgroups' turns (execution/ping_pong.py) are placed where the
schedule asks for them, generated as named barriers, and refused where they could hang."""

from __future__ import annotations

import re

import pytest

import tileproof as tp
from tileproof.execution import nest as nest_module
from tileproof.execution.ping_pong import TurnPass, TurnWait
from tileproof.recipes.attention import AttentionTile, attention
from tileproof.rule_examples import hopper_gemm_tile

P = tp.ParallelType


def _gemm(name: str, m: int, on=P.TIDy, ping_pong=True):
    fusion, sa, sb, d, out = hopper_gemm_tile(name, m, 64)
    for t in (sa, sb):
        t.circular_buffer(2, 0, tp.WarpSpecialized(on, ping_pong=ping_pong))
    return fusion


def _codes(fusion) -> list[str]:
    return [d.code for d in tp.verify(fusion).errors]


def _turn_lines(source: str) -> list[str]:
    return [line.strip() for line in source.splitlines() if re.search(r"bar\.(sync|arrive) %0", line)]


def test_two_consumer_warpgroups_take_turns_at_each_iteration_s_first_batch():
    fusion = _gemm("in_turn", 128)
    assert _codes(fusion) == []
    source = tp.compile(fusion, "sm_90a").cuda_source
    assert _turn_lines(source) == [
        'asm volatile("bar.sync %0, 256;" :: "r"(2U + threadIdx.y) : "memory");',
        'asm volatile("bar.arrive %0, 256;" :: "r"(2U + (threadIdx.y + 1U) % 2U) : "memory");']
    # warpgroup 0 goes first; warpgroup 1 passes on no turn after the loop's last iteration
    assert re.search(r"if \(threadIdx\.y != 0U \|\| \(i\d+\) != 0U\)", source)
    assert re.search(r"if \(threadIdx\.y != 1U \|\| \(i\d+\) \+ 1U != \(4U\)\)", source)
    # the turn is around the batch: sync, fence, the wgmma, arrive, then the commit and wait
    body = source[source.index("bar.sync %0"):]
    assert body.index("tp_wgmma_fence") < body.index("wgmma.mma_async") < body.index("bar.arrive %0") \
        < body.index("tp_wgmma_commit")


def test_without_ping_pong_no_turn_is_placed():
    source = tp.compile(_gemm("no_turns", 128, ping_pong=False), "sm_90a").cuda_source
    assert _turn_lines(source) == []


def test_attention_s_consumer_warpgroups_take_turns_at_q_k():
    tile = AttentionTile(rows=256, keys=300, key_tile=64, head_dim=64, value_dim=64, causal=True)
    fusion = attention(tile, stages=2, producer=True, warpgroups=2, ping_pong=True)
    assert _codes(fusion) == []
    source = tp.compile(fusion, "sm_90a").cuda_source
    assert len(_turn_lines(source)) == 2
    turn = source[source.index("bar.sync %0"):source.index("bar.arrive %0")]
    # Q K^T's batch (A in shared memory; a whole tile and a key tail's version), not P V's (A in registers)
    assert "wgmma.mma_async" in turn and "tp_da" in turn and "tp_a0" not in turn


def test_one_consumer_warpgroup_has_no_one_to_take_turns_with():
    report = tp.verify(_gemm("alone", 64))
    (d,) = [d for d in report.errors if d.code == "WS-PING-PONG"]
    assert "1 consumer index on TIDy" in d.message


def test_ping_pong_needs_a_producer_in_the_recipe():
    tile = AttentionTile(rows=256, keys=512, key_tile=128, head_dim=64, value_dim=64)
    with pytest.raises(tp.ScheduleError, match="ping_pong .* needs producer=True"):
        attention(tile, stages=2, warpgroups=2, ping_pong=True)
    with pytest.raises(tp.ScheduleError, match="ping_pong must be True or False"):
        tp.WarpSpecialized(P.TIDy, ping_pong=1)


def _mutated(monkeypatch, first, last):
    """insert_turns as placed, then the turns' skips changed (what a wrong placement would do)."""
    placed = nest_module.insert_turns

    def broken(tree, groups):
        placed(tree, groups)
        from tileproof.codegen.ir import walk
        for n in walk(tree):
            if isinstance(n, TurnWait):
                n.first = first
            if isinstance(n, TurnPass):
                n.last = last

    monkeypatch.setattr(nest_module, "insert_turns", broken)


def test_a_first_warpgroup_that_waits_in_iteration_0_is_refused_with_the_hang(monkeypatch):
    _mutated(monkeypatch, None, 1)
    report = tp.verify(_gemm("waits_first", 128))
    (d,) = [d for d in report.errors if d.code == "WS-PING-PONG"]
    assert d.counterexample["T"] == 1 and d.counterexample["warpgroup"] == 0
    assert "warpgroup 0 syncs on its turn barrier 1 times but warpgroup 1 arrives there 0 times: a sync waits " \
           "forever" in d.message


def test_a_last_arrival_left_over_is_refused(monkeypatch):
    _mutated(monkeypatch, 0, None)
    (d,) = [d for d in tp.verify(_gemm("left_over", 128)).errors if d.code == "WS-PING-PONG"]
    assert d.counterexample["warpgroup"] == 0
    assert "an arrival is left over for the next run of the loop" in d.message


def test_turns_that_skip_nothing_are_balanced_but_deadlock(monkeypatch):
    _mutated(monkeypatch, None, None)
    (d,) = [d for d in tp.verify(_gemm("deadlock", 128)).errors if d.code == "WS-PING-PONG"]
    assert "waits, around the ring of 2 warpgroups, for its own arrival of the same iteration" in d.message
    assert "k" in d.counterexample


def test_ping_pong_is_part_of_the_schedule_s_fingerprint():
    """A kernel cached without turns is never reused for a schedule with them (model/fingerprint.py)."""
    from tileproof.model.fingerprint import fingerprint

    with_turns, without = (fingerprint(_gemm("printed", 128, ping_pong=p), "sm_90a") for p in (True, False))
    assert with_turns != without


def _overlapped_ping_pong():
    tile = AttentionTile(rows=256, keys=700, key_tile=128, head_dim=128, value_dim=128, causal=True)
    return attention(tile, stages=2, producer=True, warpgroups=2, registers=(24, 240), in_place=True,
                     overlap=True, ping_pong=True)


def test_with_the_overlap_a_turn_holds_the_next_q_k_the_rescale_and_p_v():
    """FlashAttention-3's order: the turn from tile i + 1's Q K^T (rotated) to tile i's P V, its
    stage waits before it; the turn's barriers run in iteration i, outside the rotated scopes."""
    fusion = _overlapped_ping_pong()
    assert _codes(fusion) == []
    source = tp.compile(fusion, "sm_90a").cuda_source
    sync = source.index("bar.sync %0")  # the loop's: its first iteration's Q K^T takes no turn
    turn = source[sync:source.index("bar.arrive %0")]
    s, rescale, pv = turn.index("tp_da"), turn.index("(rescale)"), turn.index("tp_a0")
    assert s < rescale < pv and turn.count("tp_wgmma_commit") == 2
    assert "tp_mbar_wait" not in turn and "tp_wgmma_wait" not in turn and "bar.sync 1" not in turn
    before = source[source.rindex("rotated: the next iteration", 0, sync):sync]
    assert before.count("tp_mbar_wait") == 2  # K of tile i + 1 (rotated) and V of tile i
    # the TurnWait reads the loop's counter: the rotated scope that redeclares it is closed before it
    scope = before[before.index("const unsigned tp_rotated"):before.rindex("if (")]
    assert scope.count("}") == scope.count("{") + 1  # its own "{" precedes the counter


def test_a_turn_holding_a_wait_is_refused(monkeypatch):
    """What a wrong placement would do: the stage wait of P V's tile inside the turn."""
    from tileproof.execution.barriers import TmaWait

    placed = nest_module.insert_turns

    def broken(tree, groups):
        placed(tree, groups)
        from tileproof.codegen.ir import walk
        for n in walk(tree):
            body = getattr(n, "body", [])
            if any(isinstance(c, TurnWait) for c in body):
                k = next(k for k, c in enumerate(body) if isinstance(c, TurnWait))
                wait = next(c for c in body[:k] if isinstance(c, TmaWait))
                body.remove(wait)
                body.insert(k, wait)  # after the TurnWait

    monkeypatch.setattr(nest_module, "insert_turns", broken)
    (d,) = [d for d in tp.verify(_overlapped_ping_pong()).errors if d.code == "WS-PING-PONG"]
    assert "turn holds TmaWait between its bar.sync and its bar.arrive" in d.message
