"""A global intermediate written by a TMA store and read back in the same kernel (nvFuser's
TMAMiscTest.StoreSyncInsertion): GLOBAL-INTERMEDIATE accepts it when every reader is a plain
load that shares no repeating loop with the store, the placed nest waits for the block's stores to
complete (cp.async.bulk.wait_group 0, not .read, then fence.proxy.async.global) and syncs before
the reads (execution/barriers.py insert_store_completions), and GLOBAL-VISIBILITY proves each
element is read in the block that stored it."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.execution import barriers
from tileproof.execution import nest as nest_module
from tileproof.execution import pipeline as pipeline_module
from tileproof.execution.conditions import lowering as conditions

from support.tma_read_back import output_read_back, read_back

P = tp.ParallelType
TMA = tp.LoadStoreOpType.TMA


@pytest.mark.parametrize("blocks", ["none", "same"])
def test_a_block_reads_back_what_it_stored(blocks):
    fusion = read_back(f"read_back_{blocks}", blocks=blocks)
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, report.codes
    source = tp.compile(fusion, "sm_90a").cuda_source
    body = source[source.index("__global__"):]
    wait = body.index('asm volatile("cp.async.bulk.wait_group 0;"')  # complete: not .read
    fence = body.index('asm volatile("fence.proxy.async.global;"')
    sync = body.index("__syncthreads();  // T2 stored by TMA above")
    read = body.index("= T2[")
    assert body.rindex("tp_bulk_store_1d(&tmap_T2", 0, wait) < wait < fence < sync < read
    assert "float* T2)" in body  # the intermediate's buffer: a workspace the runtime allocates


def test_another_blocks_store_is_not_read():
    """T3 reads along blockIdx.x rows other blocks stored: no grid-wide barrier orders them."""
    fusion = read_back("read_back_other_blocks", blocks="other")
    report = tp.verify(fusion, "sm_90a")
    assert "GLOBAL-VISIBILITY" in report.codes
    (d,) = [d for d in report.errors if d.code == "GLOBAL-VISIBILITY"]
    assert "in the block with blockIdx.x" in d.message and "T2" in d.message, d.message
    cx = d.counterexample
    assert cx["reader blockIdx.x"] != cx["writer blockIdx.x"], cx
    assert "GLOBAL-INTERMEDIATE" not in report.codes


def test_a_read_in_the_stores_loop_is_rejected():
    """T2 inlined into T3 at axis 2 (one block): the serial loops over axes 0 and 1 hold both, and
    GLOBAL-INTERMEDIATE accepts only reads after the store's loops."""
    fusion = read_back("read_back_in_the_loop", blocks="none", inline=True)
    report = tp.verify(fusion, "sm_90a")
    assert "GLOBAL-INTERMEDIATE" in report.codes, report.codes
    (d,) = [d for d in report.errors if d.code == "GLOBAL-INTERMEDIATE"]
    assert "inside a loop that also runs T2's TMA store" in d.message, d.message


def test_without_the_completion_wait_it_is_rejected(monkeypatch):
    """The acceptance reads the placed nest: drop the completion and GLOBAL-INTERMEDIATE rejects."""
    monkeypatch.setattr(nest_module, "insert_store_completions", lambda tree, stored, hazards: None)
    fusion = read_back("read_back_unwaited", blocks="none")
    assert not conditions.completed_in_block(fusion, fusion.tensors[2])
    report = tp.verify(fusion, "sm_90a")
    assert "GLOBAL-INTERMEDIATE" in report.codes
    assert "GLOBAL-VISIBILITY" in report.codes  # then the writer must be the reading thread: it is not


def test_a_wait_for_the_reads_only_is_not_completion():
    """cp.async.bulk.wait_group.read orders the store's shared-memory reads, not its global writes."""
    fusion = read_back("read_back_read_wait", blocks="none")
    placed = nest_module.placed_nest(fusion)
    stmts = barriers.statement_paths(placed.tree, placed.hazards)
    (w,) = [p for _, a, p in stmts if a.stores == "T2"]
    (r,) = [p for _, a, p in stmts if "T2" in a.reads]
    assert barriers.store_completed(placed.tree, placed.hazards, w, r)
    for n in placed.tree:
        if isinstance(n, barriers.BulkStoreWait):
            n.complete = False
    assert not barriers.store_completed(placed.tree, placed.hazards, w, r)


