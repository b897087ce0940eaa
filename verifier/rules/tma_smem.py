"""TMA and the shared-memory tensor (the seed's step 4): where the hardware writes (or
reads) each tile element against where the schedule's allocation domain says it lives,
the swizzle, alignment and the coordinates the instruction is issued with. All proofs
quantify over every issue (every non-tile loop point, thread and block) and every
element of the tile, with the functions of execution/tma_issue.py the code generator uses.
Where the tile of a TMA that no size can give a descriptor lies (analysis/tma.py unencodable:
a rank over 5, a constant box over 256 or inner box off 16 bytes) is not checked (_placed):
such a TMA never runs, and the fix changes the box those claims would be about."""

from __future__ import annotations

import itertools
from typing import Iterator

import z3

from ...model.expr import add, const, mod, substitute, try_int, var
from ...model.iterdomain import Split
from ...model.notation import user_str
from ...execution.smem_plan import swizzle_period
from ...model.types import BLOCK_TYPES, THREAD_TYPES, Direction
from ..access import active
from ..analysis.swizzle_axes import Reaimed, first_fix, swizzle_calls
from ..analysis.tma import inner_bytes_hint, unencodable
from ..analysis.tma_issues import Issue, tma_issues
from ..causes import box_retyped, propose_fix
from ..context import VerifyContext
from ..diagnostics import Diagnostic, Severity
from ..findings import finding, report_outcome, report_values, when_clause
from ..monotone import at_most, proved_over_integers
from ..registry import rule
from ..solver import Outcome, Verdict

TMA_ALIGN, COORD_ALIGN = 128, 16
SWIZZLE_MODES = (32, 64, 128)
REFS = "nvFuser doc/dev/tma.md (step 4, data swizzle); measured on an H200"


def _placed(ctx: VerifyContext) -> list[Issue]:
    """The TMAs whose tile placement the placement rules check: those some size gives a descriptor."""
    return [i for i in tma_issues(ctx) if unencodable(ctx, i.info) is None]


def _layout(ctx: VerifyContext, issue: Issue) -> Outcome:
    """Every tile element lies where the hardware puts it: unswizzle(schedule) == start + row-major offset."""
    t = issue.t
    values = {**issue.tile_values(), "address": t.smem_offset, "expected address": issue.hw_address,
              "tile start": issue.tile_start, "offset in tile": t.hw_offset}
    return ctx.memo(("tma-layout", id(issue)), lambda: issue.prove(
        ctx, lambda q: q.eq(issue.unswizzled, add(issue.tile_start, t.hw_offset)), [], values, smallest=t.hw_offset))


def _layout_message(issue: Issue, kind: str):
    name, t = issue.info.smem.name, issue.t

    def message(v, when):
        coords = ", ".join(str(v[f"tile coordinate {k}"]) for k in range(len(t.tile_coords)))
        return (f"{kind}{when}: the TMA {'writes' if issue.info.direction is Direction.LOAD else 'reads'} tile element "
                f"({coords}) (innermost first) at byte {v['expected address']} of {name}, but the schedule's "
                f"allocation puts it at byte {v['address']}")
    return message


def _missing(issue: Issue) -> Iterator[Diagnostic]:
    if issue.t.missing:
        yield finding("TMA-TILE-CONTIGUITY", f"the allocation of {issue.info.smem.name} uses "
                      f"{', '.join(issue.t.missing)}, which the loop of {issue.info.consumer.name} does not index",
                      hint="build the allocation domain from the tensor's loop or logical IDs",
                      counterexample={"unindexed IDs": len(issue.t.missing)}, **issue.where)


