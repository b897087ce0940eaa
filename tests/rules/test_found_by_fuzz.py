"""Rules decide the schedules benchmarks/fuzz.py found them crashing on (a crash rejects as a
tileproof bug, Diagnostic.internal): each schedule is rejected with findings, none internal.
Time budgets are CPU seconds of this process (verification is single-threaded), so a loaded
2-core CI machine does not fail them."""

from __future__ import annotations

import pytest

import tileproof as tp

from support.examples import example_module

P = tp.ParallelType
cp_async, mma, tmem_performant_copy, wgmma = (example_module("valid", stem)
                                              for stem in ("cp_async", "mma", "tmem_performant_copy", "wgmma"))
performant_vectorized_copy_schedule = tmem_performant_copy.performant_vectorized_copy_schedule


def decided(fusion, target="sm_90a"):
    report = tp.verify(fusion, target)
    assert not report.ok
    crashed = [f"{d.code}: {d.message}" for d in report.diagnostics if d.internal]
    assert not crashed, crashed
    return {d.code: d for d in report.diagnostics}


def test_vectorize_contiguous_gives_a_split_factor_symbol_its_range():
    """F, a split factor that is no extent symbol, was taken for a run-time stride (from 0):
    ceiling(3/F) had no upper bound and no bit-vector held it."""
    with tp.Fusion("factor") as fusion:
        t0 = tp.make_contig_concrete_tensor([16, 3, 4]); fusion.add_input(t0)
        t1 = tp.set(t0); fusion.add_output(t1)
    t1.split(1, "F").split(0, 4)
    t1.axis(0).parallelize(P.TIDx)
    t1.axis(4).parallelize(P.Vectorize)
    codes = decided(fusion)
    assert "SYMBOLIC-FACTOR" in codes


def test_bank_conflict_query_is_sized_for_the_other_lanes_predicates():
    """The other lane's hole predicates (the thread index rebuilt from its linear id, over a
    symbolic TIDy extent) were not among the terms that size the bit-vectors."""
    with tp.Fusion("lanes") as fusion:
        x = fusion.symbol("x")
        t0 = tp.make_contig_concrete_tensor([4096, 2, 4], dtype=tp.int8); fusion.add_input(t0)
        t1 = tp.neg(t0); t2 = tp.neg(t1); t3 = tp.set(t2); fusion.add_output(t3)
    t1.set_memory_type(tp.MemoryType.Shared)
    t2.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2, t3):
        t.split(1, 32).split(2, x + 1).split(1, 3)
        t.axis(5).parallelize(P.BIDy); t.axis(3).parallelize(P.TIDz)
        t.axis(2).parallelize(P.BIDx); t.axis(0).parallelize(P.TIDx)
    t2.axis(0).parallelize(P.Unroll); t2.axis(2).parallelize(P.BIDy)
    t3.axis(0).parallelize(P.Unroll); t3.axis(3).parallelize(P.TIDx); t3.axis(4).parallelize(P.TIDy)
    tp.inline_most(fusion)
    codes = decided(fusion)
    assert "PARALLEL-TYPE-UNIQUE" in codes and "LAUNCH-THREADS" in codes  # 131072 threads: no bank analysis
    report = tp.verify(fusion, rules=["SMEM-BANK-CONFLICT"])  # the rule alone still decides its query
    # one warning per conflicting access (two since inline_most stops at the Unroll axes), none internal
    assert report.diagnostics and {d.code for d in report.diagnostics} == {"SMEM-BANK-CONFLICT"}
    assert not any(d.internal for d in report.diagnostics)


def test_tmem_access_pattern_names_a_symbolic_register_count():
    """Two Vectorize axes, one of symbolic extent: every pattern is ruled out by its register
    count before any proof, and the rule read the 32x32b outcome that was never computed."""
    fusion = performant_vectorized_copy_schedule()
    t3 = next(t for t in fusion.tensors if t.name == "T3")
    t3.axis(2).parallelize(P.Vectorize)
    t3.axis(0).parallelize(P.Vectorize)
    codes = decided(fusion, "sm_100a")
    d = codes["TMEM-ACCESS-PATTERN"]
    assert "not a constant" in d.message
    assert "registers per instruction" in d.counterexample


