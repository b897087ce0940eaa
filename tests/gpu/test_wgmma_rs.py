"""wgmma with A in registers (RS) on the GPU (marker `gpu`; skipped without PyTorch or a CUDA
device): tests/support/rs_wgmma.py at four sizes (N = 8, 64, 256, 128; K loops of 1 to 16 steps of
16; 1 to 3 blocks of 64 rows) against torch. Each thread loads its A fragment (hw/mma.py
wgmma_a16_position, proved by MMA-OPERAND-LAYOUT) into registers inside the K loop; B comes by one
TMA, or 16 of K an iteration through a TMA circular buffer (whose refills would keep a batch in
flight, but the next A load waits for it: WGMMA-ASYNC-ORDER); the output is poisoned with NaN
first, so an element nobody stores fails too. Then the
layout probe: A = the row-major index of each element, B = one-hot columns, so out[:, j] is A's
column j exactly, which a permuted fragment cannot reproduce.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402
from support.rs_wgmma import rs_wgmma  # noqa: E402

pytestmark = pytest.mark.gpu
SIZES = [(8, 16, 1, None), (64, 32, 2, None), (256, 128, 3, 4), (128, 256, 2, 3)]  # (n, k, blocks, B's stages)


def _run(n, k, blocks, stages, a, b):
    fusion, *_ = rs_wgmma(f"rs_wgmma_{n}_{k}_{blocks}", n, k, blocks=blocks, stages=stages)
    kernel = tp.compile(fusion, "sm_90a")
    out = torch.full((64 * blocks, n), float("nan"), device="cuda", dtype=torch.float32)
    (got,) = kernel.run(a, b, out=[out])
    torch.cuda.synchronize()
    return got


@pytest.mark.parametrize("n, k, blocks, stages", SIZES)
def test_rs_wgmma_matches_torch(n, k, blocks, stages):
    torch.manual_seed(n + k + blocks)
    a = torch.randn(64 * blocks, 1, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(1, n, k, device="cuda", dtype=torch.bfloat16)
    out = _run(n, k, blocks, stages, a, b)
    want = (a.double() * b.double()).sum(-1).float()  # bfloat16 products are exact in float32
    torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("n, k, blocks, stages", SIZES)
def test_each_thread_hands_the_instruction_its_own_a_elements(n, k, blocks, stages):
    """A holds each element's index in its 64-row block tile, B selects column j % k for output
    column j: out[m, j] must be exactly A[m, j % k] (integers below 2^8 are exact in bfloat16)."""
    m = 64 * blocks
    a = (torch.arange(m * k, device="cuda") % 251).reshape(m, 1, k).to(torch.bfloat16)
    b = torch.zeros(1, n, k, device="cuda", dtype=torch.bfloat16)
    cols = torch.arange(n, device="cuda")
    b[0, cols, cols % k] = 1
    out = _run(n, k, blocks, stages, a, b)
    want = a[:, 0, :].float()[:, cols % k]
    assert torch.equal(out, want), (out != want).nonzero()[:8].tolist()
