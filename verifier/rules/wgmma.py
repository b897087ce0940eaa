"""wgmma's shared-memory operands: the descriptor the code generator builds from the schedule
(execution/wgmma_operands.py) makes the hardware read each operand element where the schedule
put it; and its asynchrony: the fences and waits placed around it (execution/wgmma_order.py)
order it with the threads' own register accesses and the stage releases
(verifier/analysis/wgmma_order.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import z3

from ...model.expr import const, var
from ...execution.loops import execution_order
from ...model.mma_op import ELEMENT_VARS, LANE, is_mma
from ...execution.mma import fragments, is_mma_sync, well_formed
from ...execution.wgmma_operands import wgmma_operand
from ...hw.wgmma import CORE_ROW, FIELD_LIMIT, SWIZZLE_LINE, swizzle_lines
from ...execution.nest import placed_nest
from ..analysis.wgmma_order import check_order
from ..context import VerifyContext
from ..diagnostics import Diagnostic
from ..findings import finding, report_values
from ..registry import rule

MN, K = "tp_mn", "tp_k"  # the operand element's row (M of A, N of B) and K index in the instruction tile


def _layout_name(op) -> str:
    return f"{op.swizzle.swizzle_bytes}-byte swizzle" if op.swizzle.value else "no swizzle (8 x 16-byte core matrices)"


def _wgmma_ops(ctx: VerifyContext):
    """The wgmma MmaOps whose B is a shared tile (their A a shared tile or a register fragment:
    MMA-OPERAND-LAYOUT refuses the others)."""
    order = ctx.memo(("execution-order",), lambda: execution_order(ctx.fusion))
    for tv in order:
        wgmma = is_mma(tv) and tv.definition.macro is not None and not is_mma_sync(tv.definition.macro)
        if wgmma and well_formed(tv) and tv.definition.inputs[1].memory_type.name == "Shared" and \
                tv.definition.inputs[0].memory_type.name in ("Shared", "Local"):
            yield tv


def _operands(ctx: VerifyContext, tv):
    """tv's operands read through descriptors: A and B, or B alone where A is in registers (RS)."""
    frag = fragments(tv)
    return ctx.memo(("wgmma-operands", tv.name),
                    lambda: [wgmma_operand(tv, ctx.block_dims, r) for r in "AB" if frag.in_shared(r)])


@rule("WGMMA-SMEM-LAYOUT", family="wgmma")
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
        for op in _operands(ctx, tv):
            t = op.tensor
            invalid = list(_descriptor(ctx, tv, op))
            yield from invalid
            if invalid:
                continue  # no one descriptor to compare the layout with
            lbo, sbo = op.lbo, op.sbo
            mn, k = var(MN), var(K)
            got, want = op.hardware(mn, k), op.byte_offset(mn, k)
            ranges = {**op.ex.ranges, MN: const(op.rows), K: const(op.depth)}
            q = ctx.query([got, want], ranges)
            out = q.prove(q.eq(got, want), values={"mn": mn, "k": k, "schedule": want, "hardware": got})
            yield from report_values(
                ctx, "WGMMA-SMEM-LAYOUT", out, f"that {tv.name}'s wgmma reads {t.name} where the schedule put it",
                lambda v, when, tv=tv, t=t, op=op, sbo=sbo: (
                    f"{tv.name}'s wgmma reads {op.role}[{v.get('mn')}, {v.get('k')}] of {t.name} at byte "
                    f"{v.get('hardware')} of its tile{when}, where the schedule stores byte {v.get('schedule')}: the "
                    f"{op.swizzle.swizzle_bytes}-byte {'swizzled' if op.swizzle.value else 'unswizzled'} {op.major}-major layout "
                    f"of the descriptor (SBO {sbo}) is not how {t.name} is allocated"),
                ("mn", "k", "schedule", "hardware"),
                point=tuple(v for v in ranges if v not in (MN, K, ELEMENT_VARS[op.role], LANE.cuda_name)),
                hint=(f"allocate {t.name} as TMA's swizzled boxes of K-major rows: rows of one swizzle span of K "
                      f"(128 bytes), the 16-byte chunks XOR-swizzled by the row within 8 "
                      f"(split(-2, 8).split(-2, 1).split(-1, 16 bytes), swizzle(XOR, -4, -2)), as "
                      f"MmaInputSmemSwizzle.B128 lays them out"),
                notes=[(f"descriptor: {_layout_name(op)}, SBO {sbo} bytes, LBO {lbo} bytes; element (mn, k) of "
                        f"{op.role} is {'row m' if op.role == 'A' else 'column n'}, K index k")],
                tensor=t.name, location=t.origin)


