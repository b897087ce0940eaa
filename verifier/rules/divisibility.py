"""Divisibility and views: splits that must divide, merges that must stay views of memory."""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, replace
from typing import Iterator

import sympy
import z3

from ...model.expr import Expr, const, mod
from ...hw.cp_async import is_cp_async
from ...execution.statements import CondKind, tensor_execution, vector_axis
from ...model.expr import var
from ...model.notation import user_str
from ...execution.zero_padding import zero_padded
from ...execution.tmem_regions import region_of
from ...model.global_layout import global_strides
from ...model.iterdomain import IterDomain, Merge, Split
from ...model.tensor import TensorView
from ...model.types import Direction, MemoryType, ParallelType
from ..access import AccessModel
from ..analysis.assumptions import satisfiable
from ..analysis.tmem import access_models
from ..analysis.tmem_holes import holes_inside
from ..causes import propose_fix
from ..context import VerifyContext
from ..diagnostics import Diagnostic, Severity
from ..findings import finding, report_outcome, report_values, when_clause
from ..registry import rule
from ..solver import Outcome, Verdict

OTHER = "other "  # the second vector element's index


@dataclass(frozen=True)
class RequiredSplit:
    split: Split
    tensor: TensorView
    why: str
    vector: bool = False  # on the path to a Vectorize ID (not needed where its holes spare whole vectors)
    tmem: frozenset = frozenset()  # the keys of the tcgen05 accesses that run its holes (Access.key)


def ancestors(i: IterDomain) -> Iterator:
    """Every transform on the path from the logical domain to i."""
    stack, seen = [i], set()
    while stack:
        node = stack.pop()
        t = node.definition
        if t is None or id(t) in seen:
            continue
        seen.add(id(t))
        yield t
        stack.extend(t.inputs)


def required_splits(ctx: VerifyContext) -> list[RequiredSplit]:
    out: dict[int, RequiredSplit] = {}

    def need(t, tv, why, vector=False, tmem=None):
        if not isinstance(t, Split):
            return
        tmem = frozenset([tmem] if tmem else [])
        if id(t) not in out:
            out[id(t)] = RequiredSplit(t, tv, why, vector, tmem)
        elif tmem:  # required twice: both excuses are needed (a vector's, the tensor memory's)
            out[id(t)] = replace(out[id(t)], tmem=out[id(t)].tmem | tmem)

    padded = zero_padded(ctx.fusion)
    for tv in ctx.executed():
        for i in tv.loop:
            if i.parallel_type is ParallelType.Vectorize:
                for t in ancestors(i):
                    if isinstance(t, Split) and t.in_.uid == padded.get(tv.name):
                        continue  # past K the vector runs whole, on zeros (a cp.async's: _straddling_k)
                    need(t, tv, f"it lies on the path to the vectorized {i.label()} of {tv.name}", vector=True)
    for acc in ctx.tmem_accesses:  # the holes of a split run in the access its tensor issues
        for t in acc.tensor.history:
            need(t, acc.tensor, f"{acc.tensor.name} is in tensor memory, whose warp-collective accesses cannot skip holes",
                 tmem=acc.key if acc.direction is Direction.STORE else None)
        if acc.direction is Direction.LOAD:
            for t in acc.consumer.history:
                need(t, acc.consumer, f"{acc.consumer.name} loads from tensor memory with whole warps", tmem=acc.key)
    return list(out.values())


