"""What verify decides for the code generator and records on its Report (`Report.decisions`), so
that tp.compile renders what was proved without asking a solver again:

    claims    every claim execution/predicates.py lists for the fusion (a hole or padding
              predicate `lhs < rhs` its assumptions make redundant, registers that are
              consecutive), each proved or not over every point of its ranges and every
              admitted size
    tcgen05   each tensor-memory access's pattern (analysis/tmem.py tcgen05_shape, the TMEM
              rules' own answers)

Each claim is tried over the integers first: a tile of a non-power-of-two width
(200 * blockIdx.y + .. < N, N % 200 == 0) takes z3 0.01 s there and 10 s without a verdict over
bit-vectors; a swizzle's XOR has no integer rendering and goes to bit-vectors.
"""

from __future__ import annotations

from ...execution.predicates import Claim, Equal, Implied, claims
from ...model.expr import Expr
from ..context import INTEGER_RETRY_MS, VerifyContext
from ..diagnostics import Decisions
from ..solver import Verdict
from .tmem import access_models, tcgen05_shape


def decide(ctx: VerifyContext) -> Decisions:
    """The decisions for ctx's fusion (verify records them where it ran every rule without `bind`)."""
    decided = tuple((claim, holds(ctx, claim)) for claim in claims(ctx.fusion))
    patterns = tuple((m.acc.key, tcgen05_shape(ctx, m)) for m in access_models(ctx))
    return Decisions(decided, patterns)


def holds(ctx: VerifyContext, claim: Claim) -> bool:
    """Whether `claim` is proved at every point of its ranges for every admitted size."""
    if isinstance(claim, Implied):
        terms, state = [claim.lhs, claim.rhs], (lambda q: q.lt(claim.lhs, claim.rhs))
    elif isinstance(claim, Equal):
        terms, state = [claim.a, claim.b], (lambda q: q.eq(claim.a, claim.b))
    else:
        raise TypeError(f"holds: not a claim: {claim!r}")
    return _proved(ctx, terms, dict(claim.ranges), state)


def _proved(ctx: VerifyContext, terms: list[Expr], ranges: dict[str, Expr], state) -> bool:
    try:
        q = ctx.query(terms, ranges, timeout_ms=INTEGER_RETRY_MS, integers=True)
        out = q.prove(state(q), shrink_units=0)
        if out.status is not Verdict.UNKNOWN:
            return out.proved
    except (KeyError, ValueError):  # an XOR: no integer rendering
        pass
    q = ctx.query(terms, ranges)
    return q.prove(state(q), shrink_units=0).proved
