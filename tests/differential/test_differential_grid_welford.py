"""Grid Welfords, differentially: the lowered kernels (codegen/lower/reduction.py, a GridReduce of
Welford states) run on the CPU simulator (tests/support/reduction_sim.py: each field of the states to
its own workspace, the block counted on its semaphore, the last block's states combined by Chan's
formula in rank order, every semaphore back to 0 when the launch ends) against numpy in float64.

Rows over BIDy alone, over BIDy and TIDx (the last block's block combine), rfactored, var_mean, in a
serial loop (a semaphore and slots per entrance), the nvFuser GridWelfordOp (the row on BIDx, M on
TIDx), at sizes not multiples of the blocks, some with more blocks than elements (empty partials,
N = 0: no NaN); the blocks run in several orders give the same bits (the combine's order is the
ranks', not the arrivals'); a large-mean row keeps its variance where E[x^2] - E[x]^2 in float32
loses it; every semaphore is 0 again after a launch. An allreduce (the row's mean read in every block):
every block combines after the grid-wide barrier and computes with the row's moments.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import tileproof as tp
from tileproof.codegen.lower import lower
from tileproof.model.targets import get_target

import rules.test_grid_welford as grid_rules
from nvfuser.test_nvfuser_reduction import cross_iteration_grouped_grid_allreduce_welford_shmoo, fused_reduction_batchnorm
from nvfuser.test_nvfuser_welford import grid_welford_op
from support.reduction_sim import Simulator, run_kernel
from support.welford_schedules import grid_welford, grid_welford_read_everywhere

TARGET = get_target("sm_90a")


def _kernel(fusion):
    report = tp.verify(fusion)
    assert report.ok, [d.message for d in report.errors]
    return lower(fusion.snapshot(), TARGET).kernel


def _expected(x: np.ndarray, outputs) -> list[np.ndarray]:
    """avg, var_sum, n of each row (or a var_mean's var with correction 1, mean), in float64."""
    mean, n = x.mean(axis=1), x.shape[1]
    var_sum = ((x - mean[:, None]) ** 2).sum(axis=1)
    by_op = {"welford_avg": mean, "welford_var_sum": var_sum, "welford_n": np.full(x.shape[0], n)}
    out = []
    for t in outputs:
        name = t.definition.name
        out.append(by_op[name] if name in by_op else var_sum / (n - 1) if t.definition.inputs[0].definition.name ==
                   "welford_var_sum" else mean)
    return out


def _simulate(fusion, x, symbols, blocks=None, simulator=None):
    got = run_kernel(_kernel(fusion), fusion, [x], symbols, blocks=blocks, simulator=simulator)
    return [np.asarray(g, dtype=np.float64) for g in got]


SCHEDULES = [  # (builder, M, N): N not a multiple of the blocks, or of blocks * threads; N < blocks: empty blocks
    (lambda: grid_welford(4), 3, 77), (lambda: grid_welford(5), 2, 3),
    (lambda: grid_welford(4, 32), 2, 300), (lambda: grid_welford(3, 32), 2, 50),
    (lambda: grid_welford(3, 32, rfactor=True), 3, 1001), (lambda: grid_welford(6, 16, rfactor=True), 2, 70),
    (lambda: grid_welford(5, 32, rfactor=True, outputs="var_mean"), 2, 333),
]


@pytest.mark.parametrize("build, m, n", SCHEDULES, ids=lambda v: v.__name__ if callable(v) else str(v))
def test_a_simulated_grid_welford_computes_the_rows_moments(build, m, n):
    fusion = build()
    x = np.random.default_rng(m * n).standard_normal((m, n)) * 3 + 1.5
    got = _simulate(fusion, x, {"M": m, "N": n})
    for t, g, w in zip(fusion.outputs, got, _expected(x, fusion.outputs)):
        assert not np.isnan(g).any(), t.name
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-5, err_msg=f"{fusion.name} {t.name}")
        if t.definition.name == "welford_n":
            assert np.all(g == n)  # the count: exact


@pytest.mark.parametrize("m, n", [(64, 128), (3, 7), (130, 5)])
def test_nvfusers_grid_welford_op_computes_the_rows_moments(m, n):
    """WelfordTest.GridWelfordOp: a block per element of the row (N blocks), M threads each."""
    fusion = grid_welford_op()
    x = np.random.default_rng(n).standard_normal((m, n))
    got = _simulate(fusion, x, {"T0_0": m, "T0_1": n})  # makeSymbolicTensor(2)'s extents
    for t, g, w in zip(fusion.outputs, got, _expected(x, fusion.outputs)):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-5, err_msg=t.name)


