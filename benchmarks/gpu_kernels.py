"""Generated kernels against peers and the copy ceiling, in one process on one GPU (issue 4).

    python3 benchmarks/gpu_kernels.py [--out FILE]       # needs a GPU, torch and triton
    python3 benchmarks/gpu_kernels.py --compile-only     # compile times and schedule checks; no GPU

Jobs (2^28 elements, 16384 x 16384):
  copy        dst.copy_(src), float32: the bandwidth ceiling (bytes = read + written)
  add         out = a + b, float32: torch.add(out=), Triton (BLOCK x num_warps sweep), tileproof
              (the TMA example of examples/valid/tma_smem.py, and non-TMA schedules)
  transpose   out[j, i] = a[i, j], float32 and bfloat16: torch out.copy_(a.t()), Triton (tile
              sweep; the best is "Triton's best tile configuration"), tileproof (benchmarks/
              schedules.py, a tile sweep; the best is reported, every configuration is kept)
  compile     cold tp.compile / NVRTC of the transposes, and a cached tp.compile

Every kernel's output is checked against torch before it is timed (exact for copies and
transposes, allclose for add) on fresh random inputs, with the output poisoned (NaN) first.
Times: triton.testing.do_bench (CUDA events per launch, L2 flushed before each), the median of
>= 20 launches after warm-up. A tileproof kernel is launched through Kernel._prepare's launch
closure (one cuLaunchKernel), so Python argument binding stays out of the timed region.
Writes JSON (default benchmarks/results/gpu_kernels/<machine>.json: h200.json on an H200, cpu.json with
--compile-only); prints a table last.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from bench_common import attempt, launch_info, results_path  # benchmarks/bench_common.py
import schedules as S  # benchmarks/schedules.py

import tileproof as tp
from tileproof.codegen import compile as tp_compile_module
from tileproof.codegen.runtime import nvrtc as tp_nvrtc
from tileproof.codegen.runtime.nvrtc import compile_to_cubin, cuda_include_dir, nvrtc_version

TARGET = "sm_90a"
N = S.SIZE
ELEMENTS = N * N
# Targets from issue 4 (H200 reference: copy 4.27 TB/s; Triton transpose 4.05 fp32, 3.96 bf16)
TRANSPOSE_VS_TRITON = 1.0
TRANSPOSE_VS_COPY = 0.90
COLD_COMPILE_S = 1.0
CACHED_COMPILE_S = 0.020


# -- compile times (no GPU) ------------------------------------------------------------
def compile_times(runs: int) -> dict:
    """Cold tp.compile (fresh disk cache, empty memory cache: verify + lower + NVRTC), NVRTC
    alone on the generated source, and a cached tp.compile (memory-cache hit), medians."""
    result = {"nvrtc_version": "%d.%d" % nvrtc_version(), "runs": runs}
    saved = os.environ.get("TILEPROOF_CACHE_DIR")
    try:
        for dtype in ("float32", "bfloat16"):
            build = lambda: S.transpose(dtype)  # noqa: E731
            cold, nvrtc_only, nvrtc_direct, cached_same, cached_rebuilt = [], [], [], [], []
            source = None
            for _ in range(runs):
                with tempfile.TemporaryDirectory(prefix="tileproof-cold-") as d:
                    os.environ["TILEPROOF_CACHE_DIR"] = d
                    tp_compile_module.clear_memory_cache()
                    fusion = build()
                    start = time.perf_counter()
                    kernel = tp.compile(fusion, target=TARGET)
                    cold.append(time.perf_counter() - start)
                    source = kernel.cuda_source
                    include = cuda_include_dir() if "cuda_bf16.h" in source else None
                with tempfile.TemporaryDirectory(prefix="tileproof-nvrtc-") as d:
                    os.environ["TILEPROOF_CACHE_DIR"] = d
                    start = time.perf_counter()
                    compile_to_cubin(source, TARGET, include)
                    nvrtc_only.append(time.perf_counter() - start)
                opts = tp_nvrtc.options(TARGET, include)
                start = time.perf_counter()
                tp_nvrtc._compile(source, opts, TARGET)  # NVRTC itself: no cache in the way
                nvrtc_direct.append(time.perf_counter() - start)
            fusion = build()
            tp.compile(fusion, target=TARGET)
            for _ in range(max(runs, 20)):
                start = time.perf_counter()
                tp.compile(fusion, target=TARGET)
                cached_same.append(time.perf_counter() - start)
                again = build()
                start = time.perf_counter()
                tp.compile(again, target=TARGET)
                cached_rebuilt.append(time.perf_counter() - start)
            cold_s = statistics.median(cold)
            cached_s = statistics.median(cached_same)
            result[f"transpose_{dtype}"] = {
                "schedule": build().name,
                "cold_tp_compile_s": round(cold_s, 4),
                "cold_tp_compile_all_s": [round(x, 4) for x in cold],
                "cold_nvrtc_only_s": round(statistics.median(nvrtc_only), 4),
                "nvrtc_direct_s": round(statistics.median(nvrtc_direct), 4),
                "source_lines": source.count("\n"),
                "cached_tp_compile_same_fusion_s": round(cached_s, 6),
                "cached_tp_compile_rebuilt_fusion_s": round(statistics.median(cached_rebuilt), 6),
                "target_cold_below_s": COLD_COMPILE_S, "cold_met": cold_s < COLD_COMPILE_S,
                "target_cached_below_s": CACHED_COMPILE_S, "cached_met": cached_s < CACHED_COMPILE_S,
            }
    finally:
        if saved is None:
            os.environ.pop("TILEPROOF_CACHE_DIR", None)
        else:
            os.environ["TILEPROOF_CACHE_DIR"] = saved
        tp_compile_module.clear_memory_cache()
    return result


def schedule_reports() -> dict:
    """Every benchmark schedule verified (and compiled for sm_90a): accepted, warnings."""
    out = {}
    builds = {f"pointwise {c}": (lambda c=c: S.pointwise_add(**c)) for c in S.POINTWISE_CONFIGS}
    for dtype, configs in S.TRANSPOSE_CONFIGS.items():
        for c in configs:
            builds[f"transpose {dtype} {c}"] = lambda dtype=dtype, c=c: S.transpose(dtype, **c)
    for label, build in builds.items():
        fusion = build()
        report = tp.verify(fusion, target=TARGET)
        entry = {"fusion": fusion.name, "accepted": report.ok,
                 "diagnostics": [f"{d.code}: {d.message}" for d in report.diagnostics]}
        if report.ok:
            k = tp.compile(fusion, target=TARGET)
            entry["launch"] = {"grid": list(k.launch_params.grid), "block": list(k.launch_params.block),
                               "smem_bytes": k.launch_params.shared_memory_bytes}
        out[label] = entry
    return out


# -- timing ---------------------------------------------------------------------------------
def timed(fn, nbytes: int, rep_ms: int) -> dict:
    from triton.testing import do_bench

    times = do_bench(fn, warmup=25, rep=rep_ms, return_mode="all")
    if len(times) < 20:  # a slow kernel: ask for more repetitions
        times = do_bench(fn, warmup=25, rep=int(rep_ms * 20 / max(len(times), 1)) + 1, return_mode="all")
    ms = statistics.median(times)
    return {"ms": round(ms, 5), "gbps": round(nbytes / (ms * 1e-3) / 1e9, 1), "reps": len(times),
            "min_ms": round(min(times), 5), "max_ms": round(max(times), 5)}


def tp_launcher(kernel, inputs, out):
    """The launch closure of a tileproof kernel for fixed arguments (no per-call binding)."""
    _bound, _stream, launch = kernel._prepare(tuple(inputs), list(out), None, {})
    return launch


def poison(t) -> None:
    import torch

    t.fill_(float("nan") if t.dtype.is_floating_point else -1)
    torch.cuda.synchronize()


# -- Triton peers -----------------------------------------------------------------------------
def triton_kernels():
    import triton
    import triton.language as tl

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x + y, mask=mask)

    @triton.jit
    def transpose_kernel(x_ptr, out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        mask = (rm[:, None] < M) & (rn[None, :] < N)
        tile = tl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=mask)
        tl.store(out_ptr + rn[:, None] * M + rm[None, :], tl.trans(tile), mask=tl.trans(mask))

    return triton, add_kernel, transpose_kernel


# -- jobs -------------------------------------------------------------------------------------
def job_copy(torch, rep_ms: int) -> dict:
    src = torch.randn(ELEMENTS, device="cuda", dtype=torch.float32)
    dst = torch.empty_like(src)
    poison(dst)
    dst.copy_(src)
    assert torch.equal(dst, src), "copy mismatch"
    entry = {"what": "dst.copy_(src), 2^28 float32 (1 GiB each)", "bytes": 2 * src.nbytes}
    entry.update(timed(lambda: dst.copy_(src), 2 * src.nbytes, rep_ms))
    return entry


def job_add(torch, rep_ms: int, triton_mods) -> dict:
    a = torch.randn(N, N, device="cuda", dtype=torch.float32)
    b = torch.randn(N, N, device="cuda", dtype=torch.float32)
    c = torch.empty_like(a)
    ref = a + b
    nbytes = 3 * a.nbytes
    res: dict = {"bytes": nbytes, "shape": [N, N], "dtype": "float32"}

    def check(what: str) -> float:
        torch.cuda.synchronize()
        ok = torch.allclose(c, ref, rtol=1e-6, atol=0.0)
        err = (c - ref).abs().max().item()
        if not ok:
            raise AssertionError(f"{what}: add differs from torch (max |diff| {err})")
        return err

    def torch_add():
        poison(c)
        torch.add(a, b, out=c)
        entry = {"what": "torch.add(a, b, out=c)", "max_abs_err": check("torch")}
        entry.update(timed(lambda: torch.add(a, b, out=c), nbytes, rep_ms))
        return entry

    def triton_add():
        triton, add_kernel, _ = triton_mods
        configs = []
        for block in (1024, 2048, 4096, 8192):
            for warps in (4, 8):
                grid = (triton.cdiv(a.numel(), block),)
                run = lambda block=block, warps=warps, grid=grid: add_kernel[grid](  # noqa: E731
                    a, b, c, a.numel(), BLOCK=block, num_warps=warps)
                poison(c)
                run()
                entry = {"BLOCK": block, "num_warps": warps, "max_abs_err": check(f"triton {block}/{warps}")}
                entry.update(timed(run, nbytes, rep_ms))
                configs.append(entry)
        best = min(configs, key=lambda e: e["ms"])
        return {"what": "tl.load/tl.store, BLOCK x num_warps sweep", "best": best, "configs": configs}

    def tileproof_kernel(fusion) -> dict:
        kernel = tp.compile(fusion, target=TARGET)
        poison(c)
        kernel.run(a, b, out=[c])
        entry = {"fusion": fusion.name, "launch": launch_info(kernel), "max_abs_err": check(fusion.name)}
        entry.update(timed(tp_launcher(kernel, [a, b], [c]), nbytes, rep_ms))
        return entry

    def tileproof_add():
        configs = []
        for cfg in S.POINTWISE_CONFIGS:
            e = {"config": cfg}
            attempt(e, "result", lambda cfg=cfg: tileproof_kernel(S.pointwise_add(**cfg)))
            configs.append({"config": cfg, **e["result"]})
        ok = [e for e in configs if "ms" in e]
        if not ok:
            raise RuntimeError("no tileproof pointwise configuration ran")
        return {"what": "non-TMA: merge, 16-byte Vectorize, TIDx, Unroll, BIDx (benchmarks/schedules.py)",
                "best": min(ok, key=lambda e: e["ms"]), "configs": configs}

    attempt(res, "torch", torch_add)
    attempt(res, "triton", triton_add)
    attempt(res, "tileproof", tileproof_add)
    # the TMA example runs last in the add job; a fault there is caught, but a sticky CUDA
    # error would spoil what follows, so main() runs it after the transposes (see job_add_tma)
    res["_tileproof_kernel"] = tileproof_kernel
    return res


def job_add_tma(res: dict) -> None:
    def tma():
        try:
            fusion = S.tma_pointwise_add()
            kernel_fn = res["_tileproof_kernel"]
            return kernel_fn(fusion)
        except tp.UnsupportedSchedule as e:
            return {"error": f"UnsupportedSchedule: {e}"}

    attempt(res, "tileproof_tma", tma)


def job_transpose(torch, rep_ms: int, triton_mods, dtype: str) -> dict:
    tdt = getattr(torch, dtype)
    a = torch.randn(N, N, device="cuda", dtype=torch.float32).to(tdt)
    out = torch.empty(N, N, device="cuda", dtype=tdt)
    ref = a.t().contiguous()
    nbytes = 2 * a.nbytes
    res: dict = {"bytes": nbytes, "shape": [N, N], "dtype": dtype}

    def check(what: str) -> None:
        torch.cuda.synchronize()
        if not torch.equal(out, ref):
            bad = (out != ref).sum().item()
            raise AssertionError(f"{what}: transpose differs from torch in {bad} elements")

    def torch_t():
        poison(out)
        out.copy_(a.t())
        check("torch")
        entry = {"what": "out.copy_(a.t())"}
        entry.update(timed(lambda: out.copy_(a.t()), nbytes, rep_ms))
        return entry

    runners: dict = {}

    def triton_t():
        triton, _, transpose_kernel = triton_mods
        configs = []
        for bm in (32, 64, 128):
            for bn in (32, 64, 128):
                for warps in (4, 8):
                    grid = (triton.cdiv(N, bm), triton.cdiv(N, bn))
                    run = lambda bm=bm, bn=bn, warps=warps, grid=grid: transpose_kernel[grid](  # noqa: E731
                        a, out, N, N, BLOCK_M=bm, BLOCK_N=bn, num_warps=warps)
                    poison(out)
                    run()
                    check(f"triton {bm}x{bn}/{warps}")
                    entry = {"BLOCK_M": bm, "BLOCK_N": bn, "num_warps": warps}
                    entry.update(timed(run, nbytes, rep_ms))
                    configs.append(entry)
                    runners[("triton", bm, bn, warps)] = run
        best = min(configs, key=lambda e: e["ms"])
        runners["triton"] = runners[("triton", best["BLOCK_M"], best["BLOCK_N"], best["num_warps"])]
        return {"what": "tl.load tile, tl.trans, tl.store; BLOCK_M x BLOCK_N x num_warps sweep",
                "best": best, "configs": configs}

    def tileproof_one(fusion) -> dict:
        kernel = tp.compile(fusion, target=TARGET)
        poison(out)
        kernel.run(a, out=[out])
        check(fusion.name)
        report = kernel.report
        entry = {"fusion": fusion.name, "launch": launch_info(kernel),
                 "warnings": [f"{d.code}: {d.message}" for d in report.diagnostics]}
        launch = tp_launcher(kernel, [a], [out])
        entry.update(timed(launch, nbytes, rep_ms))
        runners[fusion.name] = launch
        return entry

    def tileproof_t():
        configs = []
        for cfg in S.TRANSPOSE_CONFIGS[dtype]:
            e: dict = {}
            attempt(e, "r", lambda cfg=cfg: tileproof_one(S.transpose(dtype, **cfg)))
            configs.append({"config": cfg, **e["r"]})
        ok = [e for e in configs if "ms" in e]
        if not ok:
            raise RuntimeError("no tileproof transpose configuration ran")
        best = min(ok, key=lambda e: e["ms"])
        runners["tileproof"] = runners[best["fusion"]]
        return {"what": "XOR-swizzled shared tile, 16-byte loads and stores (benchmarks/schedules.py)",
                "best": best, "configs": configs}

    def rematch():
        """The two sweeps' best kernels timed again, alternately, `rounds` times each."""
        rounds = 5
        times: dict = {"triton": [], "tileproof": []}
        for _ in range(rounds):
            for who in times:
                times[who].append(timed(runners[who], nbytes, rep_ms)["ms"])
        ms = {who: statistics.median(t) for who, t in times.items()}
        return {"what": f"best Triton vs best tileproof, alternately, {rounds} do_bench medians each",
                "ms": times, "median_ms": ms,
                "gbps": {who: round(nbytes / (m * 1e-3) / 1e9, 1) for who, m in ms.items()},
                "tileproof_vs_triton": round(ms["triton"] / ms["tileproof"], 4)}

    def unswizzled():
        fusion = S.unswizzled_transpose(dtype)
        kernel = tp.compile(fusion, target=TARGET)
        poison(out)
        kernel.run(a, out=[out])
        check(fusion.name)
        entry = {"fusion": "tests/support/codegen_schedules.py smem_transpose (32 x 32, no swizzle, scalar)",
                 "launch": launch_info(kernel, M=N, N=N),
                 "warnings": [f"{d.code}: {d.message}" for d in kernel.report.diagnostics]}
        entry.update(timed(tp_launcher(kernel, [a], [out]), nbytes, rep_ms))
        return entry

    attempt(res, "torch", torch_t)
    attempt(res, "triton", triton_t)
    attempt(res, "tileproof", tileproof_t)
    attempt(res, "tileproof_unswizzled_baseline", unswizzled)
    if "triton" in runners and "tileproof" in runners:
        attempt(res, "rematch", rematch)
    return res


