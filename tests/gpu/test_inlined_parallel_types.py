"""Producers inlined into their consumer's parallel loops take the loop's type on the GPU (marker
`gpu`; skipped without PyTorch or a CUDA device): only the consumer is parallelized, the inlined
producer's axes are Serial in the schedule and run on blockIdx.x / threadIdx.x / the unrolled loop
in the kernel (model/loop_map.py, nvFuser's ComputeAtMap::validateAndPropagatePType). Each kernel
runs at 3 sizes into an output poisoned with NaN, against PyTorch.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402

pytestmark = pytest.mark.gpu
P = tp.ParallelType
SIZES = [(3, 100), (17, 1000), (130, 4099)]


def row_sum(memory: tp.MemoryType):
    """t2 = sum(t0 + 1, [1]) split by 128; t1 = t0 + 1 inlined at 3 (registers or shared memory),
    only t2 parallelized: axis 0 BIDx, axis 2 TIDx (nvFuser's repro of the loop map)."""
    with tp.Fusion(f"row_sum_{memory.name.lower()}") as fusion:
        t0 = tp.make_contig_tensor(2)
        fusion.add_input(t0)
        t1 = tp.add(t0, 1.0)
        t2 = tp.sum(t1, [1])
        fusion.add_output(t2)
    t1.set_memory_type(memory)
    t2.split(1, 128)
    tp.propagate_transforms(t2)
    tp.inline_most(fusion)
    t2.axis(0).parallelize(P.BIDx)
    t2.axis(2).parallelize(P.TIDx)
    return fusion


def scaled_copy(unroll: bool):
    """t2 = (t0 * 2) copied, [I0, I1] as [I0 (BIDx), I1/128/4 (Unroll or serial), 4, 128 (TIDx)] on
    t2 only; t1 inlined at the innermost position (inline_at past the Unroll axis)."""
    with tp.Fusion(f"scaled_copy_{'unroll' if unroll else 'serial'}") as fusion:
        t0 = tp.make_contig_tensor(2)
        fusion.add_input(t0)
        t1 = tp.mul(t0, 2.0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t2.split(1, 128).split(1, 4)  # [I0, I1/512, 4, 128]
    tp.propagate_transforms(t2)
    t1.inline_at(-1)
    t2.axis(0).parallelize(P.BIDx)
    if unroll:
        t2.axis(2).parallelize(P.Unroll)
    t2.axis(3).parallelize(P.TIDx)
    return fusion


@pytest.mark.parametrize("m,n", SIZES)
@pytest.mark.parametrize("memory", [tp.MemoryType.Local, tp.MemoryType.Shared])
def test_an_inlined_producer_takes_the_sums_block_and_thread(memory, m, n):
    kernel = tp.compile(row_sum(memory))
    t0 = torch.randn(m, n, device="cuda")
    out = torch.full((m,), float("nan"), device="cuda")
    kernel.run(t0, out=[out])
    torch.cuda.synchronize()
    torch.testing.assert_close(out, (t0 + 1).sum(1), rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("m,n", SIZES)
@pytest.mark.parametrize("unroll", [False, True])
def test_an_inlined_producer_takes_the_copys_block_thread_and_unroll(unroll, m, n):
    kernel = tp.compile(scaled_copy(unroll))
    t0 = torch.randn(m, n, device="cuda")
    out = torch.full((m, n), float("nan"), device="cuda")
    kernel.run(t0, out=[out])
    torch.cuda.synchronize()
    assert torch.equal(out, t0 * 2)
