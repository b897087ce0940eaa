"""Loop promotion of a broadcast operand on the GPU (marker `gpu`; skipped without PyTorch or a
CUDA device): out = broadcast(a) + b with a's cache and broadcast inlined into out's merged
[BIDx, TIDx] loops (tests/support/broadcast_promotion.py). Each kernel runs into an output
poisoned with NaN at sizes with and without a partial tile and a row not a multiple of the tile,
against PyTorch bit for bit."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402

from support.broadcast_promotion import broadcast_add  # noqa: E402

pytestmark = pytest.mark.gpu
SHAPES = [(6, 300), (32, 128), (7, 1001), (1, 5)]


@pytest.mark.parametrize("shape", SHAPES)
def test_a_concrete_broadcast_add_matches_torch(shape):
    kernel = tp.compile(broadcast_add(shape)[0])
    a, b = torch.randn(shape[1], device="cuda"), torch.randn(*shape, device="cuda")
    out = torch.full(shape, float("nan"), device="cuda")
    kernel.run(a, b, out=[out])
    torch.cuda.synchronize()
    assert torch.equal(out, a + b)


def test_the_symbolic_broadcast_add_matches_torch_at_every_size():
    kernel = tp.compile(broadcast_add()[0])
    for shape in SHAPES:
        a, b = torch.randn(shape[1], device="cuda"), torch.randn(*shape, device="cuda")
        out = torch.full(shape, float("nan"), device="cuda")
        kernel.run(a, b, out=[out])
        torch.cuda.synchronize()
        assert torch.equal(out, a + b), shape
