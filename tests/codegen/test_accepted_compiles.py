"""Accepted => compiles: every schedule the verifier accepts is lowered and compiled by NVRTC.

Each generator family of tests/support/schedule_gen.py (swizzle, split, tensor memory, visibility,
lowering) draws a fixed number of schedules (derandomized hypothesis); each accepted one must
compile with tp.compile (sm_100a for the tensor-memory family and lowering cases with tensor
memory, sm_90a otherwise), and so must every accepted bundled example. A failure to compile is a
tileproof bug: a verifier rule is missing (execution/loops.py, verifier/rules/lowering.py) or the
lowering is wrong. benchmarks/fuzz.py runs the same generators at scale (results/fuzz.json). The
bundled examples' kernels are kept for the tests of tests/codegen that check them
(support/shared_kernels.py).
tp.compile after tp.verify asks z3 nothing (z3.Solver.check raises meanwhile), and its lowering
asks no claim (execution/predicates.py) the Report did not decide.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from unittest import mock

import pytest
import z3
from hypothesis import HealthCheck, given, settings

import tileproof as tp
from tileproof.codegen.lower import lower
from tileproof.model.targets import get_target
from tileproof.schedule_files import discover

from support import shared_kernels
from support.schedule_gen import lowering_cases, split_cases, swizzle_cases, tmem_cases, visibility_cases

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = {  # family -> (strategy, target, examples)
    "swizzle": (swizzle_cases, "sm_90a", 12),
    "split": (split_cases, "sm_90a", 15),
    "tmem": (tmem_cases, "sm_100a", 12),
    "visibility": (visibility_cases, "sm_90a", 12),
    "lowering": (lowering_cases, None, 45),
}
TALLY: Counter = Counter()


def compile_if_accepted(fusion, target: str, label: str):
    """tp.compile `fusion` when it verifies: its kernel, else None; a failure names the schedule
    and the error."""
    report = tp.verify(fusion, target)
    if not report.ok:
        return None
    try:
        with mock.patch.object(z3.Solver, "check", side_effect=AssertionError("tp.compile asked z3 after tp.verify")):
            kernel = tp.compile(fusion, target)
    except Exception as e:  # noqa: BLE001 - every failure is the finding
        pytest.fail(f"{label} verified on {target} but tp.compile raised {type(e).__name__}: {e}")
    undecided = lower(fusion.snapshot(), get_target(target), report.decisions).answers.undecided
    assert not undecided, f"{label}: the lowering asked what verify did not decide: {[str(c) for c in undecided]}"
    return kernel


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_accepted_generated_schedule_compiles(family):
    strategy, target, examples = FAMILIES[family]
    config = settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                      suppress_health_check=list(HealthCheck), print_blob=False)

    @config
    @given(strategy())
    def check(case):
        TALLY[family, "cases"] += 1
        TALLY[family, "accepted"] += compile_if_accepted(case.fusion, case.target or target, repr(case)) is not None

    check()
    assert TALLY[family, "cases"] > 0


def _bundled():
    return discover([str(ROOT / "examples" / "valid")])  # examples/invalid expect rejections (test_seed_examples)


@pytest.mark.parametrize("case", _bundled(), ids=lambda c: c.name)
def test_every_accepted_bundled_example_compiles(case):
    try:
        fusion = case.build()
    except tp.ScheduleError:
        pytest.skip("the example is refused while it is built")
    kernel = compile_if_accepted(fusion, case.target, f"{case.name} ({case.location})")
    if kernel is not None:
        assert case.expect.ok, f"{case.name} is accepted but expects {case.expect.describe()}"
        shared_kernels.keep(fusion, case.target, kernel)  # test_codegen*.py check the same kernels
        run_arguments_bind(kernel, case.name)


def run_arguments_bind(kernel, label: str) -> None:
    """The arguments `tileproof run` launches `kernel` with (inputs of run's sizes, laid out
    as their allocation domains; the sizes no input's shape sets) pass Kernel.run's checks, which
    need no GPU: attention's V and a declared split factor were refused at launch before."""
    from tileproof.cli_run import launch_sizes, memory_order, run_sizes
    from tileproof.codegen.runtime import binding
    from tileproof.codegen.runtime.arrays import ArrayInfo, dense_strides
    from tileproof.model.expr import evaluate

    fusion = kernel.fusion
    try:
        env = run_sizes(kernel, {})
    except tp.InputError:
        return  # run says so: no size it tries meets the assumptions (T0_0 >= 2^30: pass --size)
    arrays = []
    for k, t in enumerate(fusion.inputs):
        shape = [evaluate(i.extent_expr, env) for i in t.logical]
        order = memory_order(t) or range(len(shape))
        arrays.append(ArrayInfo(None, 1 << (32 + k), tuple(shape), dense_strides(shape, order), t.dtype.name, "cuda", 0))
    with mock.patch.object(binding, "describe", side_effect=lambda info, stream=None: info):
        try:
            binding.bind(kernel.ir.globals, arrays, None, launch_sizes(fusion, env, {}), list(fusion.symbols), None,
                         kernel.ir.views)
        except tp.InputError as e:
            pytest.fail(f"{label}: `tileproof run` would be refused at launch: {e}")
