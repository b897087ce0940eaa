"""1-D bulk copies (tp.LoadStoreOpType.CpAsyncBulk, cp.async.bulk): the size of each copy, the
run it moves contiguous in both memories, both addresses aligned, and no copy reaching past the
tensor (hw/bulk_copy.py is the instruction, execution/bulk_copy.py each copy's addresses)."""

from __future__ import annotations

from typing import Iterator

import z3

from ...execution.bulk_copy import BulkIssue, bulk_issue
from ...hw.bulk_copy import ADDRESS_ALIGN, SIZE_ALIGN, bulk_copy, is_bulk_copy
from ...model.expr import Expr, add, const, mod, mul, var
from ...model.global_layout import global_strides
from ...model.tensor import TensorView
from ...model.types import Direction
from ..context import VerifyContext
from ..diagnostics import Diagnostic
from ..findings import report_values
from ..registry import rule
from ..solver import MAX_EXTENT


def _copies(ctx: VerifyContext) -> Iterator[tuple[TensorView, BulkIssue]]:
    """Each executed 1-D bulk copy that can be described (TMA-BULK-PLACEMENT reports one without a
    Bulk axis; LOWERING-SUPPORTED one between other memories or without a global layout)."""
    for tv in ctx.executed():
        if not is_bulk_copy(tv.definition) or not bulk_copy(tv.definition).ok:
            continue
        copy = bulk_copy(tv.definition)
        if global_strides(copy.gmem) is None:
            continue
        yield tv, ctx.memo(("bulk-issue", tv.name),
                           lambda tv=tv, copy=copy: bulk_issue(tv, ctx.block_dims, ctx.allocations[copy.smem.name]))


def _where(tv: TensorView, issue: BulkIssue) -> dict:
    ids = issue.copy.bulk_ids
    return dict(tensor=tv.name, ids=[i.name for i in ids],
                location=(ids[0].origin if ids else None) or tv.definition.origin)


def _run(issue: BulkIssue) -> str:
    ids = issue.copy.bulk_ids
    extents = " x ".join(str(i.extent) for i in ids)
    return f"{', '.join(i.label() for i in ids)} ({extents} x {issue.copy.element_bytes} bytes)"


def _strides(*exprs: Expr) -> list[str]:
    """The launch-time strides (`stride.T0.1`) the expressions hold."""
    free = set().union(*(e.free_vars() for e in exprs))
    return sorted(s for s in free if s.startswith("stride."))


