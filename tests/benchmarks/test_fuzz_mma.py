"""The fuzzer's mma family (tests/support/mma_gen.py): its draws are reproducible, API misuse
raises tp.ScheduleError, and a few accepted valid draws, lowered, compute D = A B on the CPU
simulator of mma.sync (tests/support/mma_sim.py) within the tf32 / float32 bounds."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tileproof as tp
from tileproof.codegen.runtime.reference import round_to

from support.mma_gen import mma_case
from support.lowering import lowered
from support.mma_sim import run_mma_kernel

F32_ADD = 2.0 ** -23
TF32 = 2.0 ** -10


def test_draws_are_reproducible_and_misuse_raises_schedule_error():
    for seed in range(40):
        case = mma_case(seed)
        assert not case.api_bugs, case.api_bugs
        assert repr(mma_case(seed)) == repr(case)


def _k_tile(case) -> int:
    return int(re.search(r"block \d+x\d+x(\d+)", repr(case)).group(1))


def _small_accepted(count: int, limit: int = 120, k_tail: bool = False, fragments: bool = False):
    found = []
    for seed in range(limit):
        case = mma_case(seed)
        m, n, k = case.sizes
        if case.mutation or not isinstance(m, int) or m * n * k > 64 * 64 * 64 or case.target != "sm_90a":
            continue
        if k_tail and k % _k_tile(case) == 0:
            continue
        if fragments and "fragments" not in repr(case):
            continue
        if tp.verify(case.fusion, case.target).ok:
            found.append((seed, case))
            if len(found) == count:
                break
    return found


@pytest.mark.parametrize("slot", range(2))
def test_accepted_draws_compute_the_product_on_the_simulator(slot):
    cases = _small_accepted(2)
    assert len(cases) > slot, "too few small accepted mma draws"
    _run_on_the_simulator(*cases[slot])


@pytest.mark.parametrize("slot", range(2))
def test_accepted_draws_with_a_k_tail_compute_the_product_on_the_simulator(slot):
    """Draws whose K the block's K tile does not divide: accepted on a zero path (cp.async,
    execution/zero_padding.py), they must add nothing past K."""
    cases = _small_accepted(2, limit=900, k_tail=True)
    assert len(cases) > slot, "too few small accepted mma draws with a K tail"
    _run_on_the_simulator(*cases[slot])


@pytest.mark.parametrize("slot", range(2))
def test_accepted_draws_with_fragments_in_register_stages_compute_the_product(slot):
    """Draws whose fragments are circular-buffered over the k-slice loop (execution/pipeline.py:
    the next slice copied into the other stage before this slice's mma.sync)."""
    cases = _small_accepted(2, limit=600, fragments=True)
    assert len(cases) > slot, "too few small accepted mma draws with fragments in register stages"
    _run_on_the_simulator(*cases[slot])


def _run_on_the_simulator(seed, case):
    m, n, k = case.sizes
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((m, 1, k)), rng.standard_normal((1, n, k))
    dtype = case.fusion.inputs[0].dtype
    (out,), _ = run_mma_kernel(lowered(case.fusion, "sm_90a").kernel, case.fusion, [a, b])
    a2, b2 = round_to(a[:, 0, :], dtype), round_to(b[0], dtype)
    magnitude = np.abs(a2) @ np.abs(b2).T
    unit = TF32 if dtype == tp.float32 else 0.0
    err = np.abs(out - a2 @ b2.T)
    assert not np.isnan(out).any(), case
    assert (err <= unit * magnitude + k * F32_ADD * magnitude + 1e-9).all(), (case, float(err.max()))
