"""Split-K in one kernel on the GPU (marker `gpu`; skipped without PyTorch or a CUDA device):
recipes/split_k.py split_k_grid, K's tiles in S runs on blockIdx.z and the accumulators combined by
a grid reduction over BIDz, against a float64 product at sizes no tile divides (M, N tails, K not
a multiple of the splits' runs, a last run past K's end), in each output dtype, and bit for bit
the same at a second launch (the semaphores back to 0, the last block adding the splits in rank
order whichever block arrives last); through recipes.matmul forced in every major, with the fused
epilogue's ops in the last block, under a CUDA graph, and as the choice at the decode shape
16 x 4096 x 4096."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402
from tileproof.recipes import Matmul, matmul  # noqa: E402
from tileproof.recipes.hopper_params import HopperTile, Operand, TmaPipeline  # noqa: E402
from tileproof.recipes.matmul_heuristic import BY_NAME, ONE_KERNEL_SPLIT_K  # noqa: E402
from tileproof.recipes.params import EpilogueOps  # noqa: E402
from tileproof.recipes.split_k import SplitKParams, split_k_grid  # noqa: E402

from gpu.test_matmul_epilogue import SPLIT_K_CASES, close, terms  # noqa: E402  (the ops' cases and reference)
from gpu.test_matmul_epilogue import reference as ops_reference  # noqa: E402
from gpu.test_torch_op import operands, reference  # noqa: E402  (operands of each major, the float64 product)

pytestmark = pytest.mark.gpu
MAJORS = [("K", "K"), ("K", "MN"), ("MN", "K"), ("MN", "MN")]
GRID_CONFIGS = list(ONE_KERNEL_SPLIT_K)  # forced by name: the estimate does not choose them (measured slow)


@pytest.mark.parametrize("tile,m,n,k,splits", [
    ((64, 256), 16, 4096, 4096, 8),  # decode: 16 of 64 rows, 8 runs of 8 K tiles
    ((128, 128), 200, 264, 1032, 3),  # 17 K tiles in runs of 6, 6, 5; the last one a tail of 8 columns
    ((64, 128), 1000, 40, 4104, 5),  # 65 K tiles in runs of 13; N one partial tile
    ((128, 128), 72, 1000, 520, 4),  # 9 K tiles in runs of 3: the fourth run wholly past K (zeros)
])
@pytest.mark.parametrize("a_major,b_major", [("K", "K"), ("MN", "MN")])
def test_one_kernel_split_k_is_right_and_the_same_bits_at_a_second_launch(tile, m, n, k, splits, a_major, b_major):
    params = SplitKParams(tile=HopperTile(m=tile[0], n=tile[1]), pipeline=TmaPipeline(stages=4, prefetch=2),
                          a=Operand(major=a_major), b=Operand(major=b_major))
    kernel = tp.compile(split_k_grid(params, (m, n, k), splits, tp.float32), "sm_90a")
    a, b = operands(a_major, b_major, m, n, k)
    views = a.unsqueeze(1), b.t().unsqueeze(0)  # A [M, 1, K], B [1, N, K]
    (first,) = kernel.run(*views)
    (second,) = kernel.run(*views)
    torch.testing.assert_close(first, reference(a, b), atol=1e-2 * k ** 0.5, rtol=1e-3)
    assert torch.equal(first, second)


@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16])
def test_one_kernel_split_k_16_bit_outputs(out_dtype):
    params = SplitKParams(tile=HopperTile(m=64, n=256), pipeline=TmaPipeline(stages=4, prefetch=2))
    dtype = tp.bfloat16 if out_dtype == torch.bfloat16 else tp.float16
    kernel = tp.compile(split_k_grid(params, (384, 520, 2048), 4, dtype), "sm_90a")
    a, b = operands("K", "K", 384, 520, 2048)
    (d,) = kernel.run(a.unsqueeze(1), b.t().unsqueeze(0))
    assert d.dtype == out_dtype
    torch.testing.assert_close(d.float(), reference(a, b), atol=5e-2 * 45, rtol=1e-2)


@pytest.mark.parametrize("a_major,b_major", MAJORS)
@pytest.mark.parametrize("config", GRID_CONFIGS, ids=lambda c: c.name)
def test_every_grid_configuration_through_matmul_in_every_major(config, a_major, b_major):
    m, n, k = 200, 264, 4104
    a, b = operands(a_major, b_major, m, n, k)
    entry = Matmul(out_dtype=torch.float32, config=config)
    d = entry(a, b)
    assert entry.choice(a_major, b_major, m, n, k).splits > 1
    torch.testing.assert_close(d, reference(a, b), atol=1e-2 * k ** 0.5, rtol=1e-3)
    assert torch.equal(entry(a, b), d)  # the next launch: the same bits
    symbolic = Matmul(out_dtype=torch.float32, config=config, specialize=False)
    torch.testing.assert_close(symbolic(a, b), d, atol=1e-2 * k ** 0.5, rtol=1e-3)


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", SPLIT_K_CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_the_last_block_runs_the_fused_epilogue(case, out_dtype):
    """64x128_split_k_grid forced at 200 x 264 x 1032 with the ops the two-kernel test fuses."""
    m, n, k = 200, 264, 1032
    a, b = operands("K", "MN", m, n, k)
    bias, residual = terms(case, m, n, out_dtype)
    entry = Matmul(out_dtype=out_dtype, config=BY_NAME["64x128_split_k_grid"], epilogue=EpilogueOps(**case))
    assert entry.choice("K", "MN", m, n, k).splits > 1
    d = entry(a, b, bias, residual)
    assert d.shape == (m, n) and d.dtype == out_dtype
    close(d, ops_reference(a, b, case["scale"], bias, residual, case["activation"]), k)
    assert torch.equal(entry(a, b, bias, residual), d)


def test_one_kernel_split_k_under_a_cuda_graph():
    """The first launch on torch.cuda.graph's capture stream allocates that stream's workspace and
    semaphores inside the capture (driver.mem_alloc relaxes the capture mode; the semaphores'
    zeroing is captured too); each replay, on new inputs, is right (the semaphores back to 0)."""
    entry = Matmul(out_dtype=torch.float32, config=BY_NAME["64x128_split_k_grid"])
    a, b = operands("K", "MN", 256, 384, 4096)
    entry(a, b)  # loads the module and checks the arguments before the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = entry(a, b)
    for _ in range(2):
        a.copy_(torch.randn(a.shape, device="cuda").bfloat16())
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, reference(a, b), atol=1e-2 * 64, rtol=1e-3)


def test_the_decode_shape_forced_to_one_kernel_is_right():
    m, n, k = 16, 4096, 4096
    a, b = operands("K", "K", m, n, k)
    d = matmul(a, b, config=BY_NAME["64x128_split_k_grid"])
    torch.testing.assert_close(d.float(), reference(a, b), atol=5e-2 * k ** 0.5, rtol=1e-2)
    two = matmul(a, b)  # the choice: the two kernels, another order of the sum
    torch.testing.assert_close(d.float(), two.float(), atol=5e-2 * k ** 0.5, rtol=1e-2)
