"""Grid reductions on the GPU (marker `gpu`; skipped without PyTorch or a CUDA device): a reduction
axis on BIDx/BIDy (execution/grid_reduction.py), each block's partials through the workspace and
the last block to arrive on its segment's semaphore combining them (issue 33, item 6). Every
schedule runs at three or more sizes, some not divisible by its splits, against torch, and twice
in a row: the second launch reuses the semaphores the first returned to 0. A total read by later
statements of the kernel runs them in the last block of its segment only (item 6 follow-up). A total
every block reads (an allreduce) runs through a grid-wide barrier in a cooperative launch, and a grid
too large to be resident at once is an InputError naming the grid and the limit. A group's grid
reductions (tp.group_reductions) combine in one round with one semaphore (nvFuser's
GroupedGridReduction): a statement reading both totals runs in the round's one last block, and a
grouped allreduce meets at one grid-wide barrier."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402

pytestmark = pytest.mark.gpu
P = tp.ParallelType


def rows_one_block_per_term():
    """nvFuser Tutorial.Reduction step 2: [M, rN] with rN on BIDx, one thread per block; the serial
    loop over M enters the grid combine M times (one workspace slice and semaphore each)."""
    with tp.Fusion("rows_one_block_per_term") as fusion:
        t0 = tp.make_contig_tensor(2); fusion.add_input(t0)
        t1 = tp.sum(t0, [1]); fusion.add_output(t1)
    t1.axis(1).parallelize(P.BIDx)
    return fusion


def whole_sum_rfactored():
    """nvFuser Tutorial.ReductionRFactor's grid step: [r/1024/100 BIDx, r100, r1024 TIDx], two
    rfactors: serial, block (TIDx), then grid (BIDx, every thread of the block a lane)."""
    with tp.Fusion("whole_sum_rfactored") as fusion:
        t0 = tp.make_tensor([-1]); fusion.add_input(t0)
        t1 = tp.sum(t0, [0]); fusion.add_output(t1)
    t1.split(0, 1024)
    t1.split(0, 100)
    t2 = t1.rfactor([1])
    t3 = t1.rfactor([1])
    for t in (t2, t3, t1):
        t.axis(0).parallelize(P.BIDx)
    t2.axis(2).parallelize(P.TIDx)
    t3.axis(1).parallelize(P.TIDx)
    return fusion


def rows_over_blocks_and_threads(op):
    """[M BIDy, rN/128 BIDx, r128 TIDx]: the block combines TIDx, then the blocks of a row (a
    segment per row) combine, the last block's threads sharing the ranks before the block combine."""
    with tp.Fusion(f"rows_{op}_over_blocks_and_threads") as fusion:
        t0 = tp.make_contig_tensor(2); fusion.add_input(t0)
        t1 = getattr(tp, op)(t0, [1]); fusion.add_output(t1)
    fusion.assume("T0_0 <= 65535")  # rows on BIDy
    t1.split(1, 128)
    t1.axis(0).parallelize(P.BIDy)
    t1.axis(1).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.TIDx)
    return fusion


def columns_over_blocks():
    """[rM BIDx, N/32 BIDy, 32 TIDx, ...]: one term per block and thread; each thread a lane of its
    own column, each BIDy a segment."""
    with tp.Fusion("columns_over_blocks") as fusion:
        t0 = tp.make_contig_tensor(2); fusion.add_input(t0)
        t1 = tp.sum(t0, [0]); fusion.add_output(t1)
    fusion.assume("T0_1 <= 1000000")  # N / 32 on BIDy
    t1.split(1, 32)
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.BIDy)
    t1.axis(2).parallelize(P.TIDx)
    return fusion


def columns_in_registers():
    """[rM BIDx, 4]: each block keeps 4 running totals (the accumulator's registers), all combined."""
    with tp.Fusion("columns_in_registers") as fusion:
        t0 = tp.make_tensor(["M", 4]); fusion.add_input(t0)
        t1 = tp.sum(t0, [0]); fusion.add_output(t1)
    t1.axis(0).parallelize(P.BIDx)
    return fusion


def rows_summed_then_scaled():
    """[M BIDy, rN/128 BIDx, r128 TIDx], then T2 = T1 * 2 (registers) and T3 = T2 + 1 in the same
    kernel: the statements reading the row's total run in the last block of its row only
    (`blockIdx.x == tp_last_x_T1`)."""
    with tp.Fusion("rows_summed_then_scaled") as fusion:
        t0 = tp.make_contig_tensor(2); fusion.add_input(t0)
        t1 = tp.sum(t0, [1])
        t2 = tp.mul(t1, 2.0)
        t3 = tp.add(t2, 1.0); fusion.add_output(t3)
    fusion.assume("T0_0 <= 65535")  # rows on BIDy
    t1.split(1, 128)
    t1.axis(0).parallelize(P.BIDy)
    t1.axis(1).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.TIDx)
    for t in (t2, t3):
        t.axis(0).parallelize(P.BIDy)
    return fusion


