"""Reports that name the missing step (issue 35 item 4): a Hopper GEMM tile with one scheduling
call left out is rejected with that call as the help of the first diagnostic, every other
finding it causes marked as following from it, errors before warnings."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.reports import report_to_text
from tileproof.rule_examples import hopper_gemm_operands

from support.examples import example_module

MACRO = tp.MmaMacro.Hopper_64_128_16


def hopper_tile(*, fragment: bool = True, tiles: tp.MemoryType | None = tp.MemoryType.Shared) -> tp.Fusion:
    """rule_examples.hopper_gemm_tile at 128 x 128 x 256, with d's set_allocation_domain(
    tp.mma_output_allocation(d), True) left out (`fragment`), or the tiles' set_memory_type
    given another memory type or left out (`tiles`: None)."""
    fusion, sa, sb, d, out = hopper_gemm_operands("gemm_tile", 128, 128, 256)
    for t in (sa, sb, d):
        t.split(2, 64).reorder({2: 0})  # [K loop, M, N, 64 of K]
    for t in (sa, sb):
        if tiles is not None:
            t.set_memory_type(tiles)
        t.reorder({2: 1} if t is sa else {})
        t.apply_mma_swizzle_for_tma_load(tp.MmaInputSmemSwizzle.B128)
        for i in t.get_loop_domain()[2:]:
            i.parallelize(tp.ParallelType.Bulk)
        t.set_allocation_domain(t.get_loop_domain(), True)
    d.split(3, 16).split(1, 64)  # [K loop, warpgroup, M64, N, kk, K16]
    d.reorder({4: 2})  # [K loop, warpgroup, kk, M64, N, K16]
    if fragment:
        d.set_allocation_domain(tp.mma_output_allocation(d), True)
    d.axis(1).parallelize(tp.ParallelType.TIDy)
    d.axis(2).parallelize(tp.ParallelType.Unroll)
    for i in range(3, 6):
        d.axis(i).parallelize(tp.ParallelType.Mma)
    out.split(0, 64)
    tp.schedule_mma_fragment(out, MACRO, "C")
    out.axis(0).parallelize(tp.ParallelType.TIDy)
    for t in (sa, sb):
        t.inline_at(1)
    return fusion


def cause_of(fusion, change, code: str):
    """(the first diagnostic, the report) of `fusion` verified after `change(fusion)`: the
    diagnostic a root cause of rule `code` (one with a verified fix)."""
    change(fusion)
    report = tp.verify(fusion, "sm_90a")
    cause = report.diagnostics[0]
    assert cause.code == code and cause.id is not None, (cause.code, cause.message)
    return cause, report


def test_the_whole_schedule_is_accepted():
    assert tp.verify(hopper_tile(), "sm_90a").ok


def test_accumulators_not_in_the_fragment_name_mma_output_allocation():
    """Accepted before, with 8192 accumulators a thread (REGISTER-BUDGET and
    MMA-REGISTER-PRESSURE warnings only)."""
    report = tp.verify(hopper_tile(fragment=False), "sm_90a")
    assert report.codes == ["MMA-ACCUM-LAYOUT"]
    cause = report.diagnostics[0]
    assert cause.code == "MMA-ACCUM-LAYOUT" and cause.tensor == "T2" and cause.id is not None
    assert "8192 accumulators a thread" in cause.message and "holds 64" in cause.message
    assert "T2.set_allocation_domain(tp.mma_output_allocation(T2), True)" in cause.hint
    assert "verified" in cause.hint
    follows = {d.code for d in report.diagnostics if d.follows_from == cause.id}
    assert {"REGISTER-BUDGET", "MMA-REGISTER-PRESSURE"} <= follows  # the 8192 registers are this mistake


def test_tma_tiles_not_in_shared_memory_name_set_memory_type_first():
    report = tp.verify(hopper_tile(tiles=None), "sm_90a")
    assert report.codes == ["MMA-OPERAND-LAYOUT", "TMA-VIEW"]
    cause, rest = report.diagnostics[0], report.diagnostics[1:]
    assert cause.code == "TMA-VIEW" and cause.id is not None
    assert ("T4.set_memory_type(tp.MemoryType.Shared) and T5.set_memory_type(tp.MemoryType.Shared)"
            in cause.hint)
    # one block: T5's TMA-VIEW, both operands' MMA-OPERAND-LAYOUT and the register warnings of the
    # tiles held in registers follow from it; only the unrelated coalescing warning stands alone
    assert {(d.code, d.tensor) for d in rest if d.follows_from == cause.id} >= {
        ("TMA-VIEW", "T5"), ("MMA-OPERAND-LAYOUT", "T2"), ("REGISTER-BUDGET", "T4"), ("REGISTER-BUDGET", "T5")}
    assert all(d.follows_from == cause.id for d in rest if d.is_error)
    text = report_to_text(report)
    assert text.index("TMA-VIEW") < text.index("MMA-OPERAND-LAYOUT")
    assert "follows from" in text


def test_tma_tiles_set_to_global_memory_name_set_memory_type_shared_first():
    """The tiles put in global memory (each TMA then a copy from global to global) broke four rules
    and the report began with GLOBAL-INTERMEDIATE, with no cause: the tile is the TMA's end that is
    neither a fusion input nor output, wherever it was put."""
    report = tp.verify(hopper_tile(tiles=tp.MemoryType.Global), "sm_90a")
    assert set(report.codes) == {"GLOBAL-INTERMEDIATE", "GLOBAL-VISIBILITY", "MMA-OPERAND-LAYOUT", "TMA-VIEW"}
    cause, rest = report.diagnostics[0], report.diagnostics[1:]
    assert (cause.code, cause.tensor) == ("TMA-VIEW", "T4") and cause.id is not None
    assert ("T4.set_memory_type(tp.MemoryType.Shared) and T5.set_memory_type(tp.MemoryType.Shared)"
            in cause.hint)
    assert all(d.follows_from == cause.id for d in rest if d.is_error)


@pytest.mark.parametrize("left_out", [dict(fragment=False), dict(tiles=None)])
def test_errors_come_before_warnings(left_out):
    """Each error's block (the cause, then what follows from it, errors first) before the
    warnings that stand alone."""
    report = tp.verify(hopper_tile(**left_out), "sm_90a")
    alone = [d.is_error for d in report.diagnostics if d.follows_from is None]
    assert alone == sorted(alone, reverse=True) and alone[0]
    for d in report.diagnostics:
        if d.id is not None:
            block = [x.is_error for x in report.diagnostics if x.follows_from == d.id]
            assert block == sorted(block, reverse=True)


def test_a_finding_repeated_on_inlined_producers_is_one_block():
    """Fuzz seed 120 case 28 (mutated): a transposed tile's consumer T2 given a second BIDx axis;
    T1, inlined into it, shares that loop, and PARALLEL-TYPE-UNIQUE found the same on both, from
    the one line (two blocks with the same help; then one, the second a repeat noted on the first).
    The fix is verified on the schedule as written, where T1's axis is serial (verify's snapshot
    gives it the loop's BIDx): T2's axis made serial again, and T2's finding follows from it."""
    fusion = example_module("valid", "circular_copies").transposed_tile_no_prefetch()
    fusion.tensor("T2").axis(1).parallelize(tp.ParallelType.BIDx)
    report = tp.verify(fusion, "sm_90a")
    cause, repeat = [d for d in report.errors if d.code == "PARALLEL-TYPE-UNIQUE"]
    assert "verified: T2.axis(1).parallelize(tp.ParallelType.Serial)" in cause.hint
    assert repeat.tensor == "T2" and repeat.follows_from == cause.id
    assert [d.follows_from for d in report.errors] == [None] + [cause.id] * (len(report.errors) - 1)


