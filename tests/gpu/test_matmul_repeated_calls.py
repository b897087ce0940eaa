"""recipes.matmul's repeated calls on the GPU (marker `gpu`; skipped without PyTorch or a CUDA
device): calls whose tensors have an earlier call's signature (the plan cache of Matmul: the checks
and the choice skipped) compute each call's own product, in every major, split-K and persistent,
with a bias; calls at an earlier call's addresses (its packed launches reused, split-K's partials
shared, a buffer per shape, let go past a byte budget) compute the memory's new contents into a new
output, on each stream; a misaligned operand of a cached signature is refused."""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402
from tileproof.recipes import EpilogueOps, Matmul, matmul  # noqa: E402

from gpu.test_torch_op import operands, reference  # noqa: E402  (operands of each major, the float64 product)

pytestmark = pytest.mark.gpu
MAJORS = [("K", "K"), ("K", "MN"), ("MN", "K"), ("MN", "MN")]


@pytest.mark.parametrize("a_major,b_major", MAJORS)
@pytest.mark.parametrize("m,n,k", [(16, 512, 4096), (256, 512, 256)], ids=["split_k", "persistent"])
def test_each_call_of_a_cached_signature_computes_its_own_product(a_major, b_major, m, n, k):
    entry = Matmul(out_dtype=torch.float32)
    for _ in range(3):
        a, b = operands(a_major, b_major, m, n, k)
        torch.testing.assert_close(entry(a, b), reference(a, b), atol=1e-2 * k ** 0.5, rtol=1e-3)
    assert len(entry._plans) == 1
    assert entry.choice(a_major, b_major, m, n, k).config.split_k == (m == 16)


@pytest.mark.parametrize("m,n,k", [(16, 512, 4096), (256, 512, 256)], ids=["split_k", "persistent"])
def test_calls_at_the_same_addresses_compute_the_new_contents_into_new_outputs(m, n, k):
    entry = Matmul(out_dtype=torch.float32, epilogue=EpilogueOps(bias="column"))
    a, b = operands("K", "MN", m, n, k)
    bias = torch.randn(n, device="cuda")  # float32: the kernel reads the caller's memory
    results = []
    for _ in range(3):
        a.copy_(torch.randn_like(a))
        results.append((entry(a, b, bias), reference(a, b) + bias))
    assert len(entry._ready) == 1  # the second and third calls launched the first one's packed launches
    for d, want in results:  # each call's output its own, not overwritten by the next call
        torch.testing.assert_close(d, want, atol=1e-2 * k ** 0.5, rtol=1e-3)


def test_calls_at_the_same_addresses_on_two_streams_each_compute_the_product():
    entry = Matmul(out_dtype=torch.float32)
    a, b = operands("K", "K", 16, 512, 4096)
    want = reference(a, b)
    streams = torch.cuda.Stream(), torch.cuda.Stream()
    outputs = []
    torch.cuda.synchronize()
    for _ in range(4):
        for stream in streams:
            with torch.cuda.stream(stream):
                outputs.append(entry(a, b))
    torch.cuda.synchronize()
    assert len(entry._ready) == 2  # one set of packed launches (and partials) per stream
    for d in outputs:
        torch.testing.assert_close(d, want, atol=1e-2 * 64, rtol=1e-3)


def test_a_shape_class_s_kernels_keep_a_partials_buffer_per_shape():
    entry = Matmul(out_dtype=torch.float32, config="128x128_split_k", specialize=False)  # one split-K, every shape
    shapes = [(16, 512, 4096), (32, 256, 4096), (16, 512, 4096)]
    for m, n, k in shapes:
        a, b = operands("K", "K", m, n, k)
        for _ in range(2):
            torch.testing.assert_close(entry(a, b), reference(a, b), atol=1e-2 * 64, rtol=1e-3)
    assert len(entry._kernels) == 1 and len(entry._partials) == 2


def test_partials_past_the_byte_budget_are_let_go_with_their_launches(monkeypatch):
    recipe = sys.modules[Matmul.__module__]  # recipes/matmul.py (tileproof.recipes.matmul is the function)
    entry = Matmul(out_dtype=torch.float32, config="128x128_split_k")
    a1, b1 = operands("K", "K", 16, 512, 4096)
    a2, b2 = operands("K", "K", 32, 512, 4096)
    entry(a1, b1)
    (held,) = entry._partials.values()
    monkeypatch.setattr(recipe, "PARTIALS_BYTES", held.numel() * held.element_size() + 1)  # one buffer
    torch.testing.assert_close(entry(a2, b2), reference(a2, b2), atol=1e-2 * 64, rtol=1e-3)
    assert len(entry._partials) == 1 and len(entry._ready) == 1  # the first shape's buffer and launches let go
    for a, b in ((a1, b1), (a2, b2), (a1, b1)):  # each call right, the buffers taken in turn
        torch.testing.assert_close(entry(a, b), reference(a, b), atol=1e-2 * 64, rtol=1e-3)


def test_a_cached_bias_call_widens_each_call_s_bias():
    a, b = operands("K", "K", 16, 512, 4096)
    for _ in range(2):
        bias = torch.randn(512, device="cuda").bfloat16()
        d = matmul(a, b, bias=bias)  # a bfloat16 output's bfloat16 bias, widened each call
        torch.testing.assert_close(d.float(), reference(a, b) + bias.float(), atol=1e-2 * 64, rtol=1e-2)


def test_a_misaligned_operand_of_a_cached_signature_is_refused():
    a, b = operands("K", "K", 128, 256, 64)
    matmul(a, b)
    flat = torch.empty(a.numel() + 8, dtype=a.dtype, device="cuda")[1:1 + a.numel()]
    misaligned = flat.view(a.shape).copy_(a)
    with pytest.raises(tp.InputError, match="A does not start at a 16-byte aligned address"):
        matmul(misaligned, b)
    torch.testing.assert_close(matmul(a, b).float(), reference(a, b), atol=1e-2 * 8, rtol=1e-2)
