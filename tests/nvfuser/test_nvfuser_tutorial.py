"""nvFuser tests/cpp/test_tutorial.cpp, translated (tests/support/nvfuser.py says how).

Each TEST's blocks (one schedule each, compiled and run) are cases of their own: "Tutorial.X/<step>".
Skipped: Tutorial.Reshape and Tutorial.IdModelReshapeAnalysis (reshape ops and IdModel graph
assertions; tileproof has no reshape). makeSymbolicTensor is a symbolic tensor of unknown strides
(tp.make_tensor with -1 extents), makeContigTensor a contiguous symbolic one. Where a TEST's verdict
depends on the size it launches (Tutorial.Reduction throws at 1024 x 10 threads only), the sizes the
C++ runs are used.
"""

import pytest

import tileproof as tp
from support.nvfuser import THROWS, VALID, Case, check, params

P = tp.ParallelType
TMA = tp.LoadStoreOpType.TMA


def _copy(name, input_tensor):
    """tv0 -> tv1 = set(tv0), tv1 the output."""
    with tp.Fusion(name) as fusion:
        tv0 = input_tensor()
        fusion.add_input(tv0)
        tv1 = tp.set(tv0)
        fusion.add_output(tv1)
    return fusion, tv0, tv1


def memcpy(parallel):
    """Tutorial.Memcpy: a copy of a symbolic 2-D tensor, first one thread, then [i0*i1/256 BIDx, 256 TIDx]."""
    fusion, _, tv1 = _copy("memcpy", lambda: tp.make_tensor([-1, -1]))
    if parallel:  # gridDim.x = ceil(i0 * i1 / 256): larger tensors fail to launch, in nvFuser too
        fusion.assume("T0_0 * T0_1 <= 256 * (2**31 - 1)")
        tv1.merge(0, 1)
        tv1.split(0, 256)
        tv1.axis(1).parallelize(P.TIDx)
        tv1.axis(0).parallelize(P.BIDx)
    return fusion


def _run_copy(shapes):
    def run(kernel, torch):
        for shape in shapes:
            t0 = torch.randn(shape, device="cuda")
            (out,) = kernel.run(t0)
            assert torch.equal(out, t0), shape
    return run


def reduction(parallel_types, shape=(10, 1024)):
    """Tutorial.Reduction: tv1 = sum(tv0, {1}) with tv1's axes parallelized as given. The C++ runs
    [10, 1024] (and [10, 32] for the TIDy x TIDx step, after the 1024 x 10 block throws)."""
    with tp.Fusion("reduction") as fusion:
        tv0 = tp.make_contig_concrete_tensor(list(shape))
        fusion.add_input(tv0)
        tv1 = tp.sum(tv0, [1])
        fusion.add_output(tv1)
    for axis, parallel_type in parallel_types.items():
        tv1.axis(axis).parallelize(parallel_type)
    return fusion


def _run_row_sum(shape):
    def run(kernel, torch):
        t0 = torch.randn(shape, device="cuda")
        (out,) = kernel.run(t0)
        torch.testing.assert_close(out, t0.sum(1), rtol=1e-5, atol=1e-4)
    return run


def reduction_rfactor_block():
    """Tutorial.ReductionRFactor, first block: [r1/1024, r1024], rFactor({0}); tv2 [r, TIDx], tv1 [rTIDx]."""
    with tp.Fusion("reduction_rfactor_block") as fusion:
        tv0 = tp.make_tensor([-1])
        fusion.add_input(tv0)
        tv1 = tp.sum(tv0, [0])
        fusion.add_output(tv1)
    tv1.split(0, 1024)
    tv2 = tv1.rfactor([0])
    tv1.axis(0).parallelize(P.TIDx)
    tv2.axis(1).parallelize(P.TIDx)
    return fusion