def test_a_register_tile_set_to_global_memory_names_set_memory_type_local_first():
    """ldmatrix's registers (fuzz seed 120 case 88) and a wgmma's accumulators (case 109) set to
    global memory: each also made a global intermediate (GLOBAL-INTERMEDIATE, reported first, with
    no cause). The instruction's rule proposes the one call, verified, and the intermediate follows."""
    global_t2 = lambda f: f.tensor("T2").set_memory_type(tp.MemoryType.Global)  # noqa: E731
    cause, report = cause_of(example_module("valid", "ldst_matrix").ldmatrix_x1(), global_t2, "LDSM-THREAD-ROWS")
    assert "T2.set_memory_type(tp.MemoryType.Local)" in cause.hint and "verified" in cause.hint
    assert [d.follows_from for d in report.errors[1:]] == [cause.id] and report.errors[1].code == "GLOBAL-INTERMEDIATE"

    cause, report = cause_of(hopper_tile(), global_t2, "MMA-WARP-COLLECTIVE")
    assert "T2.set_memory_type(tp.MemoryType.Local) (verified" in cause.hint
    assert all(d.follows_from == cause.id for d in report.errors[1:]) and len(report.errors) > 1


def test_an_index_bound_twice_names_the_parallelize_that_restores_the_loop_s_type():
    """Fuzz seed 121 case 242 (mutated): the wgmma matmul's accumulator axis 1 (BIDy, as its
    inlined tiles have it) parallelized on TIDy, which its axis 3 already takes: PARALLEL-TYPE-
    UNIQUE, LAUNCH-THREADS (1152 threads) and INLINE-PARALLEL-MATCH, three blocks. The verified
    fix gives the axis its loop-mates' type back, and the other two follow from it."""
    cause, report = cause_of(example_module("valid", "wgmma").hopper_matmul_m_major_a(),
                             lambda f: f.tensor("T2").axis(1).parallelize(tp.ParallelType.TIDy), "PARALLEL-TYPE-UNIQUE")
    assert "T2.axis(1).parallelize(tp.ParallelType.BIDy)" in cause.hint
    assert {d.code for d in report.errors if d.follows_from == cause.id} == {"LAUNCH-THREADS", "INLINE-PARALLEL-MATCH"}


