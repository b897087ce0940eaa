"""Online reductions' skipped iterations: an online max's loop that ends, per block, where its mask
drops every later tile (TensorView.skip_masked; execution/skip.py derives what the kernel runs)."""

from __future__ import annotations

from typing import Iterator

import z3

from ...execution.skip import mask_comparison, skip_problems, skipped_loops
from ...execution.loops import execution_order, loop_groups
from ...execution.statements import tensor_execution
from ...model.expr import const
from ...model.types import BLOCK_TYPES
from ..context import VerifyContext
from ..diagnostics import Diagnostic
from ..findings import report_problems, report_values
from ..registry import rule


@rule("ONLINE-SKIP", family="online", premises=("ONLINE-RESCALE",))
def online_skip(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """The iterations an online max's loop skips are masked whole, and skipping them changes nothing.

    What it checks:
        For every online max m with m.skip_masked(mask, trip_count): a block runs the first
        T = min(E, trip_count(block)) iterations of m's loop over tiles (E its extent) in every role
        (a count may read the index of a serial loop around it too, m.loop_index: then per tile).
        z3 proves, for every block (and tile) of the launch, T >= 1 (each dividend in the count >= 0, as the
        kernel divides unsigned integers), and that mask is false at every point of
        every skipped iteration t >= T the kernel would compute (holes aside), the mask's value
        read off the ops as an affine comparison of tp.iota values. Structurally: m's input is
        where(mask, x, -inf) (through the tile's max, copies, casts and positive scales); the terms
        of each sum m rescales are 0 where that where is -inf (exp2 or exp of it times a number > 0,
        plus values not computed from it, times values not computed from it, cast, summed); and
        nothing else is carried across the loop (no other reduction sums over it, no value
        computed inside it is an output or read after it but through m and its sums). With
        skip_masked's `unmasked` count U: the mask is true at every point of every iteration
        t < min(T, U(block)), which the kernel computes without the mask (the where is its x there),
        and U >= 0 with each dividend in it >= 0 for every block (the kernel computes U unsigned).
    Why the hardware needs it:
        Skipping is exact only for an iteration that is the identity on the loop's carried state:
        its scores all -inf, the running max (finite, since iteration 0 always runs) does not grow,
        the rescale factor is exp2(0) = 1 and the terms exp2(-inf) = 0, so acc * 1 + 0 = acc. A
        trip count one tile short drops scores the mask keeps; a mask that is not a comparison of
        indices cannot be decided for every block; a masked value that is not -inf, or a sum whose
        terms are not exp of it, changes the state in the iterations the kernel never runs.
    Example:
        fusion, x, keep, m, l, lse = masked_logsumexp("short_trip")
        m.skip_masked(keep, lambda bx, by, bz: (bx * 32 + 31 + 160) // 64)
    Fix:
        fusion, x, keep, m, l, lse = masked_logsumexp("causal_trip")
        m.skip_masked(keep, lambda bx, by, bz: (bx * 32 + 31 + 160) // 64 + 1)
    References:
        FlashAttention-2 (Dao 2023), section 3.1.1 (causal masking: blocks above the diagonal are
        skipped); docs/attention.md#causal-tile-skipping
    """
    # Formal statement: for the where W = where(mask, x, -inf) feeding online max m over loop L of
    #   extent E, with T(b) = min(E, trip(b)) and mask(i, j) = cmp(lhs(i, j), rhs(i, j)) affine:
    #   for all admitted sizes and blocks b: 1 <= trip(b), and for all points p of W's statement with
    #   conds(p) and L's index t(p) >= T(b(p)): not cmp(lhs, rhs) at the mask's indices W reads at p
    yield from report_problems("ONLINE-SKIP", skip_problems(ctx.fusion))
    for s in skipped_loops(ctx.fusion).values():
        if s.where is None:
            continue
        w, m, mask = s.where, s.max, s.mask
        ex = tensor_execution(w, ctx.block_dims)
        loops = [_shared_index(ctx.fusion, m, k, w, ex) for k in s.loop_axes()]  # the counts' loop indices
        s = s.named(lambda k: _shared_index(ctx.fusion, m, k, w, ex))  # as the where's statement names them
        at, cmp_ = s.where_position, mask_comparison(mask, ex.read_logical(0))[0]
        if at is None or cmp_ is None:
            continue  # skip_problems reports a where outside the loop and a mask of another form
        op, lhs, rhs = cmp_
        t, trip = ex.env[w.loop[at].uid], s.trip_count
        ranges = dict(ex.ranges)
        for p in BLOCK_TYPES:  # the trip count may read a block index W's statement does not
            ranges.setdefault(p.cuda_name, ctx.block_dims[p] if p in ctx.block_dims else const(1))
        exprs = [lhs, rhs, t, trip, s.given] + [e for c in ex.conds for e in (c.lhs, c.rhs)]
        q = ctx.query(exprs, ranges, integers=True)
        # the kernel divides in unsigned integers: every dividend of the count is >= 0 (z3 divides as floor)
        dividends = [z3.BoolVal(True, q.ctx)] + [q.le(const(0), d) for d in _dividends(s.given)]
        at_least_one = q.prove(z3.And(q.le(const(1), s.given), *dividends), values={"trip count": s.given})
        blocks = [p.cuda_name for p in BLOCK_TYPES] + [e.value for e in loops if e.op == "var"]
        yield from report_values(
            ctx, "ONLINE-SKIP", at_least_one, f"that every block runs iteration 0 of {m.name}'s loop",
            lambda v, when: (f"online max {m.name}'s trip count is {v['trip count']} for a block{when}: "
                             f"its loop runs no iteration, and the running max stays -inf" if v["trip count"] < 1 else
                             f"online max {m.name}'s trip count divides a negative number for a block{when}: the "
                             f"kernel divides unsigned integers"),
            ["trip count"], point=blocks, hint="make the trip count at least 1 for every block (iteration 0 "
                                                "gives every row a finite running max), each dividend in it >= 0",
            tensor=m.name, location=m.skip_origin)
        if not at_least_one.proved:
            continue
        if s.unmasked is not None:
            yield from _unmasked(ctx, s, ex, exprs + [s.unmasked], ranges, t, trip, (op, lhs, rhs), blocks)
        q = ctx.query(exprs, ranges, integers=True)
        kept = _COMPARE[op](q, lhs, rhs)
        runs = z3.And(*[q.holds(c) for c in ex.conds], q.le(trip, t), q.ctx)
        indices = {f"{mask.name} axis {a}": e for a, e in enumerate(ex.read_logical(0))}
        out = q.prove(z3.Implies(runs, z3.Not(kept)),
                      values={"iteration": t, "trip count": trip, "left": lhs, "right": rhs, **indices})
        yield from report_values(
            ctx, "ONLINE-SKIP", out, f"that {mask.name} drops every point of the iterations {m.name}'s loop skips",
            lambda v, when: (f"online max {m.name}'s loop skips iteration {v['iteration']} (its trip count is "
                             f"{v['trip count']}){when}, but {mask.name} keeps "
                             f"{mask.name}[{', '.join(str(v[k]) for k in indices)}] there ({v['left']} {op} "
                             f"{v['right']}): a score the fusion keeps is dropped"),
            ["iteration", "trip count", *indices], point=blocks,
            hint=f"raise the trip count to the last iteration with a kept point plus one (a count too large only "
                 f"runs masked iterations)", tensor=w.name, location=m.skip_origin)


def _unmasked(ctx, s, ex, exprs, ranges, t, trip, comparison, blocks) -> Iterator[Diagnostic]:
    """The mask keeps every point of the iterations below skip_masked's `unmasked`, which the kernel
    computes without it (codegen/lower/peel.py); `blocks`: the block and loop indices a
    counterexample shows."""
    (op, lhs, rhs), w, m, mask = comparison, s.where, s.max, s.mask
    # the kernel computes the count in unsigned integers: below 0 (or a negative dividend) it would wrap
    # to a huge count and compute every iteration without the mask
    q = ctx.query(exprs, ranges, integers=True)
    signed = q.prove(z3.And(q.le(const(0), s.unmasked), *[q.le(const(0), d) for d in _dividends(s.unmasked)]),
                     values={"unmasked": s.unmasked})
    yield from report_values(
        ctx, "ONLINE-SKIP", signed, f"that {m.name}'s unmasked count is an unsigned number for every block",
        lambda v, when: (f"online max {m.name}'s unmasked count is {v['unmasked']} for a block{when}, or divides a "
                         f"negative number: the kernel computes it in unsigned integers, where it wraps to a count "
                         f"past every iteration, and the mask would be dropped everywhere"),
        ["unmasked"], point=blocks, hint="keep the unmasked count and each dividend in it >= 0 for every block (0: "
                                         "no iteration without the mask)", tensor=m.name, location=m.skip_origin)
    if not signed.proved:
        return
    q = ctx.query(exprs, ranges, integers=True)
    peeled = z3.And(*[q.holds(c) for c in ex.conds], q.lt(t, trip), q.lt(t, s.unmasked), q.ctx)
    indices = {f"{mask.name} axis {a}": e for a, e in enumerate(ex.read_logical(0))}
    out = q.prove(z3.Implies(peeled, _COMPARE[op](q, lhs, rhs)),
                  values={"iteration": t, "unmasked": s.unmasked, "left": lhs, "right": rhs, **indices})
    yield from report_values(
        ctx, "ONLINE-SKIP", out,
        f"that {mask.name} keeps every point of the iterations below {m.name}'s unmasked count",
        lambda v, when: (f"online max {m.name}'s loop computes iteration {v['iteration']} without {mask.name} (its "
                         f"unmasked count is {v['unmasked']}){when}, but {mask.name} drops "
                         f"{mask.name}[{', '.join(str(v[k]) for k in indices)}] there ({v['left']} {op} {v['right']} "
                         f"is false): a score the fusion masks is kept"),
        ["iteration", "unmasked", *indices], point=blocks,
        hint="lower the unmasked count to the first iteration with a dropped point (a count too small only "
             "computes the mask where it keeps everything)", tensor=w.name, location=m.skip_origin)


def _shared_index(fusion, m, k, w, ex):
    """The index of the where's loop that is the max's loop axis k (one loop of the nest), as the
    where's statement names it; the placeholder where the where is outside it (skip_problems)."""
    groups = loop_groups(fusion, execution_order(fusion))
    g = groups.of.get((m.name, k))
    j = next((j for j in range(len(w.loop)) if g is not None and groups.of.get((w.name, j)) is g), None)
    return m.loop_index(k) if j is None else ex.env[w.loop[j].uid]


def _dividends(e) -> list:
    """The dividends of every floordiv, ceildiv and mod in e."""
    out = [e.args[0]] if e.op in ("floordiv", "ceildiv", "mod") else []
    return out + [d for a in e.args for d in _dividends(a)]


_COMPARE = {
    "lt": lambda q, a, b: q.lt(a, b),
    "le": lambda q, a, b: q.le(a, b),
    "gt": lambda q, a, b: q.lt(b, a),
    "ge": lambda q, a, b: q.le(b, a),
    "eq": lambda q, a, b: q.eq(a, b),
    "ne": lambda q, a, b: q.ne(a, b),
}
