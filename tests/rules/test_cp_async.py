"""cp.async (issue 12): the API at the door, the copy's size for its cache (CPASYNC-SIZE), the
alignment of both its addresses (CPASYNC-ALIGN), and the wait before each read (CPASYNC-WAIT),
including what the rules report when the placed waits are taken away."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.execution.barriers import CpAsyncWait, Sync
from tileproof.execution.cp_async import cp_async_copy
from tileproof.execution.statements import CondKind, tensor_execution
from tileproof.model.expr import const, var
from tileproof.execution.pipeline import Event, Step, Timeline
from tileproof.model.targets import get_target
from tileproof.verifier.analysis.pipeline import prove_complete
from tileproof.verifier.context import VerifyContext
from tileproof.verifier.rules import pipeline as pipeline_rules

P = tp.ParallelType
CP_ASYNC = tp.LoadStoreOpType.CpAsync


def copy(shape, *, dtype=tp.float32, vector=1, cache_op=tp.CacheOp.Unspecified, threads=True, pad=None):
    """T0 -> (cp.async) shared T1 -> T2; T1's innermost axis split by `vector` and vectorized."""
    with tp.Fusion("cp") as fusion:
        t0 = tp.make_tensor(shape, contiguity=True, dtype=dtype)
        fusion.add_input(t0)
        t1 = tp.set(t0, op=CP_ASYNC, cache_op=cache_op)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    if pad is not None:
        loop = t1.get_loop_domain()
        t1.split(1, pad)
        t1.set_allocation_domain(t1.get_loop_domain())
        t1.set_loop_domain(loop)
    for t in (t1, t2):
        t.split(1, vector)
        if threads:
            t.axis(0).parallelize(P.TIDx)
    if vector > 1:
        t1.axis(2).parallelize(P.Vectorize)
    return fusion


# -- the API ---------------------------------------------------------------------------------------

def test_set_and_cache_after_take_a_cache_op():
    with tp.Fusion("api") as fusion:
        t0 = tp.make_contig_concrete_tensor([8, 32])
        fusion.add_input(t0)
        t1 = tp.set(t0, op=CP_ASYNC, cache_op=tp.CacheOp.Global)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    assert t1.definition.cache_op is tp.CacheOp.Global and str(t1.definition) == "T1 = CpAsync(T0)"
    t3 = t1.cache_after()
    assert t3.definition.cache_op is tp.CacheOp.Unspecified
    t4 = t0.cache_after(CP_ASYNC, tp.CacheOp.AllLevels)
    assert t4.definition.op_type is CP_ASYNC and t4.definition.cache_op is tp.CacheOp.AllLevels
    assert t1.definition.inputs == [t4]  # t0's consumers now read the copy


@pytest.mark.parametrize("call,words", [
    (lambda t: tp.set(t, op=tp.LoadStoreOpType.TMA, cache_op=tp.CacheOp.Global),
     ("set", "cache_op Global", "takes no cache op")),
    (lambda t: tp.set(t, op=CP_ASYNC, cache_op=tp.CacheOp.Streaming), ("set", "Streaming", ".cs is for a plain load")),
    (lambda t: tp.set(t, op=CP_ASYNC, cache_op="cg"), ("set", "cache_op", "tp.CacheOp")),
    (lambda t: tp.set(t, op=CP_ASYNC, cache_op="global"), ("tp.CacheOp.Global",)),
    (lambda t: t.cache_after(tp.LoadStoreOpType.TMA, tp.CacheOp.AllLevels), ("cache_after", "AllLevels")),
])
def test_a_wrong_cache_op_is_refused_at_the_door(call, words):
    with tp.Fusion("api"):
        t0 = tp.make_contig_concrete_tensor([8, 32])
        with pytest.raises(tp.ScheduleError) as e:
            call(t0)
    for w in words:
        assert w in str(e.value)


