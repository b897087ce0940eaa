"""cp.async kernels on the GPU (marker `gpu`; skipped without PyTorch or a CUDA device).

The K loops of examples/valid/cp_async.py add two [M, K] tensors whose tiles are copied into
shared memory by cp.async, plain or circular-buffered (2 to 4 stages): the sums must equal
PyTorch's bit for bit (one fp32 / bf16 add), into outputs poisoned with NaN, for sizes the
16 x 32 tile divides and sizes it does not (the last tile's columns past K and rows past M are
copied with src-size 0: zeros, no global read), and K loops shorter than a pipeline's prologue.
The issue's rejected pipeline (prefetch equal to the stage count), built anyway, is run too: it
reads tiles already refilled with later data.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402
from tileproof.schedule_files import discover  # noqa: E402

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]
VALID = {c.name: c for c in discover([str(ROOT / "examples" / "valid" / "cp_async.py")])}
TORCH = {"float32": torch.float32, "bfloat16": torch.bfloat16}

# (M, K): the tile divides both; K not a multiple of the 32-column tile; M not a multiple of the rows;
# one tile; fewer columns than one tile
SIZES = [(64, 128), (37, 100), (5, 36), (16, 32), (3, 4), (130, 1000)]


K_LOOPS = ["k_loop_sum_cg_16_bytes", "k_loop_sum_ca_8_bytes", "k_loop_sum_ca_4_bytes_any_k", "k_loop_sum_double_buffered",
           "k_loop_sum_three_stages_prefetch_one", "k_loop_sum_four_stages_bf16", "k_loop_sum_pipelined_any_k",
           "k_loop_sum_inlined_most_circular"]


@pytest.mark.parametrize("name", K_LOOPS)
@pytest.mark.parametrize("m,k", SIZES)
def test_k_loop_sum(name, m, k):
    fusion = VALID[name].build()
    dtype = TORCH[fusion.inputs[0].dtype.name]
    kernel = tp.compile(fusion)
    a = torch.randn(m, k, device="cuda").to(dtype)
    b = torch.randn(m, k, device="cuda").to(dtype)
    out = torch.full((m, k), float("nan"), device="cuda", dtype=dtype)
    kernel.run(a, b, out=[out])
    torch.cuda.synchronize()
    assert torch.equal(out, a + b)


@pytest.mark.parametrize("name", ["k_loop_sum_ca_4_bytes_any_k", "k_loop_sum_pipelined_any_k"])
def test_k_loop_sum_any_k_with_odd_columns(name):
    """4-byte copies need no assumption on K: K = 33, 7, 1 (one K tile: the pipeline's prologue copies
    less than it prefetches)."""
    kernel = tp.compile(VALID[name].build())
    for m, k in [(9, 33), (4, 7), (1, 1)]:
        a, b = torch.randn(m, k, device="cuda"), torch.randn(m, k, device="cuda")
        (out,) = kernel.run(a, b)
        torch.cuda.synchronize()
        assert torch.equal(out, a + b), (m, k)


def test_cache_after_copy():
    kernel = tp.compile(VALID["cache_after_copy"].build())
    x = torch.randn(64, 64, device="cuda")
    out = torch.full_like(x, float("nan"))
    kernel.run(x, out=[out])
    torch.cuda.synchronize()
    assert torch.equal(out, x)


def test_a_misaligned_input_is_refused_at_launch():
    """16-byte copies read from the tensor's base: run() refuses a base not 16-byte aligned
    (CPASYNC-ALIGN proves the offsets from the base)."""
    kernel = tp.compile(VALID["k_loop_sum_cg_16_bytes"].build())
    buf = torch.randn(16 * 64 + 1, device="cuda")
    a = buf[1:].view(16, 64)
    with pytest.raises(tp.InputError, match="aligned"):
        kernel.run(a, a.clone())


def test_ldmatrix_from_a_circular_buffer():
    """cp.async tiles, 2 stages, read by ldmatrix.x1 (tests/rules/test_pipeline.py): a copy, exact."""
    from rules.test_pipeline import ldmatrix_from_a_circular_buffer

    kernel = tp.compile(ldmatrix_from_a_circular_buffer(tiles=6))
    x = torch.randn(8, 48, device="cuda").half()
    out = torch.full_like(x, float("nan"))
    kernel.run(x, out=[out])
    torch.cuda.synchronize()
    assert torch.equal(out, x)
