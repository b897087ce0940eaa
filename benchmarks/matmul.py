"""Tensor-core matmuls against cuBLAS and Triton's mma.sync path, in one process on one GPU (issue 12).

    python3 benchmarks/matmul.py [--out FILE] [--size N] [--rep-ms MS]   # needs a GPU, torch and triton
    python3 benchmarks/matmul.py --compile-only [--size N]              # verify + NVRTC; no GPU

D[M, N] = sum_k A[m, k] B[n, k] at M = N = K = 8192 (--size), float32 output, for two dtypes:
  tf32   float32 operands, tensor cores in tf32 (float32 accumulation)
  bf16   bfloat16 operands, float32 accumulation and output

Implementations, per dtype:
  tileproof   every entry of benchmarks/matmul_schedules.py SCHEDULES of that dtype: verified
              (tp.verify seconds), compiled for sm_90a (cold tp.compile seconds: empty memory
              cache, fresh NVRTC disk cache), launched on A [M, 1, K], B [1, N, K] laid out as
              their allocation domains say
  cuBLAS      torch.matmul on the same layout: a2 @ b2.T with a2 = a[:, 0, :], b2 = b[0]
              (torch.backends.cuda.matmul.allow_tf32 = True for tf32; bf16 gives a bf16 output,
              as quoted; torch.mm(..., out_dtype=torch.float32) is timed beside it where torch
              has it)
  Triton      the matmul tutorial's kernel (tl.dot, grouped block order, K masks), float32
              output, with DISABLE_MMA_V3=1 (set before triton is imported) so that on Hopper it
              emits mma.sync (MMA v2) + cp.async, not wgmma: each configuration's PTX is checked
              for mma.sync and cp.async and for the absence of wgmma (recorded); the best of a
              few block / stage / warp configurations is reported
cuBLAS and Triton are timed on every operand layout a schedule of the dtype uses, and always on
the K-major one (a @ b.T, A [M, K] and B [N, K] row-major), the layout of the issue's reference
numbers.

Every output is checked before it is timed, against a float64 reference on 1024 rows spread over
M (every M/1024-th row; all rows when M <= 1024), the output poisoned with NaN first (no NaN may
remain anywhere): |D - D64| <= u |A| |B|^T + K 2^-23 |A| |B|^T, u = 2^-10 for tf32 (each operand
rounded to 10 mantissa bits), 2^-9 where the operands are truncated (Triton's tf32 dot, a
schedule declaring tp.Tf32Rounding.Truncate) and 0 for bf16 (exact products, float32 sums), plus
2^-8 |D64| where the output is bfloat16. A failed check is recorded and that implementation is not timed.
Times: triton.testing.do_bench (CUDA events per launch, L2 flushed before each), the median of
>= 20 launches after warm-up; a tileproof kernel is launched through Kernel._prepare's launch
closure (one cuLaunchKernel). TFLOP/s = 2 M N K / time. Each timed entry also records
back_to_back_ms: 20 launches in a row between two CUDA events, no flush (the median of 5).
Ratios are speeds (the peer's time over this one's): vs cuBLAS and vs Triton on the same layout.
Writes JSON (default benchmarks/results/matmul/<machine>.json: h100.json on an H100, cpu.json with
--compile-only) and prints a table last.
"""

from __future__ import annotations

import os

os.environ["DISABLE_MMA_V3"] = "1"  # before triton is imported anywhere: Triton's mma.sync path

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from bench_common import attempt, launch_info, results_path  # noqa: E402  (benchmarks/bench_common.py)
import matmul_schedules as S  # noqa: E402  (benchmarks/matmul_schedules.py)

import tileproof as tp  # noqa: E402
from tileproof.codegen import compile as tp_compile_module  # noqa: E402

