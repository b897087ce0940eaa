"""nvFuser tests/cpp/test_memory.cpp, translated (tests/support/nvfuser.py says how): cache
operators of global loads, TMA loads and stores (tiles, swizzles, boxes by compositing and
rotation, invalid schedules), the TMA documentation's figures, and 1-D bulk copies.

nvFuser's scheduler helpers that are only sequences of transforms (TensorView::flatten,
swizzleTMABox, MmaSwizzler::parallelizeAsBulkSkippingFirstIDs, the test's scheduleTile) are
written here with tileproof's split / merge / swizzle. Runtime-invalid TESTs compile and validate
one input and refuse another at launch: each input is its own case, the valid one with the
assumption nvFuser's launch check enforces (`fusion.assume`), the invalid one at its concrete size.
"""

import pytest
import tileproof as tp
from support.nvfuser import THROWS, VALID, Case, check, params

P = tp.ParallelType
TMA = tp.LoadStoreOpType.TMA
XOR = tp.SwizzleType.XOR
SWIZZLE = tp.MmaInputSmemSwizzle
NO_SWIZZLE = SWIZZLE["None"]
SHARED = tp.MemoryType.Shared


# -- nvFuser's scheduling helpers, as the transforms they are -----------------------------------

def flatten(tv, start=0, end=-1):
    """TensorView::flatten(from, to): merge loop axes start..end (inclusive) into one."""
    first, last = start % tv.ndim, end % tv.ndim
    for _ in range(last - first):
        tv.merge(first)
    return tv


