"""WGMMA-SMEM-LAYOUT and the wgmma structure rules on examples/valid/wgmma.py and
examples/invalid/wgmma.py.

Each invalid example's verdict (its exact codes and message fragments) is checked by
tests/verifier/test_seed_examples.py::test_schedule_file_verdict, which discovers every schedule file;
here: which tensor each rejection names, the counterexample of an unswizzled tile evaluated
through execution/wgmma_operands.py (the hardware's address and the schedule's byte differ there, agree for
the valid schedule), the valid schedules' descriptor fields, and a brute-force differential:
every operand element at every wgmma instance of one block, plain ints through
model/expr.py's evaluate, against the model's descriptor address and the TMA's 128-byte swizzle
written out by hand.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

import tileproof as tp
from tileproof.model.expr import const, evaluate, substitute, var
from tileproof.execution.indexing import block_dims, loop_var
from tileproof.model.options import MmaInputSmemSwizzle
from tileproof.model.mma_op import ELEMENT_VARS
from tileproof.execution.wgmma_operands import wgmma_operand
from tileproof.hw.wgmma import Descriptor, atom_aligned
from tileproof.recipes import HopperGemmParams, HopperTile, TmaPipeline, hopper_gemm
from tileproof.reports.explain import explain_text
from tileproof.schedule_files import discover
from tileproof.verifier.findings import tree_names

from support.examples import example_module

ROOT = Path(__file__).resolve().parents[2]
VALID = example_module("valid", "wgmma")
INVALID = example_module("invalid", "wgmma")
INVALID_CASES = {c.name: c for c in discover([str(ROOT / "examples" / "invalid" / "wgmma.py")])}
SIZES = {"M": 128, "N": 128, "K": 64}
MN, K = "mn", "k"


def _mma(fusion):
    """The MmaOp's output (T2)."""
    return next(t for t in fusion.tensors if t.definition is not None and getattr(t.definition, "macro", None))


def _operands(fusion):
    d = _mma(fusion)
    return [wgmma_operand(d, block_dims(fusion), role) for role in "AB"]


def _verify(case):
    return tp.verify(case.build(), target=case.target)


def _diagnostics(report, code):
    return [d for d in report.errors if d.code == code]


# -- (i) what each rejection is about (the codes themselves: test_seed_examples) --------------


@pytest.mark.parametrize("name, code, tensors", [
    ("unswizzled_operand_rows", "WGMMA-SMEM-LAYOUT", {"T4", "T5"}),
    ("m_major_a_unswizzled", "WGMMA-SMEM-LAYOUT", {"T4"}),  # B is untouched
    ("swizzle_patterns_across_warpgroups", "WGMMA-SMEM-LAYOUT", {"T4"}),
    ("swizzle_patterns_across_warpgroups", "TMA-SWIZZLE-LAYOUT", {"T4"}),
    ("hopper_macro_on_sm100a", "MMA-TARGET", {"T2"}),
    ("accumulators_stored_by_one_warp", "MMA-WARP-COLLECTIVE", {"T2"}),
    ("accumulators_stored_by_one_warp", "MMA-ACCUM-LAYOUT", {"T3"}),
    ("operands_copied_by_threads[copy=CpAsync]", "MMA-OPERAND-LAYOUT", {"T2"}),
    ("tma_stages_loaded_late", "PIPELINE-RAW", {"T2"}),
    ("warp_specialized_registers_past_the_pool", "WS-REGISTERS", {"T4"}),
    ("warp_specialized_on_tidx", "WS-ROLES", {"T4"}),
    ("ping_pong_with_one_consumer_warpgroup", "WS-PING-PONG", {"T4"}),
    ("three_consumer_warpgroups_of_64_x_256", "WGMMA-INSTRUCTION-REGISTERS", {"T2"}),
    ("multicast_of_a_tile_each_block_needs", "CLUSTER-MULTICAST", {"T4"}),
    ("cluster_past_the_grid", "CLUSTER-MULTICAST", {None}),  # the launch, no tensor
    ("multicast_without_warp_specialization", "CLUSTER-MULTICAST", {"T5"}),
    ("persistent_multicast_across_n_tiles", "CLUSTER-MULTICAST", {"T5"}),
])
def test_each_rejection_names_the_broken_tensor(name, code, tensors):
    report = _verify(INVALID_CASES[name])
    found = _diagnostics(report, code)
    assert found and {d.tensor for d in found} == tensors, [(d.code, d.tensor, d.message) for d in report.errors]
    assert not [d for d in report.diagnostics if d.internal]


