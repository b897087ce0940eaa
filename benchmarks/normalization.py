"""Softmax, LayerNorm and RMSNorm in bfloat16 at LLM row lengths (issue 35 item 3): tileproof's
recipes (recipes/normalization.py) against PyTorch eager, torch.compile (inductor) and a copy, in
one process on one GPU.

    python3 benchmarks/normalization.py [--out FILE] [--shapes MxN,...] [--reps N] [--no-compile]

Entries, per op and shape [M, N] (bfloat16 in and out, weights [N] bfloat16, eps 1e-5 / 1e-6):
  copy            x.clone(): the bandwidth reference (reads and writes the row once, as the ops do)
  eager           torch.softmax(x, -1), F.layer_norm, F.rms_norm
  compiled        the same function through torch.compile (inductor, a static shape; its first
                  call, the compile, is not timed)
  tileproof       tileproof.recipes.softmax / layer_norm / rms_norm: the row class row_class picks
  tileproof_b<k>  the recipe's kernel in the class of k vectors per thread, for each other class
                  admitting N with at most 1024 threads (which class is best, for row_class)
  tileproof_s<k>x<t>  the staged class (the row copied into shared memory) of k vectors a thread
                  a step over t threads, for each other of STAGED_SHAPES, at N >= STAGED_FROM
  tileproof_l<k>x<t>  the looped class (each use of the row reads it from global memory: L2 after
                  the first) of k vectors a thread a step over t threads, the same shapes
  tileproof_no_bias, tileproof_no_weight_no_bias (layer_norm), tileproof_no_weight (rms_norm): the
                  recipe's class without those [N] inputs (F.layer_norm's and F.rms_norm's None):
                  what reading the weights costs

Each output is checked once against PyTorch's in float32 (max |y - ref| <= 2^-6 max(1, |ref|)).
Times: CUDA graphs of CALLS calls each (so that the host's launch time is not measured; the
kernels back to back, as in a model's step), replayed in `--reps` rounds, each round every entry of
the op and shape once (starting one further along each round: no entry always first), the median
per call. GB/s = bytes read and written (2 M N x 2 bytes, plus the weights) / time; vs_copy and
vs_compiled = the median over the rounds of copy's (torch.compile's) time / this one's in the
same round. The summary: per op, the minimum over the shapes
of tileproof's vs_copy and vs_compiled (the targets: >= 0.9 and >= 1.0). Writes JSON (default
benchmarks/results/normalization/<machine>.json; <machine>_<shapes>.json for other --shapes) and
prints a table. About 3 minutes on an H200, most of it torch.compile's compiles.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
from pathlib import Path

from bench_common import attempt, interleaved, results_path, round_ratio, warm_gpu, write_results  # benchmarks/bench_common.py

SHAPES = [(32768, 1024), (16384, 4096), (8192, 8192), (4096, 16384), (2048, 32768)]
OPS = ("softmax", "layer_norm", "rms_norm")
EPS = {"layer_norm": 1e-5, "rms_norm": 1e-6}
CALLS = 20  # calls per CUDA graph
REPS = 15
COMMAND = "python3 benchmarks/normalization.py"
# the recipes' kernels without some [N] inputs: entry name -> (weight, bias) given
AFFINE = {"layer_norm": {"no_bias": (True, False), "no_weight_no_bias": (False, False)},
          "rms_norm": {"no_weight": (False, False)}}


def parse_shapes(text: str) -> list[tuple[int, int]]:
    """"32768x1024,2048x32768" -> [(32768, 1024), (2048, 32768)]."""
    out = []
    for item in text.split(","):
        parts = item.strip().lower().split("x")
        if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise SystemExit(f"--shapes: expected MxN with positive ints, got {item!r}")
        out.append((int(parts[0]), int(parts[1])))
    return out


def results_variant(shapes: list[tuple[int, int]]) -> str:
    """"" for the default shapes, else the shapes joined ("1024x4096-2048x8192")."""
    return "" if shapes == SHAPES else "-".join(f"{m}x{n}" for m, n in shapes)


def bytes_moved(op: str, m: int, n: int, element: int = 2) -> int:
    """Bytes an op reads and writes once each: the rows in and out, and its weights."""
    weights = {"softmax": 0, "copy": 0, "layer_norm": 2, "rms_norm": 1}[op]
    return (2 * m * n + weights * n) * element


def other_classes(n: int, chosen, vector: int = 8) -> list:
    """The classes holding the row in registers, besides the chosen one, that admit a row of n with
    at most 1024 threads, each with the fewest max_threads (a power of two) that admits n."""
    from tileproof.recipes.normalization import BATCHES, MAX_THREADS, RowClass
    out = []
    for b in BATCHES:
        threads = -(-n // (vector * b))
        if (chosen.looped or b != chosen.batch) and threads <= MAX_THREADS:
            out.append(RowClass("bfloat16", vector, b, max(32, 1 << (threads - 1).bit_length()),
                                whole=n % (vector * b) == 0))
    return out


STAGED_SHAPES = [(1, 1024), (2, 512), (4, 256), (8, 128), (1, 512), (2, 256), (4, 128)]
STAGED_FROM = 8192  # rows this long and longer time the staged classes too


def looped_classes(n: int, chosen, vector: int = 8) -> list:
    """The staged classes (where the row fits shared memory) and the looped ones of STAGED_SHAPES,
    besides the chosen one, where n >= STAGED_FROM."""
    from tileproof.recipes.normalization import STAGED_BYTES, RowClass
    if n < STAGED_FROM:
        return []
    return [RowClass("bfloat16", vector, b, t, looped=True, staged=staged, whole=n % (vector * b * t) == 0)
            for staged in ((True, False) if n * 2 <= STAGED_BYTES else (False,)) for b, t in STAGED_SHAPES
            if not (chosen.looped and (staged, b, t) == (chosen.staged, chosen.batch, chosen.max_threads))]


def summarize(results: dict) -> dict:
    """Per op: the minimum over the shapes of tileproof's vs_copy and vs_compiled (None where a
    shape has no such entry)."""
    out = {}
    for op in OPS:
        rows = [r.get(op, {}).get("tileproof", {}) for r in results.values()]
        out[op] = {key: (min(r[key] for r in rows) if rows and all(key in r for r in rows) else None)
                   for key in ("vs_copy", "vs_compiled")}
    return out


def _runner(torch, fn):
    """A callable running CALLS calls of fn(): a CUDA graph's replay (plain calls if capture fails)."""
    fn()
    torch.cuda.synchronize()
    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fn()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(CALLS):
                fn()
        runner = graph.replay
    except Exception:  # noqa: BLE001 - a function that cannot be captured is timed by plain calls
        def runner():
            for _ in range(CALLS):
                fn()
    runner()
    torch.cuda.synchronize()
    return runner


