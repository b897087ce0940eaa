"""The GPU benchmark's schedules (benchmarks/schedules.py) verify with no warning and compile
for sm_90a, the transposes with 16-byte global accesses, and benchmarks/gpu_kernels.py runs in
--compile-only mode (no GPU)."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tileproof as tp

ROOT = Path(__file__).resolve().parents[2]


def _schedules():
    spec = importlib.util.spec_from_file_location("bench_schedules", ROOT / "benchmarks/schedules.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


S = _schedules()
TRANSPOSES = [(dtype, cfg) for dtype, cfgs in S.TRANSPOSE_CONFIGS.items() for cfg in cfgs]


@pytest.mark.parametrize("dtype,cfg", TRANSPOSES, ids=[f"{d}-{sorted(c.items())}" for d, c in TRANSPOSES])
def test_transpose_schedules_are_conflict_free_and_vectorized(dtype, cfg):
    fusion = S.transpose(dtype, **cfg)
    report = tp.verify(fusion, target="sm_90a")
    assert report.ok, report
    if cfg.get("lanes_m", 8) == 8 or cfg.get("regs"):  # a register block's 16-byte reads: conflict-free
        assert not report.diagnostics, [d.message for d in report.diagnostics]  # no SMEM-BANK-CONFLICT
    else:  # 16 lanes along the output row: the documented 2-way conflict of the transposed read
        assert [d.code for d in report.diagnostics] == ["SMEM-BANK-CONFLICT"]
        assert "from T1 into T3" in report.diagnostics[0].message
    kernel = tp.compile(fusion, target="sm_90a")
    src = kernel.cuda_source
    assert len(re.findall(r"reinterpret_cast<uint4\*>\(&T1\[", src)) == 1  # 16-byte shared store
    assert re.search(r"reinterpret_cast<const uint4\*>\(&T0\[", src)  # 16-byte global load
    assert re.search(r"reinterpret_cast<uint4\*>\(&T2\[", src)  # 16-byte global store
    assert "^" in src  # the XOR swizzle in T1's offsets
    if cfg.get("regs"):  # 16-byte shared reads into the register block, its columns gathered per element
        assert re.search(r"reinterpret_cast<uint4\*>\(&T3\[", src)
        assert "result[tp_v] = T3[" in src
    assert kernel.cubin


def test_transpose_tile_is_checked_at_the_door():
    with pytest.raises(ValueError):
        S.transpose("bfloat16", tile_m=32)  # bf16 needs multiples of 64


@pytest.mark.parametrize("cfg", S.POINTWISE_CONFIGS, ids=str)
def test_pointwise_schedules_compile(cfg):
    fusion = S.pointwise_add(**cfg)
    report = tp.verify(fusion, target="sm_90a")
    assert report.ok and not report.diagnostics, report
    src = tp.compile(fusion, target="sm_90a").cuda_source
    assert "reinterpret_cast<uint4*>(&T2[" in src


def test_tma_pointwise_example_loads():
    fusion = S.tma_pointwise_add()
    assert tp.verify(fusion, target="sm_90a").ok


def test_compile_only_mode_runs(tmp_path):
    out = tmp_path / "gpu_kernels.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks/gpu_kernels.py"), "--compile-only",
                           "--compile-runs", "1", "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["mode"] == "compile-only" and data["device"] is None
    for dtype in ("float32", "bfloat16"):
        c = data["compile"][f"transpose_{dtype}"]
        assert c["cold_tp_compile_s"] > 0 and c["cached_tp_compile_same_fusion_s"] > 0
    assert all(s["accepted"] for s in data["schedules"].values())
