"""recipes/normalization.py on the GPU (marker `gpu`; skipped without PyTorch or a CUDA device):
softmax, log_softmax, layer_norm, rms_norm and cross_entropy against PyTorch at rows of several
classes (one vector per thread up to eight, rows that end mid-block and mid-thread, a 3-D input;
looped rows from 16384 elements on for softmax, LayerNorm and cross-entropy, and past what a block
holds for all, with a partial last step),
in bfloat16 and float32; the entries through tp.as_torch_op and torch.compile."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import torch.nn.functional as F  # noqa: E402

import tileproof as tp  # noqa: E402
from tileproof.recipes import normalization as N  # noqa: E402

pytestmark = pytest.mark.gpu
SHAPES = [(7, 1000), (300, 4096), (64, 8200), (33, 32768), (2, 3, 2048), (5, 20000), (2, 100008)]
DTYPES = [torch.bfloat16, torch.float32]


def _close(got, want, dtype):
    tol = 2 ** -6 if dtype == torch.bfloat16 else 1e-5
    scale = max(1.0, want.abs().max().item())
    err = (got.float() - want.float()).abs().max().item()
    assert err <= tol * scale, f"max |got - want| = {err:.3g}"


def _x(shape, dtype):
    return (torch.randn(*shape, device="cuda") * 3).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_softmax_and_log_softmax(shape, dtype):
    x = _x(shape, dtype)
    _close(N.softmax(x), torch.softmax(x.float(), -1), dtype)
    _close(N.log_softmax(x), torch.log_softmax(x.float(), -1), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_layer_norm_and_rms_norm(shape, dtype):
    x = _x(shape, dtype)
    n = shape[-1]
    w, b = torch.randn(n, device="cuda").to(dtype), torch.randn(n, device="cuda").to(dtype)
    _close(N.layer_norm(x, w, b, 1e-5), F.layer_norm(x.float(), (n,), w.float(), b.float(), 1e-5), dtype)
    rms = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
    _close(N.rms_norm(x, w, 1e-6), rms, dtype)


@pytest.mark.parametrize("shape", [(300, 4096), (33, 32768), (5, 20000)], ids=str)
def test_layer_norm_and_rms_norm_without_weights(shape):
    x = _x(shape, torch.bfloat16)
    n = shape[-1]
    w = torch.randn(n, device="cuda").to(torch.bfloat16)
    _close(N.layer_norm(x, None, None, 1e-5), F.layer_norm(x.float(), (n,), None, None, 1e-5), torch.bfloat16)
    _close(N.layer_norm(x, w, None, 1e-5), F.layer_norm(x.float(), (n,), w.float(), None, 1e-5), torch.bfloat16)
    rms = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)
    _close(N.rms_norm(x, None, 1e-6), rms, torch.bfloat16)


def test_the_longest_bfloat16_rows():
    """65536 elements: 8 vectors of 8 per thread, 1024 threads."""
    x = _x((5, 65536), torch.bfloat16)
    w = torch.randn(65536, device="cuda").to(torch.bfloat16)
    _close(N.softmax(x), torch.softmax(x.float(), -1), torch.bfloat16)
    rms = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
    _close(N.rms_norm(x, w), rms, torch.bfloat16)


@pytest.mark.parametrize("shape", [(7, 1000), (300, 4096), (33, 32768), (5, 20000)], ids=str)
def test_cross_entropy_with_probabilities_and_one_hot_targets(shape):
    x = _x(shape, torch.bfloat16)
    p = torch.softmax(torch.randn(*shape, device="cuda"), -1).to(torch.bfloat16)
    want = F.cross_entropy(x.float(), p.float(), reduction="none")
    got = N.cross_entropy(x, p)
    assert got.dtype == torch.float32 and got.shape == shape[:-1]
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-3)
    labels = torch.randint(0, shape[-1], shape[:-1], device="cuda")
    one_hot = F.one_hot(labels, shape[-1]).to(torch.bfloat16)
    torch.testing.assert_close(N.cross_entropy(x, one_hot), F.cross_entropy(x.float(), labels, reduction="none"),
                               rtol=1e-4, atol=1e-3)


def test_the_entries_as_torch_ops_under_torch_compile():
    softmax = tp.as_torch_op(N.Softmax(), name="tileproof_test::softmax")
    rms = tp.as_torch_op(N.RMSNorm(1e-6), name="tileproof_test::rms_norm")
    x, w = _x((128, 4096), torch.bfloat16), torch.randn(4096, device="cuda").to(torch.bfloat16)

    @torch.compile
    def block(x, w):
        return softmax(rms(x, w) * 2)

    # the RMSNorm's output is bfloat16, and so is its double: the softmax's logits carry that rounding
    normed = (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(torch.bfloat16)
    want = torch.softmax((normed * 2).float(), -1)
    _close(block(x, w), want, torch.bfloat16)
