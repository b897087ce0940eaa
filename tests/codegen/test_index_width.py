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


def copy_assuming(*assumptions):
    with tp.Fusion("copy") as fusion:
        t0 = tp.make_tensor(["M", "N"]); fusion.add_input(t0)
        t1 = tp.set(t0); fusion.add_output(t1)
    for a in assumptions:
        fusion.assume(a)
    t1.split(-1, 128)
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(-1).parallelize(P.TIDx)
    return tp.compile(fusion)


def test_assumptions_that_bound_each_symbol_give_32_bits():
    # M N < 2^32 with each bounded alone (run() checks both at launch); a product bound is not read
    assert copy_assuming("N <= 8192", "M <= 524288").ir.index_bits == 32  # at most 524287 x 8192 + 8191 < 2^32
    assert copy_assuming("N <= 8192", "M <= 524289").ir.index_bits == 64  # the last row's end reaches 2^32
    assert copy_assuming("N <= 8192").ir.index_bits == 64
    assert copy_assuming("M * N <= 4096").ir.index_bits == 64


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


def test_the_late_passes_compute_no_larger_value():
    """index-width runs after whole-tile and invariants: a named term ranges over its value's
    interval and a whole tile's guard sums what the predicates it implies sum, so the largest value
    is the lowered kernel's, and a 192-wide partial tile keeps 32-bit indices."""
    from tileproof.codegen.ir import IndexNames, WholeTile, walk
    from tileproof.codegen.lower import lower
    from tileproof.codegen.lower.index_width import index_bits, largest_index
    from tileproof.recipes import Cluster, Epilogue, GridOrder, HopperGemmParams, HopperTile, TmaPipeline, hopper_gemm

    params = HopperGemmParams(tile=HopperTile(m=128, n=192),
                              pipeline=TmaPipeline(stages=4, prefetch=2,
                                                   warp_specialized=tp.WarpSpecialized(P.TIDy, num_registers=(40, 232))),
                              grid=GridOrder(group=16, persistent=128), cluster=Cluster(size=2),
                              epilogue=Epilogue(dtype=tp.bfloat16))
    fusion, target = hopper_gemm(8000, 8000, 8192, params).snapshot(), tp.get_target("sm_90a")
    lowered = lower(fusion, target, until="signature").kernel
    ir = lower(fusion, target).kernel
    assert any(isinstance(n, IndexNames) for n in walk(ir.body)) and any(isinstance(n, WholeTile) for n in walk(ir.body))
    assert largest_index(ir) == largest_index(lowered) < 2**32
    assert ir.index_bits == index_bits(ir) == 32