def test_vectorize_rules_skip_a_global_intermediate_without_a_layout():
    """The tensor-memory T2 of performant_vectorized_copy moved to global memory keeps its
    allocation domain of loop IDs (no global layout): GLOBAL-INTERMEDIATE rejects it, and the
    vectorization rules raised KeyError on its offsets (fuzz.py --run, seed 11)."""
    fusion = performant_vectorized_copy_schedule()
    t2 = next(t for t in fusion.tensors if t.name == "T2")
    t2.set_memory_type(tp.MemoryType.Global)
    tp.inline_most(fusion)
    codes = decided(fusion, "sm_100a")
    assert "GLOBAL-INTERMEDIATE" in codes


def test_coalescing_skips_a_global_tensor_without_a_layout():
    """fuzz seed 21 case 24: an intermediate moved to global memory whose allocation domain
    splits an axis has no global layout; GLOBAL-COALESCING raised a KeyError on it."""
    with tp.Fusion("split_global_allocation") as fusion:
        t0 = tp.make_contig_concrete_tensor([64, 32]); fusion.add_input(t0)
        t1 = tp.set(t0); t2 = tp.set(t1); fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Global)
    t1.split(1, 8)
    t1.set_allocation_domain(t1.get_loop_domain())
    codes = decided(fusion)
    assert "GLOBAL-COALESCING" not in codes


def test_a_vectorized_tma_loop_is_not_modelled_as_tiles():
    """fuzz seed 21 case 3151 (20 s, then undecided): tma_box_by_partitioning with its TMA
    consumer's axes on TIDy and Vectorize. TMA-BULK-PLACEMENT rejects the loop; the tile
    rules no longer model it as copies (the overlap query over ceil(N / 64) vectors timed out)."""
    with tp.Fusion("vectorized_tma") as fusion:
        t0 = tp.make_tensor(["M", "N"]); fusion.add_input(t0)
        t1 = tp.set(t0, op=tp.LoadStoreOpType.TMA); t2 = tp.set(t1); fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    fusion.assume("N % 4 == 0")
    for t in (t1, t2):
        t.split(1, 64).split(0, 32).reorder({1: 2})
        t.axis(0).parallelize(P.BIDy)
        t.axis(1).parallelize(P.BIDx)
    t1.axis(3).parallelize(P.Bulk)
    t1.axis(1).parallelize(P.Vectorize)
    t1.axis(0).parallelize(P.TIDy)
    t1.axis(2).parallelize(P.Vectorize)
    codes = decided(fusion)
    assert "TMA-BULK-PLACEMENT" in codes and "TMA-WHOLE-TILES" not in codes
    assert not any(d.message.startswith("could not prove") for d in codes.values())


def test_two_pipelined_loops_in_one_scope_are_placed_by_node_not_index():
    """k_loop_sum_pipelined_any_k with T2 inlined at 1: two circular loops side by side; the
    prologue inserted before the first shifted the second, taken by its stale index (a wait node)."""
    fusion = cp_async.k_loop_sum("two_pipelines", vector=1, rows=4, stages=2)
    fusion.tensor("T2").inline_at(1)
    assert "PIPELINE-STAGES" in decided(fusion)


def test_wgmma_descriptor_strides_of_a_tile_allocated_across_the_k_loop():
    """The A tile inlined outside its K loop (fuzz seed 0, case 91: T4.inline_at(2) on the
    grouped Hopper schedule) is allocated across ceil(K / 64) tiles: measuring the descriptor's
    SBO evaluated a size expression without a value for K. The candidate is now simplified first
    (WGMMA-SMEM-LAYOUT proves it for every size)."""
    for build in (wgmma.hopper_matmul_grouped, wgmma.hopper_matmul_warp_specialized):
        fusion = build()
        next(t for t in fusion.tensors if t.name == "T4").inline_at(2)
        found = decided(fusion)
        assert "PIPELINE-STAGES" in found and "WGMMA-SMEM-LAYOUT" not in found


