"""Whether the sizes a proof covers exist: a witness of a fusion's assumptions, its bindings and
the extent symbols' ranges together (ASSUMPTIONS-SATISFIABLE reports a conflict; the
divisibility rules check that a proposed fix keeps some size).

May import model/ and verifier's context.py and solver.py; never verifier/rules/.
"""

from __future__ import annotations

import sympy
import z3

from ..context import VerifyContext
from ..solver import Query, Verdict, assumption_terms


def witness(ctx: VerifyContext, assumptions: list[sympy.Basic]) -> dict[str, int] | None:
    """Sizes satisfying all `assumptions` (and the bindings and ranges), the smallest a few
    solves find, or None if there are none."""
    return _witness(ctx, assumptions, readable=True)


def satisfiable(ctx: VerifyContext, assumptions: list[sympy.Basic]) -> bool:
    """Some size satisfies all `assumptions` (an undecided query counts as yes)."""
    return _witness(ctx, assumptions, readable=False) is not None


def _witness(ctx: VerifyContext, assumptions: list[sympy.Basic], readable: bool) -> dict[str, int] | None:
    """witness(); `readable=False`: any sizes (whether there are some is all a caller asks: no
    solve is spent making them small)."""
    q = Query([t for a in assumptions for t in assumption_terms(a)], {}, symbols=ctx.symbol_bounds(),
              context=ctx.z3_context)
    for a in assumptions:
        q.assume_sympy(a)
    ctx.queries += 1
    out = q.prove(z3.BoolVal(False, q.ctx), shrink_units=None if readable else 0)
    if out.status is Verdict.UNKNOWN:
        return {}  # undecided: not reported as a conflict (every rule's own query decides its claim)
    return None if out.proved else {k: v for k, v in out.model.items() if k in ctx.fusion.symbols}
