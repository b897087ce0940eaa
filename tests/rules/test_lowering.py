"""The lowering rules (verifier/rules/lowering.py) and the code generator decide with the same
functions (execution/conditions/lowering.py): what the rules reject, lowering refuses as a tileproof bug
(NotLowered, an InternalError), and what they accept, lowering takes."""

from __future__ import annotations

from pathlib import Path

import pytest
import sympy
from hypothesis import HealthCheck, given, settings

import tileproof as tp
from tileproof.codegen.lower.loop_nest import NotLowered
from tileproof.codegen.lower import lower
from tileproof.execution.conditions import lowering as conditions
from tileproof.execution import loops
from tileproof.model.targets import get_target
from tileproof.recipes import Epilogue, HopperGemmParams, HopperTile, TmaPipeline, hopper_gemm
from tileproof.schedule_files import discover
from tileproof.verifier.registry import all_rules

TESTS = Path(__file__).resolve().parent.parent
from support.examples import example_module  # noqa: E402
from support.schedule_gen import lowering_cases  # noqa: E402

P = tp.ParallelType
ROOT = TESTS.parent
LOWERING = sorted(r.code for r in all_rules() if r.family == "lowering")
# the codes whose condition lowering cannot emit (the others compile, slowly or spilling)
REFUSED = {"PARALLEL-TYPE-UNIQUE", "REGISTER-SIZE-CONSTANT", "SYMBOLIC-FACTOR", "INLINE-LOOP-MAP",
           "INLINE-PARALLEL-MATCH", "LOOP-NEST-ORDER", "LOOP-ROTATION", "GLOBAL-INTERMEDIATE",
           "LOWERING-SUPPORTED"}


def copy(shape, dtype="float32", name="copy"):
    with tp.Fusion(name) as fusion:
        t0 = tp.make_tensor(list(shape), contiguity=True, dtype=dtype)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    return fusion, t1, t2


def test_the_family_has_its_codes():
    assert set(LOWERING) == REFUSED | {"REGISTER-BUDGET", "UNROLL-LENGTH", "LOCAL-MEMORY-SIZE"}


INVALID = [c for c in discover([str(ROOT / "examples" / "invalid" / "lowering.py")])]


@pytest.mark.parametrize("case", INVALID, ids=lambda c: c.name)
def test_lowering_refuses_what_the_rule_rejects(case):
    fusion = case.build()
    report = tp.verify(fusion, case.target)
    assert report.codes == sorted(case.expect.codes)
    refused = set(report.codes) & REFUSED
    if not refused:  # UNROLL-LENGTH: lowering emits it; NVRTC would take minutes
        lower(fusion.snapshot(), get_target(case.target))
        return
    with pytest.raises(NotLowered) as e:
        lower(fusion.snapshot(), get_target(case.target))
    assert e.value.rule in refused
    assert str(e.value).startswith("tileproof bug, please report: rule ")
    assert isinstance(e.value, tp.InternalError) and isinstance(e.value, tp.UnsupportedSchedule)


def test_compile_unverified_still_sees_a_refusal():
    from tileproof.testing import compile_unverified

    fusion, t1, t2 = copy([8, 32])
    t1.set_memory_type(tp.MemoryType.Global)  # a copy of T0 laid out otherwise: no view of T0
    t1.set_allocation_domain([t1.axis(1), t1.axis(0)], True)
    with pytest.raises(tp.UnsupportedSchedule, match="GLOBAL-INTERMEDIATE"):
        compile_unverified(fusion)


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck), print_blob=False)
@given(lowering_cases())
def test_rules_and_lowering_agree_on_random_schedules(case):
    """No refused code: lowering builds the kernel IR. A refused code: lowering raises NotLowered
    for one of them (lowering checks in pass order, so the first one it meets)."""
    target = get_target(case.target)
    codes = set(tp.verify(case.fusion, target, rules=LOWERING).codes) & REFUSED
    try:
        lower(case.fusion.snapshot(), target, until="allocate")
    except NotLowered as e:
        assert e.rule in codes, (case, codes, str(e))
        return
    except tp.UnsupportedSchedule:
        return  # other lowering passes' own refusals (tensor memory on sm_90a, ...): other rules
    assert not codes, (case, codes)


# -- the functions of execution/conditions/lowering.py ------------------------------------------------------

