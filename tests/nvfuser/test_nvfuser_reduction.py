"""nvFuser tests/cpp/test_reduction.cpp, translated (tests/support/nvfuser.py says how).

The file holds grid allreduces (a sum over BIDx / BIDy broadcast back to every block), grouped
reductions (groupReductions, ParallelType::Group), 1-D bulk (CpAsyncBulk) and 2-D TMA fed
reductions, and the grid Welford allreduces GridAllreduceWelford1/2 and
CrossIterationGroupedGridAllreduceWelford1/2 (test_nvfuser_welford.py has the block Welfords and a
grid Welford read in the last block) and two instances of CrossIterationGroupedGridAllreduceWelfordShmoo
(nvFuser's persistent batchnorm schedule), and FusedReductionBatchnorm (its splits by the grid's
dimensions, NamedScalar::getParallelDim, as extents passed at launch). Skipped: GroupAllreduce5 (complex
dtypes), CrossEntropyGatherPattern (takeAlongAxis), and the TESTs that only run nvFuser's automatic
schedulers (GeluBwdReduction, TensorRankLimit, TmaInnerReductionTest.Sum, TmaOuterReductionTest.Sum).
"""

from math import gcd

import pytest

import tileproof as tp
from support.nvfuser import THROWS, VALID, Case, check, params

P = tp.ParallelType

# H200's sharedMemPerBlockOptin (227 KiB) and SM count, which the C++ reads from the device.
SMEM_PER_BLOCK_OPTIN = 232448
SM_COUNT = 132


def symbolic_tensor(ndims, dtype=tp.float32):
    """nvFuser's makeSymbolicTensor: symbolic extents, no contiguity."""
    return tp.make_tensor([-1] * ndims, dtype=dtype)


def ceil_div(a, b):
    return -(-a // b)


def unparallel_reduction_axes(tv):
    """The reduction axes of tv not on a thread or block index (nvFuser's !isThread()): what the
    TMA tests rfactor."""
    return [i for i, axis in enumerate(tv.get_loop_domain())
            if axis.is_reduction and not (axis.parallel_type.is_thread or axis.parallel_type.is_block)]


def last_pow2(n):
    """scheduler_utils::lastPow2: the largest power of 2 not above n (0 for 0)."""
    return 0 if n <= 0 else 1 << (n.bit_length() - 1)


# -- grid allreduces ---------------------------------------------------------------------------

def _over_blocks_of_128(ref, axis: int, serial_rows: bool = False) -> None:
    """nvFuser's usual grid schedule of these TESTs: ref's `axis` split by 128, propagated, the outer
    part on BIDx and the 128 on TIDx, parallelized alike (`serial_rows`: first everything inlined at
    the row loop, tv0->computeAt(ref, 1))."""
    ref.split(axis, 128)
    tp.propagate_transforms(ref)
    if serial_rows:
        tp.inline_all_at(ref, 1)
    ref.axis(axis).parallelize(P.BIDx)
    ref.axis(axis + 1).parallelize(P.TIDx)
    tp.parallelize_all_like(ref)


def grid_allreduce_1():
    """T3 = T0 + broadcast(sum(T0)), [N] split [BIDy, unswitch, BIDx{4}, TIDx{128}]: the sum runs
    over the whole grid; T1's unswitch axis."""
    with tp.Fusion("grid_allreduce_1") as fusion:
        t0 = symbolic_tensor(1)
        fusion.add_input(t0)
        t1 = tp.sum(t0, [0])
        t2 = tp.broadcast(t1, [True])
        t3 = tp.add(t0, t2)
        fusion.add_output(t3)
    t3.split(0, 128).split(0, 4).split(0, 1)  # unswitch
    tp.propagate_transforms(t3)
    t3.axis(0).parallelize(P.BIDy)
    t3.axis(2).parallelize(P.BIDx)
    t3.axis(3).parallelize(P.TIDx)
    tp.parallelize_all_like(t3)
    t1.axis(1).parallelize(P.Unswitch)
    fusion.assume("T0_0 <= 33553920")  # gridDim.y = ceil(N / 512) <= 65535: nvFuser checks the grid at launch
    return fusion


def grid_allreduce_2():
    """The allreduce over [BIDx, TIDx{32}], T1's thread axis moved to TIDy (its broadcast T2 then
    a plain copy)."""
    with tp.Fusion("grid_allreduce_2") as fusion:
        t0 = symbolic_tensor(1)
        fusion.add_input(t0)
        t1 = tp.sum(t0, [0])
        t2 = tp.broadcast(t1, [True])
        t3 = tp.add(t0, t2)
        fusion.add_output(t3)
    t3.split(0, 32)
    tp.propagate_transforms(t3)
    t3.axis(0).parallelize(P.BIDx)
    t3.axis(1).parallelize(P.TIDx)
    tp.parallelize_all_like(t3, tensors=[t2])
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.TIDy)
    return fusion


def grid_allreduce_3():
    """Row allreduce of [M, N] over [BIDx, TIDx{128}] inside a serial loop over the rows (the
    work buffer is circular buffered): computeAt(T3, 1)."""
    with tp.Fusion("grid_allreduce_3") as fusion:
        t0 = symbolic_tensor(2)
        fusion.add_input(t0)
        t1 = tp.sum(t0, [1])
        t2 = tp.broadcast(t1, [False, True])
        t3 = tp.add(t0, t2)
        fusion.add_output(t3)
    _over_blocks_of_128(t3, 1, serial_rows=True)  # tv0->computeAt(tv3, 1)
    return fusion


def grid_allreduce_welford_1():
    """T5 = T0 + broadcast(avg) + broadcast(var_sum) of a Welford over [N] split [BIDx, TIDx{128}]:
    every block reads the grid Welford's totals (a Welford allreduce, its states combined in every
    block after the grid-wide barrier)."""
    with tp.Fusion("grid_allreduce_welford_1") as fusion:
        t0 = symbolic_tensor(1)
        fusion.add_input(t0)
        avg, var_sum, _ = tp.welford(t0, [0])
        t5 = tp.add(tp.add(t0, tp.broadcast(avg, [True])), tp.broadcast(var_sum, [True]))
        fusion.add_output(t5)
    _over_blocks_of_128(t5, 0)
    return fusion


def grid_allreduce_welford_2():
    """T3 = T0 + broadcast(avg) of a row Welford of [M, N] over [BIDx, TIDx{128}] inside a serial loop
    over the rows (a semaphore and slots per row): computeAt(T3, 1)."""
    with tp.Fusion("grid_allreduce_welford_2") as fusion:
        t0 = symbolic_tensor(2)
        fusion.add_input(t0)
        avg, _, _ = tp.welford(t0, [1])
        t3 = tp.add(t0, tp.broadcast(avg, [False, True]))
        fusion.add_output(t3)
    _over_blocks_of_128(t3, 1, serial_rows=True)  # tv0->computeAt(tv3, 1)
    return fusion


def grid_allreduce_4():
    """An op between the grid reduction and its broadcast: T0 + broadcast(sum(T0) + 1)."""
    with tp.Fusion("grid_allreduce_4") as fusion:
        t0 = symbolic_tensor(1)
        fusion.add_input(t0)
        t1 = tp.sum(t0, [0])
        t2 = tp.add(t1, 1.0)
        t3 = tp.broadcast(t2, [True])
        t4 = tp.add(t0, t3)
        fusion.add_output(t4)
    _over_blocks_of_128(t4, 0)
    return fusion


