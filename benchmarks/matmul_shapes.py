"""bf16 GEMM at many shapes through the public call path: tileproof.recipes.matmul (its choice of
configuration per shape, and each configuration forced) against cuBLAS and Triton, in one process on
one GPU (issue 34 item 5).

    python3 benchmarks/matmul_shapes.py [--out FILE] [--shapes MxNxK,...] [--rep-ms MS] [--no-triton] [--all-configs]
    python3 benchmarks/matmul_shapes.py --plan [--shapes ...]     # the choices and estimates only; no GPU

D = A @ B with A [M, K] and B = w.t() of a weight w [N, K] (both K-major, a linear layer's layout),
bfloat16 operands and output, float32 accumulation, at SHAPES: square (8192^3, 4096^3, 2048^3),
skinny (M = 128 to 1024, N = K = 8192), 3840 x 4096 x 4096 (480 tiles of 128 x 256: 3.6 waves on 132
SMs), few output tiles with a long K (1024 x 1024 x 16384, 512 x 512 x 32768), LLM layers (4096 x
14336 x 4096, 4096 x 6144 x 4096, 8192 x 28672 x 4096), decode (16 x 4096 x 4096, 64 x 28672 x 4096) and
sizes no tile divides (8000 x 8000 x 8192, 2000 x 6144 x 4104).

Entries, per shape:
  cublas       torch.matmul(a, w.t()) (the reference of every ratio)
  tileproof    tileproof.recipes.matmul(a, w.t()): the configuration matmul_heuristic.choose picks
               (named in the JSON with its splits and estimate), its kernels compiled at the shape
               (balanced persistent grid; split-K's S and K / S as numbers), launched by Kernel.run
  tileproof_symbolic  the same choice through matmul(a, w.t(), specialize=False): the shape class's
               kernels (M, N, K symbolic), for the gap specializing closes
  <config>     tileproof.recipes.matmul(a, w.t(), config=<name>) (its best splits for split-K), each
               compiled at the shape: the choice and the FORCED_ALTERNATIVES configurations next by
               the estimate (--all-configs: every configuration of matmul_heuristic.CONFIGS; each
               costs a verify and a compile of about a second a shape), whether the choice was the
               best; the JSON's "configs_timed" says which
  triton       the persistent TMA matmul of Triton's tutorial 09 (benchmarks/hopper_matmul.py's
               kernel), the better of 128x256x64 (3 stages, 8 warps) and 128x128x64 (4 stages, 4
               warps), GROUP_M 8; skipped where Triton does not import or with --no-triton

Each output is checked once against a float32 product of the operands (every row of a shape with
M <= 1024, else 1024 spread rows: max |D - ref| <= 2^-7 max |ref|). Times: triton.testing.do_bench
(the L2 flushed before each call; the call's host time is inside it, as a caller pays it), the
median of >= 20 calls, after one call and 20 ms of products (the clocks up after a compile);
TFLOP/s = 2 M N K / time. Each tileproof entry is timed in 3 rounds, each followed by cuBLAS's call:
its time is the median of its rounds, vs_cublas the median of the rounds' ratios (Triton's: cuBLAS's
time / its own). The
summary: the geometric mean and the minimum of tileproof's vs_cublas over the shapes, and how often
the choice was within 5 % of the best configuration. Writes JSON (default
benchmarks/results/matmul_shapes/<machine>.json, h200.json on an H200; <machine>_<shapes>.json for
other --shapes) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from bench_common import attempt, results_path, warm_gpu, write_results  # benchmarks/bench_common.py

from tileproof.recipes.matmul_heuristic import CONFIGS, candidates, choose

SHAPES = [(8192, 8192, 8192), (4096, 4096, 4096), (2048, 2048, 2048),
          (128, 8192, 8192), (256, 8192, 8192), (512, 8192, 8192), (1024, 8192, 8192),
          (3840, 4096, 4096), (1024, 1024, 16384), (512, 512, 32768),
          (4096, 14336, 4096), (4096, 6144, 4096), (8192, 28672, 4096), (16, 4096, 4096), (64, 28672, 4096),
          (8000, 8000, 8192), (2000, 6144, 4104)]
TRITON_CONFIGS = [(128, 256, 64, 3, 8, 8), (128, 128, 64, 4, 4, 8)]  # BLOCK M, N, K, stages, warps, GROUP_M
CHECK_ROWS = 1024
NEAR_BEST = 0.95  # the choice counts as right within 5 % of the best configuration's speed
FORCED_ALTERNATIVES = 2  # configurations timed beside the choice, next by the estimate (--all-configs: all)


def shape_key(shape) -> str:
    return "x".join(str(d) for d in shape)


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    """'1024x1024x16384,16x4096x4096' -> [(1024, 1024, 16384), (16, 4096, 4096)]; '' or 'all' SHAPES.
    Raises ValueError on anything else (recipes.matmul needs N and K multiples of 8 here)."""
    if text.strip().lower() in ("", "all"):
        return list(SHAPES)
    shapes = []
    for part in filter(None, (p.strip().lower() for p in text.split(","))):
        dims = part.split("x")
        try:
            m, n, k = (int(d) for d in dims)
        except ValueError:
            raise ValueError(f"shape {part!r}: M x N x K of integers, as 1024x1024x16384") from None
        if min(m, n, k) <= 0 or n % 8 or k % 8:
            raise ValueError(f"shape {part!r}: M, N and K positive, N and K multiples of 8 (16-byte rows)")
        if (m, n, k) not in shapes:
            shapes.append((m, n, k))
    if not shapes:
        raise ValueError("no shape given")
    return shapes


def results_variant(shapes) -> str:
    """The results file's variant: "" for SHAPES, else the shapes' keys joined by "-"."""
    return "" if set(shapes) == set(SHAPES) else "-".join(shape_key(s) for s in shapes)


def tflops(shape, ms: float) -> float:
    m, n, k = shape
    return round(2 * m * n * k / (ms * 1e-3) / 1e12, 1)


def ranked_configs(shape, sms: int = 132) -> list:
    """(config, its best Choice) for each configuration that takes the shape, best estimate first."""
    ranked = []
    for config in CONFIGS:
        admitted = candidates(config, *shape, sms=sms)
        if admitted:
            ranked.append((config, min(admitted, key=lambda c: c.seconds)))
    return sorted(ranked, key=lambda pair: pair[1].seconds)


def forced_configs(shape, sms: int = 132, every: bool = False) -> list:
    """The configurations timed forced at `shape`: the choice and FORCED_ALTERNATIVES next by the
    estimate, or with `every` all that take it (best estimate first)."""
    ranked = [config for config, _ in ranked_configs(shape, sms)]
    return ranked if every else ranked[:1 + FORCED_ALTERNATIVES]


def plan(shapes, sms: int = 132) -> dict:
    """The choice at each shape and every configuration's estimate (no GPU)."""
    out = {}
    for shape in shapes:
        choice = choose(*shape, sms=sms)
        estimates = {}
        for config in CONFIGS:
            admitted = candidates(config, *shape, sms=sms)
            if admitted:
                best = min(admitted, key=lambda c: c.seconds)
                estimates[config.name] = {"splits": best.splits, "estimate_us": round(best.seconds * 1e6, 1)}
        out[shape_key(shape)] = {"config": choice.config.name, "splits": choice.splits,
                                 "estimate_us": round(choice.seconds * 1e6, 1), "estimates": estimates,
                                 "timed_forced": [c.name for c in forced_configs(shape, sms)]}
    return out


