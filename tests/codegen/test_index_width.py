"""Index math is 32-bit where every value is proved below 2^32 (codegen/lower/index_width.py),
64-bit otherwise; extent parameters follow."""

from __future__ import annotations

import tileproof as tp
from tileproof.codegen.ir import ParamKind

P = tp.ParallelType


def copy(shape, tile=128):
    with tp.Fusion("copy") as fusion:
        t0 = tp.make_tensor(shape); fusion.add_input(t0)
        t1 = tp.set(t0); fusion.add_output(t1)
    t1.split(-1, tile)
    t1.axis(-2).parallelize(P.BIDx)
    t1.axis(-1).parallelize(P.TIDx)
    return tp.compile(fusion)


def test_concrete_sizes_below_2_to_32_get_32_bit_indices():
    kernel = copy([1024, 1024])
    assert kernel.ir.index_bits == 32
    body = kernel.cuda_source[kernel.cuda_source.index('extern "C"'):]
    assert "ULL" not in body and "for (unsigned i" in body


def test_a_symbolic_1d_extent_fits_32_bits_and_its_parameter_is_32_bit():
    kernel = copy(["N"])  # blockIdx.x * 128 + threadIdx.x < 2^31 + 128: N <= 2^31 - 1 is checked at launch
    assert kernel.ir.index_bits == 32
    (n,) = [p for p in kernel.ir.params if p.kind is ParamKind.EXTENT]
    assert n.ctype == "unsigned" and f"unsigned {n.name}" in kernel.cuda_source


def test_a_product_of_symbols_keeps_64_bits():
    kernel = copy(["M", "N"])  # M * N may reach 2^62
    assert kernel.ir.index_bits == 64
    assert all(p.ctype == "unsigned long long" for p in kernel.ir.params if p.kind is ParamKind.EXTENT)


def test_offsets_reaching_2_to_32_keep_64_bits():
    assert copy([65536, 65536]).ir.index_bits == 32  # offsets up to 2^32 - 1
    assert copy([65536, 65537]).ir.index_bits == 64  # 65536 * 65537 > 2^32


def test_a_run_time_stride_keeps_64_bits():
    with tp.Fusion("strided") as fusion:
        t0 = tp.make_tensor([64, 128], contiguity=[False, True]); fusion.add_input(t0)
        t1 = tp.set(t0); fusion.add_output(t1)
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.TIDx)
    kernel = tp.compile(fusion)
    assert any(p.kind is ParamKind.STRIDE for p in kernel.ir.params) and kernel.ir.index_bits == 64