def _tensor(fusion, name):
    return next(t for t in fusion.tensors if t.name == name)


def test_global_visibility_skips_an_mma_without_its_mma_axes():
    """Seed 15, case 3122: A's tile made global and an Mma axis of D serial; GLOBAL-VISIBILITY
    built D's fragment execution without Mma axes (AttributeError)."""
    fusion = wgmma.hopper_matmul_wide()
    _tensor(fusion, "T4").set_memory_type(tp.MemoryType.Global)
    _tensor(fusion, "T2").axis(5).parallelize(P.Serial)
    assert "MMA-SHAPE" in decided(fusion)


def test_a_cp_async_hole_that_moves_a_point_off_its_tile_is_rejected():
    """Seed 15, case 1616 (ran wrong on the GPU: 65239 of 65536 outputs): sA's row axis of 2 split
    by 32. The hole of the tile's 128-row bound came through a split of an ID derived from it,
    which the zero-fill check did not see: its zeros (src-size 0) landed on other rows."""
    fusion = mma.moye_tf32_double_buffered("256x256x64")
    _tensor(fusion, "T3").split(4, 32)
    found = decided(fusion)["LOWERING-SUPPORTED"]
    assert "T3's cp.async has holes (an indivisible split), which it fills with zeros" in found.message


def test_a_split_of_the_tile_index_over_blocks_keeps_each_hole_in_its_own_slot():
    """The grouped schedules split M's tile index by 8 groups of blocks, indivisibly: a block past
    M copies zeros into its own tile, where no element of a block in M lies."""
    assert tp.verify(mma.tuned_matmul_tf32_truncated()).ok


def test_a_circular_tma_load_in_an_inner_loop_counts_every_copy_on_its_mbarrier():
    """Seed 15, case 2620 (a launch failure on the GPU): A's 16 rows of boxes made a serial loop
    inside the circular loop, 16 copies per stage and iteration, each arriving on the stage's
    mbarrier, initialized for one arrival: its phases ran ahead of the waits."""
    from tileproof.codegen.lower import lower

    fusion = wgmma.hopper_matmul_warp_specialized_m_tiles_in_a_loop()
    _tensor(fusion, "T4").axis(4).parallelize(P.Serial)
    assert tp.verify(fusion).ok
    bars = {b.name: b for b in lower(fusion.snapshot(), tp.get_target("sm_90a")).mbarriers}
    assert bars["tp_bar_T4"].count == 16 and bars["tp_bar_T5"].count == 1


def test_a_persistent_tile_allocated_whole_has_distinct_addresses_decided_fast():
    """Fuzz seed 0, case 390 (190-280 s, undecided): the stmatrix-by-box schedule with T4's
    transforms propagated and everything inlined allocates T2, T4 and T6 over all ceil(M / 128) x
    ceil(N / 256) tiles of a persistent grid (the fuzz case propagated onto the inlined example,
    which propagate_transforms now refuses, as nvFuser does). Equal offsets were products of symbolic extents: 20 s
    and no verdict each. Offsets as mixed-radix numbers prove it at once (alloc.py), and T7's reads
    of T2's accumulators by equal allocated indices (analysis/visibility.py)."""
    import time

    fusion = wgmma.hopper_matmul_warp_specialized_stmatrix_by_box()
    for t in fusion.tensors:  # propagation refuses to change inlined loops (nvFuser's validateDomain)
        t.inline_at(0)
    tp.propagate_transforms(_tensor(fusion, "T4"))
    tp.inline_most(fusion)
    start = time.process_time()
    report = tp.verify(fusion, "sm_90a", rules=["ALLOCATION-DISTINCT", "MMA-ACCUM-LAYOUT"])
    assert time.process_time() - start < 10
    assert report.ok, [d.message for d in report.diagnostics]


