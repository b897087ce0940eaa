"""Global tensors a TMA store writes and the block reads back, on the GPU (marker `gpu`; skipped
without PyTorch or a CUDA device): the intermediate T2 of tests/support/tma_read_back.py
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

from support.tma_read_back import output_read_back, read_back  # noqa: E402

pytestmark = pytest.mark.gpu
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
    fusion = output_read_back("output_read_back_gpu", blocks=True)
    copies_back(tp.compile(fusion, "sm_90a"), outputs=2)
