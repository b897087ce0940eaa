"""Circular buffers of plain copies into shared memory on the GPU (marker `gpu`; skipped without
PyTorch or a CUDA device): examples/valid/circular_copies.py's transposed tiles, written by one
thread and read by another, with three stages two ahead and with no prefetch; exact copies into
outputs poisoned with NaN, at sizes the tile divides and does not, run twice (stale stages)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402

from support.examples import example_module  # noqa: E402

pytestmark = pytest.mark.gpu
EXAMPLES = example_module("valid", "circular_copies")


@pytest.mark.parametrize("name", ["transposed_tile_three_stages", "transposed_tile_no_prefetch"])
@pytest.mark.parametrize("m, k", [(64, 256), (37, 100), (8, 32), (1000, 33), (3, 1)])
def test_the_transposed_tiles_are_copied_exactly(name, m, k):
    kernel = tp.compile(getattr(EXAMPLES, name)())
    for _ in range(2):
        a = torch.randn(m, k, device="cuda")
        out = torch.full((m, k), float("nan"), device="cuda")
        kernel.run(a, out=[out])
        torch.cuda.synchronize()
        assert torch.equal(out, a)
