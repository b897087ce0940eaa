"""nvFuser tests/cpp/test_tmem.cpp and tests/cpp/tutorial_tmem.cpp (doc/dev/tmem.md), translated
(tests/support/nvfuser.py says how). Blackwell tensor memory: target sm_100a, except the tutorial's
shared-memory review (ReviewInliningParallelization.GSGCopy), which runs anywhere (sm_90a).

Every tensor-memory case is a copy chain gmem tv0 -> registers tv1 -(StTMem)-> tmem tv2 -(LdTMem)->
registers tv3 -> gmem tv4 (the add kernels: two chains and an add; Transpose: tv3 a transpose).
Only the sm_90a cases have a GPU `run` (tileproof has no Blackwell GPU to run sm_100a kernels on).
nvFuser's setOpType(StTMem / LdTMem) is tp.set(..., op=TMemStore / TMemLoad). The C++ checks of the
generated code (tcgen05.alloc column counts, the tcgen05.ld/st .x widths) are not verdicts and are
not translated; where a parameterised TEST loops over values, a few are cases of their own.
"""

import pytest

import tileproof as tp
from support.nvfuser import THROWS, VALID, Case, check, params

P = tp.ParallelType
LS = tp.LoadStoreOpType
SM100 = "sm_100a"


def _chain(name, make_input, dtype=tp.float32):
    """tv0 (gmem) -> tv1 (reg) -> tv2 (tmem, StTMem) -> tv3 (reg, LdTMem) -> tv4 (gmem)."""
    with tp.Fusion(name) as fusion:
        tv0 = make_input(dtype)
        fusion.add_input(tv0)
        tv1 = tp.set(tv0)
        tv2 = tp.set(tv1, op=LS.TMemStore)
        tv3 = tp.set(tv2, op=LS.TMemLoad)
        tv4 = tp.set(tv3)
        fusion.add_output(tv4)
    tv2.set_memory_type(tp.MemoryType.Tensor)
    return fusion, (tv0, tv1, tv2, tv3, tv4)


def _concrete(shape):
    return lambda dtype: tp.make_contig_concrete_tensor(shape, dtype=dtype)


def _run_identity(shapes, dtype="float32"):
    def run(kernel, torch):
        for shape in shapes:
            t0 = torch.randn(shape, device="cuda").to(getattr(torch, dtype))
            (out,) = kernel.run(t0)
            assert torch.equal(out, t0), shape
    return run


# -- test_tmem.cpp ---------------------------------------------------------------------------------


def gmem_reg_tmem_reg_gmem_copy(size=None):
    """TMemTest.GmemRegTMemRegGmemCopy: symbolic 1-D (makeSymbolicTensor; or of `size`: the C++ runs
    12800), tv4 [BIDx, TIDx{32}] propagated and parallelized onto tv1..tv3, tv2 allocated as its
    loop domain, lanes | (none)."""
    fusion, (tv0, tv1, tv2, tv3, tv4) = _chain(
        "gmem_reg_tmem_reg_gmem_copy",
        (lambda d: tp.make_tensor([-1], dtype=d)) if size is None else _concrete([size]))
    tv4.split(0, 32)
    tp.propagate_transforms(tv4)
    tv4.axis(0).parallelize(P.BIDx)
    tv4.axis(1).parallelize(P.TIDx)
    tp.parallelize_all_like(tv4, tensors=[tv1, tv2, tv3])
    tv2.set_allocation_domain(tv2.get_loop_domain(), True)
    tv2.set_tmem_dim_sep_pos(-1)
    tp.inline_most(fusion)
    return fusion


