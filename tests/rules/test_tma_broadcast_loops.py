"""LOWERING-SUPPORTED refuses a circular-buffered TMA load inside loops over its own split broadcast
axes (the kernel would issue the tile once per iteration on an mbarrier counting one copy); the same
matmul with the broadcasts made by tp.broadcast after the loads verifies."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import tileproof as tp


def _tma_matmul():
    path = Path(__file__).resolve().parents[1] / "nvfuser" / "test_nvfuser_circular_buffering.py"
    spec = importlib.util.spec_from_file_location("translated_circular_buffering", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.tma_matmul


def test_a_tma_tile_with_split_broadcast_loops_is_refused():
    fusion = _tma_matmul()(4, -1, "Pipelined", "CpAsyncBulkTensorTile", broadcast_inputs=True)
    report = tp.verify(fusion, "sm_90a")
    found = [d for d in report.errors if d.code == "LOWERING-SUPPORTED" and "broadcast axes" in d.message]
    assert {d.tensor for d in found} == {"T7", "T8"}, report.codes
    assert "b107{2}, b108{32}" in next(d.message for d in found if d.tensor == "T7")


def test_the_tiles_without_broadcast_axes_verify():
    fusion = _tma_matmul()(4, -1, "Pipelined", "CpAsyncBulkTensorTile")
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, report.codes
