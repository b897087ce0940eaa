"""Schedules the verifier rejects because the code generator could not turn them into a kernel
(the lowering family: verifier/rules/lowering.py, conditions in execution/loops.py). Before these
rules each one verified and then made tp.compile raise, fail in NVRTC or run for minutes.

examples/valid/lowering.py holds the fixed schedules.
"""

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


@tp.schedule(expect=tp.rejected("PARALLEL-TYPE-UNIQUE", messages=[
    "T2 binds TIDx to two loop axes: axis 0 (extent 4) and axis 1 (extent 32)"], warnings=("GLOBAL-COALESCING",)))
def two_axes_on_tidx():
    """T1 and T2 put both of their axes on TIDx: threadIdx.x would visit the diagonal (i, i)
    of the 4 x 32 tile only."""
    fusion, t1, t2 = _copy("two_axes_on_tidx", [4, 32])
    for t in (t1, t2):
        t.axis(0).parallelize(P.TIDx)
        t.axis(1).parallelize(P.TIDx)
    return fusion


@tp.schedule(expect=tp.rejected("REGISTER-SIZE-CONSTANT", messages=[
    "T1 is a register (Local) tensor of 32*M elements per thread", "256 registers at M = 8"],
    warnings=("GRID-SIZE",)))
def registers_of_symbolic_size():
    """T1 holds a whole [M, 32] tensor in each thread's registers: its size is known at launch only."""
    fusion, t1, t2 = _copy("registers_of_symbolic_size", ["M", 32])
    t2.axis(1).parallelize(P.TIDx)
    return fusion


@tp.schedule(expect=tp.rejected("UNROLL-LENGTH", messages=[
    "T1 holds 24576 registers per thread (24576 float32 elements); the limit is 255",
    "unrolled loops repeat statements 49152 times", "the limit is 1024"], warnings=("REGISTER-BUDGET",)))
def register_tensor_fully_unrolled():
    """96 KiB of float32 in one thread's registers (REGISTER-BUDGET, a warning: ptxas would put
    it in local memory), copied in fully unrolled loops of 24576 iterations each: NVRTC ran for
    more than 5 minutes on it (UNROLL-LENGTH, the error)."""
    fusion, t1, t2 = _copy("register_tensor_fully_unrolled", [24576])
    for t in (t1, t2):
        t.axis(0).parallelize(P.Unroll)
    return fusion


@tp.schedule(expect=tp.rejected("UNROLL-LENGTH", messages=[
    "repeat statements 3072 times (T2 3072 (Unroll{64} x i", "the limit is 1024"], warnings=("REGISTER-BUDGET",)))
def unroll_around_a_serial_loop():
    """T2 unrolls an axis of 64 around a serial axis of 48: the compiler unrolls both, 3072
    copies of the statement (43 s in NVRTC). Found by benchmarks/fuzz.py."""
    fusion, t1, t2 = _copy("unroll_around_a_serial_loop", [64, 48, 32])
    for t in (t1, t2):
        t.axis(2).parallelize(P.TIDx)
    t2.axis(0).parallelize(P.Unroll)
    return fusion


@tp.schedule(expect=tp.rejected("SYMBOLIC-FACTOR", messages=[
    "splits i", "by F, and F is not an extent symbol of fusion split_by_unknown_symbol (its symbols: none)"]))
def split_by_unknown_symbol():
    """T1 and T2 split by "F", a name no shape uses and nothing declares: the kernel would have no
    value for it (NVRTC: identifier "F" is undefined)."""
    fusion, t1, t2 = _copy("split_by_unknown_symbol", [64, 32])
    for t in (t1, t2):
        t.split(0, "F")
        t.axis(2).parallelize(P.TIDx)
    t1.inline_at(2)
    return fusion


@tp.schedule(expect=tp.rejected("INLINE-LOOP-MAP", messages=[
    "T1 is inlined at position 1 but its loop axis 0 (i", "is not T3's loop axis 0"]))
def consumer_made_after_inlining():
    """T1 is inlined into T2 at 1 (both split by 4), then a second consumer T3 of T1 is made: its
    loop of 64 and T1's loop of 16 cannot be one loop. (Transforming T2 or T1 after the inlining
    is refused at the call, as nvFuser refuses it.)"""
    fusion, t1, t2 = _copy("consumer_made_after_inlining", [64, 32])
    for t in (t1, t2):
        t.split(0, 4)
        t.axis(2).parallelize(P.TIDx)
    t1.inline_at(1)
    with fusion:
        t3 = tp.set(t1)
        fusion.add_output(t3)
    t3.axis(1).parallelize(P.TIDx)
    return fusion


@tp.schedule(expect=tp.rejected("INLINE-PARALLEL-MATCH", messages=[
    "T2 axis 0 (BIDx) shares a loop with T1 axis 0 (Unroll) through inlining"]))
