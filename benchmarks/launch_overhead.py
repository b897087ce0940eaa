"""Host cost of a launch: microseconds of Python per call, tileproof against Triton and PyTorch, in
one process on one GPU (issue 34 item 1).

    python3 benchmarks/launch_overhead.py [--out FILE] [--calls N] [--shape MxN]   # a GPU and torch

Every entry launches the same tiny work (out = a + b, float32, 64 x 64 by default: the GPU takes
about 2 us, less than any host path) and is timed on the host alone: time.perf_counter around each
call, `--calls` calls (2000) in batches of 100 after 200 warm-up calls, the stream synchronized
between batches outside the timed calls (so that the launch queue never fills and blocks a call);
the median and the 10th / 90th percentiles in microseconds. No CUDA graphs anywhere.

  tileproof_run_out      kernel.run(a, b, out=[c]): the public call, output given
  tileproof_run          kernel.run(a, b): the public call, output allocated (torch.empty)
  tileproof_op           tp.as_torch_op(kernel)(a, b): the torch.library operator
  tileproof_prepared     the launch closure of Kernel._prepare (one cuLaunchKernel): the floor
  tileproof_first_call   kernel.run(a, b, out=[c]) with its launch caches emptied before each call:
                         the full binding and checks a new argument signature pays (500 calls)
  tileproof_new_address  the same with only the prepared launches emptied: arrays at new addresses of
                         a known signature, rebased from its template (codegen/runtime/rebase.py; 500 calls)
  tileproof_matmul       tileproof.recipes.matmul(a16, b16) at 128 x 256 x 64 bf16: the public GEMM path
  tileproof_sdpa         tileproof.recipes.sdpa(q, k, v, is_causal=True) at 1 x 2 x 128 x 64 bf16: the
                         public attention path (a new output each call)
  torch_sdpa             torch.nn.functional.scaled_dot_product_attention on the same tensors
  triton                 a @triton.jit add, launched as kernel[grid](a, b, c, n, BLOCK=1024) (skipped, with
                         the reason, where triton does not import)
  torch_add_out          torch.add(a, b, out=c)
  torch_add              a + b

The kernel is benchmarks/schedules.py's pointwise_add at the shape (256 threads a block, two 16-byte
vectors a thread: M x N a multiple of 2048). Each entry's output is checked against a + b before it is timed. Writes JSON (default
benchmarks/results/launch_overhead/<machine>.json: h200.json on an H200) and prints a table.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

from bench_common import attempt, results_path, write_results  # benchmarks/bench_common.py
import schedules as S  # benchmarks/schedules.py: the pointwise_add schedule

import tileproof as tp

BATCH = 100
WARMUP = 200
FIRST_CALLS = 500


def host_us(torch, call, calls: int, before=None) -> dict:
    """Median and 10th / 90th percentile host microseconds of call() (before() untimed first)."""
    for _ in range(WARMUP):
        if before:
            before()
        call()
    torch.cuda.synchronize()
    times = []
    while len(times) < calls:
        for _ in range(min(BATCH, calls - len(times))):
            if before:
                before()
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        torch.cuda.synchronize()
    times.sort()
    us = [t * 1e6 for t in times]
    return {"median_us": round(statistics.median(us), 2), "p10_us": round(us[len(us) // 10], 2),
            "p90_us": round(us[len(us) * 9 // 10], 2), "calls": calls}


def checked(torch, result, want) -> None:
    torch.cuda.synchronize()
    torch.testing.assert_close(result, want)


def triton_add():
    """(the @triton.jit add kernel, triton.cdiv, triton's version); ImportError without triton."""
    import triton
    import triton.language as tl

    @triton.jit
    def add_kernel(a, b, c, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(c + offsets, tl.load(a + offsets, mask=mask) + tl.load(b + offsets, mask=mask), mask=mask)

    return add_kernel, triton.cdiv, triton.__version__


def run(torch, shape: tuple[int, int], calls: int) -> dict:
    a, b = torch.randn(shape, device="cuda"), torch.randn(shape, device="cuda")
    c = torch.empty(shape, device="cuda")
    want = a + b
    kernel = tp.compile(S.pointwise_add(*shape))
    op = tp.as_torch_op(kernel, name="tileproof_bench::add")
    results: dict = {}

    def entry(key, call, check, **kw):
        def job():
            c.fill_(float("nan"))
            checked(torch, check(call()), want)
            return host_us(torch, call, kw.get("calls", calls), kw.get("before"))

        attempt(results, key, job)

    entry("tileproof_run_out", lambda: kernel.run(a, b, out=[c]), lambda r: r[0])
    entry("tileproof_run", lambda: kernel.run(a, b), lambda r: r[0])
    entry("tileproof_op", lambda: op(a, b), lambda r: r)
    _, _, launch = kernel._prepare((a, b), [c], None, {})
    entry("tileproof_prepared", launch, lambda r: c)
    def forget_all():
        kernel._launches.clear()
        kernel._templates.clear()

    entry("tileproof_first_call", lambda: kernel.run(a, b, out=[c]), lambda r: r[0], calls=FIRST_CALLS,
          before=forget_all)
    entry("tileproof_new_address", lambda: kernel.run(a, b, out=[c]), lambda r: r[0], calls=FIRST_CALLS,
          before=kernel._launches.clear)

    def matmul_job():
        from tileproof.recipes import matmul

        a16, b16 = torch.randn(128, 64, device="cuda").bfloat16(), torch.randn(64, 256, device="cuda").bfloat16()
        torch.testing.assert_close(matmul(a16, b16, out_dtype=torch.float32), a16.float() @ b16.float(),
                                   atol=1e-2, rtol=1e-3)
        return host_us(torch, lambda: matmul(a16, b16), calls)

    attempt(results, "tileproof_matmul", matmul_job)

    q, k, v = (torch.randn(1, 2, 128, 64, device="cuda").bfloat16() for _ in range(3))

    def sdpa_job(ours: bool):
        """recipes.sdpa or PyTorch's SDPA (its own choice of backend) on one small head, causal."""
        from tileproof.recipes import sdpa
        import torch.nn.functional as F

        call = (lambda: sdpa(q, k, v, is_causal=True)) if ours else (
            lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
        want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
        torch.testing.assert_close(call().float(), want, atol=2e-2, rtol=2e-2)
        return host_us(torch, call, calls)

    attempt(results, "tileproof_sdpa", lambda: sdpa_job(True))
    attempt(results, "torch_sdpa", lambda: sdpa_job(False))

    def triton_job():
        add_kernel, cdiv, version = triton_add()
        n = a.numel()
        grid = (cdiv(n, 1024),)

        def call():
            add_kernel[grid](a, b, c, n, BLOCK=1024)
            return c

        c.fill_(float("nan"))
        checked(torch, call(), want)
        return {**host_us(torch, call, calls), "triton": version}

    try:
        import triton  # noqa: F401

        attempt(results, "triton", triton_job)
    except ImportError as e:
        results["triton"] = {"skipped": f"triton does not import ({e})"}
    entry("torch_add_out", lambda: torch.add(a, b, out=c), lambda r: r)
    entry("torch_add", lambda: a + b, lambda r: r)
    return results


def environment(torch) -> dict:
    import cuda.bindings

    return {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
            "cuda_python": getattr(cuda.bindings, "__version__", None), "python": platform.python_version(),
            "cpu": platform.processor() or platform.machine()}


def table(results: dict) -> str:
    lines = ["| Entry | median us | p10 us | p90 us |", "| --- | --- | --- | --- |"]
    for key, r in results["entries"].items():
        if "median_us" in r:
            lines.append(f"| {key} | {r['median_us']} | {r['p10_us']} | {r['p90_us']} |")
        else:
            lines.append(f"| {key} | {r.get('skipped') or r.get('error', '')[:80]} | | |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--out", type=Path, default=None,
                        help="the JSON file to write (default: benchmarks/results/launch_overhead/<machine>.json)")
    parser.add_argument("--calls", type=int, default=2000, help="timed calls per entry (default: %(default)s)")
    parser.add_argument("--shape", default="64x64", help="M x N of the add (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        shape = tuple(int(v) for v in args.shape.lower().split("x"))
        assert len(shape) == 2 and min(shape) > 0 and args.calls > 0
    except (ValueError, AssertionError):
        parser.error("--shape expects MxN of positive ints and --calls a positive int")
    try:
        import torch
    except ImportError:
        print("launch_overhead.py: needs PyTorch and a CUDA device", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("launch_overhead.py: no CUDA device", file=sys.stderr)
        return 2
    started = time.time()
    results = {"command": " ".join([Path(sys.argv[0]).name] + (argv if argv is not None else sys.argv[1:])),
               "environment": environment(torch), "shape": list(shape), "dtype": "float32",
               "entries": run(torch, shape, args.calls)}
    results["seconds"] = round(time.time() - started, 1)
    out = args.out or results_path("launch_overhead", results["environment"]["device"])
    write_results(results, out, table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