def _descriptor(ctx: VerifyContext, tv, op) -> Iterator[Diagnostic]:
    """The descriptor of op (a WgmmaOperand) is valid at every instance: encodable fields, SBO
    the same everywhere, every start a multiple of 16 on a swizzle pattern's row 0."""
    t = op.tensor
    where = {"tensor": t.name, "location": t.origin}
    measured = op.measured()
    fields = op.fields()
    bad = [(n, v) for n, v in fields if v % CORE_ROW or not 0 <= v < FIELD_LIMIT]
    for name, value in bad:
        yield finding("WGMMA-SMEM-LAYOUT", (
            f"{tv.name}'s wgmma operand {op.role} ({t.name}) needs {name} = {value} bytes, which the "
            f"descriptor's field (bytes / 16 in 14 bits) cannot hold"),
            hint=f"lay {t.name} out so its {name} is a multiple of 16 below 2^18",
            counterexample={name.lower(): value}, **where)
    start = op.start
    ranges = dict(op.ex.ranges)
    q = ctx.query([start, *measured.values()], ranges)
    claim = z3.And(q.eq(start % CORE_ROW, const(0)),
                   *[q.eq(measured[n], measured["start"] + const(v)) for n, v in fields])
    if op.swizzle.value:
        claim = z3.And(claim, q.eq((start // SWIZZLE_LINE) % swizzle_lines(op.swizzle), const(0)))
    elements = op.field_elements()
    shown = {f"element {elements[n]}": measured[n] for n, _ in fields}
    out = q.prove(claim, values={"start": start, "element (0, 0)": measured["start"], **shown})
    yield from report_values(
        ctx, "WGMMA-SMEM-LAYOUT", out, f"that {tv.name}'s {op.role} descriptors have one SBO and start on a "
                                      f"pattern's row 0",
        lambda v, when, tv=tv, t=t, op=op: (
            f"{tv.name}'s wgmma operand {op.role} ({t.name}) at this instance{when} starts at byte "
            f"{v.get('start')} of its buffer, element (0, 0) at byte {v.get('element (0, 0)')}, "
            + ", ".join(f"element {elements[n]} at byte {v.get(f'element {elements[n]}')} ({n} {value} at the "
                        f"first instance)" for n, value in fields)
            + f": the start must be a multiple of 16 on row 0 of a {op.swizzle.swizzle_bytes}-byte swizzle pattern "
              f"(base offset 0), and each offset one constant"),
        ("start", "element (0, 0)", *shown), point=tuple(ranges),
        hint=f"allocate {t.name}'s rows in groups of 8 at one stride, each instruction's tile starting at a "
             f"multiple of 8 rows of the swizzle span: TMA's swizzled boxes",
        **where)



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
    nest_ = placed_nest(ctx.fusion)
    if nest_ is None:
        return
    for v in check_order(nest_.tree, nest_.hazards, nest_.label):
        yield finding(
            "WGMMA-ASYNC-ORDER", v.message,
            notes=[f"obligation {v.obligation}: {_OBLIGATIONS[v.obligation]}",
                   "tileproof places these itself: this is a tileproof bug, please report it"],
            counterexample=v.counterexample,
            hint="report the schedule: tileproof places wgmma's fences and waits itself",
            tensor=None, location=v.location)
