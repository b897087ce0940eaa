"""cp.async copies the hardware cannot make: a size its cache does not take (CPASYNC-SIZE),
misaligned addresses (CPASYNC-ALIGN), a copy that is not global -> shared (LOWERING-SUPPORTED).

examples/valid/cp_async.py holds the working forms.
"""

import tileproof as tp

P = tp.ParallelType
CP_ASYNC = tp.LoadStoreOpType.CpAsync


def copy_through_shared(name, shape, *, dtype=tp.float32, cache_op=tp.CacheOp.Unspecified):
    with tp.Fusion(name) as fusion:
        t0 = tp.make_tensor(shape, contiguity=True, dtype=dtype)
        fusion.add_input(t0)
        t1 = tp.set(t0, op=CP_ASYNC, cache_op=cache_op)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    return fusion, t1, t2


@tp.schedule(expect=tp.rejected("CPASYNC-SIZE", messages=[
    "moves 2 x 4 = 8 bytes per copy with cp.async.cg.shared.global (tp.CacheOp.Global)"]))
def cg_eight_bytes():
    """The issue's example: cp.async.cg with two fp32 per copy, 8 bytes; .cg copies exactly 16
    (ptxas rejects the instruction). Counterexample: elements 2, bytes 8, cache cg."""
    fusion, t1, t2 = copy_through_shared("cg_eight_bytes", [64, 32], cache_op=tp.CacheOp.Global)
    for t in (t1, t2):
        t.split(1, 2)
        t.axis(1).parallelize(P.TIDx)
    t1.axis(2).parallelize(P.Vectorize)
    return fusion


@tp.schedule(expect=tp.rejected("CPASYNC-SIZE", messages=["moves 1 x 2 = 2 bytes per copy with cp.async.ca"]))
def bf16_one_element_per_copy():
    """One bf16 per copy is 2 bytes; cp.async copies at least 4 (vectorize two or more)."""
    fusion, t1, t2 = copy_through_shared("bf16_one_element_per_copy", [64, 32], dtype=tp.bfloat16)
    for t in (t1, t2):
        t.axis(1).parallelize(P.TIDx)
    return fusion


@tp.schedule(expect=tp.rejected("CPASYNC-ALIGN", messages=[
    "writes a misaligned shared address: the shared address 20 (from the start of shared memory) is 4 "
    "bytes past a multiple of 16"]))
def rows_padded_by_one_float():
    """Shared rows of 4 fp32 padded to 5 (a common bank-conflict fix for column reads): the
    16-byte copy of row 1 lands at byte 20. Counterexample: threadIdx.x = 1."""
    fusion, t1, t2 = copy_through_shared("rows_padded_by_one_float", [64, 4])
    loop = t1.get_loop_domain()
    t1.split(1, 5)  # the allocation pads each row to 5 elements
    t1.set_allocation_domain(t1.get_loop_domain())
    t1.set_loop_domain(loop)
    for t in (t1, t2):
        t.axis(0).parallelize(P.TIDx)
    t1.axis(1).parallelize(P.Vectorize)
    return fusion


@tp.schedule(expect=tp.rejected("CPASYNC-ALIGN", "SPLIT-DIVISIBILITY", messages=[
    "T1's 16-byte cp.async reads a misaligned global address when M = 2, K = 1"]))
def row_stride_not_a_multiple_of_the_vector():
    """[M, K] fp32 copied four per copy along K without an assumption on K: with K = 1 the row stride
    is 4 bytes and row 1 starts misaligned (and the vectorized split of K leaves holes). The hint
    proposes K % 4 == 0, verified."""
    fusion, t1, t2 = copy_through_shared("row_stride_not_a_multiple_of_the_vector", ["M", "K"])
    for t in (t1, t2):
        t.split(1, 4).split(1, 8)  # [M, Ko, 8, 4]: a K loop of 32-column tiles
        t.axis(0).parallelize(P.BIDx)
        t.axis(2).parallelize(P.TIDx)
    t1.axis(3).parallelize(P.Vectorize)
    t1.inline_at(2)
    return fusion


@tp.schedule(expect=tp.rejected("LOWERING-SUPPORTED", messages=[
    "`T1 = CpAsync(T0)` copies T0 (global memory) into T1 (local memory); cp.async copies global memory into "
    "shared memory"]))
def cp_async_into_registers():
    """cp.async writes shared memory only: a copy into a register tensor has no cp.async."""
    fusion, t1, t2 = copy_through_shared("cp_async_into_registers", [8, 32])
    t1.set_memory_type(tp.MemoryType.Local)
    for t in (t1, t2):
        t.axis(1).parallelize(P.TIDx)
    return fusion
