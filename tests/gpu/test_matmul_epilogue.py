"""recipes.matmul's fused epilogues on the GPU (marker `gpu`; skipped without PyTorch or a CUDA
device): out = cast(activation(scale * A @ B + bias + residual)) against the same formula in
float64 on the inputs, for each op alone and all of them with each activation, in float32 (the
register epilogue) and bfloat16 (stmatrix and TMA stores), at shapes whose M and N no tile divides;
a 16-bit bias is widened by the entry; a row bias; split-K's sum kernel fusing the ops (forced,
chosen by the heuristic, and its shape-class kernel); the operator under torch.compile and a CUDA
graph."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402
from tileproof.recipes import Matmul, matmul  # noqa: E402
from tileproof.recipes.matmul_heuristic import BY_NAME  # noqa: E402
from tileproof.recipes.params import EpilogueOps  # noqa: E402

from gpu.test_torch_op import operands  # noqa: E402  (operands of each major)

pytestmark = pytest.mark.gpu
SHAPES = [(256, 512, 1024), (200, 264, 1032), (1000, 136, 520)]  # the last two: no tile divides M or N
ACTIVATIONS = {None: lambda x: x, "relu": torch.relu, "silu": torch.nn.functional.silu,
               "gelu": torch.nn.functional.gelu,
               "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh")}


def reference(a, b, scale=None, bias=None, residual=None, activation=None):
    """activation(scale * A @ B + bias + residual) in float64: the order EpilogueOps documents."""
    x = a.double() @ b.double()
    if scale is not None:
        x = scale * x
    if bias is not None:
        x = x + (bias.double().reshape(1, -1) if bias.dim() == 1 else bias.double())
    if residual is not None:
        x = x + residual.double()
    return ACTIVATIONS[activation](x)


def close(d, want, k):
    """Within float32 sums (float32 output) or one bfloat16 rounding of the result."""
    if d.dtype == torch.float32:
        torch.testing.assert_close(d.double(), want, atol=1e-2 * k ** 0.5, rtol=1e-3)
    else:
        torch.testing.assert_close(d.double(), want, atol=5e-2 * k ** 0.5, rtol=1e-2)


CASES = [dict(scale=0.5), dict(bias="column"), dict(bias="row"), dict(residual=True), dict(activation="relu"),
         dict(activation="silu")] + \
    [dict(scale=2.0, bias="column", residual=True, activation=a) for a in ("relu", "gelu", "gelu_tanh", "silu")]


def terms(case, m, n, out_dtype):
    bias = {"column": torch.randn(n, device="cuda"), "row": torch.randn(m, 1, device="cuda"),
            None: None}[case.get("bias")]
    residual = torch.randn(m, n, device="cuda").to(out_dtype) if case.get("residual") else None
    return bias, residual


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_each_epilogue_is_right(case, out_dtype, m, n, k):
    a, b = operands("K", "MN", m, n, k)
    bias, residual = terms(case, m, n, out_dtype)
    d = matmul(a, b, out_dtype=out_dtype, bias=bias, residual=residual, scale=case.get("scale"),
               activation=case.get("activation"))
    assert d.shape == (m, n) and d.dtype == out_dtype
    close(d, reference(a, b, case.get("scale"), bias, residual, case.get("activation")), k)


@pytest.mark.parametrize("a_major,b_major", [("K", "K"), ("MN", "MN")])
def test_a_16_bit_bias_in_every_major(a_major, b_major):
    m, n, k = 200, 264, 1032
    a, b = operands(a_major, b_major, m, n, k)
    bias = torch.randn(n, device="cuda").bfloat16()
    d = matmul(a, b, bias=bias, activation="gelu_tanh")
    close(d, reference(a, b, bias=bias, activation="gelu_tanh"), k)


SPLIT_K_CASES = [dict(scale=2.0, bias="column", residual=True, activation="gelu"),
                 dict(scale=0.5, bias="row", residual=True, activation="silu")]


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", SPLIT_K_CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_split_k_fuses_the_epilogue_into_its_sum(case, out_dtype):
    """128x128_split_k forced at 200 x 264 x 1032 (no tile divides M or N; K in splits)."""
    m, n, k = 200, 264, 1032
    a, b = operands("K", "MN", m, n, k)
    bias, residual = terms(case, m, n, out_dtype)
    entry = Matmul(out_dtype=out_dtype, config=BY_NAME["128x128_split_k"], epilogue=EpilogueOps(**case))
    assert entry.choice("K", "MN", m, n, k).splits > 1
    d = entry(a, b, bias, residual)
    assert d.shape == (m, n) and d.dtype == out_dtype
    close(d, reference(a, b, case["scale"], bias, residual, case["activation"]), k)


@pytest.mark.parametrize("specialize", [True, False])
def test_the_heuristic_chooses_split_k_with_an_epilogue(specialize):
    """Few output tiles and a long K: split-K, with the ops in its sum (at the shape, and the
    shape-class kernels of symbolic S, M, N, K)."""
    m, n, k = 256, 1024, 16384
    a, b = operands("K", "K", m, n, k)
    bias, residual = torch.randn(n, device="cuda").bfloat16(), torch.randn(m, n, device="cuda").bfloat16()
    entry = Matmul(specialize=specialize, epilogue=EpilogueOps(bias="column", residual=True, activation="relu"))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert entry.choice("K", "K", m, n, k, sms).config.split_k
    close(entry(a, b, bias, residual), reference(a, b, bias=bias, residual=residual, activation="relu"), k)


def test_the_epilogue_operator_under_torch_compile_and_a_cuda_graph():
    entry = Matmul(out_dtype=torch.bfloat16, epilogue=EpilogueOps(bias="column", residual=True, activation="silu"))
    op = tp.as_torch_op(entry, name="tileproof_test::matmul_bias_residual_silu")
    m, n, k = 384, 520, 2048
    a, b = operands("K", "K", m, n, k)
    bias, residual = torch.randn(n, device="cuda"), torch.randn(m, n, device="cuda").bfloat16()
    want = reference(a, b, bias=bias, residual=residual, activation="silu")
    torch._dynamo.reset()
    compiled = torch.compile(lambda a, b, bias, r: op(a, b, bias, r) * 2, fullgraph=True)
    close(compiled(a, b, bias, residual) / 2, want, k)
    op(a, b, bias, residual)  # loads the module before the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = op(a, b, bias, residual)
    graph.replay()
    torch.cuda.synchronize()
    close(out, want, k)