def test_a_tma_load_rearmed_beside_a_circular_buffer_s_prologue_in_a_repeating_loop():
    """Attention fuzz (this session's persistent draws, seed 0 case 2): K's box axis made serial, a
    persistent grid (the circular loop and its prologue inside the loop over tiles); PIPELINE-PHASE's
    rearm check asked the prologue for a loop key it has not (AttributeError)."""
    from tileproof.recipes.attention import AttentionTile, attention

    tile = AttentionTile(rows=185, keys=480, head_dim=64, value_dim=64, batch=1, group=6, key_tile=96)
    fusion = attention(tile, stages=2, warpgroups=2, persistent=6)
    k = fusion.inputs[1]
    k_tile = next(t for t in fusion.tensors if t.definition is not None and t.definition.inputs[0] is k)
    k_tile.axis(8).parallelize(P.Serial)  # a box axis
    assert "TMA-MIXED-TRANSFORM" in decided(fusion)


def _two_caches(b_op):
    """benchmarks/fuzz.py --families circular --seed 2 --run, case 166 (on the H200: 3 of 3 outputs
    wrong): sum((a + 1) * b, 1) over [3, 64], N split by 2 onto TIDx, M on BIDx, a read through a
    register cache and b through `b_op`'s cache, both circular-buffered over the N / 2 loop."""
    with tp.Fusion("two_caches") as fusion:
        a = tp.make_contig_concrete_tensor([3, 64])
        b = tp.make_contig_concrete_tensor([3, 64])
        fusion.add_input(a)
        fusion.add_input(b)
        v = tp.mul(tp.add(a, 1.0), b)
        out = tp.sum(v, [1])
        fusion.add_output(out)
    ca, cb = a.cache_after(), b.cache_after(b_op)
    if b_op is tp.LoadStoreOpType.CpAsync:
        cb.set_memory_type(tp.MemoryType.Shared)
    v.split(1, 2)
    tp.propagate_transforms(v)
    v.axis(0).parallelize(P.BIDx)
    v.axis(2).parallelize(P.TIDx)
    tp.parallelize_all_like(v)
    tp.inline_most(fusion)
    ca.circular_buffer(2, 1)
    cb.circular_buffer(2, 1)
    return fusion


def test_a_register_and_a_cp_async_circular_buffer_over_one_loop_are_refused():
    """The loop was pipelined as its first buffer's kind (registers): b's cp.async copies were never
    waited for, and the kernel read shared memory before they landed. PIPELINE-STAGES refuses
    buffers of two kinds over one loop; both in registers is accepted."""
    found = decided(_two_caches(tp.LoadStoreOpType.CpAsync))
    assert "PIPELINE-STAGES" in found and "one kind of copy" in found["PIPELINE-STAGES"].message
    assert found["PIPELINE-STAGES"].counterexample == {"stages": 2, "prefetch": 1}
    assert tp.verify(_two_caches(tp.LoadStoreOpType.Set), "sm_90a").ok


def test_a_global_intermediate_without_a_buffer_has_no_visibility_claim_to_prove():
    """Fuzz seed 56, case 434 (32 s, GLOBAL-VISIBILITY undecided): the persistent clustered wgmma
    matmul with its accumulator T2 moved to global memory. GLOBAL-INTERMEDIATE refuses T2 (the
    kernel has no buffer for it), yet GLOBAL-VISIBILITY tried to prove T3's reads of it visible over
    every tile of the persistent grid, and three queries ran out of time. The reads of a tensor
    that cannot exist are no claim (analysis/visibility.py check_claims): one root cause."""
    import time

    fusion = wgmma.hopper_matmul_warp_specialized_persistent_cluster()
    fusion.assume("K % 8 == 0")
    _tensor(fusion, "T2").set_memory_type(tp.MemoryType.Global)
    start = time.process_time()
    codes = decided(fusion)
    assert time.process_time() - start < 15
    assert "GLOBAL-INTERMEDIATE" in codes and "GLOBAL-VISIBILITY" not in codes, sorted(codes)


