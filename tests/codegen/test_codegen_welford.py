"""Welford reductions (tp.welford, tp.var_mean) verified, lowered and run on the CPU simulator
(tests/support/reduction_sim.py: tp_welford_update, tp_welford_combine and tp_block_reduce written
out again) against the float64 reference: a block per row with and without rfactor, warp and
partial-block thread counts, a row per thread, a column over TIDy; the kernel makes one block
combine of three values; a grid Welford read in every block (a grid barrier, every block combining);
siblings scheduled apart (rejected); and the precision of a large-mean row, where
E[x^2] - E[x]^2 in float32 loses the variance and Welford keeps it.
"""

from __future__ import annotations

import numpy as np
import pytest

import tileproof as tp
from tileproof.codegen.emit import emit
from tileproof.codegen.ir import BlockReduce, Compute, SiblingStep, walk
from tileproof.codegen.lower import lower
from tileproof.codegen.runtime import nvrtc
from tileproof.codegen.runtime.reference import reference
from tileproof.execution.reduction import accumulator_registers, reduction_loops, welford_count_dtype
from tileproof.model.expr import const
from tileproof.model.targets import get_target

from support.reduction_sim import Simulator, run_kernel
from support.welford_schedules import (block_welford, column_welford, grid_welford, grid_welford_read_everywhere,
                                       serial_welford, siblings_apart)

TARGET = get_target("sm_90a")


def _kernel(fusion):
    report = tp.verify(fusion)
    assert report.ok, [d.message for d in report.diagnostics if d.severity.value == "error"]
    return lower(fusion.snapshot(), TARGET).kernel


def _simulate(fusion, x: np.ndarray, simulator=None):
    sizes = {"M": x.shape[0], "N": x.shape[1]}
    ir = _kernel(fusion)
    got = run_kernel(ir, fusion, [x], sizes, simulator=simulator)
    return [np.asarray(g, dtype=np.float64) for g in got], reference(fusion, [x])


CASES = [  # (builder, M, N): warp (W = 32, one partial), 96 threads (3 partials), 128 (4: the shuffle path),
    # 48 (runs of 16 lanes), a partial block (N < threads: threads with no element), N not a multiple
    (lambda: block_welford(128), 2, 300), (lambda: block_welford(128), 3, 50),
    (lambda: block_welford(32), 2, 77), (lambda: block_welford(96), 2, 1000),
    (lambda: block_welford(48, rfactor=False), 2, 130), (lambda: block_welford(128, rfactor=False), 2, 20),
    (lambda: block_welford(64, dtype="float64"), 2, 200), (lambda: block_welford(96, outputs="var_mean"), 3, 250),
    (lambda: serial_welford(32), 70, 33), (lambda: column_welford(8, 4), 37, 16),
]


@pytest.mark.parametrize("build, m, n", CASES, ids=lambda x: x.__name__ if callable(x) else str(x))
def test_the_simulated_welford_computes_the_reference(build, m, n):
    fusion = build()
    x = np.random.default_rng(5).standard_normal((m, n)) * 3 + 1.5
    got, want = _simulate(fusion, x)
    for t, g, w in zip(fusion.outputs, got, want):
        np.testing.assert_allclose(g, w, rtol=2e-5 if t.dtype == tp.float32 else 1e-12, atol=1e-5, err_msg=t.name)
    counts = {t.definition.name: g for t, g in zip(fusion.outputs, got)}.get("welford_n")
    if counts is not None:  # each output element's count: exact
        assert np.all(counts == (m if fusion.name.startswith("welford_column") else n))


class _EmptyStates(Simulator):
    """Records, at each block combine of Welford states, how many threads hold an empty state."""

    empty = 0

    def block_reduce(self, n):
        if n.combine == "welford":
            _EmptyStates.empty += sum(regs[n.acc][0][2] == 0.0 for regs in self.local)
        super().block_reduce(n)


def test_a_partial_block_combines_empty_states_without_nan():
    fusion = block_welford(128)
    x = np.random.default_rng(1).standard_normal((2, 40))  # 40 of 128 threads see an element
    _EmptyStates.empty = 0
    got, want = _simulate(fusion, x, simulator=_EmptyStates)
    assert _EmptyStates.empty == 2 * (128 - 40)  # each block: 88 threads enter the combine empty
    for g, w in zip(got, want):
        assert not np.isnan(g).any()
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-5)