TARGET = "sm_90a"
CHECK_ROWS = 1024
# issue 12: the tuned schedule >= 1.0x Triton's mma.sync path (>= 0.55 of cuBLAS); verify and
# cold compile of each matmul schedule < 1 s
VS_TRITON = 1.0
VS_CUBLAS = 0.55
VERIFY_S = 1.0
COLD_COMPILE_S = 1.0
OPERAND_DTYPE = {"tf32": "float32", "bf16": "bfloat16"}
K_MAJOR = "A K-major, B K-major"
# Triton configurations: (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps)
TRITON_CONFIGS = {
    "tf32": [(128, 128, 32, 3, 4), (128, 128, 32, 3, 8), (128, 256, 32, 3, 8), (256, 128, 32, 3, 8),
             (64, 128, 32, 4, 4)],
    "bf16": [(128, 256, 64, 3, 8), (256, 128, 64, 3, 8), (128, 128, 64, 4, 4), (128, 128, 32, 4, 4),
             (64, 256, 32, 4, 4)],
}


# -- helpers ------------------------------------------------------------------------------------
def tflops(m: int, n: int, k: int, ms: float) -> float:
    return round(2 * m * n * k / (ms * 1e-3) / 1e12, 1)


def schedule_entries(dtype: str | None = None) -> list[tuple[str, str, object]]:
    """(name, dtype, builder) of every registered schedule (of `dtype` if given)."""
    return [(name, d, build) for name, (d, build) in S.SCHEDULES.items() if dtype is None or d == dtype]


# -- without a GPU ------------------------------------------------------------------------------
def verify_and_compile(name: str, dtype: str, build, size: int, cold_runs: int = 1) -> dict:
    """tp.verify seconds, and cold tp.compile seconds (empty memory cache, fresh NVRTC disk cache:
    verify + lower + emit + NVRTC), the median of `cold_runs`. Returns the entry; the kernel of
    the last compile under "_kernel"."""
    fusion = build(size, size, size)
    want = OPERAND_DTYPE[dtype]
    got = [t.dtype.name for t in fusion.inputs]
    if any(g != want for g in got):
        raise ValueError(f"schedule {name} is registered as {dtype} but its inputs are {got}")
    start = time.perf_counter()
    report = tp.verify(fusion, target=TARGET)
    verify_s = time.perf_counter() - start
    entry = {"schedule": name, "dtype": dtype, "fusion": fusion.name, "accepted": report.ok,
             "diagnostics": [f"{d.code}: {d.message}" for d in report.diagnostics],
             "verify_s": round(verify_s, 4)}
    if not report.ok:
        return entry
    saved = os.environ.get("TILEPROOF_CACHE_DIR")
    cold, kernel = [], None
    try:
        for _ in range(cold_runs):
            with tempfile.TemporaryDirectory(prefix="tileproof-cold-") as d:
                os.environ["TILEPROOF_CACHE_DIR"] = d
                tp_compile_module.clear_memory_cache()
                fusion = build(size, size, size)
                start = time.perf_counter()
                kernel = tp.compile(fusion, target=TARGET)
                cold.append(time.perf_counter() - start)
    finally:
        if saved is None:
            os.environ.pop("TILEPROOF_CACHE_DIR", None)
        else:
            os.environ["TILEPROOF_CACHE_DIR"] = saved
    cold_s = statistics.median(cold)
    entry.update({"cold_compile_s": round(cold_s, 4), "cold_compile_all_s": [round(x, 4) for x in cold],
                  "launch": launch_info(kernel), "source_lines": kernel.cuda_source.count("\n"),
                  "layout": layout_of(fusion),
                  "targets": {"verify_below_s": VERIFY_S, "verify_met": verify_s < VERIFY_S,
                              "cold_compile_below_s": COLD_COMPILE_S, "cold_compile_met": cold_s < COLD_COMPILE_S},
                  "_kernel": kernel})
    return entry


def allocation_order(tv) -> list[int]:
    """order[j] = the logical axis stored j-th outermost (the allocation domain's order)."""
    return [tv.logical.index(i) if i in tv.logical else j for j, i in enumerate(tv.allocation or tv.logical)]


def layout_of(fusion) -> str:
    """'A K-major, B K-major' and the like: which of each operand's two real axes is contiguous."""
    a_tv, b_tv = fusion.inputs
    a_inner, b_inner = allocation_order(a_tv)[-1], allocation_order(b_tv)[-1]
    a = {0: "M-major", 2: "K-major"}.get(a_inner, f"axis {a_inner} innermost")
    b = {1: "N-major", 2: "K-major"}.get(b_inner, f"axis {b_inner} innermost")
    return f"A {a}, B {b}"


