"""Predicates the fusion's assumptions make redundant, found with the verifier's solver.

A hole of an indivisible split is checked at run time unless it cannot happen. Syntax
(model/simplify.py less_than) settles the plain cases; with `fusion.assume(...)` a split may divide
only under the assumptions (M % 128 == 0), and z3 proves that over every loop point and
admitted size, as the verifier did. Warp-collective instructions need this: they cannot be
predicated per lane. Each claim is tried over the integers first: a tile of a non-power-of-two
width (200 * blockIdx.y + .. < N, N % 200 == 0) takes z3 0.01 s there and 10 s without a
verdict over bit-vectors; a swizzle's XOR has no integer rendering and goes to bit-vectors.
"""

from __future__ import annotations

from ...model.expr import Expr
from ...model.fusion import Fusion
from ...model.targets import Target
from ...verifier.context import INTEGER_RETRY_MS, VerifyContext
from ...verifier.solver import Verdict
from ..ir import Cond


def _holds(ctx: VerifyContext, terms: list[Expr], ranges: dict[str, Expr], claim) -> bool:
    """claim(query) proved at every point of `ranges` for every admitted size."""
    try:
        q = ctx.query(terms, ranges, timeout_ms=INTEGER_RETRY_MS, integers=True)
        out = q.prove(claim(q))
        if out.status is not Verdict.UNKNOWN:
            return out.proved
    except (KeyError, ValueError):  # an XOR: no integer rendering
        pass
    q = ctx.query(terms, ranges)
    return q.prove(claim(q)).proved


def always_equal(a: Expr, b: Expr, fusion: Fusion, target: Target | None, ranges: dict[str, Expr]) -> bool:
    """a == b at every point of `ranges` for every admitted size."""
    return _holds(VerifyContext(fusion, target), [a, b], ranges, lambda q: q.eq(a, b))


def drop_implied(conds: list[Cond], fusion: Fusion, target: Target | None, ranges: dict[str, Expr]) -> list[Cond]:
    """The conds not proved to hold everywhere (`lhs < rhs` only; others are kept)."""
    if not conds or not fusion.assumptions:
        return conds
    ctx = VerifyContext(fusion, target)
    keep = []
    for c in conds:
        if c.op == "<" and _holds(ctx, [c.lhs, c.rhs], ranges, lambda q, c=c: q.lt(c.lhs, c.rhs)):
            continue
        keep.append(c)
    return keep