@pytest.mark.parametrize("dtype,vector,cache_op,cache,ok", [
    (tp.float32, 4, tp.CacheOp.Unspecified, "cg", True),
    (tp.float32, 4, tp.CacheOp.AllLevels, "ca", True),
    (tp.float32, 4, tp.CacheOp.Global, "cg", True),
    (tp.float32, 2, tp.CacheOp.Unspecified, "ca", True),
    (tp.float32, 2, tp.CacheOp.Global, "cg", False),  # the issue's 8-byte cp.async.cg
    (tp.float32, 1, tp.CacheOp.Unspecified, "ca", True),
    (tp.float32, 1, tp.CacheOp.Global, "cg", False),
    (tp.bfloat16, 1, tp.CacheOp.Unspecified, "ca", False),  # 2 bytes
    (tp.bfloat16, 2, tp.CacheOp.AllLevels, "ca", True),
    (tp.bfloat16, 8, tp.CacheOp.Unspecified, "cg", True),
    (tp.float32, 3, tp.CacheOp.AllLevels, "ca", False),  # 12 bytes
    (tp.float64, 4, tp.CacheOp.Unspecified, "ca", False),  # 32 bytes
    (tp.int8, 4, tp.CacheOp.AllLevels, "ca", True),
    (tp.int8, 16, tp.CacheOp.Global, "cg", True),
])
def test_copy_size_per_cache(dtype, vector, cache_op, cache, ok):
    fusion = copy([32, 48], dtype=dtype, vector=vector, cache_op=cache_op)
    t1 = fusion.tensor("T1")
    c = cp_async_copy(t1)
    assert (c.cache, c.bytes, c.size_ok) == (cache, vector * dtype.bytes, ok)
    report = tp.verify(fusion, rules=["CPASYNC-SIZE"])
    assert report.ok == ok, report.codes
    if not ok:
        d = report.errors[0]
        assert d.counterexample == {"elements": vector, "bytes": vector * dtype.bytes, "cache": cache}
        assert ("16 bytes" in d.hint) if cache == "cg" else ("elements of" in d.hint)


def test_a_symbolic_vector_has_no_cp_size():
    with tp.Fusion("sym") as fusion:
        t0 = tp.make_tensor(["M", "V"], contiguity=True)
        fusion.add_input(t0)
        t1 = tp.set(t0, op=CP_ASYNC)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    t1.axis(1).parallelize(P.Vectorize)
    report = tp.verify(fusion, rules=["CPASYNC-SIZE"])
    assert report.codes == ["CPASYNC-SIZE"] and "symbolic extent V" in report.errors[0].message


def test_cp_async_widths_are_not_vectorize_width_findings():
    """VECTORIZE-WIDTH allows 2-byte vectors; cp.async does not: only CPASYNC-SIZE speaks."""
    report = tp.verify(copy([32, 48], dtype=tp.bfloat16, vector=1))
    assert "CPASYNC-SIZE" in report.codes and "VECTORIZE-WIDTH" not in report.codes
    report = tp.verify(copy([32, 48], vector=3, cache_op=tp.CacheOp.AllLevels))
    assert "CPASYNC-SIZE" in report.codes and "VECTORIZE-WIDTH" not in report.codes


# -- alignment -------------------------------------------------------------------------------------

@pytest.mark.parametrize("pad,vector,ok", [(5, 4, False), (6, 4, False), (8, 4, True), (6, 2, True), (5, 2, False),
                                           (5, 1, True)])
def test_padded_shared_rows(pad, vector, ok):
    """Rows of 4 fp32 padded to `pad` elements: the copy of row r starts at byte 4 * pad * r."""
    fusion = copy([64, 4], vector=vector, pad=pad)
    report = tp.verify(fusion, rules=["CPASYNC-ALIGN"])
    assert report.ok == ok, [d.message for d in report.errors]
    if not ok:
        d = report.errors[0]
        b = 4 * vector
        assert "writes a misaligned shared address" in d.message
        assert d.counterexample["threadIdx.x"] == 1 and d.counterexample["byte address"] == 4 * pad
        assert d.counterexample["remainder"] == (4 * pad) % b


