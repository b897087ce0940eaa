"""Rotated loops on the GPU (marker `gpu`; skipped without PyTorch or a CUDA device): the kernels of
tests/support/rotated_schedules.py compute what their unrotated ops mean, at sizes whose loops run
once, with a partial last tile, and many times (the rotated statements' guard i + 1 < extent, and
the prologue's 0 < extent)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp
from support.rotated_schedules import rotated_flat, rotated_rows

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("rotated", [(1,), (1, 2), (1, 2, 3)])
@pytest.mark.parametrize("m,n", [(3, 1), (5, 32), (7, 33), (2, 1000)])
def test_a_rotated_row_loop_computes_exp_plus_x(rotated, m, n):
    kernel = tp.compile(rotated_rows(f"rotated_rows_{len(rotated)}", rotated)[0], "sm_90a")
    x = torch.randn(m, n, device="cuda")
    out = torch.full((m, n), float("nan"), device="cuda")
    kernel.run(x, out=[out])
    torch.cuda.synchronize()
    torch.testing.assert_close(out, torch.exp(x) + x, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("m,n", [(1, 1), (3, 200), (64, 1000)])
def test_a_rotated_load_of_a_strided_input_doubles_it(m, n):
    kernel = tp.compile(rotated_flat("rotated_flat")[0], "sm_90a")
    x = torch.randn(n, m, device="cuda").t()  # strided: x[i, j] at j * m + i
    out = torch.full((m, n), float("nan"), device="cuda")
    kernel.run(x, out=[out])
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x * 2, rtol=0, atol=0)
