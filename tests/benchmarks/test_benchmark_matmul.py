"""The matmul benchmark without a GPU: every schedule of benchmarks/matmul_schedules.py verifies
and compiles for sm_90a at the benchmark's size, quickly; benchmarks/matmul.py answers --help,
sets DISABLE_MMA_V3 before anything can import Triton, runs --compile-only, and its table and
JSON rows carry the ratios against the same layout's peers."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

import tileproof as tp

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "matmul.py"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


S = _load("bench_matmul_schedules", ROOT / "benchmarks" / "matmul_schedules.py")
B = _load("bench_matmul", SCRIPT)


def test_the_registry_holds_the_seed_schedule():
    assert S.SCHEDULES["moye_double_buffered"][0] == "tf32"
    assert all(dtype in S.DTYPES and callable(build) for dtype, build in S.SCHEDULES.values())


@pytest.mark.parametrize("name", sorted(S.SCHEDULES))
def test_every_schedule_verifies_and_compiles_quickly(name):
    dtype, build = S.SCHEDULES[name]
    entry = B.verify_and_compile(name, dtype, build, S.SIZE)
    assert entry["accepted"], entry["diagnostics"]
    allowed = ("SMEM-BANK-CONFLICT",) if name == "moye_double_buffered" else ()  # the seed's UniversalCopy conflicts
    assert not [d for d in entry["diagnostics"] if not d.startswith(allowed or "\0")], entry["diagnostics"]
    kernel = entry.pop("_kernel")
    assert "mma.sync.aligned" in kernel.cuda_source
    # issue 12 asks for < 1 s each on the benchmark machine; a slow CI machine gets slack
    assert entry["verify_s"] < 5 and entry["cold_compile_s"] < 10, entry
    assert {t.dtype.name for t in kernel.fusion.inputs} == {B.OPERAND_DTYPE[dtype]}
    assert [i.static_extent for i in kernel.fusion.outputs[0].logical if not i.is_reduction] == [S.SIZE, S.SIZE]


def test_layouts_follow_the_allocation_domains():
    fusion = S.SCHEDULES["moye_double_buffered"][1](256, 256, 64)
    assert B.layout_of(fusion) == "A M-major, B K-major"
    assert B.allocation_order(fusion.inputs[0]) == [2, 1, 0]
    with tp.Fusion("plain") as f:
        a, b = tp.make_tensor([64, 1, 32]), tp.make_tensor([1, 64, 32])
        f.add_input(a)
        f.add_input(b)
        f.add_output(tp.fused_multiply_sum(a, b, [-1]))
    assert B.layout_of(f) == B.K_MAJOR


def test_help_and_triton_stay_out_of_the_import():
    shown = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0
    for word in ("--compile-only", "--size", "DISABLE_MMA_V3", "cuBLAS", "mma.sync", "float64"):
        assert word in shown.stdout, word
    probe = ("import os, sys; import matmul; "  # run in benchmarks/, as the scripts import each other
             "print(os.environ['DISABLE_MMA_V3'], 'triton' in sys.modules, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=SCRIPT.parent)
    assert out.stdout.split() == ["1", "False", "False"], out.stdout + out.stderr


def test_compile_only_writes_json(tmp_path):
    path = tmp_path / "matmul.json"
    run = subprocess.run([sys.executable, str(SCRIPT), "--compile-only", "--size", "1024", "--out", str(path)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert f"{len(S.SCHEDULES)} schedules, 0 rejected or failed" in run.stdout
    data = json.loads(path.read_text())
    assert data["mode"] == "compile-only" and data["size"] == 1024
    assert set(data["compile"]) == set(S.SCHEDULES)
    for entry in data["compile"].values():
        assert {"verify_s", "cold_compile_s", "launch", "layout", "targets"} <= set(entry)


def test_rows_and_table_carry_the_ratios():
    peers = {"cublas": {"ms": 3.0, "tflops": 366.5, "matmul": {"what": "a2 @ b2.T"}},
             "triton": {"ms": 6.0, "tflops": 183.3, "best_config": "BLOCK 128x128x32"}, "triton_vs_cublas": 0.5}
    results = {"tf32": {"peers": {B.K_MAJOR: peers, "A M-major, B K-major": peers},
                        "tileproof": {"moye_double_buffered": {"layout": "A M-major, B K-major", "ms": 12.0,
                                                               "tflops": 91.6, "verify_s": 0.4, "cold_compile_s": 0.6}}},
               "bf16": {"error": "RuntimeError: no GPU"}}
    B.ratios(results["tf32"]["tileproof"]["moye_double_buffered"], peers)
    entry = results["tf32"]["tileproof"]["moye_double_buffered"]
    assert entry["vs_cublas"] == 0.25 and entry["vs_triton"] == 0.5
    rows = B.rows_of(results)
    who = [(r["dtype"], r["who"], r["layout"]) for r in rows]
    assert ("tf32", "tileproof moye_double_buffered", "A M-major, B K-major") in who
    assert ("tf32", "cublas", B.K_MAJOR) in who and ("bf16", "-", "-") in who
    cublas = next(r for r in rows if r["who"] == "cublas")
    assert cublas["vs_cublas"] == 1.0 and cublas["vs_triton"] == 2.0
    text = B.table(results)
    assert "TFLOP/s" in text and "91.6" in text and "0.25" in text
    json.dumps(rows)  # the rows go into the JSON as they are