def swizzle_tma_box(tv, swizzle):
    """TensorView::swizzleTMABox: [.., rows, cols] -> [.., rows/8, 8/(128/S), 128/S, cols/(16B), 16B]
    with the XOR of the row within its group and the 16-byte chunk."""
    tv.split(-2, 8)
    tv.split(-2, 128 // swizzle.swizzle_bytes)
    tv.split(-1, 16 // tv.dtype.bytes)
    tv.swizzle(XOR, -4, -2)


def parallelize_as_bulk_skipping_first_ids(tv, skip):
    """MmaSwizzler::parallelizeAsBulkSkippingFirstIDs."""
    for axis in tv.get_loop_domain()[skip:]:
        axis.parallelize(P.Bulk)


def schedule_tile(tvs, tile, swizzle):
    """The C++ test's scheduleTile: [tiles (BIDx), the flattened tile], the tile's last dim
    swizzled as a TMA box where a swizzle is asked for."""
    dim = len(tile)
    for tv in tvs:
        for i in reversed(range(dim)):
            tv.split(i, tile[i])
        tv.reorder({**{2 * i: i for i in range(dim)}, **{2 * i + 1: i + dim for i in range(dim)}})
        flatten(tv, 0, dim - 1)
        flatten(tv, 1)
        tv.axis(0).parallelize(P.BIDx)
        if swizzle is not NO_SWIZZLE:
            tv.split(-1, tile[-1])
            swizzle_tma_box(tv, swizzle)


def parallelize_all_dims_except_first_as_tidx(tv):
    flatten(tv, 1)
    tv.axis(1).parallelize(P.TIDx)


def copy_fusion(name, make_input, load=True):
    """gmem t0 = make_input() -> smem t1 -> gmem t2, t1's load (or t2's store) a TMA."""
    with tp.Fusion(name) as fusion:
        t0 = make_input()
        fusion.add_input(t0)
        t1 = tp.set(t0, op=TMA if load else tp.LoadStoreOpType.Set)
        t2 = tp.set(t1, op=tp.LoadStoreOpType.Set if load else TMA)
        fusion.add_output(t2)
    t1.set_memory_type(SHARED)
    return fusion, t1, t2


def launch_checks(fusion, tv):
    """What nvFuser's launch checks of a symbolic contiguous TMA tensor refuse, as assumptions: a
    global stride not a multiple of 16 bytes (cuTensorMapEncodeTiled) and a grid over the
    hardware's limit (the tensor's elements bound it)."""
    extents = [str(d.extent) for d in tv.get_logical_domain()]
    if len(extents) > 1:
        fusion.assume(f"{extents[-1]} % {16 // tv.dtype.bytes} == 0")
    fusion.assume(" * ".join(extents) + " <= 2147483647")


def runs_copy(*shapes, dtype="float32"):
    """run(kernel, torch): the copy kernel returns its input, at each shape."""
    def run(kernel, torch):
        for shape in shapes:
            t0 = torch.randn(shape, device="cuda").to(getattr(torch, dtype))
            (out,) = kernel.run(t0)
            assert torch.equal(out, t0), shape
    return run


# -- MemoryTest -----------------------------------------------------------------------------------

def load_cache(cache_op_name):
    """MemoryTest.LoadCache: a plain global load with a cache operator, vectorized by 4."""
    with tp.Fusion("load_cache") as fusion:
        t0 = tp.make_contig_tensor(1)
        fusion.add_input(t0)
        t1 = tp.set(t0, cache_op=getattr(tp.CacheOp, cache_op_name))
        t2 = tp.add(t1, 1.0)
        t3 = tp.set(t2)
        fusion.add_output(t3)
    fusion.assume("T0_0 % 4 == 0")  # nvFuser checks at launch that the vector divides the extent (1024)
    t1.split(0, 4).split(0, 32)
    tp.propagate_transforms(t1)
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.TIDx)
    t1.axis(2).parallelize(P.Vectorize)
    tp.parallelize_all_like(t1, tensors=[t3])
    tp.inline_most(fusion)
    return fusion


def refine_cache_policy(shape=None, split_vector: bool = False):
    """MemoryTest.RefineCachePolicy: refineCachePolicy makes the streaming load of a ld.global.cs
    and the broadcast one ld.global.ca; written here as the cache ops the pass sets. b2 is
    promoted to c's loops, its vector replayed on merge(I0, I1) (execution/promotion.py).
    `shape`: concrete [I0, I1] (no assumptions), symbolic by default. `split_vector`: b2's vector of 4
    split again into [2, Vectorize{2}] (its loops past the shared ones, tests/execution/test_promotion_replay.py)."""
    with tp.Fusion("refine_cache_policy") as fusion:
        a = tp.make_contig_tensor(2) if shape is None else tp.make_contig_concrete_tensor(list(shape))
        b = tp.make_contig_tensor(1) if shape is None else tp.make_contig_concrete_tensor([shape[1]])
        fusion.add_input(a)
        fusion.add_input(b)
        a2 = tp.set(a, cache_op=tp.CacheOp.Streaming)
        b2 = tp.set(b, cache_op=tp.CacheOp.AllLevels)
        c = tp.add(a2, tp.broadcast(b2, [True, False]))
        c2 = tp.set(c)
        fusion.add_output(c2)
    if shape is None:
        fusion.assume("T0_1 % 4 == 0")  # nvFuser checks at launch that the vectors divide the extents (1024)
        fusion.assume("T0_0 * T0_1 <= 2147483647")  # and that the grid fits
    a2.merge(0).split(0, 4).split(0, 32)
    tp.propagate_transforms(a2)
    a2.axis(0).parallelize(P.BIDx)
    a2.axis(1).parallelize(P.TIDx)
    a2.axis(2).parallelize(P.Vectorize)
    if split_vector:
        b2.split(2, 2)
        b2.axis(3).parallelize(P.Vectorize)
    else:
        b2.axis(2).parallelize(P.Vectorize)
    c2.axis(2).parallelize(P.Vectorize)
    tp.inline_most(fusion)
    return fusion


def runs_plus_one(*sizes):
    """run(kernel, torch): out = in + 1 for a 1-D input at each size (the C++ runs 1024)."""
    def run(kernel, torch):
        for n in sizes:
            t0 = torch.randn(n, device="cuda")
            (out,) = kernel.run(t0)
            torch.testing.assert_close(out, t0 + 1.0)
    return run


def runs_row_broadcast_add(*shapes):
    """run(kernel, torch): out = a + b[None, :] for a of each shape (the C++ runs 1024 x 1024)."""
    def run(kernel, torch):
        for shape in shapes:
            a, b = torch.randn(shape, device="cuda"), torch.randn(shape[1], device="cuda")
            (out,) = kernel.run(a, b)
            torch.testing.assert_close(out, a + b)
    return run


MEMORY_CASES = [
    Case(f"CacheGlobalLoads/MemoryTest.LoadCache/{name}", lambda name=name: load_cache(name), VALID,
         run=runs_plus_one(1024, 4, 1000, 4100))
    for name in ("AllLevels", "Global", "Streaming")
] + [
    Case("MemoryTest.RefineCachePolicy", refine_cache_policy, VALID,
         run=runs_row_broadcast_add((1024, 1024), (3, 1028), (5, 4))),
]


# -- TMASimpleLdstTest, TMALoadTestWithABroadcastDim ----------------------------------------------

SIMPLE_TILES = {1: ([], [1024 * 1024]), 2: ([3], [1024, 128]), 3: ([1, 5], [1024, 8, 128]),
                4: ([3, 5, 1], [4, 8, 1024, 1024]), 5: ([1, 3, 1, 5], [4, 8, 1024, 32, 128])}
DTYPES = {"Half": tp.float16, "Float": tp.float32, "Double": tp.float64}
SWIZZLES = {"NoSwizzle": NO_SWIZZLE, "32B": SWIZZLE.B32, "64B": SWIZZLE.B64, "128B": SWIZZLE.B128}


def simple_ldst(dim, swizzle, dtype, load):
    """TMASimpleLdstTest.Load / Store: a tensor of `dim` dims (symbolic in 1-D, the run's shape else), one tile per block copied by one
    TMA (the inner tile dim one swizzle span), the other copy by the block's threads."""
    outer, shape = SIMPLE_TILES[dim]
    tile = outer + [swizzle.swizzle_bytes // dtype.bytes]
    if dim == 1:
        fusion, t1, t2 = copy_fusion("simple_ldst", lambda: tp.make_contig_tensor(dim, dtype), load=load)
        launch_checks(fusion, fusion.inputs[0])
    else:  # symbolic, the strides and grid take the solver past its limit (LAUNCH-GRID unknown)
        fusion, t1, t2 = copy_fusion("simple_ldst", lambda: tp.make_contig_concrete_tensor(shape, dtype), load=load)
    schedule_tile([t1, t2], tile, swizzle)
    t1.set_allocation_domain(t1.get_loop_domain(), True)
    parallelize_as_bulk_skipping_first_ids(t1 if load else t2, 1)
    parallelize_all_dims_except_first_as_tidx(t2 if load else t1)
    return fusion


def simple_ldst_case(kind, dim, swizzle_name, dtype_name, **kw):
    name = f"TMASimpleLdstTest.{kind}/{dim}D_{swizzle_name}_{dtype_name}"
    dtype = DTYPES[dtype_name]
    return Case(name, lambda: simple_ldst(dim, SWIZZLES[swizzle_name], dtype, kind == "Load"), VALID,
                run=runs_copy(SIMPLE_TILES[dim][1], dtype=dtype.name), **kw)


def load_with_broadcast(shape, dtype, swizzle):
    """TMALoadTestWithABroadcastDim.LoadWithBroadcast: [B, K, N] with a broadcast dim moved to the
    left, boxed [K8, N by the swizzle span], one block; tv2's NO on TIDx."""
    fusion, t1, t2 = copy_fusion("load_with_broadcast", lambda: tp.make_contig_concrete_tensor(shape, dtype))
    for t in (t1, t2):
        bcast = [i for i, d in enumerate(t.get_loop_domain()) if d.is_broadcast]
        t.reorder({b: i for i, b in enumerate(bcast)})  # moveInnerBroadcastLeft
        t.split(-2, 8)
        t.split(-1, swizzle.swizzle_bytes // dtype.bytes)
        t.reorder({-2: -3})
        if swizzle is not NO_SWIZZLE:
            swizzle_tma_box(t, swizzle)
    parallelize_as_bulk_skipping_first_ids(t1, 3)
    t1.set_allocation_domain(t1.get_loop_domain(), True)
    t2.axis(2).parallelize(P.TIDx)
    return fusion


def broadcast_case(shape, dtype_name, swizzle_name, **kw):
    dtype = DTYPES[dtype_name]
    name = f"TMALoadTestWithABroadcastDim.LoadWithBroadcast/{'x'.join(map(str, shape))}_{dtype_name}_{swizzle_name}"
    return Case(name, lambda: load_with_broadcast(shape, dtype, SWIZZLES[swizzle_name]), VALID,
                run=runs_copy(shape, dtype=dtype.name), **kw)


SIMPLE_CASES = [
    simple_ldst_case("Load", 1, "NoSwizzle", "Float"),
    simple_ldst_case("Load", 2, "128B", "Half"),
    simple_ldst_case("Load", 2, "32B", "Double"),
    simple_ldst_case("Load", 3, "64B", "Float"),
    simple_ldst_case("Load", 4, "NoSwizzle", "Half"),
    simple_ldst_case("Load", 5, "128B", "Float"),
    simple_ldst_case("Store", 1, "128B", "Half"),
    simple_ldst_case("Store", 2, "NoSwizzle", "Float"),
    simple_ldst_case("Store", 3, "32B", "Double"),
    simple_ldst_case("Store", 5, "64B", "Half"),
    broadcast_case([1, 64, 16], "Float", "NoSwizzle"),
    broadcast_case([1, 128, 64], "Half", "128B"),
    broadcast_case([1, 16, 64], "Double", "64B"),
    broadcast_case([64, 1, 16], "Float", "32B"),
]


# -- TMAIndexingTest --------------------------------------------------------------------------------

def tma_load_copy(name, shape, contiguity=True, dtype=tp.float32):
    """copy_fusion with a TMA load of a tensor of `shape` (ints; -1 symbolic)."""
    return copy_fusion(name, lambda: tp.make_tensor(shape, contiguity=contiguity, dtype=dtype))


def load_2d_tensor_with_1d_tma():
    fusion, t1, t2 = tma_load_copy("load_2d_tensor_with_1d_tma", [1024, 1024])
    for t in (t1, t2):
        t.merge(0).split(0, 32)
        t.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.Bulk)
    t2.axis(1).parallelize(P.TIDx)
    return fusion


def load_1d_tensor_with_2d_tma():
    fusion, t1, t2 = tma_load_copy("load_1d_tensor_with_2d_tma", [1024 * 1024])
    for t in (t1, t2):
        t.split(0, 1024).split(1, 32).split(0, 4)
        t.axis(0).parallelize(P.BIDx)
        t.axis(2).parallelize(P.BIDy)
    t1.axis(1).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    t2.axis(3).parallelize(P.TIDx)
    return fusion


def non_one_element_stride():
    fusion, t1, t2 = tma_load_copy("non_one_element_stride", [1024, 1024])
    for t in (t1, t2):
        t.split(1, 32).split(0, 32).split(1, 2)
        t.axis(0).parallelize(P.BIDx)
        t.axis(2).parallelize(P.BIDy)
        t.axis(3).parallelize(P.BIDz)
    t1.axis(1).parallelize(P.Bulk)
    t1.axis(4).parallelize(P.Bulk)
    return fusion


EIGHT_DIMS = [4, 32, 2, 8, 8, 8, 32, 8]


def advanced():
    """TMAIndexingTest.Advanced: an 8-D tensor (two discontiguous dims) viewed as 4-D, tiled
    [4, 2, 32/3, 1, 8] with strides; the tile on Bulk (tv1) and TIDx (tv2)."""
    fusion, t1, t2 = tma_load_copy("advanced", EIGHT_DIMS, [True, True, False, True, True, False, True, True])
    for t in (t1, t2):
        t.merge(0).merge(0).merge(1).merge(1).merge(2)
        t.split(0, 16)
        t.split(3, 32).split(4, 8).split(3, 1).split(2, 32).split(3, 3).split(1, 2).split(0, 4)
        t.reorder({1: 6, 3: 7, 5: 8, 8: 9})
        flatten(t, 0, 5)
        flatten(t, 1)
        t.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.Bulk)
    t2.axis(1).parallelize(P.TIDx)
    return fusion


def define_box_by_compositing_1():
    fusion, t1, t2 = tma_load_copy("define_box_by_compositing_1", EIGHT_DIMS,
                                   [True, True, False, True, False, True, True, True])
    for t in (t1, t2):
        t.merge(6).split(6, 32)
        flatten(t, 0, -2)
        t.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.Bulk)
    return fusion