def test_a_global_intermediate_a_plain_store_writes_is_still_rejected():
    with tp.Fusion("plain_global_intermediate") as fusion:
        t0 = tp.make_contig_tensor(1)
        fusion.add_input(t0)
        t1 = tp.exp(t0)  # computed: a plain copy of T0 would be a view of it (model/producer_aliases.py)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Global)
    report = tp.verify(fusion, "sm_90a")
    assert "GLOBAL-INTERMEDIATE" in report.codes


def test_an_output_read_back_by_its_storing_thread_waits_for_completion():
    """A TMA-stored output that another statement reads (GLOBAL-VISIBILITY: the storing thread,
    thread 0, reads it): the block waits for the store to complete before the read, as for an
    intermediate (before, the read could run before the store had written global memory)."""
    fusion = output_read_back("output_read_back")
    assert tp.verify(fusion, "sm_90a").ok
    body = tp.compile(fusion, "sm_90a").cuda_source
    body = body[body.index("__global__"):]
    assert body.index("tp_bulk_store_1d(&tmap_T2") < body.index('"cp.async.bulk.wait_group 0;"') < body.index("= T2[")


def test_a_circular_tile_a_tma_store_reads_is_refilled_after_the_stores_reads(monkeypatch):
    """StoreSyncInsertion/circular_buffered: T1 (10 stages, prefetch 4) is read by T2's TMA store,
    whose reads of a stage end only at the issuing thread's cp.async.bulk.wait_group.read: each
    iteration waits for them before the barrier that orders the refill (nvFuser: wait_group.read
    5 at the end of the loop). Without that wait, PIPELINE-WAR rejects it with the iterations."""
    fusion = read_back("circular_read_back", blocks="none")
    fusion.tensors[1].circular_buffer(10, 4)
    assert tp.verify(fusion, "sm_90a").ok
    body = tp.compile(fusion, "sm_90a").cuda_source
    body = body[body.index("__global__"):]
    refill = body.index("the copies of iteration (i0 + 4U)")
    assert body.rindex("tp_bulk_store_wait();", 0, refill) < body.rindex("__syncthreads();", 0, refill)
    assert body.index("tp_mbar_wait(") < body.rindex("tp_bulk_store_wait();", 0, refill)

    monkeypatch.setattr(pipeline_module, "_store_waits", lambda rest, copies, hazards, why: [])
    fusion = read_back("circular_read_back_unwaited", blocks="none")
    fusion.tensors[1].circular_buffer(10, 4)
    report = tp.verify(fusion, "sm_90a")
    (d,) = [d for d in report.errors if d.code == "PIPELINE-WAR"]
    assert "TMA store reading iteration" in d.message, d.message
    cx = d.counterexample
    assert cx["stage"] == cx["data"] % 10 and cx["read iteration"] % 10 == cx["stage"], cx


def test_a_tma_load_of_a_tma_stored_output_waits_for_the_store():
    """T2 (an output) stored by TMA, then loaded again by TMA into T3: the load is issued only
    after the block's stores complete (TMA copies are not ordered with each other)."""
    with tp.Fusion("tma_load_read_back") as fusion:
        t0 = tp.make_contig_tensor(1)
        fusion.add_input(t0)
        t1 = tp.set(t0, op=TMA)
        t2 = tp.set(t1, op=TMA)
        t3 = tp.set(t2, op=TMA)
        t4 = tp.set(t3)
        fusion.add_output(t2)
        fusion.add_output(t4)
    t1.set_memory_type(tp.MemoryType.Shared)
    t3.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2, t3, t4):
        t.split(0, 128)
    t1.inline_at(1)
    t3.inline_at(1)
    for t in (t1, t2, t3):
        t.axis(-1).parallelize(P.Bulk)
    t4.axis(-1).parallelize(P.TIDx)
    assert tp.verify(fusion, "sm_90a").ok
    body = tp.compile(fusion, "sm_90a").cuda_source
    body = body[body.index("__global__"):]
    assert body.index("tp_bulk_store_1d(&tmap_T2") < body.index('"cp.async.bulk.wait_group 0;"') \
        < body.index("&tmap_T3")
