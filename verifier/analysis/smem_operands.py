"""The shared-memory operands of wgmma and tcgen05.mma read through matrix descriptors: the proof
that the descriptor the code generator builds (execution/wgmma_operands.py) makes the hardware read
each operand element where the schedule put it, and that the descriptor is valid. One proof for
WGMMA-SMEM-LAYOUT and TCGEN05-SMEM-LAYOUT: both instructions read PTX's canonical layouts (K- and
MN-major, each swizzle) through the same start, LBO, SBO and base-offset fields (PTX ISA
9.7.15.5.1.2, 9.7.16.4.1); only the encoding differs (hw/wgmma.py, hw/tcgen05.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import z3

from ...execution.loops import execution_order
from ...execution.mma import fragments, instruction_family, well_formed
from ...execution.wgmma_operands import wgmma_operand
from ...hw.wgmma import CORE_ROW, FIELD_LIMIT, SWIZZLE_LINE, swizzle_lines
from ...model.expr import const, var
from ...model.mma_op import ELEMENT_VARS, LANE, is_mma
from ..context import VerifyContext
from ..diagnostics import Diagnostic
from ..findings import finding, report_values

MN, K = "tp_mn", "tp_k"  # the operand element's row (M of A, N of B) and K index in the instruction tile
# the layout rules' premises: a TMA tile whose Bulk IDs are not its box, or a copy outside its tensor or over
# another, is not written where its allocation says, so whether the instruction reads it there has no answer
# (and on such malformed tiles the descriptor proof ran into the solver's limit: 22-36 s a rejection)
TMA_PLACED = ("TMA-WHOLE-TILES", "TMA-BULK-PLACEMENT")
# the layout rules' premises: the TMA tiles placed, and each MmaOp's K steps a serial loop (an instance is
# one wgmma / tcgen05.mma: REDUCTION-PARALLEL refuses a K-step axis bound to threads; fuzz seed 101 case 611,
# mutated, 31 s over such a nest)
LAYOUT_PREMISES = TMA_PLACED + ("REDUCTION-PARALLEL",)


def layout_name(op) -> str:
    return f"{op.swizzle.swizzle_bytes}-byte swizzle" if op.swizzle.value else "no swizzle (8 x 16-byte core matrices)"


def descriptor_ops(ctx: VerifyContext, family: str):
    """The MmaOps of instruction `family` ("wgmma" or "tcgen05.mma") whose B is a shared tile (their
    A a shared tile or, for wgmma, a register fragment: MMA-OPERAND-LAYOUT refuses the others)."""
    order = ctx.memo(("execution-order",), lambda: execution_order(ctx.fusion))
    for tv in order:
        if is_mma(tv) and instruction_family(tv.definition.macro) == family and well_formed(tv) and \
                tv.definition.inputs[1].memory_type.name == "Shared" and \
                tv.definition.inputs[0].memory_type.name in ("Shared", "Local"):
            yield tv


def operands(ctx: VerifyContext, tv):
    """tv's operands read through descriptors: A and B, or B alone where A is in registers (RS)."""
    frag = fragments(tv)
    return ctx.memo(("wgmma-operands", tv.name),
                    lambda: [wgmma_operand(tv, ctx.block_dims, r) for r in "AB" if frag.in_shared(r)])


