"""tcgen05.mma (Blackwell1CTA_128_N_16, sm_100a): the MMA rules' target, warp and operand
conditions; TCGEN05-SMEM-LAYOUT (the operands' descriptors), TCGEN05-ACCUMULATOR (D's cells in
tensor memory) and TCGEN05-ASYNC-ORDER (the commit to an mbarrier and every reader's wait and
fence, on the placed nest: no schedule can misplace them, so the tests remove or move one and
check the path reported).

The bundled examples' verdicts (examples/valid/tcgen05.py, examples/invalid/tcgen05.py: their
exact codes and message fragments) are checked by tests/verifier/test_seed_examples.py; here the
counterexamples evaluated, a failing and a passing schedule per rule, and the placed nest.
"""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.execution.barriers import Sync, Tcgen05Commit, Tcgen05Wait
from tileproof.execution.indexing import block_dims
from tileproof.execution.nest import placed_nest
from tileproof.execution.tcgen05 import COL, ROW, accumulator_cells
from tileproof.model.expr import evaluate
from tileproof.rule_examples import tcgen05_tile
from tileproof.verifier.analysis.tcgen05_order import check_order
from tileproof.verifier.context import VerifyContext
from tileproof.verifier.rules.races import unordered
from tileproof.verifier.rules.tcgen05 import tcgen05_async_order

from nvfuser.test_nvfuser_mma import ss_tile
from support.examples import example_module

P = tp.ParallelType
SW = tp.MmaInputSmemSwizzle
VALID = example_module("valid", "tcgen05")


def _codes(fusion, target="sm_100a"):
    return tp.verify(fusion, target).codes


def _errors(fusion, code, target="sm_100a"):
    return [d for d in tp.verify(fusion, target).errors if d.code == code]


# -- MMA-TARGET, MMA-WARP-COLLECTIVE, MMA-OPERAND-LAYOUT, LOWERING-SUPPORTED ------------------------


def test_a_blackwell_macro_verifies_on_sm100a_only():
    assert _codes(tcgen05_tile("tile")[0]) == []
    (d,) = _errors(tcgen05_tile("tile")[0], "MMA-TARGET", "sm_90a")
    assert "is a tcgen05.mma, which exists on sm_100a only" in d.message and "sm_90a has none" in d.message
    assert "sm_100a" in d.hint and "Hopper_64_64_16" in d.hint


def test_a_hopper_macro_on_sm100a_points_at_the_blackwell_macros():
    fusion, sa, sb, d, r, out = tcgen05_tile("tile")
    d.definition.set_macro(tp.MmaMacro.Hopper_64_64_16)
    (e,) = _errors(fusion, "MMA-TARGET")
    assert "wgmma, which exists on sm_90a only" in e.message and "Blackwell1CTA_128_N_16" in e.hint


def test_the_accumulators_must_be_in_tensor_memory():
    fusion, sa, sb, d, r, out = tcgen05_tile("tile")
    d.set_memory_type(tp.MemoryType.Local)
    r.definition.op_type = tp.LoadStoreOpType.Set
    assert _codes(fusion) == ["MMA-WARP-COLLECTIVE"]


def test_one_thread_issues_every_tile_so_no_thread_index_on_the_output():
    fusion = VALID.tcgen05_k_loop()
    d = fusion.tensor("T2")  # [Mo (BIDx), rKo, M128, N, rK16]
    d.axis(0).parallelize(P.TIDy)  # the two M tiles at once, by two groups of threads
    assert "MMA-WARP-COLLECTIVE" in _codes(fusion)
    (e,) = [e for e in _errors(fusion, "MMA-WARP-COLLECTIVE") if "TIDy" in e.message]
    assert "one thread of the block issues every tcgen05.mma tile" in e.message


def test_an_operand_in_registers_is_refused():
    fusion, sa, sb, d, r, out = tcgen05_tile("tile")
    sb.set_memory_type(tp.MemoryType.Local)
    for i in sb.get_loop_domain():
        i.parallelize(P.Serial)
    sb.definition.op_type = tp.LoadStoreOpType.Set
    (e,) = _errors(fusion, "MMA-OPERAND-LAYOUT")
    assert "operand b (T6) is in Local memory; tileproof issues tcgen05.mma with both operands in shared" in e.message


def test_pipelined_operands_are_not_lowered_yet():
    assert "LOWERING-SUPPORTED" in _codes(example_module("invalid", "tcgen05").pipelined_operands())


# -- TCGEN05-SMEM-LAYOUT ---------------------------------------------------------------------------