def grid_allreduce_5():
    """Row allreduce of a [2, N] tensor over BIDx, beside an unrelated copy on [BIDy, BIDx] that
    launches more blocks than the reduction uses."""
    with tp.Fusion("grid_allreduce_5") as fusion:
        t0 = tp.make_tensor([2, -1])
        fusion.add_input(t0)
        t1 = tp.sum(t0, [1])
        t2 = tp.add(t1, 1.0)
        t3 = tp.broadcast(t2, [False, True])
        t4 = tp.add(t0, t3)
        fusion.add_output(t4)
        t5 = symbolic_tensor(2)
        fusion.add_input(t5)
        t6 = tp.set(t5)
        fusion.add_output(t6)
    _over_blocks_of_128(t4, 1)
    t6.axis(0).parallelize(P.BIDy)
    t6.axis(1).parallelize(P.BIDx)
    fusion.assume("T5_0 <= 65535")  # gridDim.y: nvFuser checks the grid at launch
    return fusion


def grid_allreduce_6():
    """Column allreduce of [M, N] over [BIDy, TIDy{8}], columns on [BIDx, TIDx{32}, 4], the
    cached input T1 vectorized by 4."""
    with tp.Fusion("grid_allreduce_6") as fusion:
        t0 = tp.make_contig_tensor(2)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.sum(t1, [0])
        t3 = tp.broadcast(t2, [True, False])
        t4 = tp.add(t0, t3)
        fusion.add_output(t4)
    t1.split(1, 4).split(1, 32).split(0, 8)  # [M/8, 8, N/128, 32, 4]
    tp.propagate_transforms(t1)
    t1.axis(0).parallelize(P.BIDy)
    t1.axis(1).parallelize(P.TIDy)
    t1.axis(2).parallelize(P.BIDx)
    t1.axis(3).parallelize(P.TIDx)
    tp.parallelize_all_like(t1)
    t1.axis(4).parallelize(P.Vectorize)
    # the TEST's [99, 200]: rows of whole 16-byte vectors and gridDim.y = ceil(M / 8) <= 65535, which
    # nvFuser checks at launch (the vector width and the grid)
    fusion.assume("T0_1 % 4 == 0")
    fusion.assume("T0_0 <= 524280")
    return fusion


# -- grouped reductions (groupReductions) ------------------------------------------------------

def grouped_reduction_1():
    """Two sums of the same rows grouped into one reduction, [BIDx, TIDx{N}]."""
    with tp.Fusion("grouped_reduction_1") as fusion:
        t0 = symbolic_tensor(2)
        fusion.add_input(t0)
        t1 = tp.sum(t0, [1])
        t2 = tp.sum(t0, [1])
        t3 = tp.add(t1, t2)
        fusion.add_output(t3)
    tp.group_reductions([t1, t2])
    fusion.assume("T0_1 <= 1024")  # blockDim.x = N: nvFuser checks it at launch
    t2.axis(0).parallelize(P.BIDx)
    t2.axis(1).parallelize(P.TIDx)
    tp.parallelize_all_like(t2)
    return fusion


def grouped_reduction_2():
    """A sum and a max grouped; the row split [BIDy, BIDx, TIDx{128}] (a grid reduction)."""
    with tp.Fusion("grouped_reduction_2") as fusion:
        t0 = symbolic_tensor(2)
        fusion.add_input(t0)
        t1 = tp.add(t0, 1.0)
        t2 = tp.sum(t1, [1])
        t3 = tp.add(t0, 2.0)
        t4 = tp.max(t3, [1])
        t5 = tp.add(t2, t4)
        fusion.add_output(t5)
    tp.group_reductions([t2, t4])
    fusion.assume("T0_0 <= 65535")  # gridDim.y = M: nvFuser checks it at launch
    t2.split(1, 128)
    tp.propagate_transforms(t2)
    tp.inline_most(fusion)
    t2.axis(0).parallelize(P.BIDy)
    t2.axis(1).parallelize(P.BIDx)
    t2.axis(2).parallelize(P.TIDx)
    return fusion


def grouped_reduction_3():
    """A float32 and a float64 sum grouped, [BIDy, BIDx, TIDx{128}]."""
    with tp.Fusion("grouped_reduction_3") as fusion:
        t0 = symbolic_tensor(2)
        fusion.add_input(t0)
        t1 = tp.sum(t0, [1])
        t2 = tp.cast(t0, tp.float64)
        t3 = tp.sum(t2, [1])
        t4 = tp.cast(t3, tp.float32)
        t5 = tp.add(t1, t4)
        fusion.add_output(t5)
    tp.group_reductions([t1, t3])
    fusion.assume("T0_0 <= 65535")  # gridDim.y = M: nvFuser checks it at launch
    t1.split(1, 128)
    tp.propagate_transforms(t1)
    tp.inline_most(fusion)
    t1.axis(0).parallelize(P.BIDy)
    t1.axis(1).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.TIDx)
    return fusion


def grouped_reduction_4():
    """Grouping sums of two inputs whose shapes may differ: nvFuser refuses."""
    with tp.Fusion("grouped_reduction_4") as fusion:
        t0 = symbolic_tensor(2)
        fusion.add_input(t0)
        t1 = symbolic_tensor(2)
        fusion.add_input(t1)
        t2 = tp.sum(t0, [1])
        t3 = tp.sum(t1, [1])
        t4 = tp.add(t2, t3)
        fusion.add_output(t4)
    tp.group_reductions([t2, t3])
    return fusion


def grouped_reduction_5():
    """Grouping two sums split differently (128 and 64): nvFuser refuses."""
    with tp.Fusion("grouped_reduction_5") as fusion:
        t0 = symbolic_tensor(2)
        fusion.add_input(t0)
        t1 = tp.sum(t0, [1])
        t2 = tp.sum(t0, [1])
        t3 = tp.add(t1, t2)
        fusion.add_output(t3)
    t1.split(1, 128)
    t2.split(1, 64)
    tp.group_reductions([t1, t2])
    return fusion


def grouped_reduction_6():
    """Three sums grouped, [BIDx, TIDx{N}]."""
    with tp.Fusion("grouped_reduction_6") as fusion:
        t0 = symbolic_tensor(2)
        fusion.add_input(t0)
        t2 = tp.sum(tp.add(t0, 1.0), [1])
        t4 = tp.sum(tp.add(t0, 2.0), [1])
        t6 = tp.sum(tp.add(t0, 3.0), [1])
        t7 = tp.add(tp.add(t2, t4), t6)
        fusion.add_output(t7)
    tp.group_reductions([t2, t4, t6])
    fusion.assume("T0_1 <= 1024")  # blockDim.x = N: nvFuser checks it at launch
    t2.axis(0).parallelize(P.BIDx)
    t2.axis(1).parallelize(P.TIDx)
    tp.parallelize_all_like(t2)
    return fusion


def grouped_reduction_7():
    """Grouping a sum with a sum that depends on it: nvFuser refuses."""
    with tp.Fusion("grouped_reduction_7") as fusion:
        t0 = symbolic_tensor(2)
        fusion.add_input(t0)
        t1 = tp.sum(t0, [1])
        t2 = tp.broadcast(t1, [False, True])
        t3 = tp.add(t0, t2)
        t4 = tp.sum(t3, [1])
        fusion.add_output(t4)
    tp.group_reductions([t1, t4])
    return fusion