def _gbps(entry) -> float | None:
    if not isinstance(entry, dict):
        return None
    if "best" in entry:
        entry = entry["best"]
    return entry.get("gbps")


def _ratio(x, y):
    return round(x / y, 3) if x and y else None


def summarize(results: dict) -> dict:
    copy = _gbps(results.get("copy"))
    add = results.get("add", {})
    s: dict = {"copy_gbps": copy, "add": {}, "transpose": {}}
    for key in ("tileproof", "tileproof_tma"):
        g = _gbps(add.get(key))
        s["add"][key] = {"gbps": g, "of_copy": _ratio(g, copy), "vs_torch": _ratio(g, _gbps(add.get("torch"))),
                         "vs_triton": _ratio(g, _gbps(add.get("triton")))}
    for dtype in ("float32", "bfloat16"):
        t = results.get(f"transpose_{dtype}", {})
        g, tri = _gbps(t.get("tileproof")), _gbps(t.get("triton"))
        vs_tri, of_copy = _ratio(g, tri), _ratio(g, copy)
        s["transpose"][dtype] = {
            "tileproof_gbps": g, "triton_best_gbps": tri, "torch_gbps": _gbps(t.get("torch")),
            "vs_triton": vs_tri, "of_copy": of_copy, "vs_torch": _ratio(g, _gbps(t.get("torch"))),
            "target_vs_triton": TRANSPOSE_VS_TRITON, "target_of_copy": TRANSPOSE_VS_COPY,
            "met_vs_triton": vs_tri is not None and vs_tri >= TRANSPOSE_VS_TRITON,
            "met_of_copy": of_copy is not None and of_copy >= TRANSPOSE_VS_COPY,
            "triton_best_config": (t.get("triton") or {}).get("best", {}).get("BLOCK_M") and {
                k: t["triton"]["best"][k] for k in ("BLOCK_M", "BLOCK_N", "num_warps")},
            "tileproof_best_fusion": (t.get("tileproof") or {}).get("best", {}).get("fusion"),
            "vs_triton_rematch": (t.get("rematch") or {}).get("tileproof_vs_triton"),
        }
    return s


