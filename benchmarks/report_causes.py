"""When a schedule has one mistake, how many blocks does its report open with? A bundled valid
example with one random change (fuzz.py's mutated family: a parallel type, an inlining, a split, a
reorder, a memory type or a propagation), verified; a rejection's errors that stand alone (no
`follows_from`: a root cause, or a finding no cause was verified for) are the blocks a reader
must read before the symptoms. One block is the goal (issue 35: one block per root cause); a
single change can also break rules that are independent of each other, so the rest is a list
to read, not a defect count.

    python3 benchmarks/report_causes.py [--seed S] [--cases N] [--out FILE]

Case i is fuzz.draw_case(S, i, ("mutated",)); cases whose drawn changes were not exactly one
applied change (a change the API refused with a ScheduleError is not applied) are skipped.
Writes JSON (default benchmarks/results/report_causes/cpu.json): the rejected single-change
cases, how many open with one block, the distribution of the number of blocks, and each case
with more than one (its change and its blocks' codes and tensors), and prints the summary.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

from bench_common import results_path, write_results  # benchmarks/bench_common.py

COMMAND = "python3 benchmarks/report_causes.py"
SEED, CASES = 120, 400


def single_change(steps: list[str]) -> bool:
    """Whether a mutated case's steps (its example, then the changes drawn) applied one change."""
    return len([s for s in steps[1:] if "ScheduleError" not in s]) == 1


def blocks(report) -> list:
    """The errors of a report that stand alone: its root causes and the findings with none."""
    return [d for d in report.errors if d.follows_from is None]


def survey(seed: int, cases: int) -> dict:
    import tileproof as tp  # imported where used, as the other scripts: --help runs without them
    from fuzz import draw_case  # benchmarks/fuzz.py

    rows, skipped, start = [], 0, time.perf_counter()
    for i in range(cases):
        _, target, case = draw_case(seed, i, ("mutated",))
        if not single_change(case.steps):
            skipped += 1
            continue
        report = tp.verify(case.fusion, target)
        if report.ok:
            continue
        heads = blocks(report)
        rows.append({"index": i, "steps": case.steps, "errors": len(report.errors),
                     "blocks": [f"{d.code} {d.tensor or ''}".strip() for d in heads]})
    counts = collections.Counter(len(r["blocks"]) for r in rows)
    one = counts.get(1, 0)
    return {"command": f"{COMMAND} --seed {seed} --cases {cases}", "seed": seed, "cases": cases,
            "skipped_not_one_change": skipped, "rejected_single_change": len(rows),
            "one_block": one, "one_block_fraction": round(one / len(rows), 3) if rows else None,
            "blocks_histogram": {str(k): counts[k] for k in sorted(counts)},
            "errors_per_report": round(sum(r["errors"] for r in rows) / len(rows), 2) if rows else None,
            "seconds": round(time.perf_counter() - start, 1),
            "several_blocks": [r for r in rows if len(r["blocks"]) > 1]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--cases", type=int, default=CASES)
    parser.add_argument("--out", help="the JSON file (default: results/report_causes/cpu.json)")
    args = parser.parse_args(argv)
    if args.cases < 1:
        raise SystemExit(f"--cases must be at least 1, got {args.cases}")
    data = survey(args.seed, args.cases)
    shown = (f"{data['rejected_single_change']} rejected single-change schedules: {data['one_block']} open with one "
             f"block ({data['one_block_fraction']}), blocks per report {data['blocks_histogram']}, "
             f"{data['errors_per_report']} errors per report")
    write_results(data, Path(args.out) if args.out else results_path("report_causes", None), shown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