def reduction_rfactor_grid():
    """Tutorial.ReductionRFactor, second block: [r/1024/100, r100, r1024], two rFactors, every
    tensor's axis 0 on BIDx: tv1's last reduction is across blocks (a grid reduction)."""
    with tp.Fusion("reduction_rfactor_grid") as fusion:
        tv0 = tp.make_tensor([-1])
        fusion.add_input(tv0)
        tv1 = tp.sum(tv0, [0])
        fusion.add_output(tv1)
    tv1.split(0, 1024)
    tv1.split(0, 100)
    tv2 = tv1.rfactor([1])
    tv3 = tv1.rfactor([1])
    tv2.axis(0).parallelize(P.BIDx)
    tv3.axis(0).parallelize(P.BIDx)
    tv1.axis(0).parallelize(P.BIDx)
    tv2.axis(2).parallelize(P.TIDx)
    tv3.axis(1).parallelize(P.TIDx)
    return fusion


def _run_sum(sizes):
    def run(kernel, torch):
        for n in sizes:
            t0 = torch.randn(n, device="cuda", dtype=torch.float32)
            (out,) = kernel.run(t0)
            torch.testing.assert_close(out, t0.sum(), rtol=1e-4, atol=1e-2)
    return run


# -- Tutorial.BasicTMA: six TMA schedules of a 3-D contiguous copy ---------------------------------


def _tma_copy(name, load):
    """input [300, 300, 300] (the size the C++ runs, with 32-bit indexing) -> output = set(input), with a shared cache between them that a TMA loads
    (cacheAfter of the input) or that a TMA stores (cacheBefore of the output)."""
    fusion, tv_in, tv_out = _copy(name, lambda: tp.make_contig_concrete_tensor([300, 300, 300]))
    smem = tv_in.cache_after(TMA) if load else tv_out.cache_before(TMA)
    smem.set_memory_type(tp.MemoryType.Shared)
    return fusion, smem, tv_out


def basic_tma_1d_load_one_tile_per_block():
    """[BIDx, Bulk{256}] TMA load; output [BIDx, TIDx{256}]."""
    fusion, smem, out = _tma_copy("basic_tma_1d_load", load=True)
    smem.merge(0).merge(0).split(0, 256)
    smem.axis(0).parallelize(P.BIDx)
    smem.axis(1).parallelize(P.Bulk)
    out.merge(0).merge(0).split(0, 256)
    out.axis(0).parallelize(P.BIDx)
    out.axis(1).parallelize(P.TIDx)
    return fusion


def basic_tma_1d_load_four_tiles_serial():
    """[BIDx, 4, Bulk{256}]: four boxes per block, one after the other."""
    fusion, smem, out = _tma_copy("basic_tma_1d_load_serial", load=True)
    smem.merge(0).merge(0).split(0, 256).split(0, 4)
    smem.axis(0).parallelize(P.BIDx)
    smem.axis(2).parallelize(P.Bulk)
    out.merge(0).merge(0).split(0, 256).split(0, 4)
    out.axis(0).parallelize(P.BIDx)
    out.axis(2).parallelize(P.TIDx)
    return fusion


def basic_tma_1d_load_four_tiles_tidx():
    """[BIDx, TIDx{4}, Bulk{256}]: four threads each issue one box."""
    fusion, smem, out = _tma_copy("basic_tma_1d_load_tidx", load=True)
    smem.merge(0).merge(0).split(0, 256).split(0, 4)
    smem.axis(0).parallelize(P.BIDx)
    smem.axis(1).parallelize(P.TIDx)
    smem.axis(2).parallelize(P.Bulk)
    out.merge(0).merge(0).split(0, 256).split(0, 4)
    out.axis(0).parallelize(P.BIDx)
    out.axis(2).parallelize(P.TIDx)
    return fusion


def basic_tma_1d_store():
    """The TMA store counterpart: output [BIDx, TIDx{4}, Bulk{256}], the shared cache [BIDx, 4, TIDx{256}]."""
    fusion, smem, out = _tma_copy("basic_tma_1d_store", load=False)
    out.merge(0).merge(0).split(0, 256).split(0, 4)
    out.axis(0).parallelize(P.BIDx)
    out.axis(1).parallelize(P.TIDx)
    out.axis(2).parallelize(P.Bulk)
    smem.merge(0).merge(0).split(0, 256).split(0, 4)
    smem.axis(0).parallelize(P.BIDx)
    smem.axis(2).parallelize(P.TIDx)
    return fusion