def test_two_axes_on_one_thread_index():
    fusion, t1, t2 = copy([4, 32])
    t2.axis(0).parallelize(P.BIDx)
    t2.axis(1).parallelize(P.BIDx)
    (p,) = conditions.launch_axis_clashes(fusion)
    assert p.tensor == "T2" and dict(p.values) == {"axis": 0, "other_axis": 1, "extent": 4, "other_extent": 32}
    assert "blockIdx.x is one index per block" in p.message


def test_one_axis_per_index_is_fine_and_serial_unroll_may_repeat():
    fusion, t1, t2 = copy([4, 8, 32])
    for t in (t1, t2):
        t.axis(0).parallelize(P.Unroll)
        t.axis(1).parallelize(P.Unroll)
        t.axis(2).parallelize(P.TIDx)
    assert conditions.launch_axis_clashes(fusion) == []


def test_registers_count_32_bit_words():
    fusion, t1, _ = copy([300], dtype="float16")  # 150 registers
    assert conditions.register_budget(fusion) == []
    fusion, t1, _ = copy([200], dtype="float64")  # 400 registers
    (p,) = conditions.register_budget(fusion)
    assert p.values["registers"] == 400 and p.values["elements"] == 200 and p.values["limit"] == 255
    assert p.message == "T1 holds 400 registers per thread (200 float64 elements); the limit is 255"


def test_register_tensors_count_one_by_one():
    fusion, t1, t2 = copy([200])
    with fusion:
        t3 = tp.set(t2)
    assert conditions.register_budget(fusion) == []


def test_symbolic_registers_name_the_first_size_over_the_budget():
    fusion, t1, _ = copy(["M", 4])
    (p,) = conditions.symbolic_registers(fusion)
    assert dict(p.values) == {"M": 64, "registers": 256}
    fusion, t1, t2 = copy(["M", 4])
    for t in (t1, t2):
        t.split(0, 16)
        t.axis(0).parallelize(P.BIDx)
    assert conditions.symbolic_registers(fusion) == []  # 16 x 4 per thread


def test_unrolled_copies_include_constant_loops_inside_the_unroll():
    fusion, t1, t2 = copy([64, 48, 32])
    t2.axis(0).parallelize(P.Unroll)
    t2.axis(2).parallelize(P.TIDx)
    n, axes = conditions.unrolled_copies(t2)
    assert n == 64 * 48 and [a.static_extent for a in axes] == [64, 48]
    assert conditions.unrolled_copies(t1) == (1, [])  # serial loops outside any unroll
    t2.reorder({0: 1})  # the unrolled axis inside the serial one
    assert conditions.unrolled_copies(t2)[0] == 64


def test_symbolic_extents_are_not_unrolled():
    fusion, t1, t2 = copy(["N"])
    t2.axis(0).parallelize(P.Unroll)
    assert conditions.unrolled_copies(t2)[0] == 1
    assert conditions.unroll_lengths(fusion) == []


def test_unroll_limit_is_on_the_sum_of_statements():
    fusion, t1, t2 = copy([600])
    for t in (t1, t2):
        t.axis(0).parallelize(P.Unroll)
    (p,) = conditions.unroll_lengths(fusion)
    assert p.values == {"copies": 1200, "limit": 1024}


@pytest.mark.parametrize("factor, ok", [("N", True), ("F", False), (sympy.Symbol("N") + 1, True),
                                        (sympy.Symbol("x") + 1, False), (4, True)])
def test_split_factors_are_extent_symbols(factor, ok):
    fusion, t1, t2 = copy(["N", 32])
    t2.split(0, factor)
    problems = conditions.symbolic_factors(fusion)
    assert (problems == []) == ok
    if not ok:
        assert "its symbols: N" in problems[0].message


def test_declared_symbol_is_a_kernel_parameter():
    fusion, t1, t2 = copy([64, 32])
    fusion.symbol("F")
    for t in (t1, t2):
        t.split(0, "F")
        t.axis(2).parallelize(P.TIDx)
    t1.inline_at(2)
    kernel = tp.compile(fusion)
    assert any(p.symbol == "F" for p in kernel.ir.params)


def test_nest_reuses_the_last_loop_and_refuses_to_reopen_one():
    tree, conflict = loops.nest([([0, 1], "a"), ([0, 2], "b"), ([3], "c")])
    assert conflict is None
    assert [n.key for n in tree] == [0, 3] and [n.key for n in tree[0].body] == [1, 2]
    _, conflict = loops.nest([([0, 1], "a"), ([3], "b"), ([0], "c")])
    assert conflict == loops.NestConflict(2, 0)


