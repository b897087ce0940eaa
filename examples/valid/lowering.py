"""The schedules of examples/invalid/lowering.py, fixed so that the code generator lowers them
(the lowering family: verifier/rules/lowering.py). Each one compiles (tests/codegen/test_accepted_compiles.py)."""

import tileproof as tp

P = tp.ParallelType


def _copy(name: str, shape, *, dtype="float32"):
    """gmem T0 -> registers T1 -> gmem T2."""
    with tp.Fusion(name) as fusion:
        t0 = tp.make_tensor(list(shape), contiguity=True, dtype=dtype)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    return fusion, t1, t2


@tp.schedule(expect=tp.accepted())
def merged_axes_on_tidx():
    """PARALLEL-TYPE-UNIQUE: the two axes merged into one of 128, which TIDx iterates."""
    fusion, t1, t2 = _copy("merged_axes_on_tidx", [4, 32])
    for t in (t1, t2):
        t.merge(0)
        t.axis(0).parallelize(P.TIDx)
    return fusion


@tp.schedule(expect=tp.accepted(allocations={"T1": {"num_elements": 1}}))
def registers_per_row():
    """REGISTER-SIZE-CONSTANT: rows on BIDx (M blocks) and columns on TIDx: each thread holds one
    element of T1, whatever M is."""
    fusion, t1, t2 = _copy("registers_per_row", ["M", 32])
    for t in (t1, t2):
        t.axis(0).parallelize(P.BIDx)
        t.axis(1).parallelize(P.TIDx)
    return fusion


@tp.schedule(expect=tp.accepted(allocations={"T1": {"num_elements": 8}}))
def register_tile_unrolled():
    """REGISTER-BUDGET and UNROLL-LENGTH: the 24576 elements split over 24 blocks of 128 threads,
    each thread copying 8 elements in an unrolled loop through an 8-register tile of T1."""
    fusion, t1, t2 = _copy("register_tile_unrolled", [24576])
    for t in (t1, t2):
        t.split(0, 128)
        t.split(0, 8)  # [24, 8, 128]
        t.axis(0).parallelize(P.BIDx)
        t.axis(1).parallelize(P.Unroll)
        t.axis(2).parallelize(P.TIDx)
    t1.inline_at(1)
    return fusion


@tp.schedule(expect=tp.accepted())
def unroll_innermost():
    """UNROLL-LENGTH: the unrolled axis of 64 is split by 8 and only the inner 8 unrolled, inside
    the serial axes: 8 copies per statement."""
    fusion, t1, t2 = _copy("unroll_innermost", [64, 48, 32])
    for t in (t1, t2):
        t.axis(2).parallelize(P.TIDx)
        t.split(0, 8)
        t.reorder({1: 2})  # [8, 48, 8, TIDx]
        t.axis(2).parallelize(P.Unroll)
    t1.inline_at(3)
    return fusion


@tp.schedule(expect=tp.accepted())
def split_by_declared_symbol():
    """SYMBOLIC-FACTOR: F declared with fusion.symbol("F") is an extent symbol, a kernel parameter
    passed at launch (kernel.run(a, F=4)); SPLIT-DIVISIBILITY holds because the split is not
    required to divide (the holes are predicated)."""
    fusion, t1, t2 = _copy("split_by_declared_symbol", [64, 32])
    fusion.symbol("F")
    for t in (t1, t2):
        t.split(0, "F")
        t.axis(2).parallelize(P.TIDx)
    t1.inline_at(2)
    return fusion


@tp.schedule(expect=tp.accepted(allocations={"T1": {"num_elements": 4}}))
def consumer_split_before_inlining():
    """INLINE-LOOP-MAP: T2 is split first and the split propagated to T1, then T1 is inlined at 1:
    the loop of 16 is one loop of both."""
    fusion, t1, t2 = _copy("consumer_split_before_inlining", [64, 32])
    t2.split(0, 4)
    tp.propagate_transforms(t2)
    for t in (t1, t2):
        t.axis(2).parallelize(P.TIDx)
    t1.inline_at(1)
    return fusion


@tp.schedule(expect=tp.accepted())
def inlined_axis_on_bidx_in_both():
    """INLINE-PARALLEL-MATCH: tp.parallelize_all_like(T2) puts T1's axis 0 on BIDx as well."""
    fusion, t1, t2 = _copy("inlined_axis_on_bidx_in_both", [64, 32])
    t2.axis(0).parallelize(P.BIDx)
    t2.axis(1).parallelize(P.TIDx)
    tp.parallelize_all_like(t2)
    t1.inline_at(1)
    return fusion


