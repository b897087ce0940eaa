"""Host cost of a GEMM call: microseconds of Python per call of tileproof.recipes.matmul against
torch.matmul and the bare Kernel.run launches the call makes, at small shapes whose GPU time is
about the host's (issue 34).

    python3 benchmarks/matmul_overhead.py [--out FILE] [--calls N] [--shapes MxNxK,...]   # a GPU and torch

A [M, K] row-major and B = w.t() of a weight w [N, K], bfloat16, output bfloat16 (the call users
make: matmul(a, w.t())). Per shape, each entry is timed on the host alone as
launch_overhead.host_us times it (time.perf_counter around each call, batches of 100 after 200
warm-up calls, the stream synchronized between batches), and back to back (`loop_us`: CUDA
events around 200 calls in a row, what triton.testing.do_bench sees of a call whose host time
exceeds its GPU time):

  tileproof_matmul     tileproof.recipes.matmul(a, w.t()): the public call
  tileproof_runs       the Kernel.run calls it makes (split-K: the partials, then their sum),
                       on views made once: the floor the call's checks and choice sit on
  torch_matmul         torch.matmul(a, w.t()) (cuBLAS)

The default shapes: 16 x 4096 x 4096 and 128 x 8192 x 8192 (split-K) and 256 x 4096 x 1024
(a persistent kernel); each entry's output is checked against torch's before it is timed. Writes
JSON (default benchmarks/results/matmul_overhead/<machine>.json) and prints a table.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bench_common import attempt, results_path, write_results  # benchmarks/bench_common.py
from launch_overhead import environment, host_us  # benchmarks/launch_overhead.py

SHAPES = ((16, 4096, 4096), (128, 8192, 8192), (256, 4096, 1024))
LOOP = 200  # back-to-back calls timed by CUDA events


def loop_us(torch, call) -> float:
    """Microseconds per call of `LOOP` calls in a row, from CUDA events (host and GPU overlapped)."""
    call()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(LOOP):
        call()
    stop.record()
    stop.synchronize()
    return round(start.elapsed_time(stop) * 1e3 / LOOP, 2)


def kernel_runs(torch, a, b):
    """The Kernel.run calls recipes.matmul(a, b) makes, as one function of no arguments (the views
    of A and B made once), and (its configuration's name, splits)."""
    from tileproof.recipes import Matmul
    from tileproof.recipes.split_k import split_k_operands

    entry = Matmul()
    (m, k), n = a.shape, b.shape[1]
    a_major, b_major = entry.majors(a, b)
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count
    choice = entry.choice(a_major, b_major, m, n, k, sms)
    kernels = entry.kernels(choice.config, a_major, b_major, sms, (m, n, k), choice.splits)
    if choice.config.split_k and not choice.config.grid_reduce:  # two kernels (one-kernel split-K runs as below)
        partials, total = kernels
        views = split_k_operands(a, b, choice.splits)

        def runs():
            (p,) = partials.run(*views)
            return total.run(p)[0]
    else:
        views = a.unsqueeze(1), b.t().unsqueeze(0)

        def runs():
            return kernels[0].run(*views)[0]
    return runs, {"config": choice.config.name, "splits": choice.splits}


def run_shape(torch, shape: tuple[int, int, int], calls: int) -> dict:
    from tileproof.recipes import matmul

    m, n, k = shape
    a = torch.randn(m, k, device="cuda").bfloat16()
    b = torch.randn(n, k, device="cuda").bfloat16().t()
    want = a.float() @ b.float()
    result: dict = {}
    runs, result["choice"] = kernel_runs(torch, a, b)
    entries: dict = {}
    for key, call in (("tileproof_matmul", lambda: matmul(a, b)), ("tileproof_runs", runs),
                      ("torch_matmul", lambda: torch.matmul(a, b))):
        def job(call=call):
            torch.testing.assert_close(call().float(), want, atol=0.5, rtol=2e-2)
            return {**host_us(torch, call, calls), "loop_us": loop_us(torch, call)}

        attempt(entries, key, job)
    result["entries"] = entries
    return result


def table(results: dict) -> str:
    lines = ["| Shape | Configuration | Entry | median us | p10 us | p90 us | loop us |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for shape, r in results["shapes"].items():
        choice = r.get("choice", {})
        chosen = f"{choice.get('config', '')} x{choice.get('splits', '')}" if choice else ""
        for key, e in r.get("entries", {}).items():
            if "median_us" in e:
                lines.append(f"| {shape} | {chosen} | {key} | {e['median_us']} | {e['p10_us']} | {e['p90_us']} | "
                             f"{e['loop_us']} |")
            else:
                lines.append(f"| {shape} | {chosen} | {key} | {e.get('error', '')[:80]} | | | |")
        if "error" in r:
            lines.append(f"| {shape} | | | {r['error'][:80]} | | | |")
    return "\n".join(lines)


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    """"MxNxK,MxNxK" -> [(M, N, K), ...]; ValueError for anything else."""
    shapes = []
    for part in text.split(","):
        shape = tuple(int(v) for v in part.lower().split("x"))
        if len(shape) != 3 or min(shape) <= 0:
            raise ValueError(part)
        shapes.append(shape)
    return shapes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--out", type=Path, default=None,
                        help="the JSON file to write (default: benchmarks/results/matmul_overhead/<machine>.json)")
    parser.add_argument("--calls", type=int, default=2000, help="timed calls per entry (default: %(default)s)")
    parser.add_argument("--shapes", default=",".join("x".join(map(str, s)) for s in SHAPES),
                        help="M x N x K of each GEMM, comma-separated (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        shapes = parse_shapes(args.shapes)
        assert args.calls > 0
    except (ValueError, AssertionError):
        parser.error("--shapes expects MxNxK[,MxNxK...] of positive ints and --calls a positive int")
    try:
        import torch
    except ImportError:
        print("matmul_overhead.py: needs PyTorch and a CUDA device", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("matmul_overhead.py: no CUDA device", file=sys.stderr)
        return 2
    started = time.time()
    results = {"command": " ".join([Path(sys.argv[0]).name] + (argv if argv is not None else sys.argv[1:])),
               "environment": environment(torch), "dtype": "bfloat16", "shapes": {}}
    for shape in shapes:
        attempt(results["shapes"], "x".join(map(str, shape)), lambda shape=shape: run_shape(torch, shape, args.calls))
    results["seconds"] = round(time.time() - started, 1)
    out = args.out or results_path("matmul_overhead", results["environment"]["device"])
    write_results(results, out, table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
