"""A broadcast, a plain copy or a transpose of a fusion input set to global memory, read as a view
of the input (no copy, model/producer_aliases.py), on the GPU (marker `gpu`; skipped without
PyTorch or a CUDA device): out = x + bias[:, None] with the broadcast bias read by plain loads from
the bias the user passes, out = x + set(y) (one or two copies of y in global memory) and
out = x + y.T (a transpose allocated in y's order) read from y, at several sizes (a partial last
128-column step among them), against PyTorch bit for bit. The TMA loads of a view run in
tests/gpu/test_nvfuser.py (HopperMatmulTest.HSH_NT_128BSwizzle_BroadcastOp's run=)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402
from support.broadcast_views import bias_add, global_copy, global_transpose  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("m,n", [(1, 1), (3, 200), (64, 128), (257, 1000)])
def test_a_broadcast_view_reads_the_input_it_views(m, n):
    fusion, _ = bias_add()
    kernel = tp.compile(fusion)
    assert kernel.ir.views  # read through the input's pointer, not a copy
    x, bias = torch.randn(m, n, device="cuda"), torch.randn(m, device="cuda")
    out = torch.full((m, n), float("nan"), device="cuda")
    kernel.run(x, bias, out=[out])
    torch.cuda.synchronize()
    assert torch.equal(out, x + bias[:, None])


@pytest.mark.parametrize("copies", [1, 2])
@pytest.mark.parametrize("m,n", [(1, 1), (3, 200), (64, 128), (257, 1000)])
def test_a_global_copy_view_reads_the_input_it_views(m, n, copies):
    fusion, _ = global_copy(copies=copies)
    kernel = tp.compile(fusion)
    assert [v.view_of for v in kernel.ir.views] == ["T1"] * copies  # y's pointer, no copy
    x, y = torch.randn(m, n, device="cuda"), torch.randn(m, n, device="cuda")
    out = torch.full((m, n), float("nan"), device="cuda")
    kernel.run(x, y, out=[out])
    torch.cuda.synchronize()
    assert torch.equal(out, x + y)


@pytest.mark.parametrize("m,n", [(1, 1), (3, 200), (64, 128), (257, 1000)])
def test_a_transpose_view_reads_the_input_it_views(m, n):
    fusion, _ = global_transpose()
    kernel = tp.compile(fusion)
    assert [v.view_of for v in kernel.ir.views] == ["T1"]
    x, y = torch.randn(m, n, device="cuda"), torch.randn(n, m, device="cuda")
    out = torch.full((m, n), float("nan"), device="cuda")
    kernel.run(x, y, out=[out])
    torch.cuda.synchronize()
    assert torch.equal(out, x + y.T)
