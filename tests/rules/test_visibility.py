"""SMEM-BLOCK-VISIBILITY: a consumer reads only on-chip elements its own thread block wrote.

Counterexamples are checked against the schedule's own index functions (the element the
reported consumer point reads, and the block whose loop point writes that element); the
verdicts are compared with brute-force enumeration of the whole grid on random small
schedules (tests/support/brute_force.py, tests/support/schedule_gen.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

import tileproof as tp
from tileproof.model.expr import const, evaluate
from tileproof.execution.indexing import block_dims, indices_from_logical, indices_from_loop, producer_logical
from tileproof.model.types import BLOCK_TYPES
from tileproof.recipes import Cluster, GridOrder, HopperGemmParams, HopperTile, TmaPipeline, hopper_gemm
from tileproof.schedule_files import discover
from tileproof.verifier.analysis import visibility

from support.brute_force import kernel_points, describe, oracle  # noqa: E402
from support.schedule_gen import visibility_cases  # noqa: E402

CODE = "SMEM-BLOCK-VISIBILITY"
P = tp.ParallelType
ROOT = Path(__file__).resolve().parents[2]
VALID = {c.name: c for c in discover([str(ROOT / "examples" / "valid" / "visibility.py")])}
INVALID = {c.name: c for c in discover([str(ROOT / "examples" / "invalid" / "visibility.py")])}


def the_finding(report):
    found = [d for d in report.errors if d.code == CODE]
    assert len(found) == 1, [d.message for d in report.diagnostics]
    return found[0]


def check_counterexample(fusion, d, bind=None) -> None:
    """The reported consumer point reads the reported element, runs in the reported block,
    and the block that writes the element (the producer's block IDs evaluated at it) differs."""
    snap = fusion.snapshot()
    cex = d.counterexample
    def reads(t) -> bool:
        return any(key.startswith(f"{t.name} logical ") for key in cex)

    op = next(o for o in snap.exprs if o.output.name == d.tensor and any(reads(t) for t in o.inputs))
    k = next(j for j, t in enumerate(op.inputs) if reads(t))
    producer, consumer = op.inputs[k], op.output
    sizes = {**(bind or {}), **{s: cex[s] for s in snap.symbols if s in cex}}
    env = {**sizes, **{name: v for name, v in cex.items() if isinstance(v, int)}}
    env.update({p.cuda_name: cex.get(p.cuda_name, 0) for p in BLOCK_TYPES})
    point = dict(env)
    for i in consumer.loop:  # an extent-1 axis has index 0 (what the kernel uses)
        if i.static_extent == 1 and i.parallel_type not in BLOCK_TYPES:
            point[f"{consumer.name}.{i.name}"] = 0
    read = [evaluate(e, point) for e in producer_logical(op, k, indices_from_loop(consumer))]
    element = [cex[f"{producer.name} logical {j}"] for j in range(len(producer.logical))
               if not producer.logical[j].is_broadcast]
    assert [v for j, v in enumerate(read) if not producer.logical[j].is_broadcast] == element
    types = [i.parallel_type for i in producer.loop if i.parallel_type in BLOCK_TYPES and not i.is_broadcast]
    reader = tuple(env[p.cuda_name] for p in types)
    assert reader == tuple(cex[f"reader {p.cuda_name}"] for p in types)
    reported = tuple(cex[f"writer {p.cuda_name}"] for p in types)
    if "stored the element at offset" in d.message:  # the reader's block wrote it, elsewhere
        assert reported == reader and cex["writer address"] != cex["reader address"], cex
        return
    if visibility._repeated(producer, types):  # several blocks write it: enumerate them all
        launch = {p: evaluate(e, sizes) for p, e in block_dims(snap).items()}
        writers = set()
        for where, point_env, idx in kernel_points(producer, launch):
            if [evaluate(idx[i.uid], point_env) for j, i in enumerate(producer.logical)
                    if not i.is_broadcast] == element:
                writers.add(tuple(where[p] for p in types))
    else:  # one writer: the producer's block IDs' forward image from the element
        fwd = indices_from_logical(producer, [const(v) for v in read])
        writers = {tuple(evaluate(fwd[i.uid], sizes) for i in producer.loop
                         if i.parallel_type in BLOCK_TYPES and not i.is_broadcast)}
    assert reported in writers and reader not in writers, (cex, writers)


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_examples_are_rejected_with_a_true_counterexample(name):
    case = INVALID[name]
    fusion = case.build()
    report = tp.verify(fusion, case.target)
    assert report.codes == [CODE]
    d = the_finding(report)
    assert d.hint and "parallelize" in d.hint and d.notes
    check_counterexample(fusion, d)


@pytest.mark.parametrize("name", sorted(VALID))
def test_fixed_examples_are_accepted(name):
    case = VALID[name]
    report = tp.verify(case.build(), case.target)
    assert report.ok and CODE in report.rules_run, [d.message for d in report.errors]


def test_global_store_outside_the_block_axis_reads_in_block_0():
    report = tp.verify(INVALID["figure14a_output_unscheduled"].build())
    d = the_finding(report)
    assert d.counterexample["reader blockIdx.x"] == 0 and d.counterexample["writer blockIdx.x"] > 0
    assert any("block 0 only" in n for n in d.notes)


def three_copies(blocks):
    """gmem T0[4, 32] -> smem T1 -> registers T2 -> gmem T3, TIDx{32} everywhere and BIDx{4}
    on the rows of the tensors named in `blocks`."""
    with tp.Fusion("three_copies") as fusion:
        t0 = tp.make_contig_concrete_tensor([4, 32])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        t3 = tp.set(t2)
        fusion.add_output(t3)
    t1.set_memory_type(tp.MemoryType.Shared)
    tensors = {"T1": t1, "T2": t2, "T3": t3}
    for name in blocks:
        tensors[name].axis(0).parallelize(P.BIDx)
    for t in tensors.values():
        t.axis(1).parallelize(P.TIDx)
    return fusion


def test_a_consumer_without_the_block_axis_runs_in_every_block():
    fusion = three_copies(["T1", "T3"])
    report = tp.verify(fusion)
    assert report.codes == [CODE]
    d = the_finding(report)
    assert d.tensor == "T2" and any("every block runs its whole loop nest" in n for n in d.notes)
    check_counterexample(fusion, d)


def test_registers_are_checked_across_blocks():
    """T2 (registers) on BIDx, read by the output T3 that has no block axis (block 0 only)."""
    fusion = three_copies(["T1", "T2"])
    report = tp.verify(fusion)
    assert report.codes == [CODE]
    d = the_finding(report)
    assert d.tensor == "T3" and "local memory" in d.message
    check_counterexample(fusion, d)
    assert tp.verify(three_copies(["T1", "T2", "T3"])).ok


def strips(t2_splits):
    """T0[N] -> T1 (shared, split by 32 on BIDx, TIDx{32}) -> T2 (split as given, outer BIDx)."""
    with tp.Fusion("strips") as fusion:
        t0 = tp.make_tensor(["N"])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    t1.split(0, 32)
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.TIDx)
    for f in t2_splits:
        t2.split(0, f)
    t2.axis(0).parallelize(P.BIDx)
    return fusion


