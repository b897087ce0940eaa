"""Reductions: what the code generator needs of a reduction's schedule (model/reduction.py).

A reduction's axes are added up in a register per thread (serial and unrolled loops), across
the threads of a block (TIDx/TIDy/TIDz) and across the blocks of a segment (BIDx/BIDy/BIDz: a
grid reduction through a global workspace and a semaphore, execution/grid_reduction.py). Its holes
never contribute by construction: the accumulation is predicated on every hole bound of the
tensor's own loop nest, and the accumulator starts at the neutral element
(tests/differential/test_differential_reduction.py runs the lowered kernels on the CPU and counts
every term). The checks are structural, like the lowering family's, but for the count of a grid reduction's
semaphore (REDUCTION-GRID-WORKSPACE), which z3 proves; codegen calls the same
functions (codegen/lower/reduction.py) and treats a problem there as a tileproof bug.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterator

from ...execution.conditions import reduction
from ...execution.grid_reduction import ALLREDUCE_LIMIT, SEMAPHORE_LIMIT, entrance_loops, grid_layout, is_allreduce
from ...execution.loops import execution_order
from ...execution.mma import well_formed
from ...execution.mma_execution import mma_execution
from ...execution.online import online_problems, rescale_conds, rescale_indices, rescaled_sums
from ...execution.reduction import grid_reductions, welford_leader
from ...model.expr import const, var
from ...model.welford import is_welford, welford_siblings
from ..causes import propose_retype, unbound_type
from ..context import VerifyContext
from ..diagnostics import Diagnostic
from ..analysis.visibility import prove_owned_read
from ..findings import finding, report_outcome, report_problems, report_values
from ..registry import rule


@rule("REDUCTION-PARALLEL", family="reduction")
def reduction_parallel(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A reduction axis runs as a loop or across threads or blocks, never as a vector or TMA tile.

    What it checks:
        For every reduction tensor the kernel computes (tp.sum, tp.max, the partial one of an
        rfactor): no reduction axis of its loop domain is bound to Vectorize or to Bulk, and no
        iteration axis of it is bound to Vectorize or Bulk. Serial, Unroll, TIDx, TIDy and
        TIDz reduction axes are lowered, and BIDx, BIDy and BIDz ones as a grid reduction
        (REDUCTION-GRID and REDUCTION-GRID-WORKSPACE say what that needs).
    Why the hardware needs it:
        A Vectorize axis is one access of consecutive elements in one instruction, and a Bulk
        axis one TMA tile, but a reduction's statement adds one term at a time into a register
        and stores each total once, after its loops: there is no vector add into one register.
    Example:
        with tp.Fusion("vector_reduction") as fusion:
            t0 = tp.make_contig_concrete_tensor([64, 4096]); fusion.add_input(t0)
            t1 = tp.sum(t0, 1); fusion.add_output(t1)
        t1.split(1, 4)
        t1.axis(0).parallelize(tp.ParallelType.BIDx)
        t1.axis(2).parallelize(tp.ParallelType.Vectorize)
    Fix:
        with tp.Fusion("vector_reduction") as fusion:
            t0 = tp.make_contig_concrete_tensor([64, 4096]); fusion.add_input(t0)
            t1 = tp.sum(t0, 1); fusion.add_output(t1)
        t1.split(1, 4)
        t1.axis(0).parallelize(tp.ParallelType.BIDx)
        t1.axis(2).parallelize(tp.ParallelType.Unroll)
    References:
        PTX ISA 9.7.9.8 (ld/st vector forms move values, they do not add them);
        docs/hardware.md#reductions-across-threads-and-blocks
    """
    # Formal statement: none, structural: for each reduction tensor T and loop ID i of T:
    #   parallel(i) not in {Vectorize, Bulk}
    order = execution_order(ctx.fusion)
    found = reduction.parallel_problems(ctx.fusion, order)
    for n, (p, d) in enumerate(zip(found, report_problems("REDUCTION-PARALLEL", found))):
        # an axis a parallelize gave Vectorize, Bulk or an index: its loop's type back (else Serial, Mma in
        # an MMA's instruction tile), verified; the first two findings (each proposal verifies a copy)
        k = p.values["axis"]
        call = propose_retype(ctx, d, [(p.tensor, k, unbound_type(ctx.fusion.tensor(p.tensor), k))],
                              ["REDUCTION-PARALLEL", "UNROLL-LENGTH", "INLINE-PARALLEL-MATCH"],
                              ["REDUCTION-PARALLEL"]) if n < 2 else None
        if call is not None:
            d.hint += f"; verified: {call}"
        yield d