def test_bulk_on_a_reduction_names_the_parallelize_that_takes_it_back():
    """Fuzz seed 122 case 140 (mutated): a row sum's reduction axis parallelized as Bulk, which no
    TMA writes: TMA-BULK-PLACEMENT and REDUCTION-PARALLEL, two blocks. Both rules verify the call
    that makes the axis serial again; the first reported is the cause, the other follows."""
    cause, report = cause_of(example_module("valid", "reductions").row_sum_across_blocks_then_scaled(),
                             lambda f: f.tensor("T1").axis(1).parallelize(tp.ParallelType.Bulk), "REDUCTION-PARALLEL")
    assert "verified: T1.axis(1).parallelize(tp.ParallelType.Serial)" in cause.hint
    assert [d.code for d in report.errors if d.follows_from == cause.id] == ["TMA-BULK-PLACEMENT"]


@pytest.mark.parametrize("stem, name, axis, call, code, follows", [
    # fuzz 123/238: a thread axis made a vector of 32 floats, whose elements another thread wrote: TIDx again
    ("lowering", "inlined_axis_on_bidx_in_both", 1, "T2.axis(1).parallelize(tp.ParallelType.TIDx)", "VECTORIZE-WIDTH",
     "THREAD-VISIBILITY"),
    # fuzz 123/0: a vector with a loop of the thread inside it, sharing its producer's loop: serial again
    # (INLINE-PARALLEL-MATCH, reported first, verifies the same call)
    ("gsg_copy", "gsg_copy_inline1", 0, "T2.axis(0).parallelize(tp.ParallelType.Serial)", "INLINE-PARALLEL-MATCH",
     "VECTORIZE-WIDTH"),
])
def test_a_vectorize_on_the_wrong_axis_names_the_parallelize_that_takes_it_back(stem, name, axis, call, code, follows):
    cause, report = cause_of(getattr(example_module("valid", stem), name)(),
                             lambda f: f.tensor("T2").axis(axis).parallelize(tp.ParallelType.Vectorize), code)
    assert f"verified: {call}" in cause.hint
    assert [d.code for d in report.errors if d.follows_from == cause.id] == [follows]