def test_symbolic_size_counterexample():
    """T2 takes 64 elements per block where T1 loaded 32: wrong as soon as N > 32."""
    fusion = strips([64])
    report = tp.verify(fusion)
    assert report.codes == [CODE]
    d = the_finding(report)
    n = d.counterexample["N"]
    assert n > 32 and "when N = " in d.message
    check_counterexample(fusion, d)
    assert tp.verify(fusion, bind={"N": n}).codes == [CODE]
    assert tp.verify(fusion, bind={"N": 32}).ok  # one block each: nothing to miss
    d64 = the_finding(tp.verify(fusion, bind={"N": 64}))
    check_counterexample(fusion, d64, bind={"N": 64})


def test_symbolic_size_proof_by_the_solver():
    """T2 split by 8 and then by 4 (outer ID e // 8 // 4) reaches T1's blocks (e // 32) by
    another route: the solver proves it for every N (no IterDomain is shared)."""
    fusion = strips([8, 4])
    report = tp.verify(fusion, rules=[CODE])
    assert report.ok and report.queries == 1, [d.message for d in report.errors]
    assert tp.verify(fusion).ok


def shared_bias(swap: bool):
    """T3[4, 8] = T0 + broadcast(T1[8]) with the broadcast T2 in shared memory. T3 runs on
    BIDy{2} x BIDx{16} (rows split by 2, the inner rows merged with the columns); T2 splits
    its broadcast axis by 2 and merges the repeat b{2} with its columns onto BIDx{16}, so each
    element is written by two blocks. swap=False: block x writes element x % 8 (what T3 reads
    there); swap=True: block x writes element x // 2."""
    with tp.Fusion("shared_bias") as fusion:
        t0 = tp.make_contig_concrete_tensor([4, 8])
        t1 = tp.make_contig_concrete_tensor([8])
        fusion.add_input(t0)
        fusion.add_input(t1)
        t2 = tp.broadcast(t1, [True, False])
        t3 = tp.add(t0, t2)
        fusion.add_output(t3)
    t2.set_memory_type(tp.MemoryType.Shared)
    t3.split(0, 2).merge(1, 2)  # [BIDy{2}, BIDx{16}]
    t2.split(0, 2)  # [b{1}, b{2}, I{8}]
    if swap:
        t2.reorder({1: 2})  # [b{1}, I{8}, b{2}]
    t2.merge(1, 2)
    for t in (t2, t3):
        t.axis(0).parallelize(P.BIDy)
        t.axis(1).parallelize(P.BIDx)
    return fusion


