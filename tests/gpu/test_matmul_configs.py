"""recipes.matmul's configurations on the GPU (marker `gpu`; skipped without PyTorch or a CUDA
device): every configuration of matmul_heuristic.CONFIGS, forced, is right for all four operand
majors at sizes no tile divides (split-K with splits whose length is no multiple of the K tile,
so each split's last TMA box reads zeros past its slice), in each output dtype; the choice at
few-tile long-K and decode shapes is split-K and right (at M <= 16 the swapped split-K, D^T = B^T A^T,
whose partials the sum reads transposed); the shape-class kernels
(specialize=False) agree with those compiled at the shape; the split-K path under a CUDA graph."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

from tileproof.recipes import CONFIGS, Matmul, matmul  # noqa: E402
from tileproof.recipes.matmul_heuristic import BY_NAME  # noqa: E402

from gpu.test_torch_op import operands, reference  # noqa: E402  (operands of each major, the float64 product)

pytestmark = pytest.mark.gpu
MAJORS = [("K", "K"), ("K", "MN"), ("MN", "K"), ("MN", "MN")]




@pytest.mark.parametrize("a_major,b_major", MAJORS)
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.name)
@pytest.mark.parametrize("m,n,k", [(200, 264, 1032), (1000, 40, 4104)])  # 3 splits of 344 / 1368: K tails
def test_every_configuration_is_right_in_every_major(config, a_major, b_major, m, n, k):
    if config.swap_ab:  # M in one column tile of the kernel's: the decode rows it takes
        m = 8 if m == 200 else config.tile[1]  # 8: an M-major A's rows of 16 bytes, as the TMA needs
    a, b = operands(a_major, b_major, m, n, k)
    entry = Matmul(out_dtype=torch.float32, config=config)
    d = entry(a, b)
    assert d.shape == (m, n) and d.dtype == torch.float32
    torch.testing.assert_close(d, reference(a, b), atol=1e-2 * k ** 0.5, rtol=1e-3)
    if config.split_k:
        assert entry.choice(a_major, b_major, m, n, k).splits > 1


@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("config", [c for c in CONFIGS if c.split_k], ids=lambda c: c.name)
def test_split_k_16_bit_outputs(config, out_dtype):
    a, b = operands("K", "K", 7 if config.swap_ab else 384, 520, 2048)
    d = matmul(a, b, out_dtype=out_dtype, config=config)
    assert d.dtype == out_dtype
    torch.testing.assert_close(d.float(), reference(a, b), atol=5e-2 * 45, rtol=1e-2)


@pytest.mark.parametrize("m,n,k", [(1024, 1024, 16384), (16, 4096, 4096), (512, 512, 32768)])
def test_the_choice_at_few_tiles_and_a_long_k_is_split_k_and_right(m, n, k):
    a, b = operands("K", "K", m, n, k)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert Matmul().choice("K", "K", m, n, k, sms).config.split_k
    d = matmul(a, b)
    torch.testing.assert_close(d.float(), reference(a, b), atol=5e-2 * k ** 0.5, rtol=1e-2)


@pytest.mark.parametrize("m,n,k", [(1000, 2048, 4096), (64, 1024, 4096), (512, 512, 8192)])
def test_the_shape_class_kernels_agree_with_those_at_the_shape(m, n, k):
    a, b = operands("K", "K", m, n, k)
    at_shape, symbolic = Matmul(out_dtype=torch.float32), Matmul(out_dtype=torch.float32, specialize=False)
    d = at_shape(a, b)
    torch.testing.assert_close(d, reference(a, b), atol=1e-2 * k ** 0.5, rtol=1e-3)
    torch.testing.assert_close(symbolic(a, b), d, atol=1e-2 * k ** 0.5, rtol=1e-3)
    assert all(not ks[0].fusion.symbols for ks in at_shape._kernels.values())
    assert all(ks[0].fusion.symbols for ks in symbolic._kernels.values())


@pytest.mark.parametrize("name,m", [("128x128_split_k", 256), ("64x16_split_k_swapped", 16)])
def test_split_k_under_a_cuda_graph(name, m):
    entry = Matmul(out_dtype=torch.float32, config=BY_NAME[name])
    a, b = operands("K", "MN", m, 384, 4096)
    entry(a, b)  # loads the modules and checks the arguments before the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = entry(a, b)
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, reference(a, b), atol=1e-2 * 64, rtol=1e-3)
