"""cp.async copies the hardware cannot make: a size its cache does not take (CPASYNC-SIZE),
misaligned addresses (CPASYNC-ALIGN), a copy that is not global -> shared (LOWERING-SUPPORTED);
and circular buffers that do not make a pipeline: a stage refilled before it is read
(PIPELINE-WAR), a copy issued after its read (CPASYNC-WAIT; PIPELINE-RAW for registers), numbers
or loops that cannot be pipelined (PIPELINE-STAGES), stages that do not fit (SMEM-CAPACITY).

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
    "moves 2 x 4 = 8 bytes per copy with cp.async.cg.shared.global (tp.CacheOp.Global)"],
    warnings=("GLOBAL-COALESCING",)))
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
    "bytes past a multiple of 16"], warnings=("GLOBAL-COALESCING",)))
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
    "T1's 16-byte cp.async reads a misaligned global address when M = 2, K = 1"], warnings=("GLOBAL-COALESCING",)))
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


def k_loop(name, *, stages, prefetch=-1, tile_rows=16, columns=32, shape=("M", "K"), op=CP_ASYNC, inline=True):
    """out = set(a) through the shared tile s, circular-buffered over the K loop: [M/rows, K loop,
    rows x columns/4 threads, 4]; the reader uses the threads in another order."""
    with tp.Fusion(name) as fusion:
        a = tp.make_tensor(list(shape), contiguity=True)
        fusion.add_input(a)
        s = tp.set(a, op=op)
        out = tp.set(s)
        fusion.add_output(out)
    if "K" in shape:
        fusion.assume("K % 4 == 0")
    s.set_memory_type(tp.MemoryType.Shared)
    for t in (s, out):
        t.split(1, 4).split(1, columns // 4).split(0, tile_rows).reorder({1: 2})  # [Mo, Ko, rows, cols/4, 4]
        t.axis(0).parallelize(P.BIDx)
    s.merge(2, 3).axis(2).parallelize(P.TIDx)
    s.axis(3).parallelize(P.Vectorize)
    out.merge(2, 3).merge(2, 3).split(2, tile_rows * columns // 4).axis(3).parallelize(P.TIDx)
    if inline:
        s.inline_at(2)
    s.circular_buffer(stages, prefetch)
    return fusion, s


@tp.schedule(expect=tp.rejected("PIPELINE-WAR", "PIPELINE-STAGES", messages=[
    "T1's stage 0 is refilled in iteration 0 with iteration 2's data before T2 reads iteration 0's data from it"]))
def prefetch_equal_to_the_stage_count():
    """The issue's example: 2 stages, 2 copies ahead. Iteration 0 issues the copy of iteration 2
    into stage 0, which iteration 0 itself still reads: no barrier can order the refill after the
    read. Counterexample: refill iteration 0, data 2, read iteration 0, stage 0."""
    return k_loop("prefetch_equal_to_the_stage_count", stages=2, prefetch=2)[0]


@tp.schedule(expect=tp.rejected("PIPELINE-STAGES", messages=["T1 is circular-buffered with 1 stage"]))
def one_stage():
    """A circular buffer of one stage has no copy in flight while its tile is read."""
    return k_loop("one_stage", stages=1)[0]


@tp.schedule(expect=tp.rejected("CPASYNC-WAIT", "PIPELINE-STAGES", messages=[
    "T2 reads T1 in iteration 0 before the cp.async data of that iteration is complete: its copy of iteration 0's "
    "data is not issued before the read"]))
def prefetch_behind():
    """prefetch_distance -3 with 2 stages is a prefetch of -1: each iteration copies the tile of the
    iteration before, after that iteration read it."""
    return k_loop("prefetch_behind", stages=2, prefetch=-3)[0]


@tp.schedule(expect=tp.rejected("PIPELINE-STAGES", messages=[
    "T1 is circular-buffered but not inlined into a loop"]))
def circular_buffer_without_a_loop():
    """A [64, 128] tile computed whole before its reader (not inlined: compute-at 0): no loop
    rotates its stages."""
    return k_loop("circular_buffer_without_a_loop", stages=2, shape=(64, 128), inline=False)[0]


@tp.schedule(expect=tp.rejected("PIPELINE-STAGES", messages=[
    "T1's circular loop, its axis 1 (", "is parallelized on BIDy"]))
def circular_loop_on_blocks():
    """The axis left of the tile's compute-at position is bound to blockIdx.y: its iterations run in
    different blocks, and there is no loop to pipeline."""
    fusion, s = k_loop("circular_loop_on_blocks", stages=2)
    fusion.assume("K <= 65535 * 32")  # gridDim.y = ceil(K / 32) launches (LAUNCH-GRID)
    for t in fusion.tensors[1:]:
        t.axis(1).parallelize(P.BIDy)
    return fusion


@tp.schedule(expect=tp.rejected("SMEM-CAPACITY", messages=["not enough shared memory"]))
def stages_do_not_fit():
    """A tile of 4 rows x 1024 fp32 columns is 16 KiB; 16 stages need 256 KiB, over sm_90a's 227 KiB."""
    return k_loop("stages_do_not_fit", stages=16, tile_rows=4, columns=1024)[0]


