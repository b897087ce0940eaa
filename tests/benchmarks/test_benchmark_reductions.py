"""The reduction benchmark's schedules (benchmarks/reduction_schedules.py) verify with no warning
and compile for sm_90a at the benchmark's size, compute row and column sums (run on the CPU at a
small size, tests/support/reduction_sim.py), and benchmarks/reductions.py answers --help and runs
in --compile-only mode (no GPU)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tileproof as tp
from tileproof.codegen.lower import lower
from tileproof.model.targets import get_target

from support.reduction_sim import Numbers, run_kernel

ROOT = Path(__file__).resolve().parents[2]


def _schedules():
    spec = importlib.util.spec_from_file_location("bench_reduction_schedules", ROOT / "benchmarks/reduction_schedules.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


S = _schedules()


@pytest.mark.parametrize("cfg", S.ROW_CONFIGS, ids=str)
def test_row_schedules_verify_without_warnings(cfg):
    report = tp.verify(S.row_sum(**cfg), target="sm_90a")
    assert report.ok and not report.diagnostics, [d.message for d in report.diagnostics]


@pytest.mark.parametrize("cfg", S.COLUMN_CONFIGS, ids=str)
def test_column_schedules_verify_without_warnings(cfg):
    report = tp.verify(S.column_sum(**cfg), target="sm_90a")
    assert report.ok and not report.diagnostics, [d.message for d in report.diagnostics]


def test_the_schedules_load_16_bytes_at_a_time_and_combine_in_the_block():
    row = tp.compile(S.row_sum(threads=256, unroll=4), target="sm_90a").cuda_source
    assert "*reinterpret_cast<const uint4*>(&T0[" in row and "tp_block_reduce<1, true, false, false>" in row
    assert "float tp_acc_T3[4U];" in row  # four independent running totals per thread
    column = tp.compile(S.column_sum(tidx=16, tidy=16), target="sm_90a").cuda_source
    assert "*reinterpret_cast<const uint4*>(&T0[" in column and "tp_block_reduce<4, false, true, false>" in column
    assert "*reinterpret_cast<uint4*>(&T1[" in column  # the totals stored as one 16-byte vector


@pytest.mark.parametrize("build, dim", [
    (lambda: S.row_sum(3, 2 * 4 * 64 * 2, threads=64, unroll=2), 1),
    (lambda: S.row_sum(3, 1000, threads=32, unroll=2, accumulators=False), 1),  # a tail of holes
    (lambda: S.column_sum(40, 64, tidx=4, vector=4, tidy=4, unroll=2), 0),
    (lambda: S.column_sum(37, 32, tidx=8, vector=4, tidy=2, unroll=4), 0),  # 37 rows: holes
    (lambda: S.plain_row_sum(2, 300, threads=64), 1),
], ids=["row", "row-holes", "column", "column-holes", "plain"])
def test_small_versions_compute_the_sums(build, dim):
    fusion = build()
    assert tp.verify(fusion, "sm_90a").ok
    st = lower(fusion.snapshot(), get_target("sm_90a"))
    shape = [i.static_extent for i in fusion.inputs[0].logical]
    x = np.random.default_rng(1).integers(-9, 9, size=shape).astype(float)
    (got,) = run_kernel(st.kernel, fusion, [x], {}, Numbers)
    assert np.array_equal(got.astype(float), x.sum(axis=dim))


def test_help_and_compile_only_run_without_a_gpu():
    script = str(ROOT / "benchmarks" / "reductions.py")
    shown = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and "--compile-only" in shown.stdout and "torch.sum" in shown.stdout
    run = subprocess.run([sys.executable, script, "--compile-only"], capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert f"{len(S.ROW_CONFIGS) + 1 + len(S.COLUMN_CONFIGS)} schedules, 0 rejected or warned" in run.stdout
