"""The tensor-core fragment maps on the hardware (marker `gpu`; skipped without a CUDA device
of compute capability 8.0 or newer), like nvFuser's MmaTest.SingleTile: the probe kernels of
codegen/emit/mma_probe.py, whose every index is a fragment map of hw/mma.py, compute one
mma.sync tile D = A B + C.

With A = iota, B = one-hot columns (column n picks row (n + s) % k, for every shift s) and C
distinct integers, D must be exactly A[m, (n + s) % k] + C[m, n]: every element of A, B, C and
D is told apart, so any misplaced element shows. Then random data against float64 (the operands
rounded to the input type first, as the kernel does).
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from tileproof.codegen.emit.mma_probe import probe_kernel
from tileproof.codegen.errors import NoDeviceError
from tileproof.codegen.runtime import driver
from tileproof.codegen.runtime.nvrtc import compile_to_cubin
from tileproof.hw import mma

try:
    CAPABILITY = driver.capability(0)
except NoDeviceError:
    pytest.skip("no CUDA device", allow_module_level=True)
if CAPABILITY < (8, 0):
    pytest.skip(f"mma.sync tf32 / bf16 needs compute capability 8.0, this GPU has {CAPABILITY}",
                allow_module_level=True)

pytestmark = pytest.mark.gpu
ARCH = "sm_90a" if CAPABILITY == (9, 0) else f"sm_{CAPABILITY[0]}{CAPABILITY[1]}"
PROBES = [mma.MMA_M16N8K8_TF32, mma.MMA_M16N8K16["bfloat16"], mma.MMA_M16N8K16["float16"],
          mma.MMA_M16N8K8["bfloat16"], mma.MMA_M16N8K8["float16"]]


# -- host-side rounding to the operand types ------------------------------------------------------


def to_tf32(x: np.ndarray) -> np.ndarray:
    """float32 rounded as cvt.rna.tf32.f32 does: 10 mantissa bits, ties away from zero."""
    bits = x.astype(np.float32).view(np.uint32)
    return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


def to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns, round to nearest even (finite values)."""
    bits = x.astype(np.float32).view(np.uint32)
    return ((bits + np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1))) >> 16).astype(np.uint16)


def operand(x: np.ndarray, input_type: str) -> tuple[np.ndarray, np.ndarray]:
    """(what the kernel is given, the value the tensor core multiplies, as float64)."""
    if input_type == "tf32":
        given = x.astype(np.float32)
        return given, to_tf32(given).astype(np.float64)
    if input_type == "bf16":
        bits = to_bf16_bits(x)
        return bits, (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    half = x.astype(np.float16)
    return half.view(np.uint16), half.astype(np.float64)


# -- one launch -------------------------------------------------------------------------------------


class Runner:
    """A compiled probe and its device buffers."""

    def __init__(self, inst: mma.MmaInstruction):
        self.inst = inst
        probe = probe_kernel(inst)
        self.module, self.function = driver.load_function(compile_to_cubin(probe.source, ARCH), probe.name, 0)
        nbytes = 4 if inst.input_type == "tf32" else 2
        self.sizes = {"a": inst.m * inst.k * nbytes, "b": inst.k * inst.n * nbytes, "c": inst.m * inst.n * 4,
                      "d": inst.m * inst.n * 4}
        self.ptrs = {k: driver.mem_alloc(0, n) for k, n in self.sizes.items()}

    def close(self):
        for p in self.ptrs.values():
            driver.mem_free(0, p)

    def __call__(self, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(D from the GPU, the float64 reference A B + C with A and B rounded)."""
        (a_in, a_val), (b_in, b_val) = operand(a, self.inst.input_type), operand(b, self.inst.input_type)
        c32 = c.astype(np.float32)
        for name, data in (("a", a_in), ("b", b_in), ("c", c32), ("d", np.full(c.shape, np.nan, np.float32))):
            driver.copy_to_device(0, self.ptrs[name], np.ascontiguousarray(data).tobytes())
        args = [(self.ptrs[k], ctypes.c_void_p) for k in "abcd"]
        driver.launch(self.function, (1, 1, 1), (32, 1, 1), 0, 0, args)
        driver.synchronize(0)
        d = np.frombuffer(driver.copy_to_host(0, self.ptrs["d"], self.sizes["d"]), np.float32).reshape(c.shape)
        return d.astype(np.float64), a_val @ b_val + c32.astype(np.float64)


@pytest.fixture(params=PROBES, ids=[p.name for p in PROBES])
def runner(request):
    r = Runner(request.param)
    yield r
    r.close()


def test_iota_times_one_hot_columns_is_exact(runner):
    inst = runner.inst
    a = np.arange(inst.m * inst.k, dtype=np.float64).reshape(inst.m, inst.k)  # <= 255: exact in bf16
    c = 1024.0 * np.arange(inst.m * inst.n).reshape(inst.m, inst.n)
    for shift in range(inst.k):
        b = np.zeros((inst.k, inst.n))
        picks = (np.arange(inst.n) + shift) % inst.k
        b[picks, np.arange(inst.n)] = 1.0
        d, want = runner(a, b, c)
        np.testing.assert_array_equal(d, a[:, picks] + c, err_msg=f"{inst.name}, shift {shift}")
        np.testing.assert_array_equal(d, want)


def test_random_tiles_match_float64(runner):
    rng = np.random.default_rng(12)
    inst = runner.inst
    for _ in range(4):
        a, b = rng.standard_normal((inst.m, inst.k)), rng.standard_normal((inst.k, inst.n))
        c = rng.standard_normal((inst.m, inst.n))
        d, want = runner(a, b, c)
        # products of the rounded operands are exact in f32; only the f32 sums round
        np.testing.assert_allclose(d, want, rtol=1e-5, atol=1e-5, err_msg=inst.name)


def test_a_probe_built_with_the_16_bit_a_order_for_tf32_is_wrong():
    """The probe tells maps apart on the hardware: with the 16-bit A order used for tf32 (element
    1 one column right instead of 8 rows down) D is wrong."""
    good, wrong_a = mma.MMA_M16N8K8_TF32, mma.MMA_M16N8K8["float16"].a
    bad = mma.MmaInstruction(good.ptx, good.m, good.n, good.k, good.input_type, good.threads,
                             mma.Fragment("A", 16, 8, 32, 4, 32, wrong_a.position_map, wrong_a.holder_map),
                             good.b, good.c)
    r = Runner(bad)
    try:
        a, b, c = np.arange(128.0).reshape(16, 8), np.eye(8), np.zeros((16, 8))
        d, _ = r(a, b, c)
    finally:
        r.close()
    wrong = int((d != a).sum())
    print(f"16-bit A order for tf32: {wrong} of 128 elements of D wrong")
    assert wrong > 0
