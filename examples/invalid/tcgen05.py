"""Blackwell tcgen05.mma schedules the tensor cores would compute wrong or cannot issue: the macro
on a target without it (MMA-TARGET), operand tiles the descriptor cannot name
(TCGEN05-SMEM-LAYOUT), accumulators whose tensor-memory layout is not the one the MMA writes
(TCGEN05-ACCUMULATOR), accumulators in registers (MMA-WARP-COLLECTIVE), an operand in registers
(MMA-OPERAND-LAYOUT) and circular-buffered operands, which tileproof does not pipeline yet
(LOWERING-SUPPORTED).

Each is examples/valid/tcgen05.py's tcgen05_tile with one thing changed: T0 = A [128, 1, 16] and
T1 = B [1, N, 16] (global), T2 the accumulators (tensor memory), T3 their TMemLoad into registers,
T4 the output, T5 and T6 A's and B's shared tiles (TMA, the 32-byte swizzle).
"""

import tileproof as tp

P = tp.ParallelType
SW = tp.MmaInputSmemSwizzle


def _tile(n=64, swizzle=SW.B32, k=16):
    """tcgen05_tile: A and B loaded by TMA in `swizzle`'s boxes (None: plain rows), one
    Blackwell1CTA_128_<n>_16 tcgen05.mma per 16 of K into tensor memory (M on the lanes), read
    back a row per thread and stored. Returns (fusion, sa, sb, d, r, out)."""
    with tp.Fusion("tcgen05_tile") as fusion:
        a = tp.make_contig_concrete_tensor([128, 1, k], dtype=tp.float16)
        b = tp.make_contig_concrete_tensor([1, n, k], dtype=tp.float16)
        fusion.add_input(a)
        fusion.add_input(b)
        d = tp.fused_multiply_sum(a, b, [-1])
        r = tp.set(d, op=tp.LoadStoreOpType.TMemLoad)
        out = tp.set(r)
        fusion.add_output(out)
    d.definition.set_macro(getattr(tp.MmaMacro, f"Blackwell1CTA_128_{n}_16"))
    sa = a.cache_after(tp.LoadStoreOpType.TMA)
    sb = b.cache_after(tp.LoadStoreOpType.TMA)
    sa.reorder({1: 0})
    for t in (sa, sb):
        t.set_memory_type(tp.MemoryType.Shared)
        if swizzle is not None:
            t.apply_mma_swizzle_for_tma_load(swizzle)
        for i in t.get_loop_domain()[1:]:
            i.parallelize(P.Bulk)
        t.set_allocation_domain(t.get_loop_domain(), True)
    if k > 16:
        d.split(2, 16).reorder({2: 0})  # [rKo, M, N, rK16]
    for i in d.get_loop_domain()[-3:]:
        i.parallelize(P.Mma)
    d.set_memory_type(tp.MemoryType.Tensor)
    d.set_tmem_dim_sep_pos(len(d.get_loop_domain()) - 2)  # M on the lanes
    for t in (r, out):
        t.axis(0).parallelize(P.TIDx)
    return fusion, sa, sb, d, r, out


@tp.schedule(target="sm_90a", expect=tp.rejected("MMA-TARGET", "TARGET-TMEM", warnings=("GLOBAL-COALESCING",), messages=[
    "MmaMacro.Blackwell1CTA_128_64_16 is a tcgen05.mma, which exists on sm_100a only", "sm_90a has none"]))
def tcgen05_on_hopper():
    """tcgen05_tile verified for sm_90a: tcgen05.mma and tensor memory exist from Blackwell on
    (sm_100a); ptxas refuses both for sm_90a, whose tensor cores take wgmma (Hopper_64_N_16, the
    accumulators in registers) instead."""
    return _tile()[0]


@tp.schedule(target="sm_100a", expect=tp.rejected("TCGEN05-SMEM-LAYOUT", warnings=("GLOBAL-COALESCING",), messages=[
    "T2's tcgen05.mma reads A[1, 0] of T5 at byte 16 of its tile, where the schedule stores byte 32",
    "T2's tcgen05.mma reads B[1, 0] of T6 at byte 16 of its tile"]))
def operands_in_plain_rows():
    """A's and B's tiles as plain K-major rows of 32 bytes: TMA boxes without a swizzle, allocated
    as loaded. An unswizzled descriptor names 8 x 16-byte core matrices, whose row r lies 16 bytes
    after row r - 1, so the MMA reads A[1, 0] at byte 16, where the schedule put A[0, 8]."""
    return _tile(swizzle=None)[0]


@tp.schedule(target="sm_100a", expect=tp.rejected("TCGEN05-ACCUMULATOR", messages=[
    "T2's tcgen05.mma writes D[0, 1] to lane 0, column 1; T2's allocation puts it at lane 1, column 0"]))
def accumulator_n_on_the_lanes():
    """A 128 x 128 tile whose accumulators are allocated [N, M]: N on the lanes, M on the
    columns, and read back a column per thread (thread n reads lane n: a valid tcgen05.ld). But
    tcgen05.mma M = 128 writes D[m, n] to lane m, column n: the load would read D transposed."""
    fusion, sa, sb, d, r, out = _tile(n=128)
    d.set_allocation_domain([d.axis(1), d.axis(0), d.axis(2)], True)
    for t in (r, out):
        t.axis(0).parallelize(P.Serial)
        t.axis(1).parallelize(P.TIDx)
    return fusion


@tp.schedule(target="sm_100a", expect=tp.rejected("MMA-WARP-COLLECTIVE", warnings=("GLOBAL-COALESCING", "REGISTER-BUDGET"),
                                                  messages=[
    "T2 is in Local memory; tcgen05.mma (Blackwell1CTA_128_64_16) accumulates in tensor memory"]))
def accumulators_in_registers():
    """The MmaOp's output left in registers, as for wgmma: tcgen05.mma writes its accumulators
    to tensor memory only, and the TMemLoad then has no tensor memory to read."""
    fusion, sa, sb, d, r, out = _tile()
    d.set_memory_type(tp.MemoryType.Local)
    r.definition.op_type = tp.LoadStoreOpType.Set
    return fusion


@tp.schedule(target="sm_100a", expect=tp.rejected("LOWERING-SUPPORTED", warnings=("GLOBAL-COALESCING",), messages=[
    "T5, an operand of T2's tcgen05.mma, is circular-buffered"]))
def pipelined_operands():
    """A K loop of four tcgen05.mma, each on 16 columns of K that the TMA loads inside the loop,
    the operand tiles circular-buffered over it (two stages, one load ahead): a stage's refill
    would have to wait for the commit of the MMA that read it, which the pipelines do not place;
    tileproof completes each tcgen05.mma batch before going on, and pipelines none yet."""
    fusion, sa, sb, d, r, out = _tile(swizzle=None, k=64)
    for t in (sa, sb):  # the TMA boxes of one K step inside d's K loop
        for i in t.get_loop_domain():
            i.parallelize(P.Serial)
        t.set_loop_domain(t.get_logical_domain())
    for t in (sa, sb):
        t.split(2, 16).reorder({2: 0})  # [Ko, .., 16 of K]
    sa.reorder({2: 1})  # [Ko, 1, M, K16]
    for t in (sa, sb):
        t.apply_mma_swizzle_for_tma_load(SW.B32)
        for i in t.get_loop_domain()[2:]:
            i.parallelize(P.Bulk)
        t.set_allocation_domain(t.get_loop_domain(), True)
        t.inline_at(1)
        t.circular_buffer(2, 1)
    return fusion
