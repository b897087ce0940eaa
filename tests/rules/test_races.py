"""SMEM-RACE: the barriers tileproof places order every cross-thread hand-off. Schedules of
today's API cannot remove a barrier, so the failing cases are mutations of the placed nest (a
shared tile read before its barrier, a tile overwritten in a serial loop before its readers
are done); the cross-thread query is compared with brute-force enumeration."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings

import tileproof as tp
from tileproof.execution import barriers
from tileproof.execution import nest as nest_module  # places the barriers SMEM-RACE checks
from tileproof.model.expr import evaluate
from tileproof.execution.indexing import block_dims
from tileproof.model.types import MemoryType
from tileproof.recipes import (Epilogue, GridOrder, HopperGemmParams, HopperTile, TmaPipeline, hopper_gemm,
                               tile_multiples)
from tileproof.schedule_files import discover
from tileproof.verifier.context import VerifyContext
from tileproof.verifier.rules import races
from tileproof.verifier.solver import Verdict

from support.brute_force import kernel_points  # noqa: E402
from support.schedule_gen import visibility_cases  # noqa: E402

P = tp.ParallelType
CODE = "SMEM-RACE"
ROOT = Path(__file__).resolve().parents[2]


def handed_over(transposed: bool, serial_rows: int = 1):
    """T1 (shared) [rows, 4, 8] on (TIDy, TIDx), read by T2 on (TIDx, TIDy) when transposed;
    with serial_rows > 1, T1 is inlined into T2's serial row loop (the tile is rewritten)."""
    with tp.Fusion("handed_over") as fusion:
        t0 = tp.make_contig_concrete_tensor([serial_rows, 8, 8])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    t1.axis(1).parallelize(P.TIDy)
    t1.axis(2).parallelize(P.TIDx)
    t2.axis(1).parallelize(P.TIDx if transposed else P.TIDy)
    t2.axis(2).parallelize(P.TIDy if transposed else P.TIDx)
    if serial_rows > 1:
        t1.inline_at(1)
    return fusion


def without(kinds, reason_part=""):
    """place_syncs, then drop the placed nodes of the given types (whose reason contains reason_part)."""
    place = nest_module.place_syncs

    def mutated(tree, on_chip, hazards):
        place(tree, on_chip, hazards)
        _drop(tree, kinds, reason_part)
    return mutated


def _drop(nodes, kinds, reason_part):
    nodes[:] = [n for n in nodes if not (isinstance(n, kinds) and reason_part in n.why)]
    for n in nodes:
        if hasattr(n, "body"):
            _drop(n.body, kinds, reason_part)


def test_every_bundled_example_has_its_barriers():
    cases = discover([str(ROOT / "examples" / "valid")])
    checked = 0
    for case in cases:
        fusion = case.build().snapshot()
        nest = nest_module.placed_nest(fusion)
        if nest is None or not nest.on_chip:
            continue
        assert races.unordered(nest) == [], case.name
        checked += 1
    assert checked >= 30


def test_a_tile_read_before_its_barrier_is_a_race_between_two_threads(monkeypatch):
    monkeypatch.setattr(nest_module, "place_syncs", without(barriers.Sync))
    report = tp.verify(handed_over(transposed=True))
    assert report.codes == [CODE]
    d = report.errors[0]
    assert "read after write race on T1" in d.message
    cex = d.counterexample
    writer = (cex["writer threadIdx.x"], cex["writer threadIdx.y"])
    reader = (cex["reader threadIdx.x"], cex["reader threadIdx.y"])
    assert writer != reader
    # the writer thread stores at the offset the reader thread reads: T1[y, x] at 8 * y + x
    assert 8 * writer[1] + writer[0] == cex["offset"] == 8 * reader[0] + reader[1]


def test_a_tile_overwritten_in_a_serial_loop_before_its_readers_are_done(monkeypatch):
    fusion = handed_over(transposed=True, serial_rows=4)
    assert tp.verify(fusion).ok
    monkeypatch.setattr(nest_module, "place_syncs", without(barriers.Sync, "rewritten in the next iteration"))
    report = tp.verify(fusion)
    assert report.codes == [CODE]
    assert "write after read race on T1" in report.errors[0].message


def test_no_barrier_is_needed_where_every_thread_reads_what_it_wrote(monkeypatch):
    monkeypatch.setattr(nest_module, "place_syncs", without(barriers.Sync))
    assert tp.verify(handed_over(transposed=False, serial_rows=4)).ok


def _stmatrix_epilogue(persistent):

    ws = tp.WarpSpecialized(P.TIDy, num_registers=(40, 232))
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=3, prefetch=1, warp_specialized=ws),
                              grid=GridOrder(group=8, persistent=persistent),
                              epilogue=Epilogue(dtype=tp.bfloat16, stmatrix=True))
    return tile_multiples(hopper_gemm("M", "N", "K", params), 64, n_multiple=256)


