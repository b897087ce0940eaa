"""TMA tiles in padded shared buffers on the GPU (marker `gpu`): the valid examples whose buffer
is not a whole number of tiles (3, 5 or 15 swizzled rows padded to 8 or 16, two stacked tiles
off the swizzle period, Figure 15 (e)). Each runs at sizes whose last box is partly out of
bounds, on fresh random inputs into outputs poisoned with NaN, and must copy bit for bit: the
TMA writes only its box (the padding is never read back into the output), and a stacked tile's
swizzle follows the absolute shared address.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402
from tileproof.model.expr import evaluate  # noqa: E402
from tileproof.schedule_files import discover  # noqa: E402

from gpu.test_kernels import TORCH_DTYPES  # noqa: E402

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]
# example -> bytes of its shared buffer (the padded allocation, larger than the box)
PADDED = {
    "swizzle_128b_padded_3_rows": 1024,
    "swizzle_64b_padded_5_rows": 512,
    "swizzle_128b_padded_15_rows": 2048,
    "swizzle_128b_padded_tiles_stacked": 2048,
    "tma_simple_ldst_3_rows_flattened": 1024,
    "figure15e_not_whole_tiles": 1152,
}
ROWS = (1, 2, 5, 14, 15, 16, 199, 1001)  # partial last boxes for tiles of 3, 5, 10 and 15 rows


def cases():
    found = {c.name: c for c in discover([str(ROOT / "examples" / "valid" / "tma_smem.py")])}
    assert set(PADDED) <= set(found), set(PADDED) - set(found)
    return [found[name] for name in PADDED]


def sizes(fusion) -> list[dict[str, int]]:
    return [{"M": m} for m in ROWS] if fusion.symbols else [{}]


@pytest.mark.parametrize("case", cases(), ids=lambda c: c.name)
def test_padded_tiles_copy_bit_for_bit(case):
    fusion = case.build()
    kernel = tp.compile(fusion, target="sm_90a")
    assert kernel.launch_params.shared_memory_bytes == PADDED[case.name]  # the padding is allocated
    (src,), (dst,) = fusion.inputs, fusion.outputs
    for env in sizes(fusion):
        shape = [evaluate(i.extent_expr, env) for i in src.logical]
        x = torch.randn(*shape, device="cuda").to(TORCH_DTYPES[src.dtype.name])
        out = torch.full(shape, float("nan"), dtype=x.dtype, device="cuda")
        kernel.run(x, out=[out], **env)
        torch.cuda.synchronize()
        assert torch.equal(out.view(torch.int16 if x.element_size() == 2 else torch.int32),
                           x.view(torch.int16 if x.element_size() == 2 else torch.int32)), (case.name, env)
