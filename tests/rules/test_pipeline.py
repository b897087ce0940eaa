"""Circular buffering of cp.async copies (issue 12, item 2): TensorView.circular_buffer at the door,
the stages in the allocation and the shared-memory plan, the pipelined loop nest that
execution/pipeline.py places, and the rules PIPELINE-STAGES, PIPELINE-WAR and CPASYNC-WAIT on it.
tests/differential/test_differential_pipeline.py compares the two proofs with a simulation."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.execution.allocation import compute_allocation
from tileproof.execution.barriers import CpAsyncCommit, CpAsyncWait, Sync
from tileproof.execution.circular import circular_axis
from tileproof.execution.pipeline import Prefetched, Prologue, Step
from tileproof.model.targets import get_target
from tileproof.execution import nest as nest_module
from tileproof.verifier.context import VerifyContext
from tileproof.verifier.rules import pipeline as pipeline_rules

from support.examples import example_module

P = tp.ParallelType
CP_ASYNC = tp.LoadStoreOpType.CpAsync


def k_loop(stages=2, prefetch=-1, *, circular=True, vector=4, columns=32, dtype=tp.float32, **kw):
    """out = set(a) through the shared tile s over a K loop of `columns`-wide tiles."""
    with tp.Fusion("k_loop") as fusion:
        a = tp.make_tensor(["M", "K"], contiguity=True, dtype=dtype)
        fusion.add_input(a)
        s = tp.set(a, op=CP_ASYNC)
        out = tp.set(s)
        fusion.add_output(out)
    fusion.assume(f"K % {vector} == 0")
    s.set_memory_type(tp.MemoryType.Shared)
    for t in (s, out):
        t.split(1, vector).split(1, columns // vector).axis(0).parallelize(P.BIDx)  # [M, Ko, cols/vec, vec]
    s.axis(2).parallelize(P.TIDx)
    s.axis(3).parallelize(P.Vectorize)
    out.merge(2).axis(2).parallelize(P.TIDx)
    s.inline_at(2)
    if circular:
        s.circular_buffer(stages, prefetch, **kw)
    return fusion, s


# -- the API ---------------------------------------------------------------------------------------------

def test_circular_buffer_records_the_numbers():
    _, s = k_loop(3)
    c = s.circular
    assert (c.stages, c.prefetch, c.type) == (3, 2, tp.Pipelined()) and c.origin and "test_pipeline.py" in c.origin
    _, s = k_loop(4, 1)
    assert (s.circular.stages, s.circular.prefetch) == (4, 1)
    _, s = k_loop(4, -3)
    assert s.circular.prefetch == 1  # stages + prefetch_distance
    _, s = k_loop(circular=False)
    assert s.circular_buffer(stages=3, prefetch=1) is s and (s.circular.stages, s.circular.prefetch) == (3, 1)
    assert s.circular_buffer(2, type=tp.Pipelined(uses_mbarrier_for_war=False)).circular.type == tp.Pipelined()


@pytest.mark.parametrize("call,words", [
    (lambda s: s.circular_buffer(0), ("number_of_stages must be positive", "0")),
    (lambda s: s.circular_buffer(2.0), ("number_of_stages must be an int", "2.0")),
    (lambda s: s.circular_buffer(True), ("number_of_stages must be an int",)),
    (lambda s: s.circular_buffer(2, "1"), ("prefetch_distance must be an int",)),
    (lambda s: s.circular_buffer(2, type="pipelined"), ("type must be a tp.Pipelined",)),
    (lambda s: s.circular_buffer(), ("number_of_stages is missing",)),
    (lambda s: s.circular_buffer(2, stages=3), ("not both",)),
    (lambda s: tp.Pipelined(uses_mbarrier_for_war=1), ("uses_mbarrier_for_war must be True or False",)),
])
def test_wrong_arguments_are_refused_at_the_door(call, words):
    _, s = k_loop(circular=False)
    with pytest.raises(tp.ScheduleError) as e:
        call(s)
    for w in words:
        assert w in str(e.value)


# -- storage ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("stages", [2, 3, 5])
def test_storage_is_stages_times_the_tile(stages):
    fusion, s = k_loop(stages)
    alloc = compute_allocation(s)
    assert alloc.stages == stages and alloc.tile_elements_expr.value == 32
    assert alloc.num_elements == 32 * stages and alloc.bytes == 128 * stages
    assert tp.allocation(s).bytes == 128 * stages
    ctx = VerifyContext(fusion, get_target("sm_90a"))
    assert ctx.smem_plan.buffers["T1"].bytes.value == 128 * stages


def test_an_uninlined_circular_buffer_has_one_stage_of_storage():
    """Without a circular loop there is nothing to rotate over (PIPELINE-STAGES reports it)."""
    fusion, s = k_loop(3)
    s.compute_at = 0
    assert compute_allocation(s).stages == 1


def test_smem_capacity_counts_the_stages():
    fusion, s = k_loop(8, columns=8192 // 8 * 8)  # 8 stages of a 32 KiB tile: 256 KiB
    report = tp.verify(fusion, rules=["SMEM-CAPACITY"])
    d = report.errors[0]
    assert report.codes == ["SMEM-CAPACITY"] and d.counterexample["bytes"] == 8 * 8192 * 4
    assert any("8 stages of its tile" in n for n in d.notes) and "fewer stages" in d.hint
    fusion, s = k_loop(6, columns=8192)  # 6 x 32 KiB = 192 KiB fits 227 KiB
    assert tp.verify(fusion, rules=["SMEM-CAPACITY"]).ok


def test_each_iteration_addresses_its_stage():
    """The writer's and the reader's shared offsets carry (K loop index % stages) * tile."""
    from tileproof.codegen.ir import CpAsyncCopy, Compute
    from tileproof.codegen.lower import lower

    fusion, _ = k_loop(3)
    st = lower(fusion.snapshot(), get_target("sm_90a"), until="index")
    copy, read = [s for _, s in st.statements]
    assert isinstance(copy, CpAsyncCopy) and isinstance(read, Compute)
    assert "32*(loop.i1 % 3)" in str(copy.out.offset) and "32*(loop.i1 % 3)" in str(read.ins[0].offset)


# -- PIPELINE-STAGES ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("stages,prefetch,codes", [
    (2, -1, []), (2, 1, []), (3, -1, []), (3, 0, []), (3, 1, []), (4, 3, []),
    (1, -1, ["PIPELINE-STAGES"]),
    (2, 2, ["PIPELINE-STAGES", "PIPELINE-WAR"]),
    (3, 5, ["PIPELINE-STAGES", "PIPELINE-WAR"]),
    (2, -3, ["CPASYNC-WAIT", "PIPELINE-STAGES"]),
])
def test_the_stage_and_prefetch_numbers(stages, prefetch, codes):
    fusion, _ = k_loop(stages, prefetch)
    assert tp.verify(fusion).codes == codes


def test_the_circular_loop_must_be_a_serial_loop_inside_the_tile():
    fusion, s = k_loop(2)
    s.inline_at(1)  # the axis left of the compute-at position is BIDx
    d = tp.verify(fusion, rules=["PIPELINE-STAGES"]).errors[0]
    assert "is parallelized on BIDx" in d.message and d.counterexample == {"axis": 0, "compute_at": 1}


def test_inlined_through_a_thread_axis_the_circular_loop_is_the_serial_one_left_of_it():
    """nvFuser's circular axis (getInnerMostCircularBufferPosition): the copies inlined through the
    TIDx axis they share with the sum pipeline over Ko, the innermost serial axis left of their
    compute-at position, and the placed nest gives them a TIDx scope of their own in Ko's body,
    apart from the sum's; with every axis left of the compute-at position a thread or block index
    there is no circular loop (the test above)."""
    fusion = example_module("valid", "cp_async").k_loop_sum_inlined_most_circular()
    assert tp.verify(fusion).ok
    copies = [t for t in fusion.tensors if t.circular is not None]
    assert [(t.compute_at, circular_axis(t)) for t in copies] == [(3, 1), (3, 1)]
    nest = nest_module.placed_nest(fusion.snapshot())
    ko = _find_loop(nest.tree, lambda n: any(isinstance(c, Prefetched) for c in n.body))
    (refill,) = [c for c in ko.body if isinstance(c, Prefetched)]
    (scope,) = refill.body  # the copies' own TIDx scope
    assert _leaf_names(scope.body) == [t.name for t in copies]
    readers = [c for c in ko.body if hasattr(c, "key") and c.key == scope.key]  # the sum's TIDx scope
    assert len(readers) == 1 and _leaf_names(readers[0].body) == [fusion.outputs[0].name]


def _leaf_names(nodes) -> list[str]:
    return [name for n in nodes for name in (_leaf_names(n.body) if hasattr(n, "body") else [n.name])]


def _find_loop(nodes, test):
    for n in nodes:
        if hasattr(n, "key") and test(n):
            return n
        found = _find_loop(getattr(n, "body", []), test)
        if found is not None:
            return found
    return None


def test_circular_buffers_of_one_loop_share_their_numbers():
    with tp.Fusion("two") as fusion:
        a = tp.make_tensor(["M", "K"], contiguity=True)
        b = tp.make_tensor(["M", "K"], contiguity=True)
        fusion.add_input(a)
        fusion.add_input(b)
        sa, sb = tp.set(a, op=CP_ASYNC), tp.set(b, op=CP_ASYNC)
        out = tp.add(sa, sb)
        fusion.add_output(out)
    fusion.assume("K % 4 == 0")
    for t in (sa, sb, out):
        t.split(1, 4).split(1, 8).axis(0).parallelize(P.BIDx)
    for t, stages in ((sa, 2), (sb, 3)):
        t.set_memory_type(tp.MemoryType.Shared)
        t.axis(2).parallelize(P.TIDx)
        t.axis(3).parallelize(P.Vectorize)
        t.inline_at(2)
        t.circular_buffer(stages, 1)
    out.merge(2).axis(2).parallelize(P.TIDx)
    report = tp.verify(fusion)
    assert report.codes == ["PIPELINE-STAGES"] and "different numbers" in report.errors[0].message
    sb.circular_buffer(2, 1)
    assert tp.verify(fusion).ok


def test_only_cp_async_into_shared_memory_with_barriers_is_pipelined():
    fusion, s = k_loop(2, type=tp.Pipelined(uses_mbarrier_for_war=True))
    report = tp.verify(fusion, rules=["LOWERING-SUPPORTED"])
    assert report.codes == ["LOWERING-SUPPORTED"] and "uses_mbarrier_for_war=True" in report.errors[0].message


# -- the pipelined nest -----------------------------------------------------------------------------------------

def nest_of(fusion):
    return nest_module.placed_nest(fusion.snapshot())


def _find(nodes, kind):
    for n in nodes:
        if isinstance(n, kind):
            return n
        found = _find(getattr(n, "body", []), kind)
        if found is not None:
            return found
    return None


@pytest.mark.parametrize("stages,prefetch", [(2, 1), (3, 2), (3, 1), (4, 1)])
def test_the_placed_loop(stages, prefetch):
    """wait (prefetch - 1 groups in flight), one barrier, the refill of the stage read in the
    previous iteration, its commit, then the reads: no barrier at the end of the iteration."""
    fusion, _ = k_loop(stages, prefetch)
    tree = nest_of(fusion).tree
    prologue = _find(tree, Prologue)
    assert (prologue.stages, prologue.prefetch) == (stages, prefetch)
    scope = next(n for n in tree if hasattr(n, "body")).body  # the block's scope: prologue, then the K loop
    k = next(i for i, n in enumerate(scope) if isinstance(n, Prologue))
    body = scope[k + 1].body
    assert isinstance(body[0], CpAsyncWait) and body[0].pending == prefetch - 1 and not body[0].commit
    assert isinstance(body[1], Sync) and isinstance(body[2], Prefetched) and isinstance(body[3], CpAsyncCommit)
    assert not any(isinstance(n, Sync) for n in body[2:])


def test_without_prefetch_the_copy_is_waited_for_in_its_iteration():
    fusion, _ = k_loop(2, 0)
    scope = next(n for n in nest_of(fusion).tree if hasattr(n, "body")).body
    body = next(n for n in scope if hasattr(n, "body") and any(isinstance(c, Prefetched) for c in n.body)).body
    assert isinstance(body[0], Prefetched) and isinstance(body[1], CpAsyncWait) and body[1].pending == 0
    assert isinstance(body[2], Sync) and tp.verify(fusion, rules=["CPASYNC-WAIT", "PIPELINE-WAR"]).ok


def test_cpasync_wait_and_pipeline_war_see_the_prologue():
    fusion, _ = k_loop(3)
    ctx = VerifyContext(fusion.snapshot(), get_target("sm_90a"))
    [(tl, writer, reader)] = pipeline_rules._timelines(ctx)
    assert (tl.stages, tl.prefetch, tl.prologue_iterations) == (3, 2, 2)
    assert [e.step for e in tl.prologue] == [Step.ISSUE, Step.COMMIT]
    assert str(tl.extent) == "ceil(ceil(K / 4) / 8)"


@pytest.mark.parametrize("remove", ["war", "wait"])
def test_refilling_before_the_barrier_or_deepening_the_wait_is_reported(remove, monkeypatch):
    """The rules check the nest the code generator emits: a refill issued before the iteration's
    barrier overwrites a stage other threads may still read (PIPELINE-WAR); a wait that leaves one
    more group in flight lets a read see its copy in flight (CPASYNC-WAIT)."""
    place = nest_module.place_syncs

    def broken(tree, on_chip, hazards):
        place(tree, on_chip, hazards)
        loop = _find(tree, Prefetched)
        owner = next(n for n in _loops(tree) if len(n.body) > 2 and n.body[2] is loop)
        if remove == "war":  # [wait, refill, barrier, commit, ...]
            owner.body[1], owner.body[2] = owner.body[2], owner.body[1]
        else:
            owner.body[0].pending += 1

    monkeypatch.setattr(nest_module, "place_syncs", broken)
    fusion, _ = k_loop(2)
    report = tp.verify(fusion, rules=["CPASYNC-WAIT", "PIPELINE-WAR"])
    d = report.errors[0]
    if remove == "war":
        assert report.codes == ["PIPELINE-WAR"]
        assert d.counterexample["refill iteration"] == 1 and d.counterexample["read iteration"] == 0
        assert d.counterexample["data"] == 2 and d.counterexample["stage"] == 0
    else:
        assert report.codes == ["CPASYNC-WAIT"] and "may leave the copy in flight" in d.message


def _loops(nodes):
    for n in nodes:
        if hasattr(n, "body"):
            yield n
            yield from _loops(n.body)


def test_smem_race_leaves_circular_buffers_to_the_pipeline_rules():
    fusion, _ = k_loop(2)
    nest_ = nest_of(fusion)
    from tileproof.verifier.rules.races import unordered

    assert unordered(nest_) == []


def ldmatrix_from_a_circular_buffer(tiles=6, stages=2):
    """fp16 [8, 8 * tiles]: each K tile (8 x 8) copied into shared memory by cp.async (a row of 16
    bytes per thread), circular-buffered, then read by ldmatrix.x1 into registers and stored."""
    with tp.Fusion("ldmatrix_circular") as fusion:
        t0 = tp.make_contig_concrete_tensor([8, 8 * tiles], dtype=tp.float16)
        fusion.add_input(t0)
        t1 = tp.set(t0, op=CP_ASYNC)
        t2 = tp.set(t1, op=tp.LoadStoreOpType.LdMatrix)
        t3 = tp.set(t2)
        fusion.add_output(t3)
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2, t3):
        t.split(1, 8).reorder({1: 0})  # [K tiles, 8 rows, 8 columns]
    t1.axis(1).parallelize(P.TIDx)
    t1.axis(2).parallelize(P.Vectorize)
    for t in (t2, t3):
        t.split(2, 2).merge(1, 2).axis(1).parallelize(P.TIDx)  # [K tiles, 32 lanes, 2]
    t2.axis(2).parallelize(P.Vectorize)
    t1.inline_at(1)
    t2.inline_at(2)
    t1.circular_buffer(stages)
    return fusion


def test_ldmatrix_reads_the_iterations_stage():
    """The LDSM rules prove the row addresses the kernel computes, stage offset included."""
    from tileproof.verifier.analysis.ldsm import _offset, accesses

    fusion = ldmatrix_from_a_circular_buffer()
    report = tp.verify(fusion)
    assert report.ok, report.codes
    ctx = VerifyContext(fusion.snapshot(), get_target("sm_90a"))
    [a] = accesses(ctx)
    assert "% 2)" in str(_offset(ctx, a))  # (K tile index % 2) * 64 elements
    assert "tp_cp_async_wait<0>();" in tp.compile(fusion).cuda_source  # 2 stages: wait for the one in flight


# -- plain copies into shared memory -------------------------------------------------------------------------

@pytest.mark.parametrize("name, prefetch", [("transposed_tile_three_stages", 2), ("transposed_tile_no_prefetch", 0)])
def test_a_plain_copy_into_shared_memory_is_pipelined_with_one_barrier_per_iteration(name, prefetch):
    """nvFuser circular-buffers any copy: a tp.set into shared memory gets its stages, a prologue,
    and one barrier per iteration (before the refill with prefetch, after the copies without)."""
    fusion = getattr(example_module("valid", "circular_copies"), name)()
    assert tp.verify(fusion).ok
    nest = nest_module.placed_nest(fusion.snapshot())
    loop = _find_loop(nest.tree, lambda n: any(isinstance(c, Prefetched) for c in n.body))
    kinds = [type(c).__name__ for c in loop.body if isinstance(c, (Sync, Prefetched))]
    assert kinds == (["Sync", "Prefetched"] if prefetch else ["Prefetched", "Sync"])
    (refill,) = [c for c in loop.body if isinstance(c, Prefetched)]
    assert refill.shared and not refill.asynchronous and (refill.prefetch, refill.stages) == (prefetch, 3 if prefetch else 2)


def test_without_its_barrier_a_plain_circular_copy_is_reported(monkeypatch):
    """With the barrier of each iteration taken away, a thread reads the stage before the other
    threads' writes of it (CPASYNC-WAIT: no barrier between the copy and the read) and refills a
    stage other threads may still read (PIPELINE-WAR)."""
    place = nest_module.place_syncs

    def without(tree, on_chip, hazards):
        place(tree, on_chip, hazards)
        _strip(tree, Sync)

    monkeypatch.setattr(nest_module, "place_syncs", without)
    fusion = example_module("valid", "circular_copies").transposed_tile_three_stages()
    report = tp.verify(fusion, rules=["CPASYNC-WAIT", "PIPELINE-WAR"])
    assert report.codes == ["CPASYNC-WAIT", "PIPELINE-WAR"]
    d = next(d for d in report.errors if d.code == "CPASYNC-WAIT")
    assert "no __syncthreads comes between the copy and the read" in d.message and d.counterexample["iteration"] >= 0


def _strip(nodes: list, kind: type) -> None:
    for n in nodes:
        if hasattr(n, "body"):
            _strip(n.body, kind)
    nodes[:] = [n for n in nodes if type(n) is not kind]
