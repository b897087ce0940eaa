"""tcgen05.mma (Blackwell, sm_100a): its shared-memory operands read through descriptors where the
schedule put them (the proof WGMMA-SMEM-LAYOUT makes for wgmma, verifier/analysis/smem_operands.py),
its accumulators in tensor memory where the schedule's allocation has them (execution/tcgen05.py),
and its asynchrony: the commit to an mbarrier after each batch and the wait for it before the
accumulators are read (execution/tcgen05_order.py, proved by verifier/analysis/tcgen05_order.py).
The target, dtype, shape and operand-memory conditions are the MMA rules' (verifier/rules/mma.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import z3

from ...execution.loops import execution_order
from ...execution.mma import is_tcgen05, well_formed
from ...execution.tcgen05 import COL, ROW, accumulator_cells
from ...execution.tmem_regions import region_of
from ...model.mma_op import is_mma
from ...model.types import MemoryType
from ..analysis.async_order import order_findings
from ..analysis.smem_operands import LAYOUT_PREMISES, descriptor_ops, layout_findings, operands
from ..analysis.tcgen05_order import check_order
from ..context import VerifyContext
from ..diagnostics import Diagnostic
from ..findings import report_values
from ..registry import rule


def _accumulators(ctx: VerifyContext):
    """The tcgen05.mma MmaOps whose fragments are defined and whose output is in tensor memory
    (MMA-TARGET, MMA-SHAPE and MMA-WARP-COLLECTIVE report the others)."""
    order = ctx.memo(("execution-order",), lambda: execution_order(ctx.fusion))
    for tv in order:
        if is_mma(tv) and is_tcgen05(tv.definition.macro) and well_formed(tv) and \
                tv.memory_type is MemoryType.Tensor:
            yield tv


@rule("TCGEN05-SMEM-LAYOUT", family="tcgen05", premises=LAYOUT_PREMISES)
def tcgen05_smem_layout(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """tcgen05.mma reads each operand element where the schedule's shared-memory layout put it, through a valid descriptor.

    What it checks:
        For every tcgen05.mma MmaOp (a Blackwell1CTA_128_N_16 macro), operand A (128 x 16) and
        B (N x 16), every instruction instance and element (mn, k): the address the hardware
        computes from the shared-memory descriptor the code generator builds (start = element
        (0, 0)'s address, SBO, LBO, the swizzle of the TMA that fills the tile, K- or MN-major)
        equals the schedule's byte offset of element (mn, k), and the descriptor is valid (SBO
        and LBO one constant, multiples of 16 below 2^18; every start a multiple of 16 on row 0 of
        a swizzle pattern, base offset 0). The same proof as WGMMA-SMEM-LAYOUT: tcgen05.mma reads
        PTX's canonical layouts through the same fields; its descriptor differs in encoding only
        (version 1 at bits 46-47, the swizzle as a 3-bit mode at bits 61-63: hw/tcgen05.py).
    Why the hardware needs it:
        tcgen05.mma takes no per-element addresses: it derives every one from the descriptor,
        XORing absolute address bits by the swizzle mode. A tile stored any other way (plain rows
        without the swizzle or the core matrices) is read as other elements, silently.
    Example:
        target = "sm_100a"
        fusion, sa, sb, d, r, out = tcgen05_tile("tcgen05_tile", swizzle=None)  # plain 32-byte rows
    Fix:
        target = "sm_100a"
        fusion, sa, sb, d, r, out = tcgen05_tile("tcgen05_tile")  # as TMA's 32-byte swizzle writes them
    References:
        PTX ISA 9.7.16.4.1 (shared memory descriptor), 9.7.15.5.1.2 (the canonical layouts);
        CUTLASS include/cute/arch/mma_sm100_desc.hpp (UMMA::SmemDescriptor);
        docs/hardware.md#tcgen05mma-blackwell
    """
    # Formal statement:
    #   forall instance, mn < rows, k < 16:
    #     Sw(start + canonical(mn, k, SBO, LBO)) == offset_schedule(mn, k)   (hw/wgmma.py, execution/wgmma_operands.py)
    #   and the descriptor: offset(8, 0) == offset(0, 0) + SBO, start % 16 == 0, (start / 128) % 8 == 0 if swizzled
    for tv in descriptor_ops(ctx, "tcgen05.mma"):
        for op in operands(ctx, tv):
            yield from layout_findings(
                ctx, "TCGEN05-SMEM-LAYOUT", tv, op,
                hint=(f"allocate {op.tensor.name} as TMA's swizzled boxes: "
                      f"{op.tensor.name}.apply_mma_swizzle_for_tma_load(tp.MmaInputSmemSwizzle.B32) (or B64, B128 for "
                      f"wider rows of K), its box axes Bulk, set_allocation_domain(get_loop_domain(), True)"))


@rule("TCGEN05-ACCUMULATOR", family="tcgen05")
def tcgen05_accumulator(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """tcgen05.mma's accumulators lie in tensor memory where the schedule's allocation has them.

    What it checks:
        For every tcgen05.mma MmaOp (M = 128, cta_group::1, float32 accumulators), every
        instruction instance and element (m, n) of its 128 x N tile: the schedule's tensor-memory
        cell of D[m, n] (the lane from the allocated IDs left of the dimension separator, the
        32-bit column from those right of it) is lane m, column c0 + n, where c0 is the column of
        D[0, 0] (the address the instruction is given); and that column lies inside the tensor's
        tcgen05.alloc region (its columns, rounded up to a power of two of at least 32: N
        columns for N float32 accumulators). So D takes the 128 lanes and N consecutive columns
        the hardware writes.
    Why the hardware needs it:
        tcgen05.mma M = 128 writes row i of D to lane i and its column j to the 32-bit column j
        from D's address (the data path layout of M = 128); a tcgen05.ld reads the cells the
        schedule's allocation names. An accumulator laid out otherwise (N on the lanes, rows
        spread over columns) is read back as other elements of D, silently.
    Example:
        target = "sm_100a"
        fusion, sa, sb, d, r, out = tcgen05_tile("tcgen05_tile", n=128)
        d.set_allocation_domain([d.axis(1), d.axis(0), d.axis(2)], True)  # N on the lanes
        for t in (r, out):  # a thread per column n of D, reading lane n
            t.axis(0).parallelize(tp.ParallelType.Serial)
            t.axis(1).parallelize(tp.ParallelType.TIDx)
    Fix:
        target = "sm_100a"
        fusion, sa, sb, d, r, out = tcgen05_tile("tcgen05_tile", n=128)  # M on the lanes: a thread per row
    References:
        PTX ISA 9.7.16.10.8 (data path layout D, M = 128), 9.7.16.7.1 (tcgen05.alloc);
        docs/hardware.md#tcgen05mma-blackwell
    """
    # Formal statement: for every tcgen05.mma output D, for all admitted sizes, instances i, m < 128, n < N:
    #   lane_alloc(D, i, m, n) == m and column_alloc(D, i, m, n) == column_alloc(D, i, 0, 0) + n
    #   and column_alloc(D, i, m, n) < window(D)   (execution/tcgen05.py; execution/tmem_regions.py)
    for tv in _accumulators(ctx):
        cells = ctx.memo(("tcgen05-cells", tv.name), lambda tv=tv: accumulator_cells(tv, ctx.block_dims))
        lane, column = cells.hardware()
        window = region_of(ctx.fusion, tv.name).window(tv.name)
        ranges = cells.ranges
        q = ctx.query([cells.lane, cells.column, lane, column, window], ranges)
        claim = z3.And(q.eq(cells.lane, lane), q.eq(cells.column, column), q.lt(cells.column, window))
        out = q.prove(claim, values={"m": lane, "n": column - cells.first_column, "lane": cells.lane,
                                     "column": cells.column, "first column": cells.first_column,
                                     "columns": window})
        yield from report_values(
            ctx, "TCGEN05-ACCUMULATOR", out, f"that {tv.name}'s tensor-memory allocation is tcgen05.mma's D layout",
            lambda v, when, tv=tv: (
                f"{tv.name}'s tcgen05.mma writes D[{v.get('m')}, {v.get('n')}] to lane {v.get('m')}, column "
                f"{v.get('first column', 0) + v.get('n', 0)}{when}; {tv.name}'s allocation puts it at lane "
                f"{v.get('lane')}, column {v.get('column')}"
                + (f", past the {v.get('columns')} columns allocated" if v.get("column", 0) >= v.get("columns", 1 << 30)
                   else "")),
            ("m", "n", "lane", "column", "first column", "columns"),
            point=_instance(cells),
            hint=(f"allocate {tv.name} as [M, N] with its 128-row M axis alone left of the dimension separator: "
                  f"{tv.name}.set_allocation_domain([M, N, K], True) with the Mma axes in that order and "
                  f"{tv.name}.set_tmem_dim_sep_pos(1) (the M axis on the lanes, N on the columns)"),
            notes=[f"tcgen05.mma M = 128 (cta_group::1) keeps D[m, n] in lane m, column n from its D address, one "
                   f"32-bit column per float32 accumulator"],
            tensor=tv.name, location=tv.memory_origin or tv.origin)


def _instance(cells) -> tuple[str, ...]:
    """The variables of an instruction instance the accumulator's cells depend on (its loop and
    block indices), for the counterexample."""
    used = cells.lane.free_vars() | cells.column.free_vars()
    return tuple(k for k in cells.ranges if k in used and k not in (ROW, COL))


_OBLIGATIONS = {
    1: "a tcgen05.commit after the tcgen05.mma and a wait on its mbarrier before a statement touches the "
       "accumulators",
    2: "a tcgen05.fence::after_thread_sync between that wait and the tcgen05.ld of the accumulators",
    3: "the wait on the commit's mbarrier before a statement rewrites a shared tile the tcgen05.mma reads",
    4: "each wait on a commit's mbarrier for exactly one tcgen05.commit since the previous wait on it",
    5: "no tcgen05.mma in flight at the kernel's end (tcgen05.dealloc frees its accumulators)",
}


@rule("TCGEN05-ASYNC-ORDER", family="tcgen05")
def tcgen05_async_order(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Every reader of a tcgen05.mma's accumulators waits for the MMA's commit, then fences.

    What it checks:
        On the kernel's loop nest with the commits and waits the code generator places
        (execution/tcgen05_order.py: after each batch of tcgen05.mma, the issuing thread's
        tcgen05.commit.cta_group::1.mbarrier::arrive::one to the accumulator's mbarrier, then
        every thread's wait for that phase and tcgen05.fence::after_thread_sync), run over every
        path (each loop from the state before it joined with the state after each iteration
        until nothing changes): (1) a statement reads or writes the accumulators (the TMemLoad's
        tcgen05.ld) only after a commit that follows the last tcgen05.mma into them and a wait
        on that commit's mbarrier; (2) with a tcgen05.fence::after_thread_sync (the wait's, or
        a fenced barrier's) between the wait and the read; (3) a statement rewrites a shared
        tile a tcgen05.mma reads only after that wait; (4) each wait is for exactly one commit
        since the previous wait on its mbarrier (the phase parity it waits for); (5) nothing is
        in flight at the kernel's end. The counterexample names the statement, the MMA in
        flight and the path.
    Why the hardware needs it:
        tcgen05.mma is asynchronous: issued by one thread, it writes its accumulators in tensor
        memory and reads its shared tiles until the mbarrier that a later tcgen05.commit of that
        thread arrives on completes its phase. A tcgen05.ld before that wait reads partial sums;
        without the fence after the wait, the tcgen05.ld may be ordered before it; a wait with
        no commit to wait for hangs the kernel.
    Example:
        none: tileproof places tcgen05.mma's commits and waits itself, so no schedule written
        with today's API fails this rule; it proves the placement on every tcgen05.mma schedule
        (tests/rules/test_tcgen05.py removes or moves the wait and the fence and shows the
        paths it then reports)
    Fix:
        none: a report of this rule on an unmodified schedule is a tileproof bug
    References:
        PTX ISA 9.7.16.6 (tcgen05 memory consistency: the async operations, the pipelined
        ordering, tcgen05.fence), 9.7.16.11.1 (tcgen05.commit); docs/hardware.md#tcgen05mma-blackwell
    """
    # Formal statement: an abstract run of the placed nest (verifier/analysis/tcgen05_order.py): for every
    #   path, (1) no statement touching an accumulator while a tcgen05.mma writing it is uncommitted, or
    #   committed to an mbarrier not waited for since; (2) none between such a wait and a
    #   tcgen05.fence::after_thread_sync; (3) no write of a shared tile a tcgen05.mma in flight reads;
    #   (4) commits since the last wait on the mbarrier == 1 at each wait; (5) nothing in flight at the end
    if not any(True for _ in _accumulators(ctx)):
        return
    yield from order_findings(ctx, "TCGEN05-ASYNC-ORDER", check_order, _OBLIGATIONS, "tcgen05.mma's commits and waits")
