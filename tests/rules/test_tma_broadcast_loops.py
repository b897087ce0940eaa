"""Loops over split broadcast axes run once, as nvFuser's trivial loops: the circular-buffered TMA
tiles of MatmulWithBroadcastedInput ([b4, 2, b16, 32, 64] and [4, b2, 16, b32, 64] right of their
compute-at position) verify and are issued once per stage, on an mbarrier counting one copy, as
the Matmul's tiles without broadcast axes. LOWERING-SUPPORTED rejects a loop over broadcasts whose
index reaches a concrete ID (an allocation domain merging the broadcast with a concrete axis):
running it once would skip the addresses its other iterations touch."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import tileproof as tp

from support.broadcast_loops import shared_broadcast_loops


def _tma_matmul():
    path = Path(__file__).resolve().parents[1] / "nvfuser" / "test_nvfuser_circular_buffering.py"
    spec = importlib.util.spec_from_file_location("translated_circular_buffering", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.tma_matmul


def _kernel(fusion) -> str:
    return tp.compile(fusion, "sm_90a").cuda_source.split('extern "C"')[1]


def test_the_tma_tiles_with_split_broadcast_loops_verify_and_issue_each_stage_once():
    fusion = _tma_matmul()(4, -1, "Pipelined", "CpAsyncBulkTensorTile", broadcast_inputs=True)
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, report.codes
    kernel = _kernel(fusion)
    for t in ("T7", "T8"):  # one arrival per stage, 64 x 64 floats per copy
        assert f"tp_mbar_init(&tp_bar_{t}[s], 1u)" in kernel
        assert kernel.count(f"tp_mbar_expect_tx(&tp_bar_{t}[") == 2  # the prologue's and the refill's
        assert "(unsigned)16384U" in kernel
    # b{2}: a loop of index 0; b{32}: bound to TIDx by parallelize_all_like (nvFuser's permissive map
    # pairs it with the output's TIDx axis), no loop, the copy still issued by one thread
    assert "T7 axis 4 (extent 1)" in kernel and "threadIdx.x over 32U: T7 axis 6" in kernel


def test_the_tiles_without_broadcast_axes_issue_alike():
    plain = _kernel(_tma_matmul()(4, -1, "Pipelined", "CpAsyncBulkTensorTile"))
    broadcast = _kernel(_tma_matmul()(4, -1, "Pipelined", "CpAsyncBulkTensorTile", broadcast_inputs=True))
    assert plain.count("tp_bulk_load_2d(") == broadcast.count("tp_bulk_load_2d(") == 4


def test_a_broadcast_loop_whose_index_reaches_the_allocation_is_refused():
    fusion, t1 = shared_broadcast_loops(allocation_merge=True)
    report = tp.verify(fusion, "sm_90a")
    found = [d for d in report.errors if d.code == "LOWERING-SUPPORTED" and "runs once" in d.message]
    assert len(found) == 1 and found[0].tensor == t1.name, report.codes
    d = found[0]
    merged = t1.get_allocation_domain()[0].label()
    assert f"its index reaches {merged}" in d.message
    assert d.counterexample == {"axis": 2, "extent": 4}


def test_the_same_loop_over_a_broadcast_allocated_as_nothing_verifies_and_writes_once():
    fusion, t1 = shared_broadcast_loops(allocation_merge=False)
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, report.codes
    kernel = _kernel(fusion)
    assert kernel.count(f"{t1.name}[threadIdx.x] = T0[threadIdx.x]") == 1
    assert f"{t1.name} axis 2 (extent 1)" in kernel