def test_nest_reopens_a_launched_loop():
    _, conflict = loops.nest([([0, 1], "a"), ([3], "b"), ([0], "c")], reopenable=frozenset({0}))
    assert conflict is None


def _interleaved(outer):
    """rule_examples' LOOP-NEST-ORDER example with its outer axis parallelized as `outer`: T1 inlined
    at 1 shares that axis with T2 and T4, and T3 (not inlined) runs between them."""
    from tileproof.rule_examples import copy_chain

    fusion, t0, t1, t2 = copy_chain("interleaved", [8, 32])
    with fusion:
        t3 = tp.exp(t2)
        t4 = tp.add(t1, t3)
        fusion.add_output(t4)
    for t in (t1, t2, t3, t4):
        t.axis(1).parallelize(P.TIDx)
        if outer is not None:
            t.axis(0).parallelize(outer)
    t1.inline_at(1)
    return fusion


@pytest.mark.parametrize("outer", [P.BIDx, P.TIDy], ids=str)
def test_statements_sharing_a_thread_or_block_index_need_not_be_adjacent(outer):
    """No loop iterates a thread or block index: T1's value is this thread's whatever runs between it
    and T4, so the scope closes and reopens (simulated against the reference)."""
    import numpy as np
    from support.reduction_sim import run_kernel
    from tileproof.codegen.runtime.reference import reference

    fusion = _interleaved(outer)
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, report.codes
    ir = lower(fusion.snapshot(), get_target("sm_90a"), report.decisions).kernel
    x = np.random.default_rng(1).standard_normal((8, 32))
    for got, want in zip(run_kernel(ir, fusion, [x], {}), reference(fusion, [x])):
        np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=1e-6)
    source = tp.compile(fusion, "sm_90a").cuda_source
    assert source.count(f"// {'blockIdx.x' if outer is P.BIDx else 'threadIdx.y'} over 8U: T1 axis 0") == 2


def test_a_serial_loop_still_cannot_reopen():
    assert tp.verify(_interleaved(None), "sm_90a").codes == ["LOOP-NEST-ORDER"]


def test_a_vectorized_axis_with_only_threads_inside_it_is_covered_by_its_instruction():
    """(fuzz seed 977 case 1520: accepted, then InternalError) a tensor-memory store's Vectorize axis
    of one element left of its TIDy and TIDz axes: no loop runs inside it, the instruction covers
    it, and the kernel is the one with that axis on TIDx{1}."""
    def chain(vectorize: bool):
        with tp.Fusion("x1_warp_group_y_col_z") as fusion:
            tv0 = tp.make_contig_concrete_tensor([1, 128, 2])
            fusion.add_input(tv0)
            tv1 = tp.set(tv0)
            tv2 = tp.set(tv1)
            tv3 = tp.set(tv2)
            tv4 = tp.set(tv3)
            fusion.add_output(tv4)
        tv2.set_memory_type(tp.MemoryType.Tensor)
        for k, p in enumerate((P.TIDx, P.TIDy, P.TIDz)):
            tv4.axis(k).parallelize(p)
        tp.parallelize_all_like(tv4)
        tv2.set_tmem_dim_sep_pos(2)
        if vectorize:
            tv2.axis(0).parallelize(P.Vectorize)
        return fusion

    sources = [tp.compile(chain(v), "sm_100a").cuda_source for v in (False, True)]
    strip = [[line for line in s.splitlines() if "threadIdx.x over 1U" not in line] for s in sources]
    assert strip[0] == strip[1]


def test_execution_order_puts_inlined_producers_last():
    with tp.Fusion("order") as fusion:
        a = tp.make_contig_concrete_tensor([8, 32])
        fusion.add_input(a)
        t1 = tp.set(a)
        t2 = tp.set(a)
        t3 = tp.add(t1, t2)
        fusion.add_output(t3)
    t1.inline_at(1)
    assert [t.name for t in loops.execution_order(fusion)] == ["T2", "T1", "T3"]