def _geomean(values) -> float | None:
    values = list(values)
    return round(math.exp(statistics.fmean(map(math.log, values))), 3) if values else None


def summary(results: dict) -> dict:
    """Over the shapes where tileproof and cuBLAS ran: the geometric mean and minimum of tileproof's
    vs_cublas, the shapes where the choice was within NEAR_BEST of the best configuration, the
    geometric mean of tileproof's speed over Triton's and of the symbolic kernels' vs_cublas."""
    ratios, right, worst, vs_triton, symbolic = [], [], None, [], []
    for key, shape in results["shapes"].items():
        chosen = shape.get("tileproof", {})
        if "vs_cublas" not in chosen:
            continue
        ratios.append(chosen["vs_cublas"])
        if "ms" in shape.get("triton", {}):
            vs_triton.append(shape["triton"]["ms"] / chosen["ms"])
        if "vs_cublas" in shape.get("tileproof_symbolic", {}):
            symbolic.append(shape["tileproof_symbolic"]["vs_cublas"])
        if worst is None or chosen["vs_cublas"] < worst[1]:
            worst = (key, chosen["vs_cublas"])
        forced = [e["ms"] for name, e in shape.get("configs", {}).items() if "ms" in e]
        if forced:
            right.append(min(forced) / chosen["ms"] >= NEAR_BEST)
    if not ratios:
        return {"shapes": 0}
    return {"shapes": len(ratios), "geomean_vs_cublas": _geomean(ratios), "min_vs_cublas": worst[1],
            "min_shape": worst[0], "choice_near_best": f"{sum(right)} of {len(right)}",
            "geomean_vs_triton": _geomean(vs_triton), "symbolic_geomean_vs_cublas": _geomean(symbolic)}