def define_box_by_compositing_2():
    fusion, t1, t2 = tma_load_copy("define_box_by_compositing_2", [32, 4, 2, 8, 8, 8, 2, 8, 4],
                                   [True, True, False, True, False, True, True, False, True])
    for t in (t1, t2):
        t.merge(3).split(3, 3)
        t.reorder({1: -5, 3: -4})
        flatten(t, 0, 3)
        flatten(t, 1)
        t.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.Bulk)
    return fusion


def define_box_by_compositing_should_not_merge():
    """The whole [2, 256, 2, 32] tensor in one TMA, allocated [128, 8, 8, 4] with an XOR swizzle:
    merging dims would break the hardware's rules, so nvFuser keeps a 4-D TMA."""
    fusion, t1, t2 = tma_load_copy("define_box_by_compositing_should_not_merge", [2, 256, 2, 32])
    loop = t1.get_loop_domain()
    t1.merge(0).merge(0).split(1, 4).split(0, 8)  # [128, 8, 8, 4]
    t1.swizzle(XOR, 1, 2)
    t1.set_allocation_domain(t1.get_loop_domain(), True)
    t1.set_loop_domain(loop)
    for axis in t1.get_loop_domain():
        axis.parallelize(P.Bulk)
    t2.axis(3).parallelize(P.TIDx)
    return fusion


def define_box_by_rotation_1():
    fusion, t1, t2 = tma_load_copy("define_box_by_rotation_1", [599, 599, 4 * 67])
    for t in (t1, t2):
        t.split(-1, 256).split(-1, 128).split(-1, 64).split(-1, 32)
        t.split(1, 3).split(1, 3).split(1, 3)
        t.split(0, 3).split(0, 3).split(0, 64).split(1, 32).split(2, 4)
        t.reorder({3: -7, 4: -6, 5: -5, 7: -4, 8: -3, 9: -2})
        flatten(t, -7)
        flatten(t, 0, -2)
        t.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.Bulk)
    t2.split(1, 256)
    t2.axis(-1).parallelize(P.TIDx)
    return fusion


