"""Verification time per bundled example (median of N runs in one process), and how
proof cost scales with tensor size: Complicated1 at 4096 x 4096 vs the same schedule
at 64 x 64, and the TMA transpose example bound to 10000 x 10000 vs 64 x 64.
Writes JSON (default benchmarks/results/verify_time/cpu.json)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import statistics
import time
from pathlib import Path

import tileproof as tp
from bench_common import results_path  # benchmarks/bench_common.py
from tileproof.schedule_files import discover

ROOT = Path(__file__).resolve().parent.parent


def median_seconds(build, target: str, runs: int, bind=None) -> tuple[float, bool]:
    fusion = build()
    times, ok = [], None
    for _ in range(runs):
        start = time.perf_counter()
        report = tp.verify(fusion, target, bind=bind)
        times.append(time.perf_counter() - start)
        ok = report.ok
    return statistics.median(times), bool(ok)


def load_example(file: str, name: str):
    spec = importlib.util.spec_from_file_location(Path(file).stem, ROOT / file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", default=str(results_path("verify_time", None)))
    args = parser.parse_args()

    examples = {}
    for case in discover([str(ROOT / "examples")]):
        seconds, ok = median_seconds(case.build, case.target, args.runs)
        examples[case.name] = {"median_s": round(seconds, 4), "accepted": ok}
    complicated1 = load_example("examples/valid/tmem_complicated.py", "complicated1_schedule")
    scaling = {}
    for n in (64, 4096, 65536):
        seconds, ok = median_seconds(lambda: complicated1(n, n), "sm_100a", args.runs)
        scaling[f"{n}x{n}"] = {"median_s": round(seconds, 4), "accepted": ok}
    transpose = load_example("examples/valid/tma_smem.py", "tma_transpose_bank_conflict_free")
    transpose_scaling = {}
    for n in (64, 10000):
        seconds, ok = median_seconds(transpose, "sm_90a", args.runs, bind={"M": n, "N": n})
        transpose_scaling[f"{n}x{n}"] = {"median_s": round(seconds, 4), "accepted": ok}
    medians = [e["median_s"] for e in examples.values()]
    result = {
        "machine": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "runs": args.runs,
        "examples": examples,
        "max_median_s": max(medians),
        "over_0_5_s": [k for k, e in examples.items() if e["median_s"] >= 0.5],
        "complicated1_scaling": scaling,
        "complicated1_4096_over_64": round(scaling["4096x4096"]["median_s"] / scaling["64x64"]["median_s"], 3),
        "tma_transpose_scaling": transpose_scaling,
        "tma_transpose_10000_over_64": round(transpose_scaling["10000x10000"]["median_s"]
                                             / transpose_scaling["64x64"]["median_s"], 3),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k != "examples"}, indent=2))


if __name__ == "__main__":
    main()
