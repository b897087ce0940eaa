"""wgmma with A in registers (RS): MMA-OPERAND-LAYOUT proves each thread of the warpgroup holds
exactly the A elements of wgmma m64nNk16's register fragment (hw/mma.py wgmma_a16_position),
WGMMA-SMEM-LAYOUT proves B's descriptor alone, WGMMA-ASYNC-ORDER the A registers written before
the fence and untouched until a wait covers the wgmma (PTX ISA 9.7.15.7); the code generator
emits the RS form (`{d..}, {a0, a1, a2, a3}, b-desc, p, 1, 1, trans-b`)."""

from __future__ import annotations

import re

import pytest

import tileproof as tp
from tileproof.execution import wgmma_order as placement
from tileproof.execution.barriers import WgmmaFence, WgmmaWait
from tileproof.execution.nest import placed_nest
from support.rs_wgmma import rs_wgmma
from tileproof.verifier.analysis.wgmma_order import check_order

P = tp.ParallelType
CONFIGS = [((8, 16), {}), ((64, 128), {"stages": 4}), ((256, 64), {"blocks": 3, "stages": 3})]


def _errors(fusion):
    return tp.verify(fusion, "sm_90a").errors


@pytest.mark.parametrize("args, kw", CONFIGS, ids=lambda x: str(x))
def test_rs_wgmma_is_proved_and_issued_with_a_from_registers(args, kw):
    fusion, ra, sb, d, out = rs_wgmma("rs", *args, **kw)
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, [e.message for e in report.errors]
    assert {"MMA-OPERAND-LAYOUT", "WGMMA-SMEM-LAYOUT", "WGMMA-ASYNC-ORDER"} <= set(report.rules_run)
    src = tp.compile(fusion, "sm_90a").cuda_source
    n = args[0]
    issue = re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16\.f32\.bf16\.bf16 \{[^}]*\}, (\{[^}]*\}), "
                      r"%(\d+), p, 1, 1, 0;", src)
    assert issue and int(issue[1]) == n
    d_regs = n // 2
    assert issue[2] == "{" + ", ".join(f"%{d_regs + i}" for i in range(4)) + "}" and int(issue[3]) == d_regs + 4
    assert "tp_da" not in src and "tp_db = tp_wgmma_desc" in src  # A has no descriptor, B one
    # the A fragment's elements are adjacent pairs of the register array: read as words, not repacked
    assert len(re.findall(r"tp_a\d = \*reinterpret_cast<const unsigned\*>\(&T\d+\[", src)) == 4


def _rs_tile(lane_order):
    """HopperRS.SingleTile (TN): A [64, 1, 16] into registers split into the fragment's digits
    [w, v2, g] x [v4, q, v1], the thread merged from the lane digits in `lane_order`."""
    with tp.Fusion("rs_tile") as fusion:
        a = tp.make_contig_concrete_tensor([64, 1, 16], dtype=tp.bfloat16); fusion.add_input(a)
        b = tp.make_contig_concrete_tensor([1, 64, 16], dtype=tp.bfloat16); fusion.add_input(b)
        d = tp.fused_multiply_sum(a, b, [-1]); out = tp.set(d); fusion.add_output(out)
    d.definition.set_macro(tp.MmaMacro.Hopper_64_64_16)
    ra = a.cache_after(); sb = b.cache_after(tp.LoadStoreOpType.TMA)
    d.set_allocation_domain(tp.mma_output_allocation(d), True)
    for i in range(3):
        d.axis(i).parallelize(P.Mma)
    tp.schedule_mma_fragment(out, tp.MmaMacro.Hopper_64_64_16, "C")
    ra.reorder({1: 0})  # [1, M, K]
    ra.split(1, 16).split(2, 8).split(4, 8).split(5, 2)  # [1, w, v2, g, v4, q, v1]
    digits = {"w": 1, "v2": 2, "g": 3, "v4": 4, "q": 5, "v1": 6}
    order = [digits[x] for x in lane_order] + [4, 2, 6]
    ra.reorder({old: new + 1 for new, old in enumerate(order)})
    ra.merge(1).merge(1).merge(2).merge(2)  # [1, thread, element]
    ra.axis(1).parallelize(P.TIDx)
    sb.set_memory_type(tp.MemoryType.Shared)
    sb.apply_mma_swizzle_for_tma_load(tp.MmaInputSmemSwizzle.B32)
    for i in sb.get_loop_domain()[1:]:
        i.parallelize(P.Bulk)
    sb.set_allocation_domain(sb.get_loop_domain(), True)
    return fusion