def _tile_2d(tv):
    """[I0, I1, I2] -> [I0, I1/32/2, I2/32/2, 2, 2, 32, 32] as the C++ splits and reorders it."""
    tv.split(2, 32).split(1, 32)
    tv.split(3, 2).split(1, 2)
    tv.reorder({3: -2, 2: -4})


def basic_tma_2d_load():
    """2-D boxes [32, 32]: [BIDx, BIDy, BIDz, TIDx{2}, 2, Bulk{32}, Bulk{32}], allocation = loop."""
    fusion, smem, out = _tma_copy("basic_tma_2d_load", load=True)
    _tile_2d(smem)
    smem.set_allocation_domain(smem.get_loop_domain(), True)
    smem.axis(0).parallelize(P.BIDx)
    smem.axis(1).parallelize(P.BIDy)
    smem.axis(2).parallelize(P.BIDz)
    smem.axis(3).parallelize(P.TIDx)
    smem.axis(5).parallelize(P.Bulk)
    smem.axis(6).parallelize(P.Bulk)
    _tile_2d(out)
    out.axis(0).parallelize(P.BIDx)
    out.axis(1).parallelize(P.BIDy)
    out.axis(2).parallelize(P.BIDz)
    out.merge(3)
    out.axis(3).parallelize(P.TIDx)
    return fusion


def basic_tma_2d_store():
    """2-D boxes [32, 32] stored: output [BIDx, BIDy, TIDx{2}, Bulk{32}, BIDz, 2, Bulk{32}] (not
    reordered), the shared cache tiled as the load's and allocated as its loop domain."""
    fusion, smem, out = _tma_copy("basic_tma_2d_store", load=False)
    out.split(2, 32).split(1, 32)
    _tile_2d(smem)
    smem.set_allocation_domain(smem.get_loop_domain(), True)
    out.split(3, 2).split(1, 2)
    out.axis(0).parallelize(P.BIDx)
    out.axis(1).parallelize(P.BIDy)
    out.axis(2).parallelize(P.TIDx)
    out.axis(3).parallelize(P.Bulk)
    out.axis(4).parallelize(P.BIDz)
    out.axis(6).parallelize(P.Bulk)
    smem.merge(-2)
    smem.axis(0).parallelize(P.BIDx)
    smem.axis(1).parallelize(P.BIDy)
    smem.axis(2).parallelize(P.BIDz)
    smem.axis(-1).parallelize(P.TIDx)
    return fusion


_run_tma_copy = _run_copy([(300, 300, 300)])


def vectorize_store_pointwise_tma(shape=None):
    """Tutorial.VectorizeStorePointwiseTMA: tv2 = tv0 + tv1 (2-D contiguous fp32, symbolic, or of
    `shape`: the C++ runs 16384 x 16384); both inputs TMA loaded into shared memory, tv2b =
    cacheBefore(tv2) in registers. Reference tv2: [I0/4/132, BIDx{132}, I1/256, Unroll{4},
    TIDx{128}, Vectorize{2}]; the TMA tiles' last three axes are Bulk (a [4, 256] box);
    propagated, parallelized alike, inlineMost."""
    with tp.Fusion("vectorize_store_pointwise_tma") as fusion:
        tv0 = tp.make_contig_tensor(2) if shape is None else tp.make_contig_concrete_tensor(shape)
        tv1 = tp.make_contig_tensor(2) if shape is None else tp.make_contig_concrete_tensor(shape)
        fusion.add_input(tv0)
        fusion.add_input(tv1)
        tv2 = tp.add(tv0, tv1)  # tv1's extents unified with tv0's (T0_0, T0_1), as nvFuser maps them
        fusion.add_output(tv2)
    if shape is None:  # TMA's row stride, a multiple of 16 bytes: nvFuser checks it at launch
        fusion.assume("T0_1 % 4 == 0")
    tv0a = tv0.cache_after(TMA)
    tv1a = tv1.cache_after(TMA)
    tv2b = tv2.cache_before()
    tv0a.set_memory_type(tp.MemoryType.Shared)
    tv1a.set_memory_type(tp.MemoryType.Shared)
    num_threads, vectorization, num_stages, num_ctas = 128, 2, 4, 132
    tv2.split(-1, num_threads * vectorization)
    tv2.split(0, num_stages)
    tv2.split(-1, vectorization)
    tv2.split(0, num_ctas)
    tv2.reorder({3: 2, 2: 3})
    tp.propagate_transforms(tv2)
    tv2.axis(1).parallelize(P.BIDx)
    tp.parallelize_all_like(tv2)
    tv2b.axis(-2).parallelize(P.TIDx)
    tv2.axis(-3).parallelize(P.Unroll)
    tv2.axis(-2).parallelize(P.TIDx)
    tv2.axis(-1).parallelize(P.Vectorize)
    for tv in (tv0a, tv1a):
        for axis in (-1, -2, -3):
            tv.axis(axis).parallelize(P.Bulk)
    tp.inline_most(fusion)
    return fusion