def k_tiles(*assume):
    with tp.Fusion("k_tiles") as fusion:
        t0 = tp.make_tensor(["M", "K"], contiguity=True)
        fusion.add_input(t0)
        t1 = tp.set(t0, op=CP_ASYNC)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    for a in assume:
        fusion.assume(a)
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2):
        t.split(1, 4).split(1, 8)
        t.axis(0).parallelize(P.BIDx)
        t.axis(2).parallelize(P.TIDx)
    t1.axis(3).parallelize(P.Vectorize)
    t1.inline_at(2)
    return fusion


def test_a_symbolic_row_stride_gets_a_verified_assumption():
    report = tp.verify(k_tiles(), rules=["CPASYNC-ALIGN"])
    d = report.errors[0]
    assert "reads a misaligned global address" in d.message and d.counterexample["K"] % 4
    assert 'fusion.assume("K % 4 == 0")' in d.hint and "verified" in d.hint
    assert tp.verify(k_tiles("K % 4 == 0")).ok
    assert tp.verify(k_tiles("K % 2 == 0"), rules=["CPASYNC-ALIGN"]).codes == ["CPASYNC-ALIGN"]


def test_a_hole_is_aligned_too():
    """Holes of the K split are issued with src-size 0: their shared address must be aligned,
    their global address is never formed (the rule's global claim excludes them)."""
    fusion = k_tiles("K % 4 == 0")
    launch = VerifyContext(fusion, get_target("sm_90a")).block_dims
    assert tensor_execution(fusion.tensor("T1"), launch).conds_of(CondKind.HOLE)
    assert tp.verify(fusion, rules=["CPASYNC-ALIGN"]).ok


# -- lowering structure ------------------------------------------------------------------------------

def test_the_vector_must_be_innermost():
    fusion = copy([32, 48], vector=4)
    t1 = fusion.tensor("T1")
    t1.reorder({2: 1})
    report = tp.verify(fusion, rules=["LOWERING-SUPPORTED"])
    assert report.codes == ["LOWERING-SUPPORTED"] and "innermost Vectorize axis" in report.errors[0].message


def test_holes_need_an_allocation_along_the_loop():
    """A hole's zeros land at its own slot only when the tile is allocated along its loop IDs."""
    with tp.Fusion("holes") as fusion:
        t0 = tp.make_contig_concrete_tensor([30])
        fusion.add_input(t0)
        t1 = tp.set(t0, op=CP_ASYNC)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2):
        t.split(0, 8)
        t.axis(1).parallelize(P.TIDx)
    assert tp.verify(fusion).ok  # allocated along [4, TIDx{8}]: the holes 30, 31 have their slots
    t1.set_allocation_domain(t1.get_logical_domain())
    report = tp.verify(fusion, rules=["LOWERING-SUPPORTED"])
    assert report.codes == ["LOWERING-SUPPORTED"] and "zeros would land" in report.errors[0].message


# -- waits ---------------------------------------------------------------------------------------------

def timeline(*steps, extent=4):
    events = tuple(Event(Step.WAIT, int(s.split()[1])) if s.startswith("wait") else Event(Step(s)) for s in steps)
    return Timeline("T1", "T2", events, const(extent) if isinstance(extent, int) else extent)


@pytest.mark.parametrize("steps,ok,why", [
    (("issue", "commit", "wait 0", "sync", "read", "sync"), True, None),
    (("issue", "commit", "wait 0", "sync", "read"), True, None),
    (("issue", "sync", "read"), False, "commits after its copy"),  # no wait
    (("issue", "commit", "wait 1", "sync", "read"), False, "pending allowed"),  # leaves the copy in flight
    (("issue", "commit", "wait 0", "read", "sync"), False, None),  # no barrier between wait and read
    (("issue", "wait 0", "sync", "read"), False, None),  # nothing committed: the wait waits for nothing
    (("read", "issue", "commit", "wait 0", "sync"), False, "issued before the read"),
    (("issue", "commit", "commit", "wait 1", "sync", "read"), True, None),  # an empty group after it
])
def test_complete_on_timelines(steps, ok, why):
    out = prove_complete(timeline(*steps))
    assert out.proved == ok
    if not ok:
        assert out.model["iteration"] == 0
    assert prove_complete(timeline(*steps, extent=var("E"))).proved == ok  # every extent