def tmem_add_kernel(same_region, size=None):
    """testTMemAddKernel: tv9 = set(chain(tv0) + chain(tv4)), each chain through tensor memory;
    symbolic 1-D inputs, or of `size` (the C++ runs 12800). same_region: both tmem tensors in one
    allocation region (fusion.manage("tmem_regions", ...))."""
    def make_input():
        return tp.make_tensor([-1]) if size is None else tp.make_contig_concrete_tensor([size])

    with tp.Fusion("tmem_add_kernel") as fusion:
        tv0 = make_input()
        fusion.add_input(tv0)
        tv1 = tp.set(tv0)
        tv2 = tp.set(tv1, op=LS.TMemStore)
        tv3 = tp.set(tv2, op=LS.TMemLoad)
        tv4 = make_input()
        fusion.add_input(tv4)
        tv5 = tp.set(tv4)
        tv6 = tp.set(tv5, op=LS.TMemStore)
        tv7 = tp.set(tv6, op=LS.TMemLoad)
        tv8 = tp.add(tv3, tv7)
        tv9 = tp.set(tv8)
        fusion.add_output(tv9)
    if same_region:
        fusion.manage("tmem_regions", [[tv2, tv6]])
    tv2.set_memory_type(tp.MemoryType.Tensor)
    tv6.set_memory_type(tp.MemoryType.Tensor)
    tv9.split(0, 32)
    tp.propagate_transforms(tv9)
    tv9.axis(0).parallelize(P.BIDx)
    tv9.axis(1).parallelize(P.TIDx)
    tp.parallelize_all_like(tv9)
    for tv in (tv2, tv6):
        tv.set_allocation_domain(tv.get_loop_domain(), True)
        tv.set_tmem_dim_sep_pos(-1)
    tp.inline_most(fusion)
    return fusion


def tmem_dtypes(dtype, vec):
    """TMemTest.dtypes: [128, 512] of `dtype`, every tensor [TIDx{128}, 512/vec, vec], the tmem
    store and load Vectorize{vec}, tv2 allocated as its loop domain, lanes | columns at 1."""
    fusion, (tv0, tv1, tv2, tv3, tv4) = _chain(f"tmem_dtypes_{dtype.name}_{vec}", _concrete([128, 512]), dtype)
    for tv in (tv1, tv2, tv3, tv4):
        tv.axis(0).parallelize(P.TIDx)
        tv.split(1, vec)
    tv2.axis(-1).parallelize(P.Vectorize)
    tv3.axis(-1).parallelize(P.Vectorize)
    tv2.set_allocation_domain(tv2.get_loop_domain(), True)
    tv2.set_tmem_dim_sep_pos(1)
    tp.inline_most(fusion)
    return fusion


def _two_warps_of_33(name, first_memory_type, split_outer):
    """[2, 33] through tv1 (`first_memory_type`, [TIDy, TIDx]) and the chain tv2..tv5 tiled
    [TIDy{2}, 2, TIDx{32}] (split_outer: [2, TIDy{1}, 2, TIDx{32}]), tv3 in tensor memory."""
    with tp.Fusion(name) as fusion:
        tv0 = tp.make_contig_concrete_tensor([2, 33])
        fusion.add_input(tv0)
        tv1 = tp.set(tv0)
        tv2 = tp.set(tv1)
        tv3 = tp.set(tv2, op=LS.TMemStore)
        tv4 = tp.set(tv3, op=LS.TMemLoad)
        tv5 = tp.set(tv4)
        fusion.add_output(tv5)
    tv1.set_memory_type(first_memory_type)
    tv3.set_memory_type(tp.MemoryType.Tensor)
    tv1.axis(0).parallelize(P.TIDy)
    tv1.axis(1).parallelize(P.TIDx)
    for tv in (tv2, tv3, tv4, tv5):
        tv.split(1, 32)
        if split_outer:
            tv.split(0, 1)
            tv.axis(1).parallelize(P.TIDy)
        else:
            tv.axis(0).parallelize(P.TIDy)
        tv.axis(-1).parallelize(P.TIDx)
    tv3.set_allocation_domain(tv3.get_loop_domain(), True)
    tv3.set_tmem_dim_sep_pos(-1)
    tp.inline_most(fusion)
    return fusion