def test_repeated_writers_one_in_the_readers_block_is_enough():
    fusion = shared_bias(swap=False)
    assert not oracle(fusion, [CODE])[CODE].violated
    assert tp.verify(fusion).ok
    fusion = shared_bias(swap=True)
    assert oracle(fusion, [CODE])[CODE].violated
    report = tp.verify(fusion)
    assert report.codes == [CODE]
    d = the_finding(report)
    assert "that block does not write that element" in d.message
    check_counterexample(fusion, d)


def test_propagated_schedules_need_no_query():
    case = VALID["tensor_memory_per_block"]
    report = tp.verify(case.build(), case.target, rules=[CODE])
    assert report.ok and report.queries == 0


def test_shortcut_and_solver_agree_on_the_bundled_examples(monkeypatch):
    """Every verdict taken without a query (same block expressions, both sides pinned to index
    0, a writer named as a function of the reader) is also the quantified solver's."""
    files = [str(ROOT / "examples" / d / f) for d in ("valid", "invalid")
             for f in ("visibility.py", "global_visibility.py", "tma_smem.py", "tma_boxes.py", "tma_rules.py",
                       "tmem_complicated.py", "lowering.py")
             if (ROOT / "examples" / d / f).exists()]
    cases = [(c.name, c.build, c.target) for c in discover(files)]
    cases += [(f"shared_bias {swap}", lambda swap=swap: shared_bias(swap), "sm_90a") for swap in (False, True)]
    cases += [("block_axis_of_extent_1", block_axis_of_extent_1, "sm_90a")]
    codes = [CODE, "THREAD-VISIBILITY", "GLOBAL-VISIBILITY"]
    fast = {name: tp.verify(build(), target, rules=codes).codes for name, build, target in cases}
    monkeypatch.setattr(visibility, "_same_by_construction", lambda *a: False)
    monkeypatch.setattr(visibility, "_witness", lambda *a: None)
    slow = {name: tp.verify(build(), target, rules=codes).codes for name, build, target in cases}
    assert fast == slow
    assert sum(bool(v) for v in fast.values()) >= 5  # rejections among them


def block_axis_of_extent_1():
    with tp.Fusion("block_axis_of_extent_1") as fusion:
        t0 = tp.make_tensor(["M", 64]); fusion.add_input(t0)
        t1 = tp.set(t0); t2 = tp.set(t1); fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2):
        t.split(0, 15)
    t1.split(2, 64)  # [BIDy, 15, BIDx{1}, 64]: blockIdx.x is 0 in every block
    t1.axis(0).parallelize(P.BIDy); t1.axis(2).parallelize(P.BIDx)
    t2.axis(0).parallelize(P.BIDy); t2.axis(1).parallelize(P.TIDy); t2.axis(2).parallelize(P.TIDx)
    return fusion


def test_a_block_type_launched_once_needs_no_query():
    """fuzz seed 21 case 389 (6 s): a shared tile bound to BIDx{1} (a split by the full extent)
    read by a consumer without a BIDx axis: blockIdx.x is 0 on both sides."""
    report = tp.verify(block_axis_of_extent_1(), rules=[CODE])
    assert report.ok and report.queries == 0