def loop_copy():
    """A 32-column K tile copied per iteration and read by other threads."""
    with tp.Fusion("loop_copy") as fusion:
        t0 = tp.make_tensor(["M", "K"], contiguity=True)
        fusion.add_input(t0)
        t1 = tp.set(t0, op=CP_ASYNC)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    fusion.assume("K % 4 == 0")
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2):
        t.split(1, 4).split(1, 8)  # [M, Ko, 8, 4]
        t.axis(0).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.TIDx)
    t1.axis(3).parallelize(P.Vectorize)
    t2.merge(2).axis(2).parallelize(P.TIDx)  # [M, Ko, TIDx{32}]: thread x reads what thread x / 4 copied
    t1.inline_at(2)
    return fusion


def test_the_placed_wait_and_barrier_are_proved():
    fusion = loop_copy()
    report = tp.verify(fusion)
    assert report.ok, report.codes
    ctx = VerifyContext(fusion.snapshot(), get_target("sm_90a"))
    [(tl, writer, reader)] = pipeline_rules._timelines(ctx)
    assert [e.step for e in tl.body] == [Step.ISSUE, Step.COMMIT, Step.WAIT, Step.SYNC, Step.READ, Step.SYNC]
    assert (writer.name, reader.name) == ("T1", "T2") and str(tl.extent) == "ceil(ceil(K / 4) / 8)"


@pytest.mark.parametrize("remove,why", [(CpAsyncWait, "no cp.async.wait_group"), (Sync, "no __syncthreads")])
def test_removing_a_placed_wait_or_barrier_is_reported(remove, why, monkeypatch):
    """CPASYNC-WAIT checks the nest the code generator emits; without the wait (or the barrier
    after it) the read of iteration 0 may see data still in flight."""
    from tileproof.execution import nest as nest_module

    place = nest_module.place_syncs

    def without(tree, on_chip, hazards):
        place(tree, on_chip, hazards)
        _strip(tree, remove)

    monkeypatch.setattr(nest_module, "place_syncs", without)
    report = tp.verify(loop_copy(), rules=["CPASYNC-WAIT"])
    assert report.codes == ["CPASYNC-WAIT"]
    d = report.errors[0]
    assert why in d.message and d.counterexample["iteration"] == 0 and "tileproof bug" in " ".join(d.notes)


def _strip(nodes: list, kind: type) -> None:
    """Remove the first-level nodes of `kind` that follow a cp.async copy in its scope."""
    for n in nodes:
        if hasattr(n, "body"):
            _strip(n.body, kind)
    nodes[:] = [n for n in nodes if type(n) is not kind]


def test_smem_race_leaves_cp_async_to_cpasync_wait(monkeypatch):
    """SMEM-RACE does not report a cp.async read after write itself (CPASYNC-WAIT does, once)."""
    from tileproof.execution import nest as nest_module

    place = nest_module.place_syncs

    def without(tree, on_chip, hazards):
        place(tree, on_chip, hazards)
        _strip(tree, CpAsyncWait)
        _strip(tree, Sync)

    monkeypatch.setattr(nest_module, "place_syncs", without)
    report = tp.verify(loop_copy(), rules=["CPASYNC-WAIT", "SMEM-RACE"])
    kinds = sorted((d.code, d.counterexample.get("hazard")) for d in report.errors)
    assert kinds == [("CPASYNC-WAIT", None), ("SMEM-RACE", "write after read")]
