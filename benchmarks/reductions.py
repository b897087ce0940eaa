"""Reductions against PyTorch and the copy ceiling, in one process on one GPU (issue 12).

    python3 benchmarks/reductions.py [--out FILE] [--size N] [--rep-ms MS]   # needs a GPU and torch
    python3 benchmarks/reductions.py --compile-only                          # verify + NVRTC; no GPU

Jobs, on an N x N float32 tensor (N = 16384 by default: 1 GiB):
  copy        dst.copy_(src): the bandwidth ceiling. Its read bandwidth is the bytes it reads
              over its time (its total bandwidth counts the bytes it writes too)
  row sums    out[i] = sum_j x[i, j]: torch.sum(x, 1) against tileproof's schedules
              (benchmarks/reduction_schedules.py ROW_CONFIGS, and the plain schedule as a baseline)
  column sums out[j] = sum_i x[i, j]: torch.sum(x, 0) against COLUMN_CONFIGS

A reduction reads the tensor once: its bandwidth is bytes read / time. The targets (issue 12):
tileproof's best at least 0.95 of the copy's read bandwidth, and at least as fast as torch.sum.
Every kernel's output is checked against torch.sum in float64 before it is timed (the output
poisoned with NaN first), exactly: the tensor holds small integers (-8 .. 7) as float32, whose sums
float32 holds exactly in any order of additions, so a missing or repeated term shows. Times: triton.testing.do_bench when Triton is there (CUDA events per launch,
L2 flushed before each, the median of >= 20 launches after warm-up), else the median of CUDA
events over as many launches. A tileproof kernel is launched through Kernel._prepare's launch
closure (one cuLaunchKernel), so Python argument binding stays out of the timed region. Writes
JSON (default benchmarks/results/reductions/<machine>.json, h100.json on an H100) and prints a table last.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

from bench_common import attempt, launch_info, results_path, write_results  # benchmarks/bench_common.py
import reduction_schedules as S  # benchmarks/reduction_schedules.py

import tileproof as tp

TARGET = "sm_90a"
VS_COPY_READ = 0.95  # issue 12: at least 0.95 of the copy's read bandwidth
VS_TORCH = 1.0  # and at least as fast as torch.sum


def schedules(n: int) -> dict[str, list]:
    """job -> [(label, build)]: every schedule the job times."""
    rows = [(f"row {c}", lambda c=c: S.row_sum(n, n, **c)) for c in S.ROW_CONFIGS]
    rows.append(("row plain", lambda: S.plain_row_sum(n, n)))
    columns = [(f"column {c}", lambda c=c: S.column_sum(n, n, **c)) for c in S.COLUMN_CONFIGS]
    return {"row_sum": rows, "column_sum": columns}


# -- without a GPU ------------------------------------------------------------------------------
def compile_only(n: int) -> dict:
    """Every schedule verified and compiled for sm_90a: accepted, warnings, launch, compile time."""
    out: dict = {}
    for job, builds in schedules(n).items():
        for label, build in builds:
            fusion = build()
            start = time.perf_counter()
            report = tp.verify(fusion, target=TARGET)
            entry = {"fusion": fusion.name, "accepted": report.ok,
                     "diagnostics": [f"{d.code}: {d.message}" for d in report.diagnostics]}
            if report.ok:
                kernel = tp.compile(fusion, target=TARGET)
                entry["launch"] = launch_info(kernel)
            entry["seconds"] = round(time.perf_counter() - start, 3)
            out[f"{job}: {label}"] = entry
    return out


# -- timing ---------------------------------------------------------------------------------------
def timed(torch, fn, nbytes: int, rep_ms: int) -> dict:
    try:
        from triton.testing import do_bench
    except ImportError:
        do_bench = None
    if do_bench is not None:
        times = do_bench(fn, warmup=25, rep=rep_ms, return_mode="all")
        if len(times) < 20:  # a slow kernel: ask for more repetitions
            times = do_bench(fn, warmup=25, rep=int(rep_ms * 20 / max(len(times), 1)) + 1, return_mode="all")
        how = "triton.testing.do_bench"
    else:
        for _ in range(10):
            fn()
        times = []
        for _ in range(50):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        how = "CUDA events"
    ms = statistics.median(times)
    return {"ms": round(ms, 5), "gbps": round(nbytes / (ms * 1e-3) / 1e9, 1), "reps": len(times),
            "min_ms": round(min(times), 5), "max_ms": round(max(times), 5), "timer": how}


def launcher(kernel, inputs, out):
    """The launch closure of a tileproof kernel for fixed arguments (no per-call binding)."""
    _bound, _stream, launch = kernel._prepare(tuple(inputs), list(out), None, {})
    return launch


# -- jobs -------------------------------------------------------------------------------------------
def job_copy(torch, x, rep_ms: int) -> dict:
    dst = torch.empty_like(x)
    dst.fill_(float("nan"))
    dst.copy_(x)
    torch.cuda.synchronize()
    assert torch.equal(dst, x), "copy mismatch"
    entry = {"what": "dst.copy_(src)", "bytes_read": x.nbytes, "bytes_written": x.nbytes}
    entry.update(timed(torch, lambda: dst.copy_(x), 2 * x.nbytes, rep_ms))
    entry["total_gbps"] = entry.pop("gbps")
    entry["read_gbps"] = round(x.nbytes / (entry["ms"] * 1e-3) / 1e9, 1)
    return entry


def job_reduction(torch, x, dim: int, builds, rep_ms: int, copy: dict) -> dict:
    """torch.sum(x, dim) and every tileproof schedule of `builds`, each checked, then timed."""
    want = x.double().sum(dim=dim)  # exact: integer values
    out = torch.empty(x.shape[1 - dim], device="cuda", dtype=torch.float32)
    res: dict = {"dim": dim, "bytes_read": x.nbytes, "out_shape": list(out.shape)}

    def check(what: str) -> float:
        torch.cuda.synchronize()
        err = (out.double() - want).abs()
        if not bool(torch.isfinite(out).all()) or bool((err > 0).any()):
            worst = int(torch.argmax(torch.nan_to_num(err, nan=float("inf"))))
            raise AssertionError(f"{what}: element {worst} is {float(out[worst])}, the sum is {float(want[worst])} "
                                 f"({int((err > 0).sum())} of {out.numel()} elements differ)")
        return float(err.max())

    def torch_sum():
        out.fill_(float("nan"))
        torch.sum(x, dim=dim, out=out)
        entry = {"what": f"torch.sum(x, dim={dim}, out=out)", "max_abs_err": check("torch")}
        entry.update(timed(torch, lambda: torch.sum(x, dim=dim, out=out), x.nbytes, rep_ms))
        return entry

    def tileproof_kernel(label, build) -> dict:
        fusion = build()
        kernel = tp.compile(fusion, target=TARGET)
        out.fill_(float("nan"))
        kernel.run(x, out=[out])
        entry = {"schedule": label, "fusion": fusion.name, "launch": launch_info(kernel), "max_abs_err": check(label)}
        entry.update(timed(torch, launcher(kernel, [x], [out]), x.nbytes, rep_ms))
        return entry

    def tileproof_best():
        configs = []
        for label, build in builds:
            e: dict = {}
            attempt(e, "result", lambda label=label, build=build: tileproof_kernel(label, build))
            configs.append({"schedule": label, **e["result"]})
        ran = [c for c in configs if "ms" in c]
        if not ran:
            raise RuntimeError("no tileproof schedule ran")
        return {"best": min(ran, key=lambda c: c["ms"]), "configs": configs}

    attempt(res, "torch", torch_sum)
    attempt(res, "tileproof", tileproof_best)
    best, peer = res["tileproof"].get("best"), res["torch"]
    if best and "ms" in peer and "ms" in copy:
        res["tileproof_vs_torch"] = round(peer["ms"] / best["ms"], 4)
        res["tileproof_vs_copy_read"] = round(best["gbps"] / copy["read_gbps"], 4)
        res["tileproof_vs_copy_total"] = round(best["gbps"] / copy["total_gbps"], 4)
        res["torch_vs_copy_read"] = round(peer["gbps"] / copy["read_gbps"], 4)
        res["targets"] = {"vs_copy_read_at_least": VS_COPY_READ, "vs_torch_at_least": VS_TORCH,
                          "copy_met": res["tileproof_vs_copy_read"] >= VS_COPY_READ,
                          "torch_met": res["tileproof_vs_torch"] >= VS_TORCH}
    return res


def environment(torch) -> dict:
    from tileproof.codegen.runtime.nvrtc import nvrtc_version

    props = torch.cuda.get_device_properties(0)
    return {"device": torch.cuda.get_device_name(0), "sms": props.multi_processor_count,
            "torch": torch.__version__, "nvrtc": "%d.%d" % nvrtc_version(), "python": platform.python_version(),
            "target": TARGET}


def table(results: dict) -> str:
    lines = [f"{'job':<12} {'torch.sum':>12} {'tileproof best':>15} {'vs torch':>9} {'vs copy read':>13}  schedule"]
    copy = results.get("copy", {})
    if "read_gbps" in copy:
        lines.insert(0, f"copy: {copy['ms']} ms, read {copy['read_gbps']} GB/s, total {copy['total_gbps']} GB/s")
    for job in ("row_sum", "column_sum"):
        r = results.get(job, {})
        peer, best = r.get("torch", {}), r.get("tileproof", {}).get("best", {})
        lines.append(f"{job:<12} {str(peer.get('gbps', '-')) + ' GB/s':>12} {str(best.get('gbps', '-')) + ' GB/s':>15} "
                     f"{r.get('tileproof_vs_torch', '-'):>9} {r.get('tileproof_vs_copy_read', '-'):>13}  "
                     f"{best.get('schedule', r.get('tileproof', {}).get('error', '-'))}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--out", type=Path, default=None,
                        help="the JSON file to write (default: benchmarks/results/reductions/<machine>.json)")
    parser.add_argument("--size", type=int, default=S.SIZE, help="N of the N x N tensor (default: %(default)s)")
    parser.add_argument("--rep-ms", type=int, default=200, help="do_bench's repetition time per kernel (default: %(default)s)")
    parser.add_argument("--compile-only", action="store_true",
                        help="verify and compile every schedule (NVRTC, sm_90a), print the launches; no GPU")
    args = parser.parse_args(argv)
    if args.size <= 0:
        parser.error("--size must be positive")
    started = time.time()
    if args.compile_only:
        result = {"mode": "compile-only", "size": args.size, "schedules": compile_only(args.size)}
        bad = [k for k, v in result["schedules"].items() if not v["accepted"] or v["diagnostics"]]
        for k, v in result["schedules"].items():
            print(f"{k}: {'accepted' if v['accepted'] else 'REJECTED'} {v.get('launch', '')} {v['seconds']} s "
                  f"{'; '.join(v['diagnostics'])}")
        print(f"{len(result['schedules'])} schedules, {len(bad)} rejected or warned")
        return 1 if bad else 0
    import torch

    if not torch.cuda.is_available():
        print("reductions.py: no CUDA device (use --compile-only to check the schedules without one)", file=sys.stderr)
        return 2
    n = args.size
    gen = torch.Generator("cuda").manual_seed(0)  # small integers: exact sums in any order
    x = torch.randint(-8, 8, (n, n), device="cuda", generator=gen).to(torch.float32)
    results: dict = {"command": " ".join([Path(sys.argv[0]).name] + (argv if argv is not None else sys.argv[1:])),
                     "environment": environment(torch), "shape": [n, n], "dtype": "float32"}
    attempt(results, "copy", lambda: job_copy(torch, x, args.rep_ms))
    jobs = schedules(n)
    attempt(results, "row_sum", lambda: job_reduction(torch, x, 1, jobs["row_sum"], args.rep_ms, results["copy"]))
    attempt(results, "column_sum",
            lambda: job_reduction(torch, x, 0, jobs["column_sum"], args.rep_ms, results["copy"]))
    results["seconds"] = round(time.time() - started, 1)
    write_results(results, args.out or results_path("reductions", results["environment"]["device"]), table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