def define_box_by_rotation_2(extent):
    fusion, t1, t2 = tma_load_copy("define_box_by_rotation_2", [extent])
    for t in (t1, t2):
        t.split(0, 8).split(0, 4).split(1, 2)
        t.reorder({1: 2})
        t.merge(0).merge(1)
        t.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.Bulk)
    t2.axis(1).parallelize(P.TIDx)
    return fusion


def define_box_by_rotation_3(rows):
    fusion, t1, t2 = tma_load_copy("define_box_by_rotation_3", [rows, 8])
    for t in (t1, t2):
        t.split(0, 23).split(1, 8)
        t.merge(0).merge(1)
        t.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.Bulk)
    t2.axis(1).parallelize(P.TIDx)
    return fusion


def non_trivial_gmem_allocation_domain_1():
    """tv0 [128, 1024, 128] allocated [I2, I0*I1] (a transposed view); 32-byte swizzled tiles."""
    fusion, t1, t2 = tma_load_copy("non_trivial_gmem_allocation_domain_1", [128, 1024, 128])
    t0 = fusion.inputs[0]
    for t in (t0, t1, t2):
        t.merge(0).reorder({0: 1})
    t0.set_allocation_domain(t0.get_loop_domain(), True)
    schedule_tile([t1, t2], [128, 32 // t1.dtype.bytes], SWIZZLE.B32)
    t1.set_allocation_domain(t1.get_loop_domain(), True)
    parallelize_as_bulk_skipping_first_ids(t1, 1)
    parallelize_all_dims_except_first_as_tidx(t2)
    return fusion


def non_trivial_gmem_allocation_domain_2():
    fusion, t1, t2 = tma_load_copy("non_trivial_gmem_allocation_domain_2", [2, 3, 5, 7, 11, 32])
    t0 = fusion.inputs[0]
    t0.merge(1).merge(0).merge(-2).merge(0)
    t0.set_allocation_domain(t0.get_loop_domain(), True)
    for t in (t1, t2):
        t.reorder({1: -2})
        t.merge(-2)
        flatten(t, 0, -2)
        t.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.Bulk)
    t2.axis(1).parallelize(P.TIDx)
    return fusion


INDEXING_CASES = [
    Case("TMAIndexingTest.Load2DTensorWith1DTMA", load_2d_tensor_with_1d_tma, VALID, run=runs_copy([1024, 1024])),
    Case("TMAIndexingTest.Load1DTensorWith2DTMA", load_1d_tensor_with_2d_tma, VALID, run=runs_copy([1024 * 1024])),
    Case("TMAIndexingTest.NonOneElementStride", non_one_element_stride, VALID, run=runs_copy([1024, 1024])),
    Case("TMAIndexingTest.Advanced", advanced, VALID),
    Case("TMAIndexingTest.DefineBoxByCompositing1", define_box_by_compositing_1, VALID),
    Case("TMAIndexingTest.DefineBoxByCompositing2", define_box_by_compositing_2, VALID),
    Case("TMAIndexingTest.DefineBoxByCompositingShouldNotMerge", define_box_by_compositing_should_not_merge, VALID,
         run=runs_copy([2, 256, 2, 32])),
    Case("TMAIndexingTest.DefineBoxByRotation1", define_box_by_rotation_1, VALID, run=runs_copy([599, 599, 268])),
    Case("TMAIndexingTest.DefineBoxByRotation2/valid_input", lambda: define_box_by_rotation_2(8 * 997), VALID,
         run=runs_copy([8 * 997])),
    Case("TMAIndexingTest.DefineBoxByRotation2/invalid_input", lambda: define_box_by_rotation_2(997), THROWS, codes=("TMA-VIEW",)),
    Case("TMAIndexingTest.DefineBoxByRotation3/valid_input", lambda: define_box_by_rotation_3(23 * 997), VALID,
         run=runs_copy([23 * 997, 8])),
    Case("TMAIndexingTest.DefineBoxByRotation3/invalid_input", lambda: define_box_by_rotation_3(997), THROWS,
         differs="nvFuser views [M/23, 23, 8] as a 3-D TMA and refuses M = 997 at launch (not divisible by 23); "
                 "tileproof loads 2-D boxes of 8 x 8 at rows g*23 + o*8: the box past a group's 23 rows fills "
                 "a hole tv2 never reads, the last group's boxes past M are zero-filled",
         run=runs_copy([997, 8])),
    Case("TMAIndexingTest.NonTrivialGmemAllocationDomain1", non_trivial_gmem_allocation_domain_1, VALID),
    Case("TMAIndexingTest.NonTrivialGmemAllocationDomain2", non_trivial_gmem_allocation_domain_2, VALID,
         run=runs_copy([2, 3, 5, 7, 11, 32])),
]


# -- TMAMiscTest --------------------------------------------------------------------------------------

def advanced_thread_parallelization(load):
    """4 threads each issue a TMA of 128 elements; 512 threads do the plain copy."""
    fusion, t1, t2 = copy_fusion("advanced_thread_parallelization", lambda: tp.make_contig_tensor(1), load=load)
    tma, plain = (t1, t2) if load else (t2, t1)
    tma.split(0, 128)
    tma.axis(1).parallelize(P.Bulk)
    tma.split(0, 4)
    tma.axis(0).parallelize(P.BIDx)
    tma.axis(1).parallelize(P.TIDx)
    plain.split(0, 128).split(0, 4).merge(1)
    plain.axis(0).parallelize(P.BIDx)
    plain.axis(1).parallelize(P.TIDx)
    return fusion


def disable_index_hoisting():
    """SimpleStore with index hoisting off (no schedule difference): one TMA store of 32 elements.
    At the TEST's size: tv1 holds the whole tensor in shared memory (symbolic: SMEM-CAPACITY)."""
    fusion, _, t2 = copy_fusion("disable_index_hoisting", lambda: tp.make_contig_concrete_tensor([32]), load=False)
    t2.split(0, 32)
    t2.axis(1).parallelize(P.Bulk)
    return fusion


def repro_1977():
    """At the TEST's size: tv1 holds the whole tensor in shared memory (symbolic: SMEM-CAPACITY)."""
    fusion, t1, _ = copy_fusion("repro_1977", lambda: tp.make_contig_concrete_tensor([1024]))
    t1.split(0, 128)
    t1.axis(1).parallelize(P.Bulk)
    return fusion


def store_sync_insertion(step):
    """gmem -> (TMA) smem -> (TMA) gmem -> gmem: step 0 not inlined, 1 tv1 inlined at 1, 2 also
    circular-buffered (10 stages, prefetch 4). One block; tv2 is a global intermediate read back
    after the block's TMA stores complete (cp.async.bulk.wait_group 0, fence.proxy.async.global,
    a barrier). Step 0 at the TEST's size (8192): tv1 holds the whole tensor in shared memory
    (symbolic: SMEM-CAPACITY)."""
    with tp.Fusion("store_sync_insertion") as fusion:
        t0 = tp.make_contig_tensor(1)
        fusion.add_input(t0)
        t1 = tp.set(t0, op=TMA)
        t2 = tp.set(t1, op=TMA)
        t3 = tp.set(t2)
        fusion.add_output(t3)
    t1.set_memory_type(SHARED)
    t2.set_memory_type(tp.MemoryType.Global)
    if step == 0:
        fusion.assume("T0_0 <= 8192")
    for t in (t1, t2, t3):
        t.split(0, 128).split(0, 4)
    t1.axis(-1).parallelize(P.Bulk)
    t2.axis(-1).parallelize(P.Bulk)
    t3.axis(-1).parallelize(P.TIDx)
    if step >= 1:
        t1.inline_at(1)
    if step >= 2:
        t1.circular_buffer(10, 4)
    return fusion


MISC_CASES = [
    Case("TMAMiscTest.AdvancedThreadParallelizationLoad", lambda: advanced_thread_parallelization(True), VALID,
         run=runs_copy([100000], [512], [1000])),
    Case("TMAMiscTest.AdvancedThreadParallelizationStore", lambda: advanced_thread_parallelization(False), VALID,
         run=runs_copy([100000], [512], [1000])),
    Case("TMAMiscTest.DisableIndexHoisting", disable_index_hoisting, VALID, run=runs_copy([32])),
    Case("TMAMiscTest.Repro1977", repro_1977, VALID, run=runs_copy([1024])),
] + [
    Case(f"TMAMiscTest.StoreSyncInsertion/{name}", lambda step=step: store_sync_insertion(step), VALID,
         run=runs_copy([8192], [1000], [5003], *([[100000]] if step else [])))
    for step, name in enumerate(("not_inlined", "inlined", "circular_buffered"))
]


# -- TMACompileTimeInvalidTest, TMARuntimeInvalidTest ----------------------------------------------

def bulk_not_in_tma():
    with tp.Fusion("bulk_not_in_tma") as fusion:
        t0 = tp.make_contig_tensor(1)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        fusion.add_output(t1)
    t1.axis(0).parallelize(P.Bulk)
    return fusion


def bulk_broadcast():
    fusion, t1, _ = copy_fusion("bulk_broadcast", lambda: tp.make_contig_concrete_tensor([1]))
    t1.axis(0).parallelize(P.Bulk)
    return fusion


def invalid_parallel_type():
    fusion, t1, _ = copy_fusion("invalid_parallel_type", lambda: tp.make_contig_concrete_tensor([8]))
    t1.axis(0).parallelize(P.Vectorize)
    return fusion


def tiled_1d(name, factor, make_input=lambda: tp.make_contig_tensor(1), bulk=1, tidx=None):
    """[N/factor (BIDx), factor]: tv1's axis `bulk` on Bulk, tv2's axis `tidx` on TIDx."""
    fusion, t1, t2 = copy_fusion(name, make_input)
    for t in (t1, t2):
        t.split(0, factor)
        t.axis(0).parallelize(P.BIDx)
    t1.axis(bulk).parallelize(P.Bulk)
    if tidx is not None:
        t2.axis(tidx).parallelize(P.TIDx)
    return fusion, t1, t2


def size_of_transfer():
    return tiled_1d("size_of_transfer", 16 // 4 // 2)[0]  # 2 floats: 8 bytes


def innermost_discontiguous():
    return tiled_1d("innermost_discontiguous", 16, lambda: tp.make_tensor([-1], contiguity=False))[0]


def merge_discontiguous():
    fusion, t1, t2 = copy_fusion("merge_discontiguous", lambda: tp.make_tensor([-1, -1], contiguity=[False, True]))
    for t in (t1, t2):
        t.merge(0).split(0, 16)
        t.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.Bulk)
    return fusion


def innermost_element_stride_not_one():
    fusion, t1, t2 = copy_fusion("innermost_element_stride_not_one", lambda: tp.make_contig_tensor(1))
    for t in (t1, t2):
        t.split(0, 32).split(1, 2)
        t.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.Bulk)
    return fusion