def grouped_reduction_rfactor_1():
    """Two 1-D sums, each split [10 (outer split), N/1280, 128] and rfactored; the partials and
    the finals grouped; BIDx{10} x TIDx{128} (the final sums are grid reductions)."""
    with tp.Fusion("grouped_reduction_rfactor_1") as fusion:
        t0 = symbolic_tensor(1)
        fusion.add_input(t0)
        t1 = tp.sum(t0, [0])
        t2 = tp.sum(t0, [0])
        t3 = tp.add(t1, t2)
        fusion.add_output(t3)
    t1.split(0, 10, inner_split=False).split(1, 128)
    t1_rf = t1.rfactor([1])
    t2.split(0, 10, inner_split=False).split(1, 128)
    t2_rf = t2.rfactor([1])
    tp.group_reductions([t1_rf, t2_rf])
    tp.group_reductions([t1, t2])
    t1_rf.axis(0).parallelize(P.BIDx)
    t1_rf.axis(2).parallelize(P.TIDx)
    tp.parallelize_all_like(t1_rf)
    return fusion


def grouped_reduction_rfactor_2():
    """As GroupedReductionRfactor1, grouped first and rfactored together (rFactor of both)."""
    with tp.Fusion("grouped_reduction_rfactor_2") as fusion:
        t0 = symbolic_tensor(1)
        fusion.add_input(t0)
        t1 = tp.sum(t0, [0])
        t2 = tp.sum(t0, [0])
        t3 = tp.add(t1, t2)
        fusion.add_output(t3)
    tp.group_reductions([t1, t2])
    t1.split(0, 10, inner_split=False).split(1, 128)
    t1_rf = t1.rfactor([1], [t1, t2])[0]
    t1_rf.axis(0).parallelize(P.BIDx)
    t1_rf.axis(2).parallelize(P.TIDx)
    tp.parallelize_all_like(t1_rf)
    return fusion


def grouped_reduction_after_compute_at():
    """Two row sums of [M, N] rfactored (each thread sums a strided part serially), inlined, then
    grouped; the finals on TIDx{128} (block reductions)."""
    with tp.Fusion("grouped_reduction_after_compute_at") as fusion:
        t0 = symbolic_tensor(2)
        fusion.add_input(t0)
        t1 = tp.add(t0, 1.0)
        t2 = tp.sum(t1, [1])
        t3 = tp.sum(t1, [1])
        t4 = tp.add(t2, t3)
        fusion.add_output(t4)
    t2.split(1, 128)
    t2_rf = t2.rfactor([1])
    t2_rf.reorder({1: 2})
    t3.split(1, 128)
    t3_rf = t3.rfactor([1])
    t3_rf.reorder({1: 2})
    tp.propagate_transforms(t2_rf)  # computeAt replays the consumers' transforms on T1
    tp.inline_most(fusion)  # tv0->computeAt(tv4, -1, MostInlined)
    tp.group_reductions([t2_rf, t3_rf])
    tp.group_reductions([t2, t3])
    t2.axis(1).parallelize(P.TIDx)
    tp.parallelize_all_like(t2)
    return fusion


# -- grouped grid allreduces -------------------------------------------------------------------

def group_allreduce_1():
    """Two grid allreduces of one [N] grouped, [BIDx, TIDx{128}] split on the broadcast T2."""
    with tp.Fusion("group_allreduce_1") as fusion:
        t0 = symbolic_tensor(1)
        fusion.add_input(t0)
        t1 = tp.sum(t0, [0])
        t2 = tp.broadcast(t1, [True])
        t3 = tp.sum(t0, [0])
        t4 = tp.broadcast(t3, [True])
        t5 = tp.add(t0, t2)
        t6 = tp.add(t5, t4)
        fusion.add_output(t6)
    tp.group_reductions([t1, t3])
    _over_blocks_of_128(t2, 0)
    return fusion


def group_allreduce_2():
    """Float32 and float64 row allreduces grouped, [BIDy, BIDx, TIDx{512}]."""
    with tp.Fusion("group_allreduce_2") as fusion:
        t0 = symbolic_tensor(2)
        fusion.add_input(t0)
        t1 = tp.sum(t0, [1])
        t2 = tp.broadcast(t1, [False, True])
        t3 = tp.cast(t0, tp.float64)
        t4 = tp.sum(t3, [1])
        t5 = tp.broadcast(t4, [False, True])
        t6 = tp.cast(t5, tp.float32)
        t7 = tp.add(t0, t2)
        t8 = tp.add(t7, t6)
        fusion.add_output(t8)
    tp.group_reductions([t1, t4])
    t1.split(1, 512)
    tp.propagate_transforms(t1)
    tp.inline_most(fusion)
    t1.axis(0).parallelize(P.BIDy)
    t1.axis(1).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.TIDx)
    tp.parallelize_all_like(t1)
    fusion.assume("T0_0 <= 65535")  # gridDim.y = M: nvFuser checks the grid at launch
    return fusion


def group_allreduce_3():
    """A sum, a max and a min allreduce grouped, [BIDx, TIDx{128}]."""
    with tp.Fusion("group_allreduce_3") as fusion:
        t0 = symbolic_tensor(1)
        fusion.add_input(t0)
        t1 = tp.sum(t0, [0])
        t3 = tp.div(t0, tp.broadcast(t1, [True]))
        t4 = tp.max(t0, [0])
        t6 = tp.div(t0, tp.broadcast(t4, [True]))
        t7 = tp.min(t0, [0])
        t9 = tp.sub(t0, tp.broadcast(t7, [True]))
        for t in (t3, t6, t9):
            fusion.add_output(t)
    tp.group_reductions([t1, t4, t7])
    _over_blocks_of_128(t1, 0)
    return fusion


def group_allreduce_4():
    """Eight grid allreduces grouped, each mean (the sum divided by the extent N) added back."""
    with tp.Fusion("group_allreduce_4") as fusion:
        t0 = symbolic_tensor(1)
        fusion.add_input(t0)
        total = t0
        reductions = []
        for i in range(8):
            reduction = tp.sum(tp.add(t0, float(i)), [0])
            reductions.append(reduction)
            avg = tp.div(reduction, t0.axis(0).extent)
            total = tp.add(total, tp.broadcast(avg, [True]))
        fusion.add_output(total)
    tp.group_reductions(reductions)
    reduction = reductions[0]
    _over_blocks_of_128(reduction, 0)
    return fusion


def persistent_bn_backward_allreduce():
    """Batchnorm backward of [N, C, H, W]: the two sums over N, H, W grouped; [C/4, N/8 (BIDx),
    8 (TIDy), 4 (BIDy), HW/4 (TIDx), 4 (vectorized loads)]; rfactor of both on the vector axis."""
    with tp.Fusion("persistent_bn_backward_allreduce") as fusion:
        inp = tp.make_contig_tensor(4)
        grad_output = tp.make_contig_tensor(4)
        weight = tp.make_contig_tensor(1)
        save_mean = tp.make_contig_tensor(1)
        save_invstd = tp.make_contig_tensor(1)
        for t in (inp, grad_output, weight, save_mean, save_invstd):
            fusion.add_input(t)
        reduction_axes, mask = [0, 2, 3], [True, False, True, True]
        num_features = tp.cast(inp.axis(0).extent, tp.float64)
        for axis in (2, 3):
            num_features = tp.mul(num_features, inp.axis(axis).extent)
        mean = tp.broadcast(save_mean, mask)
        norm = tp.div(1.0, num_features)  # reciprocal(num_features)
        grad_output_sum = tp.sum(grad_output, reduction_axes)
        dot_p = tp.sum(tp.mul(grad_output, tp.sub(inp, mean)), reduction_axes)
        grad_mean = tp.broadcast(tp.mul(grad_output_sum, norm), mask)
        proj_scale = tp.broadcast(tp.mul(tp.mul(dot_p, norm), tp.mul(save_invstd, save_invstd)), mask)
        grad_scale = tp.mul(tp.broadcast(save_invstd, mask), tp.broadcast(weight, mask))
        proj = tp.mul(tp.sub(inp, mean), proj_scale)
        grad_input = tp.mul(tp.sub(tp.sub(grad_output, proj), grad_mean), grad_scale)
        fusion.add_output(grad_input)
    input_cache = inp.cache_after()
    grad_output_cache = grad_output.cache_after()
    for t in (weight, save_mean, save_invstd):
        t.cache_after()
    tp.group_reductions([grad_output_sum, dot_p])
    grad_input.merge(-2, -1).split(-1, 4)
    grad_input.split(0, 8).split(2, 4)
    grad_input.reorder({2: 0, 0: 1, 1: 2})
    grad_input.axis(1).parallelize(P.BIDx)
    grad_input.axis(2).parallelize(P.TIDy)
    grad_input.axis(3).parallelize(P.BIDy)
    grad_input.axis(4).parallelize(P.TIDx)
    tp.propagate_transforms(grad_input)
    grad_output_sum.rfactor([-1], [grad_output_sum, dot_p])
    tp.inline_all_at(grad_input, 1)  # every input's computeAt(grad_input, 1)
    tp.parallelize_all_like(grad_input)
    input_cache.axis(-1).parallelize(P.Vectorize)
    grad_output_cache.axis(-1).parallelize(P.Vectorize)
    fusion.assume("(T0_2 * T0_3) % 4 == 0")  # the TEST's NVF_CHECK: H * W a multiple of the vector width
    fusion.assume("T0_2 * T0_3 <= 512")  # [H * W / 4, 8] threads: nvFuser checks the block size at launch
    return fusion


