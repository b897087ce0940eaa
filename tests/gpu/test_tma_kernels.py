"""TMA and ldmatrix/stmatrix kernels on the GPU (marker `gpu`): every valid bundled example that
uses them, run on fresh random
inputs into poisoned outputs at sizes that leave partial boxes, against the float64 reference
(bit-exact for pure data movement). Symbolic extents take the first sizes from SIZES that meet
the fusion's assumptions; a discontiguous axis gets a real gap in memory.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402
from tileproof.codegen.runtime.binding import check_assumptions  # noqa: E402
from tileproof.codegen.runtime.reference import reference  # noqa: E402
from tileproof.model.expr import evaluate  # noqa: E402
from tileproof.model.types import LoadStoreOpType  # noqa: E402
from tileproof.schedule_files import discover  # noqa: E402

from gpu.test_kernels import TORCH_DTYPES, check_reference  # noqa: E402

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]
SIZES = (200, 328, 96, 64, 256)  # partial boxes first
MOVES = ("load_store", "transpose", "broadcast")


DATA_PATHS = (LoadStoreOpType.TMA, LoadStoreOpType.LdMatrix, LoadStoreOpType.StMatrix)
FILES = ("tma_smem.py", "tma_boxes.py", "ldst_matrix.py")


def uses_data_paths(fusion) -> bool:
    return any(op.kind == "load_store" and op.op_type in DATA_PATHS for op in fusion.exprs)


def tma_cases():
    cases = discover([str(ROOT / "examples" / "valid" / f) for f in FILES])
    return [c for c in cases if c.expect.ok and uses_data_paths(c.build())]


def sizes_for(fusion) -> dict[str, int]:
    names = sorted(fusion.symbols)
    for values in itertools.product(SIZES, repeat=len(names)):
        env = dict(zip(names, values))
        try:
            check_assumptions(list(fusion.assumptions), env)
        except tp.InputError:
            continue
        return env
    raise AssertionError(f"no sizes from {SIZES} meet {fusion.assumptions}")


def make_input(tv, env):
    """A random array of tv's shape; each discontiguous axis strides over a gap of its own size."""
    shape = [evaluate(i.extent_expr, env) for i in tv.logical]
    dtype = TORCH_DTYPES[tv.dtype.name]
    padded, index = [], []
    for n, contiguous in zip(shape, tv.contiguity):
        padded.append(n)
        index.append(slice(None))
        if contiguous is False:
            padded.append(2)
            index.append(0)
    return torch.randn(*padded, device="cuda").to(dtype)[tuple(index)]


@pytest.mark.parametrize("case", tma_cases(), ids=lambda c: c.name)
def test_tma_example_matches_the_reference(case):
    fusion = case.build()
    kernel = tp.compile(fusion, target="sm_90a")
    env = sizes_for(fusion)
    for _ in range(2):
        inputs = [make_input(t, env) for t in fusion.inputs]
        outs = [torch.full([evaluate(i.extent_expr, env) for i in t.logical], float("nan"),
                           dtype=TORCH_DTYPES[t.dtype.name], device="cuda") for t in fusion.outputs]
        kernel.run(*inputs, out=outs, **env)
        torch.cuda.synchronize()
        if all(op.kind in MOVES for op in fusion.exprs):
            host = [x.float().cpu().numpy() if x.dtype == torch.bfloat16 else x.cpu().numpy() for x in inputs]
            for got, want in zip(outs, reference(fusion, host)):
                assert torch.equal(got.cpu().double(), torch.from_numpy(want).double()), case.name
        else:
            check_reference(fusion, inputs, outs)


def test_tma_source_uses_the_bulk_tensor_copy():
    case = next(c for c in tma_cases() if c.name == "tma_pointwise_vectorized_store")
    kernel = tp.compile(case.build())
    assert kernel.cuda_source.count("tp_bulk_load_1d(tp_smem") == 2 and "__grid_constant__" in kernel.cuda_source
