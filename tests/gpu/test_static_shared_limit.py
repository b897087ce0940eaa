"""Static and dynamic shared memory count together (SMEM-CAPACITY, execution/smem_plan.py
dynamic_limit), measured on the GPU (marker `gpu`): a kernel with tileproof's layout (static
mbarriers, the dynamic base `extern __shared__ __align__(1024)`) gets the opt-in maximum less the
static bytes rounded up to 1024, and not 1 byte more."""

from __future__ import annotations

import ctypes

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

from tileproof.codegen.runtime.nvrtc import compile_to_cubin  # noqa: E402
from tileproof.codegen.runtime import driver  # noqa: E402
from tileproof.execution.smem_plan import BASE_ALIGN  # noqa: E402
from tileproof.model.targets import get_target  # noqa: E402

pytestmark = pytest.mark.gpu
SOURCE = """
extern "C" __global__ void probe(unsigned* out) {
  __shared__ __align__(8) unsigned long long bar[%d];
  extern __shared__ __align__(1024) unsigned char smem[];
  if (threadIdx.x < %d) {  // every mbarrier initialized through its address, as tileproof's kernels do: kept
    asm volatile("mbarrier.init.shared::cta.b64 [%%0], 1;" :: "r"((unsigned)__cvta_generic_to_shared(&bar[threadIdx.x])));
  }
  if (threadIdx.x == 0) smem[0] = 1;
  __syncthreads();
  out[0] = smem[0];
}
"""


@pytest.mark.parametrize("barriers", [1, 13, 32])
def test_the_limit_tileproof_proves_against_is_the_hardware_s(barriers):
    """dynamic_limit's bytes can be opted into and launched; the most the driver takes (found by
    bisection) is printed: tileproof's limit must not exceed it."""
    cap = get_target("sm_90a").smem_bytes_per_block
    cubin = compile_to_cubin(SOURCE % (barriers, barriers), "sm_90a", None)
    _, function = driver.load_function(cubin, "probe", 0)
    ours = cap - -(-8 * barriers // BASE_ALIGN) * BASE_ALIGN

    def fits(n: int) -> bool:
        try:
            driver.allow_dynamic_smem(function, n)
            return True
        except Exception:  # noqa: BLE001 - the driver's refusal is the answer
            return False

    lo, hi = cap - 4096, cap + 1  # fits(lo), not fits(hi)
    assert fits(lo) and not fits(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    print(f"{barriers} mbarriers ({8 * barriers} static bytes): the driver takes {lo} dynamic bytes, tileproof {ours}")
    assert ours <= lo
    driver.allow_dynamic_smem(function, ours)
    out = driver.mem_alloc(0, 4)
    try:
        driver.launch(function, (1, 1, 1), (32, 1, 1), ours, 0, [(out, ctypes.c_void_p)])
        driver.synchronize(0)
        assert int.from_bytes(driver.copy_to_host(0, out, 4), "little") == 1
    finally:
        driver.mem_free(0, out)
