"""Unswitch loops on the GPU (marker `gpu`; skipped without PyTorch or a CUDA device): each kernel
tests one guard per Unswitch nest and runs it without the hole predicates where the block's tile is
whole, else with them (codegen/lower/whole_tile.py). Sizes put whole tiles beside partial ones (a
tile's end, one past it, fewer elements than one tile); outputs are poisoned with NaN first, so an
element the fast path skipped or one past the end that it wrote shows."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp
from support.unswitch_schedules import (
    unswitched_copy_chain,
    unswitched_exp,
    unswitched_row_sum,
)

pytestmark = pytest.mark.gpu
SIZES = [1, 511, 512, 513, 4096, 70001]


def _run_exp(fusion, reference):
    kernel = tp.compile(fusion, "sm_90a")
    for m in SIZES:
        t0 = torch.randn(m + 7, device="cuda")[:m]  # 7 guard elements past the end stay untouched
        out = torch.full((m + 7,), float("nan"), device="cuda")
        kernel.run(t0, out=[out[:m]])
        torch.cuda.synchronize()
        torch.testing.assert_close(out[:m], reference(t0), rtol=1e-5, atol=1e-5)
        assert torch.isnan(out[m:]).all(), m


@pytest.mark.parametrize("unswitch,unroll", [(4, None), (4, 2), (1, None), (3, 4)])
def test_an_unswitched_exp_matches_torch(unswitch, unroll):
    _run_exp(unswitched_exp(unswitch, unroll), torch.exp)


@pytest.mark.parametrize("unroll", [None, 4])
def test_an_unswitch_loop_of_symbolic_extent_matches_torch(unroll):
    _run_exp(unswitched_exp(unroll=unroll, symbolic=True), torch.exp)


def test_an_unswitched_copy_chain_matches_torch():
    _run_exp(unswitched_copy_chain(2), lambda t: t + 1)


@pytest.mark.parametrize("shape", [(3, 128), (5, 1000), (2, 4097), (7, 1)])
def test_an_unswitched_row_sum_matches_torch(shape):
    kernel = tp.compile(unswitched_row_sum(4), "sm_90a")
    t0 = torch.randn(*shape, device="cuda")
    out = torch.full((shape[0],), float("nan"), device="cuda")
    kernel.run(t0, out=[out])
    torch.cuda.synchronize()
    torch.testing.assert_close(out, t0.sum(1), rtol=1e-4, atol=1e-4)
