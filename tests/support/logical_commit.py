"""Schedules using TensorView.commit_leaf_to_logical (nvFuser's commitLeafToLogical, an implicit
transpose), shared by the model tests (tests/model/test_commit_leaf_to_logical.py, on the CPU
simulator) and the GPU run (tests/gpu/test_commit_leaf_to_logical.py)."""

from __future__ import annotations

import tileproof as tp

P = tp.ParallelType


def transposed_copy(block=32):
    """y[N, M] = x[M, N]: a copy whose loop [N, M] is committed as its logical domain (nvFuser's
    permute: set, reorder, commitLeafToLogical), then scheduled 2D over blocks and threads."""
    with tp.Fusion("commit_transpose") as fusion:
        x = tp.make_tensor(["M", "N"], name="x")
        fusion.add_input(x)
        y = tp.set(x)
        y.reorder({0: 1})
        y.commit_leaf_to_logical()
        fusion.add_output(y)
    y.split(1, block)  # [N, Mo, Mi]
    y.axis(0).parallelize(P.BIDx)
    y.axis(2).parallelize(P.TIDx)
    return fusion, x, y


def committed_sum():
    """t1[N, M] = sum over K of t0[M, K, N]: the reduction's loop [N, M, rK] committed."""
    with tp.Fusion("commit_sum") as fusion:
        t0 = tp.make_tensor(["M", "K", "N"], name="t0")
        fusion.add_input(t0)
        t1 = tp.sum(t0, 1)
        t1.reorder({2: 0})  # [M, rK, N] -> [N, M, rK]
        t1.commit_leaf_to_logical()
        fusion.add_output(t1)
    t1.split(1, 32)  # [N, Mo, Mi, rK]
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.TIDx)
    return fusion


def mma_nn_tile(macro=tp.MmaMacro.Ampere_16_8_16):
    """An mma.sync tile of the NN layout (A [1, K, M], B [N, K, 1]), operands global -> registers
    as tests/nvfuser/test_nvfuser_mma.py's MmaTest: the MmaOp's [N, rK, M] reordered to
    [M, N, rK] and committed, so the output is [M, N]."""
    m, n, k = macro.m, macro.n, macro.k
    with tp.Fusion("commit_mma_nn") as fusion:
        a = tp.make_tensor([1, k, m], dtype=tp.float16)
        b = tp.make_tensor([n, k, 1], dtype=tp.float16)
        fusion.add_input(a)
        fusion.add_input(b)
        tv0 = tp.set(a)
        tv1 = tp.set(b)
        tv2 = tp.fused_multiply_sum(tv0, tv1, [1])
        tv2.reorder({-1: -3})
        tv2.commit_leaf_to_logical()
        fusion.add_output(tv2)
    tv2.definition.set_macro(macro)
    tv2c = tv2.cache_before()
    tv0.reorder({1: 2})  # [1, K, M] -> [1, M, K]
    tv1.reorder({2: 0})  # [N, K, 1] -> [1, N, K]
    tp.schedule_mma_fragment(tv0, macro, tp.MmaOperand.A)
    tp.schedule_mma_fragment(tv1, macro, tp.MmaOperand.B)
    tv2c.set_allocation_domain(tp.mma_output_allocation(tv2c), True)
    for i in (-3, -2, -1):
        tv2c.axis(i).parallelize(P.Mma)
    tv2.set_loop_domain(tp.mma_output_allocation(tv2))
    return fusion