def wrong_stride():
    """TMemTestCompileOnly.WrongStride: tv1 a plain copy of tv0 in global memory, a view of it
    (nvFuser's tensor producer aliases: no statement), whose [TIDy{2}, TIDx{33}] sizes the block
    33 x 2 (nvFuser's ParallelDimensionMap is built before the alias drops the op); the tmem
    accesses on [TIDy{2}, 2, TIDx{32}]: the threads of TIDy = 1 are threads 33..64, no warp (nvFuser:
    "Outer parallel types' strides must be a multiple of 32", TIDy's stride being 33 threads)."""
    return _two_warps_of_33("wrong_stride", tp.MemoryType.Global, split_outer=False)


def inexact_parallel_type():
    """TMemTest.InexactParallelType: [2, TIDy{1}, 2, TIDx{32}] with tv1 in shared memory (TIDy{2}
    there): the tmem tensors' TIDy{1} is not TIDy's extent, and every warp stays in its subpartition."""
    return _two_warps_of_33("inexact_parallel_type", tp.MemoryType.Shared, split_outer=True)


def tmem_allocation_size(num_cols):
    """TMemAllocationSize.CopyKernel: [32 * num_cols] split by num_cols -> [TIDx{32}, num_cols],
    propagated, TIDx on every tensor, tv2 lanes | columns at 1; no inlining."""
    fusion, (tv0, tv1, tv2, tv3, tv4) = _chain(f"tmem_allocation_size_{num_cols}", _concrete([32 * num_cols]))
    tv4.split(0, num_cols)
    tp.propagate_transforms(tv4)
    tv4.axis(0).parallelize(P.TIDx)
    tp.parallelize_all_like(tv4, tensors=[tv1, tv2, tv3])
    tv2.set_allocation_domain(tv2.get_loop_domain(), True)
    tv2.set_tmem_dim_sep_pos(1)
    return fusion


# -- tutorial_tmem.cpp -----------------------------------------------------------------------------


def gsg_copy(inline, tidx, bidx):
    """ReviewInliningParallelization.GSGCopy: [2, 4] gmem -> smem tv1 -> gmem tv2, tv1 inlined at
    1 or not, axis 0 on TIDx and / or axis 1 on BIDx in both tensors."""
    with tp.Fusion("gsg_copy") as fusion:
        tv0 = tp.make_contig_concrete_tensor([2, 4])
        fusion.add_input(tv0)
        tv1 = tp.set(tv0)
        tv2 = tp.set(tv1)
        fusion.add_output(tv2)
    tv1.set_memory_type(tp.MemoryType.Shared)
    if inline:
        tv1.inline_at(1)
    for tv in (tv1, tv2):
        if tidx:
            tv.axis(0).parallelize(P.TIDx)
        if bidx:
            tv.axis(1).parallelize(P.BIDx)
    return fusion


def _tutorial_chain(name, shape, parallel_types, sep, inline_at=None):
    """The tutorial's chain on [shape]: tv4's axes parallelized, parallelizeAllLike(tv4),
    inlineAllAt(tv4, inline_at) where given, tv2's TMem DimSep position `sep`."""
    fusion, (tv0, tv1, tv2, tv3, tv4) = _chain(name, _concrete(shape))
    for axis, parallel_type in parallel_types.items():
        tv4.axis(axis).parallelize(parallel_type)
    tp.parallelize_all_like(tv4)
    if inline_at is not None:
        tp.inline_all_at(tv4, inline_at)
    tv2.set_tmem_dim_sep_pos(sep)
    return fusion


def fancy_transformations(tv):
    """The tutorial's fancyTransformations: XOR swizzles of the logical domain, then [64 * 64, 64 * 64]."""
    tv.swizzle(tp.SwizzleType.XOR, 0, 1)
    tv.split(1, 64)
    tv.split(0, 64)
    tv.reorder({0: 3, 1: 0, 2: 2, 3: 1})
    tv.swizzle(tp.SwizzleType.XOR, 0, 1)
    tv.swizzle(tp.SwizzleType.XOR, 2, 3)
    tv.swizzle(tp.SwizzleType.XOR, 1, 2)
    tv.reorder({0: 3, 1: 0, 2: 2, 3: 1})
    tv.merge(2)
    tv.merge(0)