@tp.schedule(expect=tp.rejected("LOWERING-SUPPORTED", messages=[
    "T2 is circular-buffered, but it is neither a shared tensor filled by a copy"]))
def circular_buffer_of_a_computed_tile():
    """A circular buffer holds copies (nvFuser's circularBuffer takes a LoadStoreOp's output only):
    a shared tile computed by an add, a + b, is not pipelined."""
    with tp.Fusion("circular_buffer_of_a_computed_tile") as fusion:
        a = tp.make_tensor(["M", "K"], contiguity=True)
        b = tp.make_tensor(["M", "K"], contiguity=True)
        fusion.add_input(a)
        fusion.add_input(b)
        s = tp.add(a, b)
        out = tp.set(s)
        fusion.add_output(out)
    s.set_memory_type(tp.MemoryType.Shared)
    for t in (s, out):
        t.split(1, 32).axis(0).parallelize(P.BIDx)  # [M, K loop, 32]
        t.axis(2).parallelize(P.TIDx)
    s.inline_at(2)
    s.circular_buffer(2)
    return fusion


def register_slices(name, prefetch, source_inline=2):
    """Rows of [M, K] through shared memory (a K loop of 32-wide tiles) into registers, four
    slices of 8 per tile, the registers circular-buffered over the (unrolled) slice loop."""
    with tp.Fusion(name) as fusion:
        a = tp.make_tensor(["M", "K"], contiguity=True)
        fusion.add_input(a)
        s = tp.set(a)
        r = tp.set(s)
        out = tp.set(r)
        fusion.add_output(out)
    fusion.assume("K % 32 == 0")
    for t in (s, r, out):
        t.split(1, 32).axis(0).parallelize(P.BIDx)  # [M, K loop, 32]
    s.set_memory_type(tp.MemoryType.Shared)
    for t in (r, out) if source_inline <= 2 else (s, r, out):
        t.split(2, 8).axis(3).parallelize(P.TIDx)  # [M, K loop, 4 slices, 8]
        t.axis(2).parallelize(P.Unroll)
    s.axis(-1).parallelize(P.TIDx)
    s.inline_at(source_inline)
    r.inline_at(3)
    r.circular_buffer(2, prefetch)
    return fusion


@tp.schedule(expect=tp.rejected("PIPELINE-WAR", "PIPELINE-STAGES", messages=[
    "T2's stage 0 is refilled in iteration 0 with iteration 2's data before T3 reads iteration 0's data from it, "
    "the copy overwrites the thread's registers before it reads them"]))
def register_slices_refilled_before_read():
    """Registers circular-buffered over the slice loop (two stages) two slices ahead: iteration 0
    copies slice 2 into stage 0 before it reads slice 0 from there. Counterexample: refill
    iteration 0, data 2, read iteration 0, stage 0."""
    return register_slices("register_slices_refilled_before_read", 2)


@tp.schedule(expect=tp.rejected("PIPELINE-RAW", "PIPELINE-STAGES", messages=[
    "T3 reads T2 in iteration 0 before the copy of that iteration's data"]))
def register_slices_copied_late():
    """prefetch_distance -3 with 2 register stages is a prefetch of -1: each slice's registers are
    copied in the next iteration, after their read. Counterexample: iteration 0."""
    return register_slices("register_slices_copied_late", -3)


@tp.schedule(expect=tp.rejected("PIPELINE-STAGES", messages=["but its source T1 is computed inside that loop"]))
def register_slices_from_a_tile_of_the_slice():
    """The shared tile is copied inside the slice loop (inlined at 3, one slice at a time), so
    the registers' copy of slice i + 1, issued in iteration i, would read a slice not yet written."""
    return register_slices("register_slices_from_a_tile_of_the_slice", 1, source_inline=3)