def test_a_global_output_split_along_a_broadcast_needs_no_query():
    """fuzz seed 21 case 305 (12 s): T3, a global output with a broadcast axis split onto
    TIDy, read back by T5 scheduled alike. Both store from threadIdx.y == 0 only (single
    writer), so the writer's TIDy is the reader's without a proof over the unrolled loops."""
    with tp.Fusion("broadcast_output_read_back") as fusion:
        t0 = tp.make_contig_concrete_tensor([256, 1024]); fusion.add_input(t0)
        t1 = tp.neg(t0); t2 = tp.broadcast(t1, [False, False, True]); t3 = tp.add(t2, t2)
        fusion.add_output(t2); fusion.add_output(t3)
    t3.split(1, "F", inner_split=False).split(3, 8).split(1, 2)
    tp.propagate_transforms(t3)
    t3.axis(0).parallelize(P.Unroll); t3.axis(1).parallelize(P.BIDx); t3.axis(5).parallelize(P.TIDy)
    tp.parallelize_all_like(t3)
    report = tp.verify(fusion, rules=["GLOBAL-VISIBILITY"])
    assert report.ok and report.queries == 0


DIFF = {"cases": 0, "violated": 0, "thread": 0}


@settings(max_examples=120, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck), print_blob=False)
@given(visibility_cases())
def test_differential_against_brute_force(case):
    codes = [CODE, "THREAD-VISIBILITY"]
    want = oracle(case.fusion, codes)
    report = tp.verify(case.fusion, "sm_90a", rules=codes)
    DIFF["cases"] += 1
    DIFF["violated"] += want[CODE].violated
    DIFF["thread"] += want["THREAD-VISIBILITY"].violated
    for code in codes:
        assert want[code].violated == (code in report.codes), "\n".join(
            [code, repr(case), describe(case.fusion), *want[code].witness, *(d.message for d in report.diagnostics)])
    for d in report.errors:  # one per op that reads across blocks
        if d.code == CODE:
            check_counterexample(case.fusion, d)


def test_zz_differential_population_has_both_verdicts():
    if not DIFF["cases"]:
        pytest.skip("the differential test did not run")
    assert 0.2 * DIFF["cases"] <= DIFF["violated"] <= 0.8 * DIFF["cases"], DIFF
    assert DIFF["thread"] >= 0.05 * DIFF["cases"], DIFF


def test_a_tile_index_divided_by_a_symbolic_tile_count_is_proved_cheaply(monkeypatch):
    """Fuzz seed 36 case 9: 192 x 192 tiles whose columns two warpgroups split, M, N and K
    symbolic, a persistent grid of 8 blocks in clusters of two. The wgmma's reads of A's tile
    name their writer through the tile index divided by ceil(N / 192); proved as one bit-vector
    conjunction that took 56 million resource units (8.6 s), and 61 million for each of two of its
    hole tests alone. Conjunct by conjunct over the integers (VerifyContext.unproved_over_integers)
    it takes thousands, so the schedule is accepted with a tenth of the usual limit."""
    from tileproof.verifier import solver

    monkeypatch.setattr(solver, "UNITS_PER_MS", 700)
    ws = tp.WarpSpecialized(tp.ParallelType.TIDy)
    params = HopperGemmParams(tile=HopperTile(m=192, n=192, split_n=True),
                              pipeline=TmaPipeline(stages=2, prefetch=1, warp_specialized=ws),
                              grid=GridOrder(group=4, persistent=8), cluster=Cluster(size=2))
    fusion = hopper_gemm("M", "N", "K", params)
    for a in ("M % 192 == 0", "N % 192 == 0", "K % 8 == 0"):
        fusion.assume(a)
    report = tp.verify(fusion)
    assert report.ok, report.codes


def test_loops_that_do_not_map_leave_the_visibility_proofs_unrun():
    """INLINE-LOOP-MAP is the visibility rules' premise: an inlined tensor whose shared loops are
    not its consumer's has no 'same iteration' to prove reads against (a mutated fuzz case spent
    50 s in SMEM-BLOCK-VISIBILITY and MMA-ACCUM-LAYOUT there); they are listed as not run."""
    from support.examples import example_module

    fusion = example_module("invalid", "lowering").consumer_made_after_inlining()
    report = tp.verify(fusion, "sm_90a")
    assert report.codes == ["INLINE-LOOP-MAP"]
    assert {"GLOBAL-VISIBILITY", "SMEM-BLOCK-VISIBILITY", "THREAD-VISIBILITY", "MMA-OPERAND-LAYOUT",
            "MMA-ACCUM-LAYOUT"} <= set(report.rules_not_run)