def complicated1():
    """TMemTutorialR.Complicated1: [4096, 4096] swizzled, split into
    [TIDz, 16, TIDy, BIDx, TIDx, 8, 1, BIDy, BIDz, 4, 8, 64] (C++ axis numbers), propagated and
    parallelized alike, tv2 allocated as its loop domain with DimSep 6; then axes 6, 7 moved to
    2, 3, propagated again, inlineAllAt(tv4, 4)."""
    fusion, (tv0, tv1, tv2, tv3, tv4) = _chain("complicated1", _concrete([4096, 4096]))
    fancy_transformations(tv4)
    tv4.split(1, 64).split(1, 8).split(1, 4)
    tv4.split(0, 1).split(0, 8).split(0, 2).split(0, 8).split(0, 16)
    tv4.axis(0).parallelize(P.TIDz)
    tv4.axis(2).parallelize(P.TIDy)
    tv4.axis(3).parallelize(P.BIDx)
    tv4.axis(4).parallelize(P.TIDx)
    tv4.axis(7).parallelize(P.BIDy)
    tv4.axis(8).parallelize(P.BIDz)
    tp.propagate_transforms(tv4)
    tp.parallelize_all_like(tv4)
    tv2.set_allocation_domain(tv2.get_loop_domain(), True)
    tv2.set_tmem_dim_sep_pos(6)
    tv4.reorder({6: 2, 7: 3})
    tp.propagate_transforms(tv4)
    tp.inline_all_at(tv4, 4)
    return fusion


def complicated2():
    """TMemTutorialR.Complicated2: [4096, 4096] swizzled, split into
    [32, TIDx{128}, 2, BIDy, TIDy, 16, BIDz, TIDz, 2, 2], propagated and parallelized alike, tv2
    allocated as its loop domain with DimSep 2; then axis 1 moved to 4, propagated, inlineAllAt(tv4, 4)."""
    fusion, (tv0, tv1, tv2, tv3, tv4) = _chain("complicated2", _concrete([4096, 4096]))
    fancy_transformations(tv4)
    tv4.split(1, 2).split(1, 2).split(1, 16).split(1, 2).split(1, 8)
    tv4.split(0, 128)
    tv4.axis(1).parallelize(P.TIDx)
    tv4.axis(3).parallelize(P.BIDy)
    tv4.axis(4).parallelize(P.TIDy)
    tv4.axis(6).parallelize(P.BIDz)
    tv4.axis(7).parallelize(P.TIDz)
    tp.propagate_transforms(tv4)
    tp.parallelize_all_like(tv4)
    tv2.set_allocation_domain(tv2.get_loop_domain(), True)
    tv2.set_tmem_dim_sep_pos(2)
    tv4.reorder({1: 4})
    tp.propagate_transforms(tv4)
    tp.inline_all_at(tv4, 4)
    return fusion


def tmem_transpose():
    """TMemTutorialR.Transpose: [128, 2, 2], tv3 = transpose(tv2, 1, 2) is the tmem load; every
    tensor [TIDx, TIDy, TIDz], tv2 lanes | columns at 1: stored in column order 0 2 1 3, loaded 0 1 2 3."""
    with tp.Fusion("tmem_transpose") as fusion:
        tv0 = tp.make_contig_concrete_tensor([128, 2, 2])
        fusion.add_input(tv0)
        tv1 = tp.set(tv0)
        tv2 = tp.set(tv1, op=LS.TMemStore)
        tv3 = tp.transpose(tv2, 1, 2)
        tv4 = tp.set(tv3)
        fusion.add_output(tv4)
    tv2.set_memory_type(tp.MemoryType.Tensor)
    tv3.definition.op_type = LS.TMemLoad  # nvFuser's setOpType(LdTMem) on the transpose's LoadStoreOp
    for tv in (tv1, tv2, tv3, tv4):
        tv.axis(0).parallelize(P.TIDx)
        tv.axis(1).parallelize(P.TIDy)
        tv.axis(2).parallelize(P.TIDz)
    tv2.set_tmem_dim_sep_pos(1)
    return fusion


