"""Plain loads with a cache operator on the GPU (marker `gpu`; skipped without PyTorch or a CUDA
device): ld.global.ca / .cg / .cs of a fusion input (tests/support/cached_loads.py) into
registers or shared memory, at four sizes, into an output poisoned with NaN: the copy is the
input bit for bit (nvFuser's MemoryTest.LoadCache runs its add of 1 in tests/gpu/test_nvfuser.py)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402

from support.cached_loads import QUALIFIER, cached_copy  # noqa: E402

pytestmark = pytest.mark.gpu
TORCH = {"float32": torch.float32, "float16": torch.float16, "float64": torch.float64, "int8": torch.int8}


@pytest.mark.parametrize("memory", [tp.MemoryType.Local, tp.MemoryType.Shared])
@pytest.mark.parametrize("dtype,vector", [(tp.float32, 4), (tp.float16, 1), (tp.int8, 4), (tp.float64, 2)])
@pytest.mark.parametrize("cache_op", list(QUALIFIER))
def test_a_cached_load_copies_its_input(cache_op, dtype, vector, memory):
    kernel = tp.compile(cached_copy(cache_op, dtype, vector, memory=memory))
    assert f"ld.global.{QUALIFIER[cache_op]}" in kernel.cuda_source
    for n in (vector, 32 * vector, 1000 * vector, 4099 * vector):
        if dtype is tp.int8:
            t0 = torch.randint(-128, 128, (n,), device="cuda", dtype=torch.int8)
            out = torch.zeros(n, device="cuda", dtype=torch.int8)
        else:
            t0 = torch.randn(n, device="cuda").to(TORCH[dtype.name])
            out = torch.full((n,), float("nan"), device="cuda", dtype=TORCH[dtype.name])
        kernel.run(t0, out=[out])
        torch.cuda.synchronize()
        assert torch.equal(out, t0), (n, cache_op)
