"""cp.async: the copy's size for its cache (.ca / .cg), the alignment of both addresses, and the
wait before every read (execution/cp_async.py describes the instruction, execution/nest.py places
its waits)."""

from __future__ import annotations

from typing import Iterator

import sympy
import z3

from ...hw.cp_async import CA_BYTES, CG_BYTES, CpAsyncCopy, is_cp_async
from ...execution.cp_async import ISSUE_CONDS, cp_async_copy
from ...execution.statements import element_offset, tensor_execution, vector_axis
from ...model.expr import Expr, add, const, mod, mul, substitute, to_sympy, var
from ...model.global_layout import global_strides
from ...model.notation import user_str
from ...model.tensor import TensorView
from ...model.types import CacheOp, MemoryType
from ..context import VerifyContext
from ..diagnostics import Diagnostic
from ..findings import finding, report_outcome, stride_names, when_clause
from ..registry import rule
from ..solver import MAX_EXTENT, Outcome, Verdict, assumption_terms


def _copies(ctx: VerifyContext) -> Iterator[tuple[TensorView, CpAsyncCopy | None]]:
    for tv in ctx.executed():
        if is_cp_async(tv.definition) and tv.memory_type is MemoryType.Shared \
                and tv.definition.inputs[0].memory_type is MemoryType.Global:
            yield tv, cp_async_copy(tv)


def _where(tv: TensorView) -> dict:
    axis = vector_axis(tv)
    return dict(tensor=tv.name, ids=[axis.name] if axis is not None else [],
                location=(axis.origin if axis is not None else None) or tv.definition.origin)