def tmem_vectorization(st_vec, ld_vec):
    """TMemTutorialR.Vectorization: [128, 256], TIDx on axis 0; tv1, tv2 split by st_vec (the store
    Vectorize{st_vec}), tv3, tv4 by ld_vec (the load Vectorize{ld_vec}); inlineMost."""
    fusion, (tv0, tv1, tv2, tv3, tv4) = _chain(f"tmem_vectorization_{st_vec}_{ld_vec}", _concrete([128, 256]))
    for tv in (tv1, tv2, tv3, tv4):
        tv.axis(0).parallelize(P.TIDx)
    for tv in (tv2, tv1):
        tv.split(1, st_vec)
    tv2.axis(-1).parallelize(P.Vectorize)
    for tv in (tv3, tv4):
        tv.split(1, ld_vec)
    tv3.axis(-1).parallelize(P.Vectorize)
    tv2.set_allocation_domain(tv2.get_loop_domain(), True)
    tv2.set_tmem_dim_sep_pos(1)
    tp.inline_most(fusion)
    return fusion


def vectorize_multiple_of_4_bytes(dtype, vec):
    """TMemTutorialR.VectorizeMultipleOf4Bytes: [128, 256] of `dtype`, [TIDx, 256/vec, Vectorize{vec}]
    (vec 1: no split, no Vectorize) on the tmem store and load."""
    fusion, (tv0, tv1, tv2, tv3, tv4) = _chain(f"vectorize_multiple_of_4_bytes_{dtype.name}_{vec}",
                                               _concrete([128, 256]), dtype)
    for tv in (tv1, tv2, tv3, tv4):
        tv.axis(0).parallelize(P.TIDx)
    if vec != 1:
        for tv in (tv1, tv2, tv3, tv4):
            tv.split(1, vec)
        tv2.axis(-1).parallelize(P.Vectorize)
        tv3.axis(-1).parallelize(P.Vectorize)
    tv2.set_allocation_domain(tv2.get_loop_domain(), True)
    tv2.set_tmem_dim_sep_pos(1)
    tp.inline_most(fusion)
    return fusion


def performant_vectorized_copy():
    """TMemTutorialR.PerformantVectorizedCopy: symbolic 1-D, tv4 [BIDx, 2, TIDy{2}, TIDx{128}, Vectorize{4}];
    the tmem store and load [BIDx, TIDx, | TIDy, Vectorize{2 * 4}]. nvFuser's launch checks that the
    vectorized extents divide (the C++ runs 256 Mi elements): assumed, T0_0 % (4 * 128 * 2 * 2) == 0."""
    fusion, (tv0, tv1, tv2, tv3, tv4) = _chain("performant_vectorized_copy", lambda d: tp.make_contig_tensor(1, d))
    fusion.assume("T0_0 % 2048 == 0")
    tv4.split(0, 4)
    tv4.axis(1).parallelize(P.Vectorize)
    tv4.split(0, 128)
    tv4.axis(1).parallelize(P.TIDx)
    tv4.split(0, 2)
    tv4.axis(1).parallelize(P.TIDy)
    tv4.split(0, 2)
    tv4.axis(1).parallelize(P.Serial)
    tv4.axis(0).parallelize(P.BIDx)
    tp.propagate_transforms(tv4)
    tp.parallelize_all_like(tv4, [P.TIDx, P.TIDy, P.BIDx])
    tv1.axis(-1).parallelize(P.Vectorize)
    for tv in (tv2, tv3):
        tv.reorder({1: 3, 3: 1})
        tv.merge(-2)
        tv.axis(-1).parallelize(P.Vectorize)
    tv2.set_allocation_domain(tv2.get_loop_domain(), True)
    tv2.set_tmem_dim_sep_pos(2)
    tp.inline_most(fusion)
    return fusion