def compile_only(size: int) -> dict:
    out = {}
    for name, dtype, build in schedule_entries():
        e: dict = {}
        attempt(e, "r", lambda name=name, dtype=dtype, build=build: verify_and_compile(name, dtype, build, size))
        e["r"].pop("_kernel", None)
        out[name] = e["r"]
    return out


# -- on the GPU ---------------------------------------------------------------------------------
def timed(fn, m: int, n: int, k: int, rep_ms: int) -> dict:
    from triton.testing import do_bench

    times = do_bench(fn, warmup=25, rep=rep_ms, return_mode="all")
    if len(times) < 20:  # a slow kernel: ask for more repetitions
        times = do_bench(fn, warmup=25, rep=int(rep_ms * 21 / max(len(times), 1)) + 1, return_mode="all")
    ms = statistics.median(times)
    entry = {"ms": round(ms, 4), "tflops": tflops(m, n, k, ms), "reps": len(times),
             "min_ms": round(min(times), 4), "max_ms": round(max(times), 4)}
    entry.update(back_to_back(fn, m, n, k))
    return entry


def back_to_back(fn, m: int, n: int, k: int, launches: int = 20, samples: int = 5) -> dict:
    """Launches one after another with no L2 flush between them (the GPU kept busy): the median
    over `samples` of (CUDA-event time of `launches` launches) / launches. Context for numbers
    quoted elsewhere; the ratios use do_bench's median."""
    import torch

    per = []
    for _ in range(samples):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(launches):
            fn()
        end.record()
        end.synchronize()
        per.append(start.elapsed_time(end) / launches)
    ms = statistics.median(per)
    return {"back_to_back_ms": round(ms, 4), "back_to_back_tflops": tflops(m, n, k, ms)}


