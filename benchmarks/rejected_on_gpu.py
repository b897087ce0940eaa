"""What each rejected example does when it is run anyway: evidence that the rules guard real failures.

    python3 benchmarks/rejected_on_gpu.py [--out FILE] [--size 1000] [--jobs 8] [PATH ...]   # needs a GPU and torch

Every rejected sm_90a example under PATH (default examples/invalid) is built with
tileproof.testing.compile_unverified and run on random inputs (symbolic extents at
--size), in a process of its own (a fault spoils the CUDA context), outputs poisoned with
NaN first, and compared with the float64 reference. Outcomes:
  wrong output     the kernel ran and stored values other than the reference's
  wrote past an output  the kernel stored into the guard elements after an output
  refused at launch  run() refused the sizes or arrays (InputError: e.g. no size satisfies the
                   assumptions, a stride or alignment the proof did not admit)
  fault            the launch or the synchronize failed (misaligned address, illegal
                   instruction, a tensor map the driver refused, ...)
  refused          the code generator cannot express it (UnsupportedSchedule)
  compile failed   NVRTC / ptxas rejected the generated source
  hang             the kernel did not finish within --case-timeout seconds (an mbarrier never completes)
  ran correctly    no visible failure at this size and input
Writes JSON (default benchmarks/results/rejected_on_gpu.json) and prints one line per example.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))


def run_case(location: str, name: str, size: int) -> dict:
    """Build, run and judge one example (in this process)."""
    import tileproof as tp
    from tileproof.schedule_files import discover
    from tileproof.testing import compile_unverified

    from gpu_check import run_and_judge

    case = next(c for c in discover([location]) if c.name == name)
    fusion = case.build()
    try:
        kernel = compile_unverified(fusion, case.target)
    except tp.CompileError as e:  # an InternalError too: test it first
        return {"outcome": "compile failed", "detail": str(e)[:400]}
    except (tp.UnsupportedSchedule, tp.InternalError) as e:  # the lowering cannot express it
        return {"outcome": "refused", "detail": str(e)[:400]}
    return {**run_and_judge(kernel, {s: size for s in fusion.symbols}), "codes": kernel.report.codes}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", default=[str(ROOT / "examples" / "invalid")])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "rejected_on_gpu.json"))
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=8, help="cases run at once, each in its own process")
    ap.add_argument("--case-timeout", type=int, default=60, help="seconds before a case counts as a hang")
    ap.add_argument("--case", nargs=2, metavar=("LOCATION", "NAME"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case[0], args.case[1], args.size)))
        return 0
    from tileproof.schedule_files import discover

    cases = [c for c in discover(args.paths) if not c.expect.ok and c.target == "sm_90a"]

    def run(case) -> dict:
        location = case.location.rsplit(":", 1)[0]
        try:
            proc = subprocess.run([sys.executable, __file__, "--case", location, case.name, "--size", str(args.size)],
                                  capture_output=True, text=True, timeout=args.case_timeout)
            result = json.loads(proc.stdout.strip().splitlines()[-1])
        except subprocess.TimeoutExpired:  # e.g. an mbarrier wait that never completes
            result = {"outcome": "hang", "detail": f"killed after {args.case_timeout} s"}
        except (IndexError, json.JSONDecodeError):
            result = {"outcome": "fault", "detail": (proc.stderr or proc.stdout)[-400:]}
        result.update(name=case.name, file=Path(location).name, expected=list(case.expect.codes))
        print(f"{result['outcome']:17s} {case.name} ({', '.join(case.expect.codes)})", flush=True)
        return result

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:  # one process per case: a fault spoils its context
        results = list(pool.map(run, cases))
    summary: dict[str, int] = {}
    for r in results:
        summary[r["outcome"]] = summary.get(r["outcome"], 0) + 1
    Path(args.out).write_text(json.dumps({"size": args.size, "summary": summary, "cases": results}, indent=1))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