def test_plain_rows_are_read_as_core_matrices():
    fusion = tcgen05_tile("tile", swizzle=None)[0]
    found = _errors(fusion, "TCGEN05-SMEM-LAYOUT")
    assert {d.tensor for d in found} == {"T5", "T6"}
    a = next(d for d in found if d.tensor == "T5")
    assert a.counterexample == {"mn": 1, "k": 0, "schedule": 32, "hardware": 16}
    assert "unswizzled K-major layout of the descriptor (SBO 256)" in a.message
    assert "apply_mma_swizzle_for_tma_load" in a.hint


@pytest.mark.parametrize("n", [16, 64, 256])
def test_the_32_byte_swizzle_is_read_where_tma_writes_it(n):
    assert _codes(tcgen05_tile("tile", n=n)[0]) == []


def test_the_wgmma_rule_leaves_tcgen05_to_its_own():
    fusion = tcgen05_tile("tile", swizzle=None)[0]
    assert "WGMMA-SMEM-LAYOUT" not in _codes(fusion)


# -- TCGEN05-ACCUMULATOR ---------------------------------------------------------------------------


def test_the_cells_the_schedule_allocates_are_the_mma_s():
    fusion = tcgen05_tile("tile", n=64)[0]
    d = fusion.snapshot().tensor("T2")
    cells = accumulator_cells(d, block_dims(d.fusion))
    lane, column = cells.hardware()
    for m, n in ((0, 0), (1, 0), (0, 1), (127, 63), (37, 5)):
        env = {ROW: m, COL: n, **{k: 0 for k in cells.ranges if k not in (ROW, COL)}}
        assert evaluate(cells.lane, env) == evaluate(lane, env) == m
        assert evaluate(cells.column, env) == evaluate(column, env) == n


def test_n_on_the_lanes_is_d_transposed():
    fusion = example_module("invalid", "tcgen05").accumulator_n_on_the_lanes()
    (e,) = _errors(fusion, "TCGEN05-ACCUMULATOR")
    assert e.tensor == "T2"
    v = e.counterexample
    assert (v["lane"], v["column"]) == (v["n"], v["m"]) and v["m"] != v["n"]
    assert "set_tmem_dim_sep_pos(1)" in e.hint


def test_the_m_and_n_tile_on_the_lanes_is_refused_with_the_lane_budget():
    fusion, sa, sb, d, r, out = tcgen05_tile("tile", n=64)
    d.set_tmem_dim_sep_pos(2)  # lanes M x N
    codes = _codes(fusion)
    assert "TCGEN05-ACCUMULATOR" in codes and "TMEM-LANES" in codes


# -- TCGEN05-ASYNC-ORDER -----------------------------------------------------------------------------


SCHEDULES = {
    "one tile": lambda: tcgen05_tile("tile")[0],
    "K steps in a swizzled row": lambda: VALID.tcgen05_k_steps_in_a_swizzled_row("B128"),
    "K loop over TMA tiles": VALID.tcgen05_k_loop,
}


def _nest(name):
    return placed_nest(SCHEDULES[name]().snapshot())


def _scopes(nodes):
    yield nodes
    for n in nodes:
        if hasattr(n, "body"):
            yield from _scopes(n.body)


def _edit(nest, test, change) -> int:
    """change(scope, k) at every node n of the nest with test(n); the count of them."""
    hits = 0
    for scope in list(_scopes(nest.tree)):
        for k in reversed(range(len(scope))):
            if test(scope[k]):
                change(scope, k)
                hits += 1
    return hits


def _violations(nest):
    return check_order(nest.tree, nest.hazards, nest.label)


@pytest.mark.parametrize("name", SCHEDULES)
def test_the_placed_commits_and_waits_keep_every_obligation(name):
    fusion = SCHEDULES[name]()
    ctx = VerifyContext(fusion.snapshot(), tp.get_target("sm_100a"))
    nest = placed_nest(ctx.fusion)
    assert _violations(nest) == [] and list(tcgen05_async_order(ctx)) == []
    commits = [n for s in _scopes(nest.tree) for n in s if isinstance(n, Tcgen05Commit)]
    waits = [n for s in _scopes(nest.tree) for n in s if isinstance(n, Tcgen05Wait)]
    assert len(commits) == len(waits) == 1 and waits[0].fence and commits[0].barrier == waits[0].barrier