def whole_sum_then_scaled():
    """[rN/256 BIDx, r256 TIDx] summed to one value, then doubled by the last block to arrive."""
    with tp.Fusion("whole_sum_then_scaled") as fusion:
        t0 = tp.make_tensor([-1]); fusion.add_input(t0)
        t1 = tp.sum(t0, [0])
        t2 = tp.mul(t1, 2.0); fusion.add_output(t2)
    t1.split(0, 256)
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.TIDx)
    return fusion


def _twice(kernel, x, expected):
    for _ in range(2):  # the semaphores the first launch left are the second's
        (out,) = kernel.run(x)
        torch.cuda.synchronize()
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("shape", [(10, 1024), (3, 1000), (7, 1), (1, 4097)])
def test_rows_summed_across_blocks(shape):
    x = torch.randn(shape, device="cuda")
    _twice(tp.compile(rows_one_block_per_term()), x, x.sum(1))


@pytest.mark.parametrize("n", [10000, 1, 1 << 20, 102400 * 3 + 17])
def test_whole_tensor_summed_by_rfactors_and_grid(n):
    x = torch.randn(n, device="cuda")
    _twice(tp.compile(whole_sum_rfactored()), x, x.sum())


@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize("shape", [(5, 1000), (33, 4097), (1, 128), (2, 100000)])
def test_rows_across_blocks_and_threads(op, shape):
    x = torch.randn(shape, device="cuda")
    _twice(tp.compile(rows_over_blocks_and_threads(op)), x, x.sum(1) if op == "sum" else x.amax(1))


@pytest.mark.parametrize("shape", [(100, 64), (37, 50), (1000, 33)])
def test_columns_across_blocks(shape):
    x = torch.randn(shape, device="cuda")
    _twice(tp.compile(columns_over_blocks()), x, x.sum(0))


@pytest.mark.parametrize("rows", [1, 300, 5001])
def test_register_totals_across_blocks(rows):
    x = torch.randn(rows, 4, device="cuda")
    _twice(tp.compile(columns_in_registers()), x, x.sum(0))


def test_sizes_change_between_launches():
    """A larger launch grows the workspace; a smaller one after it reuses it (semaphores zero)."""
    kernel = tp.compile(rows_over_blocks_and_threads("sum"))
    for shape in ((4, 300), (40, 70000), (3, 129)):
        x = torch.randn(shape, device="cuda")
        _twice(kernel, x, x.sum(1))


@pytest.mark.parametrize("shape", [(5, 1000), (33, 4097), (1, 128), (64, 100000)])
def test_a_grid_total_read_by_later_statements(shape):
    """Issue 33 item 6 (follow-up): the total feeds other ops in the same kernel, as nvFuser's
    TmaInnerReductionManualTest copies it (ThreadPredicateMap: the consumers run in the last block)."""
    x = torch.randn(shape, device="cuda")
    _twice(tp.compile(rows_summed_then_scaled()), x, x.sum(1) * 2 + 1)


@pytest.mark.parametrize("n", [1, 1000, 1 << 20, 300001])
def test_a_whole_sum_doubled_in_the_last_block(n):
    x = torch.randn(n, device="cuda")
    _twice(tp.compile(whole_sum_then_scaled()), x, x.sum() * 2)


def rows_plus_their_sums(serial_rows: bool):
    """T3 = T0 + broadcast(sum(T0, 1)), the row on [BIDx, TIDx{128}] in both: every block of a row
    reads its sum (an allreduce: a grid-wide barrier, launched cooperatively); rows on BIDy, or
    `serial_rows` a serial loop (the barrier entered once per row, a semaphore each)."""
    with tp.Fusion(f"rows_plus_their_sums_{'serial' if serial_rows else 'bidy'}") as fusion:
        t0 = tp.make_contig_tensor(2); fusion.add_input(t0)
        t1 = tp.sum(t0, [1])
        t3 = tp.add(t0, tp.broadcast(t1, [False, True])); fusion.add_output(t3)
    fusion.assume("T0_0 <= 65535")  # rows on BIDy
    t3.split(1, 128)
    tp.propagate_transforms(t3)
    if serial_rows:
        tp.inline_all_at(t3, 1)
    else:
        t3.axis(0).parallelize(P.BIDy)
    t3.axis(1).parallelize(P.BIDx)
    t3.axis(2).parallelize(P.TIDx)
    tp.parallelize_all_like(t3)
    return fusion


@pytest.mark.parametrize("serial_rows", [False, True], ids=["rows_on_bidy", "rows_in_a_loop"])
def test_an_allreduce_gives_every_block_its_rows_sum(serial_rows):
    """Three sizes (one not a multiple of 128), each launched twice: the second launch finds the
    barrier semaphores' bit 31 flipped by the first and waits for the next flip."""
    kernel = tp.compile(rows_plus_their_sums(serial_rows))
    assert kernel.ir.cooperative
    for shape in ((3, 1000), (1, 128), (17, 4097)):
        x = torch.randn(shape, device="cuda")
        _twice(kernel, x, x + x.sum(1, keepdim=True))


