"""tileproof.recipes.matmul without a GPU: each shape class (A's and B's majors, the output dtype)
builds and verifies the recipe with those majors, the kernel the entry runs at a shape has numbers
for its extents (32-bit index math, the balanced persistent grid), the 2-D operands' views bind to
its operands, bad operands get InputErrors naming them, and the entry is an operator torch.compile
traces."""

from __future__ import annotations

import importlib
from collections import OrderedDict

import pytest

import tileproof as tp
from tileproof.codegen.runtime import binding
from tileproof.recipes import Matmul, matmul
from tileproof.recipes.matmul import ENTRY_CACHE_SIZE, shape_class_fusion
from tileproof.recipes.matmul_heuristic import WIDE

pytestmark = pytest.mark.usefixtures("private_cache")
MAJORS = [("K", "K"), ("K", "MN"), ("MN", "K"), ("MN", "MN")]
# allocation order (outer first) of A [M, 1, K] and B [1, N, K] in each major
ALLOCATION = {("A", "K"): (0, 1, 2), ("A", "MN"): (2, 1, 0), ("B", "K"): (0, 1, 2), ("B", "MN"): (0, 2, 1)}


@pytest.mark.parametrize("a_major,b_major", MAJORS)
def test_each_shape_class_verifies_with_its_operands_majors(a_major, b_major):
    fusion = shape_class_fusion(a_major, b_major, "bfloat16")
    assert tp.verify(fusion, "sm_90a").ok
    kernel = tp.compile(fusion, "sm_90a")
    a, b = (g for g in kernel.ir.globals if g.is_input)
    assert (a.alloc_axes, b.alloc_axes) == (ALLOCATION["A", a_major], ALLOCATION["B", b_major])
    assert "wgmma.mma_async" in kernel.cuda_source
    assert kernel.ir.index_bits == 64  # M, N, K up to 2^31: the tile counts' products need 64 bits


def test_the_kernel_at_a_shape_has_numbers_for_extents():
    """What Matmul runs at 8192^3: no extent parameter, 32-bit index math, 128 blocks of 16 tiles
    each (balanced_grid), not 132 of which 68 run a 16th; the shape class's kernel, 132 blocks."""
    (kernel,) = Matmul().kernels(WIDE, "K", "K", shape=(8192, 8192, 8192))
    assert not kernel.fusion.symbols and kernel.ir.index_bits == 32
    assert kernel.launch_params_for().grid == (128, 1, 1)
    assert "s_M" not in kernel.cuda_source and "unsigned long long i2" not in kernel.cuda_source


def test_a_float32_output_verifies():
    assert tp.verify(shape_class_fusion("K", "K", "float32"), "sm_90a").ok


def test_matmul_keeps_a_bounded_number_of_entries(monkeypatch):
    """Each epilogue scale is an entry of its own (the scale is a constant of its kernels), each entry
    keeps up to CACHE_SIZE compiled sets: matmul() keeps the ENTRY_CACHE_SIZE it used last."""
    module = importlib.import_module("tileproof.recipes.matmul")  # tileproof.recipes.matmul is the function
    monkeypatch.setattr(module, "_entries", OrderedDict())
    monkeypatch.setattr(Matmul, "__call__", lambda self, a, b, *terms: self)  # the entry, not a launch
    kept, dropped = matmul(None, None, scale=0.5), matmul(None, None, scale=0.25)
    for k in range(3 * ENTRY_CACHE_SIZE):
        matmul(None, None, scale=1.0 + k)
        assert matmul(None, None, scale=0.5) is kept  # used last: kept
    assert len(module._entries) == ENTRY_CACHE_SIZE
    assert [e.epilogue.scale for e in module._entries.values()][-2:] == [3.0 * ENTRY_CACHE_SIZE, 0.5]
    assert matmul(None, None, scale=0.25) is not dropped  # the least recently used: made again


try:
    import torch
except ImportError:  # the verification above needs no PyTorch; the operands below do
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="needs PyTorch")


def operands(a_major, b_major, m=16, n=24, k=32):
    a = torch.zeros(m, k, dtype=torch.bfloat16) if a_major == "K" else torch.zeros(k, m, dtype=torch.bfloat16).t()
    b = torch.zeros(k, n, dtype=torch.bfloat16) if b_major == "MN" else torch.zeros(n, k, dtype=torch.bfloat16).t()
    return a, b


@needs_torch
@pytest.mark.parametrize("a_major,b_major", MAJORS)
def test_the_views_bind_to_the_shape_class_kernel(a_major, b_major, monkeypatch):
    entry = Matmul()
    a, b = operands(a_major, b_major)
    assert entry.majors(a, b) == (a_major, b_major)
    kernel = entry.kernel(a_major, b_major)
    monkeypatch.setattr(binding, "check_device", lambda g, info, position, device_id: 0)  # CPU tensors stand in
    bound = binding.bind(kernel.ir.globals, [a.unsqueeze(1), b.t().unsqueeze(0)], None, {},
                         list(kernel.fusion.symbols), None)
    assert {s: bound.env[s] for s in "MNK"} == {"M": 16, "N": 24, "K": 32}


@needs_torch
def test_bad_operands_are_named():
    a, b = operands("K", "MN")
    with pytest.raises(tp.InputError, match=r"A must be 2-D"):
        matmul(a[None], b)
    with pytest.raises(tp.InputError, match=r"B must be bfloat16, got float32"):
        matmul(a, b.float())
    with pytest.raises(tp.InputError, match=r"their K differ \(for B as \[N, K\], pass b.t\(\)\)"):
        matmul(a, b.t())
    with pytest.raises(tp.InputError, match=r"A \[M, K\] = \[16, 16\] has strides \[32, 2\]; it must be dense"):
        matmul(a[:, ::2], b[:16])
    with pytest.raises(tp.InputError, match=r"K = 12 is not a multiple of 8"):
        matmul(a[:, :12].contiguous(), b[:12])
    with pytest.raises(tp.InputError, match="out_dtype must be one of"):
        matmul(a, b, out_dtype=torch.int8)
    with pytest.raises(tp.InputError, match="must be a torch.Tensor"):
        matmul([[1.0]], b)
    with pytest.raises(tp.InputError, match="in cpu memory"):  # every check passed: run() names the device
        matmul(a, b)


@needs_torch
def test_the_entry_is_an_operator_torch_compile_traces():
    from torch._subclasses.fake_tensor import FakeTensorMode

    op = tp.as_torch_op(Matmul(out_dtype=torch.float32), name="tileproof_test::matmul_f32")
    with FakeTensorMode():
        a, b = operands("K", "K", m=40, n=48, k=64)
        d = op(a, b)
    assert tuple(d.shape) == (40, 48) and d.dtype == torch.float32
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    compiled = torch.compile(lambda a, b: op(a, b).sum(), fullgraph=True, backend=backend)
    with pytest.raises(tp.InputError, match="in cpu memory"):
        compiled(*operands("K", "MN"))
    assert any("matmul_f32" in str(n.target) for n in graphs[0].graph.nodes)