def _tmem(test, build, verdict, **kw):
    return Case(test, build, verdict, target=SM100, **kw)


def _tutorial_c(test, shape, parallel_types, sep, codes, inline_at=None):
    """A TMemTutorialC case: nvFuser's compile throws."""
    return _tmem(f"TMemTutorialC.{test}", lambda: _tutorial_chain(test, shape, parallel_types, sep, inline_at),
                 THROWS, codes=codes)


def _tutorial_r(test, shape, parallel_types, sep):
    return _tmem(f"TMemTutorialR.{test}", lambda: _tutorial_chain(test, shape, parallel_types, sep), VALID)


CASES = [
    _tmem("TMemTest.GmemRegTMemRegGmemCopy/symbolic", gmem_reg_tmem_reg_gmem_copy, VALID),
    _tmem("TMemTest.GmemRegTMemRegGmemCopy/12800", lambda: gmem_reg_tmem_reg_gmem_copy(12800), VALID),
    _tmem("TMemTest.AddKernelMultipleRegions/symbolic", lambda: tmem_add_kernel(False), VALID),
    _tmem("TMemTest.AddKernelMultipleRegions/12800", lambda: tmem_add_kernel(False, 12800), VALID),
    _tmem("TMemTest.AddKernelSameRegion/12800", lambda: tmem_add_kernel(True, 12800), VALID),
    _tmem("TMemTest.dtypes/Char_vec2", lambda: tmem_dtypes(tp.int8, 2), THROWS, codes=("TMEM-PACKING",)),
    _tmem("TMemTest.dtypes/Char_vec4", lambda: tmem_dtypes(tp.int8, 4), VALID),
    _tmem("TMemTest.dtypes/Half_vec1", lambda: tmem_dtypes(tp.float16, 1), THROWS, codes=("TMEM-PACKING",)),
    _tmem("TMemTest.dtypes/Half_vec256", lambda: tmem_dtypes(tp.float16, 256), VALID),
    _tmem("TMemTest.dtypes/Float_vec1", lambda: tmem_dtypes(tp.float32, 1), VALID),
    _tmem("TMemTest.dtypes/Float_vec128", lambda: tmem_dtypes(tp.float32, 128), VALID),
    _tmem("TMemTest.dtypes/Double_vec2", lambda: tmem_dtypes(tp.float64, 2), VALID),
    _tmem("TMemTestCompileOnly.WrongStride", wrong_stride, THROWS, codes=("TMEM-WARP-COLLECTIVE",)),
    _tmem("TMemTest.InexactParallelType", inexact_parallel_type, VALID),
    *[_tmem(f"TMemAllocationSize.CopyKernel/{n}cols", lambda n=n: tmem_allocation_size(n), VALID)
      for n in (32, 33, 129, 256, 257)],
    # tutorial_tmem.cpp
    *[Case(f"ReviewInliningParallelization.GSGCopy/{name}", lambda a=args: gsg_copy(*a), VALID,
           run=_run_identity([(2, 4)]))
      for name, args in [("naive", (False, False, False)), ("bidx", (False, False, True)),
                         ("inline1", (True, False, False)), ("inline1_bidx", (True, False, True)),
                         ("inline1_tidx", (True, True, False)), ("inline1_tidx_bidx", (True, True, True))]],
    _tutorial_c("TooManyLanes", [2, 3, 5, 7, 11, 13, 17], {0: P.BIDx, 1: P.TIDx, 3: P.BIDy, 4: P.TIDy}, -2,
                ("TMEM-LANES",), inline_at=3),
    _tutorial_c("TooManyCols", [32, 3, 5, 7, 11, 13, 17], {0: P.TIDx, 1: P.BIDx, 2: P.TIDy, 4: P.BIDy, 5: P.TIDz},
                1, ("TMEM-COLUMNS",), inline_at=4),
    _tutorial_c("NotWarpCollective", [16, 2], {0: P.TIDx}, 1, ("TMEM-WARP-COLLECTIVE",)),
    _tutorial_c("NotContiguous", [64, 2, 2], {0: P.TIDx, 1: P.TIDy}, 2, ("TMEM-ACCESS-PATTERN",)),
    _tutorial_c("OneLane", [32, 32], {0: P.TIDy, 1: P.TIDx}, 1, ("TMEM-ACCESS-PATTERN",)),
    _tutorial_c("WrongSubpartition", [2, 2, 32, 2], {0: P.TIDy, 2: P.TIDx}, 3, ("TMEM-SUBPARTITION",)),
    _tutorial_c("WrongSubpartition2", [32, 2], {0: P.TIDx, 1: P.TIDy}, 1, ("TMEM-SUBPARTITION",)),
    _tutorial_r("WarpXYZ", [2, 4, 4, 2], {0: P.TIDz, 1: P.TIDy, 2: P.TIDx}, 3),
    _tutorial_r("WarpGroupXYZ", [2, 8, 8, 2], {0: P.TIDz, 1: P.TIDy, 2: P.TIDx}, 3),
    _tutorial_r("WarpGroupXYColZ", [8, 16, 8], {0: P.TIDy, 1: P.TIDx, 2: P.TIDz}, 2),
    _tutorial_r("WarpGroupXColYZ", [128, 2, 2], {0: P.TIDx, 1: P.TIDy, 2: P.TIDz}, 1),
    _tutorial_r("X1WarpGroupYColZ", [1, 128, 2], {0: P.TIDx, 1: P.TIDy, 2: P.TIDz}, 2),
    _tmem("TMemTutorialR.Complicated1", complicated1, VALID),
    _tmem("TMemTutorialR.Complicated2", complicated2, VALID),
    _tmem("TMemTutorialR.Transpose", tmem_transpose, VALID),
    *[_tmem(f"TMemTutorialR.Vectorization/st{st}_ld{ld}", lambda st=st, ld=ld: tmem_vectorization(st, ld), VALID)
      for st, ld in [(1, 1), (128, 128), (1, 128), (4, 16), (32, 2)]],
    _tmem("TMemTutorialR.VectorizeMultipleOf4Bytes/Char_2", lambda: vectorize_multiple_of_4_bytes(tp.int8, 2),
          THROWS, codes=("TMEM-PACKING",)),
    _tmem("TMemTutorialR.VectorizeMultipleOf4Bytes/Half_1", lambda: vectorize_multiple_of_4_bytes(tp.float16, 1),
          THROWS, codes=("TMEM-PACKING",)),
    _tmem("TMemTutorialR.VectorizeMultipleOf4Bytes/Char_4", lambda: vectorize_multiple_of_4_bytes(tp.int8, 4),
          VALID),
    _tmem("TMemTutorialR.VectorizeMultipleOf4Bytes/Half_2", lambda: vectorize_multiple_of_4_bytes(tp.float16, 2),
          VALID),
    _tmem("TMemTutorialR.PerformantVectorizedCopy", performant_vectorized_copy, VALID),
]


@pytest.mark.parametrize("case", params(CASES))
def test_verdict(case):
    check(case)


def test_set_tmem_dim_sep_pos_non_tmem():
    """TMemTestCompileOnly.SetTMemDimSepPosNonTMem: nvFuser throws at setTMemDimSepPos on a global
    tensor, before any compile; so does tileproof (a Case's build cannot throw, hence a test)."""
    with tp.Fusion("set_tmem_dim_sep_pos_non_tmem") as fusion:
        tv0 = tp.make_contig_concrete_tensor([2, 33])
        fusion.add_input(tv0)
        tv1 = tp.set(tv0)
        fusion.add_output(tv1)
    with pytest.raises(tp.ScheduleError, match="only for tensor memory"):
        tv1.set_tmem_dim_sep_pos(-1)