def layout_findings(ctx: VerifyContext, code: str, tv, op, hint: str) -> Iterator[Diagnostic]:
    """`code`'s findings for operand `op` (a WgmmaOperand) of MmaOp output tv: an invalid
    descriptor (descriptor_findings), else any element the hardware reads elsewhere than the
    schedule put it."""
    inst = instruction_family(tv.definition.macro)
    t = op.tensor
    invalid = list(descriptor_findings(ctx, code, tv, op))
    yield from invalid
    if invalid:
        return  # no one descriptor to compare the layout with
    lbo, sbo = op.lbo, op.sbo
    mn, k = var(MN), var(K)
    got, want = op.hardware(mn, k), op.byte_offset(mn, k)
    ranges = {**op.ex.ranges, MN: const(op.rows), K: const(op.depth)}
    q = ctx.query([got, want], ranges)
    out = q.prove(q.eq(got, want), values={"mn": mn, "k": k, "schedule": want, "hardware": got})
    yield from report_values(
        ctx, code, out, f"that {tv.name}'s {inst} reads {t.name} where the schedule put it",
        lambda v, when: (
            f"{tv.name}'s {inst} reads {op.role}[{v.get('mn')}, {v.get('k')}] of {t.name} at byte "
            f"{v.get('hardware')} of its tile{when}, where the schedule stores byte {v.get('schedule')}: the "
            f"{op.swizzle.swizzle_bytes}-byte {'swizzled' if op.swizzle.value else 'unswizzled'} {op.major}-major layout "
            f"of the descriptor (SBO {sbo}) is not how {t.name} is allocated"),
        ("mn", "k", "schedule", "hardware"),
        point=tuple(v for v in ranges if v not in (MN, K, ELEMENT_VARS[op.role], LANE.cuda_name)),
        hint=hint,
        notes=[(f"descriptor: {layout_name(op)}, SBO {sbo} bytes, LBO {lbo} bytes; element (mn, k) of "
                f"{op.role} is {'row m' if op.role == 'A' else 'column n'}, K index k")],
        tensor=t.name, location=t.origin)


def descriptor_findings(ctx: VerifyContext, code: str, tv, op) -> Iterator[Diagnostic]:
    """The descriptor of op (a WgmmaOperand) is valid at every instance: encodable fields, SBO
    the same everywhere, every start a multiple of 16 on a swizzle pattern's row 0."""
    inst = instruction_family(tv.definition.macro)
    t = op.tensor
    where = {"tensor": t.name, "location": t.origin}
    measured = op.measured()
    fields = op.fields()
    bad = [(n, v) for n, v in fields if v % CORE_ROW or not 0 <= v < FIELD_LIMIT]
    for name, value in bad:
        yield finding(code, (
            f"{tv.name}'s {inst} operand {op.role} ({t.name}) needs {name} = {value} bytes, which the "
            f"descriptor's field (bytes / 16 in 14 bits) cannot hold"),
            hint=f"lay {t.name} out so its {name} is a multiple of 16 below 2^18",
            counterexample={name.lower(): value}, **where)
    start = op.start
    ranges = dict(op.ex.ranges)

    def claim(q):
        holds = z3.And(q.eq(start % CORE_ROW, const(0)),
                       *[q.eq(measured[n], measured["start"] + const(v)) for n, v in fields])
        if op.swizzle.value:
            holds = z3.And(holds, q.eq((start // SWIZZLE_LINE) % swizzle_lines(op.swizzle), const(0)))
        return holds
    elements = op.field_elements()
    shown = {f"element {elements[n]}": measured[n] for n, _ in fields}
    values = {"start": start, "element (0, 0)": measured["start"], **shown}
    # over the integers first where the offsets have a rendering there: an A tile allocated across a
    # persistent loop left z3 undecided after 20 s over bit-vectors (fuzz seed 63 case 955, mutated)
    out = ctx.proof_over_integers_first([start, *measured.values()], ranges, claim, values=values)
    if out is None:
        q = ctx.query([start, *measured.values()], ranges)
        out = q.prove(claim(q), values=values)
    yield from report_values(
        ctx, code, out, f"that {tv.name}'s {op.role} descriptors have one SBO and start on a pattern's row 0",
        lambda v, when: (
            f"{tv.name}'s {inst} operand {op.role} ({t.name}) at this instance{when} starts at byte "
            f"{v.get('start')} of its buffer, element (0, 0) at byte {v.get('element (0, 0)')}, "
            + ", ".join(f"element {elements[n]} at byte {v.get(f'element {elements[n]}')} ({n} {value} at the "
                        f"first instance)" for n, value in fields)
            + f": the start must be a multiple of 16 on row 0 of a {op.swizzle.swizzle_bytes}-byte swizzle pattern "
              f"(base offset 0), and each offset one constant"),
        ("start", "element (0, 0)", *shown), point=tuple(ranges),
        hint=f"allocate {t.name}'s rows in groups of 8 at one stride, each instruction's tile starting at a "
             f"multiple of 8 rows of the swizzle span: TMA's swizzled boxes",
        **where)


__all__ = ["LAYOUT_PREMISES", "MN", "K", "TMA_PLACED", "descriptor_findings", "descriptor_ops", "layout_findings",
           "layout_name", "operands"]
