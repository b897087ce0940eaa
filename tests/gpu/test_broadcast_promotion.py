"""Loop promotion of a broadcast operand on the GPU (marker `gpu`; skipped without PyTorch or a
CUDA device): out = broadcast(a) + b with a's cache and broadcast inlined into out's merged
[BIDx, TIDx] loops (tests/support/broadcast_promotion.py). Each kernel runs into an output
poisoned with NaN at sizes with and without a partial tile and a row not a multiple of the tile,
against PyTorch bit for bit; a register cache inlined past its consumer's broadcast axis likewise."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402

from support.broadcast_promotion import broadcast_add, cache_past_broadcast  # noqa: E402

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


CACHE_SHAPES = [(5, 7, 100), (3, 32, 64), (2, 1, 33), (4, 5, 1)]


@pytest.mark.parametrize("shape", CACHE_SHAPES)
def test_a_cache_inlined_past_the_broadcast_matches_torch(shape):
    """a's register cache [M, K] inlined into broadcast(a) [M, 1, K] past its broadcast axis, so it
    runs inside out's TIDy loop (tests/support/broadcast_promotion.py cache_past_broadcast)."""
    kernel = tp.compile(cache_past_broadcast(shape)[0])
    m, n, k = shape
    a, b = torch.randn(m, k, device="cuda"), torch.randn(m, n, k, device="cuda")
    out = torch.full(shape, float("nan"), device="cuda")
    kernel.run(a, b, out=[out])
    torch.cuda.synchronize()
    assert torch.equal(out, a[:, None, :] + b)


def test_the_symbolic_cache_past_the_broadcast_matches_torch_at_every_size():
    kernel = tp.compile(cache_past_broadcast()[0])
    for m, n, k in CACHE_SHAPES:
        a, b = torch.randn(m, k, device="cuda"), torch.randn(m, n, k, device="cuda")
        out = torch.full((m, n, k), float("nan"), device="cuda")
        kernel.run(a, b, out=[out])
        torch.cuda.synchronize()
        assert torch.equal(out, a[:, None, :] + b), (m, n, k)