def test_every_invalid_schedule_is_listed_here():
    """A new schedule in examples/invalid/wgmma.py gets a row in the table above."""
    listed = {"unswizzled_operand_rows", "m_major_a_unswizzled", "swizzle_patterns_across_warpgroups", "hopper_macro_on_sm100a",
              "accumulators_stored_by_one_warp", "operands_copied_by_threads[copy=CpAsync]",
              "tma_stages_loaded_late",
              "warp_specialized_registers_past_the_pool", "warp_specialized_on_tidx", "ping_pong_with_one_consumer_warpgroup",
              "three_consumer_warpgroups_of_64_x_256", "multicast_of_a_tile_each_block_needs", "cluster_past_the_grid", "multicast_without_warp_specialization",
              "persistent_multicast_across_n_tiles"}
    assert set(INVALID_CASES) == listed


def test_the_valid_schedule_passes_the_rules_the_invalid_ones_break():
    """Each invalid schedule is the recipe (hopper_gemm) with one change: unchanged, it is accepted on sm_90a."""
    report = tp.verify(INVALID._hopper_with(), target="sm_90a")
    assert report.ok, [(d.code, d.message) for d in report.errors]


# -- (ii) the counterexample is concrete ---------------------------------------------------------


def _model_values(fusion, counterexample) -> dict[str, int]:
    """The counterexample's values under the model's variable names (the report names loop
    indices as the schedule tree prints them: T2.rUnroll{4} for T2.r31)."""
    raw = {shown: name for name, shown in tree_names(fusion).items()}
    return {raw.get(k, k): v for k, v in counterexample.items() if isinstance(v, int)}


@pytest.mark.parametrize("role, tensor", [("A", "T4"), ("B", "T5")])
def test_unswizzled_counterexample_is_where_the_hardware_reads_another_byte(role, tensor):
    fusion = INVALID.unswizzled_operand_rows()
    report = tp.verify(fusion, target="sm_90a")
    d = next(d for d in _diagnostics(report, "WGMMA-SMEM-LAYOUT") if d.tensor == tensor)
    cx = _model_values(fusion, d.counterexample)
    op = next(o for o in _operands(fusion) if o.role == role)
    assert op.swizzle is MmaInputSmemSwizzle.NoSwizzle and (op.sbo, op.lbo) == (1024, 16)
    hardware, schedule = op.hardware(var(MN), var(K)), op.byte_offset(var(MN), var(K))
    env = {**cx, MN: cx["mn"], K: cx["k"]}
    assert (evaluate(hardware, env), evaluate(schedule, env)) == (cx["hardware"], cx["schedule"])
    assert cx["hardware"] != cx["schedule"]
    assert (cx["mn"], cx["k"], cx["hardware"], cx["schedule"]) == (1, 0, 16, 128)  # row 1: 16 B vs 128 B


@pytest.mark.parametrize("build", ["hopper_matmul", "hopper_matmul_wide"])
def test_valid_hardware_address_is_the_schedule_byte_at_instance_0(build):
    fusion = getattr(VALID, build)()
    for op in _operands(fusion):
        env = {**{name: 0 for name in op.ex.ranges}, **SIZES}
        hardware, schedule = op.hardware(var(MN), var(K)), op.byte_offset(var(MN), var(K))
        for mn, k in itertools.product(range(op.rows), range(op.depth)):
            env[MN], env[K] = mn, k
            assert evaluate(hardware, env) == evaluate(schedule, env), (op.role, mn, k)


# -- (iii) the descriptors ---------------------------------------------------------------------