def print_table(results: dict) -> None:
    rows = []
    if "copy" in results:
        rows.append(("copy", "torch copy_", results["copy"]))
    for key in ("torch", "triton", "tileproof", "tileproof_tma"):
        if key in results.get("add", {}):
            rows.append(("add f32", key, results["add"][key]))
    for dtype in ("float32", "bfloat16"):
        t = results.get(f"transpose_{dtype}", {})
        for key in ("torch", "triton", "tileproof", "tileproof_unswizzled_baseline"):
            if key in t:
                rows.append((f"transpose {dtype}", key, t[key]))
    print(f"\n{'job':20} {'who':30} {'ms':>9} {'GB/s':>8}")
    for job, who, e in rows:
        best = e.get("best", e) if isinstance(e, dict) else {}
        if "ms" in best:
            print(f"{job:20} {who:30} {best['ms']:9.4f} {best['gbps']:8.1f}")
        else:
            print(f"{job:20} {who:30} {'error: ' + str(e.get('error', ''))[:60]}")
    for dtype in ("float32", "bfloat16"):
        r = results.get(f"transpose_{dtype}", {}).get("rematch")
        if isinstance(r, dict) and "median_ms" in r:
            print(f"rematch {dtype}: triton {r['median_ms']['triton']:.4f} ms, tileproof "
                  f"{r['median_ms']['tileproof']:.4f} ms, tileproof/triton speed {r['tileproof_vs_triton']}")
        for c in (results.get(f"transpose_{dtype}", {}).get("tileproof") or {}).get("configs", []):
            print(f"  {c.get('fusion', c.get('config'))}: {c.get('ms', c.get('error'))} ms {c.get('gbps', '')} GB/s")
    for dtype, c in (results.get("compile") or {}).items():
        if isinstance(c, dict):
            print(f"compile {dtype}: cold tp.compile {c['cold_tp_compile_s']} s, NVRTC alone "
                  f"{c['cold_nvrtc_only_s']} s, cached {c['cached_tp_compile_same_fusion_s'] * 1e3:.3f} ms")
    if "summary" in results:
        print(json.dumps(results["summary"]["transpose"], indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="JSON path (default benchmarks/results/gpu_kernels/<machine>.json: the GPU's "
                        "model, or cpu.json with --compile-only, so the GPU results stay)")
    parser.add_argument("--compile-only", action="store_true", help="compile times and schedule checks; no GPU")
    parser.add_argument("--compile-runs", type=int, default=5)
    parser.add_argument("--rep-ms", type=int, default=100, help="do_bench's repetition time per entry")
    args = parser.parse_args()

    results: dict = {"script": "benchmarks/gpu_kernels.py", "target": TARGET, "host": platform.node(),
                     "python": platform.python_version(), "tileproof": tp.__version__,
                     "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    attempt(results, "schedules", schedule_reports)
    attempt(results, "compile", lambda: compile_times(args.compile_runs))
    if args.compile_only:
        results["device"] = None
        results["mode"] = "compile-only"
    else:
        import torch

        results["mode"] = "gpu"
        results["device"] = torch.cuda.get_device_name(0)
        results["torch"] = torch.__version__
        props = torch.cuda.get_device_properties(0)
        results["sms"] = props.multi_processor_count
        triton_mods = triton_kernels()
        results["triton"] = triton_mods[0].__version__
        results["timing"] = (f"triton.testing.do_bench(warmup=25 ms, rep={args.rep_ms} ms), median of the "
                             f"per-launch CUDA-event times (>= 20), L2 flushed before each")
        attempt(results, "copy", lambda: job_copy(torch, args.rep_ms))
        attempt(results, "add", lambda: job_add(torch, args.rep_ms, triton_mods))
        torch.cuda.empty_cache()
        for dtype in ("float32", "bfloat16"):
            attempt(results, f"transpose_{dtype}", lambda dtype=dtype: job_transpose(torch, args.rep_ms, triton_mods, dtype))
            torch.cuda.empty_cache()
        if isinstance(results.get("add"), dict) and "_tileproof_kernel" in results["add"]:
            job_add_tma(results["add"])  # last: a faulting kernel cannot spoil the others
        results["summary"] = summarize(results)
    if isinstance(results.get("add"), dict):
        results["add"].pop("_tileproof_kernel", None)
    results["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    args.out = args.out or str(results_path("gpu_kernels", results["device"]))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1, default=str) + "\n")
    print_table(results)
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