def swizzle_bulk_with_non_bulk():
    fusion, t1, t2 = copy_fusion("swizzle_bulk_with_non_bulk", lambda: tp.make_contig_tensor(1))
    for t in (t1, t2):
        t.split(0, 16).split(0, 16)
        t.swizzle(XOR, 1, 2)
        t.axis(0).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.Bulk)
    return fusion


def misaligned_global_address():
    """Compiles and validates on an aligned input; a misaligned one is refused at launch (by the
    tensor map's encoding: the kernel's argument, not its schedule)."""
    return tiled_1d("misaligned_global_address", 128, tidx=1)[0]


def misaligned_global_stride():
    """[M, N] with M's stride free: 128 x 128 boxes; a row stride not a multiple of 16 bytes is
    refused at launch (the TEST's second input)."""
    fusion, t1, t2 = copy_fusion("misaligned_global_stride", lambda: tp.make_tensor([-1, -1], contiguity=[False, True]))
    for t in (t1, t2):
        t.split(1, 128).split(0, 128)
        t.axis(0).parallelize(P.BIDx)
        t.axis(2).parallelize(P.BIDy)
    t1.axis(1).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    t2.axis(3).parallelize(P.TIDx)
    fusion.assume("T0_1 <= 65535 * 128")  # gridDim.y, checked at launch
    return fusion