def test_the_blocks_arriving_in_any_order_give_the_same_bits():
    """The last block combines the ranks in order, whichever block it is: every arrival order of a
    row's blocks (BIDy) gives the same avg, var_sum and n, bit for bit."""
    fusion = grid_welford(4, 8, rfactor=True)
    m, n = 2, 203
    x = np.random.default_rng(9).standard_normal((m, n)) * 5 + 100.0
    results = set()
    orders = list(itertools.permutations(range(4)))[::5]  # 5 of the 24 orders of a row's blocks
    for order in orders:
        blocks = [(row, y, 0) for y in order for row in range(m)]
        got = _simulate(fusion, x, {"M": m, "N": n}, blocks=blocks)
        results.add(tuple(v for g in got for v in g.tolist()))
    assert len(orders) == 5 and len(results) == 1


def test_a_grid_welford_entered_in_a_serial_loop_computes_each_rows_moments():
    """[2 serial, 3 TIDx, r6 BIDx, r2 TIDy] (tests/rules/test_grid_welford.py's layout case): a semaphore
    and slots per entrance, lanes on TIDx, the last block's combine over TIDy."""
    fusion, _ = grid_rules._welford_rows_in_a_loop()
    x = np.random.default_rng(6).standard_normal((2, 3, 12)) + 5.0
    avg, var_sum, count = _simulate(fusion, x, {})
    np.testing.assert_allclose(avg, x.mean(axis=2), rtol=2e-5, atol=1e-5)
    np.testing.assert_allclose(var_sum, ((x - x.mean(axis=2, keepdims=True)) ** 2).sum(axis=2), rtol=2e-5, atol=1e-5)
    assert np.all(count == 12)


class _EmptyPartials(Simulator):
    """Counts the empty states (n == 0) the grid combines read from the workspaces."""

    empty = 0

    def combine_partials(self, n, envs, ranks, who):
        if n.welford_work:
            counts = self.work[n.welford_work[2]]
            _EmptyPartials.empty += sum(1 for v in counts.values() if v == 0)
        super().combine_partials(n, envs, ranks, who)


def test_empty_partials_combine_without_nan():
    """N = 3 over 5 blocks: blocks 3 and 4 of each row see no element and write empty states."""
    fusion = grid_welford(5)
    x = np.random.default_rng(2).standard_normal((2, 3))
    _EmptyPartials.empty = 0
    got = _simulate(fusion, x, {"M": 2, "N": 3}, simulator=_EmptyPartials)
    assert _EmptyPartials.empty >= 2 * 2  # two empty blocks in each row's workspace, when its last block reads it
    for g, w in zip(got, _expected(x, fusion.outputs)):
        assert not np.isnan(g).any()
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-5)


def test_a_large_mean_keeps_its_variance_where_the_naive_formula_loses_it():
    rng = np.random.default_rng(3)
    x = (1.0e4 + rng.standard_normal((2, 1000))).astype(np.float32).astype(np.float64)
    fusion = grid_welford(4, 32, rfactor=True, outputs="var_mean")
    var, mean = _simulate(fusion, x, {"M": 2, "N": 1000})
    want_var, want_mean = x.var(axis=1, ddof=1), x.mean(axis=1)
    welford_error = np.max(np.abs(var - want_var) / want_var)
    x32 = x.astype(np.float32)
    naive = (np.mean(x32 * x32, axis=1, dtype=np.float32) - np.mean(x32, axis=1, dtype=np.float32) ** 2) \
        * np.float32(1000 / 999)
    naive_error = np.max(np.abs(naive - want_var) / want_var)
    assert welford_error < 1e-3 < 0.1 < naive_error, (welford_error, naive_error)
    np.testing.assert_allclose(mean, want_mean, rtol=1e-6)


def test_every_semaphore_is_back_to_zero_after_each_launch():
    """The last block of each row returns its semaphore to 0 (run() raises where one is left counting),
    so the next launch counts from 0: two launches on one simulator compute the same."""
    fusion = grid_welford(3, 32)
    x = np.random.default_rng(4).standard_normal((2, 100))
    ir = _kernel(fusion)
    sim = Simulator(ir, {"M": 2, "N": 100})
    first = _simulate(fusion, x, {"M": 2, "N": 100}, simulator=lambda *a: sim)
    second = _simulate(fusion, x, {"M": 2, "N": 100}, simulator=lambda *a: sim)
    assert all(np.array_equal(a, b) for a, b in zip(first, second))
    assert all(v == 0 for sems in sim.semaphores.values() for v in sems.values())


ALLREDUCES = [  # (builder, M, N): every block of a row reads the row's mean (and its sum of squares)
    (lambda: grid_welford_read_everywhere(4), 3, 77), (lambda: grid_welford_read_everywhere(6), 2, 3),
    (lambda: grid_welford_read_everywhere(4, 32), 2, 300),
    (lambda: grid_welford_read_everywhere(5, 16, centered_sum=True), 3, 70),
]


