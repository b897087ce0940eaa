"""How many blocks a head a causal per-head grid should have (issue 36): recipes.sdpa's causal
configurations run with `per_head` forced to each of several counts, against cuDNN, in one process
on one GPU, and the count recipes.sdpa's model picks (recipes/sdpa.py per_head_blocks).

    python3 benchmarks/attention_per_head.py [--out FILE] [--rep-ms MS] [--rounds N]

bfloat16 q, k, v [B, H, S, D], is_causal=True; TFLOP/s count half the products (as
benchmarks/attention.py). Each forced count's output is checked against cuDNN's (max |O - ref| /
max |ref| <= 2e-2) before the timing; every entry of a shape is timed in `--rounds` rounds
(bench_common.interleaved), each a do_bench median, and the median of the rounds is reported.
Writes JSON (default benchmarks/results/attention_per_head/<machine>.json) and prints a table.
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import statistics
import sys
from pathlib import Path

from attention import median_ms, tflops  # benchmarks/attention.py
from bench_common import attempt, interleaved, results_path, write_results  # benchmarks/bench_common.py

# (B, H, S, D), the configuration, the blocks a head to force (one a row tile last)
PLAN = [((1, 16, 16384, 64), "kt128_wg3_ws2_r160_ip_ph11_q2", [4, 8, 11, 16, 43, 86]),
        ((8, 32, 4096, 64), "kt128_wg3_ws2_r160_ip_ph11_q2", [8, 11, 22]),
        ((2, 16, 16384, 128), "kt128_wg2_ws2_r240_ip_ov_ph16_q2_tma", [4, 8, 16, 32, 128]),
        ((4, 32, 4096, 128), "kt128_wg2_ws2_r240_ip_ov_ph16_q2_tma", [8, 16, 32])]


def shape_job(torch, shape, config_name, counts, rep_ms, rounds) -> dict:
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from tileproof.recipes.sdpa import CONFIGS, Attention, per_head_blocks

    b, h, s, d = shape
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))

    def cudnn():
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    want = cudnn().float()
    calls = {"cudnn": cudnn}
    out: dict = {}
    base = CONFIGS[config_name]
    entry = Attention(is_causal=True)
    problem = entry.problem(q.shape, k.shape, v.shape)
    picked = per_head_blocks(problem.tile(base, True, None), base.warpgroups, base.per_head,
                             torch.cuda.get_device_properties(0).multi_processor_count)
    out["picked"] = picked

    def forced(count):
        def job():
            config = dataclasses.replace(base, name=f"{config_name}@{count}", per_head=count, per_head_exact=True)
            forced_entry = Attention(is_causal=True, config=config)
            got = forced_entry(q, k, v).float()
            err = ((got - want).abs().max() / want.abs().max()).item()
            if not err <= 2e-2:
                raise AssertionError(f"max |O - ref| / max |ref| = {err:.3g} (above 2e-2)")
            calls[f"per_head_{count}"] = lambda: forced_entry(q, k, v)
            return {"rel_err": round(err, 5)}
        return job

    for count in counts:
        attempt(out, f"per_head_{count}", forced(count))
    times = interleaved(calls, rounds, lambda fn: median_ms(fn, rep_ms))
    for name, ms in times.items():
        out.setdefault(name, {}).update(tflops=tflops((b, h, h, s, d, True), statistics.median(ms)),
                                        rounds_ms=[round(t, 4) for t in ms])
    for name in times:
        if name != "cudnn":
            out[name]["vs_cudnn"] = round(out[name]["tflops"] / out["cudnn"]["tflops"], 3)
    return out


def table(results: dict) -> str:
    lines = ["| B x H x S x D causal | configuration | cuDNN | per head: TFLOP/s (vs cuDNN) | picked |",
             "| --- | --- | --- | --- | --- |"]
    for key, r in results["shapes"].items():
        counts = ", ".join(f"{n.removeprefix('per_head_')}: {e.get('tflops')} ({e.get('vs_cudnn')})"
                           for n, e in r.items() if n.startswith("per_head_"))
        lines.append(f"| {key} | {r.get('config')} | {r.get('cudnn', {}).get('tflops')} | {counts} | {r.get('picked')} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="JSON path (default: benchmarks/results/attention_per_head/<machine>.json)")
    ap.add_argument("--rep-ms", type=int, default=100, help="do_bench's milliseconds per entry and round")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("attention_per_head.py needs a CUDA GPU", file=sys.stderr)
        return 2
    device = torch.cuda.get_device_name(0)
    results = {"command": " ".join(["python3", "benchmarks/attention_per_head.py"] + (argv or sys.argv[1:])),
               "issue": 36, "environment": {"device": device, "torch": torch.__version__,
                                             "python": platform.python_version()}, "shapes": {}}
    for shape, config, counts in PLAN:
        key = "x".join(map(str, shape))
        attempt(results["shapes"], key, lambda: shape_job(torch, shape, config, counts, args.rep_ms, args.rounds))
        results["shapes"][key]["config"] = config
        print(key, results["shapes"][key], flush=True)
    write_results(results, results_path("attention_per_head", device) if args.out is None else Path(args.out),
                  table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