def runtime_size_of_transfer():
    """The tile size is a fusion input: both of the TEST's runs are refused (4 floats: blockDim.x 4 <
    32 for the elect-sync predicate; 2 floats: 8 bytes)."""
    with tp.Fusion("runtime_size_of_transfer") as fusion:
        t0 = tp.make_contig_tensor(1)
        fusion.add_input(t0)
        t1 = tp.set(t0, op=TMA)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    fusion.symbol("tile_size")
    t1.set_memory_type(SHARED)
    for t in (t1, t2):
        t.split(0, "tile_size")
        t.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.Bulk)
    t2.axis(1).parallelize(P.TIDx)
    return fusion


def invalid_view(extent):
    fusion, t1, t2 = tma_load_copy("invalid_view", [extent])
    for t in (t1, t2):
        t.split(0, 1024).split(1, 32).split(0, 32)
        t.axis(0).parallelize(P.BIDx)
        t.axis(2).parallelize(P.BIDy)
    t1.axis(1).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    t2.axis(1).parallelize(P.TIDy)
    t2.axis(3).parallelize(P.TIDx)
    return fusion


INVALID_CASES = [
    Case("TMACompileTimeInvalidTest.BulkNotInTMA", bulk_not_in_tma, THROWS, codes=("TMA-BULK-PLACEMENT",)),
    Case("TMACompileTimeInvalidTest.BulkBroadcast", bulk_broadcast, THROWS, codes=("TMA-BULK-PLACEMENT",)),
    Case("TMACompileTimeInvalidTest.InvalidParallelType", invalid_parallel_type, THROWS, codes=("TMA-BULK-PLACEMENT",)),
    Case("TMACompileTimeInvalidTest.SizeOfTransfer", size_of_transfer, THROWS, codes=("TMA-INNER-BYTES",)),
    Case("TMACompileTimeInvalidTest.InnermostDiscontiguous", innermost_discontiguous, THROWS, codes=("TMA-GLOBAL-STRIDE",)),
    Case("TMACompileTimeInvalidTest.MergeDiscontiguous", merge_discontiguous, THROWS, codes=("TMA-VIEW",)),
    Case("TMACompileTimeInvalidTest.InnermostElementStrideNotOne", innermost_element_stride_not_one, THROWS, codes=("TMA-ELEMENT-STRIDE",)),
    Case("TMACompileTimeInvalidTest.SwizzleBulkWithNonBulk", swizzle_bulk_with_non_bulk, THROWS, codes=("TMA-MIXED-TRANSFORM",)),
    Case("TMARuntimeInvalidTest.MisalignedGlobalAddress", misaligned_global_address, VALID,
         run=runs_copy([128], [256], [1000])),
    Case("TMARuntimeInvalidTest.MisalignedGlobalStride", misaligned_global_stride, VALID),
    Case("TMARuntimeInvalidTest.SizeOfTransfer", runtime_size_of_transfer, THROWS, codes=("TMA-INNER-BYTES",)),
    Case("TMARuntimeInvalidTest.InvalidView/valid_input", lambda: invalid_view(10240), VALID,
         run=runs_copy([10240])),
    Case("TMARuntimeInvalidTest.InvalidView/invalid_input", lambda: invalid_view(10249), THROWS, codes=("TMA-VIEW",)),
]


# -- TMADocTest (doc/dev/tma.md's figures; nvFuser skips the invalid ones as "TODO: add check") ------

def doc_load(name, shape):
    return copy_fusion(name, lambda: tp.make_contig_concrete_tensor(shape, tp.float64))


def doc_store(name, shape):
    return copy_fusion(name, lambda: tp.make_contig_concrete_tensor(shape, tp.float64), load=False)


def figure_13a_14a(valid):
    """13a: a non-Bulk axis (3) between the tile's outer Bulk axis and its striding split;
    14a reorders it out."""
    fusion, t1, t2 = doc_load("figure_14a" if valid else "figure_13a", [16, 200])
    for t in (t1, t2):
        t.split(1, 128).split(0, 4).split(1, 3)
        t.axis(3).parallelize(P.BIDx)
        if valid:
            t.reorder({1: 2})
    t1.axis(2 if valid else 1).parallelize(P.Bulk)
    t1.axis(4).parallelize(P.Bulk)
    t1.set_allocation_domain(t1.get_loop_domain(), True)
    return fusion


def figure_13b_14b(box):
    """13b: I1{10} boxed by 6 (an indivisible box over the whole extent); 14b boxes it by 10."""
    fusion, t1, t2 = doc_load(f"figure_1{3 if box == 6 else 4}b", [16, 10])
    for t in (t1, t2):
        t.split(1, box).split(0, 4)
        t.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    return fusion


def figure_13c_14c(name):
    """13c and 14c have the same schedule in the C++ (the tile's 1-row outer on Bulk, TIDx between)."""
    fusion, t1, t2 = doc_load(name, [16, 200])
    for t in (t1, t2):
        t.split(1, 128).split(0, 1)
        t.axis(2).parallelize(P.TIDx)
    t1.axis(1).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    t1.set_allocation_domain(t1.get_loop_domain(), True)
    return fusion


def figure_13d_14d(valid):
    """TMA store of [16, 12] from a tile written by 16 threads: 14d boxes [4, 12], 13d [4, 8] of 12."""
    fusion, t1, t2 = doc_store("figure_14d" if valid else "figure_13d", [16, 12])
    t1.axis(0).parallelize(P.TIDx)
    if not valid:
        t2.split(1, 8)
    t2.split(0, 4)
    t2.axis(1).parallelize(P.Bulk)
    t2.axis(2 if valid else 3).parallelize(P.Bulk)
    return fusion


def figure_13e_14e(box):
    """TMA store of [16, 10] boxed [4, box]; tv1 allocated as the tiles, written by TIDx x TIDy."""
    fusion, t1, t2 = doc_store(f"figure_1{3 if box == 6 else 4}e", [16, 10])
    for t in (t1, t2):
        t.split(1, box).split(0, 4)
    t2.axis(1).parallelize(P.Bulk)
    t2.axis(3).parallelize(P.Bulk)
    t1.set_allocation_domain(t1.get_loop_domain(), True)
    t1.axis(0).parallelize(P.TIDx)
    t1.axis(2).parallelize(P.TIDy)
    return fusion