def _query(ctx: VerifyContext, issue: BulkIssue, hint: list[Expr], strides: list[str], ranges: dict):
    """A query over every admitted size, launch-time strides a positive multiple of the 16 bytes
    the launch checks (GlobalTensor.vector_elements), and the loop ranges; its terms sized for the
    predicates' too."""
    conds = [e for c in issue.issuer + issue.issue_bounds + issue.holes for e in (c.lhs, c.rhs)]
    q = ctx.query(hint + conds, {**ranges, **{s: const(MAX_EXTENT) for s in strides}})
    run = max(1, ADDRESS_ALIGN // issue.copy.element_bytes)
    for s in strides:
        q.add(q.eq(mod(var(s), const(run)), const(0)), z3.UGE(q.var(s), q.val(1)) if q.bv else q.var(s) >= 1)
    return q


def _issued(q, issue: BulkIssue) -> list:
    """The copy is issued at the point: its issuer's threads, no hole at its run's first element."""
    return [q.holds(c) for c in issue.issuer + issue.issue_bounds]


@rule("BULK-COPY-SIZE", family="bulk")
def bulk_copy_size(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Each 1-D bulk copy moves a multiple of 16 bytes.

    What it checks:
        For every tp.LoadStoreOpType.CpAsyncBulk copy, the bytes one copy moves (the product of
        its consumer's Bulk extents times the element size) are a multiple of 16 for every
        admitted size.
    Why the hardware needs it:
        cp.async.bulk's size operand must be a multiple of 16; any other size is undefined
        behaviour. nvFuser refuses it too ("Expect 1dTMA load of inner-most dimension to be
        divisible by 16 bytes").
    Example:
        fusion, t0, t1, t2 = copy_chain("bulk_33", [33], op=tp.LoadStoreOpType.CpAsyncBulk)
        t1.set_memory_type(tp.MemoryType.Shared)
        t1.axis(0).parallelize(tp.ParallelType.Bulk)
    Fix:
        fusion, t0, t1, t2 = copy_chain("bulk_32", [32], op=tp.LoadStoreOpType.CpAsyncBulk)
        t1.set_memory_type(tp.MemoryType.Shared)
        t1.axis(0).parallelize(tp.ParallelType.Bulk)
    References:
        PTX ISA 9.7.9.25.4.1 (cp.async.bulk: size a multiple of 16); nvFuser
        csrc/device_lower/validation.cpp (validate1dTmaLoad); docs/hardware.md#1-d-bulk-copies
    """
    # Formal statement: for each bulk copy, for all admitted sizes s: (prod_k bulk_k(s) * es) mod 16 == 0
    for tv, issue in _copies(ctx):
        size = issue.copy.bytes_expr
        values = {"bytes": size, "remainder": mod(size, const(SIZE_ALIGN))}
        q = ctx.query(list(values.values()))
        out = q.prove(q.eq(mod(size, const(SIZE_ALIGN)), const(0)), values=values)
        yield from report_values(
            ctx, "BULK-COPY-SIZE", out, f"that {tv.name}'s bulk copy is a multiple of {SIZE_ALIGN} bytes",
            lambda v, when: (f"{tv.name}'s bulk copy moves {v['bytes']} bytes{when}, {v['remainder']} past a "
                             f"multiple of {SIZE_ALIGN}: the run {_run(issue)}"),
            ["bytes", "remainder"],
            hint=f"make {tv.name}'s Bulk extents a multiple of {max(1, SIZE_ALIGN // issue.copy.element_bytes)} "
                 f"elements of {tv.dtype} (split by such a factor and parallelize the inner part Bulk)",
            **_where(tv, issue))


@rule("BULK-COPY-CONTIGUOUS", family="bulk")
def bulk_copy_contiguous(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """The run a 1-D bulk copy moves is contiguous in global and in shared memory.

    What it checks:
        For every CpAsyncBulk copy, every admitted size and launch-time stride, every point it
        issues at and every position p of its run (the Bulk loop indices, row-major): the
        element each memory holds at p is the run's first element plus p, in the global
        tensor (its layout) and in the shared buffer (its allocation, the stage included).
    Why the hardware needs it:
        cp.async.bulk has no tensor map: it copies `size` consecutive bytes from one address to
        another. A Bulk axis that strides through either tensor would move other elements than
        the schedule names, or put them elsewhere.
    Example:
        fusion, t0, t1, t2 = copy_chain("bulk_column", [16, 64], op=tp.LoadStoreOpType.CpAsyncBulk)
        t1.set_memory_type(tp.MemoryType.Shared)
        t1.reorder({0: 1}); t1.axis(1).parallelize(tp.ParallelType.Bulk)
        t1.set_allocation_domain(t1.get_loop_domain(), True)
    Fix:
        fusion, t0, t1, t2 = copy_chain("bulk_rows", [16, 64], op=tp.LoadStoreOpType.CpAsyncBulk)
        t1.set_memory_type(tp.MemoryType.Shared)
        t1.axis(1).parallelize(tp.ParallelType.Bulk)
    References:
        PTX ISA 9.7.9.25.4.1 (cp.async.bulk: a contiguous run of size bytes); nvFuser
        csrc/index_compute.cpp (the 1-D copy is the producer's address of its first element);
        docs/hardware.md#1-d-bulk-copies
    """
    # Formal statement: for each bulk copy and side m in {global, shared}, for all admitted sizes, strides,
    #   points x with issued(x) and run positions p: offset_m(x, p) == offset_m(x, 0) + flat(p)
    for tv, issue in _copies(ctx):
        for side in ("global", "shared"):
            offset = issue.gmem_offset if side == "global" else issue.smem_offset
            start = issue.at_start(offset)
            want = add(start, issue.position)
            strides = _strides(offset)
            values = {"element": offset, "expected": want, "position": issue.position}
            q = _query(ctx, issue, [offset, want], strides, issue.ranges)
            claim = q.eq(offset, want)
            issued = _issued(q, issue)
            out = q.prove(z3.Implies(z3.And(*issued), claim) if issued else claim, values=values)
            name = issue.copy.gmem.name if side == "global" else issue.copy.smem.name
            yield from report_values(
                ctx, "BULK-COPY-CONTIGUOUS", out, f"that {tv.name}'s bulk copy is contiguous in {side} memory",
                lambda v, when, name=name, side=side: (
                    f"{tv.name}'s bulk copy is not contiguous in {side} memory{when}: position {v['position']} of "
                    f"the run {_run(issue)} is element {v['element']} of {name}, not {v['expected']}"),
                ["position", "element", "expected"],
                hint=f"parallelize Bulk only axes that are contiguous and innermost in {name} (and merge them in "
                     f"its order), or copy {tv.name} with tp.LoadStoreOpType.TMA, which takes strided boxes",
                point={k for k in out.model} if out.model else (), **_where(tv, issue))


@rule("BULK-COPY-ALIGN", family="bulk", premises=("BULK-COPY-SIZE", "BULK-COPY-CONTIGUOUS"))
def bulk_copy_align(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Both addresses of every 1-D bulk copy are 16-byte aligned.

    What it checks:
        For every CpAsyncBulk copy, every admitted size and every point it issues at (its
        issuing threads, no hole at its run's first element): the shared address of the run's
        first element (the buffer's offset in shared memory plus its element offset, stage
        included, times the element size) and its global byte offset from the tensor's base
        (whose address, and launch-time strides, the launch checks to be 16-byte multiples)
        are multiples of 16.
    Why the hardware needs it:
        cp.async.bulk requires both addresses 16-byte aligned; a misaligned one is undefined
        behaviour. A shared row padded to 20 bytes starts every other run 4 bytes off.
    Example:
        fusion, t0, t1, t2 = copy_chain("bulk_padded", [64, 4], op=tp.LoadStoreOpType.CpAsyncBulk)
        t1.set_memory_type(tp.MemoryType.Shared); loop = t1.get_loop_domain()
        t1.split(1, 5)  # each row padded to 5 floats (20 bytes)
        t1.set_allocation_domain(t1.get_loop_domain()); t1.set_loop_domain(loop)
        t1.axis(1).parallelize(tp.ParallelType.Bulk)
    Fix:
        fusion, t0, t1, t2 = copy_chain("bulk_padded", [64, 4], op=tp.LoadStoreOpType.CpAsyncBulk)
        t1.set_memory_type(tp.MemoryType.Shared); loop = t1.get_loop_domain()
        t1.split(1, 8)  # each row padded to 8 floats (32 bytes)
        t1.set_allocation_domain(t1.get_loop_domain()); t1.set_loop_domain(loop)
        t1.axis(1).parallelize(tp.ParallelType.Bulk)
    References:
        PTX ISA 9.7.9.25.4.1 (cp.async.bulk: 16-byte aligned addresses); docs/hardware.md#1-d-bulk-copies
    """
    # Formal statement: for each bulk copy, for all admitted sizes, launch-time strides s (s % (16 / es) == 0,
    #   checked at launch) and points x with issued(x): (smem_base + es * offset_smem(x, 0)) % 16 == 0 and
    #   (es * offset_gmem(x, 0)) % 16 == 0
    for tv, issue in _copies(ctx):
        es = issue.copy.element_bytes
        for side in ("shared", "global"):
            if side == "shared":
                address = add(ctx.smem_plan.offset(issue.copy.smem.name), mul(issue.at_start(issue.smem_offset), es))
            else:
                address = mul(issue.at_start(issue.gmem_offset), es)
            strides = _strides(address)
            values = {"byte address": address, "remainder": mod(address, const(ADDRESS_ALIGN))}
            ranges = {k: r for k, r in issue.ranges.items() if k not in issue.tile_vars}
            q = _query(ctx, issue, list(values.values()), strides, ranges)
            claim = q.eq(mod(address, const(ADDRESS_ALIGN)), const(0))
            issued = _issued(q, issue)
            out = q.prove(z3.Implies(z3.And(*issued), claim) if issued else claim, values=values)
            what = ("the shared address (from the start of shared memory)" if side == "shared" else
                    f"the byte offset from {issue.copy.gmem.name}'s base")
            yield from report_values(
                ctx, "BULK-COPY-ALIGN", out, f"that {tv.name}'s bulk copy {side} address is 16-byte aligned",
                lambda v, when, what=what: (f"{tv.name}'s bulk copy starts a run at {what} {v['byte address']}{when}, "
                                            f"{v['remainder']} bytes past a multiple of {ADDRESS_ALIGN}"),
                ["byte address", "remainder"],
                hint=(f"pad {tv.name}'s rows to a multiple of {max(1, ADDRESS_ALIGN // es)} elements, or start each "
                      f"run at a multiple of {max(1, ADDRESS_ALIGN // es)} elements") if side == "shared" else
                     (f"start each run at a multiple of {max(1, ADDRESS_ALIGN // es)} elements of "
                      f"{issue.copy.gmem.name} (a row length a multiple of that, assumed with fusion.assume where it "
                      f"is symbolic)"),
                point={k for k in out.model} if out.model else (), **_where(tv, issue))


@rule("BULK-COPY-BOUNDS", family="bulk", premises=("BULK-COPY-CONTIGUOUS",))
def bulk_copy_bounds(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A 1-D bulk copy issued is inside its tensor from its first element to its last.

    What it checks:
        For every CpAsyncBulk copy, every admitted size, every point it issues at (no hole at
        its run's first element) and every position of its run: that element is no hole
        either (every split bound of the consumer holds there). The copy is skipped, whole,
        where its first element is a hole.
    Why the hardware needs it:
        Unlike a TMA, cp.async.bulk has no bounds: it neither clips a store nor fills a load
        with zeros past the tensor's end, so a run that crosses the end reads or writes
        memory the tensor does not own. nvFuser requires the Bulk axis's splits divisible
        ("If split output domain is loaded with 1D TMA, the split must be divisible").
    Example:
        fusion, t0, t1, t2 = copy_chain("bulk_tail", [100], op=tp.LoadStoreOpType.CpAsyncBulk)
        t1.set_memory_type(tp.MemoryType.Shared)
        t1.split(0, 8); t1.axis(1).parallelize(tp.ParallelType.Bulk)
    Fix:
        fusion, t0, t1, t2 = copy_chain("bulk_tail", [100], op=tp.LoadStoreOpType.CpAsyncBulk)
        t1.set_memory_type(tp.MemoryType.Shared)
        t1.split(0, 4); t1.axis(1).parallelize(tp.ParallelType.Bulk)
    References:
        PTX ISA 9.7.9.25.4.1 (cp.async.bulk); nvFuser csrc/device_lower/validation.cpp
        (validate1dTmaLoad); docs/hardware.md#1-d-bulk-copies
    """
    # Formal statement: for each bulk copy, for all admitted sizes, points x with issued(x) and run positions p:
    #   hole-free(x, p)
    for tv, issue in _copies(ctx):
        for hole in issue.holes:
            values = {"index": hole.lhs, "extent": hole.rhs, "position": issue.position}
            q = _query(ctx, issue, list(values.values()), [], issue.ranges)
            claim = q.holds(hole)
            issued = _issued(q, issue)
            out = q.prove(z3.Implies(z3.And(*issued), claim) if issued else claim, values=values)
            direction = "reads" if issue.copy.direction is Direction.LOAD else "writes"
            yield from report_values(
                ctx, "BULK-COPY-BOUNDS", out, f"that {tv.name}'s bulk copy stays inside its tensor",
                lambda v, when, hole=hole: (
                    f"{tv.name}'s bulk copy {direction} past the end{when}: position {v['position']} of its run "
                    f"{_run(issue)} is a {hole.why} (index {v['index']}, extent {v['extent']}), though its first "
                    f"element is not, and cp.async.bulk neither clips nor fills with zeros"),
                ["position", "index", "extent"],
                hint=f"split {tv.name}'s Bulk axes by factors that divide their extents (fusion.assume where they "
                     f"are symbolic), or copy {tv.name} with tp.LoadStoreOpType.TMA, which clips and fills with zeros",
                point={k for k in out.model} if out.model else (), **_where(tv, issue))