@pytest.mark.parametrize("build", ["hopper_matmul", "hopper_matmul_wide"])
def test_valid_descriptors_are_sbo_1024_lbo_16_b128(build):
    fusion = getattr(VALID, build)()
    for op in _operands(fusion):
        assert (op.role, op.swizzle, op.sbo, op.lbo) == (op.role, MmaInputSmemSwizzle.B128, 1024, 16)
        start = evaluate(op.start, {**{name: 0 for name in op.ex.ranges}, **SIZES})
        assert atom_aligned(start, op.swizzle)  # base offset 0
        assert Descriptor(start, op.lbo, op.sbo, op.swizzle).field_problems() == []
    assert [op.rows for op in _operands(fusion)] == [64, 128 if build == "hopper_matmul" else 256]


# -- (iv) brute force: every element of every instance of one block ------------------------------


def _sw128(row: int, kb: int) -> int:
    """The TMA's 128-byte swizzle of a K-major bfloat16 tile, written out: row `row` holds 128
    bytes; its 16-byte chunk c lands at chunk c ^ (row % 8)."""
    return row * 128 + ((kb // 8) ^ (row % 8)) * 16 + kb % 8 * 2


def _brute_force(fusion, block: dict[str, int], expected):
    """For each operand, every instance of the MmaOp in `block` (its other loops over the
    model's execution ranges) and every element (mn, k): (instance, role, mn, k, hardware,
    schedule, expected) where the descriptor's address, the schedule's byte and
    `expected(d, instance, role, mn, k)` are not all one byte; and how many were compared.
    Plain ints throughout; the addresses are evaluated once per instance of the loops they
    depend on (B's are the same for both warpgroups), `expected` at every instance."""
    d = _mma(fusion)
    mismatches, checked = [], 0
    for op in _operands(fusion):
        hardware, schedule = op.hardware(var(MN), var(K)), op.byte_offset(var(MN), var(K))
        lane_and_element = {"threadIdx.x", ELEMENT_VARS[op.role]}  # the (mn, k) below
        used = hardware.free_vars() | schedule.free_vars()
        assert used <= {*op.ex.ranges, MN, K} - lane_and_element
        loops = {name: evaluate(r, {}) for name, r in op.ex.ranges.items()
                 if name not in lane_and_element and name not in block}
        elements = list(itertools.product(range(op.rows), range(op.depth)))
        evaluated = {}
        for values in itertools.product(*(range(n) for n in loops.values())):
            instance = {**dict(zip(loops, values)), **block}
            key = tuple(sorted((name, v) for name, v in instance.items() if name in used))
            if key not in evaluated:
                at = {name: const(v) for name, v in key}
                h, s = substitute(hardware, at), substitute(schedule, at)
                evaluated[key] = [(evaluate(h, {MN: mn, K: k}), evaluate(s, {MN: mn, K: k})) for mn, k in elements]
            for (mn, k), (got, want) in zip(elements, evaluated[key]):
                ref = expected(d, instance, op.role, mn, k)
                checked += 1
                if not got == want == ref:
                    mismatches.append((instance, op.role, mn, k, got, want, ref))
    return mismatches, checked


def _tma_sw128(stage_bytes):
    """hopper_gemm's tiles: instance (Ko, wg, kk) reads A's rows 64 wg + mn and B's rows mn, K
    columns 16 kk + k, in stage Ko % stages (stage_bytes[role] each)."""

    def expected(d, instance, role, mn, k):
        loop = d.get_loop_domain()  # [Mo, No, Ko, wg, kk, Mma x 3]
        ko, wg, kk = (instance[loop_var(d, loop[i]).value] for i in (2, 3, 4))
        bytes_, stages = stage_bytes[role]
        row = 64 * wg + mn if role == "A" else mn
        return ko % stages * bytes_ + _sw128(row, 16 * kk + k)

    return expected


@pytest.mark.parametrize("block, stages, k", [((128, 128), 1, 64), ((128, 256), 1, 64), ((128, 128), 2, 192)])
def test_brute_force_descriptor_addresses_are_the_tma_tiles(block, stages, k):
    """The last block of a 2 x 2 grid, one K tile; or three K tiles in two stages (the third
    back in stage 0)."""
    bm, bn = block
    params = HopperGemmParams(tile=HopperTile(m=bm, n=bn),
                              pipeline=TmaPipeline(stages=stages, prefetch=stages - 1 if stages > 1 else -1))
    fusion = hopper_gemm(2 * bm, 2 * bn, k, params)
    expected = _tma_sw128({"A": (bm * 128, stages), "B": (bn * 128, stages)})
    mismatches, checked = _brute_force(fusion, {"blockIdx.x": 1, "blockIdx.y": 1}, expected)
    assert mismatches == []
    assert checked == (k // 64) * 2 * 4 * (64 * 16 + bn * 16)  # K tiles x warpgroups x kk x (A + B)


def test_brute_force_finds_the_counterexamples_of_the_invalid_layouts():
    """The same enumeration on the unswizzled and M-major tiles: the rule's counterexamples are
    among the elements it finds read from the wrong byte."""
    for build, role, element in (("unswizzled_operand_rows", "A", (1, 0)), ("unswizzled_operand_rows", "B", (1, 0)),
                                 ("m_major_a_unswizzled", "A", (0, 1))):
        fusion = getattr(INVALID, build)()
        wrong = {(r, mn, k) for instance, r, mn, k, got, want, _ in _brute_force_symbolic(fusion)}
        assert (role, *element) in wrong, (build, sorted(wrong)[:5])
        if build == "m_major_a_unswizzled":
            assert {r for r, _, _ in wrong} == {"A"}


def _brute_force_symbolic(fusion):
    """_brute_force at SIZES, block 0, instance 0 of the other loops (the symbolic examples)."""
    out = []
    for op in _operands(fusion):
        env = {**{name: 0 for name in op.ex.ranges}, **SIZES}
        hardware, schedule = op.hardware(var(MN), var(K)), op.byte_offset(var(MN), var(K))
        for mn, k in itertools.product(range(op.rows), range(op.depth)):
            env[MN], env[K] = mn, k
            got, want = evaluate(hardware, env), evaluate(schedule, env)
            if got != want:
                out.append((env, op.role, mn, k, got, want, None))
    return out


def test_a_sw128_stage_only_128_byte_aligned_is_refused(monkeypatch):
    """tilelang #2379: a 128-byte-swizzled TMA stage 128- but not 1024-byte aligned read back wrong.
    WGMMA-SMEM-LAYOUT proves the layout relative to the buffer; SMEM-ALIGNMENT proves the buffer
    starts on the swizzle pattern. With the shared-memory plan shifted by 128 bytes (a planner
    that aligned swizzled buffers to 128 only), the schedule is refused, naming the period."""
    import dataclasses

    from tileproof.model.expr import add, const
    from tileproof.verifier import context

    plan = context.plan_shared_memory

    def shifted(fusion, allocations):
        p = plan(fusion, allocations)
        return dataclasses.replace(p, buffers={k: dataclasses.replace(b, offset=add(b.offset, const(128)))
                                               for k, b in p.buffers.items()}, total=add(p.total, const(128)))

    params = HopperGemmParams(tile=HopperTile(m=128, n=256), pipeline=TmaPipeline(stages=2, prefetch=1))
    fusion = hopper_gemm(256, 256, 128, params)
    assert tp.verify(fusion, "sm_90a").ok
    monkeypatch.setattr(context, "plan_shared_memory", shifted)
    report = tp.verify(fusion, "sm_90a")
    assert report.codes == ["SMEM-ALIGNMENT"]
    d = next(d for d in report.errors if "T4" in d.message)
    assert d.counterexample["buffer offset"] == 128
    assert "not a multiple of its 1024-byte swizzle period" in d.message and "faults" not in d.message


@pytest.mark.parametrize("swizzle, n", [(32, 8), (32, 24), (64, 8), (64, 24)])
def test_a_stage_on_a_32_or_64_byte_pattern_s_first_line_is_a_valid_start(swizzle, n):
    """A 32- or 64-byte swizzle repeats every 2 or 4 lines of 128 bytes (256, 512 bytes): B's
    stages of n rows start on a repeat's first line but not on 1024 (nvFuser's HopperSS.MultipleTile
    B32 tiles; tests/gpu/test_wgmma.py runs them). Accepted, and at every stage the descriptor's
    address of each element is the byte the schedule allocates."""
    params = HopperGemmParams(tile=HopperTile(m=64, n=n, swizzle=swizzle), pipeline=TmaPipeline(stages=4))
    fusion = hopper_gemm(128, 3 * n, 256, params)
    assert tp.verify(fusion, "sm_90a").ok
    b = _operands(fusion)[1]
    loops = [name for name in b.ex.ranges if name not in ("threadIdx.x", ELEMENT_VARS["B"])]
    starts = set()
    for values in itertools.product(*(range(evaluate(b.ex.ranges[name], {})) for name in loops)):
        env = dict(zip(loops, values))
        starts.add(evaluate(b.start, env))
        hardware = substitute(b.hardware(var(MN), var(K)), {k: const(v) for k, v in env.items()})
        schedule = substitute(b.byte_offset(var(MN), var(K)), {k: const(v) for k, v in env.items()})
        for mn, k in itertools.product(range(b.rows), range(b.depth)):
            assert evaluate(hardware, {MN: mn, K: k}) == evaluate(schedule, {MN: mn, K: k}), (env, mn, k)
    assert any(s % 1024 for s in starts) and all(s % (8 * swizzle) < 128 for s in starts)  # line 0 of a repeat


def test_a_start_on_line_1_of_a_32_byte_pattern_is_refused(monkeypatch):
    """The same 32-byte tiles with every descriptor's start moved one 128-byte line on: base offset
    0 would then read the pattern's rows swapped. Refused, the counterexample's start on line 1."""
    from tileproof.execution import wgmma_operands
    from tileproof.model.expr import add

    params = HopperGemmParams(tile=HopperTile(m=64, n=8, swizzle=32), pipeline=TmaPipeline(stages=4))
    fusion = hopper_gemm(128, 24, 256, params)
    start = wgmma_operands.WgmmaOperand.start
    monkeypatch.setattr(wgmma_operands.WgmmaOperand, "start", property(lambda op: add(start.fget(op), const(128))))
    report = tp.verify(fusion, "sm_90a", rules=["WGMMA-SMEM-LAYOUT"])
    d = next(d for d in report.errors if d.code == "WGMMA-SMEM-LAYOUT")
    assert d.counterexample["start"] // 128 % 2 == 1 and "row 0 of a 32-byte swizzle pattern" in d.message


def test_the_layout_is_not_asked_of_a_tile_the_tma_does_not_place():
    """The ping-pong GEMM with its A tile inlined at the first axis: the tile holds every K tile
    (SMEM-CAPACITY) and the TMA's copies leave it (TMA-WHOLE-TILES). Whether wgmma reads the tile
    where its allocation puts it has no answer then (the TMA does not write it there): the layout
    rules are its premises' (TMA_PLACED) and do not run; before, the descriptor proof ran into the
    solver's limit (32 s, undecided). The valid schedule runs the rule."""
    fusion = VALID.hopper_matmul_warp_specialized_ping_pong()
    next(t for t in fusion.tensors if t.name == "T4").inline_at(1)
    report = tp.verify(fusion)
    assert {"SMEM-CAPACITY", "TMA-WHOLE-TILES"} <= set(report.codes)
    assert "WGMMA-SMEM-LAYOUT" in report.rules_not_run and "WGMMA-SMEM-LAYOUT" not in report.codes
    valid = tp.verify(VALID.hopper_matmul_warp_specialized_ping_pong())
    assert valid.ok and "WGMMA-SMEM-LAYOUT" in valid.rules_run
    page = explain_text("WGMMA-SMEM-LAYOUT")  # tileproof explain names the premises
    assert "Not run:\n    where TMA-WHOLE-TILES, TMA-BULK-PLACEMENT or REDUCTION-PARALLEL reported an error" in page
    assert "Not run:" not in explain_text("SMEM-CAPACITY")