def inlined_axis_parallelized_differently():
    """T1 is inlined into T2 at 1; T2's axis 0 is BIDx and T1's Unroll: one loop cannot be both
    blockIdx.x and an unrolled for loop. (Had T1's stayed Serial, it would take the loop's BIDx,
    as nvFuser's loop map gives it.)"""
    fusion, t1, t2 = _copy("inlined_axis_parallelized_differently", [64, 32])
    for t in (t1, t2):
        t.axis(1).parallelize(P.TIDx)
    t1.axis(0).parallelize(P.Unroll)
    t2.axis(0).parallelize(P.BIDx)
    t1.inline_at(1)
    return fusion


@tp.schedule(expect=tp.rejected("LOOP-NEST-ORDER", messages=[
    "the loop of T1 axis 0, T2 axis 0, T4 axis 0 would be split in two: T3 runs between T1, T2 and T4"]))
def loop_split_around_another_tensor():
    """T1 is inlined at 1 into both of its consumers, T2 (an output) and T4 = T1 + T3. T3 = exp(T2)
    is not inlined, so it runs between T2 and T4, outside the loop T1, T2 and T4 share: it reads
    T2, so it cannot run before the loop, and T4 reads it, so it cannot run after."""
    with tp.Fusion("loop_split_around_another_tensor") as fusion:
        t0 = tp.make_contig_concrete_tensor([8, 32])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
        t3 = tp.exp(t2)
        t4 = tp.add(t1, t3)
        fusion.add_output(t4)
    for t in (t1, t2, t3, t4):
        t.axis(1).parallelize(P.TIDx)
    t1.inline_at(1)
    return fusion


@tp.schedule(expect=tp.rejected("GLOBAL-INTERMEDIATE", messages=[
    "T1 is an intermediate in global memory, read by T2"]))
def intermediate_in_global_memory():
    """T1 = exp(T0) lives in global memory between two ops of the kernel: it would need a scratch
    buffer and a grid-wide barrier, which tileproof does not emit. (A plain copy of T0 there,
    laid out as T0, would be no intermediate but a view of T0: examples/valid/lowering.py
    copy_of_an_input_in_global_memory.)"""
    with tp.Fusion("intermediate_in_global_memory") as fusion:
        t0 = tp.make_tensor([8, 32], contiguity=True)
        fusion.add_input(t0)
        t1 = tp.exp(t0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Global)
    for t in (t1, t2):
        t.axis(0).parallelize(P.BIDx)
        t.axis(1).parallelize(P.TIDx)
    return fusion


@tp.schedule(expect=tp.rejected("LOWERING-SUPPORTED", messages=[
    "T2 axis 0 is parallelized on DIDx; tileproof's code generator emits single-GPU kernels"]))
def multi_device_axis():
    """An axis split across devices (DIDx): tileproof emits single-GPU kernels only."""
    fusion, t1, t2 = _copy("multi_device_axis", [4, 32])
    for t in (t1, t2):
        t.axis(0).parallelize(P.DIDx)
        t.axis(1).parallelize(P.TIDx)
    return fusion


@tp.schedule(expect=tp.rejected("LOWERING-SUPPORTED", messages=[
    "T1 issues its TMA load from K threads, a symbolic count"]))
def tma_load_from_a_symbolic_number_of_threads():
    """The TMA compositing example with the coordinate axis of extent K (K <= 32) on TIDx: each
    of K threads issues one box load, and the mbarrier the loads complete on would need K
    arrivals, a count tileproof emits as a constant. Found by probing symbolic sizes."""
    with tp.Fusion("tma_load_from_a_symbolic_number_of_threads") as fusion:
        t0 = tp.make_tensor([1024, "K", 4, 8], contiguity=True)
        fusion.add_input(t0)
        t1 = tp.set(t0, op=tp.LoadStoreOpType.TMA)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    fusion.assume("K <= 32")
    for t in (t1, t2):
        t.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.TIDx)
    t1.axis(2).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.rejected("INLINE-PARALLEL-MATCH", messages=[
    "T1 axis 1 (Vectorize{4}) shares a loop with T2 axis 1 through inlining, but a Vectorize axis is covered by "
    "one instruction of each statement"]))
def inlined_past_its_vector():
    """T1 is inlined at position 2 and then vectorized (inline_at refuses a Vectorize axis, but it
    was serial then): its register allocation holds one element, and its vector load writes all
    four into it. Found by benchmarks/fuzz.py --run (a wrong value on H100)."""
    fusion, t1, t2 = _copy("inlined_past_its_vector", [128, 4])
    t1.inline_at(2)
    t2.axis(0).parallelize(P.TIDx)
    t2.axis(1).parallelize(P.Vectorize)
    tp.parallelize_all_like(t2)
    return fusion
