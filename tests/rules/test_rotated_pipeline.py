"""The proofs of a rotated warp-specialized loop (attention(overlap=True): tile i + 1's Q K^T issued
before tile i's P V, execution/wgmma_order.py): the placement verifies, and each rule that proves it
refutes the placement changed the way a hand-written kernel goes wrong (a release before the
batch that reads the stage is waited for, a wait that leaves too much in flight, a stage released
one iteration late, which a wait one iteration ahead then waits on forever, the stage wait after
the read), each with its counterexample."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.execution import nest as nest_module
from tileproof.execution.barriers import TmaWait, WgmmaWait
from tileproof.execution.rotation import Rotated
from tileproof.execution.warp_roles import StageRelease
from tileproof.recipes.attention import AttentionTile, attention

RULES = ["WGMMA-ASYNC-ORDER", "PIPELINE-RAW", "PIPELINE-WAR", "PIPELINE-PHASE"]


def _overlapped():
    tile = AttentionTile(rows=128, keys=512, key_tile=128, head_dim=64, value_dim=64)
    return attention(tile, stages=2, producer=True, warpgroups=2, in_place=True, overlap=True)


def _walk(nodes):
    for n in nodes:
        yield n
        yield from _walk(getattr(n, "body", []))


def _rotated_loop(tree):
    return next(n for n in _walk(tree) if any(isinstance(c, Rotated) and not c.first for c in getattr(n, "body", [])))


def _changed(monkeypatch, change):
    place = nest_module.place_syncs

    def placed(tree, on_chip, hazards, **rotations):
        place(tree, on_chip, hazards, **rotations)
        change(_rotated_loop(tree).body)

    monkeypatch.setattr(nest_module, "place_syncs", placed)


def test_the_rotated_placement_verifies():
    fusion = _overlapped()
    assert tp.verify(fusion, "sm_90a", rules=RULES).codes == []
    body = _rotated_loop(nest_module.placed_nest(fusion.snapshot()).tree).body
    waits = [n.pending for n in body if isinstance(n, WgmmaWait)]
    assert waits == [1, 0] and sum(isinstance(n, Rotated) for n in body) == 3
    # K, read only by the rotated Q K^T (the next tile's), is released at the top of each iteration for that
    # iteration's tile, V after its P V is waited for: each with empty mbarriers of its own
    releases = [(k, n.barrier, n.lag) for k, n in enumerate(body) if isinstance(n, StageRelease)]
    assert releases == [(0, "tp_empty_T18", 0), (len(body) - 2, "tp_empty_T19", 0)], releases


def test_k_released_before_its_rotated_read_is_refuted(monkeypatch):
    """K's release moved into the rotated statements ahead of the next tile's Q K^T: the stage of
    that tile is given back before the product reads it."""
    def before_read(body):
        release = body.pop(0)
        rotated = next(n for n in body if isinstance(n, Rotated))
        rotated.body.insert(0, release)
    _changed(monkeypatch, before_read)
    report = tp.verify(_overlapped(), "sm_90a", rules=["PIPELINE-WAR"])
    assert report.codes == ["PIPELINE-WAR"] and "T18" in report.errors[0].message
    out = report.errors[0].counterexample  # datum 0 (read before the loop) is never released; a later one too soon
    assert (out["read iteration"] == 0 and out["released"] == 0) or out["reads done at"] > out["release position"], out


def test_a_release_before_p_v_is_waited_for_is_refuted(monkeypatch):
    def early(body):
        release = [n for n in body if isinstance(n, StageRelease)][-1]  # V's: K's is released at the top
        body.remove(release)
        body.insert(next(k for k, n in enumerate(body) if isinstance(n, WgmmaWait)), release)  # before wait<1>
    _changed(monkeypatch, early)
    report = tp.verify(_overlapped(), "sm_90a", rules=RULES)
    assert set(report.codes) == {"PIPELINE-WAR", "WGMMA-ASYNC-ORDER"}
    war = next(d for d in report.errors if d.code == "PIPELINE-WAR")
    assert "T19" in war.message and war.counterexample["reads done at"] > war.counterexample["release position"]


def test_a_wait_leaving_the_next_tiles_scores_in_flight_is_refuted(monkeypatch):
    def deeper(body):
        k = next(k for k, n in enumerate(body) if isinstance(n, WgmmaWait) and n.pending == 1)
        body[k] = WgmmaWait(2, body[k].why, commit=False)
    _changed(monkeypatch, deeper)
    report = tp.verify(_overlapped(), "sm_90a", rules=RULES)
    assert "WGMMA-ASYNC-ORDER" in report.codes
    d = next(d for d in report.errors if d.code == "WGMMA-ASYNC-ORDER")
    assert "obligation 2" in " ".join(d.notes) and "may still" in d.message


def test_a_stage_released_one_iteration_late_deadlocks_the_wait_ahead(monkeypatch):
    def late(body):
        k = [k for k, n in enumerate(body) if isinstance(n, StageRelease)][-1]
        body[k] = StageRelease(body[k].barrier, body[k].stages, 1, body[k].why)
    _changed(monkeypatch, late)
    report = tp.verify(_overlapped(), "sm_90a", rules=["PIPELINE-PHASE"])
    assert report.codes == ["PIPELINE-PHASE"]
    assert report.errors[0].counterexample["phase order"] == 0


def test_a_stage_wait_after_the_rotated_read_is_refuted(monkeypatch):
    def after(body):
        rotated = next(n for n in body if isinstance(n, Rotated))
        wait = next(n for n in rotated.body if isinstance(n, TmaWait))
        rotated.body.remove(wait)
        rotated.body.append(wait)
    _changed(monkeypatch, after)
    report = tp.verify(_overlapped(), "sm_90a", rules=["PIPELINE-RAW"])
    assert report.codes == ["PIPELINE-RAW"] and "T" in report.errors[0].message
    assert report.errors[0].counterexample


def test_k_released_in_the_rotated_statements_before_and_in_the_loop_is_refuted(monkeypatch):
    """The same release also in the rotated statements' copy before the loop (every datum released
    once, each before the Q K^T that reads it): the counterexample is a datum read after its release."""
    place = nest_module.place_syncs

    def placed(tree, on_chip, hazards, **rotations):
        place(tree, on_chip, hazards, **rotations)
        loop = _rotated_loop(tree)
        release = loop.body.pop(0)
        next(n for n in loop.body if isinstance(n, Rotated)).body.insert(0, release)
        first = next(n for n in _walk(tree) if isinstance(n, Rotated) and n.first and n.loop_key == loop.key)
        first.body.insert(0, StageRelease(release.barrier, release.stages, release.lag, release.why))

    monkeypatch.setattr(nest_module, "place_syncs", placed)
    report = tp.verify(_overlapped(), "sm_90a", rules=["PIPELINE-WAR"])
    assert report.codes == ["PIPELINE-WAR"] and "T18" in report.errors[0].message
    out = report.errors[0].counterexample
    assert out["released"] == 1 and out["reads done at"] > out["release position"], out


@pytest.mark.parametrize("options", [dict(producer=False), dict(in_place=False)], ids=str)
def test_overlap_needs_a_producer_and_o_in_place(options):
    tile = AttentionTile(rows=128, keys=512, key_tile=128)
    kw = dict(stages=2, producer=True, warpgroups=2, in_place=True, overlap=True)
    kw.update(options)
    with pytest.raises(tp.ScheduleError, match="overlap rotates the loop"):
        attention(tile, **kw)