def table(results: dict) -> str:
    lines = ["| shape | cuBLAS TFLOP/s | tileproof TFLOP/s | vs cuBLAS | choice (splits) | best configuration "
             "(vs cuBLAS) | symbolic vs cuBLAS | Triton vs cuBLAS |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]

    def shown(e: dict, key: str):
        return e.get(key, (e.get("error") or e.get("skipped") or "")[:40])

    for key, shape in results["shapes"].items():
        cublas, chosen, triton, symbolic = (shape.get(w, {}) for w in ("cublas", "tileproof", "triton",
                                                                         "tileproof_symbolic"))
        forced = {name: e for name, e in shape.get("configs", {}).items() if "ms" in e}
        best = min(forced, key=lambda name: forced[name]["ms"]) if forced else None
        best_text = f"{best} ({forced[best].get('vs_cublas', '')})" if best else ""
        lines.append(f"| {key} | {shown(cublas, 'tflops')} | {shown(chosen, 'tflops')} | {chosen.get('vs_cublas', '')} "
                     f"| {chosen.get('config', '')} ({chosen.get('splits', '')}) | {best_text} "
                     f"| {shown(symbolic, 'vs_cublas')} | {shown(triton, 'vs_cublas')} |")
    s = results.get("summary", {})
    if s.get("shapes"):
        lines.append(f"\ngeomean vs cuBLAS {s['geomean_vs_cublas']}, min {s['min_vs_cublas']} ({s['min_shape']}), "
                     f"choice within 5 % of the best configuration at {s['choice_near_best']} shapes, "
                     f"geomean vs Triton {s['geomean_vs_triton']}, symbolic kernels' geomean vs cuBLAS "
                     f"{s['symbolic_geomean_vs_cublas']}")
    return "\n".join(lines)


ROUNDS = 3  # each tileproof timing in rounds, each followed by cuBLAS's: one timing alone varied by up to 6 %
WARM_S = 0.02  # the clocks brought up before each timing (bench_common.warm_gpu); longer warms heat the GPU into lower clocks


# -- on the GPU ---------------------------------------------------------------------------------
def timed(fn, shape, rep_ms: int, reference=None) -> dict:
    """fn's median ms; with `reference` (cuBLAS's call), timed in ROUNDS rounds each followed by the
    reference's, vs_cublas the median of the rounds' ratios and ms the median of fn's rounds."""
    import torch  # here: --plan runs without torch

    fn()  # compiled and launched once before the clocks are warmed: a compile leaves the GPU idle for seconds
    warm_gpu(torch, WARM_S)
    rounds = [(_median_ms(fn, rep_ms), _median_ms(reference, rep_ms) if reference else None)
              for _ in range(ROUNDS if reference else 1)]
    ms = statistics.median(t for t, _ in rounds)
    out = {"ms": round(ms, 4), "tflops": tflops(shape, ms)}
    if reference:
        out.update(vs_cublas=round(statistics.median(r / t for t, r in rounds), 3), rounds=len(rounds))
    return out


def _median_ms(fn, rep_ms: int) -> float:
    from triton.testing import do_bench

    times = do_bench(fn, warmup=25, rep=rep_ms, return_mode="all")
    if len(times) < 20:
        times = do_bench(fn, warmup=25, rep=int(rep_ms * 21 / max(len(times), 1)) + 1, return_mode="all")
    return statistics.median(times)


def checked(torch, d, a, w) -> dict:
    """max |d - a @ w.T| / max |a @ w.T| over the checked rows (float32 reference)."""
    m = a.shape[0]
    rows = torch.arange(m, device=a.device) if m <= CHECK_ROWS else torch.linspace(0, m - 1, CHECK_ROWS,
                                                                                    device=a.device).long()
    ref = a[rows].float() @ w.float().t()
    err = ((d[rows].float() - ref).abs().max() / ref.abs().max()).item()
    if not (err <= 2**-7):
        raise AssertionError(f"max |D - ref| / max |ref| = {err:.3g} over {len(rows)} rows (above 2^-7)")
    return {"ok": True, "rel_err": round(err, 6), "rows": len(rows)}


def triton_job(torch, a, w, shape, rep_ms: int, sms: int) -> dict:
    import hopper_matmul  # benchmarks/hopper_matmul.py: the tutorial's persistent TMA kernel

    t = hopper_matmul.triton_persistent()
    triton, kernel, api = t["triton"], t["kernel"], t["api"]
    if api != "tl.make_tensor_descriptor":
        return {"skipped": f"Triton {triton.__version__} has no tl.make_tensor_descriptor"}
    hopper_matmul.set_descriptor_allocator(torch, triton)
    m, n, k = shape
    out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
    best = None
    for bm, bn, bk, stages, warps, group in TRITON_CONFIGS:
        grid = (min(sms, triton.cdiv(m, bm) * triton.cdiv(n, bn)),)

        def call(grid=grid, bm=bm, bn=bn, bk=bk, stages=stages, warps=warps, group=group):
            kernel[grid](a, w, out, m, n, k, a.stride(0), w.stride(0), out.stride(0), BLOCK_M=bm, BLOCK_N=bn,
                         BLOCK_K=bk, GROUP_M=group, NUM_SMS=sms, num_stages=stages, num_warps=warps)
            return out

        entry = {"config": f"BLOCK {bm}x{bn}x{bk}, {stages} stages, {warps} warps, GROUP_M {group}",
                 "check": checked(torch, call(), a, w), **timed(call, shape, rep_ms)}
        if best is None or entry["ms"] < best["ms"]:
            best = entry
    return {**best, "triton": triton.__version__}


def shape_job(torch, shape, rep_ms: int, sms: int, with_triton: bool, every_config: bool = False) -> dict:
    from tileproof.recipes import matmul

    m, n, k = shape
    torch.manual_seed(0)
    a = torch.randn(m, k, device="cuda").bfloat16()
    w = torch.randn(n, k, device="cuda").bfloat16()
    res: dict = {"shape": list(shape)}

    def cublas():
        return torch.matmul(a, w.t())

    def entry(call, reference=cublas):
        def job():
            return {"check": checked(torch, call(), a, w), **timed(call, shape, rep_ms, reference)}
        return job

    attempt(res, "cublas", entry(cublas, None))
    choice = choose(m, n, k, sms=sms)
    attempt(res, "tileproof", entry(lambda: matmul(a, w.t())))
    res["tileproof"].update(config=choice.config.name, splits=choice.splits,
                            estimate_us=round(choice.seconds * 1e6, 1))
    attempt(res, "tileproof_symbolic", entry(lambda: matmul(a, w.t(), specialize=False)))
    res["configs"] = {}
    best_of = dict(ranked_configs(shape, sms))
    for config in forced_configs(shape, sms, every_config):
        best = best_of[config]
        attempt(res["configs"], config.name, entry(lambda config=config: matmul(a, w.t(), config=config)))
        res["configs"][config.name].update(splits=best.splits, estimate_us=round(best.seconds * 1e6, 1))
    if with_triton:
        try:
            import triton  # noqa: F401

            attempt(res, "triton", lambda: triton_job(torch, a, w, shape, rep_ms, sms))
        except ImportError as e:
            res["triton"] = {"skipped": f"triton does not import ({e})"}
    cublas_ms = res["cublas"].get("ms")
    for e in [res.get("tileproof"), res.get("tileproof_symbolic"), res.get("triton"), *res["configs"].values()]:
        if e and "ms" in e and cublas_ms and "vs_cublas" not in e:  # Triton's: against the shape's cuBLAS timing
            e["vs_cublas"] = round(cublas_ms / e["ms"], 3)
    return res


def environment(torch) -> dict:
    import cuda.bindings

    props = torch.cuda.get_device_properties(0)
    return {"device": torch.cuda.get_device_name(0), "sms": props.multi_processor_count, "torch": torch.__version__,
            "cuda_python": getattr(cuda.bindings, "__version__", None), "python": platform.python_version()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--out", type=Path, default=None,
                        help="the JSON file to write (default: benchmarks/results/matmul_shapes/<machine>.json)")
    parser.add_argument("--shapes", default="all", help="MxNxK,... (default: all of SHAPES)")
    parser.add_argument("--rep-ms", type=int, default=100, help="do_bench's repetition time (default: %(default)s)")
    parser.add_argument("--no-triton", action="store_true", help="leave Triton out")
    parser.add_argument("--plan", action="store_true", help="print the choices and estimates only (no GPU)")
    parser.add_argument("--all-configs", action="store_true",
                        help=f"time every configuration forced (default: the choice and {FORCED_ALTERNATIVES} more)")
    args = parser.parse_args(argv)
    try:
        shapes = parse_shapes(args.shapes)
    except ValueError as e:
        parser.error(str(e))
    if args.plan:
        print(json.dumps(plan(shapes), indent=1))
        return 0
    try:
        import torch
    except ImportError:
        print("matmul_shapes.py: needs PyTorch and a CUDA device (--plan needs neither)", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("matmul_shapes.py: no CUDA device", file=sys.stderr)
        return 2
    os.environ.pop("DISABLE_MMA_V3", None)  # Triton's wgmma path
    warm_gpu(torch)
    started = time.time()
    env = environment(torch)
    results = {"command": " ".join([Path(sys.argv[0]).name] + (argv if argv is not None else sys.argv[1:])),
               "issue": 34, "environment": env, "layout": "D = A @ w.T: A [M, K], w [N, K] row-major (both K-major)",
               "dtype": "bfloat16 operands and output, float32 accumulation",
               "configs_timed": ("every configuration that takes the shape" if args.all_configs else
                                 f"the choice and the {FORCED_ALTERNATIVES} configurations next by the estimate"),
               "kernels": "compiled at each shape (tileproof_symbolic: the shape class's, M, N, K symbolic)",
               "shapes": {}}
    for shape in shapes:
        results["shapes"][shape_key(shape)] = shape_job(torch, shape, args.rep_ms, env["sms"], not args.no_triton,
                                                        args.all_configs)
        print(f"{shape_key(shape)}: {time.time() - started:.0f} s", file=sys.stderr)
    results["summary"] = summary(results)
    results["seconds"] = round(time.time() - started, 1)
    write_results(results, args.out or results_path("matmul_shapes", env["device"], results_variant(shapes)),
                  table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