def test_a_large_mean_keeps_its_variance_where_the_naive_formula_loses_it():
    rng = np.random.default_rng(3)
    x = (1.0e4 + rng.standard_normal((2, 1000))).astype(np.float32)
    fusion = block_welford(96, outputs="var_mean")
    (var, mean), (want_var, want_mean) = _simulate(fusion, x.astype(np.float64))
    welford_error = np.max(np.abs(var - want_var) / want_var)
    squares = np.mean(x * x, axis=1, dtype=np.float32)  # E[x^2] - E[x]^2 in float32
    naive = (squares - np.mean(x, axis=1, dtype=np.float32) ** 2) * np.float32(1000 / 999)
    naive_error = np.max(np.abs(naive - want_var) / want_var)
    assert welford_error < 1e-3 < 0.1 < naive_error, (welford_error, naive_error)
    np.testing.assert_allclose(mean, want_mean, rtol=1e-6)


def test_the_kernel_makes_one_block_combine_of_the_three_values():
    ir = _kernel(block_welford(128, outputs="var_mean"))
    combines = [n for n in walk(ir.body) if isinstance(n, BlockReduce)]
    assert len(combines) == 1 and combines[0].combine == "welford"
    states = [b.tensor for b in ir.buffers if b.welford_count]  # the partial states (per thread), then the row's
    assert states == ["tp_acc_T5", "tp_acc_T1"] and combines[0].acc == "tp_acc_T1"
    updates = [n for n in walk(ir.body) if isinstance(n, Compute) and n.kind == "reduction"]
    assert [(u.name, len(u.ins)) for u in updates] == [("welford_avg", 1), ("welford_avg", 3)]
    # the partial's var_sum and n: init and update; the row's var_sum: init, update and combine (n is not computed)
    assert sum(isinstance(n, SiblingStep) for n in walk(ir.body)) == 2 + 2 + 3
    scratch = next(b for b in ir.buffers if b.tensor == "tp_scratch")
    assert scratch.elements == const(128 * 3 * 4)  # a state (two floats, an int count) a thread
    assert {b.welford_count for b in ir.buffers if b.welford_count} == {tp.int32}  # N < 2^31: int32 counts


def test_the_welford_source_shuffles_the_state_and_compiles_with_and_without_the_headers():
    fusion = block_welford(128)
    ir = _kernel(fusion)
    for headers in (True, False):
        include = nvrtc.cuda_include_dir() if headers else None
        if headers and include is None:
            continue
        text = emit(ir, cuda_headers=headers)
        assert "tp_welford_state<T, C> __shfl_xor_sync(unsigned mask, tp_welford_state<T, C> s, unsigned off)" in text
        assert "tp_block_reduce<1, true, false, false>(tp_acc_" in text
        assert nvrtc.compile_to_cubin(text, "sm_90a", include)[:4] == b"\x7fELF"


@pytest.mark.parametrize("build", [lambda: block_welford(128, outputs="var_mean"), lambda: column_welford(),
                                   lambda: block_welford(64, dtype="float64", rfactor=False)])
def test_welford_schedules_compile(build):
    assert tp.compile(build(), "sm_90a").cubin[:4] == b"\x7fELF"


def test_a_grid_welford_read_in_every_block_meets_at_a_grid_barrier_and_combines_in_every_block():
    """An allreduce of a grid Welford (its mean read in every block): the states' partials, one grid-wide
    barrier on the leader's semaphore, the combine in every block (no last-block test, no release), a
    cooperative launch; the differential test runs it (tests/differential/test_differential_grid_welford.py)."""
    kernel = tp.compile(grid_welford_read_everywhere(), "sm_90a")
    body = kernel.cuda_source[kernel.cuda_source.index("__global__"):]
    assert kernel.ir.cooperative
    calls = [line.strip().split("(")[0] for line in body.splitlines() if line.strip().startswith("tp_grid")]
    assert calls == ["tp_grid_welford_partials<1>", "tp_grid_barrier", "tp_grid_welford_combine<1, false, false, false>"]
    assert "tp_grid_arrive" not in body and "tp_grid_release" not in body


def test_siblings_scheduled_apart_are_rejected():
    report = tp.verify(siblings_apart())
    assert {d.code for d in report.diagnostics if d.severity.value == "error"} == {"REDUCTION-GROUP"}