class Problem:
    """One dtype's operands (the same values in every layout), its float64 reference rows and
    the check."""

    def __init__(self, torch, dtype: str, m: int, n: int, k: int, seed: int = 0):
        self.torch, self.dtype, self.m, self.n, self.k = torch, dtype, m, n, k
        self.tdtype = {"tf32": torch.float32, "bf16": torch.bfloat16}[dtype]
        gen = torch.Generator("cuda").manual_seed(seed)
        self.a = torch.randn(m, k, device="cuda", generator=gen).to(self.tdtype)  # [M, K]
        self.b = torch.randn(n, k, device="cuda", generator=gen).to(self.tdtype)  # [N, K]
        self.rows = torch.arange(0, m, max(1, m // CHECK_ROWS), device="cuda")[:CHECK_ROWS]
        a64, b64 = self.a[self.rows].double(), self.b.double()
        self.want = a64 @ b64.T
        self.magnitude = a64.abs() @ b64.abs().T
        self._layouts: dict = {}

    def operands(self, layout: str):
        """A [M, 1, K] and B [1, N, K] views, stored in `layout` ('A M-major, B K-major', ...)."""
        a_part, b_part = (p.strip() for p in layout.split(","))
        orders = {"A K-major": (0, 1, 2), "A M-major": (2, 1, 0), "B K-major": (0, 1, 2), "B N-major": (0, 2, 1)}
        return self.stored(orders[a_part], orders[b_part])

    def operands_for(self, fusion):
        """The operands laid out as the fusion's input allocation domains say."""
        return self.stored(*(tuple(allocation_order(tv)) for tv in fusion.inputs))

    def stored(self, a_order: tuple, b_order: tuple):
        """A [M, 1, K] and B [1, N, K] whose memory holds the axes in these orders (outermost
        first), dense, as test_mma's operand() builds them; one layout's copies at a time."""
        key = (a_order, b_order)
        if key not in self._layouts:
            self._layouts.clear()
            self.torch.cuda.empty_cache()
            pair = []
            for x, order in ((self.a.unsqueeze(1), a_order), (self.b.unsqueeze(0), b_order)):
                dense = x.permute(list(order)).contiguous()
                pair.append(dense.permute([list(order).index(i) for i in range(3)]))
            self._layouts[key] = tuple(pair)
        return self._layouts[key]

    def check(self, got, truncated: bool = False) -> dict:
        """got [M, N] against the reference rows; raises AssertionError past the bound.
        truncated: the tf32 operands were truncated, not rounded (twice the error)."""
        torch = self.torch
        torch.cuda.synchronize()
        if bool(torch.isnan(got).any()):
            raise AssertionError(f"{int(torch.isnan(got).sum())} NaN left in the output (an element not stored)")
        unit = (2.0 ** -9 if truncated else 2.0 ** -10) if self.dtype == "tf32" else 0.0
        bound = (unit + self.k * 2.0 ** -23) * self.magnitude + 1e-6
        if got.dtype == torch.bfloat16:
            bound = bound + 2.0 ** -8 * self.want.abs()
        err = (got[self.rows].double() - self.want).abs()
        ratio = err / bound
        worst = int(ratio.argmax())
        if not bool((err <= bound).all()):
            r, c = divmod(worst, self.n)
            raise AssertionError(f"{int((err > bound).sum())} elements past the bound; worst D[{int(self.rows[r])}, {c}] "
                                 f"= {float(got[self.rows[r], c])}, reference {float(self.want[r, c])}, "
                                 f"bound {float(bound[r, c])}")
        return {"checked_rows": int(self.rows.numel()), "max_abs_err": float(err.max()),
                "max_err_over_bound": round(float(ratio.flatten()[worst]), 6)}


def poisoned(torch, m, n, dtype=None):
    return torch.full((m, n), float("nan"), device="cuda", dtype=dtype or torch.float32)


def checked_and_timed(prob: Problem, run, out, rep_ms: int, entry: dict, truncated: bool = False) -> dict:
    """Poison, run once, check (recorded as "check"), then time; a failed check is not timed."""
    out.fill_(float("nan"))
    run()
    try:
        entry["check"] = {"ok": True, **prob.check(out, truncated)}
    except AssertionError as e:
        entry["check"] = {"ok": False, "error": str(e)[:2000]}
        return entry
    entry.update(timed(run, prob.m, prob.n, prob.k, rep_ms))
    return entry


def job_cublas(torch, prob: Problem, layout: str, rep_ms: int) -> dict:
    a, b = prob.operands(layout)
    a2, b2 = a[:, 0, :], b[0]
    res: dict = {}
    out = poisoned(torch, prob.m, prob.n, prob.tdtype)

    def mm():
        torch.matmul(a2, b2.T, out=out)

    attempt(res, "matmul", lambda: checked_and_timed(
        prob, mm, out, rep_ms, {"what": "torch.matmul(a2, b2.T, out=out): a2 @ b2.T", "out_dtype": str(out.dtype)}))
    if prob.dtype == "bf16":
        out32 = poisoned(torch, prob.m, prob.n)

        def mm32():
            torch.mm(a2, b2.T, out_dtype=torch.float32, out=out32)

        attempt(res, "float32_output", lambda: checked_and_timed(
            prob, mm32, out32, rep_ms, {"what": "torch.mm(a2, b2.T, out_dtype=torch.float32, out=out)",
                                        "out_dtype": "torch.float32"}))
    res.update({k: v for k, v in res["matmul"].items() if k in ("ms", "tflops", "back_to_back_ms", "back_to_back_tflops")})
    return res


_TRITON = None


def triton_matmul():
    """The Triton matmul tutorial's kernel (grouped block order, K masks), float32 output."""
    global _TRITON
    if _TRITON is not None:
        return _TRITON
    import triton
    import triton.language as tl

    @triton.jit
    def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                      TF32: tl.constexpr):
        pid = tl.program_id(axis=0)
        num_pid_m = tl.cdiv(M, BLOCK_M)
        num_pid_n = tl.cdiv(N, BLOCK_N)
        num_pid_in_group = GROUP_M * num_pid_n
        group_id = pid // num_pid_in_group
        first_pid_m = group_id * GROUP_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
        pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
        pid_n = (pid % num_pid_in_group) // group_size_m
        offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
        offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
        b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(tl.cdiv(K, BLOCK_K)):
            a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
            if TF32:
                acc = tl.dot(a, b, acc, input_precision="tf32")
            else:
                acc = tl.dot(a, b, acc)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
        offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
        tl.store(c_ptrs, acc, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))

    _TRITON = (triton, matmul_kernel)
    return _TRITON


