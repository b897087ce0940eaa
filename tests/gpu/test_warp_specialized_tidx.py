"""Warp specialization on TIDx on the GPU (marker `gpu`; skipped without PyTorch or a CUDA device):
the block is launched 128 threads wider on TIDx than the fusion binds (nvFuser's padding), the
producer is threadIdx.x >= bdimx (its first thread issues the TMA loads), the consumer threads
read the stages and release each after their reads. Each kernel runs at 3+ sizes, whole and
partial last tiles, against PyTorch: exp of 1-D tiles (with and without setmaxnreg, 256 and
128 consumers) and row sums whose block reduction spans the consumer role only. Also TIDy over a
TIDx of 64, 32 or 16 threads, padded by 2, 4 or 8 TIDy indices (the producer's one warpgroup,
threadIdx.y >= the consumers' rows, its thread (threadIdx.y == rows, threadIdx.x == 0) issuing)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402

from support.row_sums import row_sums  # noqa: E402
from support.tma_exp_tiles import exp_tiles  # noqa: E402
from support.ws_rows import exp_rows  # noqa: E402

pytestmark = pytest.mark.gpu
P = tp.ParallelType


def _tidx(stages, prefetch, num_registers=None):
    return lambda s: s.circular_buffer(stages, prefetch, tp.WarpSpecialized(P.TIDx, num_registers))


@pytest.mark.parametrize("stages, prefetch, registers, tile", [(4, 2, None, 256), (2, 1, None, 256),
                                                               (4, 1, (64, 192), 256), (3, 1, None, 128)])
def test_exp_of_tiles_read_by_tidx_consumers(stages, prefetch, registers, tile):
    kernel = tp.compile(exp_tiles(_tidx(stages, prefetch, registers), tile=tile), "sm_90a")
    assert kernel.launch_params.block[0] == tile + 128  # the producer's 128 threads after the consumers
    for n in (4096, 5000, 70001):
        a = torch.randn(n, device="cuda")
        (out,) = kernel.run(a)
        torch.cuda.synchronize()
        torch.testing.assert_close(out, a.exp(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(128, 1024), (7, 2052), (300, 260), (3, 4)])
def test_row_sums_of_tidx_consumers_combine_in_their_role(shape):
    kernel = tp.compile(row_sums(_tidx(4, 2)), "sm_90a")
    a = torch.randn(*shape, device="cuda")
    (out,) = kernel.run(a)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, a.sum(-1), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("width, rows, registers", [(64, 4, None), (64, 4, (40, 232)), (64, 2, None),
                                                     (32, 8, None), (16, 8, None)])
def test_exp_of_tiles_read_by_tidy_rows_over_a_narrow_tidx(width, rows, registers):
    kernel = tp.compile(exp_rows(width, rows, num_registers=registers), "sm_90a")
    assert kernel.launch_params.block[:2] == (width, rows + 128 // width)  # the producer's TIDy indices after them
    for n in (width * rows * 16, 5000, 70001):
        a = torch.randn(n, device="cuda")
        (out,) = kernel.run(a)
        torch.cuda.synchronize()
        torch.testing.assert_close(out, a.exp(), rtol=1e-5, atol=1e-5)