def grouped_reduction_re_entrant_1():
    """Two column sums of [M, N] grouped: rows [BIDy, TIDy{8}], columns [BIDx, TIDx{64}, 2]
    with the cached input vectorized by 2."""
    with tp.Fusion("grouped_reduction_re_entrant_1") as fusion:
        t0 = symbolic_tensor(2)
        fusion.add_input(t0)
        t2 = tp.sum(tp.add(t0, 1.0), [0])
        t4 = tp.sum(tp.add(t0, 2.0), [0])
        t5 = tp.add(t2, t4)
        fusion.add_output(t5)
    tp.group_reductions([t2, t4])
    fusion.assume("T0_0 <= 65535 * 8")  # gridDim.y = ceil(M / 8): nvFuser checks it at launch
    t0_cache = t0.cache_after()
    t2.split(1, 2).split(1, 64).split(0, 8)
    tp.propagate_transforms(t2)
    t0_cache.axis(-1).parallelize(P.Vectorize)
    tp.inline_most(fusion)
    t2.axis(0).parallelize(P.BIDy)
    t2.axis(1).parallelize(P.TIDy)
    t2.axis(2).parallelize(P.BIDx)
    t2.axis(3).parallelize(P.TIDx)
    tp.parallelize_all_like(t2)
    return fusion