@rule("CPASYNC-SIZE", family="cpasync")
def cp_async_size(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A cp.async moves 4, 8 or 16 bytes with .ca, and exactly 16 with .cg.

    What it checks:
        For every tp.LoadStoreOpType.CpAsync copy, the bytes one thread moves at a loop point
        (its Vectorize axis, which must have a constant extent, times the element size; one
        element without a Vectorize axis) are a cp-size its cache allows: 4, 8 or 16 for
        cp.async.ca (tp.CacheOp.AllLevels), exactly 16 for cp.async.cg (tp.CacheOp.Global).
        tp.CacheOp.Unspecified takes .cg for 16 bytes and .ca otherwise.
    Why the hardware needs it:
        cp-size is an immediate of the instruction, and PTX defines only these: .ca copies 4,
        8 or 16 bytes, .cg (which bypasses L1) only 16; ptxas rejects `cp.async.cg ... 8`
        ("expected to be 16"). A 2-byte element alone, or a 12-byte vector, has no cp.async.
    Example:
        fusion, t0, t1, t2 = cp_async_copy("cg_eight_bytes", [64, 32], cache_op=tp.CacheOp.Global)
        t1.split(1, 2)
        t1.axis(1).parallelize(tp.ParallelType.TIDx); t1.axis(2).parallelize(tp.ParallelType.Vectorize)
        t2.axis(1).parallelize(tp.ParallelType.TIDx)
    Fix:
        fusion, t0, t1, t2 = cp_async_copy("cg_sixteen_bytes", [64, 32], cache_op=tp.CacheOp.Global)
        t1.split(1, 4)
        t1.axis(1).parallelize(tp.ParallelType.TIDx); t1.axis(2).parallelize(tp.ParallelType.Vectorize)
        t2.axis(1).parallelize(tp.ParallelType.TIDx)
    References:
        PTX ISA 9.7.9.25.3.1 (cp.async: cp-size 4, 8, 16; .cg only 16); ptxas for sm_90a;
        nvFuser csrc/device_lower/validation.cpp (validateSizeMemoryOp: "Not supported byte size
        for cp.async.cg"); docs/hardware.md#cpasync-copy-size
    """
    # Formal statement: none, structural: for each cp.async statement, n * bytes(dtype) in {4, 8, 16} (.ca)
    #   or == 16 (.cg), n the constant Vectorize extent (1 without one)
    for tv, copy in _copies(ctx):
        op, where = tv.definition, _where(tv)
        if copy is None:
            axis = vector_axis(tv)
            yield finding("CPASYNC-SIZE",
                          f"{tv.name}'s cp.async vectorizes {axis.label()}, of symbolic extent {axis.extent}; "
                          f"cp-size is a constant of the instruction (4, 8 or 16 bytes)",
                          counterexample={"extent": str(axis.extent)},
                          hint=f"split {tv.name}'s vectorized axis by a constant ({16 // tv.dtype.bytes} for "
                               f"16 bytes of {tv.dtype}) and vectorize the inner part", **where)
            continue
        if copy.size_ok:
            continue
        asked = {CacheOp.Global: " (tp.CacheOp.Global)", CacheOp.AllLevels: " (tp.CacheOp.AllLevels)"}.get(
            copy.cache_op, " (tp.CacheOp.Unspecified: .cg at 16 bytes, .ca otherwise)")
        fits = [b // copy.element_bytes for b in copy.allowed_bytes if b % copy.element_bytes == 0]
        if copy.cache == "cg":
            hint = (f"vectorize {16 // copy.element_bytes} elements of {tv.dtype} (16 bytes) per copy, or use "
                    f"cache_op=tp.CacheOp.AllLevels (cp.async.ca copies 4, 8 or 16 bytes)")
        else:
            hint = (f"vectorize {' or '.join(map(str, fits))} elements of {tv.dtype} per copy (split the "
                    f"innermost axis by that and parallelize the inner part Vectorize)")
        yield finding("CPASYNC-SIZE",
                      f"`{op}` moves {copy.elements} x {copy.element_bytes} = {copy.bytes} bytes per copy with "
                      f"{copy.instruction}{asked}, which copies "
                      f"{'exactly 16 bytes' if copy.cache == 'cg' else '4, 8 or 16 bytes'}",
                      notes=[f"cp.async.ca copies {', '.join(map(str, CA_BYTES))} bytes, cp.async.cg "
                             f"{', '.join(map(str, CG_BYTES))}: cp-size is an immediate of the instruction"],
                      counterexample={"elements": copy.elements, "bytes": copy.bytes, "cache": copy.cache},
                      hint=hint, **where)


@rule("CPASYNC-ALIGN", family="cpasync")
def cp_async_align(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Both addresses of every cp.async are multiples of its size.

    What it checks:
        For every cp.async statement of cp-size b bytes (CPASYNC-SIZE), every admitted size
        and every loop point it issues at (thread extent and single writer): the shared
        address it writes (the buffer's offset in shared memory plus the element offset of
        the tile, its circular-buffer stage included, times the element size) is a multiple
        of b, holes included; and, where the point is not a hole, the global byte offset it
        reads (its element offset times the element size; the tensor's base address is
        checked at launch) is a multiple of b. Symbolic strides and extents are quantified
        over; a failure with symbolic sizes suggests the assumption that fixes it, verified.
    Why the hardware needs it:
        cp.async requires both addresses aligned to cp-size (PTX's addresses as operands: a
        misaligned address is undefined behaviour); on the GPU it faults with "misaligned
        address". A padded shared row or a row stride that is not a multiple of the vector
        misaligns every other row.
    Example:
        fusion, t0, t1, t2 = cp_async_copy("padded_rows", [64, 4])
        loop = t1.get_loop_domain()
        t1.split(1, 5)  # each row padded to 5 floats (20 bytes)
        t1.set_allocation_domain(t1.get_loop_domain()); t1.set_loop_domain(loop)
        for t in (t1, t2):
            t.axis(0).parallelize(tp.ParallelType.TIDx)
        t1.axis(1).parallelize(tp.ParallelType.Vectorize)
    Fix:
        fusion, t0, t1, t2 = cp_async_copy("padded_rows", [64, 4])
        loop = t1.get_loop_domain()
        t1.split(1, 8)  # each row padded to 8 floats (32 bytes)
        t1.set_allocation_domain(t1.get_loop_domain()); t1.set_loop_domain(loop)
        for t in (t1, t2):
            t.axis(0).parallelize(tp.ParallelType.TIDx)
        t1.axis(1).parallelize(tp.ParallelType.Vectorize)
    References:
        PTX ISA 9.7.9.25.3.1 (cp.async) and 6.4.1 (addresses as operands: aligned to the access
        size); docs/hardware.md#cpasync-alignment
    """
    # Formal statement: for each cp.async statement of b bytes, for all admitted sizes, launch-time
    #   strides s (s % n == 0, checked at launch) and points p with issue(p) (thread extent, single writer),
    #   v = 0: (smem_offset + es * offset_dst(p)) % b == 0, and hole-free(p) => (es * offset_src(p)) % b == 0
    for tv, copy in _copies(ctx):
        if copy is None or not copy.size_ok:
            continue
        src = tv.definition.inputs[0]
        if global_strides(src) is None:
            continue  # no global layout: LOWERING-SUPPORTED reports it
        for side in ("shared", "global"):
            out, expr = ctx.memo(("cp-async-align", tv.name, side), lambda side=side: _prove_aligned(ctx, tv, copy, side))
            yield from report_outcome(
                "CPASYNC-ALIGN", out, f"that {tv.name}'s cp.async {side} address is {copy.bytes}-byte aligned",
                lambda out, side=side, expr=expr: _misaligned(ctx, tv, copy, side, expr, out), **_where(tv))


def _addresses(ctx: VerifyContext, tv: TensorView, copy: CpAsyncCopy):
    """(shared byte address, global byte offset, ranges, issue conds, hole conds, launch-time strides)
    at the vector's first element."""
    ex = tensor_execution(tv, ctx.block_dims)
    first: dict[str, Expr] = {}
    axis = vector_axis(tv)
    if axis is not None and ex.env[axis.uid].op == "var":
        first[ex.env[axis.uid].value] = const(0)
    es = tv.dtype.bytes
    src = tv.definition.inputs[0]
    dst = add(ctx.smem_plan.offset(tv.name), mul(element_offset(tv, ex.indices, ctx.allocations[tv.name]), es))
    gsrc = mul(element_offset(src, ex.operand_indices(0), None), es)
    ranges = {k: r for k, r in ex.guarded_ranges.items() if k not in first}
    issue = [c.renamed(first) for c in ex.conds if c.kind in ISSUE_CONDS]
    holes = [c.renamed(first) for c in ex.conds if c.kind not in ISSUE_CONDS]
    dst, gsrc = substitute(dst, first), substitute(gsrc, first)
    strides = sorted((dst.free_vars() | gsrc.free_vars()) - set(ranges) - set(ctx.extent_symbols))
    return dst, gsrc, ranges, issue, holes, strides


def _prove_aligned(ctx: VerifyContext, tv: TensorView, copy: CpAsyncCopy, side: str,
                   extra: sympy.Basic | None = None) -> tuple[Outcome, Expr]:
    dst, gsrc, ranges, issue, holes, strides = _addresses(ctx, tv, copy)
    address = dst if side == "shared" else gsrc
    premise_conds = issue if side == "shared" else issue + holes
    ranges = {**ranges, **{s: const(MAX_EXTENT) for s in strides}}
    b = const(copy.bytes)
    hint = [address, mod(address, b)] + [e for c in premise_conds for e in (c.lhs, c.rhs)]
    q = ctx.query(hint + (assumption_terms(extra) if extra is not None else []), ranges)
    if extra is not None:
        q.assume_sympy(extra)
    for s in strides:  # the launch binding refuses a stride that is not a positive multiple of the vector
        q.add(q.eq(mod(var(s), const(copy.elements)), const(0)), z3.UGE(q.var(s), q.val(1)) if q.bv else q.var(s) >= 1)
    premise = [q.holds(c) for c in premise_conds]
    claim = q.eq(mod(address, b), const(0))
    values = {"byte address": address, "remainder": mod(address, b)}
    return q.prove(z3.Implies(z3.And(*premise), claim) if premise else claim, values=values), address


def _misaligned(ctx: VerifyContext, tv: TensorView, copy: CpAsyncCopy, side: str, address: Expr,
                out: Outcome) -> Diagnostic:
    sizes = ctx.symbols_of(out.model)
    point = {k: v for k, v in out.model.items() if k.startswith((f"{tv.name}.", "threadIdx", "blockIdx", "stride."))}
    v = out.values
    src = tv.definition.inputs[0].name
    what = (f"the shared address {v['byte address']} (from the start of shared memory)" if side == "shared"
            else f"the byte offset {v['byte address']} from {src}'s base")
    access = "writes a misaligned shared address" if side == "shared" else "reads a misaligned global address"
    return finding(
        "CPASYNC-ALIGN",
        f"{tv.name}'s {copy.bytes}-byte cp.async {access}{when_clause(sizes)}: {what} is {v['remainder']} bytes "
        f"past a multiple of {copy.bytes}",
        notes=[stride_names(f"the copy's first element is at byte {user_str(_sym(address))}"
                            + (" of shared memory" if side == "shared" else f" from {src}'s base (checked "
                               f"{copy.bytes}-byte aligned at launch)"))],
        counterexample={stride_names(k): x for k, x in {**sizes, **point, **v}.items()},
        hint=_align_hint(ctx, tv, copy, side, address, sizes),
        **_where(tv))


def _sym(e: Expr):
    return to_sympy(e)


def _align_hint(ctx: VerifyContext, tv: TensorView, copy: CpAsyncCopy, side: str, address: Expr,
                sizes: dict[str, int]) -> str:
    """The verified assumption that aligns every copy (a size symbol of the address a multiple of
    the vector), else how to change the schedule."""
    smaller = [b for b in (CA_BYTES if copy.cache == "ca" else ()) if b < copy.bytes and b >= copy.element_bytes]
    fallback = (f"pad {tv.name}'s rows to a multiple of {copy.elements} elements ({copy.bytes} bytes), or start "
                f"each copy at a multiple of {copy.elements} elements" if side == "shared" else
                f"make the row stride of {tv.definition.inputs[0].name} a multiple of {copy.elements} elements")
    if smaller:
        fallback += f", or copy fewer bytes at once ({' or '.join(map(str, smaller))}, cp.async.ca)"
    symbols = sorted(s for s in address.free_vars() if s in ctx.fusion.symbols and s not in ctx.bind)
    for group in [[s] for s in symbols] + ([symbols] if len(symbols) > 1 else []):
        cond = sympy.And(*(sympy.Eq(sympy.Mod(ctx.fusion.symbols[s], copy.elements), 0) for s in group))

        def check(cond=cond) -> bool:
            fixed, _ = _prove_aligned(ctx, tv, copy, side, extra=cond)
            if not fixed.proved:
                return False
            q = ctx.query(assumption_terms(cond))
            q.assume_sympy(cond)
            return q.prove(z3.BoolVal(False, q.ctx)).status is Verdict.COUNTEREXAMPLE  # not vacuous

        if ctx.memo(("cp-async-align-assumption", tv.name, side, str(cond)), check):
            text = "; ".join(f'fusion.assume("{s} % {copy.elements} == 0")' for s in group)
            return f"if every size you run satisfies it, state it: {text} (verified: then every copy is aligned); " \
                   f"otherwise {fallback}"
    return fallback