def test_loop_groups_join_inlined_axes_only():
    fusion, t1, t2 = copy([8, 32])
    t1.inline_at(1)
    groups = loops.loop_groups(fusion)
    assert groups.of[("T1", 0)] is groups.of[("T2", 0)]
    assert groups.of[("T1", 1)] is not groups.of[("T2", 1)]
    assert [g.index for g in groups.groups] == [0, 1, 2]


def test_global_intermediate_and_unsupported_ops_name_the_op():
    fusion, t1, t2 = copy([8, 32], dtype="int32")
    t1.set_memory_type(tp.MemoryType.Global)
    (p,) = conditions.global_intermediates(fusion)
    assert p.message == "T1 is an intermediate in global memory, read by T2"
    with tp.Fusion("exp_int") as fusion:
        a = tp.make_contig_concrete_tensor([8], dtype="int32")
        fusion.add_input(a)
        with pytest.raises(tp.ScheduleError, match="exp: a .T0. is int32; exp is computed on floating-point types"):
            tp.exp(a)  # refused at the door (model/ops.py FLOAT_UNARY), never lowered


# -- what codegen/lower/tma.py and codegen/lower/tmem.py need (found by probing symbolic sizes) ------------------

def tmem_chain(name, shape):
    with tp.Fusion(name) as fusion:
        t0 = tp.make_tensor(list(shape), contiguity=True)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        t3 = tp.set(t2)
        t4 = tp.set(t3)
        fusion.add_output(t4)
    t2.set_memory_type(tp.MemoryType.Tensor)
    return fusion, (t1, t2, t3, t4)


def refused_as_unsupported(fusion, target, fragment):
    report = tp.verify(fusion, target)
    assert report.codes == ["LOWERING-SUPPORTED"], [d.message for d in report.errors]
    assert any(fragment in d.message for d in report.errors), [d.message for d in report.errors]
    with pytest.raises(tp.UnsupportedSchedule):
        lower(fusion.snapshot(), get_target(target))


def test_symbolic_tensor_memory_columns():
    fusion, (t1, t2, t3, t4) = tmem_chain("symbolic_columns", [128, "N"])
    fusion.assume("N <= 64")
    t4.axis(0).parallelize(P.TIDx)
    tp.parallelize_all_like(t4)
    t2.set_tmem_dim_sep_pos(1)
    t1.inline_at(2)
    t2.inline_at(1)
    t3.inline_at(2)
    refused_as_unsupported(fusion, "sm_100a", "T2 needs N tensor-memory columns, a symbolic count")


def test_broadcast_axis_on_a_wider_thread_index_in_a_tensor_memory_access():
    fusion, (t1, t2, t3, t4) = tmem_chain("broadcast_on_tidy", [1, 128, 2])
    with fusion:
        w0 = tp.make_contig_concrete_tensor([2, 32])
        fusion.add_input(w0)
        w1 = tp.set(w0)
        fusion.add_output(w1)
    t4.axis(0).parallelize(P.TIDy)
    t4.axis(1).parallelize(P.TIDx)
    tp.parallelize_all_like(t4)
    w1.axis(0).parallelize(P.TIDy)
    w1.axis(1).parallelize(P.TIDx)
    t2.set_tmem_dim_sep_pos(2)
    refused_as_unsupported(fusion, "sm_100a", "T2's broadcast axis TIDy{1} is bound to TIDy, which the kernel "
                                              "launches with 2")


def test_tma_load_from_a_symbolic_number_of_threads():
    (case,) = [c for c in INVALID if c.name == "tma_load_from_a_symbolic_number_of_threads"]
    refused_as_unsupported(case.build(), case.target, "T1 issues its TMA load from K threads")


def test_ldmatrix_whose_vectorize_axis_is_not_innermost():
    """Found by benchmarks/fuzz.py (the mutated family): the LDSM rules accept the reordered
    fragment, but an ldmatrix is issued from the loop domain's innermost Vectorize axis."""
    (case,) = [c for c in discover([str(ROOT / "examples" / "valid" / "ldst_matrix.py")])
               if c.name == "ldmatrix_x4_two_warps_swizzled"]
    fusion = case.build()
    fusion.tensor("T2").reorder([1, 0])
    refused_as_unsupported(fusion, case.target, "its Vectorize axis is axis 0 of 2")


