"""Loop promotion of a broadcast merged into a pointwise tensor's loops (execution/promotion.py):
out[I0, I1] = broadcast(a[I1]) + b merged and split into [BIDx, TIDx]; a's cache [I1/128, 128] and
its broadcast [(1*I1)/128, 128] are inlined into out's loops [(I0*I1)/128, 128] (the cache through
the merge its consumer makes with the broadcast: nvFuser's BestEffortReplay forwarding). Their
loops run over out's extents and a's index ignores the broadcast part (flat % I1). A loop of the
cache past the shared ones that splits I1 too is replayed on out's merge, and so is an ID such
loops split further; every accepted split of it runs right on the CPU simulator."""

from __future__ import annotations

import numpy as np
import pytest

import tileproof as tp
from tileproof.execution.indexing import indices_from_loop
from tileproof.execution.loops import loop_groups
from tileproof.execution.promotion import loop_extents, promoted_positions, promotion
from tileproof.model.expr import evaluate, var

from support.broadcast_promotion import broadcast_add
from support.reduction_sim import run_kernel

P = tp.ParallelType


def test_the_cache_and_the_broadcast_share_the_consumers_loops_and_extents():
    fusion, a2, ab, out = broadcast_add((6, 300))
    assert a2.compute_at == ab.compute_at == 2
    groups = loop_groups(fusion)
    assert not groups.unmapped and not groups.mismatched
    for k in range(2):
        g = groups.of[(out.name, k)]
        assert groups.of[(a2.name, k)] is g and groups.of[(ab.name, k)] is g
        assert g.extent == out.loop[k].extent_expr
    assert promoted_positions(a2) == promoted_positions(ab) == [0, 1]  # the inner split of out's merge too
    assert promotion(a2).consumer is out and promotion(ab).consumer is out and promotion(out) is None
    assert [evaluate(e, {}) for e in loop_extents(a2)] == [15, 128] != [3, 128]


@pytest.mark.parametrize("name", ["a2", "ab"])
def test_the_index_of_a_ignores_the_broadcast_part(name):
    fusion, a2, ab, out = broadcast_add((6, 300))
    tv = {"a2": a2, "ab": ab}[name]
    i1 = tv.logical[-1]
    for block in range(15):
        for thread in (0, 5, 127):
            env = {tv.loop[0].uid: var("bx"), tv.loop[1].uid: var("tx")}
            index = indices_from_loop(tv, env)[i1.uid]
            assert evaluate(index, {"bx": block, "tx": thread}) == (block * 128 + thread) % 300


@pytest.mark.parametrize("shape", [(6, 300), None])
def test_verified_and_emitted_with_the_consumers_predicate(shape):
    fusion, *_ = broadcast_add(shape)
    report = tp.verify(fusion)
    assert report.ok, report.codes
    source = tp.compile(fusion).cuda_source
    if shape is not None:
        assert "T0[(((blockIdx.x * 128U) + threadIdx.x) % 300U)]" in source
        assert source.count("((blockIdx.x * 128U) + threadIdx.x) < 1800U") == 3


def _vector_broadcast_add(split_again: bool = False, factors: tuple = (None, None)):
    """out[8, 256] = broadcast(a[256]) + b merged and split [(8*256)/4/32 BIDx, 32 TIDx, 4], a's cache and
    its broadcast inlined at 2: their inner loop of 4 is past the shared ones (`split_again`: split
    once more by 2 in both, so that their loops replay no loop of out's; `factors`: the cache's and the
    broadcast's split of it, None for none)."""
    with tp.Fusion("vector_broadcast_add") as fusion:
        a = tp.make_contig_concrete_tensor([256])
        b = tp.make_contig_concrete_tensor([8, 256])
        fusion.add_input(a)
        fusion.add_input(b)
        a2 = tp.set(a)
        ab = tp.broadcast(a2, [True, False])
        out = tp.add(ab, b)
        fusion.add_output(out)
    out.merge(0).split(0, 4).split(0, 32)
    tp.propagate_transforms(out)
    for tv in (a2, ab, out):
        tv.axis(0).parallelize(P.BIDx)
        tv.axis(1).parallelize(P.TIDx)
    for tv, factor in zip((a2, ab), (2, 2) if split_again else factors):
        if factor:
            tv.split(2, factor)
    a2.inline_at(2)
    ab.inline_at(2)
    return fusion, a2, ab, out