def _two_outputs_of_a_copy(name: str, inline_t3: bool):
    """T2 = copy of T1 = copy of T0, and T4 = T1 + T3 with T3 = copy of T0, over [8, 32] rows on
    TIDx; T1 inlined at 1 (and T3 too, with `inline_t3`)."""
    with tp.Fusion(name) as fusion:
        t0 = tp.make_contig_concrete_tensor([8, 32])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
        t3 = tp.set(t0)
        t4 = tp.add(t1, t3)
        fusion.add_output(t4)
    for t in (t1, t2, t3, t4):
        t.axis(1).parallelize(P.TIDx)
    t1.inline_at(1)
    if inline_t3:
        t3.inline_at(1)
    return fusion


@tp.schedule(expect=tp.accepted())
def every_tensor_in_the_shared_loop():
    """LOOP-NEST-ORDER: T3 is inlined at 1 as well, so T1, T2, T3 and T4 all run in the one loop
    over the 8 rows."""
    return _two_outputs_of_a_copy("every_tensor_in_the_shared_loop", inline_t3=True)


@tp.schedule(expect=tp.accepted())
def independent_statement_moved_out_of_the_loop():
    """LOOP-NEST-ORDER: T1 is inlined at 1 into T2 and T4 = T1 + T3; T3 = copy of T0 is not
    inlined and reads nothing of that loop, so it runs before it (nvFuser's expression sort)."""
    return _two_outputs_of_a_copy("independent_statement_moved_out_of_the_loop", inline_t3=False)


@tp.schedule(expect=tp.accepted())
def intermediate_in_shared_memory():
    """GLOBAL-INTERMEDIATE: T1 in shared memory, each block holding its own row."""
    fusion, t1, t2 = _copy("intermediate_in_shared_memory", [8, 32])
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2):
        t.axis(0).parallelize(P.BIDx)
        t.axis(1).parallelize(P.TIDx)
    return fusion


@tp.schedule(expect=tp.accepted())
def copy_of_an_input_in_global_memory():
    """GLOBAL-INTERMEDIATE: T1 = set(T0) in global memory, laid out as T0, is a view of T0
    (nvFuser's tensor producer aliases, model/producer_aliases.py): no statement writes it,
    nothing is allocated, and T2 reads T0's memory."""
    fusion, t1, t2 = _copy("copy_of_an_input_in_global_memory", [8, 32])
    t1.set_memory_type(tp.MemoryType.Global)
    for t in (t1, t2):
        t.axis(0).parallelize(P.BIDx)
        t.axis(1).parallelize(P.TIDx)
    return fusion


@tp.schedule(expect=tp.accepted())
def plain_copy_into_shared_memory():
    """LOWERING-SUPPORTED: the copy into shared memory as a plain tp.set (ld.global + st.shared)."""
    with tp.Fusion("plain_copy_into_shared_memory") as fusion:
        t0 = tp.make_contig_concrete_tensor([8, 32])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2):
        t.axis(1).parallelize(P.TIDx)
    return fusion


@tp.schedule(expect=tp.accepted())
def rows_on_blocks():
    """LOWERING-SUPPORTED: the device axis of multi_device_axis on BIDx instead: one GPU, 4 blocks."""
    fusion, t1, t2 = _copy("rows_on_blocks", [4, 32])
    for t in (t1, t2):
        t.axis(0).parallelize(P.BIDx)
        t.axis(1).parallelize(P.TIDx)
    return fusion


@tp.schedule(expect=tp.accepted(warnings=("GLOBAL-COALESCING", "SMEM-BANK-CONFLICT")))
def tma_load_from_one_thread():
    """LOWERING-SUPPORTED: the K box loads of each block are issued by one thread in a loop (the
    mbarrier gets one arrival per load); T2 then reads the K rows on TIDx."""
    with tp.Fusion("tma_load_from_one_thread") as fusion:
        t0 = tp.make_tensor([1024, "K", 4, 8], contiguity=True)
        fusion.add_input(t0)
        t1 = tp.set(t0, op=tp.LoadStoreOpType.TMA)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    fusion.assume("K <= 32")
    for t in (t1, t2):
        t.axis(0).parallelize(P.BIDx)
    t2.axis(1).parallelize(P.TIDx)
    t1.axis(2).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.accepted(allocations={"T1": {"num_elements": 4}}))
def inlined_before_its_vector():
    """The fix of inlined_past_its_vector: tp.inline_most stops before the Vectorize axis, so T1
    holds the four elements its vector load writes."""
    fusion, t1, t2 = _copy("inlined_before_its_vector", [128, 4])
    for t in (t1, t2):
        t.axis(0).parallelize(P.TIDx)
        t.axis(1).parallelize(P.Vectorize)
    tp.inline_most(fusion)
    return fusion
