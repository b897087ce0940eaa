"""Predicates the fusion's assumptions make redundant, found with the verifier's solver.

A hole of an indivisible split is checked at run time unless it cannot happen. Syntax
(model/simplify.py less_than) settles the plain cases; with `fusion.assume(...)` a split may divide
only under the assumptions (M % 128 == 0), and z3 proves that over every loop point and
admitted size, as the verifier did. Warp-collective instructions need this: they cannot be
predicated per lane.
"""

from __future__ import annotations

from ...model.expr import Expr
from ...model.fusion import Fusion
from ...model.targets import Target
from ...verifier.context import VerifyContext
from ..ir import Cond


def always_equal(a: Expr, b: Expr, fusion: Fusion, target: Target | None, ranges: dict[str, Expr]) -> bool:
    """a == b at every point of `ranges` for every admitted size."""
    q = VerifyContext(fusion, target).query([a, b], ranges)
    return q.prove(q.eq(a, b)).proved


def drop_implied(conds: list[Cond], fusion: Fusion, target: Target | None, ranges: dict[str, Expr]) -> list[Cond]:
    """The conds not proved to hold everywhere (`lhs < rhs` only; others are kept)."""
    if not conds or not fusion.assumptions:
        return conds
    ctx = VerifyContext(fusion, target)
    keep = []
    for c in conds:
        if c.op == "<":
            q = ctx.query([c.lhs, c.rhs], ranges)
            if q.prove(q.lt(c.lhs, c.rhs)).proved:
                continue
        keep.append(c)
    return keep
