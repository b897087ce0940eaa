"""Loops over broadcast axes alone run once, with index 0 (model/loop_map.py runs_once,
execution/promotion.py broadcast_loops: nvFuser's kir::ForLoop::isTrivial): the execution model
gives them extent 1 and index 0, the placed nest holds them as loops of one iteration, and the
kernel issues a TMA tile inside them once. A loop a concrete member shares keeps its extent."""

from __future__ import annotations

import tileproof as tp
from tileproof.execution.loops import loop_groups
from tileproof.execution.promotion import broadcast_loops, loop_extents
from tileproof.execution.statements import tensor_execution
from tileproof.execution.indexing import block_dims
from tileproof.model.expr import const
from tileproof.model.iterdomain import IterDomain, IterType
from tileproof.model.loop_map import runs_once

from support.broadcast_loops import tma_broadcast_loops

P = tp.ParallelType


def _broadcast(extent: int, parallel=P.Serial) -> IterDomain:
    i = IterDomain(const(extent), number=0, iter_type=IterType.Broadcast)
    i.parallelize(parallel)
    return i


def test_a_loop_of_broadcasts_alone_runs_once_and_a_concrete_or_launched_member_keeps_it():
    assert runs_once([_broadcast(4)])
    assert runs_once([_broadcast(4), _broadcast(4, P.Unroll)])
    assert not runs_once([_broadcast(4), IterDomain(const(4), number=1)])  # a concrete member iterates it
    assert not runs_once([_broadcast(4, P.TIDx)])  # a thread index, not a loop
    assert not runs_once([])


def test_the_tma_tiles_own_broadcast_loops_run_once_with_index_0():
    fusion, t1, t2 = tma_broadcast_loops(split=4)
    snap = fusion.snapshot()
    t1s = snap.tensor(t1.name)
    once = broadcast_loops(snap)
    assert {k for name, k in once if name == t1.name} == {3, 4}  # b{1} and b{4}, right of compute-at 2
    assert (t2.name, 3) in once  # out's own unit broadcast loop
    assert [str(e) for e in loop_extents(t1s)][3:5] == ["1", "1"]
    groups = loop_groups(snap)
    assert groups.of[(t1.name, 4)].extent == const(1)
    ex = tensor_execution(t1s, block_dims(snap))
    assert ex.env[t1s.loop[4].uid] == const(0)


def test_the_kernel_issues_the_tile_once_on_an_mbarrier_counting_one_copy():
    fusion, t1, _ = tma_broadcast_loops(split=4)
    assert tp.verify(fusion, "sm_90a").ok
    kernel = tp.compile(fusion, "sm_90a").cuda_source.split('extern "C"')[1]
    assert kernel.count("tp_bulk_load_2d(") == 1 and f"tp_mbar_init(&tp_bar_{t1.name}, 1u)" in kernel
    assert f"{t1.name} axis 4 (extent 1)" in kernel  # the loop over b{4}: one iteration, index 0
    assert "for (" not in kernel.split(f"// {t1.name} = TMA")[0]  # no loop around the issue
