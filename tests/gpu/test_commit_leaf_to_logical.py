"""commit_leaf_to_logical on the GPU (marker `gpu`; skipped without PyTorch or a CUDA device): the
schedules of tests/support/logical_commit.py (an implicit transpose, a reduction whose output is
committed [N, M], an mma.sync tile of the NN layout whose output is committed [M, N]) run at
several sizes against PyTorch, into outputs poisoned with NaN. tests/model/test_commit_leaf_to_logical.py
runs the same schedules on the CPU simulator."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402

from support.logical_commit import committed_sum, mma_nn_tile, transposed_copy  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("m,n", [(3, 40), (33, 5), (64, 64), (1000, 77)])
def test_an_implicit_transpose_stores_the_transpose(m, n):
    kernel = tp.compile(transposed_copy()[0])
    x = torch.randn(m, n, device="cuda")
    out = torch.full((n, m), float("nan"), device="cuda")
    kernel.run(x, out=[out])
    torch.cuda.synchronize()
    assert torch.equal(out, x.t())


@pytest.mark.parametrize("m,k,n", [(4, 3, 5), (7, 1, 2), (100, 33, 9)])
def test_a_committed_reduction_stores_n_by_m(m, k, n):
    kernel = tp.compile(committed_sum())
    x = torch.randn(m, k, n, device="cuda")
    out = torch.full((n, m), float("nan"), device="cuda")
    kernel.run(x, out=[out])
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x.sum(1).t(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("macro", ["Ampere_16_8_16", "Turing_16_8_8", "Ampere_16_16_16"])
def test_an_mma_nn_tile_committed_to_m_n_computes_a_b(macro):
    macro = getattr(tp.MmaMacro, macro)
    kernel = tp.compile(mma_nn_tile(macro))
    for seed in range(3):
        torch.manual_seed(seed)
        a = torch.randn(1, macro.k, macro.m, device="cuda", dtype=torch.float16)
        b = torch.randn(macro.n, macro.k, 1, device="cuda", dtype=torch.float16)
        (out,) = kernel.run(a, b)
        torch.cuda.synchronize()
        torch.testing.assert_close(out, (a.float() * b.float()).sum(1).t(), rtol=1e-4, atol=1e-4)
