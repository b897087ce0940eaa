"""Statements sharing a loop on a thread or block index need not be adjacent (execution/loops.py
launched_loops; LOOP-NEST-ORDER), on the GPU (marker `gpu`; skipped without PyTorch or a CUDA
device): t1 = x copied and inlined into its consumers' blockIdx.x / threadIdx.y axis, t3 = exp(t2)
computed between t1's statement and its last reader t4 = t1 + t3, whose scope closes and reopens.
Symbolic sizes, a partial last block, into outputs poisoned with NaN, against PyTorch."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402

pytestmark = pytest.mark.gpu
P = tp.ParallelType


def interleaved(outer: tp.ParallelType) -> tp.Fusion:
    with tp.Fusion(f"interleaved_{outer.name.lower()}") as fusion:
        t0 = tp.make_contig_tensor(2)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        t3 = tp.exp(t2)
        t4 = tp.add(t1, t3)
        fusion.add_output(t2)
        fusion.add_output(t4)
    for t in (t1, t2, t3, t4):
        t.split(1, 64)  # [M, ceil(N / 64) (blockIdx.y), 64 (threadIdx.x)]
        t.axis(1).parallelize(P.BIDy)
        t.axis(2).parallelize(P.TIDx)
        t.axis(0).parallelize(outer)
    t1.inline_at(1)
    fusion.assume("T0_1 <= 65536")  # gridDim.y
    return fusion


@pytest.mark.parametrize("outer", [P.BIDx, P.TIDy], ids=str)
@pytest.mark.parametrize("m, n", [(1, 1), (5, 100), (7, 1000)])  # partial blocks of 64 columns
def test_a_reopened_scope_reads_its_own_thread_value(outer, m, n):
    fusion = interleaved(outer)
    if outer is P.TIDy:
        fusion.assume("T0_0 <= 8")  # a block's threads
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, report.codes
    kernel = tp.compile(fusion)
    x = torch.randn(m, n, device="cuda")
    outs = [torch.full((m, n), float("nan"), device="cuda") for _ in range(2)]
    kernel.run(x, out=outs)
    torch.cuda.synchronize()
    assert torch.equal(outs[0], x)
    torch.testing.assert_close(outs[1], x + torch.exp(x))