def _run_add(shapes):
    def run(kernel, torch):
        for shape in shapes:
            a, b = torch.randn(shape, device="cuda"), torch.randn(shape, device="cuda")
            (out,) = kernel.run(a, b)
            torch.testing.assert_close(out, a + b)
    return run


def pointwise_broadcast_tma(shape=None, launch_checks=True):
    """Tutorial.PointwiseBroadcastTMA: tv3 = broadcast(tv0 [I1, I2, I3]) + tv1 [I0, I1, I2, I3]
    (tv1 contiguity {T, F, T, T}; symbolic, or of `shape`: the C++ runs [32, 2, 4, 256]); tv0, tv1
    TMA loaded, tv3 TMA stored from tv3b (shared). Reference tv3: [(I0*I1)*(I2*I3/256/4), 4, 256]
    propagated; tv3b and tv2 [BIDx, Unroll, TIDx], the TMA tensors [BIDx, TIDx, Bulk{256}]; inlineMost.
    Symbolic, it assumes nvFuser's launch checks (`launch_checks`: tests/rules take them off)."""
    with tp.Fusion("pointwise_broadcast_tma") as fusion:
        tv0 = tp.make_contig_tensor(3) if shape is None else tp.make_contig_concrete_tensor(shape[1:])
        tv1 = tp.make_tensor(shape or [-1, -1, -1, -1], contiguity=[True, False, True, True])
        fusion.add_input(tv0)
        fusion.add_input(tv1)
        tv2 = tp.broadcast(tv0, [True, False, False, False])
        tv3 = tp.add(tv2, tv1)
        fusion.add_output(tv3)
    if shape is None and launch_checks:
        # nvFuser's launch checks: TMA's row stride I2 * I3 * 4 bytes a multiple of 16 (the tensor
        # map's encode), and the TEST's 32-bit indexing, which nvFuser refuses for arguments of more
        # than 2^31 - 1 elements ("int64 is required for the arguments"); it bounds the grid too
        fusion.assume("(T0_1 * T0_2) % 4 == 0")
        fusion.assume("T1_0 * T0_0 * T0_1 * T0_2 <= 2147483647")
    tv0a = tv0.cache_after(TMA)
    tv1a = tv1.cache_after(TMA)
    tv3b = tv3.cache_before(TMA)
    for tv in (tv0a, tv1a, tv3b):
        tv.set_memory_type(tp.MemoryType.Shared)
    tv3.merge(-2, -1)
    tv3.split(-1, 256)
    tv3.merge(0, 1)
    tv3.split(-2, 4)
    tv3.merge(0, 1)
    tp.propagate_transforms(tv3)
    for tv in (tv3b, tv2):
        tv.axis(0).parallelize(P.BIDx)
        tv.axis(1).parallelize(P.Unroll)
        tv.axis(2).parallelize(P.TIDx)
    for tv in (tv1a, tv0a, tv3):
        tv.axis(0).parallelize(P.BIDx)
        tv.axis(1).parallelize(P.TIDx)
        tv.axis(2).parallelize(P.Bulk)
    tp.inline_most(fusion)
    return fusion


