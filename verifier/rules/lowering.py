"""Lowering: what a schedule needs so that the code generator can turn it into a kernel.

Each rule reports the problems of one function of execution/conditions/lowering.py; codegen calls the same
functions and treats a problem there as a tileproof bug. So an accepted schedule compiles.
The checks are structural (no solver): they read the schedule's loop domains, allocations and
ops, with extents as the schedule states them.
"""

from __future__ import annotations

from typing import Iterator

from ...execution.conditions import lowering as conditions
from ...execution import loops
from ...execution.nest import placed_nest
from ...model.types import ParallelType
from ..causes import propose_inline, propose_memory_types, propose_retype, unbound_type
from ..context import VerifyContext
from ..diagnostics import Diagnostic, Severity
from ..findings import report_problems
from ..registry import rule


def _groups(ctx: VerifyContext) -> loops.LoopGroups:
    return ctx.memo("lowering-loop-groups", lambda: loops.loop_groups(ctx.fusion, idmap=ctx.idmap))


@rule("PARALLEL-TYPE-UNIQUE", family="lowering")
def parallel_type_unique(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A tensor binds each thread or block index to at most one of its loop axes.

    What it checks:
        No tensor the kernel computes has two loop axes parallelized on the same one of
        TIDx, TIDy, TIDz, BIDx, BIDy, BIDz.
    Why the hardware needs it:
        threadIdx.x (and each other thread/block index) is one number per thread. Two loop
        axes bound to it would both take that number, so the thread with threadIdx.x = 3
        would visit only the point (3, 3): the kernel would cover the diagonal of the two
        axes and skip every other point.
    Example:
        fusion, t0, t1 = copy_chain("two_axes_on_tidx", [4, 32], copies=1)
        t1.axis(0).parallelize(tp.ParallelType.TIDx)
        t1.axis(1).parallelize(tp.ParallelType.TIDx)
    Fix:
        fusion, t0, t1 = copy_chain("merged_on_tidx", [4, 32], copies=1)
        t1.merge(0)
        t1.axis(0).parallelize(tp.ParallelType.TIDx)
    References:
        CUDA C++ Programming Guide 5.2 (thread hierarchy: threadIdx is a 3-component vector);
        nvFuser ParallelTypeBitmap (one IterDomain per parallel type in a tensor's loop domain);
        docs/hardware.md#thread-and-block-indices
    """
    # Formal statement: none, structural: no executed tensor binds one of TIDx..BIDz to two of its loop IDs
    clashes = conditions.launch_axis_clashes(ctx.fusion)
    found = list(report_problems("PARALLEL-TYPE-UNIQUE", clashes))
    if found:
        # one of a clashing pair's axes given its loop's type back (a parallelize took an index
        # already used), else made serial (Mma in an MMA's instruction tile); the later of each pair first
        axes = [(p.tensor, k, unbound_type(ctx.fusion.tensor(p.tensor), k))
                for p in clashes for k in (p.values["other_axis"], p.values["axis"])]
        call = propose_retype(ctx, found[0], axes, ["PARALLEL-TYPE-UNIQUE", "LAUNCH-THREADS", "INLINE-PARALLEL-MATCH"],
                              ["PARALLEL-TYPE-UNIQUE"])
        if call is not None:
            found[0].hint += f"; verified: {call} leaves no index bound twice"
    yield from found


@rule("REGISTER-SIZE-CONSTANT", family="lowering")
def register_size_constant(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A register (Local) tensor has a compile-time size per thread.

    What it checks:
        For every register tensor the kernel computes, the product of its allocated
        IterDomains' extents (what one thread holds) contains no extent symbol.
    Why the hardware needs it:
        Registers are assigned by the compiler: a thread's register count is fixed in the
        kernel binary before launch, and registers cannot be indexed by a run-time value.
        An array whose size is known only at launch has no register allocation.
    Example:
        fusion, t0, t1, t2 = copy_chain("symbolic_registers", ["M", 32])
        t1.set_memory_type(tp.MemoryType.Local)
    Fix:
        fusion, t0, t1, t2 = copy_chain("registers_per_thread", ["M", 32])
        for t in (t1, t2):
            t.axis(0).parallelize(tp.ParallelType.BIDx)
            t.axis(1).parallelize(tp.ParallelType.TIDx)
    References:
        CUDA C++ Programming Guide 5.3.2 (device memory accesses: local memory for arrays the
        compiler cannot keep in registers); PTX ISA 5.1.1 (register state space: fixed at compile time);
        docs/hardware.md#registers-per-thread
    """
    # Formal statement: none, structural: each computed register (Local) tensor's allocated extent product has no free symbol
    yield from report_problems("REGISTER-SIZE-CONSTANT", conditions.symbolic_registers(ctx.fusion, ctx.allocations))


@rule("REGISTER-BUDGET", family="lowering", severity=Severity.WARNING)
def register_budget(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Each register (Local) tensor fits in 255 32-bit registers per thread (a warning).

    What it checks:
        Each register tensor the kernel computes holds at most 255 32-bit registers per
        thread: ceil(allocated elements x element bytes / 4), with the allocation of the
        seed's three rules (thread and block axes are not allocated, axes left of the
        compute-at position are not). Tensors are counted one by one, since ptxas assigns
        registers by liveness (a tensor dead before the next is computed gives its registers
        back). Index arithmetic needs registers too: the budget is the hardware's limit, not
        a promise of no spills.
    Why the hardware needs it:
        A thread has at most 255 32-bit registers on every target tileproof knows. ptxas
        moves a register array that does not fit to local memory (off-chip, cached in L1):
        the kernel still compiles and computes the right values (measured: a 96 KiB register
        tensor in a serial loop compiles in 0.2 s), but every access is a memory access, not
        the register the schedule asked for. Hence a warning; what made such a schedule hang
        NVRTC, unrolling it fully, is the error UNROLL-LENGTH.
    Example:
        fusion, t0, t1, t2 = copy_chain("registers_per_thread", [64, 32])
        t1.set_memory_type(tp.MemoryType.Local)
    Fix:
        fusion, t0, t1, t2 = copy_chain("registers_per_thread", [64, 32])
        for t in (t1, t2):
            t.axis(1).parallelize(tp.ParallelType.TIDx)
    References:
        CUDA C++ Programming Guide, table "Technical Specifications per Compute Capability"
        (maximum number of 32-bit registers per thread: 255); CUDA C++ Best Practices Guide
        9.2.6 (register pressure, local-memory spills); docs/hardware.md#registers-per-thread
    """
    # Formal statement: none, structural: for each constant-size register tensor, ceil(elements * bytes / 4) <= 255
    yield from report_problems("REGISTER-BUDGET", conditions.register_budget(ctx.fusion, ctx.allocations))


@rule("LOCAL-MEMORY-SIZE", family="lowering")
def local_memory_size(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A thread's register (Local) tensors fit in the 512 KiB of local memory a thread can have.

    What it checks:
        The bytes of every constant-size register tensor of the kernel, summed (each is an
        array declared at the kernel's scope), are at most 508 KiB per thread (the 512 KiB
        of local memory less 4 KiB for the compiler's own frame): allocated elements x
        element bytes, with the allocation of the seed's three rules.
    Why the hardware needs it:
        What does not fit in registers ptxas places in local memory, and a thread's local
        memory is at most 512 KiB. A kernel with a larger frame compiles, and then
        cuLaunchKernel refuses it with "invalid argument" (measured on H100: a [96, 1024]
        float32 tensor copied through two serial register tensors, 786432 bytes per thread;
        and a [4096, 32] float32 register tensor, exactly 512 KiB).
    Example:
        fusion, t0, t1, t2, t3 = copy_chain("local_frame", [96, 1024], copies=3)
        t1.set_memory_type(tp.MemoryType.Local); t2.set_memory_type(tp.MemoryType.Local)
    Fix:
        fusion, t0, t1, t2, t3 = copy_chain("local_frame", [96, 1024], copies=3)
        t1.set_memory_type(tp.MemoryType.Local); t2.set_memory_type(tp.MemoryType.Local)
        tp.inline_most(fusion)
    References:
        CUDA C++ Programming Guide, table "Technical Specifications per Compute Capability"
        (maximum amount of local memory per thread: 512 KB); docs/hardware.md#local-memory-per-thread
    """
    # Formal statement: none, structural: sum over constant-size register tensors of elements * bytes <= 512 KiB - 4 KiB
    yield from report_problems("LOCAL-MEMORY-SIZE", conditions.local_memory(ctx.fusion, ctx.allocations))


@rule("UNROLL-LENGTH", family="lowering")
def unroll_length(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Unrolled loops repeat the kernel's statements at most 1024 times.

    What it checks:
        Summed over the statements of the kernel, the copies the compiler makes of each is at
        most 1024: the product of the constant extents of the statement's loops from its
        outermost Unroll or Vectorize loop inward (an Unroll loop is fully unrolled, a Vectorize
        loop that is not one vector access is unrolled element by element, and a serial loop of
        constant extent inside an unrolled one is unrolled by the compiler too). Thread and
        block axes are no loops; loops of symbolic extent are not unrolled.
    Why the hardware needs it:
        An unrolled loop is one copy of its body per iteration in the kernel's code, limited by
        the instruction cache and by the compiler: NVRTC's time grows faster than the copies
        (measured on sm_90a for a copy: 512 copies 0.6 s, 1024 copies 2.2 s, 64 unrolled
        around a serial 48 = 3072 copies 43 s, 4096 copies 84 s, and a fully unrolled 96 KiB
        register tensor over 5 minutes). The limit is a compile-time budget of tileproof, not
        an instruction-set rule.
    Example:
        fusion, t0, t1 = copy_chain("long_unroll", [4096], copies=1)
        t1.axis(0).parallelize(tp.ParallelType.Unroll)
    Fix:
        fusion, t0, t1 = copy_chain("inner_unroll", [4096], copies=1)
        t1.split(0, 8)
        t1.axis(1).parallelize(tp.ParallelType.Unroll)
    References:
        CUDA C++ Programming Guide 7.4 (#pragma unroll); CUDA C++ Best Practices Guide 11.1.3
        (loop unrolling and instruction-cache pressure); docs/hardware.md#unrolled-loops-and-compile-time
    """
    # Formal statement: none, structural: the statement copies of every outermost Unroll/Vectorize loop (constant extents inward) sum to <= 1024
    yield from report_problems("UNROLL-LENGTH", conditions.unroll_lengths(ctx.fusion))


@rule("SYMBOLIC-FACTOR", family="lowering")
def symbolic_factor(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A symbolic split factor is an extent symbol of the fusion.

    What it checks:
        Every symbol in a split factor (including splits that only build an allocation
        domain) is one of the fusion's extent symbols (named in a tensor's shape, or declared
        with fusion.symbol(name)).
    Why the hardware needs it:
        A kernel's loop bounds and indices are computed from its parameters. Extent symbols
        are kernel parameters bound at launch from the input shapes or keywords; any other
        name has no value in the kernel (NVRTC: identifier "F" is undefined), and no proof
        about it constrains the size the kernel would be run with.
    Example:
        fusion, t0, t1 = copy_chain("unknown_factor", [64, 32], copies=1)
        t1.split(0, "F")
    Fix:
        fusion, t0, t1 = copy_chain("declared_factor", [64, 32], copies=1)
        fusion.symbol("F")
        t1.split(0, "F")
    References:
        CUDA C++ Programming Guide 7.2.3 (kernel parameters); nvFuser Split with a symbolic
        factor (a fusion input scalar); docs/hardware.md#thread-and-block-indices
    """
    # Formal statement: none, structural: every split factor's free symbols are extent symbols of the fusion
    yield from report_problems("SYMBOLIC-FACTOR", conditions.symbolic_factors(ctx.fusion))


@rule("INLINE-LOOP-MAP", family="lowering")
def inline_loop_map(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """An inlined tensor's loop axes left of its compute-at position are its consumers' axes.

    What it checks:
        For every computed tensor inlined at position p and each of its consumers, loop axes
        0 .. p-1 of both iterate the same index space the same way (the same transforms of
        mapped logical axes). inline_at and inline_most check this when called, and afterwards
        the scheduling calls refuse to change those axes (split, merge, reorder, swizzle,
        propagate_transforms, cache_after, cache_before), as nvFuser's do; a consumer made
        after the inlining can still break it.
    Why the hardware needs it:
        Inlining puts the producer's statement inside the consumer's outer loops: one C++
        loop serves both. If the consumer's axis k is a different iteration (split by
        another factor, merged, reordered), there is no single loop whose index is right
        for both, and the producer would compute elements other than those its consumer reads.
    Example:
        fusion, t0, t1, t2 = copy_chain("consumer_made_after_inlining", [64, 32])
        for t in (t1, t2):
            t.split(0, 4)
        t1.inline_at(1)
        with fusion:  # a second consumer of t1, made after the inlining: its loops are unsplit
            t3 = tp.set(t1)
            fusion.add_output(t3)
    Fix:
        fusion, t0, t1, t2 = copy_chain("consumer_made_before_inlining", [64, 32])
        with fusion:
            t3 = tp.set(t1)
            fusion.add_output(t3)
        for t in (t1, t2, t3):
            t.split(0, 4)
        t1.inline_at(1)
    References:
        nvFuser ComputeAtMap / inlining (loop IDs left of the compute-at position are
        exact-mapped between producer and consumer)
    """
    # Formal statement: none, structural: loop IDs 0..p-1 of a tensor inlined at p map to its consumers' loop IDs 0..p-1
    yield from report_problems("INLINE-LOOP-MAP", _groups(ctx).unmapped)


@rule("INLINE-PARALLEL-MATCH", family="lowering")
def inline_parallel_match(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Loop axes shared through inlining are parallelized alike.

    What it checks:
        Loop axes joined by inlining (a producer's axis k < compute-at position with its
        consumers' axis k, transitively) are one loop of the kernel, with one parallel type:
        the type of its members that are not Serial. A Serial member takes it (nvFuser's
        ComputeAtMap::validateAndPropagatePType; model/loop_map.py gives it in the snapshot
        that verify and compile read) where it is a thread, block or device index, Unroll or
        Unswitch.
        Rejected: two members bound to different non-Serial types; a Serial member of a loop
        whose type one instruction of the statement covers (Vectorize, Bulk, Mma); and a
        Vectorize or Bulk axis shared by two statements at all (a vector access, a TMA box).
    Why the hardware needs it:
        Shared axes are one loop of the kernel: a serial for loop, an unrolled one, or a
        thread/block index. It cannot be an unrolled for loop for the producer and threadIdx.x
        for the consumer: each statement would run at indices the other does not, and the
        producer's value would not be where its consumer reads it. A producer inlined past its Vectorize
        axis moves the whole vector into storage allocated for one element (measured on H100:
        a 2-element vectorized copy through registers stored one wrong value).
    Example:
        fusion, t0, t1, t2 = copy_chain("unroll_and_tidx", [4, 32])
        t1.inline_at(1)
        t1.axis(0).parallelize(tp.ParallelType.Unroll)
        t2.axis(0).parallelize(tp.ParallelType.TIDx)
    Fix:
        fusion, t0, t1, t2 = copy_chain("serial_takes_tidx", [4, 32])
        t1.inline_at(1)
        t2.axis(0).parallelize(tp.ParallelType.TIDx)
    References:
        nvFuser ComputeAtMap::validateAndPropagatePType (a loop group's parallel type is its
        non-Serial members' one, given to the Serial members; two different ones throw)
    """
    # Formal statement: none, structural: loop IDs joined by inlining have one parallel type, not Vectorize or Bulk
    mismatched = _groups(ctx).mismatched
    found = list(report_problems("INLINE-PARALLEL-MATCH", mismatched))
    if found:
        # the first mismatch's two axes, each given the loop's other type (a parallelize that gave
        # one member a type of its own: Unroll, Vectorize or an index on a thread's loop); a vector or
        # box axis shared with serial members is made serial (no loop-mate says another type)
        where = {i.name: (t, k) for t in ctx.fusion.tensors for k, i in enumerate(t.loop)}
        axes = [(t.name, k, ParallelType.Serial if t.loop[k].parallel_type in (ParallelType.Vectorize, ParallelType.Bulk)
                 else None) for t, k in (where[name] for name in mismatched[0].ids if name in where)]
        call = propose_retype(ctx, found[0], axes, ["INLINE-PARALLEL-MATCH", "THREAD-VISIBILITY", "PARALLEL-TYPE-UNIQUE"],
                              ["INLINE-PARALLEL-MATCH"])
        if call is not None:
            found[0].hint += f"; verified: {call} gives the loop one type"
    yield from found


@rule("LOOP-NEST-ORDER", family="lowering")
def loop_nest_order(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """The statements that share a loop through inlining run one after another.

    What it checks:
        With the tensors in execution order (producers first, inlined producers right before
        their consumers) and each statement nested in its loops, every loop of the kernel is
        one contiguous range of statements: no statement outside a shared loop runs between
        two statements inside it. A loop on a thread or block index is no loop of the code
        (every thread of every block runs its statements at its own index), so its scope may
        close and reopen around other statements.
    Why the hardware needs it:
        A loop of the kernel is one C++ for loop (or one thread index range). If a tensor
        that is not in it must run between two tensors that share it, the loop would have to
        close and reopen, and the second half would see none of the first half's values
        (the inlined producer keeps only the current iteration's tile). Statements that do not
        depend on the loop's are moved out of the way first (after the loop, or before it), as
        nvFuser's expression sort does; what is reported is an order no move repairs.
    Example:
        fusion, t0, t1, t2 = copy_chain("interleaved", [8, 32])
        with fusion:
            t3 = tp.exp(t2); t4 = tp.add(t1, t3); fusion.add_output(t4)
        for t in (t1, t2, t3, t4):
            t.axis(1).parallelize(tp.ParallelType.TIDx)
        t1.inline_at(1)
    Fix:
        fusion, t0, t1, t2 = copy_chain("interleaved", [8, 32])
        with fusion:
            t3 = tp.exp(t2); t4 = tp.add(t1, t3); fusion.add_output(t4)
        for t in (t1, t2, t3, t4):
            t.axis(1).parallelize(tp.ParallelType.TIDx)
        t1.inline_at(1); t3.inline_at(1)
    References:
        nvFuser lower_loops (loop nest generation from the compute-at map)
    """
    # Formal statement: none, structural: each loop covers one contiguous range of statements in execution order
    g = _groups(ctx)
    found = conditions.nest_problems(ctx.fusion, groups=g)
    for p, d in zip(found, report_problems("LOOP-NEST-ORDER", found)):
        call = _reinline(ctx, d, p.knobs)
        if call is not None:
            d.hint = f"{call} (verified: with it, LOOP-NEST-ORDER holds); or {d.hint}"
        yield d


NEST_CODES = ["LOOP-NEST-ORDER", "INLINE-LOOP-MAP", "INLINE-PARALLEL-MATCH"]  # one nest (the last two: its premises)
REINLINE_TRIES = 12  # copies a LOOP-NEST-ORDER finding re-checks (structural: about 30 ms each)


def _reinline(ctx: VerifyContext, d: Diagnostic, names) -> str | None:
    """`name`.inline_at(k) for one of the tensors whose inlining put the statements in conflict
    (`names`, as written), proposed on d where the copy forms one nest: each tensor moved deeper
    first (into the loop the others share), then shallower (out of it); the call, or None. A
    single inline_at moved is the usual mistake (fuzz 125/39), and its fix is then the cause of
    what else the misplaced loop broke."""
    if ctx.source is None:  # a fix's copy
        return None
    tensors = [ctx.source.tensor(name) for name in names]
    moves = [(t.name, k) for t in tensors for k in range(t.compute_at + 1, len(t.get_loop_domain()) + 1)]
    moves += [(t.name, k) for t in tensors for k in range(t.compute_at - 1, -1, -1)]
    return next((call for name, k in moves[:REINLINE_TRIES]
                 if (call := propose_inline(ctx, d, name, k, NEST_CODES)) is not None), None)


@rule("LOOP-ROTATION", family="lowering", premises=("LOOP-NEST-ORDER", "INLINE-LOOP-MAP", "INLINE-PARALLEL-MATCH"))
def loop_rotation(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A rotated loop's rotated statements are the first of its body, and run in registers.

    What it checks:
        For each tp.rotate_loop(loop_tv, axis, selection) (nvFuser's scheduler_utils::rotateLoop):
        the loop at loop_tv's axis is serial (or unrolled) and holds statements of the selection;
        in its body (a TMA stage's wait placed at its first reader) no statement outside the
        selection runs before one inside it, and no loop nested in it holds both; the selected
        statements read and write registers and global memory only (no shared or tensor memory,
        no synchronisation among them). The kernel then runs the selected statements of
        iteration 0 before the loop and those of iteration i + 1 at the end of iteration i
        (execution/rotation.py).
    Why the hardware needs it:
        Rotation moves the first statements of each iteration to the end of the one before, so
        the statements run in the order they ran unrotated: A(0) B(0) A(1) B(1) .. for a body
        A; B. A statement left out of the selection but running before a selected one would
        run after the selected statements of its own iteration instead, reading values they
        have not produced yet or overwriting what they read. A thread or block index has no
        next iteration to move statements into. Statements that touch shared or tensor memory
        are ordered by barriers and pipelines placed per iteration, which the rotated order
        would put around the wrong iteration's accesses.
    Example:
        fusion, t0, t1, t2, t3 = copy_chain("rotate_not_first", [64, 8], copies=3)
        for t in (t1, t2, t3):
            t.axis(0).parallelize(tp.ParallelType.TIDx)
        t1.inline_at(2); t2.inline_at(2)
        tp.rotate_loop(t3, 1, [t2])
    Fix:
        fusion, t0, t1, t2, t3 = copy_chain("rotate_first", [64, 8], copies=3)
        for t in (t1, t2, t3):
            t.axis(0).parallelize(tp.ParallelType.TIDx)
        t1.inline_at(2); t2.inline_at(2)
        tp.rotate_loop(t3, 1, [t1, t2])
    References:
        nvFuser device_lower/pass/loop_rotation.h (Note [Loop Rotation]), scheduler_utils::rotateLoop;
        docs/supported.md#loop-rotation
    """
    # Formal statement: none, structural: for each rotation, the loop is serial and holds a selected statement,
    #   its body is [selected..., unselected...] (no inner loop mixed), and the selected ones touch no on-chip memory
    nest_ = placed_nest(ctx.fusion)
    if nest_ is not None:
        yield from report_problems("LOOP-ROTATION", [p for plan in nest_.rotations for p in plan.problems])


@rule("GLOBAL-INTERMEDIATE", family="lowering")
def global_intermediate(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Intermediate tensors live on chip, or in global memory written by a TMA store and read back in its block.

    What it checks:
        Every tensor the kernel computes that is not a fusion output is in shared, tensor or
        register (Local) memory, or is a global tensor a TMA store writes (nvFuser's
        TMAMiscTest.StoreSyncInsertion) whose readers are plain loads that share no repeating
        loop with the store, with, between them in the placed nest, every thread's wait for its
        TMA stores to complete (cp.async.bulk.wait_group 0, not .read), fence.proxy.async.global
        and a barrier (execution/barriers.py insert_store_completions), and a dense layout (the
        runtime allocates its buffer). That each element is read in the block that stored it is
        GLOBAL-VISIBILITY's claim. A broadcast, a plain copy (tp.set, LoadStoreOpType.Set, any
        cache op) or a transpose of a fusion input set to global memory and laid out as the
        input (each non-broadcast axis with the input axis's stride: the same allocation order
        and contiguity) is no intermediate but a view of the input (nvFuser's tensor producer
        aliases, isTrivialExpr; model/producer_aliases.py: no statement, no buffer, its readers
        read the input); one that is no view (of a register, shared or computed tensor, or laid
        out otherwise) is a global intermediate, and the message says why it is no view.
    Why the hardware needs it:
        A global intermediate needs a buffer in device memory that the runtime allocates and
        passes to the kernel, and before a thread reads what another thread wrote, a wait and a
        barrier; when blocks read what other blocks wrote, a grid-wide barrier (a cooperative
        launch). A TMA store writes through the async proxy: cp.async.bulk.wait_group.read only
        says it has read shared memory; its global writes are complete, and visible to the
        issuing thread, after cp.async.bulk.wait_group without .read, and the proxy fence orders
        them before the generic-proxy loads the barrier publishes to the block. tileproof
        places that after a TMA store only and has no grid-wide barrier (a limit of its code
        generator; the hardware could run more).
    Example:
        with tp.Fusion("global_intermediate") as fusion:
            t0 = tp.make_contig_concrete_tensor([8, 32]); fusion.add_input(t0)
            t1 = tp.exp(t0); t2 = tp.set(t1); fusion.add_output(t2)
        t1.set_memory_type(tp.MemoryType.Global)
        for t in (t1, t2):
            t.axis(1).parallelize(tp.ParallelType.TIDx)
    Fix:
        with tp.Fusion("shared_intermediate") as fusion:
            t0 = tp.make_contig_concrete_tensor([8, 32]); fusion.add_input(t0)
            t1 = tp.exp(t0); t2 = tp.set(t1); fusion.add_output(t2)
        t1.set_memory_type(tp.MemoryType.Shared)
        for t in (t1, t2):
            t.axis(1).parallelize(tp.ParallelType.TIDx)
    References:
        CUDA C++ Programming Guide 8.7 (grid synchronization with cooperative groups); PTX ISA
        cp.async.bulk.wait_group (.read) and membar/fence (fence.proxy.async, proxies);
        nvFuser csrc/device_lower/pass/insert_syncs.cpp (the TMA store's RAW async wait);
        docs/hardware.md#memory-visibility
    """
    # Formal statement: none, structural: every computed non-output tensor is in shared, tensor or register memory,
    #   or is TMA-stored, read by plain loads, and in the placed nest each (store, reader) pair's innermost common
    #   scope repeats nowhere above and holds a complete BulkStoreWait then a Sync between them
    yield from report_problems("GLOBAL-INTERMEDIATE", conditions.global_intermediates(ctx.fusion))


@rule("LOWERING-SUPPORTED", family="lowering")
def lowering_supported(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """The schedule uses only ops and features tileproof's code generator lowers.

    What it checks:
        Every op the kernel computes is lowered by tileproof: load/store ops Set, TMA,
        LdMatrix, StMatrix, TMemLoad (from tensor memory), TMemStore (into tensor memory),
        CpAsync (from a global tensor into a shared one, its Vectorize axis innermost, and,
        where it has holes to zero-fill, allocated along its own loop IDs); circular buffering of
        cp.async copies into shared memory only, with barrier-guarded refills (tp.Pipelined());
        exp and sqrt of floating-point types; an op touches tensor memory at most once;
        tensor-memory tensors take a constant number of columns; an
        ldmatrix/stmatrix consumer's innermost loop axis is its Vectorize axis and its statement
        is unpredicated (every thread of each warp issues it); no TMA tile (Bulk) axis is
        shared through inlining; a TMA load is issued by a constant number of threads (its
        mbarrier's arrival count); a loop over broadcast axes alone (a split broadcast no concrete loop
        shares) runs once, with index 0, as nvFuser's trivial loops, so its index must reach no index
        a statement in it uses (no concrete ID of the tensor, as an allocation domain's merge of the
        broadcast with a concrete axis, no operand's logical index); a tensor-memory access keeps broadcast axes off
        thread/block indices launched wider and shares no vectorized axis through inlining;
        no axis is parallelized on DIDx/DIDy/DIDz; global tensors are allocated along a
        permutation of their logical axes and merges of them (no split or swizzle).
    Why the hardware needs it:
        It does not: these are limits of tileproof's code generator, not hardware rules. The
        verifier rejects what the code generator cannot lower so that an accepted schedule
        always compiles; the message names the missing feature.
    Example:
        fusion, t0, t1, t2 = copy_chain("cp_async_into_registers", [8, 32], op=tp.LoadStoreOpType.CpAsync)
        for t in (t1, t2):
            t.axis(1).parallelize(tp.ParallelType.TIDx)
    Fix:
        fusion, t0, t1, t2 = copy_chain("cp_async_into_shared", [8, 32], op=tp.LoadStoreOpType.CpAsync)
        t1.set_memory_type(tp.MemoryType.Shared)
        for t in (t1, t2):
            t.axis(1).parallelize(tp.ParallelType.TIDx)
    References:
        tileproof codegen/lower/__init__.py (the passes and what they lower); README "Rule codes";
        docs/supported.md (what is lowered and what is not yet)
    """
    # Formal statement: none, structural: only the ops and features listed above are used
    found = list(conditions.unsupported_features(ctx.fusion))
    inlined: set[str] = set()  # bulk copies whose inlining a fix was tried for (one per tensor)
    for p, d in zip(found, report_problems("LOWERING-SUPPORTED", found)):
        # a copy's destination in the wrong memory (cp.async into global) is often an intermediate
        # there too: the one call that puts it back is the cause, where it is the fix
        if p.memory is not None and propose_memory_types(ctx, d, dict([p.memory]), ["LOWERING-SUPPORTED"]):
            name, memory = p.memory
            d.hint = (f"{name}.set_memory_type(tp.MemoryType.{memory.name}) (verified: with it, LOWERING-SUPPORTED "
                      f"holds); otherwise: {d.hint}")
        elif "loops_sharing" in p.values and p.tensor not in inlined:
            inlined.add(p.tensor)  # a bulk copy inlined past its box's first axis: inlined left of it
            call = _inline_left_of_box(ctx, d, p.tensor)
            if call is not None:
                d.hint = f"{call} (verified: with it, LOWERING-SUPPORTED holds); {d.hint}"
        yield d


def _inline_left_of_box(ctx: VerifyContext, d: Diagnostic, name: str) -> str | None:
    """`name`.inline_at(k) for the deepest k at or left of the first Bulk axis of the schedule as
    written whose copy has no LOWERING-SUPPORTED error (a loop left of the box may be a thread's
    of the consumer: the load would be issued by each of those threads), proposed on d; the
    call, or None."""
    if ctx.source is None:  # a fix's copy
        return None
    tv = ctx.source.tensor(name)
    box = next((k for k, i in enumerate(tv.get_loop_domain()) if i.parallel_type is ParallelType.Bulk), None)
    if box is None or tv.compute_at <= box:
        return None
    return next((call for k in range(box, -1, -1)
                 if (call := propose_inline(ctx, d, name, k, ["LOWERING-SUPPORTED"])) is not None), None)

