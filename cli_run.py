"""`tileproof run PATH [-k EXPR] [--check] [--bench]`: compile every schedule in PATH and run it on
the GPU with random inputs; --check compares with the float64 reference, --bench times
it and reports the bandwidth (bytes of inputs and outputs over the kernel time).

Exit codes: 0 all compiled (and matched, with --check), 1 a schedule was rejected or a
result differed, 2 usage or load error, or no GPU to run on.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import math
import re
import sys
from dataclasses import dataclass

from .codegen.compile import Kernel, compile as compile_fusion
from .codegen.errors import CompileError, InputError, NoDeviceError, ScheduleRejected, UnsupportedSchedule
from .codegen.runtime.reference import reduction_slack, reference, tolerance
from .model.errors import InternalError, ScheduleError, TileproofError
from .model.targets import TARGETS
from .schedule_files import BuildError, ScheduleCase, build_fusion, select
from .codegen.runtime.arrays import DeviceArray
from .model.expr import evaluate
from .model.global_layout import global_strides

EXIT_OK, EXIT_MISMATCH, EXIT_ERROR = 0, 1, 2
DEFAULT_SIZE = 1024
# a symbol's sizes tried in turn where the assumptions refuse DEFAULT_SIZE (run_sizes), at most MAX_SIZE_TRIES
SIZES_TRIED = (DEFAULT_SIZE, 2048, 4096, 8192, 512, 256, 128, 64, 32, 16, 8, 4, 2, 1)
MAX_SIZE_TRIES = 2000


@dataclass
class Compiled:
    case: ScheduleCase
    kernel: Kernel


def add_parser(commands) -> None:
    p = commands.add_parser("run", help="compile schedules and run them on the GPU (--check, --bench)")
    p.add_argument("path", metavar="PATH", help="a schedule file or folder; FILE::NAME picks one schedule")
    add_keyword_argument(p)
    p.add_argument("--check", action="store_true", help="compare the outputs with a float64 reference")
    p.add_argument("--bench", action="store_true", help="time the kernel and print the achieved bandwidth")
    p.add_argument("--target", choices=sorted(TARGETS), help="compile for this target instead of each schedule's own")
    p.add_argument("--size", action="append", default=[], metavar="NAME=VALUE",
                   help=f"a symbolic extent's value (default {DEFAULT_SIZE}, or the first size the "
                        "assumptions admit); repeatable")
    p.add_argument("--iterations", type=_positive_int, default=100, help="launches timed by --bench (default 100)")
    p.add_argument("--seed", type=_non_negative_int, default=0, help="seed of the random inputs")


def add_keyword_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-k", metavar="EXPR", dest="keyword",
                        help="only schedules whose name matches EXPR: words (substrings) with and, or, not, ()")


def _positive_int(text: str) -> int:
    if not re.fullmatch(r"[0-9]+", text) or int(text) == 0:
        raise argparse.ArgumentTypeError(f"expected a positive int, got {text!r}")
    return int(text)


def _non_negative_int(text: str) -> int:
    if not re.fullmatch(r"[0-9]+", text):
        raise argparse.ArgumentTypeError(f"expected a non-negative int, got {text!r}")
    return int(text)


def run_command(args, usage_error) -> int:
    sizes = _parse_sizes(args.size, usage_error)
    cases = select([args.path], args.keyword)
    status, compiled = EXIT_OK, []
    for case in cases:
        result = _compile_case(case, args.target)
        if isinstance(result, int):
            status = max(status, result)
        elif result is not None:
            compiled.append(result)
    if not compiled:
        return status
    known = {symbol for c in compiled for symbol in c.kernel.fusion.symbols}
    unknown = sorted(set(sizes) - known)
    if unknown:  # most likely a typo: running at the default size instead would mislead
        raise usage_error(f"--size {unknown[0]}: no compiled schedule has an extent named {unknown[0]}; "
                          f"extents: {', '.join(sorted(known)) or 'none (every size is concrete)'}", "tileproof run")
    if importlib.util.find_spec("numpy") is None:  # the inputs and the reference are numpy arrays
        print("error: tileproof run needs numpy for its inputs and reference (pip install numpy)", file=sys.stderr)
        return EXIT_ERROR
    for c in compiled:
        try:
            status = max(status, _run_case(c, args, sizes))
        except NoDeviceError as e:
            print(f"error: {e}", file=sys.stderr)
            return EXIT_ERROR
        except InputError as e:
            print(f"ERROR {c.case.name}: {e}")
            status = EXIT_ERROR
    return status


def _parse_sizes(items: list[str], usage_error) -> dict[str, int]:
    sizes = {}
    for item in items:
        name, _, value = item.partition("=")
        if not name.isidentifier() or not re.fullmatch(r"[0-9]+", value) or int(value) <= 0:
            raise usage_error(f"--size expects NAME=POSITIVE_INT, got {item!r}", "tileproof run")
        if name in sizes and sizes[name] != int(value):
            raise usage_error(f"--size {name} given twice ({sizes[name]} and {value})", "tileproof run")
        sizes[name] = int(value)
    return sizes


def _compile_case(case: ScheduleCase, target: str | None):
    """A Compiled case, None (skipped), or an exit status after printing why."""
    if not case.expect.ok:
        return None  # an invalid example: `tileproof verify` checks it is rejected
    try:
        fusion = build_fusion(case)
    except (ScheduleError, BuildError, InternalError) as e:
        print(f"ERROR {case.name}: {e}")
        return EXIT_ERROR
    except TileproofError as e:  # e.g. the function called tp.compile, which refused
        print(f"ERROR {case.name}: building the schedule raised {type(e).__name__}: {e}")
        return EXIT_ERROR
    try:
        kernel = compile_fusion(fusion, target or case.target)
    except ScheduleRejected as e:
        print(f"FAIL {case.name}: {e}")
        return EXIT_MISMATCH
    except UnsupportedSchedule as e:
        print(f"SKIP {case.name}: not lowered yet: {e}")
        return None
    except (ScheduleError, CompileError, NoDeviceError) as e:
        print(f"ERROR {case.name}: {e}")
        return EXIT_ERROR
    lp = kernel.launch_params
    print(f"COMPILED {case.name} for {kernel.target.name}: grid {lp.grid}, block {lp.block}, "
          f"{lp.shared_memory_bytes} bytes of shared memory")
    return Compiled(case, kernel)


def _run_case(c: Compiled, args, sizes: dict[str, int]) -> int:
    import numpy as np


    kernel, fusion = c.kernel, c.kernel.fusion
    env = run_sizes(kernel, sizes)  # InputError when no sizes meet the assumptions
    if any(env[s] != DEFAULT_SIZE for s in env if s not in sizes):
        print(f"SIZES {c.case.name}: " + ", ".join(f"{s} = {v}" for s, v in env.items() if s not in sizes)
              + f" (the assumptions refuse {DEFAULT_SIZE})")
    rng = np.random.default_rng(args.seed)
    host = [_random(rng, [_size(i.extent_expr, env) for i in t.logical], t) for t in fusion.inputs]
    device = [DeviceArray.from_numpy(h, t.dtype, order=memory_order(t)) for h, t in zip(host, fusion.inputs)]
    extra = launch_sizes(fusion, env, sizes)
    outputs = kernel.run(*device, **extra)
    status = EXIT_OK
    if args.check:
        expected, slack = reference(fusion, host), reduction_slack(fusion, host)
        for t, out, want, extra_atol in zip(fusion.outputs, outputs, expected, slack):
            status = max(status, _compare(c.case.name, t, out.to_numpy().astype(np.float64), want, extra_atol))
    if args.bench:
        seconds = kernel.benchmark(*device, iterations=args.iterations, **extra)
        nbytes = sum(a.nbytes for a in device) + sum(o.nbytes for o in outputs)
        print(f"BENCH {c.case.name}: {seconds * 1e6:.2f} us per launch, {nbytes / seconds / 1e9:.1f} GB/s "
              f"({nbytes} bytes moved)")
    if not args.check and not args.bench:
        print(f"RAN {c.case.name}")
    return status


def run_sizes(kernel, given: dict[str, int]) -> dict[str, int]:
    """Sizes for the kernel's symbols: those given (--size), the others DEFAULT_SIZE, or where the
    assumptions (or the launch's limits) refuse that, the first of SIZES_TRIED that they admit, the
    symbols in order (`tma_load_from_one_thread` assumes K <= 32, `packed_copy` N % 4096 == 0).
    Raises the InputError of the default sizes where none is admitted."""
    free = [s for s in kernel.fusion.symbols if s not in given]
    first = None
    for values in itertools.islice(itertools.product(SIZES_TRIED, repeat=len(free)), MAX_SIZE_TRIES):
        picked = dict(zip(free, values))
        env = {s: given[s] if s in given else picked[s] for s in kernel.fusion.symbols}
        try:
            kernel.launch_params_for(**env)
        except InputError as e:
            first = first or e
            continue
        return env
    raise first  # the first tried: the default sizes


def launch_sizes(fusion, env: dict[str, int], given: dict[str, int]) -> dict[str, int]:
    """The sizes run() is passed beside the inputs: those given (--size), and those no input's shape
    sets (a declared split factor, fusion.symbol("F"): without it the launch was refused, "extent(s)
    F are not set by any input shape"), at their values in `env`."""
    shaped = {i.extent_expr.value for t in fusion.inputs for i in t.logical if i.extent_expr.op == "var"}
    return {s: v for s, v in env.items() if s in given or s not in shaped}


def memory_order(tv) -> tuple[int, ...] | None:
    """tv's logical axes in the order its allocation domain lays them in memory (an input's random
    array is allocated so: attention's V [Z, 1, 1, Dv, N] is row-major [Z, N, Dv]), or None
    (row-major) where the domain is not a permutation of them."""
    layout = global_strides(tv)
    return None if layout is None else layout.alloc_axes


def _size(e, env) -> int:
    return evaluate(e, env)


def _random(rng, shape, tensor):
    """Random host values (int64 or float64) for an input; InputError when the sizes make it
    too large to hold."""
    nbytes = math.prod(shape) * 8
    too_large = InputError(f"input {tensor.name} of shape {tuple(shape)} needs {nbytes} bytes of host memory "
                           f"for its random values; choose smaller --size values")
    if nbytes > sys.maxsize:
        raise too_large
    try:
        if tensor.dtype.name.startswith("int"):
            return rng.integers(-100, 100, size=shape)
        return rng.standard_normal(size=shape)
    except MemoryError:
        raise too_large from None


def _compare(name: str, tensor, got, want, extra_atol=0.0) -> int:
    import numpy as np

    rtol, atol = tolerance(tensor.dtype)
    atol = atol + extra_atol  # a float reduction's error scales with its terms (reduction_slack)
    ok = np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    if ok.all():
        err = np.nanmax(np.abs(got - want)) if got.size else 0.0
        print(f"PASS {name}: {tensor.name} matches the reference ({got.size} elements, max abs error {err:.3g})")
        return EXIT_OK
    first = tuple(int(i) for i in np.argwhere(~ok)[0])
    print(f"FAIL {name}: {tensor.name} differs from the reference in {int((~ok).sum())} of {got.size} elements; "
          f"first at {first}: got {got[first]!r}, expected {want[first]!r}")
    return EXIT_MISMATCH