@rule("SPLIT-DIVISIBILITY", family="divisibility")
def split_divisibility(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A split that must divide is proved divisible for every admitted size.

    What it checks:
        Splits on the path to a vectorized IterDomain, and splits in the schedule of a
        tensor-memory tensor or of the tensor that loads from it, divide their input
        extent for every size the assumptions admit. A failing proof shows a size. A split
        on a vector's path need not divide where its holes take vectors whole (for every
        point, two elements of one vector are both holes or neither: a row past M under a
        vector of columns), since the vector is then predicated as one. A split in a
        tensor-memory schedule need not divide where the tcgen05 access that runs its
        holes (nvFuser issues it there too, unpredicated) touches at every hole only cells
        of the warp's sub-partition and of the tensor's own columns (the allocation rounded
        up), and a store none a valid element of the same allocation instance is stored to
        (verifier/analysis/tmem_holes.py); a failing proof then shows the hole's cell.
    Why the hardware needs it:
        An indivisible split adds holes (ceil(N/f)*f - N extra points). A vector load
        or store moves its f elements unconditionally, and a tcgen05 ld/st is issued by
        whole warps, so neither can predicate a hole away: the kernel reads or writes
        out of bounds, or a partial warp executes a warp-collective instruction. A
        tcgen05 access run at a hole outside the allocation touches columns it does not
        own (another tensor's, or unallocated ones), and a store onto a valid element's
        cell replaces its value with the hole's.
    Example:
        fusion, t0, t1 = copy_chain("vec6", [6], copies=1)
        t1.split(0, 4)
        t1.axis(1).parallelize(tp.ParallelType.Vectorize)
    Fix:
        fusion, t0, t1 = copy_chain("vec8", [8], copies=1)
        t1.split(0, 4)
        t1.axis(1).parallelize(tp.ParallelType.Vectorize)
    References:
        nvFuser doc/reading/divisibility-of-split.md; PTX ISA 9.7.16.8 (tcgen05.ld/st are .sync.aligned);
        docs/hardware.md#vector-loads-and-stores, docs/hardware.md#tensor-memory-load-and-store-shapes
    """
    # Formal statement: for every required split S (on the path to a Vectorize ID, unless the vectorized
    #   tensor's holes take vectors whole (_whole_vectors); in the history of a tensor-memory tensor or of
    #   a tensor loading from one, unless each tcgen05 access running its holes keeps them inside
    #   (analysis/tmem_holes.py: inside, and no clobber for a store)), for all admitted sizes s:
    #   extent(S.in)(s) mod extent(S.inner)(s) == 0
    #   (extent(S.inner) = the factor for an inner split, ceildiv(extent(S.in), factor) for an outer one)
    found: list[tuple[RequiredSplit, Diagnostic]] = []
    for req in required_splits(ctx):
        s = req.split
        n, f = s.in_.extent_expr, s.inner.extent_expr
        out = ctx.memo(("divides", n, f), lambda: _prove_divides(ctx, n, f))
        outside = _holes_outside(ctx, req) if not out.proved else []
        if not out.proved and (not req.vector or _whole_vectors(ctx, req.tensor)) and not outside:
            continue  # its holes are whole vectors, each predicated as one; tcgen05 runs them inside the allocation
        where = dict(tensor=req.tensor.name, ids=[s.in_.name, s.outer.name, s.inner.name], location=s.outer.origin)
        found += [(req, d) for d in report_outcome("SPLIT-DIVISIBILITY", out, f"that {s} divides",
                                                   lambda out: _not_divisible(ctx, req, out, where, outside), **where)]
    if found and not _COMBINING:
        _combine(ctx, found)
    yield from (d for _, d in found)
    yield from _straddling_k(ctx)


def _holes_outside(ctx: VerifyContext, req: RequiredSplit) -> list[tuple[AccessModel, Outcome | None]]:
    """The tcgen05 accesses that run req's holes (analysis/tmem_holes.py) not proved inside
    their allocation, each with its outcome (None: no proved tcgen05 pattern)."""
    found = []
    for m in access_models(ctx):
        if m.acc.key in req.tmem:  # no hole predicate (a broadcast's): proved over the same points
            out = holes_inside(ctx, m)
            if out is None or not out.proved:
                found.append((m, out))
    return found


def _whole_vectors(ctx: VerifyContext, tv: TensorView) -> bool:
    """Whether every hole of tv's statement takes its vectors whole: for all admitted sizes,
    points and two elements v1, v2 of one vector, its hole predicates hold at v1 iff at v2 (a
    row past M under a vector of columns), so the predicate at one element (the code generator
    tests the last) decides the whole vector. An indivisible split inside a vector is not.
    Formal statement: for all admitted sizes, points p and v1, v2 < extent(v):
      and(holes(p, v1)) == and(holes(p, v2))."""
    def prove() -> bool:
        axis = vector_axis(tv)
        if axis is None:
            return False
        ex = tensor_execution(tv, ctx.block_dims)
        v = ex.env[axis.uid]
        holes = ex.conds_of(CondKind.HOLE)
        if v.op != "var" or not holes:
            return v.op == "var"
        other = ex.renamed({v.value: var(OTHER + v.value)})
        ranges = {**ex.guarded_ranges, OTHER + v.value: axis.extent_expr}
        theirs = other.conds_of(CondKind.HOLE)
        q = ctx.query([e for c in holes + theirs for e in (c.lhs, c.rhs)], ranges)
        return q.prove(z3.And(*[q.holds(c) for c in holes]) == z3.And(*[q.holds(c) for c in theirs])).proved

    return ctx.memo(("whole-vectors", tv.name), prove)


def _straddling_k(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A cp.async vector on a zero path (execution/zero_padding.py) lies wholly before K or wholly
    past it: it is issued as one copy, with src-size 0 past K, so a vector across K would zero
    elements before K (or read past the operand).
    Formal statement: for each such cp.async T with Vectorize ID v (indices v1, v2 < extent(v)):
      for all admitted sizes and points: conds(v1) and conds(v2) => past_K(v1) == past_K(v2)."""
    padded = zero_padded(ctx.fusion)
    for tv in ctx.executed():
        axis = vector_axis(tv)
        if tv.name not in padded or axis is None or not is_cp_async(tv.definition):
            continue
        ex = tensor_execution(tv, ctx.block_dims)
        v = ex.env[axis.uid]
        if not ex.padding or v.op != "var":
            continue
        other = ex.renamed({v.value: var(OTHER + v.value)})
        ranges = {**ex.guarded_ranges, OTHER + v.value: axis.extent_expr}
        q = ctx.query([e for c in ex.conds + ex.padding + other.padding for e in (c.lhs, c.rhs)], ranges)
        inside = [z3.And(*[q.holds(c) for c in e.padding]) for e in (ex, other)]
        premise = z3.And(*[q.holds(c) for c in ex.conds + other.conds], q.ctx)
        c, o = ex.padding[0], other.padding[0]
        out = q.prove(z3.Implies(premise, inside[0] == inside[1]),
                      values={"index": c.lhs, "other index": o.lhs, "extent": c.rhs})
        yield from report_values(
            ctx, "SPLIT-DIVISIBILITY", out, f"that {tv.name}'s cp.async vectors end at K",
            lambda v, when: (f"{tv.name}'s {axis.static_extent or ''}-element cp.async vector straddles the end "
                             f"of K{when}: it holds K indices {v.get('index')} and {v.get('other index')} on both "
                             f"sides of K = {v.get('extent')}, and one copy cannot zero-fill only its part past K"),
            ("index", "other index", "extent"), point=tuple(ranges),
            hint="make K a multiple of the vector (fusion.assume(\"K % 8 == 0\") for 16-byte bfloat16 copies)",
            tensor=tv.name, ids=[axis.name], location=tv.origin)


_COMBINING: list[bool] = []  # set while a combined assumption is checked on a copy (no nesting)


def _combine(ctx: VerifyContext, found: list[tuple[RequiredSplit, Diagnostic]]) -> None:
    """The weakest assumption per size symbol that makes every failing split divide or leave its
    holes as whole vectors, proposed on the first failure when a copy of the fusion with it has
    no SPLIT-DIVISIBILITY finding; the other failures then follow from it. The candidates for a
    symbol S are S % d == 0 for d dividing the product k of the constant factors down each chain
    of splits (S % k == 0 always makes them divide), tried from the smallest d, each symbol in
    turn with the others at their candidate: each weaker d tried is shown with the size it fails."""
    need: dict[sympy.Symbol, int] = {}
    for req, d in found:
        if d.severity is not Severity.ERROR or not d.counterexample:
            return
        chain = _chain_modulus(req.split.in_.extent, int(req.split.inner.extent) if req.split.inner.extent.is_Integer else None)
        if chain is None:
            return
        sym, k = chain
        need[sym] = math.lcm(need.get(sym, 1), k)
    if any(ctx.bind.get(s.name) is not None for s in need):
        return
    chosen = dict(need)
    weaker: list[str] = []  # "N % 2 == 0 (fails at N = 6)" for each weaker candidate tried
    deadline = time.monotonic() + CANDIDATE_SECONDS
    fixed = _with_assumptions(ctx, chosen)
    if fixed is None or isinstance(fixed, str):
        return

    def attempt(sym, d):  # past the time for the search, a candidate counts as not verified (sound, stronger)
        return _with_assumptions(ctx, {**chosen, sym: d}) if time.monotonic() < deadline else None

    for sym in sorted(need, key=lambda s: s.name):
        candidates = [d for d in range(2, need[sym]) if need[sym] % d == 0][:MAX_CANDIDATES]
        weakest, failed = _weakest(candidates, lambda d, sym=sym: attempt(sym, d))
        if weakest:
            chosen[sym], fixed = weakest
        weaker += [f"{sym.name} % {d} == 0 (fails at {at})" for d, at in sorted(failed.items())]
    claims = [f"{s.name} % {k} == 0" for s, k in sorted(chosen.items(), key=lambda sk: sk[0].name)]
    first = found[0][1]
    assumes = "; ".join(f'fusion.assume("{c}")' for c in claims)
    why = f"; not with the weaker {', '.join(weaker[-2:])}" if weaker else ""
    said = "state it" if len(found) == 1 else f"state once for all {len(found)} splits that must divide"
    what = "the split" if len(found) == 1 else "each of them"
    first.hint = (f"if every size you run satisfies it, {said}: {assumes} "
                  f"(verified: with it, {what} divides or leaves only whole vectors of holes{why}); otherwise "
                  + (f"split {found[0][0].split.in_.label()} by a factor that always divides "
                     f"{user_str(found[0][0].split.in_.extent)}" if len(found) == 1 else
                     "split by factors that always divide"))
    first.id = propose_fix(ctx, f"SPLIT-DIVISIBILITY:{first.tensor}", fixed)


def _weakest(candidates: list[int], attempt) -> tuple[tuple[int, VerifyContext] | None, dict[int, str]]:
    """The smallest candidate d whose attempt(d) verifies (a VerifyContext), with that context, and
    the sizes each failing candidate tried fails at. Where each candidate divides the next (the
    divisors of a prime power), S % d == 0 admits a subset of the sizes S % c == 0 does for every
    c before d, so a candidate that verifies stays verified for all after it: bisection finds the
    smallest in log2 of the attempts (each verifies a copy of the fusion); otherwise in turn."""
    chain = all(b % a == 0 for a, b in zip(candidates, candidates[1:]))
    found, failed = None, {}
    lo, hi = 0, len(candidates)
    while lo < hi:
        i = (lo + hi) // 2 if chain else lo
        tried = attempt(candidates[i])
        if isinstance(tried, VerifyContext):
            found, hi = (candidates[i], tried), (i if chain else lo)
        else:
            lo = i + 1
            if tried is not None:
                failed[candidates[i]] = tried
    return found, failed


MAX_CANDIDATES = 12  # weaker assumptions tried per symbol (each verifies a copy of the fusion)
# the search for weaker ones stops this long after the first copy started (a copy with tensor memory
# verifies in seconds: its tcgen05 patterns searched again); the help then proposes the weakest verified so far
CANDIDATE_SECONDS = 3.0
CANDIDATE_SHRINK_SECONDS = 0.03  # a small size at which a weaker assumption fails, shown in the hint


def _with_assumptions(ctx: VerifyContext, need: dict[sympy.Symbol, int]) -> VerifyContext | str | None:
    """The context of a copy of the fusion assuming S % k == 0 for each (S, k) of `need` when the
    copy has no SPLIT-DIVISIBILITY error; else the sizes of one it has ("N = 6"), or None when
    the assumptions admit no size or the copy's finding shows none."""
    fixed_fusion = copy.deepcopy(ctx.fusion)
    for s, k in sorted(need.items(), key=lambda sk: sk[0].name):
        fixed_fusion.assume(f"{s.name} % {k} == 0")
    fixed = VerifyContext(fixed_fusion, ctx.target, ctx.bind, shrink_seconds=CANDIDATE_SHRINK_SECONDS)
    _COMBINING.append(True)
    try:
        if not satisfiable(fixed, fixed_fusion.assumptions):
            return None
        errors = [d for d in split_divisibility(fixed) if d.severity is Severity.ERROR]
    finally:
        _COMBINING.pop()
        ctx.queries += fixed.queries
    if not errors:
        return fixed
    sizes = {k: v for k, v in errors[0].counterexample.items() if k in fixed_fusion.symbols}
    return ", ".join(f"{k} = {v}" for k, v in sizes.items()) or None


def _chain_modulus(extent, factor: int | None) -> tuple[sympy.Symbol, int] | None:
    """(S, k) when `extent` is S or ceil(...ceil(S / c1)... / cn) with constant c's and the factor
    is constant: then S % k == 0 with k = c1 * ... * cn * factor makes extent % factor == 0."""
    if factor is None:
        return None
    k = factor
    e = extent
    while not isinstance(e, sympy.Symbol):
        if not isinstance(e, sympy.ceiling):
            return None
        num, den = sympy.fraction(sympy.together(e.args[0]))
        if not den.is_Integer:
            return None
        k *= int(den)
        e = num
    return e, k


def _not_divisible(ctx: VerifyContext, req: RequiredSplit, out: Outcome, where: dict,
                   outside: list[tuple[AccessModel, Outcome | None]]) -> Diagnostic:
    s = req.split
    ext, inner, rem = out.values["extent"], out.values["inner"], out.values["remainder"]
    sizes = ctx.symbols_of(out.model)
    holes = -(-ext // inner) * inner - ext
    notes, witness = [f"the split must divide because {req.why}"], {}
    if outside:
        m, hole = outside[0]
        notes.append(f"the {m.describe} runs at the holes too (tcgen05 is warp-collective, issued unpredicated), "
                     f"which is safe only where each cell it touches there lies in {m.acc.tensor.name}'s allocation "
                     f"and holds no valid element: {_where_holes_fall(ctx, m, hole)}")
        witness = _hole_witness(ctx, m, hole)
    return finding(
        "SPLIT-DIVISIBILITY",
        f"split of {s.in_.label()} by {s.factor} in {req.tensor.name} is not divisible{when_clause(sizes)}: "
        f"{ext} % {inner} = {rem}, leaving {holes} holes",
        notes=notes,
        counterexample={**sizes, "extent": ext, "inner extent": inner, "remainder": rem, **witness},
        hint=_divisibility_hint(s, sizes),
        **where,
    )


def _where_holes_fall(ctx: VerifyContext, m: AccessModel, hole: Outcome | None) -> str:
    if hole is None:
        return "it matches no proved tcgen05 pattern, so where the holes fall is not known"
    if hole.status is not Verdict.COUNTEREXAMPLE:
        return f"not decided ({hole.reason})"
    v = hole.values
    sizes = ctx.symbols_of(hole.model)
    warp = v["warp"] % 4
    if v["column"] >= v["columns"] or v["lane"] // 32 != warp:
        region = region_of(ctx.fusion, m.acc.tensor.name)
        shared = (f" (of the tensor-memory region {'+'.join(region.names)} it shares: the next tensor's columns "
                  f"follow)" if region.shared else "")
        return (f"{when_clause(sizes).strip() or 'here'}, thread {v['thread']} (warp {v['warp']}) at a hole reaches lane "
                f"{v['lane']}, column {v['column']}: its allocation has columns 0..{v['columns'] - 1}{shared}, and warp "
                f"{v['warp']} reaches lanes {32 * warp}..{32 * warp + 31} only")
    return (f"{when_clause(sizes).strip() or 'here'}, thread {v['thread']} at a hole stores into lane {v['lane']}, "
            f"column {v['column']}, where a valid element of the same allocation is stored: the hole's garbage "
            f"could replace it")


def _hole_witness(ctx: VerifyContext, m: AccessModel, hole: Outcome | None) -> dict:
    if hole is None or hole.status is not Verdict.COUNTEREXAMPLE:
        return {}
    v = hole.values
    return {**{f"hole {k}": x for k, x in ctx.symbols_of(hole.model).items()},
            "hole thread": v["thread"], "hole lane": v["lane"], "hole column": v["column"],
            "columns allocated": v["columns"]}


def _prove_divides(ctx: VerifyContext, n: Expr, f: Expr):
    q = ctx.query([n, f, mod(n, f)])
    return q.prove(q.eq(mod(n, f), const(0)), values={"extent": n, "inner": f, "remainder": mod(n, f)}, smallest=n)


def _divisibility_hint(s: Split, sizes: dict[str, int]) -> str:
    if sizes:  # the extent split, not every size of the counterexample (a split of N, not of M * N)
        claim = user_str(sympy.Eq(sympy.Mod(s.in_.extent, s.inner.extent), 0))
        return (f"if every size you run satisfies it, state it: fusion.assume(\"{claim}\")"
                f"; otherwise split {s.in_.label()} by a factor that always divides {user_str(s.in_.extent)}")
    return (f"split by a factor that divides {user_str(s.in_.extent)}, or pad the tensor to a multiple of "
            f"{user_str(s.inner.extent)}")


def _global_view(ctx: VerifyContext, tv: TensorView):
    """(global tensor, logical position map from tv's logical axes) for tv's global access."""
    if tv.memory_type is MemoryType.Global:
        yield tv, {i.uid: k for k, i in enumerate(tv.logical)}
    op = tv.definition
    for k, src in enumerate(op.inputs if op is not None else []):
        if src.memory_type is MemoryType.Global:
            yield src, {tv.root[j].uid: p for j, p in enumerate(op.logical_map[k]) if p is not None}


def _logical_roots(i: IterDomain) -> set[int]:
    roots, stack = set(), [i]
    while stack:
        n = stack.pop()
        if n.definition is None:
            roots.add(n.uid)
        else:
            stack.extend(n.definition.inputs)
    return roots


@rule("VIEW-DISCONTIGUOUS-MERGE", family="divisibility")
def view_discontiguous_merge(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A merge that a vectorized global access reads through must be a view of memory.

    What it checks:
        When a vectorized IterDomain is carved out of a merge of IterDomains that are
        not contiguous in the global tensor's allocation (contiguity False, or not
        adjacent in allocation order), the vector width divides the inner extent of
        the merge for every admitted size, so no vector crosses a discontinuity.
    Why the hardware needs it:
        A vector access reads consecutive addresses. Across a discontiguous merge the
        next element after a row end is not the next address: the vector would read
        the padding between rows instead of the next row's first elements.
    Example:
        fusion, t0, t1 = copy_chain("strided_rows", [8, 6], copies=1, contiguity=[False, True])
        t1.merge(0).split(0, 4)
        t1.axis(1).parallelize(tp.ParallelType.Vectorize)
    Fix:
        fusion, t0, t1 = copy_chain("strided_rows", [8, 8], copies=1, contiguity=[False, True])
        t1.merge(0).split(0, 4)
        t1.axis(1).parallelize(tp.ParallelType.Vectorize)
    References:
        nvFuser doc/reading/divisibility-of-split.md ("merging discontiguous IterDomains");
        docs/hardware.md#vector-loads-and-stores
    Reported with:
        VECTORIZE-CONTIGUOUS
    """
    # Formal statement: for every Vectorize ID v of an executed tensor, its global operand g and every
    #   merge M on v's path whose two sides are not adjacent in g's allocation order or are separated by
    #   a discontiguous axis (structural), for all admitted sizes s: extent(M.inner)(s) mod extent(v)(s) == 0
    for tv in ctx.executed():
        for v in tv.loop:
            if v.parallel_type is not ParallelType.Vectorize:
                continue
            merges = [t for t in ancestors(v) if isinstance(t, Merge)]
            for g, logical_pos in _global_view(ctx, tv):
                layout = global_strides(g)  # memory order, allocation merges expanded
                if layout is None:
                    continue  # LOWERING-SUPPORTED
                order = [g.logical[a].uid for a in layout.alloc_axes]
                contig = layout.contiguous
                for m in merges:
                    dims = []
                    for side in (m.outer, m.inner):
                        pos = [logical_pos[r] for r in _logical_roots(side) if r in logical_pos]
                        dims.append(sorted(order.index(g.logical[p].uid) for p in pos if g.logical[p].uid in order))
                    outer_dims, inner_dims = dims
                    if not outer_dims or not inner_dims:
                        continue
                    span = outer_dims + inner_dims
                    adjacent = span == list(range(span[0], span[0] + len(span)))
                    gaps = [d for d in span[:-1] if contig[d] is False]
                    if adjacent and not gaps:
                        continue
                    yield from _check_chunk(ctx, tv, g, m, v, gaps, adjacent)


def _check_chunk(ctx, tv, g, m: Merge, v: IterDomain, gaps, adjacent):
    inner, width = m.inner.extent_expr, v.extent_expr
    q = ctx.query([inner, width, mod(inner, width)])
    out = q.prove(q.eq(mod(inner, width), const(0)), values={"row length": inner, "vector width": width})
    why = (f"axis {gaps[0]} of {g.name} is not contiguous" if gaps
           else f"the merged axes are not adjacent in {g.name}'s allocation order")
    yield from report_values(
        ctx, "VIEW-DISCONTIGUOUS-MERGE", out, f"that vectors of {v.label()} stay inside one row",
        lambda val, when: (f"{m} in {tv.name} is not a view of {g.name}'s memory{when}: {why}, and a vector of "
                           f"{val['vector width']} crosses the end of a row of {val['row length']} elements"),
        ["row length", "vector width"],
        notes=[f"{v.label()} is vectorized, so its elements must be consecutive in {g.name}"],
        hint=(f"vectorize by a width that divides {m.inner.extent}, vectorize only the inner axis "
              f"before merging, or make {g.name} contiguous"),
        tensor=tv.name, ids=[m.outer.name, m.inner.name, m.out.name, v.name], location=m.out.origin)