def _seconds_per_call(torch, runner) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    runner()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / CALLS


def _reference(torch, op, x, w, b):
    """PyTorch's op (w or b None: without it)."""
    F = torch.nn.functional
    if op == "softmax":
        return torch.softmax(x, -1)
    if op == "layer_norm":
        return F.layer_norm(x, (x.shape[-1],), w, b, EPS[op])
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, (x.shape[-1],), w, EPS[op])
    y = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + EPS[op])
    return (y * w.float() if w is not None else y).to(x.dtype)


def _tileproof(op, x, w, b, rows=None):
    from tileproof.recipes import normalization as N
    if rows is None:
        return {"softmax": lambda: N.softmax(x), "layer_norm": lambda: N.layer_norm(x, w, b, EPS["layer_norm"]),
                "rms_norm": lambda: N.rms_norm(x, w, EPS["rms_norm"])}[op]
    entry = {"softmax": N.Softmax, "layer_norm": N.LayerNorm, "rms_norm": N.RMSNorm}[op]()
    kernel = entry.kernel(rows)
    args = {"softmax": (x,), "layer_norm": (x, w, b), "rms_norm": (x, w)}[op]
    return lambda: kernel.run(*args)[0]


def measure(torch, op, m, n, reps, compile_torch) -> dict:
    # imported where measured, as the file's other tileproof imports: --help and the summary run without it
    from tileproof.recipes.normalization import LayerNorm, RMSNorm, Softmax
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16) * 2
    w = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    ref = _reference(torch, op, x.float(), w.float(), b.float())
    nbytes = bytes_moved(op, m, n)
    out: dict = {}

    runners: dict = {}

    def entry(name, fn, check=True, ref=ref, **extra):
        """Check fn once, then keep its runner for the interleaved timing."""
        if check:
            y = fn().float()
            err = (y - ref).abs().max().item()
            bound = 2 ** -6 * max(1.0, ref.abs().max().item())
            if not err <= bound:
                raise AssertionError(f"max |y - ref| = {err:.3g} > {bound:.3g}")
        runners[name] = _runner(torch, fn)
        return extra

    attempt(out, "copy", lambda: entry("copy", lambda: x.clone(), check=False))
    attempt(out, "eager", lambda: entry("eager", lambda: _reference(torch, op, x, w, b)))
    if compile_torch:
        torch._dynamo.reset()  # each (op, shape) its own compile: past dynamo's recompile limit it runs eager
        compiled = torch.compile(lambda x, w, b: _reference(torch, op, x, w, b), dynamic=False)
        attempt(out, "compiled", lambda: entry("compiled", lambda: compiled(x, w, b)))
    chosen = {"softmax": Softmax, "layer_norm": LayerNorm, "rms_norm": RMSNorm}[op]().row_class(n)
    attempt(out, "tileproof", lambda: entry("tileproof", _tileproof(op, x, w, b), batch=chosen.batch,
                                            **{"class": chosen.tag}))
    for name, (w_, b_) in AFFINE.get(op, {}).items():  # the same class without some of the weights
        attempt(out, f"tileproof_{name}", lambda name=name, w_=w_, b_=b_: entry(
            f"tileproof_{name}", _tileproof(op, x, w if w_ else None, b if b_ else None),
            ref=_reference(torch, op, x.float(), w.float() if w_ else None, b.float() if b_ else None)))
    for rows in other_classes(n, chosen, chosen.vector):
        attempt(out, f"tileproof_b{rows.batch}", lambda rows=rows: entry(f"tileproof_b{rows.batch}",
                                                                          _tileproof(op, x, w, b, rows)))
    for rows in looped_classes(n, chosen, chosen.vector):
        key = f"tileproof_{'s' if rows.staged else 'l'}{rows.batch}x{rows.max_threads}"
        attempt(out, key, lambda rows=rows, key=key: entry(key, _tileproof(op, x, w, b, rows)))
    times = interleaved(runners, reps, lambda runner: _seconds_per_call(torch, runner))
    for key, seconds in times.items():
        median = statistics.median(seconds)
        out[key].update({"us": round(median * 1e6, 2), "gbs": round(nbytes / median / 1e9, 1)})
        # ratios per round (the entries timed side by side), then their median
        for ratio, base in (("vs_copy", "copy"), ("vs_compiled", "compiled")):
            if base in times:
                out[key][ratio] = round(round_ratio(times[base], seconds), 3)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", help="MxN,... (default: the five LLM shapes)")
    parser.add_argument("--reps", type=int, default=REPS)
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    parser.add_argument("--out", help="the JSON file (default: results/normalization/<machine>.json)")
    args = parser.parse_args(argv)
    shapes = parse_shapes(args.shapes) if args.shapes else SHAPES
    import torch
    device = torch.cuda.get_device_name(0)
    warm_gpu(torch)
    results: dict = {}
    for m, n in shapes:
        key = f"{m}x{n}"
        results[key] = {}
        for op in OPS:
            attempt(results[key], op, lambda op=op: measure(torch, op, m, n, args.reps, not args.no_compile))
            row = results[key][op]
            cells = "  ".join(f"{k} {v['gbs']:.0f} GB/s" + (f" ({v['vs_copy']:.2f} copy)" if "vs_copy" in v else "")
                              for k, v in row.items() if isinstance(v, dict) and "gbs" in v)
            print(f"{key:>12} {op:<11} {cells or row}", flush=True)
    data = {"command": " ".join([COMMAND, *(argv if argv is not None else sys.argv[1:])]),
            "environment": {"device": device, "torch": torch.__version__, "python": platform.python_version()},
            "shapes": [f"{m}x{n}" for m, n in shapes], "calls_per_graph": CALLS, "reps": args.reps,
            "results": results, "summary": summarize(results)}
    write_results(data, Path(args.out) if args.out else results_path("normalization", device, results_variant(shapes)),
                  json.dumps(data["summary"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