def _run_broadcast_add(kernel, torch):
    for dim0, dim1, dim2, dim3 in ((32, 2, 4, 256),):
        a = torch.randn(dim1, dim2, dim3, device="cuda")
        b = torch.randn(dim0, dim1, dim2, dim3, device="cuda")
        (out,) = kernel.run(a, b)
        torch.testing.assert_close(out, a + b)


def _run_broadcast_add_symbolic(kernel, torch):
    """The symbolic kernel at the TEST's shape and at shapes of partial 256-element boxes and
    1024-element tiles (I2 * I3 a multiple of 4, the row stride), tv1 also with rows padded past
    I2 * I3 (its discontiguous I1: a stride of 8 more elements). I1 is never 1: run() binds no
    stride of a size-1 axis, and tv1's tensor map needs I1's."""
    for dim0, dim1, dim2, dim3, pad in ((32, 2, 4, 256, 0), (1, 2, 1, 4, 0), (17, 3, 5, 100, 0),
                                        (5, 7, 3, 300, 8)):
        a = torch.randn(dim1, dim2, dim3, device="cuda")
        rows = torch.randn(dim0, dim1, dim2 * dim3 + pad, device="cuda")
        b = rows[:, :, :dim2 * dim3].unflatten(2, (dim2, dim3))
        (out,) = kernel.run(a, b)
        torch.testing.assert_close(out, a + b)


def tma_bank_conflict_free_transpose():
    """Tutorial.TMABankConflictFreeTranspose: output = transpose(input) of a contiguous 2-D fp32,
    input -TMA-> input_smem_cache (XOR-swizzled 32 x 32 tile) -> output_reg_cache -> output_smem_cache
    -TMA-> output. BoundedDirectionalTransformPropagator::backward(ref, -1, {boundary}) is written out:
    tileproof's propagate_transforms replays onto every tensor, so each backward step is applied by
    hand to the tensors between ref and the boundary."""
    with tp.Fusion("tma_bank_conflict_free_transpose") as fusion:
        tv_in = tp.make_contig_concrete_tensor([10000, 10000])  # the C++ runs 10000 x 10000
        fusion.add_input(tv_in)
        out = tp.transpose(tv_in, 0, 1)
        fusion.add_output(out)
    in_smem = tv_in.cache_after(TMA)
    in_smem.set_memory_type(tp.MemoryType.Shared)
    out_smem = out.cache_before(TMA)
    out_smem.set_memory_type(tp.MemoryType.Shared)
    out_reg = out_smem.cache_before()

    def tile(tv):  # [I1, I0] -> [I1/32, 32', I0/32, 32] -> [BIDx (I0/32 * I1/32), 32', 32]
        tv.split(1, 32).split(0, 32).reorder({-2: 0}).merge(0)

    tile(out)
    out.axis(0).parallelize(P.BIDx)
    for tv in (out_smem, out_reg):  # backward(output, -1, {input}), parallel types too
        tile(tv)
        tv.axis(0).parallelize(P.BIDx)
    # the transpose's producer, [I0, I1] -> [I0/32, 32, I1/32, 32'] -> [BIDx (I0/32 * I1/32), 32', 32]
    in_smem.split(1, 32).split(0, 32).reorder({1: 3, 2: 1, 3: 2}).merge(0)
    in_smem.axis(0).parallelize(P.BIDx)
    out.axis(1).parallelize(P.Bulk)
    out.axis(2).parallelize(P.Bulk)

    out_smem.set_allocation_domain(out_smem.get_loop_domain(), True)
    out_smem.split(1, 4)
    for tv in (out_reg, in_smem):  # backward(output_smem_cache, -1, {input})
        tv.split(1, 4)
    out_smem.merge(1, 3)
    out_smem.axis(1).parallelize(P.TIDx)
    out_reg.merge(1, 3)  # backward(output_smem_cache, -1, {input_smem_cache}), parallel types too
    out_reg.axis(1).parallelize(P.TIDx)
    out_smem.axis(2).parallelize(P.Unroll)
    out_reg.axis(2).parallelize(P.Vectorize)
    out_reg.set_allocation_domain(out_reg.get_loop_domain(), True)

    in_smem.reorder({-1: 1})
    in_smem.split(1, 8)
    in_smem.swizzle(tp.SwizzleType.XOR, 2, 3)
    in_smem.set_allocation_domain(in_smem.get_loop_domain(), True)
    for axis in (1, 2, 3, 4):
        in_smem.axis(axis).parallelize(P.Bulk)
    return fusion