def test_an_unroll_on_a_thread_s_loop_names_the_parallelize_that_gives_the_loop_one_type():
    """Fuzz seed 124 case 135 (mutated): a row statement's thread axis made Unroll while the loop
    it shares through inlining is TIDx: INLINE-PARALLEL-MATCH and two THREAD-VISIBILITY errors,
    three blocks. The verified call gives the axis the loop's type back; both reads follow."""
    cause, report = cause_of(example_module("valid", "attention").online_row_logsumexp(),
                             lambda f: f.tensor("T7").axis(0).parallelize(tp.ParallelType.Unroll), "INLINE-PARALLEL-MATCH")
    assert "verified: T7.axis(0).parallelize(tp.ParallelType.TIDx)" in cause.hint
    assert [d.code for d in report.errors if d.follows_from == cause.id] == ["THREAD-VISIBILITY"] * 2


def test_a_fix_s_copy_caps_each_query():
    """A fix's copy is judged by its verdicts only, each query within causes.FIX_QUERY_MS (an
    undecided claim counts as still failing): looking for the consequences of several causes re-ran
    ALLOCATION-DISTINCT on each copy at full length (fuzz 116/469: 2.6 -> 6.9 s; 4.0 s capped)."""
    from tileproof.verifier import causes
    from tileproof.verifier.context import VerifyContext
    from tileproof.model.targets import get_target

    fusion = hopper_tile(tiles=None)
    capped = VerifyContext(fusion.snapshot(), get_target("sm_90a"), query_ms=causes.FIX_QUERY_MS)
    assert capped.query([]).timeout_ms == causes.FIX_QUERY_MS
    assert capped.query([], timeout_ms=50).timeout_ms == 50
    assert VerifyContext(fusion.snapshot(), get_target("sm_90a")).query([]).timeout_ms > causes.FIX_QUERY_MS
    report = tp.verify(fusion, "sm_90a")  # the TMA-VIEW cause still verified within the cap
    assert report.diagnostics[0].code == "TMA-VIEW" and report.diagnostics[0].id is not None


def test_a_box_axis_made_serial_names_the_parallelize_that_makes_the_box_whole():
    """Fuzz seed 125 case 99 (report_causes): a TMA tile's innermost box axis made Unroll leaves a
    strided, short box: TMA-ELEMENT-STRIDE, TMA-WHOLE-TILES, TMA-SWIZZLE-LAYOUT, SMEM-ALIGNMENT and
    TMA-COORD-ALIGN, five blocks. The verified call gives the box its axis back; the rest follow."""
    fusion = example_module("valid", "tcgen05").tcgen05_tile(64)
    assert tp.verify(fusion, "sm_100a").ok
    fusion.tensor("T6").axis(5).parallelize(tp.ParallelType.Unroll)
    report = tp.verify(fusion, "sm_100a")
    cause = report.errors[0]
    assert cause.code == "TMA-ELEMENT-STRIDE" and cause.id is not None
    assert "verified, T6.axis(5).parallelize(tp.ParallelType.Bulk) makes the box whole again" in cause.hint
    assert {d.code for d in report.errors if d.follows_from == cause.id} == {
        "TMA-WHOLE-TILES", "TMA-SWIZZLE-LAYOUT", "SMEM-ALIGNMENT", "TMA-COORD-ALIGN"}


