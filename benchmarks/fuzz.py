"""Fuzz "accepted => compiles": random schedules, verified, and every accepted one compiled.

    python benchmarks/fuzz.py --cases 2000 --seed 0 [--first I] [--jobs 2] [--timeout 300] [--out FILE] [--run]

Case i of seed S is drawn from one of the generators of tests/support/schedule_gen.py (the lowering
family most often: ops, memory types, splits by int / extent-symbol / unknown factors, merges,
reorders, every parallel type, two axes on one type, inlining before and after scheduling,
vectorize, unroll of large extents, cache ops; the bundled valid examples with 1-3 random
changes (TMA, ldmatrix, tensor memory near valid); and the split, swizzle, tensor-memory and
visibility families; and reductions of tests/support/reduction_gen.py: sum / max over some
axes with indivisible splits, block reductions over odd thread counts, rfactor, cached and
vectorized inputs; and tensor-core MmaOps of tests/support/mma_gen.py: mma.sync matmuls with
random macros, dtypes, warp and tile shapes, cp.async stages, ldmatrix or element copies,
register epilogues, concrete or symbolic sizes, nearly half of them mutated, and API misuse that
must raise tp.ScheduleError; and wgmma matmuls of tests/support/wgmma_gen.py: the Hopper GEMM
recipe (tileproof.recipes.hopper_gemm) with random tiles, stages, grouping, warp specialization,
clusters, persistent grids, epilogues and majors), reproducibly: hypothesis strategies drawn from random.Random("S:i").
Opt-in families (OPT_IN), drawn only when --families names them, so that the default mix and its
indices stay as they are: attention (tests/support/attention_gen.py: an attention recipe of
tileproof.recipes.attention with random tiles, parameters out of range that the recipe must
refuse, and schedule mutations a user could plausibly get wrong, each left to the verifier); circular
(tests/support/circular_gen.py: register and plain shared-memory circular buffers over a serial loop
holding an unrolled loop of their readers).
Each case is verified (sm_100a for tensor-memory cases, sm_90a otherwise); an accepted one is
compiled with tp.compile (NVRTC, into a fresh cache) in a worker process that is killed after
--timeout seconds (such a case has no verdict: it runs again alone at the end, and is listed under
timed_out if it still does not finish). Writes JSON (default benchmarks/results/fuzz/<machine>.json:
the GPU's model with --run, else cpu.json; <machine>_<families>.json with --families): cases, accepted,
rejected, internal errors (a rule or the lowering crashed, or reported a tileproof bug),
verified-but-failed-to-compile (with each case's steps and error), verify time max/median and the
cases over 1 s, proofs z3 left undecided (unknown, a timeout),
compile time max, the compiled kernels whose wgmma.mma_async ptxas serialized (its advice C7515:
slow, not wrong), and the rule codes seen. `--case I` rebuilds and prints one case.
With --run (a GPU and torch), every accepted sm_90a kernel is also launched at sizes its launch
checks admit (benchmarks/gpu_check.py), on random inputs, and compared with the float64
reference (a float32 MmaOp within the tf32 bound 2^-10 |A| |B|; an attention case on random Q, K,
V of PyTorch's [B, H, S, D] layout through attention_views and its case's Mask, against
softmax(Q K^T scale + Mask) V in float64 within bfloat16's tolerance; a causal tile against SDPA's
is_causal in float32 where M == N, the bottom-right aligned causal mask in float64 where M != N;
the lse output against logsumexp in float64): gpu_runs in the JSON counts correct runs, wrong outputs and faults.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import multiprocessing as mp
import os
import platform
import random
import re
import statistics
import sys
import tempfile
import time
import traceback
import warnings
from collections import Counter
from multiprocessing.connection import wait
from pathlib import Path

from bench_common import cuda_device_name, results_path  # benchmarks/bench_common.py

ROOT = Path(__file__).resolve().parent.parent


def _import_test_support() -> None:
    """tests/support as the package `support`, whose generators draw the cases: found by name
    where tests/ is on the path (pytest's pythonpath), else loaded from its folder (this script)."""
    if "support" in sys.modules or importlib.util.find_spec("support") is not None:
        return
    folder = ROOT / "tests" / "support"
    spec = importlib.util.spec_from_file_location("support", folder / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["support"] = module
    spec.loader.exec_module(module)


_import_test_support()

FAMILIES = [("lowering", 10), ("mutated", 6), ("split", 1), ("tmem", 1), ("visibility", 1), ("swizzle", 1),
            ("reduction", 2), ("mma", 1), ("wgmma", 1)]
OPT_IN = [("attention", 1), ("circular", 1)]  # drawn only when --families names them: the default mix keeps its draws
MAX_DRAWS = 200  # draws per case before giving up on a generator's assumptions
KEPT_FAILURES = 60
SLOW_COMPILE_S = 10
TIMED_OUT = "timed out"  # a worker past --timeout, killed before its verdict: run again alone at the end
SLOW_VERIFY_S = 1
BAD_RUNS = ("wrong output", "wrote past an output", "fault")  # an accepted kernel must never do these
UNDECIDED = "could not prove "  # verifier/findings.undecided: z3 answered unknown (a timeout)


def results_variant(families) -> str:
    """The results file's variant for a run of `families` (None: all of them): "" for all, else
    their names in FAMILIES' then OPT_IN's order joined by "-" (h200_mutated-mma-wgmma.json)."""
    if not families or set(families) == {f for f, _ in FAMILIES}:
        return ""
    return "-".join(f for f, _ in FAMILIES + OPT_IN if f in families)


def draw_case(seed: int, index: int, families=None):
    """Case `index` of `seed`: (family, target, Case), the same on every run (for the same
    `families`, a subset of FAMILIES' names)."""
    warnings.filterwarnings("ignore", message=".*outside a property-based test.*")
    from hypothesis.errors import UnsatisfiedAssumption
    from hypothesis.internal.conjecture.data import ConjectureData, StopTest

    from support import schedule_gen

    strategies = {"lowering": schedule_gen.lowering_cases, "split": schedule_gen.split_cases,
                  "tmem": schedule_gen.tmem_cases, "visibility": schedule_gen.visibility_cases,
                  "swizzle": schedule_gen.swizzle_cases, "mutated": schedule_gen.mutated_examples}
    rng = random.Random(f"{seed}:{index}")
    chosen = [(f, w) for f, w in FAMILIES if families is None or f in families] + \
        [(f, w) for f, w in OPT_IN if families is not None and f in families]
    family = rng.choices([f for f, _ in chosen], weights=[w for _, w in chosen])[0]
    if family == "reduction":  # plain random draws, not hypothesis (tests/support/reduction_gen.py)
        from support.reduction_gen import reduction_case

        return family, "sm_90a", reduction_case(rng.randrange(2 ** 31))
    if family == "wgmma":  # the Hopper GEMM recipe with random parameters (tests/support/wgmma_gen.py)
        from support.wgmma_gen import wgmma_case

        case = wgmma_case(rng.randrange(2 ** 31))
        return family, case.target, case
    if family == "attention":  # an attention recipe, mutated now and then (tests/support/attention_gen.py)
        from support.attention_gen import attention_case

        case = attention_case(rng.randrange(2 ** 31))
        return family, case.target, case
    if family == "circular":  # register and shared circular buffers (tests/support/circular_gen.py)
        from support.circular_gen import circular_case

        return family, "sm_90a", circular_case(rng.randrange(2 ** 31))
    if family == "mma":  # plain random draws too (tests/support/mma_gen.py)
        from support.mma_gen import mma_case

        case = mma_case(rng.randrange(2 ** 31))
        return family, case.target, case
    with _no_constant_draws():
        for attempt in range(MAX_DRAWS):
            data = ConjectureData(random=random.Random(f"{seed}:{index}:{attempt}"))
            try:
                case = data.draw(strategies[family]())
            except (UnsatisfiedAssumption, StopTest):
                continue
            return family, case.target or ("sm_100a" if family == "tmem" else "sm_90a"), case
    raise RuntimeError(f"case {index}: no {family} schedule in {MAX_DRAWS} draws")


@contextlib.contextmanager
def _no_constant_draws():
    """Hypothesis (6.1xx) draws some values from constants it collects out of the local modules
    the process has imported (HypothesisProvider._maybe_draw_constant, cached per draw type), so
    that one seed and index drew one case in report_causes.py's survey and another in `--case`:
    while a case is drawn, no value comes from those constants, and the case is a function of
    (seed, index) alone."""
    from hypothesis.internal.conjecture import providers

    provider = getattr(providers, "HypothesisProvider", None)
    if provider is None or not hasattr(provider, "_maybe_draw_constant"):  # a Hypothesis without them
        yield
        return
    saved = provider._maybe_draw_constant
    provider._maybe_draw_constant = lambda self, *args, **kwargs: None
    try:
        yield
    finally:
        provider._maybe_draw_constant = saved


def run_case(seed: int, index: int, families=None, on_gpu=False) -> dict:
    import tileproof as tp

    out: dict = {"index": index}
    try:
        family, target, case = draw_case(seed, index, families)
    except Exception as e:  # noqa: BLE001 - a generator failing is recorded, not fatal
        return {**out, "outcome": "generator error", "error": f"{type(e).__name__}: {e}"}
    out.update(family=family, target=target, steps=repr(case))
    if getattr(case, "api_bugs", None):  # API misuse that raised something other than tp.ScheduleError
        return {**out, "outcome": "internal error", "stage": "api", "error": case.api_bugs[0]}
    start, cpu = time.perf_counter(), time.process_time()
    try:
        report = tp.verify(case.fusion, target)
    except Exception as e:  # noqa: BLE001
        return {**out, "outcome": "internal error", "stage": "verify",
                "error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc(limit=4)[-1500:]}
    out["verify_s"] = time.perf_counter() - start
    out["verify_cpu_s"] = time.process_time() - cpu  # this process's CPU time: what other workers cannot inflate
    out["codes"] = report.codes
    out["undecided"] = [d.code for d in report.diagnostics if d.message.startswith(UNDECIDED)]
    bugs = [d for d in report.errors if "tileproof bug" in d.message]
    if bugs:
        return {**out, "outcome": "internal error", "stage": "verify", "error": bugs[0].message[:600]}
    if not report.ok:
        return {**out, "outcome": "rejected"}
    start = time.perf_counter()
    try:
        kernel = tp.compile(case.fusion, target)
    except Exception as e:  # noqa: BLE001 - the failure is the finding
        return {**out, "outcome": "failed to compile", "error": f"{type(e).__name__}: {str(e)[:600]}",
                "internal": isinstance(e, tp.InternalError)}
    out["compile_s"] = time.perf_counter() - start
    if kernel.resources is not None and kernel.resources.wgmma_serialized:  # ptxas's advice: a slow kernel
        out["wgmma_serialized"] = kernel.resources.wgmma_serialized
    if on_gpu and target == "sm_90a":
        out["run"] = _run_attention_on_gpu(kernel, case) if family == "attention" else _run_on_gpu(kernel)
    return {**out, "outcome": "compiled"}


def _run_on_gpu(kernel) -> dict:
    """The accepted kernel launched at admitted sizes on random inputs, judged against the reference."""
    from gpu_check import admitted_sizes, run_and_judge

    sizes = admitted_sizes(kernel)
    if sizes is None:
        return {"outcome": "no admitted size"}
    return {**run_and_judge(kernel, sizes), "sizes": sizes}


def _run_attention_on_gpu(kernel, case) -> dict:
    """An attention kernel on random Q, K, V of its tile's shape (and its case's Mask), judged against
    softmax(Q K^T scale + Mask) V."""
    from gpu_check import run_attention_and_judge

    return run_attention_and_judge(kernel, case.tile, case.mask)


def _worker(conn, seed: int, families, on_gpu: bool) -> None:
    if on_gpu:  # the references' host math must not take the CPUs the other workers' verifies time
        import torch

        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    while True:
        index = conn.recv()
        if index is None:
            return
        conn.send(run_case(seed, index, families, on_gpu))


class Pool:
    """Workers that each run one case at a time; a case past the timeout kills its worker."""

    def __init__(self, jobs: int, seed: int, timeout: float, families=None, on_gpu=False):
        self.ctx = mp.get_context("fork")  # the parent never touches CUDA: each worker has its own context
        self.seed, self.timeout, self.families, self.on_gpu = seed, timeout, families, on_gpu
        self.slots = [self._spawn() for _ in range(jobs)]

    def _spawn(self):
        parent, child = self.ctx.Pipe()
        proc = self.ctx.Process(target=_worker, args=(child, self.seed, self.families, self.on_gpu), daemon=True)
        proc.start()
        return {"proc": proc, "conn": parent, "index": None, "since": 0.0}

    def run(self, indices, on_result) -> None:
        todo = list(indices)[::-1]
        while todo or any(s["index"] is not None for s in self.slots):
            for s in self.slots:
                if s["index"] is None and todo:
                    s["index"], s["since"] = todo.pop(), time.monotonic()
                    s["conn"].send(s["index"])
            busy = [s for s in self.slots if s["index"] is not None]
            ready = wait([s["conn"] for s in busy], timeout=1.0)
            for s in busy:
                if s["conn"] in ready:
                    try:
                        result = s["conn"].recv()
                    except EOFError:  # the worker died (a crash in NVRTC or z3)
                        result = {"index": s["index"], "outcome": "failed to compile", "error": "worker died"}
                        self._replace(s)
                    s["index"] = None
                    on_result(result)
                elif time.monotonic() - s["since"] > self.timeout:
                    on_result({"index": s["index"], "outcome": TIMED_OUT,  # no verdict: neither accepted nor rejected
                               "error": f"no verdict and kernel within {self.timeout:.0f} s",
                               "steps": repr(draw_case(self.seed, s["index"], self.families)[2])})
                    self._replace(s)
                    s["index"] = None

    def _replace(self, slot) -> None:
        slot["proc"].kill()
        slot["proc"].join()
        slot.update(self._spawn(), index=slot["index"])

    def close(self) -> None:
        for s in self.slots:
            s["conn"].send(None)
            s["proc"].join(timeout=10)


def summarize(results: list[dict], args, seconds: float) -> dict:
    count = Counter(r["outcome"] for r in results)
    verify = [r["verify_s"] for r in results if "verify_s" in r]
    compile_s = [r["compile_s"] for r in results if "compile_s" in r]
    failed = [r for r in results if r["outcome"] == "failed to compile"]
    internal = [r for r in results if r["outcome"] == "internal error"]
    codes = Counter(c for r in results for c in r.get("codes", []))
    timed_out = [r for r in results if r["outcome"] == TIMED_OUT]
    kinds = Counter(re.sub(r"'[^']*'|\b\d+\b", "_", r.get("error", ""))[:140] for r in internal + failed + timed_out)
    verify_cpu = [r["verify_cpu_s"] for r in results if "verify_cpu_s" in r]
    slowest = max((r for r in results if "verify_s" in r), key=lambda r: r["verify_s"], default=None)
    slow_verifies = sorted((r for r in results if r.get("verify_s", 0) > SLOW_VERIFY_S), key=lambda r: -r["verify_s"])
    undecided = [r for r in results if r.get("undecided")]
    runs = [r for r in results if "run" in r]
    ran = Counter(r["run"]["outcome"] for r in runs)
    bad_runs = [r for r in runs if r["run"]["outcome"] in BAD_RUNS]
    slow_compiles = sorted((r for r in results if r.get("compile_s", 0) > SLOW_COMPILE_S),
                           key=lambda r: -r["compile_s"])
    serialized = [r for r in results if r.get("wgmma_serialized")]
    return {
        "command": "python benchmarks/fuzz.py " + " ".join(sys.argv[1:]),  # as run: --run, --out included
        "machine": f"{platform.machine()} {platform.python_version()}, {os.cpu_count()} CPUs, "
                   f"{args.jobs} workers of {_threads_per_worker(args.jobs)} host-math threads each",
        "cases": len(results),
        "families": dict(Counter(r.get("family", "?") for r in results)),
        "accepted": count["compiled"] + count["failed to compile"],
        "rejected": count["rejected"],
        "internal_errors": len(internal) + sum(1 for r in failed if r.get("internal")),
        "verified_but_failed_to_compile": len(failed),
        "generator_errors": count["generator error"],
        "timed_out": [{"index": r["index"], "steps": r.get("steps", ""), "rerun_alone": r.get("rerun_alone", False)}
                      for r in timed_out],
        "compiled": count["compiled"],
        "verify_s": {"max": round(max(verify, default=0), 3), "median": round(statistics.median(verify), 4) if verify
                     else 0, "slowest_case": slowest and slowest["index"],
                     f"over_{SLOW_VERIFY_S}_s": len(slow_verifies),
                     "cpu_max": round(max(verify_cpu, default=0), 3),
                     "slowest": [{"index": r["index"], "verify_s": round(r["verify_s"], 2),
                                  "cpu_s": round(r.get("verify_cpu_s", 0), 2), "steps": r["steps"]}
                                 for r in slow_verifies[:20]]},
        "solver_undecided": {"cases": len(undecided),
                             "examples": [{"index": r["index"], "codes": r["undecided"], "steps": r["steps"]}
                                          for r in undecided[:20]]},
        "compile_s": {"max": round(max(compile_s, default=0), 3),
                      "median": round(statistics.median(compile_s), 4) if compile_s else 0,
                      f"over_{SLOW_COMPILE_S}_s": [{"index": r["index"], "compile_s": round(r["compile_s"], 1),
                                                    "steps": r["steps"]} for r in slow_compiles[:20]]},
        "wgmma_serialized": {"cases": len(serialized),
                             "examples": [{"index": r["index"], "why": r["wgmma_serialized"], "steps": r["steps"]}
                                          for r in serialized[:20]]},
        **({"gpu_runs": {"launched": len(runs), "outcomes": dict(ran), "accepted_sm_90a_not_launched":
                         ran["no admitted size"] + ran["refused at launch"],
                         "failures": [{"index": r["index"], **r["run"], "steps": r["steps"]} for r in bad_runs[:40]]}}
           if runs else {}),
        "rejections_by_code": dict(codes.most_common()),
        "errors_by_kind": dict(kinds.most_common()),
        "wall_s": round(seconds, 1),
        "failures": failed[:KEPT_FAILURES],
        "internal": internal[:KEPT_FAILURES],
    }


def _rerun_alone(results: list[dict], args, families) -> None:
    """A kernel refused for lack of device memory while other workers held theirs (each CUDA
    context keeps the local memory of the largest frame it launched), a worker that died
    (host memory: each holds its arrays and reference), or a case past --timeout while the
    others loaded the CPUs runs again alone: its outcome then is its own."""
    alone = {r["index"] for r in results if "OUT_OF_MEMORY" in r.get("run", {}).get("detail", "")
             or r.get("error") == "worker died" or r["outcome"] == TIMED_OUT}
    if not alone:
        return
    again: dict[int, dict] = {}
    pool = Pool(1, args.seed, args.timeout, families, args.run)
    try:
        pool.run(sorted(alone), lambda r: again.__setitem__(r["index"], {**r, "rerun_alone": True}))
    finally:
        pool.close()
    results[:] = [again.get(r["index"], r) for r in results]
    print(f"{len(alone)} cases out of memory or time among {args.jobs} workers, run again alone", flush=True)


def _threads_per_worker(jobs: int) -> int:
    """The CPUs each worker's numpy and torch may use: together the workers fill the machine once."""
    return max(1, (os.cpu_count() or 1) // jobs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--first", type=int, default=0, help="index of the first case")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per case (verify + compile)")
    parser.add_argument("--out", help="the JSON file to write (default: benchmarks/results/fuzz/<machine>.json, "
                        "<machine>_<families>.json with --families; <machine> is cpu without --run)")
    parser.add_argument("--case", type=int, help="print case I of the seed and its outcome, and exit")
    parser.add_argument("--run", action="store_true",
                        help="launch every accepted sm_90a kernel on the GPU and compare with the reference (needs torch)")
    parser.add_argument("--families", help=f"comma-separated subset of {', '.join(f for f, _ in FAMILIES)} "
                        f"(default: all of them), or opt-in ones: {', '.join(f for f, _ in OPT_IN)}")
    args = parser.parse_args()
    families = None if not args.families else tuple(args.families.split(","))
    unknown = set(families or ()) - {f for f, _ in FAMILIES + OPT_IN}
    if unknown:
        parser.error(f"unknown families: {', '.join(sorted(unknown))}")
    os.environ.setdefault("TILEPROOF_CACHE_DIR", tempfile.mkdtemp(prefix="tileproof-fuzz-"))
    if args.case is not None:
        print(json.dumps(run_case(args.seed, args.case, families, args.run), indent=1))
        return
    results: list[dict] = []
    start = time.perf_counter()

    def on_result(r: dict) -> None:
        results.append(r)
        if r["outcome"] in ("failed to compile", "internal error", "generator error", TIMED_OUT) or \
                r.get("run", {}).get("outcome") in BAD_RUNS:
            print(f"case {r['index']}: {r['outcome']}: {r.get('error', r.get('run'))}"[:400] + f"\n  {r.get('steps', '')}",
                  flush=True)
        if len(results) % 100 == 0:
            c = Counter(x["outcome"] for x in results)
            print(f"{len(results)}/{args.cases} {dict(c)} ({time.perf_counter() - start:.0f} s)", flush=True)

    for threads in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # before numpy loads
        os.environ[threads] = str(_threads_per_worker(args.jobs))
    pool = Pool(args.jobs, args.seed, args.timeout, families, args.run)
    try:
        pool.run(range(args.first, args.first + args.cases), on_result)
    finally:
        pool.close()
    _rerun_alone(results, args, families)
    results.sort(key=lambda r: r["index"])
    summary = summarize(results, args, time.perf_counter() - start)
    if args.out is None:
        args.out = str(results_path("fuzz", cuda_device_name() if args.run else None, results_variant(families)))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k not in ("failures", "internal")}, indent=1))


if __name__ == "__main__":
    main()