def figure_15(name, inner, swap=False):
    """15a (inner 2), 15c (inner 3, indivisible) and 15d (3, reordered): the [4, 4] tile's inner
    dim split by `inner` and the outer part merged into the rows."""
    fusion, t1, t2 = doc_load(name, [16, 10])
    for t in (t1, t2):
        t.split(1, 4).split(0, 4)
        t.reorder({1: 2})
        t.split(-1, inner)
        if swap:
            t.reorder({-1: -2})
        t.merge(2)
    t1.axis(2).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    t1.set_allocation_domain(t1.get_loop_domain(), True)
    return fusion


def figure_15b():
    """A TMA store from a tile written with 2-wide vectors: the TMA's tile on Bulk inside TIDx."""
    fusion, t1, t2 = doc_store("figure_15b", [16, 12])
    t1.merge(0).split(0, 2)
    t1.axis(0).parallelize(P.TIDx)
    t1.axis(1).parallelize(P.Vectorize)
    t1.set_allocation_domain(t1.get_loop_domain(), True)
    t2.split(1, 4)
    t2.axis(0).parallelize(P.TIDx)
    t2.axis(1).parallelize(P.Bulk)
    t2.axis(2).parallelize(P.Bulk)
    return fusion


def figure_15e():
    """15e: tv1 [15, 12] merged, split by 8, on TIDx x TIDy; tv2 stored by TMA boxes of [3, 4]."""
    fusion, t1, t2 = doc_store("figure_15e", [15, 12])
    t1.merge(0).split(0, 8)
    t1.axis(0).parallelize(P.TIDx)
    t1.axis(1).parallelize(P.TIDy)
    t1.set_allocation_domain(t1.get_loop_domain(), True)
    t2.split(1, 4)
    t2.axis(0).parallelize(P.TIDx)
    t2.axis(1).parallelize(P.Bulk)
    t2.axis(2).parallelize(P.Bulk)
    return fusion


DOC_CASES = [
    Case("TMADocTest.Figure13a", lambda: figure_13a_14a(False), THROWS, codes=("TMA-TILE-CONTIGUITY",)),
    Case("TMADocTest.Figure14a", lambda: figure_13a_14a(True), VALID, run=runs_copy([16, 200], dtype="float64")),
    Case("TMADocTest.Figure13b", lambda: figure_13b_14b(6), THROWS, codes=("TMA-TILE-CONTIGUITY",)),
    Case("TMADocTest.Figure14b", lambda: figure_13b_14b(10), VALID, run=runs_copy([16, 10], dtype="float64")),
    Case("TMADocTest.Figure13c", lambda: figure_13c_14c("figure_13c"), THROWS,
         differs="the C++ of Figure13c is Figure14c's schedule, line for line, which nvFuser compiles and validates",
         run=runs_copy([16, 200], dtype="float64")),
    Case("TMADocTest.Figure14c", lambda: figure_13c_14c("figure_14c"), VALID, run=runs_copy([16, 200], dtype="float64")),
    Case("TMADocTest.Figure13d", lambda: figure_13d_14d(False), THROWS, codes=("TMA-TILE-CONTIGUITY",)),
    Case("TMADocTest.Figure14d", lambda: figure_13d_14d(True), VALID, run=runs_copy([16, 12], dtype="float64")),
    Case("TMADocTest.Figure13e", lambda: figure_13e_14e(6), THROWS, codes=("TMA-TILE-CONTIGUITY",)),
    Case("TMADocTest.Figure14e", lambda: figure_13e_14e(16), VALID, run=runs_copy([16, 10], dtype="float64")),
    Case("TMADocTest.Figure15a", lambda: figure_15("figure_15a", 2), VALID, run=runs_copy([16, 10], dtype="float64")),
    Case("TMADocTest.Figure15b", figure_15b, VALID,
         differs="nvFuser skips it (needs IdModel indexing); each thread's TMA store starts at 96 bytes x its row "
                 "in shared memory, and cp.async.bulk.tensor needs a 128-byte aligned shared address (SMEM-ALIGNMENT)"),
    Case("TMADocTest.Figure15c", lambda: figure_15("figure_15c", 3), THROWS, codes=("TMA-TILE-CONTIGUITY",)),
    Case("TMADocTest.Figure15d", lambda: figure_15("figure_15d", 3, swap=True), THROWS,
         codes=("TMA-TILE-CONTIGUITY",)),
    Case("TMADocTest.Figure15e", figure_15e, THROWS, codes=("SMEM-ALIGNMENT",)),
]


# -- TMATest: 1-D bulk copies (cp.async.bulk), TMA1dPredicateTest -----------------------------------

def runs_sum(*shapes, inputs=2):
    """run(kernel, torch): the kernel returns the sum of its `inputs` inputs (one input: doubled), at
    each shape."""
    def run(kernel, torch):
        for shape in shapes:
            ins = [torch.randn(shape, device="cuda") for _ in range(inputs)]
            (out,) = kernel.run(*ins)
            want = ins[0] + ins[-1]
            assert torch.equal(out, want), shape
    return run


def cp_async_bulk_1d():
    """TMATest.CpAsyncBulk1D: tv0 + tv1, both loaded by 512-element 1-D bulk copies, the sum stored
    from shared memory by another."""
    with tp.Fusion("cp_async_bulk_1d") as fusion:
        t0 = tp.make_contig_tensor(2)
        t1 = tp.make_contig_tensor(2)
        fusion.add_input(t0)
        fusion.add_input(t1)
        t2 = tp.add(t0, t1)
        fusion.add_output(t2)
    fusion.assume("(T0_0 * T0_1) % 512 == 0")  # nvFuser checks at launch that the Bulk split divides
    fusion.assume("T0_0 * T0_1 <= 512 * 2147483647")  # gridDim.x, checked at launch
    t0a = t0.cache_after(tp.LoadStoreOpType.CpAsyncBulk)
    t1a = t1.cache_after(tp.LoadStoreOpType.CpAsyncBulk)
    t2b = t2.cache_before()
    for t in (t0a, t1a, t2b):
        t.set_memory_type(SHARED)
    t2.definition.op_type = tp.LoadStoreOpType.CpAsyncBulk
    t2.merge(0).split(0, 512)
    tp.propagate_transforms(t2)
    t2.axis(0).parallelize(P.BIDx)
    tp.parallelize_all_like(t2)
    t2.axis(-1).parallelize(P.Bulk)
    t2b.axis(-1).parallelize(P.TIDx)
    t0a.axis(-1).parallelize(P.Bulk)
    t1a.axis(-1).parallelize(P.Bulk)
    tp.inline_most(fusion)
    return fusion


