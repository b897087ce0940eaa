"""A producer inlined past its consumer's own broadcast (model/loop_alignment.py): a register cache
a2[M, K] of out[M, N, K] = broadcast(a2)[M, 1, K] + b meets the broadcast's [M, b, K/32, 32] at
positions 0, 2, 3 (nvFuser's getMatchedLeafPosWithoutReplayCasP passes over the consumer's b),
is inlined at 3, and in the frozen snapshot gets a broadcast loop ID at 1 so that it runs inside
the TIDy loop the broadcast shares with out, as nvFuser's loop nest places it."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.execution.loops import loop_groups
from tileproof.model.loop_alignment import align_inlined_loops, consumer_positions
from tileproof.model.loop_map import propagate_parallel_types
from tileproof.model.mapping import IdMap

from support.broadcast_promotion import cache_past_broadcast


def test_the_cache_meets_the_broadcast_past_its_broadcast_axis():
    fusion, a2, ab, out = cache_past_broadcast((5, 7, 100))
    assert consumer_positions(IdMap(fusion), a2, ab, 3) == [0, 2, 3]
    assert (a2.compute_at, ab.compute_at, len(a2.loop)) == (3, 4, 3)  # the user's schedule keeps its loops


def test_the_snapshot_gives_the_cache_the_broadcast_loop_it_runs_in():
    fusion, *tensors = cache_past_broadcast((5, 7, 100))
    snap = fusion.snapshot()
    propagate_parallel_types(snap)
    a2, ab, out = (snap.tensor(t.name) for t in tensors)
    assert a2.compute_at == 4 and a2.loop[1].is_broadcast and a2.loop[1].static_extent == 1
    groups = loop_groups(snap)
    assert not groups.unmapped and not groups.mismatched
    assert all(groups.of[(a2.name, k)] is groups.of[(out.name, k)] for k in range(4))
    assert groups.of[(out.name, 1)].parallel is tp.ParallelType.TIDy
    align_inlined_loops(snap)  # once per snapshot
    assert len(a2.loop) == 4


@pytest.mark.parametrize("shape", [(5, 7, 100), None])
def test_verified_and_emitted_inside_the_shared_loops(shape):
    fusion, *_ = cache_past_broadcast(shape)
    report = tp.verify(fusion)
    assert report.ok, report.codes
    source = tp.compile(fusion).cuda_source
    body = source[source.index("for ("):]
    assert body.index("T2 = set(T0)") < body.index("T3 = broadcast(T2)") < body.index("T4 = add(T3, T1)")
    assert "alignas(16) float T2[1" in source  # one register: every loop of the cache is shared


def test_consumers_that_place_a_producer_differently_stop_its_inlining():
    """a2 read by its broadcast [M, b, K] and by a plain copy [M, K]: the two consumers put a2's K at
    different positions, so it is inlined left of it only."""
    with tp.Fusion("two_places") as fusion:
        a = tp.make_contig_concrete_tensor([4, 64])
        b = tp.make_contig_concrete_tensor([4, 3, 64])
        fusion.add_input(a)
        fusion.add_input(b)
        a2 = tp.set(a)
        out = tp.add(tp.broadcast(a2, [False, True, False]), b)
        copy = tp.set(a2)
        fusion.add_output(out)
        fusion.add_output(copy)
    tp.inline_most(fusion)
    assert a2.compute_at == 1
    with pytest.raises(tp.ScheduleError, match="different positions"):
        a2.inline_at(2)
