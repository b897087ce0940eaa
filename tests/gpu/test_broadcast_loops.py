"""Loops over split broadcast axes that run once on the GPU (marker `gpu`; skipped without PyTorch or
a CUDA device): a TMA tile whose loop domain keeps its broadcast split into loops of its own
(tests/support/broadcast_loops.py), issued once per block on an mbarrier counting one copy (before
issue 33 item 9 the kernel looped over them), and a shared-memory copy inside such loops. Each runs
into an output poisoned with NaN and is compared with PyTorch bit for bit. The translated
MatmulWithBroadcastedInput cases run in tests/gpu/test_nvfuser.py."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402

from support.broadcast_loops import shared_broadcast_loops, tma_broadcast_loops  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("split", [4, 32])
@pytest.mark.parametrize("m,n", [(8, 32), (100, 260), (1000, 1028), (3, 4)])
def test_a_tma_tile_in_loops_over_its_split_broadcast_is_copied_once_per_block(split, m, n):
    kernel = tp.compile(tma_broadcast_loops(split=split)[0], "sm_90a")
    x = torch.randn(m, 1, n, device="cuda")
    out = torch.full((m, 1, n), float("nan"), device="cuda")
    kernel.run(x, out=[out])
    torch.cuda.synchronize()
    assert torch.equal(out, x)


@pytest.mark.parametrize("m,n", [(8, 32), (64, 96), (17, 68)])
def test_the_concrete_tma_tile_is_copied_once_per_block(m, n):
    kernel = tp.compile(tma_broadcast_loops(split=4, shape=(m, n))[0], "sm_90a")
    x = torch.randn(m, 1, n, device="cuda")
    out = torch.full((m, 1, n), float("nan"), device="cuda")
    kernel.run(x, out=[out])
    torch.cuda.synchronize()
    assert torch.equal(out, x)


def test_a_shared_copy_in_loops_over_a_split_broadcast_is_exact():
    kernel = tp.compile(shared_broadcast_loops(allocation_merge=False)[0], "sm_90a")
    for _ in range(3):
        x = torch.randn(32, 1, device="cuda")
        out = torch.full((32, 1), float("nan"), device="cuda")
        kernel.run(x, out=[out])
        torch.cuda.synchronize()
        assert torch.equal(out, x)
