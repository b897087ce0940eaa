"""wgmma's shared-memory operands: the descriptor the code generator builds from the schedule
(execution/wgmma_operands.py) makes the hardware read each operand element where the schedule
put it; and its asynchrony: the fences and waits placed around it (execution/wgmma_order.py)
order it with the threads' own register accesses and the stage releases
(verifier/analysis/wgmma_order.py).
"""

from __future__ import annotations

from collections.abc import Iterator

from ..analysis.async_order import order_findings
from ..analysis.smem_operands import LAYOUT_PREMISES, descriptor_ops, layout_findings, operands
from ..analysis.wgmma_order import check_order
from ..context import VerifyContext
from ..diagnostics import Diagnostic
from ..registry import rule


def _wgmma_ops(ctx: VerifyContext):
    """The wgmma MmaOps whose B is a shared tile (their A a shared tile or a register fragment:
    MMA-OPERAND-LAYOUT refuses the others)."""
    return descriptor_ops(ctx, "wgmma")


@rule("WGMMA-SMEM-LAYOUT", family="wgmma", premises=LAYOUT_PREMISES)
def wgmma_smem_layout(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """wgmma reads each operand element where the schedule's shared-memory layout put it, through a valid descriptor.

    What it checks:
        For every wgmma MmaOp (a Hopper_64_N_16 macro), operand A (64 x 16; unless A is a register
        fragment, wgmma's RS form, which MMA-OPERAND-LAYOUT proves) and B (N x 16), every
        instruction instance (a point of the op's other loops) and element (mn, k): the
        address the hardware computes from the descriptor the code generator builds (start =
        element (0, 0)'s address, SBO = the distance of its 8-row groups, the layout = the
        TMA's swizzle, K-major) equals the schedule's byte offset of element (mn, k):
        Sw(start + (mn % 8) S + (mn / 8) SBO + k es) == offset(mn, k) (PTX's canonical layouts;
        without swizzle, 8 x 16-byte core matrices at LBO and SBO; an MN-major swizzled tile,
        element (1, 0) next to (0, 0), by the MN-major layout: SBO over 8 K rows, LBO over
        spans of MN, read with the transpose bit). One proof covers the
        major-ness, the swizzle mode, the K steps inside a swizzled row and sub-tiles. The
        descriptor itself is proved valid with it: SBO (and LBO without swizzle) is the same
        at every instance, a multiple of 16 below 2^18 (the fields hold bytes / 16 in 14
        bits), and every start is a multiple of 16 on row 0 of a swizzle pattern (the
        descriptor's base offset is 0). These are WGMMA-DESCRIPTOR's conditions: a tile the
        TMA writes into a buffer tileproof places cannot break them alone, so they are proved
        here, with the layout.
    Why the hardware needs it:
        wgmma does not take addresses per element: it derives all of them from the
        descriptor's start, LBO, SBO and layout fields, XORing absolute address bits. A tile
        stored any other way (row-major rows of 128 bytes without the swizzle, an unswizzled
        M-major tile, a swizzle atom split across tiles) is read as other elements, silently. The
        fields drop the low 4 bits and anything from bit 18 on, and a base offset of 0 tells
        the hardware the pattern starts at the tile (a 128-byte-aligned SW128 tile reads back
        wrong).
    Example:
        fusion, sa, sb, d, out = one_wgmma("hopper_tile")
        for t in (sa, sb):  # plain 128-byte rows: no swizzle, not core matrices
            for i in t.get_loop_domain()[1:]:  # the broadcast axis first: not part of the box
                i.parallelize(tp.ParallelType.Bulk)
    Fix:
        fusion, sa, sb, d, out = one_wgmma("hopper_tile")
        for t in (sa, sb):  # rows of 128 bytes, 16-byte chunk c of row r at c ^ (r % 8): TMA's 128B swizzle
            t.split(-2, 8).split(-2, 1).split(-1, 8)
            t.swizzle(tp.SwizzleType.XOR, -4, -2)
            for i in t.get_loop_domain()[1:]:  # the broadcast axis first: not part of the box
                i.parallelize(tp.ParallelType.Bulk)
            t.set_allocation_domain(t.get_loop_domain(), True)
    References:
        PTX ISA 9.7.15.5.1.2 (shared memory matrix layout, matrix descriptor); CUTLASS
        include/cute/atom/mma_traits_sm90_gmma.hpp (make_gmma_desc); docs/hardware.md#wgmma-shared-memory-operands
    """
    # Formal statement:
    #   forall instance, mn < rows, k < 16:
    #     Sw(start + canonical(mn, k, SBO, LBO)) == offset_schedule(mn, k)   (hw/wgmma.py, execution/wgmma_operands.py)
    #   and the descriptor: offset(8, 0) == offset(0, 0) + SBO, start % 16 == 0, (start / 128) % 8 == 0 if swizzled
    for tv in _wgmma_ops(ctx):
        for op in operands(ctx, tv):
            yield from layout_findings(
                ctx, "WGMMA-SMEM-LAYOUT", tv, op,
                hint=(f"allocate {op.tensor.name} as TMA's swizzled boxes of K-major rows: rows of one swizzle span of "
                      f"K (128 bytes), the 16-byte chunks XOR-swizzled by the row within 8 "
                      f"(split(-2, 8).split(-2, 1).split(-1, 16 bytes), swizzle(XOR, -4, -2)), as "
                      f"MmaInputSmemSwizzle.B128 lays them out"))


_OBLIGATIONS = {
    1: "a wgmma.fence between the threads' register writes and the wgmma reading those registers",
    2: "a wgmma.commit_group and a wgmma.wait_group covering a batch before the threads touch its accumulators "
       "or its A registers (RS)",
    3: "a wgmma.wait_group covering every batch that read a stage before the arrive releasing it",
}


@rule("WGMMA-ASYNC-ORDER", family="wgmma")
def wgmma_async_order(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """wgmma's fences and waits order the asynchronous MMA with the threads' registers and the stage releases.

    What it checks:
        On the kernel's loop nest with the fences, waits and releases the code generator places
        (execution/wgmma_order.py, execution/warp_roles.py), run over every path: each loop from the
        state before it joined with the state after each iteration until nothing changes, each
        warp role from the state where the roles split. Three of PTX's obligations, for every
        path: (1) a wgmma.fence comes between any register write to a wgmma's accumulators
        or to its A fragment (wgmma's RS form: A in registers) (their zeroing, their load, the
        kernel's start) and that wgmma; (2) a thread's own statement (the epilogue's cast, the
        next tile's zeroing, the next A fragment's load) reads or writes the accumulators, or the
        A registers of an RS wgmma, only after a wgmma.commit_group and a wgmma.wait_group that
        leave no batch using them in flight;
        (3) the consumers' arrive releasing a stage (warp specialization, mbarrier WAR) comes
        after a wgmma.wait_group that leaves in flight only the batches of the iterations after
        that stage's datum (one per iteration). The fourth obligation, a fence.proxy.async after
        generic-proxy writes to a wgmma operand, is MMA-OPERAND-LAYOUT's: wgmma reads only tiles
        the TMA loads. The counterexample names the statement, the batch in flight (and how many
        groups were committed after it) and the path: which role, which iteration of which loop.
    Why the hardware needs it:
        wgmma.mma_async runs asynchronously: it reads its accumulators and shared tiles, and
        writes the accumulators, at any time until a wgmma.wait_group covers its committed group;
        so it reads an RS wgmma's A registers (PTX: accessing the accumulators or the registers
        holding A's fragment before that wait is undefined).
        A register write not fenced may be seen by it or not; a cast of the accumulators before
        the wait reads partial sums (Triton PR 8964: a persistent epilogue without the wait); a
        release before the wait lets the producer overwrite a tile the tensor cores still read
        (nvFuser issue 3561).
    Example:
        none: tileproof places wgmma's fences, commits and waits itself, so no schedule written
        with today's API fails this rule; it proves the placement on every wgmma schedule
        (tests/rules/test_wgmma_async_order.py removes or moves them and shows the paths it
        then reports)
    Fix:
        none: a report of this rule on an unmodified schedule is a tileproof bug
    Reported with:
        PIPELINE-WAR
    References:
        PTX ISA 9.7.15.7.1 (wgmma.fence), 9.7.15.7.2 (wgmma.commit_group), 9.7.15.7.3
        (wgmma.wait_group); docs/hardware.md#wgmma-asynchrony
    """
    # Formal statement: an abstract run of the placed nest (verifier/analysis/wgmma_order.py): for every
    #   path, (1) no wgmma after a register write to its operands without a WgmmaFence between; (2) no
    #   thread statement touching an accumulator or A register while a batch using it is uncommitted, or
    #   committed and not completed by a later wait_group N (N newer groups); (3) at a StageRelease of lag L, every batch
    #   reading shared tiles is committed with fewer than L newer groups (the tail release: none)
    if not any(True for _ in _wgmma_ops(ctx)):
        return
    yield from order_findings(ctx, "WGMMA-ASYNC-ORDER", check_order, _OBLIGATIONS, "wgmma's fences and waits")
