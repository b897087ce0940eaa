"""tp.schedule_mma_fragment places in each lane's registers exactly the elements the macro's
fragment map names (model/mma_op.py MacroFragments), for every mma.sync macro, dtype and role:
checked by evaluating the schedule's index algebra at every (lane, element)."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.model.expr import const, evaluate
from tileproof.execution.indexing import indices_from_loop
from tileproof.execution.mma import MacroFragments
from tileproof.hw.mma import macro_instruction

MACROS = [m for m in tp.MmaMacro if m.arch.name in ("Turing", "Ampere")]
CASES = [(m, d, r) for m in MACROS for d in m.input_dtypes for r in "ABC"]


def tile(macro, role):
    return {"A": (macro.m, macro.k), "B": (macro.n, macro.k), "C": (macro.m, macro.n)}[role]


@pytest.mark.parametrize("macro, dtype, role", CASES, ids=lambda x: getattr(x, "name", x))
def test_fragment_schedule_matches_the_fragment_map(macro, dtype, role):
    rows, cols = tile(macro, role)
    with tp.Fusion("fragment"):
        t = tp.make_contig_concrete_tensor([rows, cols], dtype=tp.float32 if role == "C" else dtype)
    tp.schedule_mma_fragment(t, macro, role if role == "C" else tp.MmaOperand[role], dtype=dtype)
    lane_axis, v_axis = t.loop
    assert lane_axis.parallel_type is tp.ParallelType.TIDx and lane_axis.static_extent == 32
    frag = MacroFragments(macro, macro_instruction(macro, dtype))
    assert v_axis.static_extent == frag.elements(role)
    seen = set()
    for lane in range(32):
        for v in range(frag.elements(role)):
            idx = indices_from_loop(t, {lane_axis.uid: const(lane), v_axis.uid: const(v)})
            got = tuple(evaluate(idx[i.uid], {}) for i in t.logical)
            row, col = frag.position(role, lane, v)
            want = (col, row) if role == "B" else (row, col)  # B's tile is given as (N, K)
            assert got == want, (lane, v)
            seen.add(got)
    assert len(seen) == rows * cols


def test_wrong_tile_is_a_schedule_error():
    with tp.Fusion("fragment"):
        t = tp.make_contig_concrete_tensor([16, 16])
    with pytest.raises(tp.ScheduleError, match="16 x 8"):
        tp.schedule_mma_fragment(t, tp.MmaMacro.Ampere_16_8_8, tp.MmaOperand.A)


@pytest.mark.parametrize("n", [8, 64, 128, 256])
def test_wgmma_accumulators_are_the_d_fragment_of_the_warpgroup(n):
    """A Hopper macro's C: thread T (0..127, TIDx) holds at element v the D element wgmma's map
    names, (16 w + g + 8 ((v / 2) % 2), 8 (v / 4) + 2q + v % 2)."""
    from tileproof.hw.mma import wgmma_d_position

    macro = getattr(tp.MmaMacro, f"Hopper_64_{n}_16")
    with tp.Fusion("fragment"):
        t = tp.make_contig_concrete_tensor([64, n])
    tp.schedule_mma_fragment(t, macro, "C")
    thread_axis, v_axis = t.loop
    assert thread_axis.parallel_type is tp.ParallelType.TIDx and thread_axis.static_extent == 128
    assert v_axis.static_extent == n // 2
    seen = set()
    for thread in range(128):
        for v in range(n // 2):
            idx = indices_from_loop(t, {thread_axis.uid: const(thread), v_axis.uid: const(v)})
            got = tuple(evaluate(idx[i.uid], {}) for i in t.logical)
            assert got == wgmma_d_position(thread, v), (thread, v)
            seen.add(got)
    assert len(seen) == 64 * n


@pytest.mark.parametrize("n", [16, 64, 128])
def test_a_column_vector_is_the_accumulators_columns_in_every_quad(n):
    """A [1, N] column vector (broadcast rows: attention's key indices) with quads: [b, TIDx{4}, v],
    thread q holding at element v the column the D fragment's thread with q = TIDx holds there,
    8 (v / 2) + 2q + v % 2; without quads it is a ScheduleError."""
    from tileproof.hw.mma import wgmma_d_position

    macro = getattr(tp.MmaMacro, f"Hopper_64_{n}_16")
    with tp.Fusion("column"):
        t = tp.broadcast(tp.iota(n, dtype=tp.int32), [True, False])
        u = tp.broadcast(tp.iota(n, dtype=tp.int32), [True, False])
    t.split(0, 64)
    tp.schedule_mma_fragment(t, macro, "C", quads=True)
    rows, lane, v_axis = t.loop[-3:]
    assert rows.is_broadcast and lane.parallel_type is tp.ParallelType.TIDx and lane.static_extent == 4
    assert v_axis.static_extent == n // 4
    for q in range(4):
        for v in range(n // 4):
            idx = indices_from_loop(t, {lane.uid: const(q), v_axis.uid: const(v)})
            col = evaluate(idx[t.logical[1].uid], {})
            assert col == wgmma_d_position(q, 2 * (v // 2) * 2 + v % 2)[1] == 8 * (v // 2) + 2 * q + v % 2
    u.split(0, 64)
    with pytest.raises(tp.ScheduleError, match="column vector"):
        tp.schedule_mma_fragment(u, macro, "C")


@pytest.mark.parametrize("n, dtype", [(8, tp.bfloat16), (64, tp.float16), (256, tp.bfloat16)])
def test_wgmma_a_in_registers_is_the_rs_a_fragment_of_the_warpgroup(n, dtype):
    """A Hopper macro's A (wgmma's RS form): thread T (0..127, TIDx) holds at element v the A
    element of wgmma m64nNk16's register fragment, (16 w + g + 8 ((v / 2) % 2), 2q + v % 2 + 8 (v / 4)),
    for every N (A's tile is 64 x 16 whatever N is)."""
    from tileproof.hw.mma import wgmma_a16_position

    macro = getattr(tp.MmaMacro, f"Hopper_64_{n}_16")
    with tp.Fusion("fragment"):
        t = tp.make_contig_concrete_tensor([64, 16], dtype=dtype)
    tp.schedule_mma_fragment(t, macro, tp.MmaOperand.A)
    thread_axis, v_axis = t.loop
    assert thread_axis.parallel_type is tp.ParallelType.TIDx and thread_axis.static_extent == 128
    assert v_axis.static_extent == 8
    seen = set()
    for thread in range(128):
        for v in range(8):
            idx = indices_from_loop(t, {thread_axis.uid: const(thread), v_axis.uid: const(v)})
            got = tuple(evaluate(idx[i.uid], {}) for i in t.logical)
            assert got == wgmma_a16_position(thread, v), (thread, v)
            seen.add(got)
    assert len(seen) == 64 * 16


def test_wgmma_b_has_no_register_fragment():
    with tp.Fusion("fragment"):
        t = tp.make_contig_concrete_tensor([64, 16], dtype=tp.bfloat16)
    with pytest.raises(tp.ScheduleError, match="B is read from shared memory through a descriptor"):
        tp.schedule_mma_fragment(t, tp.MmaMacro.Hopper_64_64_16, tp.MmaOperand.B)


def test_apply_mma_swizzle_for_tma_load_writes_the_tma_box_layout():
    """[rows, 64 bf16] -> [rows / 8, 8, 1, 8 chunks, 8]: chunk c of row r at c ^ (r % 8)."""
    with tp.Fusion("tile"):
        t = tp.make_contig_concrete_tensor([64, 64], dtype=tp.bfloat16)
    t.apply_mma_swizzle_for_tma_load(tp.MmaInputSmemSwizzle.B128)
    assert [i.static_extent for i in t.loop] == [8, 8, 1, 8, 8]
    rows, row, _, chunk, _ = t.loop
    idx = indices_from_loop(t, {rows.uid: const(1), row.uid: const(3), t.loop[2].uid: const(0),
                                chunk.uid: const(5), t.loop[4].uid: const(2)})
    r, c = (evaluate(idx[i.uid], {}) for i in t.logical)
    assert (r, c) == (11, 8 * (5 ^ 3) + 2)  # the loop's chunk 5 of row 11 holds logical chunk 5 ^ 3


def test_apply_mma_swizzle_for_tma_load_names_a_wrong_argument():
    with tp.Fusion("tile"):
        t = tp.make_contig_concrete_tensor([64, 32], dtype=tp.bfloat16)
    with pytest.raises(tp.ScheduleError, match="64 bytes.*128-byte swizzle takes 64"):
        t.apply_mma_swizzle_for_tma_load(tp.MmaInputSmemSwizzle.B128)
    with pytest.raises(tp.ScheduleError, match="expected a tp.MmaInputSmemSwizzle.*use tp.MmaInputSmemSwizzle.B64"):
        t.apply_mma_swizzle_for_tma_load("B64")
    with pytest.raises(tp.ScheduleError, match="symbolic number of bfloat16 elements"):
        with tp.Fusion("symbolic"):
            s = tp.make_tensor([64, "K"], dtype=tp.bfloat16)
        s.apply_mma_swizzle_for_tma_load(tp.MmaInputSmemSwizzle.B64)
    t.apply_mma_swizzle_for_tma_load(tp.MmaInputSmemSwizzle.B64)  # 32 bf16 = one 64-byte span
    assert [i.static_extent for i in t.loop] == [8, 4, 2, 4, 8]  # two 64-byte rows per 128-byte line


def test_apply_mma_swizzle_for_tma_load_splits_an_mn_major_tile_into_spans():
    """[K16, M128] half, 128-byte swizzle (nvFuser's scheduleTMALoadForMma): [M / 64 (a loop of
    boxes), K / 8, 8, 1, 8 chunks, 8]: element (k, m) in box m / 64 at row k, chunk (m % 64) / 8 ^ k % 8."""
    with tp.Fusion("tile"):
        t = tp.make_contig_concrete_tensor([16, 128], dtype=tp.float16)
    t.apply_mma_swizzle_for_tma_load(tp.MmaInputSmemSwizzle.B128)
    assert [i.static_extent for i in t.loop] == [2, 2, 8, 1, 8, 8]
    span, rows, row, one, chunk, elem = t.loop
    idx = indices_from_loop(t, {span.uid: const(1), rows.uid: const(1), row.uid: const(5), one.uid: const(0),
                                chunk.uid: const(2), elem.uid: const(3)})
    k, m = (evaluate(idx[i.uid], {}) for i in t.logical)
    assert (k, m) == (13, 64 + 8 * (2 ^ 5) + 3)
    with tp.Fusion("tile"):
        t = tp.make_contig_concrete_tensor([16, 96], dtype=tp.float16)
    with pytest.raises(tp.ScheduleError, match="96 float16 elements.*takes 64 \\(one swizzle span\\) or a multiple"):
        t.apply_mma_swizzle_for_tma_load(tp.MmaInputSmemSwizzle.B128)


def test_apply_mma_swizzle_for_tma_load_without_swizzle_makes_core_matrices():
    """[N64, K16] half, no swizzle: [N / 8, K / 8, 8, 8], each 8 x 16-byte core matrix a box."""
    with tp.Fusion("tile"):
        t = tp.make_contig_concrete_tensor([1, 64, 16], dtype=tp.float16)
    t.apply_mma_swizzle_for_tma_load(tp.MmaInputSmemSwizzle.NoSwizzle)
    assert [i.static_extent for i in t.loop] == [1, 8, 2, 8, 8]
    b, ng, kg, n, k = t.loop
    idx = indices_from_loop(t, {b.uid: const(0), ng.uid: const(3), kg.uid: const(1), n.uid: const(6), k.uid: const(2)})
    assert [evaluate(idx[i.uid], {}) for i in t.logical] == [0, 30, 10]
    with tp.Fusion("tile"):
        t = tp.make_contig_concrete_tensor([12, 16], dtype=tp.float16)
    with pytest.raises(tp.ScheduleError, match="rows axis holds 12 elements; core matrices take a multiple of 8"):
        t.apply_mma_swizzle_for_tma_load(tp.MmaInputSmemSwizzle.NoSwizzle)
    with tp.Fusion("tile"):
        t = tp.make_contig_concrete_tensor([16, 12], dtype=tp.float16)
    with pytest.raises(tp.ScheduleError, match=r"12 float16 elements \(24 bytes\); core-matrix rows take a multiple of 16 bytes \(8\)"):
        t.apply_mma_swizzle_for_tma_load(tp.MmaInputSmemSwizzle.NoSwizzle)


def test_mma_output_allocation_puts_the_k_axes_first_and_the_tile_as_the_fragment():
    with tp.Fusion("mm"):
        a = tp.make_contig_concrete_tensor([128, 1, 64], dtype=tp.bfloat16)
        b = tp.make_contig_concrete_tensor([1, 128, 64], dtype=tp.bfloat16)
        d = tp.fused_multiply_sum(a, b, [-1])
    d.definition.set_macro(tp.MmaMacro.Hopper_64_128_16)
    d.split(2, 16).split(0, 64)  # [wg, M64, N, kk, K16]
    d.reorder({1: 3, 3: 1})  # [wg, kk, N, M64, K16]
    d.reorder({2: 3, 3: 2})  # [wg, kk, M64, N, K16]
    loop = list(d.loop)
    alloc = tp.mma_output_allocation(d)
    assert d.loop == loop  # the loop domain is left as it was
    assert [i.static_extent for i in alloc] == [2, 4, 16, 128, 64]  # wg, kk, K16, thread, element
    assert [i.is_reduction for i in alloc] == [False, True, True, False, False]
    assert alloc[-2].parallel_type is tp.ParallelType.TIDx
    d.set_allocation_domain(alloc, True)


@pytest.mark.parametrize("macro", [tp.MmaMacro.Turing_16_8_8, tp.MmaMacro.Ampere_16_16_16, tp.MmaMacro.Hopper_64_8_16,
                                   tp.MmaMacro.Hopper_64_24_16], ids=lambda m: m.name)
def test_mma_output_allocation_of_a_single_tile_is_k_then_the_fragment(macro):
    """nvFuser's MmaTest.SingleTile: the accumulator is the tile alone, [M, N, rK]."""
    with tp.Fusion("mm"):
        a = tp.make_contig_concrete_tensor([macro.m, 1, macro.k], dtype=tp.float16)
        b = tp.make_contig_concrete_tensor([1, macro.n, macro.k], dtype=tp.float16)
        d = tp.fused_multiply_sum(a, b, [-1])
    d.definition.set_macro(macro)
    loop = list(d.loop)
    alloc = tp.mma_output_allocation(d)
    assert d.loop == loop
    frag = MacroFragments(macro, macro_instruction(macro, tp.float16))
    assert [i.static_extent for i in alloc] == [macro.k, frag.inst.threads, frag.elements("C")]
    assert [i.is_reduction for i in alloc] == [True, False, False]
    assert alloc[1].parallel_type is tp.ParallelType.TIDx


@pytest.mark.parametrize("macro", [m for m in tp.MmaMacro if m.arch.name in ("Turing", "Ampere")]
                         + [tp.MmaMacro.Hopper_64_8_16, tp.MmaMacro.Hopper_64_64_16, tp.MmaMacro.Hopper_64_256_16],
                         ids=lambda m: m.name)
def test_mma_output_allocation_of_an_epilogue_tensor_is_the_accumulators_fragment(macro):
    """A tensor no MmaOp defines, of the macro's M x N tile (behind an outer axis): lane l's
    element v is the tile position the macro's C fragment map gives."""
    with tp.Fusion("epilogue"):
        t = tp.make_contig_concrete_tensor([2, macro.m, macro.n])
    t.set_loop_domain(tp.mma_output_allocation(t))
    outer, lane_axis, v_axis = t.loop
    frag = MacroFragments(macro, macro_instruction(macro, macro.input_dtypes[0]))
    assert (lane_axis.parallel_type, lane_axis.static_extent) == (tp.ParallelType.TIDx, frag.inst.threads)
    assert v_axis.static_extent == frag.elements("C")
    for lane in range(frag.inst.threads):
        for v in range(frag.elements("C")):
            idx = indices_from_loop(t, {outer.uid: const(1), lane_axis.uid: const(lane), v_axis.uid: const(v)})
            got = tuple(evaluate(idx[i.uid], {}) for i in t.logical)
            assert got == (1, *frag.position("C", lane, v)), (lane, v)


def test_mma_output_allocation_names_what_it_needs():
    with tp.Fusion("mm"):
        a = tp.make_contig_concrete_tensor([64, 1, 16], dtype=tp.bfloat16)
        b = tp.make_contig_concrete_tensor([1, 64, 16], dtype=tp.bfloat16)
        d = tp.fused_multiply_sum(a, b, [-1])
        e = tp.set(a)
        f = tp.make_contig_concrete_tensor([64, 12])
    with pytest.raises(tp.ScheduleError, match=r"T\d+ is no MmaOp output.*M x N with M a multiple of 16 and N of 8"):
        tp.mma_output_allocation(e)  # [.., 1, 16]
    with pytest.raises(tp.ScheduleError, match=r"no MmaOp output.*they are .*64.* x .*12"):
        tp.mma_output_allocation(f)
    with tp.Fusion("tile"):
        g = tp.make_contig_concrete_tensor([64, 16])
    g.axis(0).parallelize(tp.ParallelType.TIDy)
    with pytest.raises(tp.ScheduleError, match="not yet parallelized"):
        tp.mma_output_allocation(g)
    with pytest.raises(tp.ScheduleError, match="without a macro"):
        tp.mma_output_allocation(d)
    d.definition.set_macro(tp.MmaMacro.Hopper_64_128_16)
    with pytest.raises(tp.ScheduleError, match=r"tile of MmaMacro.Hopper_64_128_16 \(64, 128, 16\).*\[64, 64, 16\]"):
        tp.mma_output_allocation(d)


@pytest.mark.parametrize("call", [lambda x: tp.mma_output_allocation(x),
                                  lambda x: tp.schedule_mma_fragment(x, tp.MmaMacro.Hopper_64_64_16, "C")])
@pytest.mark.parametrize("bad", ["T2", None, 3])
def test_mma_scheduling_helpers_name_a_non_tensor(call, bad):
    with pytest.raises(tp.ScheduleError, match=r"expected a TensorView, got"):
        call(bad)
