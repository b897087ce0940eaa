"""Fusion.dependent_launch on the GPU (marker `gpu`): kernels launched as programmatic dependent
launches, each reading the one before it on the stream, compute what they compute launched plainly,
call after call with no synchronization between (torch's kernels in between), and under CUDA-graph
capture; split-K's two kernels (recipes/split_k.py, both dependent) give the product."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402
from tileproof.recipes import Matmul  # noqa: E402

from support.codegen_schedules import elementwise_1d  # noqa: E402

pytestmark = pytest.mark.gpu


def _affine(name: str, add: float, mul: float, dependent: bool) -> tp.Kernel:
    fusion = elementwise_1d(name, lambda x: tp.mul(tp.add(x, add), mul))
    fusion.dependent_launch = dependent
    return tp.compile(fusion)


@pytest.mark.parametrize("n", [1 << 20, 1000])
def test_a_chain_of_dependent_kernels_reads_each_result_whole(n):
    first, second = _affine("first", 1.0, 3.0, True), _affine("second", -2.0, 0.5, True)
    inputs = [torch.randn(n, device="cuda") for _ in range(50)]
    outs = []
    for x in inputs:  # no synchronization: each second launch may start while its first runs
        (y,) = first.run(x)
        (z,) = second.run(y)
        (w,) = second.run(z)
        outs.append(w + 0)  # a torch kernel between the dependent launches
    for x, w in zip(inputs, outs):
        torch.testing.assert_close(w, ((x + 1) * 3 - 2) * 0.25 - 1.0, rtol=0, atol=1e-5)  # (((x+1) 3 - 2) / 2 - 2) / 2


def test_captured_in_a_cuda_graph():
    first, second = _affine("first_graph", 1.0, 3.0, True), _affine("second_graph", -2.0, 0.5, True)
    x = torch.randn(1 << 16, device="cuda")
    y, z = torch.empty_like(x), torch.empty_like(x)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        first.run(x, out=[y])  # the prepared launches, on the capture's stream, made off the capture
        second.run(y, out=[z])
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        first.run(x, out=[y])
        second.run(y, out=[z])
    for _ in range(3):
        x.copy_(torch.randn_like(x))
        graph.replay()
        torch.testing.assert_close(z, ((x + 1) * 3 - 2) * 0.5, rtol=0, atol=1e-5)


def test_split_k_runs_its_two_kernels_as_dependent_launches():
    entry = Matmul(out_dtype=torch.float32)
    a = torch.randn(16, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(512, 4096, device="cuda", dtype=torch.bfloat16)
    assert entry.choice("K", "K", 16, 512, 4096).config.split_k
    outs = [entry(a * s, w.t()) for s in (1, 2, 3)]
    partials, total = entry._kernels[next(iter(entry._kernels))]
    assert partials.ir.dependent_launch and total.ir.dependent_launch
    ref = a.double() @ w.double().t()
    for s, d in zip((1, 2, 3), outs):
        torch.testing.assert_close(d.double(), s * ref, atol=1e-2 * 64 * s, rtol=1e-3)