@pytest.mark.parametrize("stem, name, tensor, axis, ptype, code, follows", [
    # fuzz 125/104: a box axis of a TMA load made serial: the tile is no longer contiguous
    ("tma_boxes", "tma_strided_tile", "T1", 3, "Serial", "TMA-TILE-CONTIGUITY", {"TMA-WHOLE-TILES", "SMEM-ALIGNMENT"}),
    # fuzz 125/235: a box axis of a TMA store given TIDy: a 4-byte inner box
    ("tma_smem", "figure14d_store_split_by_whole_extent", "T2", 3, "TIDy", "TMA-INNER-BYTES",
     {"SMEM-ALIGNMENT", "TMA-COORD-ALIGN"}),
])
def test_a_box_axis_given_another_type_names_bulk_over_its_loop_mates_type(stem, name, tensor, axis, ptype, code,
                                                                          follows):
    """The box's own type, Bulk, is proposed, not the type of the axes mapped to it (the store's
    source has TIDx there)."""
    cause, report = cause_of(getattr(example_module("valid", stem), name)(),
                             lambda f: f.tensor(tensor).axis(axis).parallelize(getattr(tp.ParallelType, ptype)), code)
    assert f"verified, {tensor}.axis({axis}).parallelize(tp.ParallelType.Bulk) makes the box whole again" in cause.hint
    assert {d.code for d in report.errors if d.follows_from == cause.id} == follows


def test_a_shared_copy_of_an_input_set_to_global_memory_names_set_memory_type_shared_first():
    """Fuzz seed 125 case 255 (report_causes): ldmatrix's shared tile, a copy of the fusion input,
    set to global memory: verify reads it in place as a view of the input, so the fix was not
    proposed (it was taken for an input); the schedule as written is changed and snapshotted
    again, the fix holds, and the two VIEW-DISCONTIGUOUS-MERGE errors follow from it."""
    cause, report = cause_of(example_module("valid", "ldst_matrix").ldmatrix_x4(),
                             lambda f: f.tensor("T1").set_memory_type(tp.MemoryType.Global), "LDSM-THREAD-ROWS")
    assert "T1.set_memory_type(tp.MemoryType.Shared) (verified" in cause.hint
    assert [d.code for d in report.errors if d.follows_from == cause.id] == ["VIEW-DISCONTIGUOUS-MERGE"] * 2


def test_a_fix_names_the_axis_of_the_schedule_as_written():
    """Fuzz seed 125 case 234: verify's loops of the TMA tile T4 hold a broadcast axis that inlining
    inserted first ([b, BIDz, Vectorize, Bulk]); the user's are [BIDz, Vectorize, Bulk]. The
    verified call names the user's axis 1 (axis 2 would make the box BIDx), and the Bulk
    placement error follows from it."""
    cause, report = cause_of(example_module("valid", "tma_smem").tma_broadcast_discontiguous(),
                             lambda f: f.tensor("T4").axis(1).parallelize(tp.ParallelType.Vectorize),
                             "INLINE-PARALLEL-MATCH")
    assert "verified: T4.axis(1).parallelize(tp.ParallelType.BIDx)" in cause.hint
    assert [d.code for d in report.errors if d.follows_from == cause.id] == ["TMA-BULK-PLACEMENT"]


@pytest.mark.parametrize("name, size, tensor, memory, follows", [
    # fuzz 125/241: cp.async's destination set to global memory is also a global intermediate
    ("moye_tf32_tile", "16x8x8", "T3", "Global", ["GLOBAL-INTERMEDIATE"]),
    # fuzz 125/154: a circular-buffered cp.async destination set to registers
    ("moye_tf32_double_buffered", "symbolic", "T4", "Local", ["LOWERING-SUPPORTED", "THREAD-VISIBILITY"]),
])
def test_a_cp_async_destination_in_another_memory_names_set_memory_type_shared_first(name, size, tensor, memory,
                                                                                   follows):
    """cp.async copies global into shared memory: its destination set to another memory breaks
    that and more; the verified call that puts it back is the cause."""
    cause, report = cause_of(getattr(example_module("valid", "mma"), name)(size),
                             lambda f: f.tensor(tensor).set_memory_type(getattr(tp.MemoryType, memory)),
                             "LOWERING-SUPPORTED")
    assert cause.hint.startswith(f"{tensor}.set_memory_type(tp.MemoryType.Shared) (verified")
    assert sorted(d.code for d in report.errors if d.follows_from == cause.id) == follows


