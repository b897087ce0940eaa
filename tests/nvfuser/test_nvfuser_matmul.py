"""nvFuser tests/cpp/test_matmul.cpp, translated (tests/support/nvfuser.py says how): its two
hand-scheduled Hopper matmuls, HopperMatmulTest.HSH_NT_128BSwizzle_Basic and _BroadcastOp
(NT layout: A [K, M] and B [K, N] both MN-major, TMA tiles with the 128-byte swizzle, 4 stages 3
ahead, two 64 x 256 wgmma warpgroups per 128 x 256 block tile, clusters of 2). The file's other
TESTs run nvFuser's automatic matmul scheduler (SchedulerEntry Matmul with MatmulParams) and are
not translated. Imports tileproof and the scaffolding only.
"""

import pytest

import tileproof as tp
from support.nvfuser import VALID, Case, check, params

P = tp.ParallelType
MACRO = tp.MmaMacro.Hopper_64_256_16
SWIZZLE = tp.MmaInputSmemSwizzle.B128
STAGES, PREFETCH = 4, 3
CTA_M, CTA_N = 2 * MACRO.m, MACRO.n


def schedule_tma_load_for_mma(tv):
    """TensorView::applyMmaSwizzleForTMALoad (MmaSwizzler::scheduleTMALoadForMma) on the MN-major
    tile [.., K, MN]: tileproof's apply_mma_swizzle_for_tma_load (MN split into 64-element spans,
    a loop of boxes [K, 64], each swizzled), the boxes' axes Bulk (parallelizeAsBulkSkippingFirstIDs:
    not the loop of boxes), allocated as the loop."""
    tv.apply_mma_swizzle_for_tma_load(SWIZZLE)
    for i in tv.get_loop_domain()[-5:]:  # [K / 8, 8 / (128 / S), 128 / S, S / 16, 16 bytes]
        i.parallelize(P.Bulk)
    tv.set_allocation_domain(tv.get_loop_domain(), True)