def cp_async_bulk_doubled(shape, outer=(2, 137), unroll=None, circular=None):
    """tv1 = tv0 + tv0 with tv0 loaded by a 1-D bulk copy per row: rows split [BIDx, serial
    (circular) loop, inner loop], the row on TIDx (compute) and Bulk (load), the copy inlined at 2.
    Symbolic sizes: nvFuser checks at launch that the row is a multiple of 16 bytes (its 1-D
    copy's size) and fits the block's threads (assumed)."""
    with tp.Fusion("cp_async_bulk_doubled") as fusion:
        t0 = tp.make_tensor(shape, contiguity=True)
        fusion.add_input(t0)
        t1 = tp.add(t0, t0)
        fusion.add_output(t1)
    if shape[-1] == -1:
        fusion.assume("T0_1 % 4 == 0")
        fusion.assume("T0_1 <= 1024")
    t0a = t0.cache_after(tp.LoadStoreOpType.CpAsyncBulk)
    t0a.set_memory_type(SHARED)
    for factor in outer:
        t1.split(0, factor)
    t1.reorder({0: 1})
    tp.propagate_transforms(t1)
    t1.axis(0).parallelize(P.BIDx)
    if unroll is not None:
        t1.axis(unroll).parallelize(P.Unroll)
    tp.parallelize_all_like(t1)
    t1.axis(-1).parallelize(P.TIDx)
    t0a.axis(-1).parallelize(P.Bulk)
    t0a.inline_at(2)  # inlineMost({tv1}) inlines the output alone: nothing
    if circular is not None:
        t0a.circular_buffer(2, 1, circular)
    return fusion


def cp_async_bulk_merged_rows():
    """TMATest.CpAsyncBulk1dNonDivisibleSplit: [M, N] merged and split by 512, each run of 512
    loaded by a 1-D bulk copy and doubled by 512 threads; nvFuser refuses the split at launch
    (2 x 1023 is no multiple of 512), tileproof for the sizes where the last run crosses the end."""
    with tp.Fusion("cp_async_bulk_merged_rows") as fusion:
        t0 = tp.make_contig_tensor(2)
        fusion.add_input(t0)
        t1 = tp.add(t0, t0)
        fusion.add_output(t1)
    t0a = t0.cache_after(tp.LoadStoreOpType.CpAsyncBulk)
    t0a.set_memory_type(SHARED)
    t1.merge(0).split(0, 512)
    tp.propagate_transforms(t1)
    t0a.axis(-1).parallelize(P.Bulk)
    t1.axis(-1).parallelize(P.TIDx)
    tp.inline_most(fusion)
    return fusion


def cp_async_bulk_1d_illegal_size():
    with tp.Fusion("cp_async_bulk_1d_illegal_size") as fusion:
        t0 = tp.make_contig_concrete_tensor([33])
        fusion.add_input(t0)
        t1 = tp.add(t0, t0)
        fusion.add_output(t1)
    t0a = t0.cache_after(tp.LoadStoreOpType.CpAsyncBulk)
    t0a.set_memory_type(SHARED)
    t0a.axis(-1).parallelize(P.Bulk)
    return fusion


SM_COUNT = 132  # the H200's SMs: the TEST's split factor


def tma_1d_predicate(has_unroll, has_circular_buffer):
    unroll = 2 if has_unroll else 1
    rows = (SM_COUNT + 1) * unroll * 2
    outer = ((unroll,) if has_unroll else ()) + (SM_COUNT,)
    return cp_async_bulk_doubled([rows, 128], outer=outer,
                                 circular=tp.WarpSpecialized(P.TIDy) if has_circular_buffer else None)


CP_ASYNC_BULK_CASES = [
    Case("TMATest.CpAsyncBulk1D", cp_async_bulk_1d, VALID, run=runs_sum((16, 512), (64, 96), (1024, 1024))),
    Case("TMATest.CpAsyncBulk1dNonDivisibleSplit", cp_async_bulk_merged_rows, THROWS, codes=("BULK-COPY-BOUNDS",)),
    Case("TMATest.CpAsyncBulk1dNonDivisibleUnroll",
         lambda: cp_async_bulk_doubled([1023, 128], circular=tp.WarpSpecialized(P.TIDy)), THROWS,
         codes=("LOWERING-SUPPORTED",)),
    Case("TMATest.CpAsyncBulk1dPipplined",
         lambda: cp_async_bulk_doubled([1023, 512], circular=tp.Pipelined()), THROWS, codes=("LOWERING-SUPPORTED",)),
    Case("TMATest.CpAsyncBulk1dNonCircularBuffer", lambda: cp_async_bulk_doubled([-1, -1], unroll=2), VALID,
         run=runs_sum((1023, 512), (5, 64), (300, 1024), inputs=1)),
    Case("TMATest.CpAsyncBulk1dIllegalSize", cp_async_bulk_1d_illegal_size, THROWS, codes=("BULK-COPY-SIZE",)),
] + [
    Case(f"TMATest/TMA1dPredicateTest.testUnrollCircularBuffer/has_unroll_{u}_has_circular_buffer_{c}",
         lambda u=u, c=c: tma_1d_predicate(u, c), VALID,
         run=runs_sum(((SM_COUNT + 1) * (2 if u else 1) * 2, 128), inputs=1))
    for u in (True, False) for c in (True, False)
]


CASES = (MEMORY_CASES + SIMPLE_CASES + INDEXING_CASES + MISC_CASES + INVALID_CASES + DOC_CASES
         + CP_ASYNC_BULK_CASES)


@pytest.mark.parametrize("case", params(CASES))
def test_verdict(case):
    check(case)
