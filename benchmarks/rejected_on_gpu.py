"""What each rejected example does when it is run anyway: evidence that the rules guard real failures.

    python3 benchmarks/rejected_on_gpu.py [--out FILE] [--size 1000] [--jobs 8] [PATH ...]   # needs a GPU and torch

Every rejected sm_90a example under PATH (default examples/invalid) is built with
tileproof.testing.compile_unverified and run on random inputs (symbolic extents at
--size), in a process of its own (a fault spoils the CUDA context), outputs poisoned with
NaN first, and compared with the float64 reference. An example that runs correctly at --size
runs again at the sizes of its report's counterexample (where one diagnostic's counterexample
gives every extent symbol): the sizes at which the rule predicts the failure. Outcomes:
  wrong output     the kernel ran and stored values other than the reference's
  wrote past an output  the kernel stored into the guard elements after an output
  refused at launch  run() refused the sizes or arrays (InputError: e.g. no size satisfies the
                   assumptions, a stride or alignment the proof did not admit)
  fault            the launch or the synchronize failed (misaligned address, illegal
                   instruction, a tensor map the driver refused, ...)
  refused          the code generator cannot build it (testing.NotBuilt: it cannot express it)
  compile failed   NVRTC / ptxas rejected the generated source (testing.NotBuilt)
  slow compile     NVRTC took over SLOW_COMPILE_S seconds, or was still compiling at --case-timeout
  hang             the kernel was launched and did not finish within --case-timeout seconds
  ran correctly    no visible failure at these sizes and inputs
Each result has compile_s (verify, lower and NVRTC) where the build finished, and `sizes` where
the kernel ran at sizes other than --size. Writes JSON (default
benchmarks/results/rejected_on_gpu/<machine>.json, h100.json on an H100) and prints one line per example.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench_common import cuda_device_name, results_path  # benchmarks/bench_common.py

ROOT = Path(__file__).resolve().parent.parent

SLOW_COMPILE_S = 10.0  # as benchmarks/fuzz.py: UNROLL-LENGTH's examples compile for minutes


def _phase(name: str) -> None:
    """Tell the parent what this process is doing, so that a timeout says where it stopped."""
    print(json.dumps({"phase": name}), flush=True)


def _counterexample_sizes(report, symbols) -> dict[str, int] | None:
    """Sizes for every extent symbol from the first diagnostic whose counterexample gives them all."""
    for d in report.errors:
        cex = d.counterexample or {}
        if symbols and all(isinstance(cex.get(s), int) and cex[s] > 0 for s in symbols):
            return {s: cex[s] for s in symbols}
    return None


def run_case(location: str, name: str, size: int) -> dict:
    """Build, run and judge one example (in this process)."""
    import tileproof as tp
    from tileproof.schedule_files import discover
    from tileproof.testing import NotBuilt, compile_unverified

    from gpu_check import run_and_judge

    case = next(c for c in discover([location]) if c.name == name)
    fusion = case.build()
    _phase("compile")
    start = time.perf_counter()
    try:
        kernel = compile_unverified(fusion, case.target)
    except NotBuilt as e:
        failed = isinstance(e.__cause__, tp.CompileError)
        return {"outcome": "compile failed" if failed else "refused", "detail": str(e)[:400]}
    compile_s = round(time.perf_counter() - start, 2)
    _phase("run")
    symbols = sorted(fusion.symbols)
    result = run_and_judge(kernel, {s: size for s in symbols})
    if result["outcome"] == "ran correctly":
        sizes = _counterexample_sizes(kernel.report, symbols)
        if sizes is not None and sizes != {s: size for s in symbols}:
            result = {**run_and_judge(kernel, sizes), "sizes": sizes, f"at_{size}": "ran correctly"}
    if compile_s > SLOW_COMPILE_S and result["outcome"] == "ran correctly":
        result = {**result, "outcome": "slow compile", "detail": f"NVRTC and lowering took {compile_s} s; "
                  f"then the kernel ran correctly"}
    return {**result, "compile_s": compile_s, "codes": kernel.report.codes}


def _timed_out(output, seconds: int) -> dict:
    """What a case killed after `seconds` was doing: its last phase line."""
    text = output.decode(errors="replace") if isinstance(output, bytes) else (output or "")
    phases = [json.loads(line)["phase"] for line in text.splitlines() if line.startswith('{"phase"')]
    if phases and phases[-1] == "run":
        return {"outcome": "hang", "detail": f"the kernel was launched and had not finished after {seconds} s; "
                                             f"the process was killed"}
    if phases:
        return {"outcome": "slow compile", "detail": f"still building (NVRTC) after {seconds} s; the process was killed"}
    return {"outcome": "hang", "detail": f"killed after {seconds} s before building (verify or import)"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", default=[str(ROOT / "examples" / "invalid")])
    ap.add_argument("--out", help="the JSON file to write (default: benchmarks/results/rejected_on_gpu/<machine>.json)")
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=8, help="cases run at once, each in its own process")
    ap.add_argument("--case-timeout", type=int, default=60, help="seconds before a case counts as a hang (or a slow compile)")
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
            if "outcome" not in result:  # the process died after a phase line (a crash in the driver)
                raise IndexError
        except subprocess.TimeoutExpired as e:  # NVRTC on a huge unrolled loop, or a kernel that never ends
            result = _timed_out(e.stdout, args.case_timeout)
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
    out = Path(args.out) if args.out else results_path("rejected_on_gpu", cuda_device_name())
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"size": args.size, "summary": summary, "cases": results}, indent=1))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