def _read_again_after_inlining(fusion, name):
    """A second consumer of `name`, made after its inlining (an output copy, its loops unscheduled):
    the way left to inline a tensor into loops that are not its consumer's, now that propagation
    and transforms of inlined axes are refused at the call (as nvFuser refuses them)."""
    with fusion:
        again = tp.set(_tensor(fusion, name))
        fusion.add_output(again)
    return fusion


def test_tma_tiles_of_a_nest_whose_inlined_loops_do_not_map_are_not_placed():
    """Fuzz seed 58, case 410 (63 s): the split-N wgmma matmul with propagate_transforms(T3) after
    its inlining, which INLINE-LOOP-MAP refused (propagate_transforms now refuses it at the call);
    TMA-WHOLE-TILES still proved two TMA loads of one block disjoint over that nest, 27 s a query.
    A nest with no single loop for an inlined axis has no issue points to place: INLINE-LOOP-MAP is
    the rule's premise. Here the loops do not map because T4's tile is read again after its
    inlining."""
    import time

    fusion = wgmma.hopper_matmul_warp_specialized_split_n()
    with pytest.raises(tp.ScheduleError, match="propagate before inlining"):
        tp.propagate_transforms(_tensor(fusion, "T3"))
    _read_again_after_inlining(fusion, "T4")
    start = time.process_time()
    codes = decided(fusion)
    assert time.process_time() - start < 15
    assert "INLINE-LOOP-MAP" in codes and "TMA-WHOLE-TILES" not in codes, sorted(codes)


def test_tma_copies_past_their_allocation_are_not_also_proved_disjoint():
    """Fuzz seed 58 (mutated), case 418 (16 s): the split-N wgmma matmul with A's TMA tile inlined at 0,
    so that one allocation of a tile's size takes every copy: the first copy past it was found in
    0.2 s, then the proof that no two copies of a block overlap took 15.8 s. The overlap is moot
    until the allocation holds the tiles (one cause): it is not asked for that tensor."""
    import time

    fusion = wgmma.hopper_matmul_warp_specialized_split_n()
    a_tile = _tensor(fusion, "T4")
    a_tile.axis(6).parallelize(tp.ParallelType.Bulk)
    a_tile.inline_at(0)
    start = time.process_time()
    codes = decided(fusion)
    assert time.process_time() - start < 6
    past = codes["TMA-WHOLE-TILES"]
    assert past.tensor == "T4" and past.counterexample["tile end"] > past.counterexample["allocation bytes"]


def test_a_tma_claim_without_an_xor_is_decided_over_the_integers_first():
    """Fuzz seed 64, case 1464 (11.8 s): the split-N wgmma matmul with A's TMA tile inlined at 3; that
    every copy stays inside the tile allocated across the symbolic tile counts took z3 9 s over the
    bit-vectors its issue's other claims share (the swizzle's XOR), 0.01 s over the integers."""
    import time

    fusion = wgmma.hopper_matmul_warp_specialized_split_n()
    _tensor(fusion, "T4").inline_at(3)
    start = time.process_time()
    codes = decided(fusion)
    assert time.process_time() - start < 6
    assert "TMA-WHOLE-TILES" not in codes and "PIPELINE-STAGES" in codes, sorted(codes)


def test_unrolled_tma_boxes_are_proved_disjoint_over_the_integers_first():
    """Fuzz seed 93 (mutated), case 423 (13.4 s): the bank-conflict-free TMA transpose with its row axis
    unrolled and the next one made Bulk; proving two boxes of a block disjoint took 13 s over the
    bit-vectors and is decided over the integers now (the rule's other findings refuse it)."""
    import time

    fusion = example_module("valid", "tma_smem").tma_transpose_bank_conflict_free()
    tile = _tensor(fusion, "T2")
    tile.axis(1).parallelize(tp.ParallelType.Bulk)
    tile.axis(0).parallelize(tp.ParallelType.Unroll)
    start = time.process_time()
    codes = decided(fusion)
    assert time.process_time() - start < 4
    assert {"SMEM-CAPACITY", "TMA-BOX-SIZE"} <= set(codes) and "TMA-WHOLE-TILES" not in codes, sorted(codes)