def ptx_check(compiled) -> dict:
    ptx = compiled.asm.get("ptx", "")
    has = {"mma.sync": "mma.sync" in ptx, "cp.async": "cp.async" in ptx, "wgmma": "wgmma" in ptx}
    return {**{f"ptx_has_{k.replace('.', '_')}": v for k, v in has.items()},
            "mma_sync_path": has["mma.sync"] and has["cp.async"] and not has["wgmma"],
            "mma_sync_instructions": ptx.count("mma.sync")}


def job_triton(torch, prob: Problem, layout: str, rep_ms: int) -> dict:
    triton, kernel = triton_matmul()
    a, b = prob.operands(layout)
    a2, bkn = a[:, 0, :], b[0].T  # A [M, K], B as [K, N]
    m, n, k = prob.m, prob.n, prob.k
    out = poisoned(torch, m, n)
    configs = []
    for bm, bn, bk, stages, warps in TRITON_CONFIGS[prob.dtype]:
        label = f"BLOCK {bm}x{bn}x{bk}, {stages} stages, {warps} warps"
        grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
        holder: dict = {}

        def run(bm=bm, bn=bn, bk=bk, stages=stages, warps=warps, grid=grid, holder=holder):
            holder["compiled"] = kernel[grid](a2, bkn, out, m, n, k, a2.stride(0), a2.stride(1), bkn.stride(0),
                                              bkn.stride(1), out.stride(0), out.stride(1), BLOCK_M=bm, BLOCK_N=bn,
                                              BLOCK_K=bk, GROUP_M=8, TF32=prob.dtype == "tf32",
                                              num_stages=stages, num_warps=warps)

        def one(label=label, run=run, holder=holder):
            entry = {"config": label}
            out.fill_(float("nan"))
            run()
            entry["ptx"] = ptx_check(holder["compiled"])
            if not entry["ptx"]["mma_sync_path"]:
                entry["check"] = {"ok": False, "error": "not on the mma.sync + cp.async path (see ptx)"}
                return entry
            return checked_and_timed(prob, run, out, rep_ms, entry, truncated=True)  # tl.dot passes the bits

        e: dict = {}
        attempt(e, "r", one)
        configs.append(e["r"])
    ran = [c for c in configs if "ms" in c]
    res = {"what": "Triton matmul tutorial kernel (tl.dot, GROUP_M 8, K masks), float32 output, DISABLE_MMA_V3=1",
           "configs": configs}
    if ran:
        best = min(ran, key=lambda c: c["ms"])
        res.update({"best_config": best["config"], "ptx": best["ptx"],
                    **{k: best[k] for k in ("ms", "tflops", "back_to_back_ms", "back_to_back_tflops")}})
    return res


def job_tileproof(torch, prob: Problem, name: str, build, rep_ms: int) -> dict:
    entry = verify_and_compile(name, prob.dtype, build, prob.m, cold_runs=3) if prob.m == prob.n == prob.k else None
    if entry is None:
        raise ValueError("M = N = K only")
    kernel = entry.pop("_kernel", None)
    if kernel is None:
        return entry
    a, b = prob.operands_for(kernel.fusion)
    entry["input_strides"] = [list(a.stride()), list(b.stride())]
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[kernel.fusion.outputs[0].dtype.name]
    out = poisoned(torch, prob.m, prob.n, dtype)  # float32, or bfloat16 for a cast epilogue
    _bound, _stream, launch = kernel._prepare((a, b), [out], None, {})
    truncated = any(op.tf32_rounding is tp.Tf32Rounding.Truncate for op in kernel.fusion.exprs)
    return checked_and_timed(prob, launch, out, rep_ms, entry, truncated)


def environment(torch) -> dict:
    from tileproof.codegen.runtime.nvrtc import nvrtc_version

    props = torch.cuda.get_device_properties(0)
    env = {"device": torch.cuda.get_device_name(0), "sms": props.multi_processor_count, "torch": torch.__version__,
           "nvrtc": "%d.%d" % nvrtc_version(), "python": platform.python_version(), "target": TARGET,
           "DISABLE_MMA_V3": os.environ.get("DISABLE_MMA_V3")}
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
    env["cublas"] = f"torch {torch.__version__}, CUDA {torch.version.cuda}"
    return env