@pytest.mark.parametrize("build, m, n", ALLREDUCES, ids=lambda v: v.__name__ if callable(v) else str(v))
def test_a_grid_welford_allreduce_gives_every_block_the_rows_moments(build, m, n):
    """x - mean (times the centered sum of squares): every block of a row combines the states after the
    grid-wide barrier, so each block's part of the output uses the row's moments; N = 3 over 6 blocks
    has empty states. Two launches on one simulator compute the same (the barrier's bit 31 flips once a
    launch, its low bits back where they began)."""
    fusion = build()
    x = np.random.default_rng(m + n).standard_normal((m, n)) * 3 + 1.5
    mean = x.mean(axis=1, keepdims=True)
    want = (x - mean) * (((x - mean) ** 2).sum(axis=1, keepdims=True) if "var" in fusion.name else 1.0)
    sim = Simulator(_kernel(fusion), {"M": m, "N": n})
    for _ in range(2):
        (got,) = _simulate(fusion, x, {"M": m, "N": n}, simulator=lambda *a: sim)
        assert not np.isnan(got).any()
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-4 * np.abs(want).max())
    assert all(v & ~(1 << 31) == 0 for sems in sim.barrier_semaphores.values() for v in sems.values())


@pytest.mark.parametrize("seed", range(10))
def test_random_grid_welford_allreduces_give_every_block_the_rows_moments(seed):
    """Drawn blocks (1 to 9 on BIDy), threads (none or 1 to 64 on TIDx) and sizes (rows of 1 to 200
    elements, fewer than the blocks' parts or not): every output element against numpy."""
    rng = np.random.default_rng(seed)
    blocks = int(rng.integers(1, 10))
    threads = None if rng.random() < 0.4 else int(rng.integers(1, 65))
    centered = bool(rng.random() < 0.5)
    m, n = int(rng.integers(1, 4)), int(rng.integers(1, 201))
    fusion = grid_welford_read_everywhere(blocks, threads, centered)
    x = rng.standard_normal((m, n)) * 2 - 1
    mean = x.mean(axis=1, keepdims=True)
    want = (x - mean) * (((x - mean) ** 2).sum(axis=1, keepdims=True) if centered else 1.0)
    (got,) = _simulate(fusion, x, {"M": m, "N": n})
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-4 * max(1.0, np.abs(want).max()),
                               err_msg=f"{fusion.name} at M = {m}, N = {n}")


@pytest.mark.parametrize("shape", [(2, 3, 3, 64), (1, 1, 5, 32), (3, 2, 2, 100)], ids=str)
def test_nvfusers_persistent_batch_norm_welford_gives_every_block_the_channels_moments(shape):
    """CrossIterationGroupedGridAllreduceWelfordShmoo's schedule (tests/nvfuser/test_nvfuser_reduction.py)
    at small tiles (TIDx 8, TIDy 4, vectors of 2, 2 rows a thread, 2 blocks of C): the rfactored Welford's
    grouped allreduce over BIDy, x - mean + var_sum per channel of an NHWC tensor."""
    fusion = cross_iteration_grouped_grid_allreduce_welford_shmoo(8, 4, 2, 2, 2)
    x = np.random.default_rng(sum(shape)).standard_normal(shape)
    (got,) = _simulate(fusion, x, {f"T0_{k}": v for k, v in enumerate(shape)})
    mean = x.mean(axis=(0, 1, 2), keepdims=True)
    want = x - mean + ((x - mean) ** 2).sum(axis=(0, 1, 2), keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(4, 4, 3, 3), (2, 6, 2, 5), (9, 3, 1, 3)], ids=str)
def test_nvfusers_fused_reduction_batchnorm_updates_the_stats_and_normalizes(shape):
    """FusedReductionBatchnorm's schedule (tests/nvfuser/test_nvfuser_reduction.py) with GX = GY = 2 (nvFuser's
    LaunchParams(2, 2, ...)): the running stats' update and the normalized half x, against float64."""
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape).astype(np.float16)
    w, b = rng.standard_normal(shape[1]).astype(np.float16), rng.standard_normal(shape[1]).astype(np.float16)
    rm, rv = rng.standard_normal(shape[1]).astype(np.float32), rng.standard_normal(shape[1]).astype(np.float32)
    sizes = {**{f"T0_{k}": v for k, v in enumerate(shape)}, "GX": 2, "GY": 2}
    fusion = fused_reduction_batchnorm()
    t13, t17, t29 = (np.asarray(g, dtype=np.float64)
                     for g in run_kernel(_kernel(fusion), fusion, [x, w, b, rm, rv], sizes))
    xd = x.astype(np.float64)
    mean = xd.mean(axis=(0, 2, 3))
    var_sum = ((xd - mean[None, :, None, None]) ** 2).sum(axis=(0, 2, 3))
    inv = 1 / np.sqrt(var_sum * 0.5 + 1e-4)
    per_channel = [v.astype(np.float64)[None, :, None, None] for v in (w, b)]
    want = (xd - mean[None, :, None, None]) * inv[None, :, None, None] * per_channel[0] + per_channel[1]
    np.testing.assert_allclose(t13, rm + mean * 0.1, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(t17, rv + var_sum * 0.05, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(t29, want, rtol=2e-3, atol=2e-3 * max(1.0, np.abs(want).max()))