@pytest.mark.parametrize("name", SCHEDULES)
def test_without_the_wait_the_load_reads_d_while_the_mma_runs(name):
    nest = _nest(name)
    assert _edit(nest, lambda n: isinstance(n, Tcgen05Wait), lambda s, k: s.pop(k)) == 1
    found = {v.obligation: v for v in _violations(nest)}
    v = found[1]
    assert v.statement == "`T3 = TMemLoad(T2)`" and v.counterexample["in flight"] == "T2's tcgen05.mma"
    assert v.counterexample["committed to"] == "tp_mma_bar_T2"
    assert "no wait on its commit's mbarrier comes first" in v.message
    assert 5 in found  # and the kernel ends with it in flight


def test_the_rule_reports_the_missing_wait():
    ctx = VerifyContext(tcgen05_tile("tile")[0].snapshot(), tp.get_target("sm_100a"))
    nest = placed_nest(ctx.fusion)
    _edit(nest, lambda n: isinstance(n, Tcgen05Wait), lambda s, k: s.pop(k))
    found = list(tcgen05_async_order(ctx))  # the memoized nest, edited
    assert {d.code for d in found} == {"TCGEN05-ASYNC-ORDER"}
    d = next(d for d in found if "T3 = TMemLoad(T2)" in d.message)
    assert "obligation 1" in d.notes[0] and d.counterexample["path"].startswith("the first iteration of the loop")


def test_a_read_moved_above_the_wait_is_reported():
    nest = _nest("one tile")
    top = nest.tree
    w = next(k for k, n in enumerate(top) if isinstance(n, Tcgen05Wait))
    top.insert(w + 2, top.pop(w))  # past the TMemLoad's loops
    assert [v.obligation for v in _violations(nest)] == [1]


def test_without_the_fence_the_load_may_pass_the_wait():
    nest = _nest("one tile")
    assert _edit(nest, lambda n: isinstance(n, Tcgen05Wait), lambda s, k: setattr(s[k], "fence", False)) == 1
    (v,) = _violations(nest)
    assert v.obligation == 2 and v.statement == "`T3 = TMemLoad(T2)`"
    assert "no tcgen05.fence::after_thread_sync between" in v.message


def test_a_fenced_barrier_after_the_wait_is_a_fence_too():
    nest = _nest("one tile")
    _edit(nest, lambda n: isinstance(n, Tcgen05Wait), lambda s, k: (setattr(s[k], "fence", False),
                                                                    s.insert(k + 1, Sync("fenced"))))
    assert _violations(nest) == []


def test_without_the_commit_the_wait_never_completes():
    nest = _nest("one tile")
    assert _edit(nest, lambda n: isinstance(n, Tcgen05Commit), lambda s, k: s.pop(k)) == 1
    found = {v.obligation: v for v in _violations(nest)}
    assert "the phase they wait for never completes (the kernel hangs)" in found[4].message
    assert found[1].counterexample["committed to"] == "nothing yet"


def test_two_commits_for_one_wait_break_the_phase_parity():
    nest = _nest("one tile")
    _edit(nest, lambda n: isinstance(n, Tcgen05Commit), lambda s, k: s.insert(k, Tcgen05Commit(s[k].barrier)))
    (v,) = _violations(nest)
    assert v.obligation == 4 and v.counterexample["commits since the last wait"] == "2 or more"


def test_a_k_loop_without_its_wait_lets_the_next_tma_overwrite_the_tiles():
    nest = _nest("K loop over TMA tiles")
    _edit(nest, lambda n: isinstance(n, Tcgen05Wait), lambda s, k: s.pop(k))
    found = {(v.obligation, v.statement): v for v in _violations(nest)}
    v = found[3, "`T5 = TMA(T0)`"]
    assert "writes T5" in v.message and "a later iteration of the loop over" in v.counterexample["path"]


def test_smem_race_wants_the_proxy_fence_before_the_mma():
    """nvFuser's SS single tile: T2 and T3 stored by the threads, read by the MMA through the async
    proxy: the barrier between them must be preceded by fence.proxy.async."""
    fusion = ss_tile(tp.MmaMacro.Blackwell1CTA_128_64_16, tp.float16, "TN", SW.B128, SW.B128, blackwell=True)
    nest = placed_nest(fusion.snapshot())
    assert unordered(nest) == [] and _violations(nest) == []
    fenced = lambda n: type(n) is Sync and n.fence_async  # noqa: E731
    assert _edit(nest, fenced, lambda s, k: setattr(s[k], "fence_async", False)) == 1
    assert {(h.kind, h.tensor) for h in unordered(nest)} == {("read after write", "T2"), ("read after write", "T3")}