def test_a_propagation_that_would_merge_inlined_axes_is_refused_at_the_call():
    """Fuzz seeds 97 case 112 and 98 case 270 (mutated, on the H200): the bundled attention examples
    with propagate_transforms(S) after their inlining merged the axes of the fused softmax's chain
    (each inlined at its last position), leaving its compute-at past its loop (LOWERING-SUPPORTED
    raised KeyError; then INLINE-LOOP-MAP reported it). nvFuser's TransformPropagator refuses such a
    replay, and so does propagate_transforms now, changing nothing (test_lowering.py keeps the
    verifier's answer to a loop changed behind the API's back)."""
    attention_examples = example_module("valid", "attention")
    fusion = attention_examples.persistent_attention_overlapped_in_ping_pong()
    loops = {t.name: list(t.loop) for t in fusion.tensors}
    with pytest.raises(tp.ScheduleError, match="propagate before inlining"):
        tp.propagate_transforms(_tensor(fusion, "T3"))
    assert {t.name: list(t.loop) for t in fusion.tensors} == loops


def test_readers_of_an_stmatrix_into_registers_are_left_to_ldsm_thread_rows():
    """Fuzz seed 97, case 1335 (30.8 s on the H200 run, THREAD-VISIBILITY undecided): an stmatrix whose
    output is a register tensor, read by a broadcast. stmatrix writes shared memory only
    (LDSM-THREAD-ROWS refuses it), so its output has no register a reader could find; proving which
    thread wrote what the reader reads over that model ran out of time. No claim is made of it now."""
    import time

    with tp.Fusion("stmatrix_into_registers") as fusion:
        t0 = tp.make_tensor(["M", "N"], dtype=tp.float32); fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1, tp.LoadStoreOpType.StMatrix)
        t3 = tp.broadcast(t2, [False, True, False])
        t4 = tp.neg(t3); fusion.add_output(t4)
    fusion.assume("M % 8 == 0")
    fusion.assume("N <= 64")
    t4.merge(0)
    t4.merge(0)
    t4.split(0, 2, inner_split=True)
    tp.propagate_transforms(t4)
    t4.axis(0).parallelize(tp.ParallelType.TIDz)
    tp.parallelize_all_like(t4)
    t4.axis(0).parallelize(tp.ParallelType.Serial)
    start = time.process_time()
    report = tp.verify(fusion, "sm_90a")
    assert time.process_time() - start < 5
    assert "LDSM-THREAD-ROWS" in report.codes, report.codes
    assert not [d for d in report.errors if "could not prove" in d.message]
    assert all(d.tensor != "T2" for d in report.errors if d.code == "THREAD-VISIBILITY")


def test_block_visibility_of_a_merged_shared_broadcast_is_decided_over_the_integers_first():
    """Fuzz seed 95, case 1082 (20 s): a cp.async copy and a shared broadcast of it, every axis merged
    onto blockIdx.y; each of the two SMEM-BLOCK-VISIBILITY proofs took 10 s over the bit-vectors. Tried
    over the integers first (no XOR in them), they are decided at once; LAUNCH-GRID refuses the grid."""
    import time

    with tp.Fusion("merged_shared_broadcast") as fusion:
        t0 = tp.make_tensor(["M", "N"], dtype=tp.float32); fusion.add_input(t0)
        t1 = tp.set(t0, tp.LoadStoreOpType.CpAsync)
        t2 = tp.broadcast(t1, [True, False, False])
        t3 = tp.set(t2); fusion.add_output(t3)
    for t in (t1, t2):
        t.set_memory_type(tp.MemoryType.Shared)
    fusion.assume("M <= 8")
    fusion.assume("N % 4 == 0")
    t3.merge(1)
    t3.merge(0)
    tp.propagate_transforms(t3)
    t3.axis(0).parallelize(tp.ParallelType.BIDy)
    tp.parallelize_all_like(t3)
    t1.inline_at(1)
    start = time.process_time()
    codes = decided(fusion)
    assert time.process_time() - start < 10
    assert set(codes) == {"LAUNCH-GRID"}, sorted(codes)