def _run_transpose(kernel, torch):
    for shape in ((10000, 10000),):
        t = torch.randn(shape, device="cuda")
        (out,) = kernel.run(t)
        assert torch.equal(out, t.t()), shape


CASES = [
    Case("Tutorial.Memcpy/one_thread", lambda: memcpy(False), VALID, run=_run_copy([(32, 32), (3, 5), (1, 70)])),
    Case("Tutorial.Memcpy/bidx_tidx256", lambda: memcpy(True), VALID,
         run=_run_copy([(32, 32), (3, 5), (300, 1001)])),
    Case("Tutorial.Reduction/tidx", lambda: reduction({1: P.TIDx}), VALID, run=_run_row_sum((10, 1024))),
    Case("Tutorial.Reduction/bidx", lambda: reduction({1: P.BIDx}), VALID, run=_run_row_sum((10, 1024))),
    Case("Tutorial.Reduction/tidy_tidx_1024x10", lambda: reduction({0: P.TIDy, 1: P.TIDx}), THROWS,
         codes=("LAUNCH-THREADS",)),
    Case("Tutorial.Reduction/tidy_tidx_10x32", lambda: reduction({0: P.TIDy, 1: P.TIDx}, (10, 32)), VALID,
         run=_run_row_sum((10, 32))),
    Case("Tutorial.Reduction/bidx_tidx", lambda: reduction({0: P.BIDx, 1: P.TIDx}), VALID,
         run=_run_row_sum((10, 1024))),
    Case("Tutorial.ReductionRFactor/tidx", reduction_rfactor_block, VALID, run=_run_sum([10000, 1, 1 << 20])),
    Case("Tutorial.ReductionRFactor/bidx_tidx", reduction_rfactor_grid, VALID,
         run=_run_sum([10000, 1, 1 << 20, 102400 * 3 + 17])),
    Case("Tutorial.BasicTMA/1d_load", basic_tma_1d_load_one_tile_per_block, VALID, run=_run_tma_copy),
    Case("Tutorial.BasicTMA/1d_load_serial_tiles", basic_tma_1d_load_four_tiles_serial, VALID, run=_run_tma_copy),
    Case("Tutorial.BasicTMA/1d_load_tidx_tiles", basic_tma_1d_load_four_tiles_tidx, VALID, run=_run_tma_copy),
    Case("Tutorial.BasicTMA/1d_store", basic_tma_1d_store, VALID, run=_run_tma_copy),
    Case("Tutorial.BasicTMA/2d_load", basic_tma_2d_load, VALID, run=_run_tma_copy),
    Case("Tutorial.BasicTMA/2d_store", basic_tma_2d_store, VALID, run=_run_tma_copy),
    Case("Tutorial.VectorizeStorePointwiseTMA/symbolic", vectorize_store_pointwise_tma, VALID),
    Case("Tutorial.VectorizeStorePointwiseTMA/16384x16384", lambda: vectorize_store_pointwise_tma([16384, 16384]),
         VALID, run=_run_add([(16384, 16384)])),
    Case("Tutorial.PointwiseBroadcastTMA/symbolic", pointwise_broadcast_tma, VALID, run=_run_broadcast_add_symbolic),
    Case("Tutorial.PointwiseBroadcastTMA/32x2x4x256", lambda: pointwise_broadcast_tma([32, 2, 4, 256]), VALID,
         run=_run_broadcast_add),
    Case("Tutorial.TMABankConflictFreeTranspose", tma_bank_conflict_free_transpose, VALID, run=_run_transpose),
]


@pytest.mark.parametrize("case", params(CASES))
def test_verdict(case):
    check(case)