def test_an_allreduce_grid_too_large_to_be_resident_is_an_input_error():
    """4000 rows x 32 blocks cannot all be resident: an InputError naming the grid and the limit
    (blocks per SM x SMs), not a hang; a size that fits still runs afterwards."""
    kernel = tp.compile(rows_plus_their_sums(False))
    x = torch.randn(4000, 4096, device="cuda")
    with pytest.raises(tp.InputError, match=r"128000 blocks \(32 x 4000 x 1\).*at most \d+ \(\d+ blocks per SM x \d+ SMs"):
        kernel.run(x)
    y = torch.randn(5, 300, device="cuda")
    _twice(kernel, y, y + y.sum(1, keepdim=True))


def grouped_totals_read_together(op: str, dtype_of_second=None):
    """T3 = sum(T0, 1) + op(T0, 1) of [M, N] grouped (tp.group_reductions), the rows on BIDy and each
    row on [BIDx, TIDx{128}]: both grid reductions combine in one round (one semaphore), and T3,
    reading both totals, runs in its one last block. `dtype_of_second`: the second reduces T0 cast to
    it (a round of members of two dtypes, each with its own workspace)."""
    with tp.Fusion(f"grouped_totals_{op}_{dtype_of_second.name if dtype_of_second else 'f32'}") as fusion:
        t0 = tp.make_contig_tensor(2); fusion.add_input(t0)
        t1 = tp.sum(t0, [1])
        second = tp.cast(t0, dtype_of_second) if dtype_of_second else t0
        t2 = getattr(tp, op)(second, [1])
        fusion.add_output(tp.add(t1, tp.cast(t2, tp.float32) if dtype_of_second else t2))
    fusion.assume("T0_0 <= 65535")  # rows on BIDy
    tp.group_reductions([t1, t2])
    t1.split(1, 128)
    tp.propagate_transforms(t1)
    tp.inline_most(fusion)
    t1.axis(0).parallelize(P.BIDy)
    t1.axis(1).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.TIDx)
    tp.parallelize_all_like(t1)
    return fusion


@pytest.mark.parametrize("op, dtype", [("sum", None), ("max", None), ("sum", "float64")])
@pytest.mark.parametrize("shape", [(5, 1000), (33, 4097), (1, 128), (64, 100000)])
def test_a_reader_of_two_grouped_grid_totals(op, dtype, shape):
    """Issue 33 (nvFuser's GroupedReductionRfactor1/2, GroupedReductionReEntrant1): one round, one
    semaphore, one last block holding both totals; launched twice (the round's semaphore back at 0)."""
    kernel = tp.compile(grouped_totals_read_together(op, getattr(tp, dtype) if dtype else None))
    assert "tp_grid_arrive(" in kernel.cuda_source
    assert len([p for p in kernel.ir.params if p.kind.value == "semaphores"]) == 1
    x = torch.randn(shape, device="cuda")
    second = x.double().sum(1).float() if dtype else (x.sum(1) if op == "sum" else x.amax(1))
    _twice(kernel, x, x.sum(1) + second)


def grouped_allreduce_of_sum_and_max():
    """nvFuser's GroupAllreduce3 shape: T0 / sum(T0) and T0 - max(T0) of [N] on [BIDx, TIDx{128}], the
    two allreduces grouped: one grid-wide barrier for both (cooperative launch)."""
    with tp.Fusion("grouped_allreduce_of_sum_and_max") as fusion:
        t0 = tp.make_tensor([-1]); fusion.add_input(t0)
        t1, t2 = tp.sum(t0, [0]), tp.max(t0, [0])
        fusion.add_output(tp.div(t0, tp.broadcast(t1, [True])))
        fusion.add_output(tp.sub(t0, tp.broadcast(t2, [True])))
    tp.group_reductions([t1, t2])
    t1.split(0, 128)
    tp.propagate_transforms(t1)
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.TIDx)
    tp.parallelize_all_like(t1)
    return fusion


@pytest.mark.parametrize("n", [1, 999, 1000, 128 * 100 + 3])
def test_a_grouped_allreduce_meets_at_one_barrier(n):
    """Each launched twice: the round's one barrier semaphore flipped by the first launch, waited on
    for the next flip by the second."""
    kernel = tp.compile(grouped_allreduce_of_sum_and_max())
    assert kernel.ir.cooperative and kernel.cuda_source.count("  tp_grid_barrier(") == 1  # one call for both
    assert len([p for p in kernel.ir.params if p.kind.value == "semaphores"]) == 1
    x = torch.rand(n, device="cuda") + 0.5
    for _ in range(2):
        quotient, difference = kernel.run(x)
        torch.cuda.synchronize()
        torch.testing.assert_close(quotient, x / x.sum(), rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(difference, x - x.max(), rtol=1e-4, atol=1e-5)