def test_stmatrix_predicated_by_a_single_writer():
    """Found by benchmarks/fuzz.py (mutated): T3 on TIDy launches blockDim.y = 4 while the
    stmatrix tensor T2 binds no TIDy axis, so one row of threads would store it (threadIdx.y == 0)."""
    (case,) = [c for c in discover([str(ROOT / "examples" / "valid" / "ldst_matrix.py")]) if c.name == "stmatrix_x4"]
    fusion = case.build()
    tp.propagate_transforms(fusion.tensor("T3"))
    fusion.tensor("T3").axis(1).parallelize(P.TIDy)
    refused_as_unsupported(fusion, case.target, "threadIdx.y == 0 (single writer); tileproof emits stmatrix")


def test_propagation_onto_an_inlined_tensor_is_refused_and_changes_nothing():
    """Found by benchmarks/fuzz.py: propagate_transforms replayed a merge on an inlined producer,
    leaving its compute-at position past its loop axes (INLINE-LOOP-MAP crashed on it, then reported
    it). nvFuser's TransformPropagator refuses a replay that changes axes left of a compute-at or
    max producer position (validateDomain); so does tileproof, at the call, leaving every tensor as
    it was."""
    with tp.Fusion("copy3") as fusion:
        t0 = tp.make_tensor([12, 2, 8], contiguity=True); fusion.add_input(t0)
        t1 = tp.set(t0); t2 = tp.set(t1); t3 = tp.set(t2)
        fusion.add_output(t3)
    t1.inline_at(1)
    t3.merge(0)  # T3's producer T2 is not inlined: T3's axes are its own
    loops = {t.name: list(t.loop) for t in fusion.tensors}
    with pytest.raises(tp.ScheduleError, match=r"would change T1's loop axis 0 \(.*\), left of its "
                                                r"compute-at position 1; propagate before inlining"):
        tp.propagate_transforms(t3)
    assert {t.name: list(t.loop) for t in fusion.tensors} == loops
    t1.inline_at(0)
    tp.propagate_transforms(t3)  # before inlining, as nvFuser's schedulers do
    assert [len(t.loop) for t in (t1, t2, t3)] == [2, 2, 2]
    tp.inline_most(fusion)
    assert tp.verify(fusion).ok


def test_transforms_inside_a_producer_s_inlining_are_refused():
    """nvFuser's split, merge and reorder refuse axes inside the max producer position (where a
    producer is inlined into the tensor), as they refuse those inside its own compute-at position."""
    fusion, t1, t2 = copy([12, 2, 8])
    t1.inline_at(1)
    t2.reorder([0, 2, 1])  # outside the producer position: allowed
    t2.split(1, 4)
    with pytest.raises(tp.ScheduleError, match="reorder: axis 0 of T2 is inside the loops its producer T1"):
        t2.reorder([1, 0, 2, 3])
    with pytest.raises(tp.ScheduleError, match="split: axis 0 of T2 is inside the loops its producer T1"):
        t2.split(0, 4)
    logical = list(t2.logical)
    with pytest.raises(tp.ScheduleError, match="set_loop_domain: T2's producer T1 is inlined into its first 1"):
        t2.set_loop_domain([logical[1], logical[0], logical[2]])
    t2.set_loop_domain(logical)  # the inlined axis stays: allowed


def test_caching_an_inlined_tensor_is_refused_as_in_nvfuser():
    """nvFuser's cacheAfter and cacheBefore: "Caching computed-at tensors is not allowed. Apply
    caching before computeAt" (also for a fusion input read by an inlined tensor, and a tensor whose
    producer is inlined): the cache's fresh loops would not be those its neighbours share."""
    fusion, t1, t2 = copy([12, 8])
    t1.inline_at(1)
    with pytest.raises(tp.ScheduleError, match=r"cache_after: T1 is inlined at position 1; cache T1 before inlining"):
        t1.cache_after()
    with pytest.raises(tp.ScheduleError, match=r"cache_after: T1, beside the cache of T0, is inlined at position 1"):
        fusion.inputs[0].cache_after()
    with pytest.raises(tp.ScheduleError, match=r"cache_before: T1, beside the cache of T2, is inlined at position 1"):
        t2.cache_before()
    assert [t.name for t in fusion.tensors] == ["T0", "T1", "T2"]
    fusion, t1, t2 = copy([12, 8])
    t3 = t1.cache_after()  # before inlining: allowed
    tp.inline_most(fusion)
    assert t3.compute_at == 2 and tp.verify(fusion).ok