def test_a_wgmma_whose_k_steps_are_bound_to_threads_has_no_layout_question():
    """Fuzz seed 101 (mutated), case 611 (31.6 s, WGMMA-SMEM-LAYOUT undecided): the split-N wgmma matmul
    after inline_most() with its K-step axis bound to TIDy. REDUCTION-PARALLEL refuses an MmaOp's K steps
    on threads, and without a serial K-step loop a wgmma instance has no one operand tile to ask the
    layout of: REDUCTION-PARALLEL is a premise of the shared-memory layout rules."""
    import time

    fusion = wgmma.hopper_matmul_warp_specialized_split_n()
    tp.inline_most(fusion)
    _tensor(fusion, "T4").axis(3).parallelize(tp.ParallelType.TIDy)
    start = time.process_time()
    report = tp.verify(fusion, "sm_90a")
    assert time.process_time() - start < 6
    assert "REDUCTION-PARALLEL" in report.codes and "WGMMA-SMEM-LAYOUT" in report.rules_not_run, report.codes


def test_a_statement_that_updates_a_shared_tensor_in_place_is_ordered_and_raced_without_a_crash():
    """Fuzz seed 61 (mutated), case 883: the causal ping-pong attention example with O's accumulator
    moved to shared memory; its statement reads what it writes (the in-place update), and the
    barrier placement (execution/barriers.py) and SMEM-RACE took the reader's and writer's common
    scope past the statement itself (IndexError: every rule reading the nest crashed). A statement
    that reads what it writes has nothing between; SMEM-RACE proves its own reads against its
    writes: here both warpgroups update one shared tile, a race with two threads named."""
    attention_examples = example_module("valid", "attention")
    fusion = attention_examples.causal_attention_in_ping_pong()
    # (the case's T20 and T28: one tensor fewer since the causal scores are masked unscaled)
    _tensor(fusion, "T19").set_memory_type(tp.MemoryType.Shared)
    _tensor(fusion, "T27").set_memory_type(tp.MemoryType.Local)
    codes = decided(fusion)
    race = codes["SMEM-RACE"]
    assert race.counterexample["writer threadIdx.z"] != race.counterexample["reader threadIdx.z"], race.counterexample


def test_a_rule_whose_premise_was_skipped_is_skipped_too():
    """Fuzz seed 61 (mutated), case 727 (37 s, WGMMA-SMEM-LAYOUT undecided): the persistent clustered
    matmul with T2's transforms propagated after its inlining (refused at the call now; here T4's
    tile is read again after its inlining). INLINE-LOOP-MAP refuses it, so TMA-WHOLE-TILES (its
    premise) is not run, and WGMMA-SMEM-LAYOUT, whose premise TMA-WHOLE-TILES is, asked its layout
    question over TMA tiles nobody had placed. A skipped premise skips."""
    import time

    fusion = _read_again_after_inlining(wgmma.hopper_matmul_warp_specialized_persistent_cluster(), "T4")
    fusion.assume("K <= 128")
    start = time.process_time()
    report = tp.verify(fusion, "sm_90a")
    assert time.process_time() - start < 15
    assert "INLINE-LOOP-MAP" in report.codes and "WGMMA-SMEM-LAYOUT" not in report.codes, report.codes
    assert {"TMA-WHOLE-TILES", "WGMMA-SMEM-LAYOUT"} <= set(report.rules_not_run)