def ratios(entry: dict, peers: dict) -> None:
    """entry["vs_cublas"], entry["vs_triton"]: speed ratios against the same layout's peers."""
    if "ms" not in entry:
        return
    for key, peer in (("vs_cublas", peers.get("cublas", {})), ("vs_triton", peers.get("triton", {}))):
        if "ms" in peer:
            entry[key] = round(peer["ms"] / entry["ms"], 4)


def job_dtype(torch, dtype: str, size: int, rep_ms: int) -> dict:
    prob = Problem(torch, dtype, size, size, size)
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    torch.backends.cudnn.allow_tf32 = dtype == "tf32"
    entries = schedule_entries(dtype)
    res: dict = {"operands": S_OPERANDS[dtype], "shape": [size, size, size], "check_rows": int(prob.rows.numel()),
                 "tileproof": {}, "peers": {}}
    layouts = {}
    for name, _d, build in entries:
        e: dict = {}
        attempt(e, "r", lambda build=build: layout_of(build(size, size, size)))
        layouts[name] = e["r"] if isinstance(e["r"], str) else K_MAJOR
    order = [K_MAJOR] + sorted(set(layouts.values()) - {K_MAJOR})
    for layout in order:
        peers: dict = {}
        attempt(peers, "cublas", lambda: job_cublas(torch, prob, layout, rep_ms))
        attempt(peers, "triton", lambda: job_triton(torch, prob, layout, rep_ms))
        if "ms" in peers["cublas"] and "ms" in peers["triton"]:
            peers["triton_vs_cublas"] = round(peers["cublas"]["ms"] / peers["triton"]["ms"], 4)
        res["peers"][layout] = peers
        for name, _d, build in entries:
            if layouts[name] != layout:
                continue
            attempt(res["tileproof"], name, lambda name=name, build=build: job_tileproof(torch, prob, name, build, rep_ms))
            ratios(res["tileproof"][name], peers)
            if "vs_triton" in res["tileproof"][name]:
                res["tileproof"][name]["targets_met"] = {
                    "vs_triton_at_least_1.0": res["tileproof"][name]["vs_triton"] >= VS_TRITON,
                    "vs_cublas_at_least_0.55": res["tileproof"][name].get("vs_cublas", 0) >= VS_CUBLAS}
            torch.cuda.empty_cache()
    prob._layouts.clear()
    return res


S_OPERANDS = {"tf32": "float32 operands, tf32 tensor cores, float32 accumulation and output",
              "bf16": "bfloat16 operands, float32 accumulation and output"}


def rows_of(results: dict) -> list[dict]:
    """One row per timed (or failed) implementation: dtype, who, layout, ms, TFLOP/s, ratios."""
    rows = []
    for dtype in S.DTYPES:
        r = results.get(dtype)
        if not isinstance(r, dict):
            continue
        if "error" in r and "peers" not in r:
            rows.append({"dtype": dtype, "who": "-", "layout": "-", "note": r["error"][:80]})
            continue
        for layout, peers in r.get("peers", {}).items():
            for who in ("cublas", "triton"):
                p = peers.get(who, {})
                row = {"dtype": dtype, "who": who, "layout": layout, "ms": p.get("ms"), "tflops": p.get("tflops"),
                       "back_to_back_tflops": p.get("back_to_back_tflops")}
                if who == "triton":
                    row["note"] = p.get("best_config", p.get("error", "no configuration ran"))
                    if "ms" in p and "ms" in peers.get("cublas", {}):
                        row["vs_cublas"] = peers["triton_vs_cublas"]
                    row["vs_triton"] = 1.0 if "ms" in p else None
                else:
                    row["note"] = p.get("matmul", {}).get("what", p.get("error", ""))
                    if "ms" in p:
                        row["vs_cublas"] = 1.0
                        t = peers.get("triton", {})
                        if "ms" in t:
                            row["vs_triton"] = round(t["ms"] / p["ms"], 4)
                rows.append(row)
        for name, e in r.get("tileproof", {}).items():
            row = {"dtype": dtype, "who": f"tileproof {name}", "layout": e.get("layout", "-"), "ms": e.get("ms"),
                   "tflops": e.get("tflops"), "vs_cublas": e.get("vs_cublas"), "vs_triton": e.get("vs_triton"),
                   "back_to_back_tflops": e.get("back_to_back_tflops")}
            if "ms" not in e:
                row["note"] = e.get("error") or (e.get("check") or {}).get("error") or "not accepted"
            else:
                row["note"] = f"verify {e.get('verify_s')} s, cold compile {e.get('cold_compile_s')} s"
            rows.append(row)
    return rows