@rule("REDUCTION-ACCUMULATOR", family="reduction")
def reduction_accumulator(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A reduction's running totals fit in a thread's registers, with a compile-time size.

    What it checks:
        For every reduction tensor the kernel computes: the iteration loop axes right of its
        first reduction axis that are loops (Serial, Unroll) each need a running total per
        point while the reduction loops run; their extents' product times the compute type's
        bytes is a constant of at most 255 32-bit registers.
    Why the hardware needs it:
        A thread keeps each running total in a register until the reduction's loops end.
        Registers are assigned when the kernel is compiled, so their count cannot depend on
        a size known only at launch, and a thread has at most 255 of them; an array indexed
        by a run-time value would live in local memory, and one past 512 KiB cannot launch.
    Example:
        with tp.Fusion("totals_per_column") as fusion:
            t0 = tp.make_tensor(["M", "N"]); fusion.add_input(t0)
            t1 = tp.sum(t0, 0); fusion.add_output(t1)
        t1.split(1, 128)  # [r{M}, ceil(N / 128), 128]: the loop over M keeps N totals
    Fix:
        with tp.Fusion("totals_per_column") as fusion:
            t0 = tp.make_tensor(["M", "N"]); fusion.add_input(t0)
            t1 = tp.sum(t0, 0); fusion.add_output(t1)
        t1.reorder({1: 0})
        t1.split(0, 128)
        t1.axis(0).parallelize(tp.ParallelType.BIDx)
        t1.axis(1).parallelize(tp.ParallelType.TIDx)
    References:
        CUDA C++ Programming Guide, table "Technical Specifications per Compute Capability"
        (255 32-bit registers per thread, 512 KB local memory per thread); PTX ISA 5.1.1
        (registers are fixed at compile time); docs/hardware.md#registers-per-thread
    """
    # Formal statement: none, structural: for each reduction tensor T, with start the position of its first
    #   reduction loop ID: product of the extents of T's Serial/Unroll iteration loop IDs right of start
    #   * compute bytes / 4 is a constant <= 255
    order = execution_order(ctx.fusion)
    yield from report_problems("REDUCTION-ACCUMULATOR", reduction.accumulator_problems(ctx.fusion, order))


@rule("REDUCTION-GROUP", family="reduction")
def reduction_group(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Grouped reductions are still scheduled alike when the kernel is made.

    What it checks:
        For every group of tp.group_reductions (model/grouped_reduction.py) whose members the
        kernel computes: each member has the first one's logical iteration (broadcast and
        reduction axes in the same places, each axis the same iteration), the same number of
        loop axes derived by the same transforms (so the same extents), the same parallel type
        on each loop axis (after a sibling's Serial axis takes the type of its sibling's, as
        nvFuser's loop map does) and the same compute-at position. group_reductions checks the
        same at the call, but a schedule may split, parallelize or inline one member afterwards.
    Why the hardware needs it:
        A group is one reduction of several values: nvFuser runs it as one GroupedReductionOp
        whose outputs share one loop nest, one block reduction step per output and, over
        blocks, one workspace round and one semaphore. Members iterated differently are not
        one reduction, and the parallelization nvFuser would give them is not the one written.
    Example:
        fusion, t1, t2 = grouped_sum_and_max("grouped_sum_and_max")
        t1.split(1, 32)  # after grouping, t2 is not split
        t1.axis(0).parallelize(tp.ParallelType.BIDx)
        t1.axis(2).parallelize(tp.ParallelType.TIDx)
        tp.parallelize_all_like(t1)
    Fix:
        fusion, t1, t2 = grouped_sum_and_max("grouped_sum_and_max")
        t1.split(1, 32)
        tp.propagate_transforms(t1)
        t1.axis(0).parallelize(tp.ParallelType.BIDx)
        t1.axis(2).parallelize(tp.ParallelType.TIDx)
        tp.parallelize_all_like(t1)
    References:
        nvFuser csrc/grouped_reduction.cpp (validateReductionGrouping), csrc/codegen.cpp
        (GroupedReductionOp: genBlockReduction per output, one GroupedGridReduction);
        docs/hardware.md#reductions-across-threads-and-blocks
    """
    # Formal statement: none, structural: for each group G and its first computed member R, for each
    #   computed member T of G: logical(T) ~ logical(R) position-wise (exact map, same broadcast and
    #   reduction kinds), loop(T) ~ loop(R) position-wise (same transform keys), parallel(loop(T)[k]) =
    #   parallel(loop(R)[k]) for each k, and compute_at(T) = compute_at(R)
    order = execution_order(ctx.fusion)
    yield from report_problems("REDUCTION-GROUP", reduction.group_problems(ctx.fusion, order))


@rule("REDUCTION-GROUP-AXIS", family="reduction")
def reduction_group_axis(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A Group axis is an iteration axis of constant extent of a reduction's output, not inlined.

    What it checks:
        For every loop axis on ParallelType.Group (after an inlined Serial member or a sibling
        of tp.group_reductions takes its loop's type): the tensor is a reduction's output, the
        axis is an iteration axis of constant extent, the tensor's compute-at position and
        every producer's inlining into it stay left of the axis, and the reductions done
        together (the group's members times the grouped extents) are at most 16.
    Why the hardware needs it:
        Group is nvFuser's cross-iteration grouping: the reductions of every index of the axis
        run together (one grid round, one barrier and semaphore for all, the values in one
        array per thread). Only a reduction's output has reductions to group; a constant
        extent sizes that array; an axis inside an inlined loop would be one index of an
        enclosing loop, not a group; and nvFuser's grouped reduction helpers take at most 16
        values (kMaxNumGroupedReductions). tileproof runs the group as a fully unrolled loop
        of the reductions, one round per index: the values nvFuser's one round computes.
    Example:
        fusion, t1, t2, t4 = column_allreduce("grouped_add")
        t4.axis(4).parallelize(tp.ParallelType.Group)  # t4 is an add, not a reduction
    Fix:
        fusion, t1, t2, t4 = column_allreduce("grouped_sum")
        t2.axis(4).parallelize(tp.ParallelType.Group)
    References:
        nvFuser csrc/device_lower/validation.cpp (validateAndConvertIterDomainGrouping,
        validateGroupedReductions), csrc/ir/internal_base_nodes.cpp (IterDomain::parallelize),
        csrc/type.h (kMaxNumGroupedReductions); docs/supported.md#cross-iteration-grouping
    """
    # Formal statement: none, structural: for each tensor T and loop axis k of T with parallel(k) = Group:
    #   T = reduction(...), iter_type(k) = Iteration, extent(k) const, compute_at(T) <= k,
    #   max over producers P inlined into T of shared(P, T) <= k; members(T) * prod(extent(Group axes)) <= 16
    order = execution_order(ctx.fusion)
    yield from report_problems("REDUCTION-GROUP-AXIS", reduction.group_axis_problems(ctx.fusion, order))


@rule("REDUCTION-GRID", family="reduction")
def reduction_grid(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A grid reduction's total is read only where it exists: the last block, or every block of an allreduce.

    What it checks:
        For every reduction tensor T with a reduction axis bound to BIDx, BIDy or BIDz (a
        grid reduction, execution/grid_reduction.py), over the statements that read T's total,
        directly or through other statements. If one spreads its elements over a block type T
        reduces (an allreduce: every block needs the total), the blocks meet at a grid-wide
        barrier: the kernel is not launched in clusters, T is in registers or shared memory
        (each block keeps its own copy), and no reader is an MmaOp or tensor memory access or
        reads totals held by the last blocks of two rounds. Otherwise the readers run in the
        last block of T's segment only: none is a grid reduction, MmaOp or tensor memory access
        or reads a grid total of another round; T enters its grid combine once per block (no
        serial or unrolled loop left of its first reduction axis) and every reader lies in the
        loops the combine is in. A round is T alone, or the grid reductions of T's group
        (tp.group_reductions) reduced over the same block and thread types, all plain or all
        allreduces: they combine together (nvFuser's GroupedGridReduction), so their combines
        must be adjacent statements of the kernel, in the same loops. A Welford's outputs
        (tp.welford) are one round whose leader combines their states (avg, M2, N, a workspace
        each) for all three; a total of one of them read in every block makes the three an
        allreduce (one grid-wide barrier, every block combining the states), with a sum's
        allreduce conditions on each. In both: T is no MmaOp; the kernel is not warp-specialized; T has no
        broadcast loop axis.
    Why the hardware needs it:
        Blocks share only global memory, and nothing orders one block's stores before another
        block's loads unless one waits for the other. A plain grid combine never waits: each
        block writes its partials to a workspace, fences them and counts itself on a
        semaphore, and the last block to arrive reads them all and holds the total; its
        readers run in that block only (`blockIdx.x == tp_last_x_T`, as nvFuser's
        ThreadPredicateMap predicates a grid reduction's consumers). An allreduce waits
        instead (nvFuser's persistent gridReduce and grid_sync::sync): every block counts
        itself and spins until the semaphore shows all arrived, then combines every partial
        itself. A spinning block holds its SM, so the blocks it waits for must already be
        resident: tileproof launches such a kernel with cuLaunchCooperativeKernel, which
        refuses a grid the GPU cannot hold at once (an InputError at run) instead of hanging,
        and which takes no cluster dimensions. A total in global memory would be stored by
        one block after the barrier and read by the others with nothing ordering the two.
        Every thread of every block must reach the combine (its barriers), which a
        warp-specialized kernel's returning producer does not. REDUCTION-GRID-WORKSPACE
        proves the semaphore's count; GLOBAL-VISIBILITY, SMEM-BLOCK-VISIBILITY and
        THREAD-VISIBILITY that each reader reads what its own block stored. Two grid
        reductions count on two semaphores, and the block that arrives last at one need not be
        the block that arrives last at the other, so no block need hold both totals; a group's
        round counts every member's partials on one semaphore (an allreduce group: one barrier),
        and its last block holds every member's total. A grid Welford writes each field of its
        states to a workspace of its own and counts once on its leader's semaphore, as a round
        does; its last block combines them by Chan's formula in rank order, the same bits
        whichever block arrives last, an empty partial (N = 0) leaving the state unchanged.
    Example:
        fusion, t1, t3 = grid_allreduce("sum_then_divide")
        fusion.cluster_dims = (2, 1, 1)  # an allreduce's barrier needs a cooperative launch
    Fix:
        fusion, t1, t3 = grid_allreduce("sum_then_divide")
    References:
        CUDA C++ Programming Guide 7.5 (memory fence functions: the "last block" sum of
        threadFenceReduction), 7.14 (atomicAdd) and the cooperative launch of 8.7 (Cooperative
        Groups: grid synchronization needs every block resident); CUDA Driver API
        cuLaunchCooperativeKernel (CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE); nvFuser
        runtime/grid_reduction.cu (gridReduce, PERSISTENT_REDUCTION), runtime/grid_sync.cu,
        runtime/compiled_kernel.cpp (validateCooperativeLaunch),
        device_lower/analysis/thread_predicate.cpp (ThreadPredicateMap) and, for a group's round,
        runtime/grid_reduction.cu (gridReduceGroup) and csrc/device_lower/pass/index.cpp
        (handleGridReduction: a GroupedGridReduction's one sync buffer);
        docs/hardware.md#reductions-across-threads-and-blocks
    """
    # Formal statement: none, structural: for each reduction tensor T with a reduction loop ID on
    #   BIDx/BIDy/BIDz and readers R = {S : T in read_totals(S)}: if some S in R has
    #   blocks(T) & bound(S) != {} (an allreduce): cluster_dims = (1, 1, 1), memory(T) in {Local,
    #   Shared}, and each S in R is no MmaOp or tensor memory access with
    #   |{round(U) : U in last_block_totals(S)}| <= 1; else each S in R is no grid reduction, MmaOp or
    #   tensor memory access, {round(U) : U in last_block_totals(read_totals(S))} = {round(T)}, and
    #   if R != {}: entrance_loops(T) = {} and S's loops include T's loops left of its first reduction
    #   axis that are no thread or block index; always: not mma(T), no warp specialization, no
    #   broadcast loop ID in T, and the grid combines of round(T) are adjacent statements in one loop
    #   path (round: execution/grid_reduction.py grid_round); a Welford output T: allreduce(T) when any
    #   of its siblings' totals is read spread, and then the allreduce's conditions on T
    order = execution_order(ctx.fusion)
    yield from report_problems("REDUCTION-GRID", reduction.grid_problems(ctx.fusion, order))


@rule("REDUCTION-GRID-WORKSPACE", family="reduction", premises=("REDUCTION-GRID", "REDUCTION-ACCUMULATOR"))
def reduction_grid_workspace(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A grid reduction's semaphore counts every block of a segment without wrapping.

    What it checks:
        For every grid reduction (execution/grid_reduction.py), over all admitted sizes: the
        number of blocks in a segment (the product of the grid dimensions its reduction axes
        are bound to) is at most 2^32 - 1, what the 32-bit semaphore that counts their
        arrivals holds; for an allreduce (its total read in every block), at most 2^31, the
        count its barrier's generation bit tells apart. The rest of the workspace's layout holds by construction and is
        checked by brute force in tests/rules/test_grid_reduction.py: each partial's slot is a
        mixed-radix number (entrance, segment, rank, lane, register), every digit below its
        radix, so two writers share a slot only if they are the same writer, every slot lies
        in the workspace, the last block reads each, and each (entrance, segment) has its own
        semaphore (a group's round: each member its own workspace, all one semaphore, counted
        once per block for all of them; a grid Welford: its avg, M2 and N workspaces at the
        same slots, its leader's semaphore, proved once for the three outputs).
    Why the hardware needs it:
        The block that reads ranks - 1 from the semaphore combines the segment's partials.
        An atomicAdd on a 32-bit counter wraps past 2^32 - 1, and a grid may have up to
        (2^31 - 1) * 65535 * 65535 blocks: a reduction over BIDx and BIDy can have more
        blocks per segment than the counter holds, and no block would read ranks - 1. An
        allreduce's barrier (nvFuser's grid_sync::sync) adds 1 per block but 2^31 - (ranks - 1)
        for the block of the last rank: all arrivals add 2^31 and flip bit 31, which the
        waiting blocks watch; with ranks above 2^31 some proper subset of arrivals would flip
        it too and release the blocks before every partial is written. Each use leaves the
        low 31 bits as it found them, so a serial loop's next entrance and the next launch
        wait for the next flip.
    Example:
        with tp.Fusion("sum_over_a_2d_grid") as fusion:
            t0 = tp.make_tensor(["M", "N"]); fusion.add_input(t0)
            t1 = tp.sum(t0, [0, 1]); fusion.add_output(t1)
        fusion.assume("M <= 65535")
        t1.axis(0).parallelize(tp.ParallelType.BIDy)
        t1.axis(1).parallelize(tp.ParallelType.BIDx)
    Fix:
        with tp.Fusion("sum_over_a_2d_grid") as fusion:
            t0 = tp.make_tensor(["M", "N"]); fusion.add_input(t0)
            t1 = tp.sum(t0, [0, 1]); fusion.add_output(t1)
        fusion.assume("M <= 65535")
        fusion.assume("N <= 65535")
        t1.axis(0).parallelize(tp.ParallelType.BIDy)
        t1.axis(1).parallelize(tp.ParallelType.BIDx)
    References:
        CUDA C++ Programming Guide 7.14.1.1 (atomicAdd on unsigned int wraps) and
        "Technical Specifications per Compute Capability" (grid dimensions); nvFuser
        csrc/device_lower/pass/index.cpp (getGridCommWorkBufferSize, getGridSyncBufferSize:
        one buffer and one semaphore per entrance); docs/hardware.md#reductions-across-threads-and-blocks
    """
    # Formal statement: for each grid reduction T, for all admitted sizes s:
    #   ranks(s) = product of launch(p, s) over the block types p T reduces <= 2^32 - 1,
    #   and <= 2^31 for an allreduce (its barrier's arrivals add 2^31 in all, less in any proper subset);
    #   a Welford's outputs: for its leader only (one semaphore for the three)
    for r in grid_reductions(execution_order(ctx.fusion)):
        tv = r.tensor
        if is_welford(tv) and welford_leader(tv) is not tv:
            continue  # a Welford's outputs count on their leader's one semaphore: proved once, for the three
        allreduce = is_allreduce(tv)
        limit = ALLREDUCE_LIMIT if allreduce else SEMAPHORE_LIMIT
        what = "the barrier of a 32-bit semaphore tells apart" if allreduce else "a 32-bit semaphore counts"
        ranks = grid_layout(r, ctx.block_dims, {uid: var(f"entrance {k}") for k, (uid, _) in
                                                enumerate(entrance_loops(r))}).ranks
        axis = next(i for i in tv.loop if i.is_reduction and i.parallel_type in r.blocks)
        over = ", ".join(p.value for p in r.blocks)
        who = tv.name if not is_welford(tv) else \
            f"{tv.name} (a Welford: {', '.join(t.name for t in welford_siblings(tv))} count on one semaphore)"
        q = ctx.query([ranks, const(limit)])
        out = q.prove(q.le(ranks, const(limit)), values={"blocks per segment": ranks})
        yield from report_values(
            ctx, "REDUCTION-GRID-WORKSPACE", out, f"that {tv.name}'s segments fit a 32-bit semaphore",
            lambda v, when, who=who, over=over, limit=limit, what=what: (
                f"{who} is reduced over {over}: a segment has {v['blocks per segment']} blocks{when}, more "
                f"than {what} ({limit})"),
            ["blocks per segment"],
            hint=f"bound the extents on {over} with fusion.assume (their product at most {limit}), or "
                 f"reduce over fewer block types and rfactor the rest onto threads or loops",
            tensor=tv.name, ids=[axis.name], location=axis.parallel_origin or axis.origin or tv.origin)


@rule("ONLINE-RESCALE", family="reduction", premises=("MMA-SHAPE",))
def online_rescale(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """An online max's consumers inside its loop, and the sums it rescales, compute what the fusion means.

    What it checks:
        For every online max m (tp.TensorView.set_online): m reduces one serial loop (the loop over
        tiles; the tile's part rfactored). Each sum T it rescales reduces one serial loop too, the
        same loop as m, and T's terms are exp2(a m) times values m does not change, with a number
        a < 0: walking the ops from T's terms to m, m appears only in the exponent of exp2 or exp,
        as a number times m plus a value m does not change, and the rest multiplies, divides,
        casts, broadcasts, copies or sums such terms. Every value computed inside m's loop from its
        running value reaches only those sums: it is no output and nothing after the loop reads it.
        Where an accumulator is an MmaOp, the rescale's reads are proved over its C fragment, so a
        fusion whose MmaOp MMA-SHAPE refuses is that rule's (its premise).
    Why the hardware needs it:
        Inside the loop m holds the max of the tiles so far, not the row's max. Each iteration
        multiplies T's accumulator by exp2(a (m_new - m_old)) before adding its terms, which
        brings every earlier term to the new max only if a term is exp2(a m) times a constant;
        after the loop T is then exactly the sum at the final max. A term of another form (exp(x - m)
        - 1, a max of the terms) is scaled wrong, and a value read outside those sums keeps the max
        of its own iteration: the kernel would return a number the fusion does not mean.
    Example:
        fusion, x, m, p, l, lse = online_logsumexp(
            "online_shifted", term=lambda x, m_b: tp.sub(tp.exp(tp.sub(x, m_b)), 0.5))
    Fix:
        fusion, x, m, p, l, lse = online_logsumexp("online_logsumexp")
    References:
        Milakov and Gimelshein, "Online normalizer calculation for softmax" (2018); FlashAttention
        (Dao et al. 2022), Algorithm 1; docs/attention.md#the-online-softmax
    """
    # Formal statement: none, structural (execution/online.py): for online max m over serial loop L and each
    #   rescaled sum T: T reduces exactly L, and T's terms = exp2(a m) * f with f independent of m and a < 0,
    #   by induction over the ops from T's input to m; no value computed in L from m reaches anything but them
    yield from report_problems("ONLINE-RESCALE", online_problems(ctx.fusion))
    for r in rescaled_sums(ctx.fusion).values():
        if not r.in_place:  # a sum's rescale reads the max as its second input: THREAD-VISIBILITY proves it
            continue
        if not well_formed(r.tensor):  # no instruction tile bound to Mma, no C fragment: MMA-SHAPE says why
            continue
        # an MmaOp's: each accumulator element, where its store would store it, reads the max's growth
        # at its row in the thread that holds the element: the max's store wrote it there
        tv = r.tensor
        plain = mma_execution(tv, ctx.block_dims, "C")
        reader = replace(plain, conds=tuple(rescale_conds(tv, plain, plain.conds)))
        at = rescale_indices(tv, reader)
        read = [at[i.uid] for i in r.max.logical]
        out = prove_owned_read(ctx, reader, r.max, read)
        yield from report_outcome(
            "ONLINE-RESCALE", out, f"that each thread holds {r.max.name}'s growth at its rows of {tv.name}",
            lambda out, tv=tv, m=r.max: finding(
                "ONLINE-RESCALE", f"{tv.name}'s accumulators are rescaled by {m.name}'s growth at their rows, but "
                f"a thread that holds an accumulator element does not hold {m.name}'s value for that row "
                f"({m.name}'s layout differs from {tv.name}'s C fragment)", tensor=tv.name,
                counterexample=dict(out.values), location=m.online_origin,
                hint=f"lay {m.name} out as the fragment's rows (tp.schedule_mma_fragment(..., \"C\", quads=True) "
                     f"on the tile's row reduction, then rfactor)"),
            tensor=tv.name, location=r.max.online_origin)
