"""PyTorch integration on the GPU (marker `gpu`; skipped without PyTorch or a CUDA device): Kernel.run's
launch cache gives right values when the address, shape or stream changes and allocates a new output
each call; tp.as_torch_op runs, passes torch.library.opcheck, traces under torch.compile(fullgraph=True)
with inductor (static and dynamic shapes) and is captured by CUDA graphs (torch.cuda.graph and
mode="reduce-overhead"); tileproof.recipes.matmul is right for all four operand majors, on sizes
the 128 x 256 tile does not divide, in each output dtype."""

from __future__ import annotations

import itertools

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402
from tileproof.recipes import Matmul, matmul  # noqa: E402

from support.codegen_schedules import BUILDERS  # noqa: E402

pytestmark = pytest.mark.gpu
_names = itertools.count()


def unique(name: str) -> str:
    return f"tileproof_gpu_test::{name}_{next(_names)}"


def add_kernel():
    """out = exp(a) + b (support/codegen_schedules.py pointwise_add), symbolic M x N."""
    return tp.compile(BUILDERS["pointwise_add"]())


def expected(a, b):
    return a.exp() + b


def test_run_is_right_as_the_launch_cache_changes_address_shape_and_stream():
    kernel = add_kernel()
    for shape in ((64, 128), (64, 128), (33, 17), (64, 128)):
        a, b = torch.randn(shape, device="cuda"), torch.randn(shape, device="cuda")
        out = torch.full(shape, float("nan"), device="cuda")
        assert kernel.run(a, b, out=[out]) == (out,)
        torch.testing.assert_close(out, expected(a, b))
        (fresh,) = kernel.run(a, b)
        torch.testing.assert_close(fresh, expected(a, b))
    side = torch.cuda.Stream()
    a, b = torch.randn(64, 128, device="cuda"), torch.randn(64, 128, device="cuda")
    side.wait_stream(torch.cuda.current_stream())  # a and b were made on the current stream
    with torch.cuda.stream(side):
        (on_side,) = kernel.run(a, b)
    side.synchronize()
    torch.testing.assert_close(on_side, expected(a, b))


def test_allocated_outputs_are_new_tensors_every_call():
    kernel = add_kernel()
    a, b = torch.randn(8, 32, device="cuda"), torch.randn(8, 32, device="cuda")
    first = kernel.run(a, b)[0]
    second = kernel.run(a * 2, b)[0]
    assert first.data_ptr() != second.data_ptr()
    torch.testing.assert_close(first, expected(a, b))
    torch.testing.assert_close(second, expected(a * 2, b))


def test_the_operator_runs_and_passes_opcheck():
    op = tp.as_torch_op(add_kernel(), name=unique("add"))
    a, b = torch.randn(16, 40, device="cuda"), torch.randn(16, 40, device="cuda")
    torch.testing.assert_close(op(a, b), expected(a, b))
    torch.library.opcheck(op, (a, b))


@pytest.mark.parametrize("dynamic", [False, True])
def test_torch_compile_fullgraph_with_inductor(dynamic):
    op = tp.as_torch_op(add_kernel(), name=unique("add"))
    torch._dynamo.reset()
    compiled = torch.compile(lambda a, b: op(a, b).relu() * 2, fullgraph=True, dynamic=dynamic)
    for shape in ((32, 64), (48, 80)):
        a, b = torch.randn(shape, device="cuda"), torch.randn(shape, device="cuda")
        torch.testing.assert_close(compiled(a, b), expected(a, b).relu() * 2)


def test_cuda_graph_capture_replays_the_launch():
    op = tp.as_torch_op(add_kernel(), name=unique("add"))
    a, b = torch.randn(64, 64, device="cuda"), torch.randn(64, 64, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up (module load, launch cache) off the capture
        op(a, b)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = op(a, b)
    a.copy_(torch.randn_like(a))
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, expected(a, b))


def test_torch_compile_reduce_overhead_captures_the_operator():
    op = tp.as_torch_op(add_kernel(), name=unique("add"))
    torch._dynamo.reset()
    compiled = torch.compile(lambda a, b: op(a, b) + 1, mode="reduce-overhead", fullgraph=True)
    a, b = torch.randn(32, 32, device="cuda"), torch.randn(32, 32, device="cuda")
    for _ in range(3):
        result = compiled(a, b)
    torch.testing.assert_close(result, expected(a, b) + 1)


def reference(a, b):
    return (a.double() @ b.double()).float()


def operands(a_major, b_major, m, n, k):
    a = torch.randn(m, k, device="cuda").bfloat16() if a_major == "K" else \
        torch.randn(k, m, device="cuda").bfloat16().t()
    b = torch.randn(k, n, device="cuda").bfloat16() if b_major == "MN" else \
        torch.randn(n, k, device="cuda").bfloat16().t()
    return a, b


@pytest.mark.parametrize("a_major,b_major", [("K", "K"), ("K", "MN"), ("MN", "K"), ("MN", "MN")])
@pytest.mark.parametrize("m,n,k", [(256, 512, 128), (200, 264, 72), (8, 8, 8), (1000, 40, 1048)])
def test_matmul_is_right_for_every_major(a_major, b_major, m, n, k):
    a, b = operands(a_major, b_major, m, n, k)
    d = matmul(a, b, out_dtype=torch.float32)
    assert d.shape == (m, n) and d.dtype == torch.float32
    torch.testing.assert_close(d, reference(a, b), atol=1e-2 * k ** 0.5, rtol=1e-3)


@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16])
def test_matmul_16_bit_outputs(out_dtype):
    a, b = operands("K", "K", 384, 520, 256)
    d = matmul(a, b, out_dtype=out_dtype)
    assert d.dtype == out_dtype
    torch.testing.assert_close(d.float(), reference(a, b), atol=5e-2 * 16, rtol=1e-2)


def test_matmul_errors_name_the_operand_on_the_gpu():
    a, b = operands("K", "MN", 64, 64, 64)
    with pytest.raises(tp.InputError, match="A is on cuda:0 and B on cpu"):
        matmul(a, b.cpu())
    with pytest.raises(tp.InputError, match="N = 60 is not a multiple of 8"):
        matmul(a, b[:, :60].contiguous())


def test_matmul_operator_under_torch_compile_and_cuda_graphs():
    op = tp.as_torch_op(Matmul(out_dtype=torch.bfloat16), name=unique("matmul"))
    torch._dynamo.reset()
    compiled = torch.compile(lambda a, b: op(a, b).float().relu(), fullgraph=True)
    a, b = operands("K", "K", 256, 256, 128)
    torch.testing.assert_close(compiled(a, b), reference(a, b).relu(), atol=0.8, rtol=1e-2)
    graph = torch.cuda.CUDAGraph()
    op(a, b)
    with torch.cuda.graph(graph):
        out = op(a, b)
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out.float(), reference(a, b), atol=0.8, rtol=1e-2)