def table(results: dict) -> str:
    lines = [f"{'dtype':5} {'implementation':34} {'layout':22} {'ms':>9} {'TFLOP/s':>8} {'vs cuBLAS':>9} "
             f"{'vs Triton':>9} {'b2b TFLOP/s':>11}  note"]
    fmt = lambda v: "-" if v is None else str(v)  # noqa: E731
    for row in rows_of(results):
        lines.append(f"{row['dtype']:5} {row['who']:34} {row['layout']:22} {fmt(row.get('ms')):>9} "
                     f"{fmt(row.get('tflops')):>8} {fmt(row.get('vs_cublas')):>9} {fmt(row.get('vs_triton')):>9} "
                     f"{fmt(row.get('back_to_back_tflops')):>11}  "
                     f"{str(row.get('note', ''))[:90]}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--out", type=Path, default=None,
                        help="the JSON file to write (default: benchmarks/results/matmul/<machine>.json, the GPU's "
                             "model, or cpu.json with --compile-only)")
    parser.add_argument("--size", type=int, default=S.SIZE, help="M = N = K (default: %(default)s)")
    parser.add_argument("--rep-ms", type=int, default=200, help="do_bench's repetition time per kernel (default: %(default)s)")
    parser.add_argument("--dtypes", default=",".join(S.DTYPES), help="comma-separated subset of %(default)s")
    parser.add_argument("--compile-only", action="store_true",
                        help="verify and compile every schedule (NVRTC, sm_90a), print the times; no GPU")
    args = parser.parse_args(argv)
    if args.size <= 0:
        parser.error("--size must be positive")
    dtypes = [d for d in args.dtypes.split(",") if d]
    if any(d not in S.DTYPES for d in dtypes):
        parser.error(f"--dtypes: one of {S.DTYPES}")
    started = time.time()
    results: dict = {"script": "benchmarks/matmul.py",
                     "command": " ".join([Path(sys.argv[0]).name] + (argv if argv is not None else sys.argv[1:])),
                     "size": args.size, "schedules": {n: d for n, (d, _b) in S.SCHEDULES.items()}}
    if args.compile_only:
        results["mode"] = "compile-only"
        results["compile"] = compile_only(args.size)
        bad = [k for k, v in results["compile"].items() if not v.get("accepted")]
        args.out = args.out or results_path("matmul", None)
        for k, v in results["compile"].items():
            print(f"{k} ({v.get('dtype')}): {'accepted' if v.get('accepted') else 'REJECTED'} {v.get('layout', '')} "
                  f"verify {v.get('verify_s')} s, cold compile {v.get('cold_compile_s')} s {v.get('launch', '')} "
                  f"{v.get('error', '')} {'; '.join(d.split(':')[0] for d in v.get('diagnostics', []))}")
        print(f"{len(results['compile'])} schedules, {len(bad)} rejected or failed")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1) + "\n")
        print(f"wrote {args.out}")
        return 1 if bad else 0
    import torch

    if not torch.cuda.is_available():
        print("matmul.py: no CUDA device (use --compile-only to check the schedules without one)", file=sys.stderr)
        return 2
    results["mode"] = "gpu"
    results["environment"] = environment(torch)
    args.out = args.out or results_path("matmul", results["environment"]["device"])
    results["timing"] = (f"triton.testing.do_bench(warmup=25 ms, rep={args.rep_ms} ms), median of the per-launch "
                         f"CUDA-event times (>= 20), L2 flushed before each")
    results["check"] = ("float64 reference on every M/1024-th row, no NaN anywhere: |err| <= (u + K 2^-23) |A||B|^T "
                        "(+ 2^-8 |D| for a bfloat16 output), u = 2^-10 tf32, 0 bf16")
    for dtype in dtypes:
        attempt(results, dtype, lambda: job_dtype(torch, dtype, args.size, args.rep_ms))
        torch.cuda.empty_cache()
    results["table"] = rows_of(results)
    results["seconds"] = round(time.time() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1, default=str) + "\n")
    print(table(results))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
