"""ParallelType.Unswitch (nvFuser's unswitch, device_lower/pass/unroll.cpp): a serial loop whose nest
the whole-tile pass (codegen/lower/whole_tile.py) puts twice under one block-uniform guard, without
the hole predicates the guard implies for every iteration, and as lowered otherwise. The verifier
treats the axis as a loop like Serial: every iteration runs in either version."""

from __future__ import annotations

import itertools

import pytest
import tileproof as tp
from support.unswitch_schedules import (
    unswitched_copy_chain,
    unswitched_exp,
    unswitched_row_sum,
)
from tileproof.codegen.ir import Compute, IndexNames, Loop, LoopKind, WholeTile, walk
from tileproof.codegen.lower import lower
from tileproof.execution.statements import CondKind
from tileproof.model.expr import evaluate

P = tp.ParallelType
SM90 = tp.get_target("sm_90a")


def _kernel(fusion):
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, report.codes
    return lower(fusion.snapshot(), SM90, report.decisions).kernel


def _splits(ir) -> list[WholeTile]:
    return [n for n in walk(ir.body) if isinstance(n, WholeTile)]


def _holes(nest) -> list:
    return [c for n in walk([nest]) if isinstance(n, Compute) for c in n.conds if c.kind is CondKind.HOLE]


def test_an_unswitch_loop_is_a_serial_loop_put_twice_under_one_guard():
    ir = _kernel(unswitched_exp(4))
    (split,) = _splits(ir)
    for version in (split.whole, split.lowered):
        assert isinstance(version, Loop) and version.kind is LoopKind.SERIAL and version.extent.value == 4
    assert _holes(split.lowered) and not _holes(split.whole)
    assert [str(c.rhs) for c in split.guard] == ["T0_0"]


@pytest.mark.parametrize("unroll", [None, 2])
def test_the_guard_implies_every_iterations_predicates(unroll):
    """At every block of M = 1 .. 1100 (2 and 4 blocks' ends included): where the guard holds, each
    dropped predicate holds at every thread and iteration of the nest, the Unswitch loop's too;
    the guard fails only at the last block when M is no multiple of the tile."""
    ir = _kernel(unswitched_exp(4, unroll))
    (split,) = _splits(ir)
    algebra = {cxx: name for name, cxx in ir.names.items()}
    loops = {n.var: n.extent.value for n in walk([split.lowered]) if isinstance(n, Loop) and n.kind is not LoopKind.THREAD}
    tile = 4 * 128 * (unroll or 1)
    for m in (1, 127, 512, 513, 1024, 1100):
        for block in range(-(-m // tile)):
            env = {"T0_0": m, algebra.get("blockIdx.x", "blockIdx.x"): block, "blockIdx.x": block}
            guarded = all(evaluate(g.lhs, env) < evaluate(g.rhs, env) for g in split.guard)
            assert guarded == ((block + 1) * tile <= m)
            if not guarded:
                continue
            for point in itertools.product(*(range(e) for e in loops.values()), range(0, 128, 31)):
                at = dict(env, **{algebra.get(v, v): i for v, i in zip(loops, point)}, **dict(zip(loops, point)))
                at["threadIdx.x"] = at[algebra.get("threadIdx.x", "threadIdx.x")] = point[-1]
                for c in _holes(split.lowered):
                    assert evaluate(c.lhs, at) < evaluate(c.rhs, at), (m, block, at, c)


def test_the_outermost_of_unswitch_and_unroll_is_split_once():
    """An Unroll loop inside the Unswitch loop is inside its guard: one WholeTile, not nested."""
    ir = _kernel(unswitched_exp(4, 2))
    (split,) = _splits(ir)
    kinds = [n.kind for n in walk([split.whole]) if isinstance(n, Loop) and n.kind is not LoopKind.THREAD]
    assert kinds == [LoopKind.SERIAL, LoopKind.UNROLL]


def test_an_unswitch_loop_of_symbolic_extent_keeps_its_predicates_and_its_unrolled_nest_is_split():
    """No constant bound on the Unswitch loop's index: it is left as lowered, and the Unroll nest
    inside is split on its own, the Unswitch index in its (block-uniform) tile origin."""
    ir = _kernel(unswitched_exp(unroll=4, symbolic=True))
    (split,) = _splits(ir)
    assert split.whole.kind is LoopKind.UNROLL
    (unswitch,) = [n for n in walk(ir.body) if isinstance(n, Loop) and n.kind is LoopKind.SERIAL]
    assert any(split is n for n in unswitch.body)
    named = {name: value for n in walk(ir.body) if isinstance(n, IndexNames) for name, value in n.names}
    reads = {w for g in split.guard for v in g.lhs.free_vars()  # through a name lower/invariants.py gave
             for w in (named[v].free_vars() if v in named else {v})}
    assert any(ir.names.get(v, v) == unswitch.var for v in reads)
    ir = _kernel(unswitched_exp(symbolic=True))
    assert not _splits(ir) and _holes(ir.body[0] if isinstance(ir.body[0], Loop) else ir.body)


def test_every_statement_inlined_into_the_unswitch_loop_is_in_both_versions():
    ir = _kernel(unswitched_copy_chain(2))
    (split,) = _splits(ir)
    outs = [[n.out.tensor for n in walk([v]) if isinstance(n, Compute)] for v in (split.whole, split.lowered)]
    assert outs == [["T1", "T2"], ["T1", "T2"]]
    assert len(_holes(split.lowered)) == 2 and not _holes(split.whole)


def test_a_reduction_loop_may_be_unswitched():
    """The accumulation runs in the unswitched serial loop; init before, the block's combine and store after."""
    ir = _kernel(unswitched_row_sum(4))
    (split,) = _splits(ir)
    assert [n.out.tensor for n in walk([split.whole]) if isinstance(n, Compute)] == ["tp_acc_T1"]
    source = tp.compile(unswitched_row_sum(4), "sm_90a").cuda_source
    assert source.count("// a whole tile: no hole predicates") == 1 and "tp_block_reduce" in source


def test_unswitch_is_inlined_like_any_loop_type():
    """A producer's Serial axis inlined into the consumer's Unswitch axis takes the loop's Unswitch
    (nvFuser's loop map, as for Unroll: model/loop_map.py); a different non-Serial type on it is
    INLINE-PARALLEL-MATCH."""
    fusion = unswitched_copy_chain(2)
    t1 = next(t for t in fusion.tensors if t.name == "T1")
    t1.axis(1).parallelize(P.Serial)
    assert tp.verify(fusion, "sm_90a").ok
    t1.axis(1).parallelize(P.Unroll)
    report = tp.verify(fusion, "sm_90a")
    assert "INLINE-PARALLEL-MATCH" in report.codes


def test_the_label_prints_the_parallel_type():
    fusion = unswitched_exp(4)
    out = fusion.outputs[0]
    assert out.axis(1).label() == "Unswitch{4}"