def test_a_tma_claim_whose_access_hints_hold_the_swizzle_is_decided_over_the_integers_first():
    """Fuzz seed 105, case 1705 (58 s on the H200, 112 s here): the persistent warp-specialized matmul
    with T2's transforms propagated (before inlining, as propagation now requires) and everything
    inlined; that B's copies stay inside its tile
    allocated across the symbolic tile counts was left to the bit-vectors (76 s, no verdict)
    because the access's sizing hints held the swizzle's XOR, though the claim did not."""
    import time

    fusion = wgmma.hopper_matmul_warp_specialized_persistent()
    for t in fusion.tensors:  # propagation refuses to change inlined loops (nvFuser's validateDomain)
        t.inline_at(0)
    tp.propagate_transforms(_tensor(fusion, "T2"))
    tp.inline_most(fusion)
    start = time.process_time()
    report = tp.verify(fusion, "sm_90a", rules=["TMA-WHOLE-TILES"])
    assert time.process_time() - start < 10
    # A's copies run past its allocation (a counterexample); B's are proved inside
    (finding,) = [d for d in report.diagnostics if d.code == "TMA-WHOLE-TILES"]
    assert "T4" in finding.message and finding.counterexample, finding.message


def test_two_lanes_of_one_thread_keep_equal_quotients_in_the_abstraction():
    """Fuzz seed 106 (mutated-mma-wgmma), case 405 (23 s on the H200): the stmatrix epilogue with its
    output's outer axis on TIDx divides by ceil(N / 256). ALLOCATION-DISTINCT's claim needs only
    that the same thread's index gives the same quotient: with the quotients free variables the
    abstraction could not prove it and the full proof took 30 s; as an uninterpreted function of
    its operands it is proved in about a second (verifier/solver.py)."""
    import time

    fusion = wgmma.hopper_matmul_warp_specialized_stmatrix_by_box()
    _tensor(fusion, "T7").axis(0).parallelize(P.TIDx)
    start = time.process_time()
    report = tp.verify(fusion, "sm_90a", rules=["ALLOCATION-DISTINCT"])
    assert time.process_time() - start < 12
    assert {d.tensor for d in report.diagnostics if d.code == "ALLOCATION-DISTINCT"} == {"T4", "T5"}


def test_a_wgmma_layout_over_a_tile_allocated_across_the_persistent_loop_is_decided_fast():
    """Fuzz seed 63 (mutated), case 955 (20 s on the H200, 30-80 s here, at times undecided): the
    clustered persistent matmul with A's cache inlined at 2 allocates A's tile across the persistent
    loop; WGMMA-SMEM-LAYOUT's two sides named its tile index alike but for (64 ty + mn) // 128
    against ty // 2 (mn < 64), under the swizzle's XOR, and z3 had to prove them equal through a
    product of symbolic extents. The simplifier writes both as ty // 2 and takes the XOR of the low
    bits out of the sum (model/simplify.py): both sides share one term."""
    import time

    fusion = wgmma.hopper_matmul_warp_specialized_persistent_cluster()
    try:
        _tensor(fusion, "T5").reorder([1, 0, 6, 2, 3, 4, 7, 5])
    except tp.ScheduleError:
        pass  # refused, as in the fuzz case
    _tensor(fusion, "T4").inline_at(2)
    start = time.process_time()
    report = tp.verify(fusion, "sm_90a", rules=["WGMMA-SMEM-LAYOUT"])
    assert time.process_time() - start < 5
    assert report.ok, [d.message for d in report.diagnostics]


def test_the_division_abstraction_keeps_congruence():
    """Equal operands give equal quotients in the abstraction (what the case above needs); a claim
    about the quotient's value is left to the full proof."""
    import z3

    from tileproof.model.expr import const, floordiv, var
    from tileproof.verifier.solver import Query

    x, y, n = var("x"), var("y"), var("n")
    qx, qy = floordiv(x * 8 + 3, n), floordiv(y * 8 + 3, n)
    q = Query([qx, qy], {"x": n, "y": n}, symbols={"n": (1, 1000)})
    assert q._proved_without_symbolic_division(z3.Implies(q.eq(x, y), q.eq(qx, qy)))
    assert not q._proved_without_symbolic_division(q.lt(qx, const(8)))  # true (x < n), but needs the division
    assert q.prove(q.lt(qx, const(8))).proved
