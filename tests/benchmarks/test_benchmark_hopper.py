"""The Hopper GEMM benchmark (benchmarks/hopper_matmul.py, issue 13) without a GPU: its shapes
parse, it imports without torch or Triton and leaves DISABLE_MMA_V3 unset (matmul.py, which it
imports, sets it), --compile-only verifies and compiles each wgmma schedule at each shape and names
each with its verify and cold compile seconds (a schedule rejected at a shape with its rejection
codes), and its rows carry the ratios against cuBLAS a @ b.T and the best Triton configuration."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tileproof as tp
from tileproof.recipes import GridOrder, HopperGemmParams, HopperTile, TmaPipeline

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "hopper_matmul.py"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # importable by its name: a process pool pickles its functions by name
    spec.loader.exec_module(module)
    return module


H = _load("bench_hopper_matmul", SCRIPT)


def _run(*args: str, timeout: int = 600, env=None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], check=False, capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=cwd)


def test_the_issue_shapes_and_schedules():
    assert H.SHAPES == [(8192, 8192, 8192), (4096, 4096, 16384), (8192, 1024, 8192), (8000, 8000, 8192)]
    partial = [s for s in H.SHAPES if not all(H.tile_multiples("hopper_128x128", s).values())]
    assert partial == [(8000, 8000, 8192)]  # one shape whose last tiles are partial
    blocks = {n: (e.params.tile.m, e.params.tile.n) for n, e in H.SCHEDULES.items()}
    narrow = {f"hopper_128x{bn}_4_stages_warp_specialized_persistent_balanced_cluster_2": (128, bn)
              for bn in (192, 208, 224)}
    narrow["hopper_128x256_4_stages_warp_specialized_persistent_balanced_cluster_2_bf16_out"] = (128, 256)
    narrow["hopper_128x256_3_stages_warp_specialized_persistent_balanced_group_16_cluster_2_stmatrix_bf16_out"] = (128, 256)
    clusters_of_4 = {"hopper_128x256_4_stages_warp_specialized_persistent_balanced_cluster_4": (128, 256),
                     "hopper_128x256_3_stages_warp_specialized_grouped_cluster_4_stmatrix_bf16_out": (128, 256)}
    other_tiles = {f"hopper_{tile}_3_stages_warp_specialized_{grid}_stmatrix_bf16_out": block
                   for tile, block in (("256x128", (256, 128)), ("192x192_split_n", (192, 192)))
                   for grid in ("grouped", "persistent_balanced_cluster_2")}
    three_consumers = {f"hopper_192x192_three_consumers_3_stages_warp_specialized_persistent_balanced{group}_cluster_2_"
                       f"stmatrix_bf16_out": (192, 192) for group in ("", "_group_16")}
    three_consumers.update({f"hopper_192x192_three_consumers_4_stages_warp_specialized_persistent_balanced_group_{g}_"
                            f"cluster_2_stmatrix_by_box_bf16_out": (192, 192) for g in (14, 16)})
    three_consumers["hopper_192x160_three_consumers_4_stages_warp_specialized_persistent_group_14_cluster_2_stmatrix_"
                    "by_box_bf16_out"] = (192, 160)
    by_box = {f"hopper_128x256_{name}_cluster_2_stmatrix_by_box_bf16_out": (128, 256)
              for name in ("3_stages_warp_specialized_persistent_balanced_group_16",
                           "4_stages_warp_specialized_persistent_balanced_group_16",
                           "4_stages_warp_specialized_persistent_group_16")}
    by_box.update({f"hopper_128x{bn}_4_stages_warp_specialized_persistent_balanced_group_16_cluster_2_stmatrix_by_box_"
                   f"bf16_out": (128, bn) for bn in (224, 192)})
    by_box["hopper_128x160_5_stages_warp_specialized_persistent_group_14_cluster_2_stmatrix_by_box_bf16_out"] = (128, 160)
    for family in (narrow, clusters_of_4, other_tiles, three_consumers, by_box):
        assert family.items() <= blocks.items()
        for name in family:
            del blocks[name]
    params = {n: e.params for n, e in H.SCHEDULES.items()}
    assert all(params[n].tile.split_n for n in other_tiles if "split_n" in n)
    assert all(params[n].epilogue.by_box and params[n].epilogue.stmatrix for n in by_box)
    assert all(bn % (params[n].epilogue.swizzle // 2) == 0 for n, (_, bn) in by_box.items())
    assert all(params[n].pipeline.warp_specialized.num_registers == (40, 152) for n in three_consumers)  # 512 threads
    for n, e in H.SCHEDULES.items():  # the names say which grids are taken at the shape
        assert (e.grid_at_shape == H.ONE_WAVE) == ("one_wave" in n)
        assert (e.grid_at_shape == H.BALANCED) == ("balanced" in n)
    assert blocks == {
        "hopper_128x128": (128, 128), "hopper_128x256": (128, 256), "hopper_128x256_4_stages": (128, 256),
        "hopper_128x256_4_stages_one_batch_in_flight": (128, 256),
        "hopper_128x128_4_stages_one_batch_in_flight": (128, 128),
        "hopper_128x256_4_stages_one_batch_in_flight_grouped": (128, 256),
        "hopper_128x256_4_stages_warp_specialized_grouped": (128, 256),
        "hopper_128x256_4_stages_one_batch_in_flight_grouped_bf16_out": (128, 256),
        "hopper_128x256_4_stages_warp_specialized_grouped_bf16_out": (128, 256),
        "hopper_128x256_4_stages_one_batch_in_flight_one_wave": (128, 256),
        "hopper_128x256_4_stages_warp_specialized_one_wave": (128, 256),
        "hopper_128x256_4_stages_warp_specialized_one_wave_bf16_out": (128, 256),
        "hopper_128x256_4_stages_grouped_war_mbarriers": (128, 256),
        "hopper_128x256_4_stages_warp_specialized_grouped_cluster_2": (128, 256),
        "hopper_128x256_4_stages_warp_specialized_one_wave_cluster_2": (128, 256),
        "hopper_128x256_4_stages_warp_specialized_one_wave_cluster_2_spread": (128, 256),
        "hopper_128x256_4_stages_warp_specialized_persistent": (128, 256),
        "hopper_128x256_4_stages_warp_specialized_persistent_cluster_2": (128, 256),
        "hopper_128x256_4_stages_warp_specialized_persistent_balanced_cluster_2": (128, 256),
        "hopper_128x256_3_stages_warp_specialized_grouped_stmatrix_bf16_out": (128, 256),
        "hopper_128x256_3_stages_warp_specialized_persistent_balanced_cluster_2_stmatrix_bf16_out": (128, 256),
        "hopper_128x256_3_stages_warp_specialized_grouped_cluster_2_stmatrix_bf16_out": (128, 256),
        "hopper_128x256_3_stages_warp_specialized_one_wave_cluster_2_stmatrix_bf16_out": (128, 256),
        "hopper_128x256_4_stages_warp_specialized_grouped_n_major_b": (128, 256),
        "hopper_128x256_4_stages_warp_specialized_no_setmaxnreg": (128, 256)}
    ws = params["hopper_128x256_4_stages_warp_specialized_grouped"].pipeline.warp_specialized
    assert ws == tp.WarpSpecialized(tp.ParallelType.TIDy, num_registers=(40, 232))
    assert params["hopper_128x256_4_stages_one_batch_in_flight"] == HopperGemmParams(
        tile=HopperTile(m=128, n=256), pipeline=TmaPipeline(stages=4, prefetch=2))
    assert H.call_text("hopper_128x256") == "hopper_gemm(M, N, K, HopperGemmParams(tile=HopperTile(n=256)))"
    one_wave = "hopper_128x256_4_stages_warp_specialized_one_wave"
    assert H.call_text(one_wave).endswith("(grid: one wave, at the shape)")
    assert H.params_at(one_wave, 8192, 8192).grid == GridOrder(patch=(4, 4))
    balanced = "hopper_128x256_4_stages_warp_specialized_persistent_balanced_cluster_2"
    assert H.params_at(balanced, 8192, 8192).grid == GridOrder(group=8, persistent=128)
    assert H.TRITON_CONFIGS[0] == (128, 256, 64, 3, 8, 8)  # the tutorial's best H100 configuration
    assert (128, 256, 64, 3, 8, 16) in H.TRITON_CONFIGS  # as tileproof's fastest schedule groups its tiles
    assert {layout for layout, _call, _q in H.CUBLAS.values()} == {"A K-major, B K-major", "A K-major, B N-major"}


def test_balanced_grids_take_the_fewest_steps_with_the_fewest_blocks():
    assert [H.balanced_grid(s[:2], (128, 256), 8) for s in H.SHAPES] == [128, 128, 128, 128]
    assert H.balanced_grid((8192, 8192), (128, 256), 8, cluster=2) == 128
    assert H.balanced_grid((1024, 768), (128, 256), 8) == 24  # 24 tiles: one step each
    assert H.balanced_grid((128 * 8 * 3, 256 * 7), (128, 256), 8, cluster=2) == 84  # 168 tiles: 2 steps, 84 blocks
    assert H.balanced_grid((128 * 8, 256 * 17), (128, 256), 8, cluster=2) == 68  # 136 tiles: 2 steps, 68 blocks


def test_one_wave_patches_fit_the_sms_with_the_fewest_tiles_a_block():
    assert [H.one_wave_patch(s[:2], (128, 256)) for s in H.SHAPES] == [(4, 4), (2, 2), (2, 1), (4, 4)]
    assert H.one_wave_patch((128, 256), (128, 256)) == (1, 1)
    assert H.one_wave_patch((384, 256), (128, 256), cluster=2) == (2, 1)  # 2 blocks along x, not 3: whole clusters
    for shape in H.SHAPES:
        pm, pn = H.one_wave_patch(shape[:2], (128, 256))
        mo, no = -(-shape[0] // 128), -(-shape[1] // 256)
        assert -(-mo // pm) * -(-no // pn) <= H.SMS < -(-mo // pm) * -(-no // pn) * pm * pn


def test_the_shapes_list_parses():
    assert H.parse_shapes("8192x8192x8192") == [(8192, 8192, 8192)]
    assert H.parse_shapes(" 8000X8000x8192 , 4096x4096x16384,8000x8000x8192") == [(8000, 8000, 8192),
                                                                                   (4096, 4096, 16384)]
    assert H.parse_shapes("1024") == [(1024, 1024, 1024)]
    assert H.parse_shapes("all") == H.SHAPES and H.parse_shapes("") == H.SHAPES
    for bad in ("12x34", "axbxc", "0x8x8", "8x8x-8", ",", "1x2x3x4"):
        with pytest.raises(ValueError):
            H.parse_shapes(bad)
    assert [H.shape_key(s) for s in H.SHAPES][-1] == "8000x8000x8192"


def test_imports_without_torch_or_triton_and_leaves_disable_mma_v3_unset():
    probe = ("import os, sys; import hopper_matmul; "  # run in benchmarks/, as the scripts import each other
             "print('DISABLE_MMA_V3' in os.environ, 'triton' in sys.modules, 'torch' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if k != "DISABLE_MMA_V3"}
    out = _run("-c", probe, timeout=120, env=env, cwd=SCRIPT.parent)
    assert out.stdout.split() == ["False", "False", "False"], out.stdout + out.stderr


def test_help_names_the_peers_and_options():
    shown = _run(str(SCRIPT), "--help", timeout=120)
    assert shown.returncode == 0, shown.stderr
    for word in ("--compile-only", "--shapes", "--rep-ms", "--out", "wgmma", "cuBLAS", "a @ b.T", "a @ b",
                 "make_tensor_descriptor", "experimental_descriptor", "set_allocator", "DISABLE_MMA_V3", "float64"):
        assert word in shown.stdout, word


def test_bad_shapes_are_refused_before_any_work():
    run = _run(str(SCRIPT), "--compile-only", "--shapes", "12x34", timeout=120)
    assert run.returncode == 2 and "--shapes" in run.stderr, run.stderr


def test_compile_only_names_each_schedule_with_its_times(tmp_path):
    """A shape the schedules accept with partial M, N and K tiles (the K tail runs on the TMA's
    zeros, and the stmatrix epilogues run their 16 x 16 tiles past M and N = 200, which the TMA
    store clips; whole tiles compile in tests/codegen's bundled examples) and one whose rows the
    TMA cannot address (K = 100: 200-byte rows, not a multiple of 16, TMA-GLOBAL-STRIDE): recorded
    with its codes, not a failure. In two processes (--jobs 2: CI's two cores), the entries in
    order as one process writes them."""
    path = tmp_path / "hopper.json"
    shapes = "200x200x72,256x256x100"
    run = _run(str(SCRIPT), "--compile-only", "--shapes", shapes, "--out", str(path), "--jobs", "2")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    n = len(H.SCHEDULES)
    assert sum(1 for e in H.SCHEDULES.values() if e.params.epilogue.stmatrix) == 21
    assert (f"{2 * n} schedule builds (2 shapes x {n} schedules): {n} accepted, {n} rejected, 0 failed"
            in run.stdout), run.stdout
    lines = run.stdout.splitlines()
    for key in ("200x200x72",):
        for name in H.SCHEDULES:
            line = next(x for x in lines if x.startswith(key) and name + " " in x)
            assert "accepted" in line and "verify" in line and "cold compile" in line and "wgmma" in line, line
    assert "M, N, K not a multiple of the tile" in next(x for x in lines if x.startswith("200x200x72"))
    rejected = [x for x in lines if x.startswith("256x256x100")]
    assert len(rejected) == n and all("REJECTED" in x and "TMA-GLOBAL-STRIDE" in x for x in rejected), rejected
    data = json.loads(path.read_text())
    assert data["mode"] == "compile-only" and data["shapes"] == shapes.split(",") and data["jobs"] == 2
    assert list(data["compile"]) == shapes.split(",")
    assert list(data["compile"]["200x200x72"]) == list(data["compile"]["256x256x100"]) == list(H.SCHEDULES)
    for name, entry in data["compile"]["200x200x72"].items():
        assert entry["accepted"], entry["diagnostics"]
        assert {"verify_s", "cold_compile_s", "launch", "layout", "block", "tile_multiples"} <= set(entry), entry
        assert entry["verify_s"] > 0 and entry["cold_compile_s"] > 0
        assert entry["wgmma_in_source"] and entry["tma_in_source"]
        assert entry["out_dtype"] == ("bfloat16" if name.endswith("_bf16_out") else "float32")
        params = H.SCHEDULES[name].params
        layout = "A K-major, B N-major" if params.b.major == "MN" else "A K-major, B K-major"
        assert entry["layout"] == layout and entry["block"] == [params.tile.m, params.tile.n]
    assert data["compile"]["200x200x72"]["hopper_128x128"]["tile_multiples"] == {"M": False, "N": False, "K": False}
    assert data["compile"]["200x200x72"]["hopper_128x128"]["launch"]["grid"][:2] == [2, 2]
    for entry in data["compile"]["256x256x100"].values():
        assert not entry["accepted"] and "TMA-GLOBAL-STRIDE" in entry["rejection_codes"] and "verify_s" in entry


def test_compile_only_gives_the_entries_in_order_in_one_process_or_several(monkeypatch, capsys):
    """--jobs N forks N processes over the builds; the entries come back as one process makes them:
    by shape, then schedule, a build that raised recorded as an error, no kernel."""

    def fake(name, shape):
        if name == "hopper_128x256" and shape[2] == 100:
            raise RuntimeError("boom")
        return {"accepted": True, "shape": list(shape), "_kernel": object()}

    monkeypatch.setattr(H, "verify_and_compile", fake)
    shapes = [(200, 200, 72), (256, 256, 100)]
    one, two = H.compile_only(shapes), H.compile_only(shapes, jobs=2)
    assert one == two and list(one) == ["200x200x72", "256x256x100"]
    assert all(list(entries) == list(H.SCHEDULES) for entries in one.values())
    assert one["200x200x72"]["hopper_128x128"] == {"accepted": True, "shape": [200, 200, 72]}
    assert one["256x256x100"]["hopper_128x256"]["error"] == "RuntimeError: boom"
    with pytest.raises(SystemExit) as refused:
        H.main(["--compile-only", "--jobs", "0"])
    assert refused.value.code == 2 and "--jobs must be positive" in capsys.readouterr().err


def test_failures_are_errors_and_rejections_at_whole_tiles():
    whole = {"M": True, "N": True, "K": True}
    partial = {"M": False, "N": False, "K": True}
    compiled = {"8192x8192x8192": {"hopper_128x128": {"accepted": True, "tile_multiples": whole},
                                   "hopper_128x256": {"accepted": False, "tile_multiples": whole}},
                "8000x8000x8192": {"hopper_128x128": {"accepted": False, "tile_multiples": partial,
                                                      "rejection_codes": ["X"]},
                                   "hopper_128x256": {"error": "RuntimeError: boom"}}}
    assert H.compile_failures(compiled) == ["8192x8192x8192 hopper_128x256", "8000x8000x8192 hopper_128x256"]
    assert "REJECTED" in H.compile_line("8000x8000x8192", "hopper_128x128", compiled["8000x8000x8192"]["hopper_128x128"])
    assert "FAILED" in H.compile_line("8000x8000x8192", "hopper_128x256", compiled["8000x8000x8192"]["hopper_128x256"])


def test_rows_and_table_carry_the_ratios():
    res = {"shape": [8192, 8192, 8192], "peers": {
        "cublas_a_bT": {"ms": 1.4, "tflops": 785.4, "layout": "A K-major, B K-major", "out_dtype": "torch.bfloat16",
                        "call": "a @ b.T", "issue_quote_tflops": 778},
        "cublas_a_b": {"ms": 1.6, "tflops": 687.2, "layout": "A K-major, B N-major", "out_dtype": "torch.bfloat16",
                       "call": "a @ b", "issue_quote_tflops": 701},
        "triton": {"ms": 2.0, "tflops": 549.8, "best_config": "BLOCK 128x256x64, 3 stages, 8 warps",
                   "descriptor_api": "tl.make_tensor_descriptor", "out_dtype": "torch.bfloat16", "configs": []}},
        "tileproof": {"hopper_128x128": {"ms": 2.8, "tflops": 392.7, "layout": "A K-major, B K-major",
                                         "out_dtype": "float32", "verify_s": 0.2, "cold_compile_s": 0.4},
                      "hopper_128x256": {"accepted": False, "rejection_codes": ["REDUCTION-K"], "verify_s": 0.1}}}
    H.add_ratios(res)
    assert res["tileproof"]["hopper_128x128"]["vs_cublas"] == 0.5
    assert res["tileproof"]["hopper_128x128"]["vs_triton"] == round(2.0 / 2.8, 4)
    assert res["peers"]["cublas_a_b"]["vs_cublas"] == 0.875 and res["peers"]["triton"]["vs_cublas"] == 0.7
    assert "vs_cublas" not in res["tileproof"]["hopper_128x256"]
    results = {"results": {"8192x8192x8192": res, "8000x8000x8192": {"error": "RuntimeError: no GPU"}}}
    rows = H.rows_of(results)
    who = [(r["shape"], r["who"]) for r in rows]
    assert ("8192x8192x8192", "cuBLAS a @ b.T") in who and ("8192x8192x8192", "cuBLAS a @ b") in who
    assert ("8192x8192x8192", "tileproof hopper_128x128") in who and ("8000x8000x8192", "-") in who
    rejected = next(r for r in rows if r["who"] == "tileproof hopper_128x256")
    assert rejected["note"] == "rejected: REDUCTION-K"
    text = H.table(results)
    assert "TFLOP/s" in text and "392.7" in text and "0.5" in text and "A K-major, B N-major" in text
    json.dumps(rows)  # the rows go into the JSON as they are


def test_the_rematch_times_the_three_best_alternately_and_takes_medians():
    calls = []
    ms = {"cublas": [1.0, 1.2, 1.1], "triton": [1.3, 1.1, 1.2], "ours": [1.0, 0.9, 1.05]}

    def fake_time(run):
        calls.append(run)
        return ms[run].pop(0)

    res = {"shape": [8192, 8192, 8192],
           "peers": {"triton": {"best_config": "BLOCK 128x256x64", "ms": 2.0}, "cublas_a_bT": {"ms": 1.5}},
           "tileproof": {"slow": {"ms": 3.0}, "fast": {"ms": 1.9}, "rejected": {"accepted": False}}}
    runners = {"cublas_a_bT": "cublas", "triton BLOCK 128x256x64": "triton", "tileproof fast": "ours",
               "tileproof slow": "never"}
    r = H.rematch(res, runners, fake_time, rounds=3)
    assert calls == ["cublas", "triton", "ours"] * 3  # alternately, round by round
    assert r["tileproof"] == "fast" and r["median_ms"] == {"cublas_a_bT": 1.1, "triton": 1.2, "tileproof": 1.0}
    assert r["vs_cublas"] == 1.1 and r["vs_triton"] == 1.2
    assert "rematch (3 rounds, alternately): tileproof fast" in H.rematch_line("8192x8192x8192", r)
    # round by round: cuBLAS 1.0 / 1.0, 1.2 / 0.9, 1.1 / 1.05; Triton 1.3 / 1.0, 1.1 / 0.9, 1.2 / 1.05
    assert r["rounds"]["vs_cublas"] == {"ratios": [1.0, 1.3333, 1.0476], "at_least_1": 3}
    assert r["rounds"]["vs_triton"] == {"ratios": [1.3, 1.2222, 1.1429], "at_least_1": 3}
    assert "vs triton round by round 1.1429-1.3, >= 1 in 3 of 3" in H.rematch_line("8192x8192x8192", r)
    assert "no timed tileproof schedule" in H.rematch({"peers": {}, "tileproof": {}}, {}, fake_time)["error"]
