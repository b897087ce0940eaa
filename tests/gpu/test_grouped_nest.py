"""Grouped reductions in one loop nest on the GPU (marker `gpu`; skipped without PyTorch or a CUDA
device): a sum and a max of one inlined producer (T0 + 1), rfactored and grouped, share the loop
that computes the producer once (tests/support/grouped_schedules.py). Each run writes into an
output poisoned with NaN and is checked against PyTorch at divisible and indivisible row lengths
and a row shorter than the thread tile."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402

from support.grouped_schedules import shared_producer_sum_and_max  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("tile", [8, 128])
@pytest.mark.parametrize("m, n", [(64, 1024), (37, 999), (5, 3)])
def test_a_producer_shared_by_grouped_reductions_gives_both_totals(tile, m, n):
    kernel = tp.compile(shared_producer_sum_and_max(tile=tile), "sm_90a")
    x = torch.randn(m, n, device="cuda")
    out = torch.full((m,), float("nan"), device="cuda")
    kernel.run(x, out=[out])
    torch.cuda.synchronize()
    y = x + 1.0
    torch.testing.assert_close(out, y.sum(1) + y.amax(1), rtol=1e-5, atol=1e-4)
