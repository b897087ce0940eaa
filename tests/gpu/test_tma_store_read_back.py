"""Global tensors a TMA store writes and the block reads back, on the GPU (marker `gpu`; skipped
without PyTorch or a CUDA device): the intermediate T2 of tests/rules/test_tma_store_read_back.py
(one block, or a row of 512 elements per block; circular-buffered or not), and a TMA-stored
output its storing thread reads back. Each runs into an output poisoned with NaN at sizes with
and without a partial last box, against the input bit for bit. The intermediate's launch needs
codegen/compile.py to encode its tensor map over its workspace (tests/codegen/test_read_back_launch.py)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402

from rules.test_tma_store_read_back import read_back  # noqa: E402

pytestmark = pytest.mark.gpu
P = tp.ParallelType
TMA = tp.LoadStoreOpType.TMA
SIZES = [512, 1000, 5003, 100000]


def copies_back(kernel, outputs=1):
    for n in SIZES:
        x = torch.randn(n, device="cuda")
        outs = [torch.full((n,), float("nan"), device="cuda") for _ in range(outputs)]
        kernel.run(x, out=outs)
        torch.cuda.synchronize()
        for out in outs:
            assert torch.equal(out, x), n


@pytest.mark.parametrize("blocks,stages", [("none", 0), ("same", 0), ("none", 10)])
def test_an_intermediate_stored_by_tma_is_read_back(blocks, stages):
    fusion = read_back(f"read_back_{blocks}_{stages}", blocks=blocks)
    if stages:
        fusion.tensors[1].circular_buffer(stages, 4)
    copies_back(tp.compile(fusion, "sm_90a"))


def test_an_output_stored_by_tma_is_read_back_by_its_thread():
    with tp.Fusion("output_read_back_gpu") as fusion:
        t0 = tp.make_contig_tensor(1)
        fusion.add_input(t0)
        t1 = tp.set(t0, op=TMA)
        t2 = tp.set(t1, op=TMA)
        t3 = tp.set(t2)
        fusion.add_output(t2)
        fusion.add_output(t3)
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2, t3):
        t.split(0, 128)
        t.axis(0).parallelize(P.BIDx)
    t1.inline_at(1)
    t1.axis(-1).parallelize(P.Bulk)
    t2.axis(-1).parallelize(P.Bulk)
    copies_back(tp.compile(fusion, "sm_90a"), outputs=2)
