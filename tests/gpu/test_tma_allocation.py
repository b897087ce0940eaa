"""TMAs on global tensors allocated along merged logical axes (examples/valid/tma_allocation.py)
on the GPU (marker `gpu`): each array is laid out as its allocation domain says (a padded row
for a discontiguous merged axis, N-major memory for [N, M*K]), filled at random (inputs) or
with NaN (outputs), and the kernel's outputs must equal the reference bit for bit. Sizes leave
partial boxes, so a tensor map that ran one logical axis into the next would read or write
the wrong rows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402
from tileproof.codegen.runtime.binding import check_assumptions  # noqa: E402
from tileproof.codegen.runtime.reference import reference  # noqa: E402
from tileproof.model.expr import evaluate  # noqa: E402
from tileproof.model.global_layout import global_strides  # noqa: E402
from tileproof.schedule_files import discover  # noqa: E402

from gpu.test_kernels import TORCH_DTYPES  # noqa: E402

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]
CASES = [c for c in discover([str(ROOT / "examples" / "valid" / "tma_allocation.py")]) if c.expect.ok]
SIZES = {"M": 37, "K": 200}  # 12 * 37 = 444 rows and 200 columns: partial boxes on both dimensions


def element_strides(tv, env) -> list[int]:
    """Strides (elements, per logical axis) of an array in tv's allocation order; a discontiguous
    axis strides 16 bytes past the next 16-byte multiple (a real gap, TMA-aligned)."""
    layout = global_strides(tv)
    shape = [evaluate(i.extent_expr, env) for i in tv.logical]
    es = tv.dtype.bytes
    strides = [0] * len(shape)
    running = 1
    for axis, contiguous in reversed(list(zip(layout.alloc_axes, layout.contiguous))):
        if contiguous is None:
            continue
        if contiguous is False:
            running = (running * es + 15) // 16 * 16 // es + 16 // es
        strides[axis] = running
        running *= shape[axis]
    return strides


def laid_out(tv, env, fill):
    shape = [evaluate(i.extent_expr, env) for i in tv.logical]
    strides = element_strides(tv, env)
    span = 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    flat = fill(span).to(TORCH_DTYPES[tv.dtype.name])
    return torch.as_strided(flat, shape, strides)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_merged_allocation_tma_matches_the_reference(case):
    fusion = case.build()
    env = {s: SIZES[s] for s in fusion.symbols}
    check_assumptions(list(fusion.assumptions), env)
    kernel = tp.compile(fusion, target="sm_90a")
    for _ in range(2):
        inputs = [laid_out(t, env, lambda n: torch.randn(n, device="cuda")) for t in fusion.inputs]
        outs = [laid_out(t, env, lambda n: torch.full((n,), float("nan"), device="cuda")) for t in fusion.outputs]
        kernel.run(*inputs, out=outs, **env)
        torch.cuda.synchronize()
        host = [x.cpu().numpy() for x in inputs]
        for got, want in zip(outs, reference(fusion, host)):
            assert torch.equal(got.cpu().double(), torch.from_numpy(want).double()), case.name