def test_an_mma_axis_bound_to_a_thread_index_names_the_parallelize_that_gives_it_mma_back():
    """Fuzz seed 125 case 3: the wgmma accumulator's K axis of the instruction tile given TIDy,
    which the warpgroups already take: PARALLEL-TYPE-UNIQUE, and the instruction's shape, registers,
    allocation and launch break with it (four blocks; the fix proposed was Serial, which verified
    nothing). The axis gets Mma back, verified, and the rest follow."""
    cause, report = cause_of(example_module("valid", "wgmma").hopper_matmul_warp_specialized(),
                             lambda f: f.tensor("T2").axis(8).parallelize(tp.ParallelType.TIDy), "PARALLEL-TYPE-UNIQUE")
    assert "verified: T2.axis(8).parallelize(tp.ParallelType.Mma)" in cause.hint
    assert all(d.follows_from == cause.id for d in report.errors[1:]) and len(report.errors) > 5


def test_an_instruction_axis_vectorized_names_the_parallelize_that_gives_it_mma_back():
    """Fuzz seed 120 case 96: the accumulator's N axis of the instruction tile made Vectorize:
    MMA-SHAPE, ALLOCATION-DISTINCT, REDUCTION-PARALLEL and REDUCTION-ACCUMULATOR, four blocks.
    MMA-SHAPE proposes the axis's Mma back, verified, and the others follow."""
    cause, report = cause_of(example_module("valid", "wgmma").hopper_matmul_m_tiles_in_a_loop(),
                             lambda f: f.tensor("T2").axis(6).parallelize(tp.ParallelType.Vectorize), "MMA-SHAPE")
    assert "verified: T2.axis(6).parallelize(tp.ParallelType.Mma) makes the three innermost axes" in cause.hint
    assert {d.code for d in report.errors if d.follows_from == cause.id} == {
        "ALLOCATION-DISTINCT", "REDUCTION-PARALLEL", "REDUCTION-ACCUMULATOR"}


def test_a_reduction_s_axis_vectorized_names_the_parallelize_that_takes_it_back():
    """Fuzz seed 120 case 156 (draws without Hypothesis's module constants): a column max's
    iteration axis made Vectorize: REDUCTION-PARALLEL and UNROLL-LENGTH, two blocks. The verified
    call gives the axis its serial type back and the unroll length follows."""
    fusion = example_module("valid", "reductions").int8_column_max()
    cause, report = cause_of(fusion, lambda f: f.tensor("T1").axis(0).parallelize(tp.ParallelType.Vectorize),
                             "REDUCTION-PARALLEL")
    assert "verified: T1.axis(0).parallelize(tp.ParallelType.Serial)" in cause.hint
    assert [d.code for d in report.errors if d.follows_from == cause.id] == ["UNROLL-LENGTH"]


def test_a_type_a_loop_mate_gave_names_the_mate_as_written():
    """Fuzz seed 120 case 85: a K-loop tile T4 inlined with the accumulator's reduction loop given
    BIDx; verify gives the loop's type to T2's serial axis, so REDUCTION-PARALLEL finds it on T2,
    where the schedule as written has it serial: the verified call is on T4, the mate that has
    BIDx as written, and the circular loop's and the grid reduction's findings follow."""
    cause, report = cause_of(example_module("valid", "wgmma").hopper_matmul_m_tiles_in_a_loop(),
                             lambda f: f.tensor("T4").axis(2).parallelize(tp.ParallelType.BIDx), "REDUCTION-PARALLEL")
    assert "verified: T4.axis(2).parallelize(tp.ParallelType.Serial)" in cause.hint
    assert {d.code for d in report.errors if d.follows_from == cause.id} == {"PIPELINE-STAGES", "REDUCTION-GRID"}