def channels_last_batch_norm_like(persistent):
    """Channels-last [N, H, W, C] half inputs, the two sums over N, H, W grouped; the outer
    reduction schedule: channels [C/32 (BIDx), 16 (TIDx), 2], rows merged and split by TIDy{8}
    and by BIDy (grid reduction); rfactor of both on the serial axis. `persistent`: T5 and T9
    broadcast back and added (an allreduce), the channel pair grouped (ParallelType::Group)."""
    with tp.Fusion("channels_last_batch_norm_like") as fusion:
        t0 = tp.make_contig_tensor(4, dtype=tp.float16)
        t1 = tp.make_contig_tensor(4, dtype=tp.float16)
        t2 = tp.make_contig_tensor(1)
        for t in (t0, t1, t2):
            fusion.add_input(t)
        axes, mask = [0, 1, 2], [True, True, True, False]
        t3 = tp.cast(t0, tp.float32)
        t4 = tp.cast(t1, tp.float32)
        t5 = tp.sum(t3, axes)
        t7 = tp.sub(t4, tp.broadcast(t2, mask))
        t8 = tp.mul(t3, t7)
        t9 = tp.sum(t8, axes)
        if persistent:
            t10, t12 = tp.broadcast(t5, mask), tp.broadcast(t9, mask)
            t11, t13 = tp.add(t3, t10), tp.add(t4, t12)
            fusion.add_output(tp.cast(t11, tp.float16))
            fusion.add_output(tp.cast(t13, tp.float16))
        else:
            fusion.add_output(tp.cast(t5, tp.float16))
            fusion.add_output(tp.cast(t9, tp.float16))
    fusion.assume("T0_3 % 2 == 0")  # the TEST's NVF_CHECK: C a multiple of the vector width
    if persistent:  # gridDim.y = ceil(N * H * W / 64) <= 65535: nvFuser checks the grid at launch
        fusion.assume("T0_0 * T0_1 * T0_2 <= 4194240")
    tp.group_reductions([t5, t9])
    num_channels, vector, tidy = 32, 2, 8
    tidx = min(32, num_channels // vector)
    bidx = ceil_div(num_channels, tidx * vector)
    bidy = ceil_div(SM_COUNT * 4, bidx)
    t0_cache = t0.cache_after()
    t1_cache = t1.cache_after()
    ref = t5
    ref.reorder({0: 1, 1: 2, 2: 3, 3: 0})
    ref.merge(2, 3).merge(1, 2)
    ref.split(1, tidy)
    if persistent:
        ref.split(1, 8)  # reduction work per thread
    else:
        ref.split(1, bidy, inner_split=False)
    ref.split(0, vector).split(0, tidx)
    ref.reorder({2: 5, 3: 2, 4: 3, 5: 4})
    ref.reorder({3: 4, 4: 3})
    tp.propagate_transforms(ref)
    t5_rf, t9_rf = t5.rfactor([-2], [t5, t9])
    # tv0->computeAt(tv5_rf, -2, BestEffort), tv1->computeAt(tv9_rf, -2, ...), tv3 and tv4 ->computeAt(.., -1):
    # each inlines every tensor computed from its producer that has a consumer (not T6, from T2 alone, nor the
    # outputs) at the position mapped to the reference's, as far as nvFuser's MaxPosCalculator lets it
    t0_cache.inline_at(-2)
    t1_cache.inline_at(-2)
    # persistent: tv3 and tv4 stop before BIDy (N * H * W, reduced by T5 / T9 and read again after the
    # totals: unmappable dims), a buffer of 8 x 2 per thread
    for t in (t3, t4):
        t.inline_at(2 if persistent else -1)
    for t in (t7, t8, *((t10, t11, t12, t13) if persistent else ())):
        t.inline_at(-1)
    for t in (t5_rf, t9_rf):
        t.inline_at(4)  # before its reduction axis
    for t in (t5, t9):
        t.inline_at(2)  # before rBIDy
    ref = t5_rf
    for axis, p in enumerate((P.BIDx, P.TIDx, P.BIDy, P.TIDy, P.Serial, P.Serial)):
        ref.axis(axis).parallelize(p)
    tp.parallelize_all_like(ref)
    t0_cache.axis(-1).parallelize(P.Vectorize)
    t1_cache.axis(-1).parallelize(P.Vectorize)
    if persistent:
        t5.axis(-1).parallelize(P.Group)
    return fusion


# -- cross-iteration grouped grid allreduces (ParallelType::Group) -----------------------------

def cross_iteration_grouped_grid_allreduce(splits, grouped_axes, grouped_exprs=False, welford=False):
    """Column allreduce T0 + broadcast(sum(T1, 0)) of [M, N]: rows [BIDy, TIDy{8}], columns
    [BIDx, TIDx, splits...]; the column axes `grouped_axes` of the sum on ParallelType::Group.
    `grouped_exprs`: two such allreduces (of T0 + 1 and T0 + 2), grouped by groupReductions;
    `welford`: the column's mean (a Welford's avg) in place of its sum."""
    with tp.Fusion("cross_iteration_grouped_grid_allreduce") as fusion:
        t0 = symbolic_tensor(2)
        fusion.add_input(t0)
        if grouped_exprs:
            t1 = tp.add(t0, 1.0)
            t2 = tp.sum(t1, [0])
            t4 = tp.add(t1, tp.broadcast(t2, [True, False]))
            t5 = tp.add(t0, 2.0)
            t6 = tp.sum(t5, [0])
            t8 = tp.add(t5, tp.broadcast(t6, [True, False]))
            fusion.add_output(tp.add(t4, t8))
        else:
            t1 = tp.set(t0)
            t2 = tp.welford(t1, [0]).avg if welford else tp.sum(t1, [0])
            fusion.add_output(tp.add(t0, tp.broadcast(t2, [True, False])))
    if grouped_exprs:
        tp.group_reductions([t2, t6])
    for factor in splits:
        t1.split(1, factor)
    t1.split(0, 8)
    tp.propagate_transforms(t1)
    t1.axis(0).parallelize(P.BIDy)
    t1.axis(1).parallelize(P.TIDy)
    t1.axis(2).parallelize(P.BIDx)
    t1.axis(3).parallelize(P.TIDx)
    tp.parallelize_all_like(t1)
    for axis in grouped_axes:
        t2.axis(axis).parallelize(P.Group)
    fusion.assume("T0_0 <= 524280")  # gridDim.y = ceil(M / 8) <= 65535: nvFuser checks the grid at launch
    return fusion


def cross_iteration_grouped_grid_allreduce_welford_shmoo(tidx, tidy, vect, persistent, bidx):
    """nvFuser's persistent outer grid Welford of batchnorm (CrossIterationGroupedGridAllreduceWelfordShmoo):
    T9 = T1 - avg + var_sum over [N, H, W] of an NHWC [N, H, W, C], the reference avg merged [r(NHW), C],
    r split [BIDy, Unswitch{1}, persistent, TIDy], C split [C / (vect tidx bidx), BIDx, TIDx, Vectorize],
    sorted iteration axes first and rfactored over the serial ones (sortAndRFactor), the partials' vector
    serial, the input cache's and output's vectorized, the final Welford's vector on Group, inlineMost.
    Contiguous, with C % vect == 0 and the grid's sizes assumed (nvFuser checks them at launch)."""
    with tp.Fusion("cross_iteration_grouped_grid_allreduce_welford_shmoo") as fusion:
        t0 = tp.make_contig_tensor(4)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        avg, var_sum, _ = tp.welford(t1, [2, 1, 0])
        t9 = tp.add(tp.sub(t1, tp.broadcast(avg, [True, True, True, False])),
                    tp.broadcast(var_sum, [True, True, True, False]))
        fusion.add_output(t9)
    t9.cache_before()
    fusion.assume(f"T0_3 % {vect} == 0")
    fusion.assume(f"T0_0 * T0_1 * T0_2 <= {65535 * tidy * persistent}")  # gridDim.y = ceil(NHW / (tidy persistent))
    fusion.assume("T0_3 <= 4096")
    ref = avg
    ref.merge(0).merge(0)  # [r(NHW), C]
    ref.split(0, tidy)
    ref.axis(1).parallelize(P.TIDy)
    ref.split(0, persistent)
    ref.split(0, 1)
    ref.axis(1).parallelize(P.Unswitch)
    ref.axis(0).parallelize(P.BIDy)  # [rBIDy, rUnswitch, r persistent, rTIDy, C]
    ref.split(4, vect)
    ref.axis(5).parallelize(P.Vectorize)
    ref.split(4, tidx)
    ref.axis(5).parallelize(P.TIDx)
    ref.split(4, bidx)
    ref.axis(5).parallelize(P.BIDx)  # [.., C / (vect tidx bidx), BIDx, TIDx, Vectorize]
    ref.reorder({4: 0, 5: 1, 6: 2, 0: 3, 1: 4, 2: 5, 3: 6})  # sortAndRFactor: the iteration axes first
    rf = ref.rfactor([4, 5])[0]  # the serial reduction axes (Unswitch, persistent); the siblings alike
    tp.propagate_transforms(rf)
    rf.axis(-1).parallelize(P.Serial)
    rf.axis(4).parallelize(P.Serial)
    tp.parallelize_all_like(rf)
    t1.axis(-1).parallelize(P.Vectorize)
    t9.axis(-1).parallelize(P.Vectorize)
    ref.axis(-1).parallelize(P.Group)
    rf.axis(4).parallelize(P.Unswitch)
    tp.inline_most(fusion)
    return fusion


def _nhwc_batch_norm_like(torch, t0):
    mean = t0.double().mean((0, 1, 2), keepdim=True)
    return [(t0.double() - mean + ((t0.double() - mean) ** 2).sum((0, 1, 2), keepdim=True)).float()]


def fused_reduction_batchnorm():
    """nvFuser's FusedReductionBatchnorm (persistent batchnorm, a grid Welford allreduce): x [N, C, H, W]
    half, weight and bias [C] half, running mean and var [C] float; the Welford over N, H, W; outputs the
    running stats' update and the normalized half x. The input cache scheduled as nvFuser schedules tv0:
    C split outer by gridDim.x and N by gridDim.y (NamedScalar::getParallelDim: here the extents GX and
    GY, passed at launch as nvFuser's LaunchParams(2, 2, ...) gives them), N again by 8 twice, H W merged
    and split [.., 1, 1, HW / 2, 2], reordered [GX, C / GX, GY, N', HW / 2, 8, 1, 8, 2, 1], propagated, the
    Welford rfactored over its five inner axes, everything inlined at 2, and [BIDx, _, BIDy, TIDz, TIDx].
    The sizes are bounded as nvFuser's launch checks them (a block of at most 4 x 128 threads)."""
    with tp.Fusion("fused_reduction_batchnorm") as fusion:
        t0 = symbolic_tensor(4, tp.float16)
        t1, t2 = symbolic_tensor(1, tp.float16), symbolic_tensor(1, tp.float16)
        t3, t4 = symbolic_tensor(1), symbolic_tensor(1)
        for t in (t0, t1, t2, t3, t4):
            fusion.add_input(t)
        fusion.symbol("GX")
        fusion.symbol("GY")
        t5, t6, t7 = tp.cast(t0, tp.float32), tp.cast(t1, tp.float32), tp.cast(t2, tp.float32)
        avg, var_sum, _ = tp.welford(t5, [0, 2, 3])
        channels = [True, False, True, True]
        t13 = tp.add(tp.mul(t3, 1.0), tp.mul(avg, 0.1))
        t17 = tp.add(tp.mul(t4, 1.0), tp.mul(tp.mul(var_sum, 0.5), 0.1))
        t22 = tp.rsqrt(tp.add(tp.mul(var_sum, 0.5), 0.0001))
        t24 = tp.mul(tp.sub(t5, tp.broadcast(avg, channels)), tp.broadcast(t22, channels))
        t28 = tp.add(tp.mul(t24, tp.broadcast(t6, channels)), tp.broadcast(t7, channels))
        t29 = tp.cast(t28, tp.float16)
        for t in (t13, t17, t29):
            fusion.add_output(t)
    for a in ("T0_0 <= 256", "T0_2 * T0_3 <= 256", "GX <= 65535", "GY <= 65535"):
        fusion.assume(a)
    x = [t.cache_after() for t in (t0, t1, t2, t3, t4)][0]
    for t in (t13, t17, t29):
        t.cache_before()
    x.split(1, "GX", inner_split=False)
    x.split(0, "GY", inner_split=False)
    x.split(1, 8, inner_split=False)
    x.split(2, 8, inner_split=False)
    x.merge(-2, -1)
    x.split(-1, 2)
    x.split(-2, 1, inner_split=False)
    x.split(-2, 1, inner_split=False)
    x.reorder({4: 0, 5: 1, 0: 2, 3: 3, 8: 4, 1: 5, 7: 6, 2: 7, 9: 8, 6: 9})
    tp.propagate_transforms(x)
    avg.rfactor([-5, -4, -3, -2, -1])
    tp.inline_all_at(t29, 2)
    for k, kind in ((0, P.BIDx), (2, P.BIDy), (3, P.TIDz), (4, P.TIDx)):
        t29.axis(k).parallelize(kind)
    tp.parallelize_all_like(t29)
    return fusion


def _batchnorm_reference(torch, x, w, b, rm, rv):
    xd = x.double()
    mean = xd.mean((0, 2, 3))
    var_sum = xd.var((0, 2, 3), unbiased=False) * (x.numel() // x.shape[1])
    inv = torch.rsqrt(var_sum * 0.5 + 0.0001)
    out = ((xd - mean[None, :, None, None]) * inv[None, :, None, None] * w.double()[None, :, None, None]
           + b.double()[None, :, None, None])
    return rm.double() + mean * 0.1, rv.double() + var_sum * 0.5 * 0.1, out


def _run_batchnorm(shapes, grid=(2, 2)):
    """A run at each [N, C, H, W] with GX, GY = `grid` (nvFuser's LaunchParams(2, 2, ...)) against float64."""
    def run(kernel, torch):
        for shape in shapes:
            x = torch.randn(*shape, device="cuda").half()
            w, b = torch.randn(shape[1], device="cuda").half(), torch.randn(shape[1], device="cuda").half()
            rm, rv = torch.randn(shape[1], device="cuda"), torch.randn(shape[1], device="cuda")
            outs = kernel.run(x, w, b, rm, rv, GX=grid[0], GY=grid[1])
            for got, want in zip(outs, _batchnorm_reference(torch, x, w, b, rm, rv)):
                torch.testing.assert_close(got.double(), want, rtol=2e-3, atol=2e-3 * max(1.0, want.abs().max().item()))
    return run


def cross_iteration_grouped_grid_allreduce_4():
    """The allreduce scheduled on the sum: [N/64 (BIDx), 32 (TIDx), 2 (Group), M/8 (BIDy),
    8 (TIDy)], inlined most (the grouped axis stops the inlining)."""
    with tp.Fusion("cross_iteration_grouped_grid_allreduce_4") as fusion:
        t0 = symbolic_tensor(2)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.sum(t1, [0])
        t4 = tp.add(t0, tp.broadcast(t2, [True, False]))
        fusion.add_output(t4)
    t2.reorder({0: 1})
    t2.split(0, 2).split(0, 32).split(-1, 8)
    tp.propagate_transforms(t2)
    t2.axis(2).parallelize(P.Group)
    tp.inline_most(fusion)
    t4.axis(0).parallelize(P.BIDx)
    t4.axis(1).parallelize(P.TIDx)
    for t in fusion.tensors:
        if not t.is_fusion_input:
            t.axis(-2).parallelize(P.BIDy)
            t.axis(-1).parallelize(P.TIDy)
    fusion.assume("T0_0 <= 524280")  # gridDim.y = ceil(M / 8) <= 65535: nvFuser checks the grid at launch
    return fusion


# -- TMA-fed reductions ------------------------------------------------------------------------

def tma_inner_reduction_manual(ndims, inner_size):
    """Inner sum of [64, inner] or [64, 8, inner]: the reduced axes merged, loaded into shared
    memory by a 1-D bulk copy (CpAsyncBulk), [I (BIDx), (R/smem (BIDx),) R/4096, unswitch,
    unroll{4}, TIDx{256}, 4]; the serial, unswitch, unroll and vector axes rfactored."""
    shape = [64, inner_size] if ndims == 2 else [64, 8, inner_size]
    reduced_elems = 1
    for extent in shape[1:]:
        reduced_elems *= extent
    smem_elems = SMEM_PER_BLOCK_OPTIN // 4
    with tp.Fusion("tma_inner_reduction_manual") as fusion:
        t0 = tp.make_contig_tensor(ndims)
        fusion.add_input(t0)
        t1 = tp.sum(t0, list(range(1, ndims)))
        fusion.add_output(t1)
    t0_smem = t0.cache_after(tp.LoadStoreOpType.CpAsyncBulk)
    t0_smem.set_memory_type(tp.MemoryType.Shared)
    redu = t1.cache_before()
    for i in range(redu.ndim - 2, -1, -1):
        if redu.axis(i).is_reduction and redu.axis(i + 1).is_reduction:
            redu.merge(i, i + 1)
    outer = P.BIDx
    offset = 1 if reduced_elems > smem_elems else 0
    if offset:
        redu.split(1, gcd(smem_elems, reduced_elems))
        redu.axis(1).parallelize(P.BIDx)
        outer = P.BIDy
    redu.axis(0).parallelize(outer)
    tp.propagate_transforms(redu)
    tp.parallelize_all_like(redu)
    tma_axis = 1 + offset
    t0_smem.axis(tma_axis).parallelize(P.Bulk)
    redu.split(tma_axis, 4).split(tma_axis, 256).split(tma_axis, 4).split(tma_axis, 1)
    redu.axis(5 + offset).parallelize(P.Serial)
    redu.axis(4 + offset).parallelize(P.TIDx)
    redu.axis(3 + offset).parallelize(P.Unroll)
    redu.axis(2 + offset).parallelize(P.Unswitch)
    redu.axis(tma_axis).parallelize(P.Serial)
    redu.rfactor(unparallel_reduction_axes(redu))
    tp.inline_most(fusion)
    # what the TEST's sizes give and nvFuser checks at launch: the reduced row a multiple of 16 bytes (the
    # TEST skips the others); unsplit, in shared memory beside the block reduction's scratch (the TEST's
    # unsplit rows are powers of two up to 32768 elements); split, a whole number of splits
    reduced = " * ".join(f"T0_{i}" for i in range(1, ndims))
    fusion.assume(f"{reduced} % 4 == 0")
    fusion.assume(f"{reduced} <= 32768" if not offset else f"{reduced} % {gcd(smem_elems, reduced_elems)} == 0")
    if offset:  # the rows on blockIdx.y, the splits on blockIdx.x
        fusion.assume("T0_0 <= 65535")
        fusion.assume(f"{reduced} <= {(2 ** 31 - 1) * gcd(smem_elems, reduced_elems)}")
    return fusion


def _run_inner_sum(ndims, inner):
    """A run of the inner sum at the TEST's shape and two others its assumptions admit (a split row:
    whole splits of 256, summed over BIDx by a grid reduction that T1's copy reads in the last block)."""
    split = (inner if ndims == 2 else 8 * inner) > SMEM_PER_BLOCK_OPTIN // 4
    if ndims == 2:
        shapes = [(64, inner), (3, 1280), (300, 9472)] if split else [(64, inner), (3, 8), (300, 5000)]
    else:
        shapes = [(64, 8, inner), (2, 2, 128), (7, 5, 512)] if split else [(64, 8, inner), (2, 3, 4), (7, 5, 1000)]

    def run(kernel, torch):
        for shape in shapes:
            t0 = torch.randn(*shape, device="cuda")
            (out,) = kernel.run(t0)
            torch.testing.assert_close(out, t0.sum(list(range(1, ndims))), rtol=1e-4, atol=1e-3)
    return run


def _run_outer_sum(shapes):
    """A run of the column sum at the TEST's shape and others its assumption admits (I a multiple of
    4, neither extent one of whole 128-element tiles: TMA's zero fill past the rows and columns)."""
    def run(kernel, torch):
        for shape in shapes:
            t0 = torch.randn(*shape, device="cuda")
            (out,) = kernel.run(t0)
            torch.testing.assert_close(out, t0.sum(0), rtol=1e-4, atol=1e-3)
    return run


def tma_outer_reduction_manual(outer_size):
    """Column sum of [R, I] read by 2-D TMA tiles of 128 x 128 into shared memory: rows
    [grdim (BIDy), R', 8 (unroll), 16 (TIDy)], columns [I/128 (BIDx), 32 (TIDx), 4]; rfactor of
    the serial and unrolled axes, the final sum over BIDy and TIDy with the 4 columns of a thread
    grouped (Vectorize turned into ParallelType::Group, iterGroupedGridReduce)."""
    bdimx, bdimy, iter_unroll, redu_unroll = 32, 16, 4, 8
    grdim = max(1, min(8, last_pow2(outer_size // 256)))
    tile_i, tile_r = bdimx * iter_unroll, bdimy * redu_unroll
    with tp.Fusion("tma_outer_reduction_manual") as fusion:
        t0 = tp.make_contig_tensor(2)
        fusion.add_input(t0)
        t1 = tp.sum(t0, [0])
        fusion.add_output(t1)
    # TMA's row stride I * 4 bytes, a multiple of 16 (the TEST skips other I): nvFuser checks the
    # descriptor at launch, as it checks there that T1's vectors of 4 divide I
    fusion.assume("T0_1 % 4 == 0")
    t0_smem = t0.cache_after(tp.LoadStoreOpType.TMA)
    t0_smem.set_memory_type(tp.MemoryType.Shared)
    redu = t1.cache_before()
    t0_smem.split(0, tile_r).split(2, tile_i).split(0, grdim, inner_split=False)
    tp.propagate_transforms(t0_smem)
    for axis, p in enumerate((P.BIDy, P.Serial, P.Bulk, P.BIDx, P.Bulk)):
        t0_smem.axis(axis).parallelize(p)
    redu.split(4, iter_unroll).split(2, bdimy)
    for axis, p in enumerate((P.BIDy, P.Serial, P.Unroll, P.TIDy, P.BIDx, P.TIDx, P.Vectorize)):
        redu.axis(axis).parallelize(p)
    ref = redu.rfactor(unparallel_reduction_axes(redu))
    # TransformPropagator from the rfactor over the non-TMA tensors: the output copy T1, already
    # [I/128, 128], takes the split of the 128 columns into [32, 4]
    t1.split(1, iter_unroll)
    non_tma = [t for t in fusion.tensors if t is not t0_smem and not t.is_fusion_input]
    tp.parallelize_all_like(ref, [p for p in P if p not in (P.Unroll, P.Vectorize)], non_tma)
    tp.parallelize_all_like(ref, [P.Vectorize, P.Unroll], [t1])
    for axis in ref.get_loop_domain():
        if axis.parallel_type in (P.Unroll, P.Vectorize):
            axis.parallelize(P.Serial)
    redu.axis(-1).parallelize(P.Group)
    tp.inline_most(fusion)
    return fusion




def _run_allreduce(shapes, reference, inputs=1, positive=False):
    """A run at each of `shapes` (one shape per input) against torch: reference(torch, *inputs) gives the
    outputs (`positive`: inputs in [0.5, 1.5), for a division by a sum). The allreduce's kernel is launched
    cooperatively (every block resident at once)."""
    def run(kernel, torch):
        for shape in shapes:
            xs = [torch.rand(*s, device="cuda") + 0.5 if positive else torch.randn(*s, device="cuda")
                  for s in (shape if inputs > 1 else [shape])]
            outs = kernel.run(*xs)
            for got, want in zip(outs, reference(torch, *xs)):
                torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-3)
    return run


def _batch_norm_backward(torch, inp, grad_output, weight, save_mean, save_invstd):
    """The input gradient of a training batchnorm of [N, C, H, W] (PersistentBNBackwardAllreduce's ref)."""
    def channel(t):
        return t[None, :, None, None]
    norm = 1.0 / (inp.shape[0] * inp.shape[2] * inp.shape[3])
    centered = inp - channel(save_mean)
    grad_mean = grad_output.sum((0, 2, 3)) * norm
    proj_scale = (grad_output * centered).sum((0, 2, 3)) * norm * save_invstd * save_invstd
    grad_scale = save_invstd * weight
    return [(grad_output - centered * channel(proj_scale) - channel(grad_mean)) * channel(grad_scale)]


def _run_batch_norm_like(persistent):
    """A run of channels_last_batch_norm_like at the TEST's shape [64, 14, 14, 32] and three others (C even: the
    case's assumption; C = 66 leaves a partial block of channels) against torch in float64: the two channel sums
    (`persistent`: each added back to its input), rounded to half as the outputs are."""
    def run(kernel, torch):
        for shape in ((64, 14, 14, 32), (3, 5, 7, 2), (2, 3, 4, 66), (8, 7, 7, 128)):
            t0, t1 = (torch.randn(*shape, device="cuda", dtype=torch.float16) for _ in range(2))
            t2 = torch.randn(shape[-1], device="cuda")
            x0, x1 = t0.double(), t1.double()
            sums = [x0.sum((0, 1, 2)), (x0 * (x1 - t2.double())).sum((0, 1, 2))]
            wants = [x0 + sums[0], x1 + sums[1]] if persistent else sums
            for got, want in zip(kernel.run(t0, t1, t2), wants):
                torch.testing.assert_close(got.double(), want.half().double(), rtol=1e-2, atol=1e-2)
    return run


def _plus_total(torch, t0):
    return [t0 + t0.sum()]


def _columns_plus_totals(torch, t0):
    return [t0 + t0.sum(0, keepdim=True)]


def _rows_plus_totals(torch, t0):
    return [t0 + t0.sum(1, keepdim=True)]


CASES = [
    Case("ReductionTest.GridAllreduce1", grid_allreduce_1, VALID,
         run=_run_allreduce([(999,), (1,), (4097,)], _plus_total)),
    Case("ReductionTest.GridAllreduce2", grid_allreduce_2, VALID, run=_run_allreduce([(999,), (32,), (1000,)], _plus_total)),
    Case("ReductionTest.GridAllreduce3", grid_allreduce_3, VALID,
         run=_run_allreduce([(10, 999), (1, 128), (3, 1000)], _rows_plus_totals)),
    Case("ReductionTest.GridAllreduceWelford1", grid_allreduce_welford_1, VALID,
         run=_run_allreduce([(999,), (1,), (4097,)],
                            lambda torch, t0: [t0 + t0.mean() + t0.var(correction=0) * t0.numel()])),
    Case("ReductionTest.GridAllreduceWelford2", grid_allreduce_welford_2, VALID,
         run=_run_allreduce([(100, 5000), (3, 1), (7, 129)], lambda torch, t0: [t0 + t0.mean(1, keepdim=True)])),
    Case("ReductionTest.GridAllreduce4", grid_allreduce_4, VALID,
         run=_run_allreduce([(999,), (1,), (2000,)], lambda torch, t0: [t0 + (t0.sum() + 1.0)])),
    Case("ReductionTest.GridAllreduce5", grid_allreduce_5, VALID,
         run=_run_allreduce([[(2, 999), (3, 9)], [(2, 1), (1, 1)], [(2, 1000), (5, 20)]],
                            lambda torch, t0, t5: [t0 + (t0.sum(1, keepdim=True) + 1.0), t5], inputs=2)),
    Case("ReductionTest.GridAllreduce6", grid_allreduce_6, VALID,
         run=_run_allreduce([(99, 200), (8, 4), (17, 300)], lambda torch, t0: [t0 + t0.sum(0, keepdim=True)])),
    Case("ReductionTest.GroupedReduction1", grouped_reduction_1, VALID),
    Case("ReductionTest.GroupedReduction2", grouped_reduction_2, VALID),
    Case("ReductionTest.GroupedReduction3", grouped_reduction_3, VALID),
    Case("ReductionTest.GroupedReduction4", grouped_reduction_4, THROWS, raises="are not the same iteration"),
    Case("ReductionTest.GroupedReduction5", grouped_reduction_5, THROWS, raises="are transformed differently"),
    Case("ReductionTest.GroupedReduction6", grouped_reduction_6, VALID),
    Case("ReductionTest.GroupedReduction7", grouped_reduction_7, THROWS, raises="another reduction of the group"),
    Case("ReductionTest.GroupedReductionRfactor1", grouped_reduction_rfactor_1, VALID,
         run=_run_allreduce([(999,), (1,), (12345,), (1 << 20,)], lambda torch, t0: [t0.sum() + t0.sum()])),
    Case("ReductionTest.GroupedReductionRfactor2", grouped_reduction_rfactor_2, VALID,
         run=_run_allreduce([(999,), (1,), (12345,), (1 << 20,)], lambda torch, t0: [t0.sum() + t0.sum()])),
    Case("ReductionTest.GroupedReductionAfterComputeAt", grouped_reduction_after_compute_at, VALID,
         run=_run_allreduce([(10, 999), (1, 1), (3, 1024)], lambda torch, t0: [2.0 * (t0 + 1.0).sum(1)])),
    Case("ReductionTest.GroupAllreduce1", group_allreduce_1, VALID,
         run=_run_allreduce([(999,), (1,), (1000,), (4099,)], lambda torch, t0: [t0 + t0.sum() + t0.sum()])),
    Case("ReductionTest.GroupAllreduce2", group_allreduce_2, VALID,
         run=_run_allreduce([(10, 999), (1, 1), (3, 1100)],
                            lambda torch, t0: [t0 + t0.sum(1, keepdim=True) + t0.double().sum(1, keepdim=True).float()])),
    Case("ReductionTest.GroupAllreduce3", group_allreduce_3, VALID,
         run=_run_allreduce([(999,), (1,), (1000,)],
                            lambda torch, t0: [t0 / t0.sum(), t0 / t0.max(), t0 - t0.min()], positive=True)),
    Case("ReductionTest.GroupAllreduce4", group_allreduce_4, VALID,
         run=_run_allreduce([(999,), (1,), (1000,)],
                            lambda torch, t0: [t0 + sum((t0 + float(i)).sum() / t0.shape[0] for i in range(8))])),
    Case("ReductionTest.PersistentBNBackwardAllreduce", persistent_bn_backward_allreduce, VALID,
         run=_run_allreduce([[(64, 1024, 14, 14), (64, 1024, 14, 14), (1024,), (1024,), (1024,)],
                             [(9, 5, 2, 6), (9, 5, 2, 6), (5,), (5,), (5,)],
                             [(17, 12, 4, 4), (17, 12, 4, 4), (12,), (12,), (12,)]],
                            _batch_norm_backward, inputs=5)),
    Case("ReductionTest.GroupedReductionReEntrant1", grouped_reduction_re_entrant_1, VALID),
    Case("ReductionTest.GroupedReductionChannelsLastBatchNormLike", lambda: channels_last_batch_norm_like(False),
         VALID, run=_run_batch_norm_like(False)),
    Case("ReductionTest.GroupedReductionPersistentChannelsLastBatchNormLike",
         lambda: channels_last_batch_norm_like(True), VALID, run=_run_batch_norm_like(True)),
    Case("ReductionTest.CrossIterationGroupedGridAllreduce1",
         lambda: cross_iteration_grouped_grid_allreduce([2, 32], [4]), VALID,
         run=_run_allreduce([(99, 101), (1, 1), (64, 128)], _columns_plus_totals)),
    Case("ReductionTest.CrossIterationGroupedGridAllreduce2",
         lambda: cross_iteration_grouped_grid_allreduce([2, 3, 16], [4, 5]), VALID,
         run=_run_allreduce([(99, 129), (1, 1), (17, 200)], _columns_plus_totals)),
    Case("ReductionTest.CrossIterationGroupedGridAllreduce3",
         lambda: cross_iteration_grouped_grid_allreduce([2, 32], [4], grouped_exprs=True), VALID,
         run=_run_allreduce([(99, 101), (1, 1), (64, 128)],
                            lambda torch, t0: [t0 + 1 + (t0 + 1).sum(0, keepdim=True)
                                               + t0 + 2 + (t0 + 2).sum(0, keepdim=True)])),
    Case("ReductionTest.CrossIterationGroupedGridAllreduceWelford1",
         lambda: cross_iteration_grouped_grid_allreduce([2, 32], [4], welford=True), VALID,
         run=_run_allreduce([(99, 101), (1, 1), (64, 128)], lambda torch, t0: [t0 + t0.mean(0, keepdim=True)])),
    Case("ReductionTest.CrossIterationGroupedGridAllreduceWelford2",
         lambda: cross_iteration_grouped_grid_allreduce([2, 3, 16], [4, 5], welford=True), VALID,
         run=_run_allreduce([(99, 129), (1, 1), (17, 200)], lambda torch, t0: [t0 + t0.mean(0, keepdim=True)])),
    *[Case(f"ReductionTest.CrossIterationGroupedGridAllreduceWelfordShmoo/{tidx}_{tidy}_{vect}_{persistent}_{bidx}",
           lambda p=(tidx, tidy, vect, persistent, bidx): cross_iteration_grouped_grid_allreduce_welford_shmoo(*p),
           VALID, run=_run_allreduce([(256, 7, 7, 512), (8, 3, 3, 64), (128, 14, 14, 1024)], _nhwc_batch_norm_like))
      for tidx, tidy, vect, persistent, bidx in ((8, 32, 2, 32, 4), (16, 16, 4, 32, 1))],
    Case("ReductionTest.FusedReductionBatchnorm", fused_reduction_batchnorm, VALID,
         run=_run_batchnorm([(256, 2048, 14, 14), (4, 4, 3, 3), (130, 6, 5, 7)])),
    Case("ReductionTest.CrossIterationGroupedGridAllreduce4", cross_iteration_grouped_grid_allreduce_4, VALID,
         run=_run_allreduce([(99, 101), (1, 1), (64, 128)], _columns_plus_totals)),
    *[Case(f"TmaInnerReductionManualTest.Basic/ndim_{ndims}_inner_size_{inner}",
           lambda ndims=ndims, inner=inner: tma_inner_reduction_manual(ndims, inner), VALID,
           run=_run_inner_sum(ndims, inner))
      for ndims, inner in ((2, 4), (2, 1024), (2, 1048576), (3, 1024), (3, 65536))],
    *[Case(f"TmaOuterReductionManualTest.Basic/outer_{outer}_iter_{it}",
           lambda outer=outer: tma_outer_reduction_manual(outer), VALID,
           run=_run_outer_sum([(outer, it), (1, 4), (300, 1000), (4099, 516)]))
      for outer, it in ((256, 256), (4096, 1024), (65536, 16384))],
]


@pytest.mark.parametrize("case", params(CASES))
def test_verdict(case):
    check(case)