def test_a_loop_past_the_shared_ones_is_replayed_on_the_consumers_merge():
    """a's cache split [I1/4/32, 32, 4] shares out's two outer loops only; its loop of 4 replays
    out's (split(I1, 4) on the promoted merge(I0, I1), as nvFuser's IdModel does), so its I1 is
    ((blockIdx.x * 32 + threadIdx.x) * 4 + v) % 256, and the kernel adds the right a to each row."""
    fusion, a2, ab, out = _vector_broadcast_add()
    report = tp.verify(fusion)
    assert report.ok, report.codes
    assert promotion(a2).replays == ((a2.loop[2].uid, 2),) and promotion(ab).replays == ((ab.loop[2].uid, 2),)
    env = {a2.loop[0].uid: var("bx"), a2.loop[1].uid: var("tx"), a2.loop[2].uid: var("v")}
    index = indices_from_loop(a2, env)[a2.logical[0].uid]
    for bx, tx, v in ((0, 0, 0), (0, 31, 3), (1, 5, 2), (15, 31, 1)):
        assert evaluate(index, {"bx": bx, "tx": tx, "v": v}) == ((bx * 32 + tx) * 4 + v) % 256
    kernel = tp.compile(fusion)
    x, y = np.arange(256, dtype=np.float32), np.arange(8 * 256, dtype=np.float32).reshape(8, 256) * 1000
    (got,) = run_kernel(kernel.ir, kernel.fusion, [x, y])
    np.testing.assert_array_equal(got.astype(np.float32), x[None, :] + y)


def test_loops_that_split_the_replayed_id_again_are_replayed_through_it():
    """a's cache and its broadcast split [I1/4/32, 32, 2, 2]: their inner loops replay no loop of out's,
    but the ID they split (the 4) replays out's loop of 4, indexed 2 o + v from them (nvFuser replays the
    cache's own transforms past the promoted IDs): accepted, and each row gets the right a."""
    fusion, a2, ab, out = _vector_broadcast_add(split_again=True)
    report = tp.verify(fusion)
    assert report.ok, report.codes
    split = next(t for t in a2.history if a2.loop[2] in t.outputs)
    assert promotion(a2).replays == ((split.in_.uid, 2),)
    kernel = tp.compile(fusion)
    x, y = np.arange(256, dtype=np.float32), np.arange(8 * 256, dtype=np.float32).reshape(8, 256) * 1000
    (got,) = run_kernel(kernel.ir, kernel.fusion, [x, y])
    np.testing.assert_array_equal(got.astype(np.float32), x[None, :] + y)


@pytest.mark.parametrize("cache_factor, broadcast_factor", [(f1, f2) for f1 in (None, 2, 3, 4, 5) for f2 in (None, 3)])
def test_an_accepted_split_past_the_shared_loops_runs_right(cache_factor, broadcast_factor):
    """The cache's and the broadcast's loop of 4 split again by drawn factors (indivisible ones too: holes
    past the replayed ID): wherever verify accepts, the kernel adds the right a to each row."""
    fusion, a2, ab, out = _vector_broadcast_add(factors=(cache_factor, broadcast_factor))
    if not tp.verify(fusion).ok:
        return
    kernel = tp.compile(fusion)
    x, y = np.arange(256, dtype=np.float32), np.arange(8 * 256, dtype=np.float32).reshape(8, 256) * 1000
    (got,) = run_kernel(kernel.ir, kernel.fusion, [x, y])
    np.testing.assert_array_equal(got.astype(np.float32), x[None, :] + y)