def test_bulk_on_a_broadcast_axis_of_a_tma_tile_names_its_loop_s_type():
    """Fuzz seed 120 case 21: a TMA tile's broadcast axis (inlined with BIDx loops) made Bulk:
    TMA-BULK-PLACEMENT, LOWERING-SUPPORTED and LOOP-NEST-ORDER, three blocks. The verified call
    gives the axis its loop's type back; the other two follow."""
    fusion = example_module("valid", "wgmma").hopper_matmul_pipelined("128x256", 3)
    cause, report = cause_of(fusion, lambda f: f.tensor("T5").axis(0).parallelize(tp.ParallelType.Bulk),
                             "TMA-BULK-PLACEMENT")
    assert "verified: T5.axis(0).parallelize(tp.ParallelType.BIDx)" in cause.hint
    assert {d.code for d in report.errors if d.follows_from == cause.id} == {"LOOP-NEST-ORDER", "LOWERING-SUPPORTED"}


def test_a_tma_tile_s_loop_axis_vectorized_names_its_serial_type_not_bulk():
    """Fuzz seed 120 case 360: a TMA tile's circular (K) loop axis, left of its box, made Vectorize:
    TMA-BULK-PLACEMENT proposed Bulk there, which its rules accepted but which leaves the circular
    loop broken (PIPELINE-STAGES stayed: three blocks). Left of the box the axis gets its loop's
    serial type back, and the loop's findings follow."""
    cause, report = cause_of(example_module("valid", "wgmma").hopper_matmul_warp_specialized_cluster_spread(),
                             lambda f: f.tensor("T4").axis(3).parallelize(tp.ParallelType.Vectorize),
                             "INLINE-PARALLEL-MATCH")  # reported first, with the same verified call
    (placement,) = [d for d in report.errors if d.code == "TMA-BULK-PLACEMENT"]
    assert "verified: T4.axis(3).parallelize(tp.ParallelType.Serial)" in placement.hint
    assert "verified: T4.axis(3).parallelize(tp.ParallelType.Serial)" in cause.hint
    assert {d.code for d in report.errors if d.follows_from == cause.id} == {"TMA-BULK-PLACEMENT", "PIPELINE-STAGES"}


def test_a_vector_axis_shared_with_serial_loop_mates_names_serial():
    """Fuzz seed 125 case 176: an inlined consumer's axis made Vectorize, its producer's mate
    serial: INLINE-PARALLEL-MATCH and VECTORIZE-WIDTH, two blocks (no loop-mate said a type to
    restore). A vector axis shared with serial mates is made serial, verified; the width follows."""
    cause, report = cause_of(example_module("valid", "lowering").independent_statement_moved_out_of_the_loop(),
                             lambda f: f.tensor("T2").axis(0).parallelize(tp.ParallelType.Vectorize),
                             "INLINE-PARALLEL-MATCH")
    assert "verified: T2.axis(0).parallelize(tp.ParallelType.Serial)" in cause.hint
    assert [d.code for d in report.errors if d.follows_from == cause.id] == ["VECTORIZE-WIDTH"]


def test_an_instruction_tile_reordered_away_from_the_innermost_names_the_reorder_back():
    """Fuzz seed 120 case 129: a tcgen05 accumulator's loop reordered so that its instruction tile
    is no longer innermost (T2.reorder([2, 3, 0, 1])): MMA-SHAPE, and the tensor-memory load from it
    matches no tcgen05 pattern, two blocks. MMA-SHAPE proposes the reorder that moves the three Mma
    axes back behind the others (in the order that verifies), and the load follows from it."""
    fusion = example_module("valid", "tcgen05").tcgen05_k_steps_in_a_swizzled_row("B128")
    fusion.tensor("T2").reorder([2, 3, 0, 1])
    report = tp.verify(fusion, "sm_100a")
    cause = report.diagnostics[0]
    assert cause.code == "MMA-SHAPE" and cause.id is not None
    assert "verified: T2.reorder({2: 0, 3: 1, 0: 2, 1: 3}) moves the instruction's tile back" in cause.hint
    assert [(d.code, d.follows_from) for d in report.errors[1:]] == [("TMEM-ACCESS-PATTERN", cause.id)]
    fusion.tensor("T2").reorder({2: 0, 3: 1, 0: 2, 1: 3})  # the proposed call, on the schedule as written
    assert tp.verify(fusion, "sm_100a").ok