def test_the_a_fragment_in_lane_order_is_accepted():
    assert _errors(_rs_tile("wgq")) == []


def test_a_fragment_with_the_lane_digits_swapped_is_refused_with_a_counterexample():
    """Thread 8 q + g instead of 4 g + q: thread 1 must hand the wgmma A[0, 2] and A[0, 3] (its
    element 0 is row g = 0, column 2 q = 2), which thread 8 loaded."""
    (e,) = _errors(_rs_tile("wqg"))
    assert e.code == "MMA-OPERAND-LAYOUT"
    assert "wgmma.m64n64k16 bf16 takes" in e.message and "as lane 1's A element 0" in e.message
    assert e.counterexample["reader threadIdx.x"] == 1 and e.counterexample["writer threadIdx.x"] == 8
    assert any("lane 1 holds (0, 2), (0, 3), (8, 2)" in n for n in e.notes)


def test_b_in_registers_is_refused():
    fusion = _rs_tile("wgq")
    sb = next(t for t in fusion.tensors if t.memory_type is tp.MemoryType.Shared)
    sb.set_memory_type(tp.MemoryType.Local)
    codes = {e.code: e.message for e in _errors(fusion)}
    assert "wgmma reads B from shared memory, through a matrix descriptor" in codes["MMA-OPERAND-LAYOUT"]


# -- WGMMA-ASYNC-ORDER over the A registers ----------------------------------------------------------

def _pipelined_nest():
    fusion, ra, *_ = rs_wgmma("rs_pipelined", 64, 128, stages=4)
    return placed_nest(fusion.snapshot()), ra.name


def _scopes(nodes):
    yield nodes
    for n in nodes:
        if hasattr(n, "body"):
            yield from _scopes(n.body)


def _loop_scope(nest):
    """The K loop's body: the scope holding the wgmma's fence."""
    return next(s for s in _scopes(nest.tree) if any(isinstance(n, WgmmaFence) for n in s))


def test_the_a_load_in_the_k_loop_is_fenced_and_waited_for():
    """B's circular buffer would keep one batch in flight (4 stages, prefetch 2), but the next
    iteration rewrites the A registers the wgmma reads: the wait leaves none."""
    nest, a = _pipelined_nest()
    assert check_order(nest.tree, nest.hazards, nest.label) == []
    waits = [n for n in _loop_scope(nest) if isinstance(n, WgmmaWait)]
    assert [w.pending for w in waits] == [0]


def test_one_batch_in_flight_over_the_next_a_load_is_reported(monkeypatch):
    """Placed as if the A registers were not the wgmma's (the SS rule): one batch stays in flight
    into the next iteration, whose load rewrites the A fragment the wgmma may still read."""
    monkeypatch.setattr(placement, "_a_touched", lambda *args: False)
    nest, a = _pipelined_nest()
    assert [n.pending for n in _loop_scope(nest) if isinstance(n, WgmmaWait)] == [1]
    found = [v for v in check_order(nest.tree, nest.hazards, nest.label) if v.obligation == 2]
    assert found and f"writes {a}" in found[0].message and "read it (its A fragment)" in found[0].message
    assert "a later iteration" in found[0].counterexample["path"]


def test_an_a_load_after_the_fence_is_reported():
    """The fence moved to the top of the loop body: the A load follows it, unfenced."""
    nest, a = _pipelined_nest()
    scope = _loop_scope(nest)
    fence = next(n for n in scope if isinstance(n, WgmmaFence))
    scope.remove(fence)
    scope.insert(0, fence)
    (v,) = check_order(nest.tree, nest.hazards, nest.label)
    assert v.obligation == 1 and f"wrote {a}" in v.message
