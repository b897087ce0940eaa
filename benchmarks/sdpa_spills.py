"""Does a few bytes of register spills make an attention candidate slower than the next one? (the
threshold of recipes/sdpa.py SPILL_TOLERANCE)

    python3 benchmarks/sdpa_spills.py [--out FILE] [--rounds R]     # a GPU, torch, triton

At sequence tails ptxas spills some of recipes.sdpa's first candidates (the tail predicates). For
each shape below, the shape's first candidate (forced: `Attention(config=...)`, spills and all)
and the entry's own choice (`Attention()`: the first candidate with at most SPILL_TOLERANCE bytes
of spill stores) are timed through the user's call, in `--rounds` interleaved rounds
(bench_common.interleaved; triton's do_bench, L2 flushed, the median of each round, the median of
the rounds), with each kernel's spill stores from ptxas. Writes JSON (default
benchmarks/results/sdpa_spills/<machine>.json) and prints a table.
"""

from __future__ import annotations

import argparse
import statistics
import warnings
from pathlib import Path

from bench_common import cuda_device_name, interleaved, results_path, warm_gpu, write_results  # benchmarks/bench_common.py

# (B, Hq, Hkv, M, N, D, causal): tails past the tiles at each head dim, causal and not
SHAPES = [(4, 32, 32, 1089, 1089, 128, False), (4, 32, 32, 1000, 1000, 128, True),
          (4, 16, 16, 1000, 1000, 256, False), (4, 16, 16, 1000, 1000, 256, True),
          (8, 32, 32, 638, 638, 64, False)]


def shape_job(torch, shape, rounds: int) -> dict:
    from triton.testing import do_bench

    from tileproof.recipes import Attention
    from tileproof.recipes.sdpa import SPILL_TOLERANCE, candidates

    b, hq, hkv, m, n, d, causal = shape
    q = torch.randn(b, hq, m, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, hkv, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    first = candidates(m, n, d, d, causal)[0]
    entries, row = {}, {"first": first.name, "tolerance_bytes": SPILL_TOLERANCE}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the forced candidate's PerformanceWarning: its spills are recorded below
        for role, config in (("first", first), ("chosen", None)):
            entry = Attention(is_causal=causal, config=config)
            name, kernel = entry.kernel(entry.problem(q.shape, k.shape, v.shape))
            row[f"{role}_spill_store_bytes"] = kernel.resources.spill_store_bytes if kernel.resources else None
            row["chosen"] = name.name
            entries[role] = entry
    warm_gpu(torch, 0.05)
    times = interleaved({role: (lambda e=e: e(q, k, v)) for role, e in entries.items()}, rounds,
                        lambda fn: statistics.median(do_bench(fn, warmup=25, rep=60, return_mode="all")))
    for role, ts in times.items():
        row[f"{role}_ms"] = round(statistics.median(ts), 4)
    row["first_over_chosen"] = round(row["first_ms"] / row["chosen_ms"], 3)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="the JSON file (default: results/sdpa_spills/<machine>.json)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    import torch  # here: torch is optional, imported only where the script runs on the GPU

    results = {"command": "python3 benchmarks/sdpa_spills.py", "device": cuda_device_name(), "shapes": {}}
    lines = ["| shape | first candidate | its spill stores (B) | chosen | first / chosen time |", "| --- | --- | --- | --- | --- |"]
    for shape in SHAPES:
        key = "x".join(map(str, shape[:6])) + (" causal" if shape[6] else "")
        row = results["shapes"][key] = shape_job(torch, shape, args.rounds)
        lines.append(f"| {key} | {row['first']} | {row['first_spill_store_bytes']} | {row['chosen']} | "
                     f"{row['first_over_chosen']} |")
    path = Path(args.out) if args.out else results_path("sdpa_spills", results["device"])
    write_results(results, path, "\n".join(lines))


if __name__ == "__main__":
    main()
