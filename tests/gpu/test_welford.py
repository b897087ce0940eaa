"""tp.welford and tp.var_mean on the GPU (marker `gpu`; skipped without PyTorch or a CUDA device)
against torch.var_mean in float64: a block per row with and without rfactor (a warp, 96 and 128
threads, rows shorter than the block: threads with empty states), float32 and float64, a
symbolic row length at four sizes, the exact counts, and a float32 row of large mean whose
variance E[x^2] - E[x]^2 would lose; a grid Welford (the row over BIDy blocks, with TIDx and rfactor
too: three workspaces, the last block's Chan combine) at sizes not multiples of the blocks, with
empty blocks, run twice (the semaphores back to 0) and bit-identical across launches, a large mean
too; a grid Welford allreduce (every block of a row reads its mean: a grid-wide barrier, a cooperative
launch, every block combining), launched three times; LayerNorm (recipes/normalization.py, one Welford) at rows of
several classes against F.layer_norm, with a large mean too. tests/codegen/test_codegen_welford.py
simulates the same schedules on the CPU."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import torch.nn.functional as F  # noqa: E402

import tileproof as tp  # noqa: E402
from tileproof.recipes import normalization as N  # noqa: E402

from support.welford_schedules import (block_welford, column_welford, grid_welford,  # noqa: E402
                                      grid_welford_read_everywhere, serial_welford)

pytestmark = pytest.mark.gpu
ROWS = [(3, 50), (7, 1000), (300, 4099), (64, 100003)]  # 50: fewer elements than threads


def _x(shape, dtype, offset=1.5, seed=21):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=gen, dtype=torch.float64) * 3 + offset).to(dtype).cuda()


def _check_welford(fusion, x, reduced_dim=1):
    avg, var_sum, n = tp.compile(fusion, "sm_90a").run(x)
    wide = x.double()
    var, mean = torch.var_mean(wide, dim=reduced_dim, correction=0)
    count = x.shape[reduced_dim]
    rtol = 1e-5 if x.dtype == torch.float32 else 1e-12
    torch.testing.assert_close(avg.double(), mean, rtol=rtol, atol=rtol * 4)
    torch.testing.assert_close(var_sum.double(), var * count, rtol=rtol * 10, atol=rtol * count)
    assert torch.all(n.double() == count)  # each element's count, exact


@pytest.mark.parametrize("m, length", ROWS, ids=str)
@pytest.mark.parametrize("threads, rfactor", [(32, True), (96, True), (128, True), (128, False)])
def test_a_block_welford_matches_torch(m, length, threads, rfactor):
    _check_welford(block_welford(threads, rfactor=rfactor), _x((m, length), torch.float32))


@pytest.mark.parametrize("m, length", ROWS, ids=str)
def test_a_float64_welford_matches_torch(m, length):
    _check_welford(block_welford(64, dtype="float64"), _x((m, length), torch.float64))


def test_a_row_per_thread_and_a_column_welford_match_torch():
    _check_welford(serial_welford(32), _x((1000, 77), torch.float32))
    _check_welford(column_welford(32, 8), _x((1003, 96), torch.float32), reduced_dim=0)


@pytest.mark.parametrize("correction", [0, 1])
@pytest.mark.parametrize("m, length", ROWS, ids=str)
def test_var_mean_matches_torch(m, length, correction):
    with tp.Fusion(f"var_mean_{correction}") as fusion:
        t0 = tp.make_tensor(["M", "N"], contiguity=True, dtype=tp.float32)
        fusion.add_input(t0)
        var, mean = tp.var_mean(t0, [1], correction=correction)
        fusion.add_output(var)
        fusion.add_output(mean)
    mean.split(1, 128)
    mean.rfactor([1])
    tp.propagate_transforms(mean)
    mean.axis(0).parallelize(tp.ParallelType.BIDx)
    mean.axis(-1).parallelize(tp.ParallelType.TIDx)
    tp.parallelize_all_like(mean)
    tp.inline_most(fusion)
    x = _x((m, length), torch.float32)
    got_var, got_mean = tp.compile(fusion, "sm_90a").run(x)
    want_var, want_mean = torch.var_mean(x.double(), dim=1, correction=correction)
    torch.testing.assert_close(got_mean.double(), want_mean, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got_var.double(), want_var, rtol=1e-4, atol=1e-5)


def test_a_large_mean_keeps_its_variance():
    x = _x((64, 4099), torch.float32, offset=1.0e4) / 3  # mean about 3333, variance 1
    _, var_sum, n = tp.compile(block_welford(128), "sm_90a").run(x)
    var = var_sum.double() / n.double()
    want = torch.var(x.double(), dim=1, correction=0)
    assert ((var - want).abs() / want).max().item() < 1e-3
    naive = (x * x).mean(1) - x.mean(1) ** 2  # E[x^2] - E[x]^2 in float32: cancels
    assert ((naive.double() - want).abs() / want).max().item() > 1e-2


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("shape", [(7, 1000), (300, 4096), (64, 8200), (33, 32768), (2, 100008)], ids=str)
def test_layer_norm_matches_torch(shape, dtype):
    n = shape[-1]
    for offset in (0.0, 100.0):  # an offset row: its variance from one Welford pass
        x = _x(shape, dtype, offset=offset)
        w, b = _x((n,), dtype, seed=22), _x((n,), dtype, seed=23)
        want = F.layer_norm(x.double(), (n,), w.double(), b.double(), 1e-5)
        got = N.layer_norm(x, w, b, 1e-5)
        tol = 2 ** -6 if dtype == torch.bfloat16 else 1e-4
        err = (got.double() - want).abs().max().item()
        assert err <= tol * max(1.0, want.abs().max().item()), f"offset {offset}: max |got - want| = {err:.3g}"


GRID_ROWS = [(3, 7), (5, 1000), (130, 4099), (2, 100003)]  # 7 < 4 * 32: blocks and threads with empty states


@pytest.mark.parametrize("m, length", GRID_ROWS, ids=str)
@pytest.mark.parametrize("blocks, threads, rfactor", [(4, None, False), (5, 32, False), (3, 128, True), (16, 64, True)],
                         ids=str)
def test_a_grid_welford_matches_torch(m, length, blocks, threads, rfactor):
    kernel = tp.compile(grid_welford(blocks, threads, rfactor), "sm_90a")
    x = _x((m, length), torch.float32)
    first = kernel.run(x)
    _check_welford(grid_welford(blocks, threads, rfactor), x)
    second = kernel.run(x)  # the next launch: every semaphore back to 0, the rank-ordered combine the same bits
    for a, b in zip(first, second):
        assert torch.equal(a, b)


def test_a_grid_welford_var_mean_keeps_a_large_means_variance():
    x = _x((64, 4099), torch.float32, offset=1.0e4) / 3  # mean about 3333, variance 1
    var, mean = tp.compile(grid_welford(8, 128, True, outputs="var_mean"), "sm_90a").run(x)
    want_var, want_mean = torch.var_mean(x.double(), dim=1, correction=1)
    assert ((var.double() - want_var).abs() / want_var).max().item() < 1e-3
    torch.testing.assert_close(mean.double(), want_mean, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("m, length", [(3, 7), (5, 1000), (64, 4099), (2, 100003)], ids=str)
@pytest.mark.parametrize("blocks, threads, centered_sum", [(4, None, False), (5, 32, True), (16, 64, True)], ids=str)
def test_a_grid_welford_allreduce_gives_every_block_the_rows_moments(m, length, blocks, threads, centered_sum):
    """x - mean (times the centered sum of squares) with the row's blocks on BIDy: every block combines
    the states after the grid-wide barrier (a cooperative launch); launched three times, the barrier's
    semaphore flips and comes back, and the same bits come out."""
    kernel = tp.compile(grid_welford_read_everywhere(blocks, threads, centered_sum), "sm_90a")
    x = _x((m, length), torch.float32)
    xd = x.double()
    want = xd - xd.mean(dim=1, keepdim=True)
    if centered_sum:
        want = want * (want ** 2).sum(dim=1, keepdim=True)
    outs = [kernel.run(x)[0] for _ in range(3)]
    torch.cuda.synchronize()
    scale = want.abs().max().item()
    torch.testing.assert_close(outs[0].double(), want, rtol=1e-4, atol=1e-5 * scale)
    assert all(torch.equal(outs[0], o) for o in outs[1:])