def test_a_bulk_copy_inlined_into_its_box_names_the_inlining_left_of_it():
    """Fuzz seed 120 case 390: a TMA load inlined past its box's axes (T1.inline_at(4)): its Bulk axes
    share loops with the consumer's, and the box, its contiguity, alignment and the issuing threads
    break with it, eight blocks. LOWERING-SUPPORTED proposes the deepest inlining left of the box that
    verifies (position 2 would still share the consumer's thread loop: 1), and the rest follow."""
    fusion = example_module("valid", "lowering").tma_load_from_one_thread()
    fusion.tensor("T1").inline_at(4)
    report = tp.verify(fusion, "sm_90a")
    cause = report.diagnostics[0]
    assert cause.code == "LOWERING-SUPPORTED" and cause.id is not None
    assert cause.hint.startswith("T1.inline_at(1) (verified: with it, LOWERING-SUPPORTED holds)")
    assert all(d.follows_from == cause.id for d in report.errors[1:]) and len(report.errors) == 8
    fusion.tensor("T1").inline_at(1)
    assert tp.verify(fusion, "sm_90a").ok


def test_a_block_index_taken_from_a_consumer_names_the_parallelize_that_gives_it_back():
    """Fuzz seed 125 case 145: the consumer of a shared tile that each block fills had its BIDx axis
    made Unroll: each block reads every block's rows (SMEM-BLOCK-VISIBILITY) and the unrolled loop
    repeats 4096 statements (UNROLL-LENGTH), two blocks. SMEM-BLOCK-VISIBILITY proposes binding the
    consumer's axis that maps to the producer's BIDx axis to BIDx again, verified; the length follows."""
    fusion = example_module("valid", "tma_smem").swizzle_128b_narrow_row_padded()
    fusion.tensor("T2").axis(1).parallelize(tp.ParallelType.Unroll)
    report = tp.verify(fusion, "sm_90a")
    cause = report.diagnostics[0]
    assert cause.code == "SMEM-BLOCK-VISIBILITY" and cause.id is not None
    assert cause.hint.startswith("T2.axis(1).parallelize(tp.ParallelType.BIDx) (verified")
    assert [(d.code, d.follows_from) for d in report.errors[1:]] == [("UNROLL-LENGTH", cause.id)]


def test_a_statement_inlined_out_of_its_loop_names_the_inlining_that_puts_it_back():
    """Fuzz seed 125 case 39: the online log-sum-exp's exp(x - m) inlined one loop out
    (T9.inline_at(1)): the loop over a row's tiles would be split by the online max
    (LOOP-NEST-ORDER) and the rescaled sum no longer sums in the max's loop (ONLINE-RESCALE), two
    blocks. LOOP-NEST-ORDER tries the inlining of the loop's statements one position deeper, then
    shallower, and proposes the first that forms one nest, verified; the rescale follows."""
    fusion = example_module("valid", "attention").online_row_logsumexp()
    fusion.tensor("T9").inline_at(1)
    report = tp.verify(fusion, "sm_90a")
    cause = report.diagnostics[0]
    assert cause.code == "LOOP-NEST-ORDER" and cause.id is not None
    assert cause.hint.startswith("T9.inline_at(2) (verified: with it, LOOP-NEST-ORDER holds)")
    assert [(d.code, d.follows_from) for d in report.errors[1:]] == [("ONLINE-RESCALE", cause.id)]
    fusion.tensor("T9").inline_at(2)
    assert tp.verify(fusion, "sm_90a").ok