def test_a_loop_domain_changed_behind_an_inlining_is_reported_not_lowered():
    """No public call changes loop axes left of a compute-at position; a loop domain changed
    behind the API's back is reported by INLINE-LOOP-MAP (it crashed before), and not lowered."""
    fusion, t1, t2 = copy([12, 2])
    t1.inline_at(2)
    t1.loop = t1.loop[:1]  # what no scheduling call does any more
    report = tp.verify(fusion)
    (found,) = [d for d in report.errors if d.code == "INLINE-LOOP-MAP"]
    assert found.message == "T1 is inlined at position 2 but has 1 loop axes: its loop domain changed after the inlining"
    with pytest.raises(NotLowered):
        lower(fusion.snapshot(), get_target("sm_90a"))


def test_an_unknown_factor_is_reported_alone():
    """With a split factor the kernel cannot be given, no other claim is about a kernel that
    can exist: SYMBOLIC-FACTOR is reported and the other rules are listed as not run (they
    took up to 2 s on fuzzed schedules with factor x + 1)."""
    fusion, t1, t2 = copy([64, 32])
    t1.split(0, "F")
    t1.axis(0).parallelize(P.TIDx)  # t2 reads other threads' registers: THREAD-VISIBILITY alone
    report = tp.verify(fusion)
    assert report.codes == ["SYMBOLIC-FACTOR"]
    assert "THREAD-VISIBILITY" in report.rules_not_run and report.rules_run == ["SYMBOLIC-FACTOR"]
    assert "other rules were not run" in str(report.errors[0].notes)
    fusion.symbol("F")
    assert "THREAD-VISIBILITY" in tp.verify(fusion).codes


def test_lowering_refuses_an_unknown_factor_first_as_the_verifier_reports_it_alone():
    """Found by the random schedules above: a global intermediate and a split by an unknown factor;
    the verifier reported SYMBOLIC-FACTOR alone while lowering raised GLOBAL-INTERMEDIATE first."""
    with tp.Fusion("factor_and_global") as fusion:
        t0 = tp.make_tensor([64], contiguity=True); fusion.add_input(t0)
        t1 = tp.set(t0); t2 = tp.set(t1); t3 = tp.set(t2)
        fusion.add_output(t3)
    t2.set_memory_type(tp.MemoryType.Global)
    t3.split(0, "F")
    assert tp.verify(fusion).codes == ["SYMBOLIC-FACTOR"]
    with pytest.raises(NotLowered) as e:
        lower(fusion.snapshot(), get_target("sm_90a"))
    assert e.value.rule == "SYMBOLIC-FACTOR"


def test_a_tma_box_is_one_statement_of_an_unrolled_loop():
    """The Bulk axes of a TMA store are the box of one instruction: a loop of four unrolled box
    stores is four statements, not 4 x 128 x 64 (the stmatrix epilogue staged box by box)."""
    ws = tp.WarpSpecialized(P.TIDy, num_registers=(40, 232))
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=3, prefetch=1, warp_specialized=ws),
                              epilogue=Epilogue(dtype=tp.bfloat16, stmatrix=True, by_box=True))
    fusion = hopper_gemm(256, 256, 128, params)
    out = fusion.outputs[0]
    n, axes = conditions.unrolled_copies(out)
    assert n == 4 and [a.parallel_type for a in axes] == [P.Unroll]
    assert conditions.unroll_lengths(fusion) == []


def test_a_loop_split_by_a_loop_around_it_says_which():
    """A TMA tile's broadcast axis made Bulk (fuzz seed 120 case 21) leaves it out of the block loop
    its K loop sits in for its inlined neighbours: nothing runs between them, so the message names
    the loop around it and the axis that is no loop (it read "split in two:  runs between T4 and
    T5", an empty list)."""
    fusion = example_module("valid", "wgmma").hopper_matmul_pipelined("128x256", 3)
    fusion.tensor("T5").axis(0).parallelize(tp.ParallelType.Bulk)
    (d,) = [d for d in tp.verify(fusion, "sm_90a").errors if d.code == "LOOP-NEST-ORDER"]
    assert d.message == ("the loop of T4 axis 2, T5 axis 2, T2 axis 2 would be split in two: T5 is in it but not in "
                         "the loop of T4 axis 0, T2 axis 0, T3 axis 0 around it, which T4 share (T5 axis 0 there is "
                         "Bulk{1}, not a loop)")
    assert d.hint.startswith("give T5 that loop too")