def hsh_nt_128b_swizzle(broadcast_op: bool, warp_specialized: bool):
    """HSH_NT_128BSwizzle_Basic (operands declared [K, M, 1] and [K, 1, N], warp-specialized on
    TIDy) and HSH_NT_128BSwizzle_BroadcastOp (operands [K, M] and [K, N] through broadcast ops,
    Pipelined, the TMA tiles' first axis unrolled). M, N, K symbolic; the C++ runs 2048 x 2048 x
    8192, which the assumptions admit."""
    with tp.Fusion("hsh_nt_128b_swizzle") as fusion:
        if broadcast_op:
            a = tp.make_tensor(["K", "M"], contiguity=True, dtype=tp.float16)
            b = tp.make_tensor(["K", "N"], contiguity=True, dtype=tp.float16)
            fusion.add_input(a)
            fusion.add_input(b)
            a3 = tp.broadcast(a, [False, False, True])
            b3 = tp.broadcast(b, [False, True, False])
        else:
            a3 = tp.make_tensor(["K", "M", 1], contiguity=True, dtype=tp.float16)
            b3 = tp.make_tensor(["K", 1, "N"], contiguity=True, dtype=tp.float16)
            fusion.add_input(a3)
            fusion.add_input(b3)
        tv2 = tp.fused_multiply_sum(a3, b3, [0])
        tv2.reorder({-3: -1})  # [K, M, N] -> [M, N, K]
        tv2.commit_leaf_to_logical()  # the cast reads [M, N] either way; the MmaOp's logical domain is [M, N, rK]
        tv3 = tp.cast(tv2, tp.float16)
        fusion.add_output(tv3)
    for size, multiple in (("M", CTA_M), ("N", 2 * CTA_N), ("K", MACRO.k)):  # N: whole clusters of 2 N tiles
        fusion.assume(f"{size} % {multiple} == 0")
    fusion.assume(f"M <= {65535 * CTA_M}")  # M's tiles on blockIdx.y
    fusion.cluster_dims = (2, 1, 1)
    tv2.definition.set_macro(MACRO)
    tv0c = a3.cache_after(tp.LoadStoreOpType.TMA)
    tv0c.set_memory_type(tp.MemoryType.Shared)
    tv1c = b3.cache_after(tp.LoadStoreOpType.TMA)
    tv1c.set_memory_type(tp.MemoryType.Shared)
    if broadcast_op:
        a3.set_memory_type(tp.MemoryType.Global)
        b3.set_memory_type(tp.MemoryType.Global)
    tv3c = tv3.cache_before()
    tv3c.set_memory_type(tp.MemoryType.Local)
    # block tiles [Mo, No, Ko, Mi, Ni, Ki]
    tv2.split(-3, CTA_M).split(-2, CTA_N).split(-1, MACRO.k)
    tv2.reorder({-5: -3, -3: -2})
    tv2.axis(0).parallelize(P.BIDy)
    tv2.axis(1).parallelize(P.BIDx)
    tp.propagate_transforms(tv2)
    tp.parallelize_all_like(tv2)
    tv0c.reorder({-3: -1})  # [.., Mi, Ni, Ki] -> [.., Ni, Ki, Mi]
    schedule_tma_load_for_mma(tv0c)  # [.., Ni, Mi / 64 (a loop of boxes), <K16 x 64 M, swizzled>]
    tv1c.reorder({-1: -2})  # [.., Mi, Ni, Ki] -> [.., Mi, Ki, Ni]
    schedule_tma_load_for_mma(tv1c)
    if broadcast_op:
        tv0c.axis(-6).parallelize(P.Unroll)
        tv1c.axis(-6).parallelize(P.Unroll)
        # global broadcasts of inputs: views of A and B, no copy (nvFuser's tensor producer aliases,
        # model/producer_aliases.py), whose readers' TMA reads A's and B's memory
        for t in (a3, b3):  # their definition is no TMA: no Bulk axis
            for i in t.get_loop_domain():
                if i.parallel_type is P.Bulk:
                    i.parallelize(P.Serial)
    # the warpgroups: [Mo, No, Ko, Mio (TIDy), Mii, Ni, Ki]
    tv2.split(-3, MACRO.m).split(-2, MACRO.n)
    tv2.reorder({-4: -3})
    tv2.merge(-5)
    tv2.axis(-4).parallelize(P.TIDy)
    for t in (tv3c, tv3):  # BoundedDirectionalTransformPropagator::forward(tv2, -1, {tv3}), parallel types too
        t.split(-2, MACRO.m).split(-1, MACRO.n)
        t.reorder({-3: -2})
        t.merge(-4)
        t.axis(-3).parallelize(P.TIDy)
    tv2.set_allocation_domain(tp.mma_output_allocation(tv2), True)
    for i in (-3, -2, -1):
        tv2.axis(i).parallelize(P.Mma)
    for t in (tv3c, tv3):
        tp.schedule_mma_fragment(t, MACRO, "C", dtype=tp.float16)
    tv3.split(-1, 2).axis(-1).parallelize(P.Vectorize)  # nvFuser's innermost fragment axis: N2, a column pair
    tp.inline_most(fusion)  # BroadcastOp: all but the inputs and broadcasts; tileproof's takes no tensor list
    strategy = tp.WarpSpecialized(P.TIDy) if warp_specialized else tp.Pipelined()
    tv0c.circular_buffer(STAGES, PREFETCH, strategy)
    tv1c.circular_buffer(STAGES, PREFETCH, strategy)
    return fusion


def run_hsh_nt(broadcast_op: bool):
    """The check: the output is A^T B over K (torch, float32, rounded to half) at three sizes
    (M, N, K), the operands [K, M, 1] and [K, 1, N] (Basic) or [K, M] and [K, N] (BroadcastOp)."""
    def run(kernel, torch):
        for seed, (m, n, k) in enumerate(((128, 512, 64), (384, 1024, 512), (256, 1536, 2048))):
            torch.manual_seed(seed)
            a = torch.randn(k, m, device="cuda", dtype=torch.float16)
            b = torch.randn(k, n, device="cuda", dtype=torch.float16)
            (out,) = kernel.run(a, b) if broadcast_op else kernel.run(a.unsqueeze(2), b.unsqueeze(1))
            want = (a.float().t() @ b.float()).half()
            torch.testing.assert_close(out, want, rtol=1e-2, atol=1e-2)
    return run


CASES = [
    Case("HopperMatmulTest.HSH_NT_128BSwizzle_Basic", lambda: hsh_nt_128b_swizzle(False, True), VALID,
         run=run_hsh_nt(False)),
    Case("HopperMatmulTest.HSH_NT_128BSwizzle_BroadcastOp", lambda: hsh_nt_128b_swizzle(True, False), VALID,
         run=run_hsh_nt(True)),
]


@pytest.mark.parametrize("case", params(CASES))
def test_verdict(case):
    check(case)