def _grouped_welford(group: int = 2):
    """A row Welford of [M, N] grouped over `group` rows a block: [M / group (BIDx), group (Group), r, rTIDx]."""
    with tp.Fusion("welford_grouped_axis") as fusion:
        x = tp.make_tensor(["M", "N"], contiguity=True, dtype=tp.float32)
        fusion.add_input(x)
        for t in tp.welford(x, 1):
            fusion.add_output(t)
    avg = fusion.outputs[0]
    avg.split(0, group)
    avg.split(2, 128)
    tp.propagate_transforms(avg)
    avg.axis(0).parallelize(tp.ParallelType.BIDx)
    avg.axis(1).parallelize(tp.ParallelType.Group)
    avg.axis(-1).parallelize(tp.ParallelType.TIDx)
    tp.parallelize_all_like(avg)
    tp.inline_most(fusion)
    return fusion


def test_a_group_axis_on_a_welford_combines_the_groups_states_together():
    """Two rows a block grouped (nvFuser's GroupedGridWelford groups WelfordOps): accepted, run as the
    unrolled loop of the rows' Welfords (a Group axis left of the reduction axes), each row's moments right."""
    fusion = _grouped_welford()
    report = tp.verify(fusion)
    assert report.ok, report.codes
    ir = lower(fusion.snapshot(), TARGET, report.decisions).kernel
    combines = [(n.elements, n.combine) for n in walk(ir.body) if isinstance(n, BlockReduce)]
    assert combines == [(1, "welford")] * 2  # left of the reduction axes: an unrolled loop, a combine an index
    x = np.random.default_rng(5).standard_normal((5, 300)) * 2 + 3
    avg, var_sum, n = (np.asarray(g, dtype=np.float64) for g in run_kernel(ir, fusion, [x], {"M": 5, "N": 300}))
    np.testing.assert_allclose(avg, x.mean(axis=1), rtol=1e-5)
    np.testing.assert_allclose(var_sum, ((x - x.mean(axis=1, keepdims=True)) ** 2).sum(axis=1), rtol=1e-5)
    assert np.all(np.asarray(n) == 300)


def test_a_welford_grouped_past_sixteen_reductions_is_rejected():
    """A Welford counts once (its three outputs are one reduction): 17 rows grouped are 17 > 16."""
    report = tp.verify(_grouped_welford(17))
    found = [d for d in report.diagnostics if d.code == "REDUCTION-GROUP-AXIS"]
    assert found and "groups 17 reductions (1 grouped tensor(s) times the grouped extents)" in found[0].message


def test_a_welford_accumulator_counts_three_values_a_register():
    fusion = block_welford(128)
    part = fusion.reduction_groups[0][0]  # the partial avg: one state a thread
    assert accumulator_registers(reduction_loops(part)) == 3


def test_the_count_is_an_integer_wide_enough_for_every_admitted_size():
    """int32 where a state counts fewer than 2^31 elements at every size (a row of N), int64 where
    it may count more (the total of [M, N]: up to (2^31 - 1)^2); a float count would stop growing at
    2^24 in float32."""
    row = block_welford(128)
    assert {welford_count_dtype(t) for g in row.reduction_groups for t in g} == {tp.int32}
    with tp.Fusion("welford_total") as fusion:
        x = tp.make_tensor(["M", "N"], contiguity=True, dtype=tp.float32)
        fusion.add_input(x)
        result = tp.welford(x, [0, 1])
        for t in result:
            fusion.add_output(t)
    avg = result.avg
    avg.merge(0)
    avg.split(0, 256)  # [r{M N / 256}, r{256}]
    partials = avg.rfactor([0])
    tp.propagate_transforms(avg)
    avg.axis(-1).parallelize(tp.ParallelType.TIDx)
    tp.parallelize_all_like(avg)
    tp.inline_most(fusion)
    assert welford_count_dtype(partials[0]) == welford_count_dtype(avg) == tp.int64
    assert reduction_loops(avg).register_bytes == 16  # two floats and a long long
    ir = _kernel(fusion)
    text = emit(ir, cuda_headers=False)
    assert "tp_welford_state<float, long long>" in text
    assert nvrtc.compile_to_cubin(text, "sm_90a", None)[:4] == b"\x7fELF"
    assert next(b for b in ir.buffers if b.tensor == "tp_scratch").elements == const(256 * 16)
    got, want = _simulate(fusion, np.random.default_rng(2).standard_normal((5, 300)))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-5)
    fusion.assume("M * N <= 1000000")  # not a bound of one symbol: the intervals still allow more
    assert welford_count_dtype(avg) == tp.int64