def test_a_staging_tile_rewritten_before_its_tma_store_has_read_it_is_a_race(monkeypatch):
    """The TMA store reads the tile asynchronously: the next tile's stmatrix must wait for the
    issuing thread's cp.async.bulk.wait_group.read, then a barrier."""
    monkeypatch.setattr(nest_module, "place_syncs", without(barriers.BulkStoreWait, "previous iteration"))
    found = [d for d in tp.verify(_stmatrix_epilogue(8), target="sm_90a").diagnostics if d.code == CODE]
    assert [d.counterexample["hazard"] for d in found] == ["write after read"]
    assert "T6" in found[0].message and "T3" in found[0].message


def test_a_block_exiting_before_its_tma_store_has_read_is_a_race(monkeypatch):
    monkeypatch.setattr(nest_module, "place_syncs", without(barriers.BulkStoreWait, "before the block exits"))
    found = [d for d in tp.verify(_stmatrix_epilogue(None), target="sm_90a").diagnostics if d.code == CODE]
    assert [d.counterexample["hazard"] for d in found] == ["exit before read"]
    assert "may exit while T3's TMA store still reads T6" in found[0].message


def _unfence(nodes):
    for n in nodes:
        if isinstance(n, barriers.Sync):
            n.fence_async = False
        if hasattr(n, "body"):
            _unfence(n.body)


def test_a_tile_the_threads_store_read_by_wgmma_without_the_proxy_fence_is_a_race(monkeypatch):
    """wgmma reads through the async proxy: the barrier after the threads' stores must come
    with fence.proxy.async (placed by tileproof, removed here)."""
    case = next(c for c in discover([str(ROOT / "examples" / "valid" / "wgmma.py")])
                if c.name == "hopper_matmul_operands_stored_by_threads")
    assert tp.verify(case.build(), target="sm_90a").ok
    place = nest_module.place_syncs

    def unfenced(tree, on_chip, hazards):
        place(tree, on_chip, hazards)
        _unfence(tree)
    monkeypatch.setattr(nest_module, "place_syncs", unfenced)
    found = [d for d in tp.verify(case.build(), target="sm_90a").diagnostics if d.code == CODE]
    assert found and {d.counterexample["hazard"] for d in found} == {"read after write"}
    assert "read after write race on T4" in found[0].message, found[0].message


def test_a_tma_load_read_before_its_wait_is_a_race(monkeypatch):
    case = next(c for c in discover([str(ROOT / "examples" / "valid" / "tma_smem.py")])
                if c.name == "swizzle_128b_recipe")
    monkeypatch.setattr(nest_module, "place_syncs", without(barriers.TmaWait))
    report = tp.verify(case.build(), case.target)
    assert CODE in report.codes and "read after write" in report.errors[0].message


def _brute_handoff(fusion) -> bool:
    """Some thread reads an element of the shared T1 at an offset another thread of its block wrote."""
    snap = fusion.snapshot()
    t1 = next(t for t in snap.tensors if t.memory_type is MemoryType.Shared)
    reader = next(op.output for op in snap.exprs if t1 in op.inputs)
    launch = {p: evaluate(e, {}) for p, e in block_dims(snap).items()}
    from tileproof.execution.allocation import compute_allocation
    from tileproof.execution.indexing import indices_from_logical, producer_logical

    strides = {u: evaluate(s, {}) for u, s in compute_allocation(t1).strides().items()}
    writers: dict = {}
    for where, env, idx in kernel_points(t1, launch):
        block = tuple(v for p, v in where.items() if p.cuda_name.startswith("block"))
        thread = tuple(v for p, v in where.items() if p.cuda_name.startswith("thread"))
        writers.setdefault((block, sum(evaluate(idx[u], env) * s for u, s in strides.items())), set()).add(thread)
    k = reader.definition.inputs.index(t1)
    for where, env, idx in kernel_points(reader, launch):
        block = tuple(v for p, v in where.items() if p.cuda_name.startswith("block"))
        thread = tuple(v for p, v in where.items() if p.cuda_name.startswith("thread"))
        pidx = indices_from_logical(t1, producer_logical(reader.definition, k, idx))
        offset = sum(evaluate(pidx[u], env) * s for u, s in strides.items())
        if writers.get((block, offset), set()) - {thread}:
            return True
    return False


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck), print_blob=False)
@given(visibility_cases())
def test_cross_thread_query_against_brute_force(case):
    snap = case.fusion.snapshot()
    t1 = next(t for t in snap.tensors if t.memory_type is MemoryType.Shared)
    reader = next(op.output for op in snap.exprs if t1 in op.inputs)
    out = races._handoff(VerifyContext(snap, tp.model.targets.get_target("sm_90a")), t1, reader)
    assert out.status is not Verdict.UNKNOWN
    assert (not out.proved) == _brute_handoff(case.fusion), case