@rule("TMA-TILE-CONTIGUITY", family="tma")
def tma_tile_contiguity(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Each TMA tile occupies one contiguous range of shared memory, in the order TMA writes it.

    What it checks:
        Without swizzle: for every issued copy and every tile element (innermost
        coordinate c0, rows flattened row-major), the byte offset the shared tensor's
        allocation domain gives the element equals the tile's start plus the element's
        row-major offset in the tile. BID-parallel and extent-1 IDs are not allocated
        and so never separate a tile; TID-parallel IDs are allocated and do.
    Why the hardware needs it:
        One cp.async.bulk.tensor writes (or reads) a whole tile as a dense row-major
        block at one shared address. If the schedule places the tile's elements
        elsewhere, every later shared-memory access reads the wrong data, silently.
    Example:
        fusion, t0, t1, t2 = tma_copy("gap", [256, 256])
        t1.split(1, 32).split(0, 8).reorder({1: 2})
        t1.axis(0).parallelize(tp.ParallelType.BIDx); t1.axis(1).parallelize(tp.ParallelType.TIDx)
        t1.axis(2).parallelize(tp.ParallelType.Bulk); t1.axis(3).parallelize(tp.ParallelType.Bulk)
        t1.set_allocation_domain([t1.axis(2), t1.axis(1), t1.axis(3)])
        tp.propagate_transforms(t1); tp.parallelize_all_like(t1, [tp.ParallelType.BIDx])
    Reported with:
        TMA-WHOLE-TILES
    Fix:
        fusion, t0, t1, t2 = tma_copy("gap", [256, 256])
        t1.split(1, 32).split(0, 8).reorder({1: 2})
        t1.axis(0).parallelize(tp.ParallelType.BIDx); t1.axis(1).parallelize(tp.ParallelType.TIDx)
        t1.axis(2).parallelize(tp.ParallelType.Bulk); t1.axis(3).parallelize(tp.ParallelType.Bulk)
        t1.set_allocation_domain([t1.axis(1), t1.axis(2), t1.axis(3)])
        tp.propagate_transforms(t1); tp.parallelize_all_like(t1, [tp.ParallelType.BIDx])
    References:
        nvFuser doc/dev/tma.md (step 4, Figures 13-15); docs/hardware.md#tma-tile-layout-in-shared-memory
    """
    # Formal statement: structural: the consumer's loop indexes every allocated ID of the shared tensor;
    #   for an unswizzled TMA, for all admitted sizes, issue points p (loop, thread, block indices) and
    #   tile coordinates c: issued(p) and c_k < tile_k for all k => off(p, c) == off(p, 0) + hw(c)
    #   (off: the allocation's byte offset, tile variables c; hw(c): c's row-major byte offset in the tile;
    #   issued: the thread takes part and no coordinate is a hole; _layout)
    #   Only for a TMA some size gives a descriptor (_placed; analysis/tma.py unencodable).
    for issue in _placed(ctx):
        yield from _missing(issue)
        if issue.info.swizzle_bytes or issue.t.missing:
            continue
        out = _layout(ctx, issue)
        yield from box_retyped(ctx, report_values(
            ctx, "TMA-TILE-CONTIGUITY", out, f"that each tile of {issue.info.smem.name} is contiguous",
            _layout_message(issue, f"a tile of {issue.info.smem.name} is not contiguous in shared memory"),
            list(issue.tile_values()) + ["address", "expected address", "tile start"],
            hint="order the allocation domain so the tile IDs are innermost and adjacent, in TMA order (extent-1 "
                 "and BID IDs may sit between them); do not split tile IDs by factors that leave holes",
            point=issue.m.ranges, **issue.where), issue.info.consumer)


@rule("TMA-WHOLE-TILES", family="tma", premises=("INLINE-LOOP-MAP",))
def tma_whole_tiles(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Every TMA copy stays inside its shared tensor, and the copies of one block do not overlap.

    What it checks:
        With F = tile rows x row pitch (the swizzle span when swizzled), the bytes one copy
        occupies from its tile start (the instruction's shared address): for every issued
        copy, [start, start + F) lies inside the shared tensor's allocation; and for two
        TMA loads issued in the same block at different tile starts, their byte ranges are
        disjoint. Padding is allowed: a 3-row tile in an allocation of 8 rows passes, as
        long as no copy reaches past the buffer or into another copy's tile. The tile
        start's 128-byte alignment is SMEM-ALIGNMENT's proof; a swizzled tile may start
        off the swizzle period (the hardware swizzles absolute addresses, and
        TMA-SWIZZLE-LAYOUT proves the schedule's layout does the same); where each element
        lands inside the range is the layout rules' (TMA-TILE-CONTIGUITY, TMA-SWIZZLE-LAYOUT).
        A tensor whose copies run past its allocation is not asked the second question (one
        cause: the allocation does not hold the tiles).
    Why the hardware needs it:
        A TMA moves the whole box, out-of-bounds rows included (a load writes them as
        zeros), from its shared address on. A box that runs past the buffer overwrites the
        next buffer or faults; two loads whose ranges overlap overwrite each other's tile.
    Example:
        fusion, t0, t1, t2 = tma_copy("tail", [12, 32])
        t1.set_allocation_domain(t1.get_logical_domain())
        t1.split(0, 5)
        t1.axis(0).parallelize(tp.ParallelType.BIDx)
        t1.axis(1).parallelize(tp.ParallelType.Bulk); t1.axis(2).parallelize(tp.ParallelType.Bulk)
        tp.propagate_transforms(t1); tp.parallelize_all_like(t1, [tp.ParallelType.BIDx])
    Fix:
        fusion, t0, t1, t2 = tma_copy("tail", [12, 32])
        t1.split(0, 5)
        t1.set_allocation_domain(t1.get_loop_domain())
        t1.axis(0).parallelize(tp.ParallelType.BIDx)
        t1.axis(1).parallelize(tp.ParallelType.Bulk); t1.axis(2).parallelize(tp.ParallelType.Bulk)
        tp.propagate_transforms(t1); tp.parallelize_all_like(t1, [tp.ParallelType.BIDx])
    References:
        PTX ISA 5.5.3.3 (out-of-bounds box elements are filled) and 9.7.9.25.5.2 (cp.async.bulk.tensor);
        CUDA driver API cuTensorMapEncodeTiled (shared footprint: box rows x inner box, or x the swizzle span);
        docs/hardware.md#tma-out-of-bounds-fill, docs/hardware.md#tma-tile-layout-in-shared-memory
    """
    # Formal statement: with F = tile rows x row pitch (the swizzle span when swizzled), for all admitted
    #   sizes and issue points p: issued(p) => start(p) + F <= bytes(allocation); and for a TMA load, for
    #   all admitted sizes and issue points p, p' of one block (equal block indices, every other index
    #   free): issued(p) and issued(p') and start(p) < start(p') => start(p) + F <= start(p')
    #   (start(p) = P(off(p, 0)): the tile's start as the hardware sees it)
    #   Only for a TMA some size gives a descriptor (_placed; analysis/tma.py unencodable).
    for issue in _placed(ctx):
        if issue.t.missing:
            continue
        past_end = list(_inside(ctx, issue))
        yield from past_end
        # a TMA store reads its range: overlapping reads are harmless; and copies that run past an allocation
        # too small for the tiles have that one cause: whether they overlap is moot until it holds them
        if issue.info.direction is Direction.LOAD and not any(d.severity is Severity.ERROR for d in past_end):
            yield from _disjoint(ctx, issue)


def _inside(ctx: VerifyContext, issue: Issue) -> Iterator[Diagnostic]:
    t, size, name = issue.t, issue.alloc.bytes_expr, issue.info.smem.name
    end = add(issue.tile_start, t.footprint)
    out = ctx.memo(("tma-inside", id(issue)), lambda: issue.prove(
        ctx, lambda q: q.le(end, size), [end],
        {"tile start": issue.tile_start, "tile end": end, "tile bytes": t.footprint, "allocation bytes": size},
        tile=False))
    verb = "writes" if issue.info.direction is Direction.LOAD else "reads"
    yield from report_values(
        ctx, "TMA-WHOLE-TILES", out, f"that every TMA copy stays inside {name}",
        lambda v, when: (f"a TMA copy {verb} bytes [{v['tile start']}, {v['tile end']}) of {name}{when}, "
                         f"past its end: {name} has {v['allocation bytes']} bytes, a tile takes {v['tile bytes']} "
                         f"(a box's out-of-bounds rows are moved too)"),
        ["tile start", "tile end", "tile bytes", "allocation bytes"],
        hint="allocate the whole box for every copy: build the allocation from the tile IDs (padding them is "
             "fine), not from the tensor's own extent",
        point=issue.m.ranges, **issue.where)


OTHER = "other "  # prefix of the second copy's loop and thread indices (the block's indices are shared)


def _disjoint(ctx: VerifyContext, issue: Issue) -> Iterator[Diagnostic]:
    t, name = issue.t, issue.info.smem.name
    blocks = {p.cuda_name for p in BLOCK_TYPES}
    apart = {n: var(OTHER + n) for n in issue.m.ranges if n not in blocks}
    ranges = {**issue.m.ranges, **{OTHER + n: substitute(b, apart) for n, b in issue.m.ranges.items() if n in apart}}
    other_start = substitute(issue.tile_start, apart)
    other_bounds = [(substitute(b.value, apart), substitute(b.extent, apart)) for b in t.issue_bounds]
    end = add(issue.tile_start, t.footprint)

    def claim(q):
        other_issued = z3.And(active(q, issue.m, apart), *[q.lt(v, e) for v, e in other_bounds])
        return z3.Implies(z3.And(issue.issued(q), other_issued, q.lt(issue.tile_start, other_start)),
                          q.le(end, other_start))

    def run() -> Outcome:
        hint = issue.exprs() + [other_start, end] + [e for pair in other_bounds for e in pair]
        values = {"tile start": issue.tile_start, "other tile start": other_start, "tile bytes": t.footprint}
        # over the integers first where the starts have a rendering there (a transpose's unrolled boxes:
        # 13 s over bit-vectors, fuzz seed 93 case 423, mutated)
        mine = [issue.tile_start, other_start, end, t.footprint] + [e for pair in other_bounds for e in pair] + \
            [e for b in t.issue_bounds for e in (b.value, b.extent)]
        out = ctx.proof_over_integers_first(mine + issue.m.hint_exprs(apart) + issue.m.hint_exprs(), ranges, claim,
                                            values=values)
        if out is not None:
            return out
        q = ctx.query(hint + issue.m.hint_exprs(apart), ranges)
        return q.prove(claim(q), values=values)
    out = ctx.memo(("tma-disjoint", id(issue)), run)
    yield from report_values(
        ctx, "TMA-WHOLE-TILES", out, f"that the TMA tiles of {name} do not overlap",
        lambda v, when: (f"two TMA loads of one block overlap in {name}{when}: one writes bytes [{v['tile start']}, "
                         f"{v['tile start'] + v['tile bytes']}), the other starts at byte {v['other tile start']}"),
        ["tile start", "other tile start", "tile bytes"],
        hint="give each copy its own tile-sized slot: the IDs outside the tile must be outer to all tile IDs in "
             "the allocation",
        point=ranges, **issue.where)


def _width_problem(ctx: VerifyContext, issue: Issue) -> Outcome | None:
    """None when the inner box fills the swizzle span exactly; else the outcome of I == S."""
    s = issue.info.swizzle_bytes
    inner = issue.t.inner_box_bytes()
    def run():
        q = ctx.shared_query(("tma-issue", id(issue)), [inner, const(s)], issue.m.ranges)
        return q.prove(q.eq(inner, const(s)), values={"inner box bytes": inner})
    out = ctx.memo(("tma-width", id(issue)), run)
    return None if out.proved else out


@rule("TMA-SWIZZLE-WIDTH", family="tma")
def tma_swizzle_width(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A swizzled TMA's inner box fits the swizzle span, and its rows reserve the whole span.

    What it checks:
        The swizzle mode is 32, 64 or 128 bytes (the XORed axis of the shared tensor's
        [-1, s, 8/s, s, 16B] view has 2, 4 or 8 chunks); the inner box is at most that
        many bytes; when it is narrower, the schedule's allocation still gives every
        box row the whole span (each element where the hardware puts it).
    Why the hardware needs it:
        cuTensorMapEncodeTiled rejects an inner box wider than the swizzle span (measured
        on H200). A narrower row still occupies S bytes of shared memory, so an
        allocation that packs rows densely reads the wrong rows.
    Example:
        fusion, t0, t1, t2 = tma_copy("wide", [256, 256], dtype=tp.float16)
        t1.split(1, 64).split(0, 16).reorder({1: 2})
        t1.split(3, 8).split(3, 2).split(2, 8)
        t1.swizzle(tp.SwizzleType.XOR, 2, 4)
        t1.set_allocation_domain(t1.get_loop_domain(), True)
        t1.axis(0).parallelize(tp.ParallelType.BIDy); t1.axis(1).parallelize(tp.ParallelType.BIDx)
        for a in range(2, 7): t1.axis(a).parallelize(tp.ParallelType.Bulk)
        tp.propagate_transforms(t1); tp.parallelize_all_like(t1, [tp.ParallelType.BIDx, tp.ParallelType.BIDy])
    Fix:
        fusion, t0, t1, t2 = tma_copy("wide", [256, 256], dtype=tp.float16)
        t1.split(1, 16).split(0, 16).reorder({1: 2})
        t1.split(3, 8).split(2, 4).split(2, 2)
        t1.swizzle(tp.SwizzleType.XOR, 3, 5)
        t1.set_allocation_domain(t1.get_loop_domain(), True)
        t1.axis(0).parallelize(tp.ParallelType.BIDy); t1.axis(1).parallelize(tp.ParallelType.BIDx)
        for a in range(2, 7): t1.axis(a).parallelize(tp.ParallelType.Bulk)
        tp.propagate_transforms(t1); tp.parallelize_all_like(t1, [tp.ParallelType.BIDx, tp.ParallelType.BIDy])
    References:
        CUDA driver API cuTensorMapEncodeTiled (inner box <= swizzle span); measured on an H200;
        docs/hardware.md#tma-swizzle-span-and-row-pitch
    """
    # Formal statement: structural: the swizzle span S is 32, 64 or 128 bytes; unless I == S is proved for
    #   all admitted sizes (I = box_0 x element bytes), for all admitted sizes and issue points p:
    #   issued(p) => I <= S, and then issued(p) and c in the tile => P(off(p, c)) == P(off(p, 0)) + hw(c)
    #   (hw with row pitch S; P the hardware swizzle, see TMA-SWIZZLE-LAYOUT)
    #   Only for a TMA some size gives a descriptor (_placed; analysis/tma.py unencodable).
    for issue in _placed(ctx):
        s = issue.info.swizzle_bytes
        if not s or issue.t.missing:
            continue
        if s not in SWIZZLE_MODES:
            yield finding("TMA-SWIZZLE-WIDTH", f"the XOR swizzle of {issue.info.smem.name} spans {s} bytes "
                          f"({s // 16} chunks of 16 bytes); TMA swizzles 32, 64 or 128 bytes",
                          hint=_mode_hint(issue, "into an axis of 2, 4 or 8 16-byte chunks (32, 64 or 128 bytes)"),
                          counterexample={"swizzle bytes": s}, **issue.where)
            continue
        if _width_problem(ctx, issue) is None:
            continue
        inner = issue.t.inner_box_bytes()
        fits = ctx.memo(("tma-fits", id(issue)), lambda: issue.prove(
            ctx, lambda q: q.le(inner, const(s)), [const(s)], {"inner box bytes": inner}, tile=False))
        yield from report_values(
            ctx, "TMA-SWIZZLE-WIDTH", fits, f"that the inner box fits the {s}-byte swizzle",
            lambda v, when: (f"the inner box of the TMA into {issue.info.smem.name} is {v['inner box bytes']} bytes"
                             f"{when}, wider than its {s}-byte swizzle span"),
            ["inner box bytes"],
            hint=_wider_hint(ctx, issue),
            point=issue.m.ranges, **issue.where)
        if not fits.proved:
            continue
        out = _layout(ctx, issue)
        yield from report_values(
            ctx, "TMA-SWIZZLE-WIDTH", out, f"that the rows of {issue.info.smem.name} reserve the swizzle span",
            _layout_message(issue, f"the inner box is narrower than the {s}-byte swizzle span, so each row of "
                                   f"{issue.info.smem.name} takes {s} bytes in shared memory, and the schedule "
                                   f"does not reserve them"),
            list(issue.tile_values()) + ["address", "expected address", "tile start"],
            hint=f"pad each tile row to {s} bytes in the allocation (view the row as [{s // 16}, 16B] chunks), or "
                 f"box the innermost dimension to exactly {s} bytes",
            point=issue.m.ranges, **issue.where)


@rule("TMA-SWIZZLE-LAYOUT", family="tma")
def tma_swizzle_layout(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """The schedule's swizzled layout is the hardware's swizzle of the tile, element by element.

    What it checks:
        For a TMA whose shared tensor is XOR-swizzled (S = 32, 64 or 128 bytes, inner
        box exactly S bytes), for every issued copy and every tile element: the byte
        offset the allocation domain gives it equals P(tile start + row-major offset),
        P(A) = A ^ (((A >> 7) & (S/16 - 1)) << 4). This is a proof of function equality,
        not a pattern match: any schedule computing the same addresses passes. When the
        swizzle is wrong (this proof, or a mode or width TMA-SWIZZLE-WIDTH rejects), the same
        swizzle call on two other axes of the loop domain it was called on is tried on a copy
        of the fusion; one that passes both rules is reported as the cause, in the user's axis
        numbers, and the findings it removes are listed after it as following from it.
    Why the hardware needs it:
        TMA writes a swizzled tile at swizzled addresses whatever the schedule says;
        reads that index shared memory with a different XOR get other rows' data,
        silently.
    Example:
        fusion, t0, t1, t2 = tma_copy("swapped", [256, 256], dtype=tp.float16)
        t1.split(1, 32).split(0, 16).reorder({1: 2})
        t1.split(3, 8).split(2, 2).split(2, 4)
        t1.swizzle(tp.SwizzleType.XOR, 5, 3)
        t1.set_allocation_domain(t1.get_loop_domain(), True)
        t1.axis(0).parallelize(tp.ParallelType.BIDy); t1.axis(1).parallelize(tp.ParallelType.BIDx)
        for a in range(2, 7): t1.axis(a).parallelize(tp.ParallelType.Bulk)
        tp.propagate_transforms(t1); tp.parallelize_all_like(t1, [tp.ParallelType.BIDx, tp.ParallelType.BIDy])
    Fix:
        fusion, t0, t1, t2 = tma_copy("swapped", [256, 256], dtype=tp.float16)
        t1.split(1, 32).split(0, 16).reorder({1: 2})
        t1.split(3, 8).split(2, 2).split(2, 4)
        t1.swizzle(tp.SwizzleType.XOR, 3, 5)
        t1.set_allocation_domain(t1.get_loop_domain(), True)
        t1.axis(0).parallelize(tp.ParallelType.BIDy); t1.axis(1).parallelize(tp.ParallelType.BIDx)
        for a in range(2, 7): t1.axis(a).parallelize(tp.ParallelType.Bulk)
        tp.propagate_transforms(t1); tp.parallelize_all_like(t1, [tp.ParallelType.BIDx, tp.ParallelType.BIDy])
    References:
        PTX ISA 5.5.7 (swizzling modes); CuTe Swizzle<B,4,3>; nvFuser doc/dev/tma.md (data swizzle);
        docs/hardware.md#tma-swizzle-pattern
    """
    # Formal statement: for a TMA with swizzle span S in {32, 64, 128} and box_0 x element bytes == S
    #   (proved), for all admitted sizes, issue points p and tile coordinates c:
    #   issued(p) and c_k < tile_k for all k => P(off(p, c)) == P(off(p, 0)) + hw(c),
    #   P(A) = A ^ (((A >> 7) & (S/16 - 1)) << 4), its own inverse: off(p, c) == P(start(p) + hw(c))
    #   When the swizzle fails (a mode that is no TMA mode, an inner box that does not fill it, or this
    #   proof), the same call on other loop axes is tried on a copy of the fusion (_reaimed): the first
    #   one for which the width and this proof hold is reported as the cause, with the user's axis numbers.
    #   Only for a TMA some size gives a descriptor (_placed; analysis/tma.py unencodable).
    for issue in _placed(ctx):
        s = issue.info.swizzle_bytes
        if not s or issue.t.missing:
            continue
        fits = s in SWIZZLE_MODES and _width_problem(ctx, issue) is None
        out = _layout(ctx, issue) if fits else None
        if out is not None and out.status is not Verdict.COUNTEREXAMPLE:
            if not out.proved:
                yield from report_outcome("TMA-SWIZZLE-LAYOUT", out, f"that {issue.info.smem.name} matches the "
                                          f"{s}-byte TMA swizzle", lambda o: None, **issue.where)
            continue
        fix = _reaimed(ctx, issue)
        if fix is not None:
            yield _wrong_axes(ctx, issue, fix, out)
        elif out is not None:
            yield from report_values(
                ctx, "TMA-SWIZZLE-LAYOUT", out, f"that {issue.info.smem.name} matches the {s}-byte TMA swizzle",
                _layout_message(issue, f"the swizzled layout of {issue.info.smem.name} is not the TMA's {s}-byte "
                                       f"swizzle"),
                list(issue.tile_values()) + ["address", "expected address", "tile start"],
                hint=_chunk_hint(issue) or
                f"view each tile row as [{s // 16}, 16B] chunks and the rows as [-1, {s // 16}, {128 // s}], and "
                f"XOR the row axis of {s // 16} into the chunk axis: swizzle(tp.SwizzleType.XOR, row axis, chunk "
                f"axis) with their positions in {issue.info.smem.name}'s loop domain; no single swizzle of two "
                f"of its present loop axes does it",
                notes=[_hardware_note(s)], point=issue.m.ranges, **issue.where)


def _chunk_hint(issue: Issue) -> str | None:
    """The split and swizzle calls that XOR 16-byte chunks instead of elements, in the user's
    axis numbers, when the user's one swizzle XORs the inner output of a split of a row of S
    bytes (split(p, f) directly followed by swizzle(x, p + 1)): split(p, 16 / element bytes) then
    swizzle(x, p), at the same positions since both splits put two axes at p. None when the
    schedule has another shape."""
    calls = swizzle_calls(issue.info.smem)
    if len(calls) != 1:
        return None
    call, s = calls[0], issue.info.swizzle_bytes
    y_in = call.swizzle.y_in
    split = y_in.definition
    p = call.y - 1
    if (not isinstance(split, Split) or split.inner is not y_in or p < 0 or call.loop[p] is not split.outer
            or call.x == p or call.index == 0 or call.tensor.history[call.index - 1] is not split):
        return None  # the split's positions are the user's only when the swizzle directly follows it
    es = issue.info.smem.dtype.bytes
    row, x = try_int(split.in_.extent_expr), call.extent(call.x)
    if es > 16 or 16 % es or row is None or x is None or row * es != s or x % (s // 16):
        return None
    chunk, name, factor = 16 // es, call.receiver(), try_int(split.factor)
    if factor is None or not split.inner_split:
        return None
    x_axis = call.loop[call.x]
    return (f"XOR 16-byte chunks, not elements: split {split.in_.label()} ({row} {issue.info.smem.dtype.name} = "
            f"{s} bytes, loop axis {p} before {name}.split({p}, {factor})) by {chunk} into "
            f"{s // 16} chunks of 16 bytes, then XOR the row axis {x_axis.label()} (loop axis {call.x}) into the "
            f"chunk axis (the split's outer output, loop axis {p}): {name}.split({p}, {chunk}) then "
            f"{call.text(call.x, p)} in place of {name}.split({p}, {factor}) and {call.written()}")


def _hardware_note(s: int) -> str:
    return f"hardware: P(A) = A ^ (((A >> 7) & {s // 16 - 1}) << 4) on the row-major tile offset A"


def _mode_hint(issue: Issue, wanted: str) -> str:
    """Swizzle `wanted` (e.g. "an axis of 4 16-byte chunks (64 bytes)"), and how the mode comes
    from the schedule: the XORed (y) axis counts 16-byte chunks, named in the user's numbers."""
    calls = swizzle_calls(issue.info.smem)
    if len(calls) == 1:
        c = calls[0]
        y = c.loop[c.y]
        now = f"here loop axis {c.y} of {c.written()} ({y.label()}, {user_str(y.extent)} chunks)"
    else:
        now = f"here the y axis of {issue.info.smem.name}'s XOR swizzle"
    return f"XOR-swizzle {wanted}: the TMA swizzle mode is 16 bytes x the extent of the XORed axis, {now}"


def _wider_hint(ctx: VerifyContext, issue: Issue) -> str:
    s, inner = issue.info.swizzle_bytes, ctx.concrete(issue.t.inner_box_bytes())
    modes = [m for m in SWIZZLE_MODES if inner is not None and m >= inner]
    if not modes:
        return (f"box the innermost dimension to at most {s} bytes (TMA swizzles at most 128 bytes, "
                f"{_mode_hint(issue, 'into an axis of 2, 4 or 8 16-byte chunks')})")
    return (f"box the innermost dimension to at most {s} bytes, or "
            + _mode_hint(issue, f"into an axis of {modes[0] // 16} 16-byte chunks ({modes[0]} bytes)"))


def _reaimed(ctx: VerifyContext, issue: Issue) -> Reaimed | None:
    """The user's swizzle call aimed at two other axes of its loop domain such that the width
    and the layout proofs hold on the copy of the fusion with that call; None when the tensor
    has not exactly one swizzle call of the user, the inner box is symbolic, or no pair of axes
    whose XORed axis fills the box (2, 4 or 8 chunks) does it."""
    def search():
        calls = swizzle_calls(issue.info.smem)
        inner = ctx.concrete(issue.t.inner_box_bytes())
        if len(calls) != 1 or inner is None:
            return None
        call = calls[0]
        parallel = {call.x: call.swizzle.x_out, call.y: call.swizzle.y_out}
        launch = {p for p, i in enumerate(call.loop)
                  if parallel.get(p, i).parallel_type in THREAD_TYPES + BLOCK_TYPES}  # not in the tile
        ranked = []
        for x, y in itertools.permutations(range(len(call.loop)), 2):
            ex, ey = call.extent(x), call.extent(y)
            if (x, y) == (call.x, call.y) or ex is None or ey is None or ex < 2 or {x, y} & launch:
                continue
            if ey * 16 not in SWIZZLE_MODES or ey * 16 < inner or ey % (1 << (ex - 1).bit_length()):
                continue  # no TMA mode, narrower than the box, or not a bijection
            # the box's own width first, the user's two axes swapped first, then the fewest axes moved
            ranked.append((ey * 16 != inner, (x, y) != (call.y, call.x), (x != call.x) + (y != call.y), x, y))
        return first_fix(ctx, call, [(x, y) for *_, x, y in sorted(ranked)], lambda fixed: _swizzle_holds(fixed, issue))
    return ctx.memo(("tma-reaimed", id(issue)), search)


def _swizzle_holds(fixed: VerifyContext, issue: Issue) -> bool:
    """In the fixed copy, the TMA of `issue` fits its swizzle mode and has its layout."""
    same = [i for i in tma_issues(fixed) if (i.info.smem.name, i.info.consumer.name, i.info.direction)
            == (issue.info.smem.name, issue.info.consumer.name, issue.info.direction)]
    if len(same) != 1:
        return False
    other = same[0]
    s, inner = other.info.swizzle_bytes, fixed.concrete(other.t.inner_box_bytes())
    if s not in SWIZZLE_MODES or inner is None or inner > s:
        return False
    return _layout(fixed, other).proved


def _wrong_axes(ctx: VerifyContext, issue: Issue, fix: Reaimed, out: Outcome | None) -> Diagnostic:
    """The cause: the swizzle call XORs the wrong loop axes; the fix in the user's numbers."""
    call, name, s = fix.call, issue.info.smem.name, issue.info.swizzle_bytes
    mode = fix.call.extent(fix.y) * 16  # the XORed axis counts 16-byte chunks
    loop = call.loop
    notes = [f"{call.written()} XORs loop axis {call.x} ({loop[call.x].label()}) into loop axis {call.y} "
             f"({loop[call.y].label()}); the TMA's {mode}-byte swizzle is loop axis {fix.x} ({loop[fix.x].label()}) "
             f"XORed into loop axis {fix.y} ({loop[fix.y].label()}), the {mode // 16} 16-byte chunks of a row"]
    if s != mode:
        notes.append(f"the XORed axis sets the TMA swizzle mode: {loop[call.y].label()} counts {s // 16} chunks of 16 "
                     f"bytes, so the TMA would swizzle {s} bytes where its inner box is {mode} bytes")
    notes.append(_hardware_note(mode))
    if out is not None and out.status is Verdict.COUNTEREXAMPLE:
        sizes = ctx.symbols_of(out.model)
        keys = list(issue.tile_values()) + ["address", "expected address", "tile start"]
        shown = {**sizes, **{k: v for k, v in out.model.items() if k in issue.m.ranges},
                 **{k: out.values[k] for k in keys if k in out.values}}
        message = _layout_message(issue, f"the swizzled layout of {name} is not the TMA's {s}-byte swizzle")(
            out.values, when_clause(sizes))
    else:
        shown = {"swizzle x axis": call.x, "swizzle y axis": call.y, "swizzle bytes": s, "inner box bytes": mode}
        message = (f"the swizzled layout of {name} is not the TMA's {mode}-byte swizzle: {call.written()} XORs "
                   f"the wrong loop axes ({call.x} and {call.y}; the TMA's swizzle needs {fix.x} and {fix.y})")
    where = dict(issue.where, location=call.swizzle.x_out.origin or issue.where["location"],
                 ids=list(dict.fromkeys(loop[p].name for p in (call.x, call.y, fix.x, fix.y))),
                 labels=[f"the TMA {'into' if issue.info.direction is Direction.LOAD else 'from'} {name}: "
                         f"{issue.where['location']}"] if issue.where["location"] else [])
    d = finding("TMA-SWIZZLE-LAYOUT", message, notes=notes, counterexample=shown,
                hint=f"swizzle loop axes {fix.x} and {fix.y} of {name}: {fix.text()} in place of {call.written()} "
                     f"(verified: with it, the TMA's {mode}-byte swizzle is the schedule's layout)", **where)
    d.id = propose_fix(ctx, f"TMA-SWIZZLE-LAYOUT:{name}", fix.fixed)
    return d


@rule("SMEM-ALIGNMENT", family="tma")
def smem_alignment(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Every TMA shared-memory address is 128-byte aligned; swizzled buffers start on their period.

    What it checks:
        The shared-memory plan (execution/smem_plan.py, used by the code generator) puts each
        TMA buffer at a multiple of 128 bytes, each swizzled buffer at a multiple of its
        pattern period (256 / 512 / 1024 bytes for 32 / 64 / 128-byte swizzle); and for
        every issued copy the tile's address (buffer + tile start) is a multiple of 128.
    Why the hardware needs it:
        A cp.async.bulk.tensor whose shared address is not 128-byte aligned faults with
        CUDA_ERROR_MISALIGNED_ADDRESS, which kills the context (measured on H200 for 16-,
        32- and 64-byte alignment). The swizzle XORs absolute address bits, so the layout
        proof holds only when the pattern period starts at the buffer.
    Example:
        fusion, t0, t1, t2 = tma_copy("narrow_tiles", [1024, 256])
        t1.split(1, 16)
        t1.axis(0).parallelize(tp.ParallelType.BIDx); t1.axis(1).parallelize(tp.ParallelType.TIDx)
        t1.axis(2).parallelize(tp.ParallelType.Bulk)
        tp.propagate_transforms(t1); tp.parallelize_all_like(t1, [tp.ParallelType.BIDx])
    Fix:
        fusion, t0, t1, t2 = tma_copy("narrow_tiles", [1024, 256])
        t1.split(1, 32)
        t1.axis(0).parallelize(tp.ParallelType.BIDx); t1.axis(1).parallelize(tp.ParallelType.TIDx)
        t1.axis(2).parallelize(tp.ParallelType.Bulk)
        tp.propagate_transforms(t1); tp.parallelize_all_like(t1, [tp.ParallelType.BIDx])
    References:
        measured on an H200; PTX ISA 5.5.7; docs/hardware.md#tma-shared-memory-alignment
    """
    # Formal statement: for each TMA buffer at plan offset b, N = 8 x S (its swizzle period) when swizzled
    #   by S in {32, 64, 128} bytes, else 128: for all admitted sizes and issue points p:
    #   issued(p) => b mod N == 0 and (b + start(p)) mod 128 == 0
    issues = tma_issues(ctx)
    if not issues:
        return
    plan = ctx.smem_plan
    for issue in issues:
        name, s = issue.info.smem.name, issue.info.swizzle_bytes
        buf = plan.buffers[name]
        need = swizzle_period(s) if s in SWIZZLE_MODES else TMA_ALIGN
        address = add(buf.offset, issue.tile_start)
        out = ctx.memo(("smem-align", id(issue)), lambda: issue.prove(
            ctx, lambda q: z3.And(q.eq(mod(buf.offset, need), const(0)), q.eq(mod(address, TMA_ALIGN), const(0))),
            [address, buf.offset, mod(address, TMA_ALIGN), mod(buf.offset, need), const(need)],
            {"buffer offset": buf.offset, "tile address": address, "tile start": issue.tile_start}, tile=False))
        yield from report_values(
            ctx, "SMEM-ALIGNMENT", out, f"that the TMA addresses in {name} are aligned",
            lambda v, when: _misaligned(issue, name, need, v, when),
            ["buffer offset", "tile address", "tile start"],
            hint=(f"make each tile a multiple of {TMA_ALIGN} bytes (a wider box), or give each tile its own "
                  f"{TMA_ALIGN}-byte slot") if need == TMA_ALIGN else
                 (f"start {name} on a multiple of {need} bytes (tileproof's shared-memory plan does; a buffer "
                  f"placed by hand must too), and make each tile a multiple of {TMA_ALIGN} bytes"),
            notes=[f"{name}: {buf.why}"], point=issue.m.ranges, **issue.where)


def _misaligned(issue, name: str, need: int, v: dict, when: str) -> str:
    """The address that breaks SMEM-ALIGNMENT and what it does: a tile off 128 bytes faults; a
    swizzled buffer off its pattern period is swizzled by other address bits than the schedule's."""
    copy = f"a TMA {'into' if issue.info.direction is Direction.LOAD else 'from'} {name}"
    if v["tile address"] % TMA_ALIGN:
        return (f"{copy} uses shared address {v['tile address']} (buffer at {v['buffer offset']} + tile start "
                f"{v['tile start']}){when}: not a multiple of {TMA_ALIGN}; the copy faults with a misaligned address")
    return (f"{copy}: the buffer starts at shared address {v['buffer offset']}{when}, not a multiple of its "
            f"{need}-byte swizzle period; the hardware swizzles absolute address bits, so the copy's swizzle is "
            f"not the schedule's layout (wrong values, no fault)")


@rule("TMA-COORD-ALIGN", family="tma")
def tma_coord_align(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """The innermost coordinate of every issued TMA is a multiple of 16 bytes.

    What it checks:
        For every issued copy, the innermost box coordinate the code generator passes to
        cp.async.bulk.tensor (from the loop indices, tile variables zero) times the
        element size is a multiple of 16. With tileproof's inference the coordinate is
        a multiple of the inner box, so this fails together with TMA-INNER-BYTES; it is
        checked on the very expressions the kernel issues, as a second line of defence.
    Why the hardware needs it:
        Measured on H200: tensorCoords[0] * elemsize not a multiple of 16 bytes faults
        with CUDA_ERROR_ILLEGAL_INSTRUCTION (the PTX ISA: the bounding box must be
        16-byte aligned).
    Example:
        fusion, t0, t1, t2 = tma_copy("coord", [64, 1024])
        t1.split(1, 2).split(0, 64)
        t1.axis(0).parallelize(tp.ParallelType.BIDy); t1.axis(2).parallelize(tp.ParallelType.BIDx)
        t1.axis(1).parallelize(tp.ParallelType.Bulk); t1.axis(3).parallelize(tp.ParallelType.Bulk)
        tp.propagate_transforms(t1); tp.parallelize_all_like(t1, [tp.ParallelType.BIDx, tp.ParallelType.BIDy])
    Reported with:
        TMA-INNER-BYTES
    Fix:
        fusion, t0, t1, t2 = tma_copy("coord", [64, 1024])
        t1.split(1, 4).split(0, 64)
        t1.axis(0).parallelize(tp.ParallelType.BIDy); t1.axis(2).parallelize(tp.ParallelType.BIDx)
        t1.axis(1).parallelize(tp.ParallelType.Bulk); t1.axis(3).parallelize(tp.ParallelType.Bulk)
        tp.propagate_transforms(t1); tp.parallelize_all_like(t1, [tp.ParallelType.BIDx, tp.ParallelType.BIDy])
    References:
        measured on an H200; PTX ISA 5.5.3.1; docs/hardware.md#tma-innermost-coordinate-alignment
    """
    # Formal statement: for each TMA, for all admitted sizes and issue points p:
    #   issued(p) => (c_0(p) x element bytes) mod 16 == 0 (c_0: the innermost box coordinate, tile variables 0)
    for issue in tma_issues(ctx):
        es = issue.info.gmem.dtype.bytes
        c0 = issue.t.box_origin[0]
        byte = c0 * es
        out = ctx.memo(("tma-coord-align", id(issue)), lambda: issue.prove(
            ctx, lambda q: q.eq(mod(byte, COORD_ALIGN), const(0)), [byte, mod(byte, COORD_ALIGN)],
            {"coordinate 0": c0, "bytes": byte}, tile=False, smallest=c0))
        yield from report_values(
            ctx, "TMA-COORD-ALIGN", out, "that the innermost TMA coordinate is 16-byte aligned",
            lambda v, when: (f"a TMA of {issue.info.gmem.name} is issued at innermost coordinate {v['coordinate 0']}"
                             f"{when} ({v['bytes']} bytes), not a multiple of 16 bytes: the kernel would fault "
                             f"with an illegal instruction"),
            ["coordinate 0", "bytes"],
            hint=_coord_align_hint(ctx, issue), point=issue.m.ranges, **issue.where)


def _coord_align_hint(ctx: VerifyContext, issue) -> str:
    info = issue.info
    inner = ctx.concrete(info.dims[0].box_expr * info.gmem.dtype.bytes)
    if inner is None or inner % COORD_ALIGN == 0:
        return "make the inner box a multiple of 16 bytes so every box starts 16-byte aligned"
    return (f"the coordinate is a multiple of the inner box, which is {inner} bytes (TMA-INNER-BYTES): "
            f"{inner_bytes_hint(info)}")


@rule("TMA-COORD-RANGE", family="tma")
def tma_coord_range(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Every TMA coordinate fits a signed 32-bit integer.

    What it checks:
        For every TMA dimension, size + element stride - 1 <= 2^31. An issued box starts
        inside the tensor (its coordinate loop index is in range), shifted by less than
        the element stride for a stride phase, so every coordinate the kernel passes is
        below that bound. Proving it on sizes keeps the query linear for symbolic extents.
    Why the hardware needs it:
        cp.async.bulk.tensor takes its coordinates as .s32 registers. A 1-D view of a
        tensor with more than 2^31 elements (a flattened pointwise kernel) wraps to a
        negative coordinate and the copy reads or writes the wrong box.
    Example:
        fusion, t0, t1, t2 = tma_copy("huge", [2**16, 2**16], dtype=tp.float16)
        t1.merge(0).split(0, 256)
        t1.axis(0).parallelize(tp.ParallelType.BIDx); t1.axis(1).parallelize(tp.ParallelType.Bulk)
        tp.propagate_transforms(t1); tp.parallelize_all_like(t1, [tp.ParallelType.BIDx])
    Fix:
        fusion, t0, t1, t2 = tma_copy("huge", [2**16, 2**16], dtype=tp.float16)
        t1.split(1, 256)
        t1.axis(0).parallelize(tp.ParallelType.BIDx); t1.axis(1).parallelize(tp.ParallelType.BIDy)
        t1.axis(2).parallelize(tp.ParallelType.Bulk)
        tp.propagate_transforms(t1); tp.parallelize_all_like(t1, [tp.ParallelType.BIDx, tp.ParallelType.BIDy])
    References:
        PTX ISA 9.7.9.25.5.2 (tensorCoords are .s32); docs/hardware.md#tma-coordinate-range
    """
    # Formal statement: for every dimension k of each TMA, for all admitted sizes and issue points p:
    #   issued(p) => size_k + e_k <= 2^31 + 1, i.e. size_k + e_k - 1 <= 2^31 (e_k: the element stride)
    #   Proved first over the sizes alone (a stronger claim: without issued(p)), which keeps the
    #   issue point's terms out of a query about products of extents; the issued form where that fails
    for issue in tma_issues(ctx):
        for k, d in enumerate(issue.info.dims):
            reach = add(d.size_expr, d.element_stride_expr)
            values = {"size": d.size_expr, "element stride": d.element_stride_expr}
            out = ctx.memo(("tma-coord-range", id(issue), k), lambda: _sizes_alone(ctx, reach, 2**31 + 1, values)
                           or issue.prove(ctx, lambda q: q.le(reach, const(2**31 + 1)), [reach, const(2**31 + 1)],
                                          values, tile=False))
            yield from report_values(
                ctx, "TMA-COORD-RANGE", out, f"that TMA coordinate {k} fits int32",
                lambda v, when: (f"{issue.info.describe(k)} of the TMA of {issue.info.gmem.name} has {v['size']} "
                                 f"elements{when}: its box coordinates reach beyond int32 (2^31 - 1)"),
                ["size", "element stride"],
                hint="do not flatten the tensor into one TMA dimension: keep an outer axis as its own TMA "
                     "dimension (leave it unmerged) so each coordinate stays below 2^31",
                point=issue.m.ranges, **issue.where)


def _sizes_alone(ctx: VerifyContext, f, cap: int, values: dict) -> Outcome | None:
    """f <= cap proved for every admitted size where f depends on the sizes alone (by evaluation
    where the assumptions are ranges, else over the integers: over bit-vectors z3 stalls, 22 s and
    no verdict, on T0_0 * T1_0 + 1 <= 2^31 + 1 under T0_0 * T1_0 <= 2^31 - 1 among products of four
    extents); None where it does not or is not proved so (the claim is then asked at every issue point)."""
    if not f.free_vars() <= set(ctx.fusion.symbols):
        return None
    out = at_most(ctx.admitted, f, cap, values)
    if out is None and proved_over_integers(ctx, [f, const(cap)], lambda q: q.le(f, const(cap))):
        out = Outcome(Verdict.PROVED)
    return out if out is not None and out.proved else None
