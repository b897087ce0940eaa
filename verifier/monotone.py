"""Budget claims over the sizes alone, `f(sizes) <= cap`, decided by evaluation when f grows
with every size (a product of extents and ceiling divisions by constants, as shared-memory
bytes, tensor-memory columns and block threads are) and the assumptions are all ranges
(verifier/symbol_ranges.py). Such a claim holds iff it holds at the largest sizes; otherwise
the smallest counterexample, each size in turn as small as the failure allows, is found by
bisection. That is the counterexample Query.prove shrinks toward, reached in microseconds
where z3 takes a bit-vector query per probe (a nonlinear one: 0.3 s for 32 * ceil(M / 8)).
tests/verifier/test_monotone.py compares the verdicts and counterexamples with z3's on random claims.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Mapping

from ..model.expr import Expr, const, evaluate
from ..model.simplify import Simplifier
from .solver import Outcome, Verdict
from ..model.symbol_ranges import Admitted

if TYPE_CHECKING:
    from .context import VerifyContext

# the limit of a size claim's proof over the integers, tried before its bit-vector query
INTEGER_MS = 2000
_GROWING = {"add", "mul", "max"}  # non-decreasing in each argument (all of them non-negative)
_DIVIDING = {"floordiv", "ceildiv"}  # non-decreasing in the dividend for a positive constant divisor


def growing(e: Expr, ranges: Simplifier) -> bool:
    """e is non-negative and non-decreasing in each of its variables where they lie in `ranges`
    (each at least 1)."""
    if e.op == "const":
        return e.value >= 0  # type: ignore[operator]
    if e.op == "var":
        return True
    if e.op in _GROWING:
        return all(growing(a, ranges) for a in e.args)
    if e.op in _DIVIDING:
        a, b = e.args
        if a == b and (ranges.bounds(b).lo or 0) >= 1:
            return True  # 1: ceil(M / M), the outer extent of M split by M
        return b.op == "const" and b.value > 0 and growing(a, ranges)  # type: ignore[operator]
    return False  # mod, xor, a division by a size: not monotone


def at_most(sizes: Admitted, f: Expr, cap: int, values: Mapping[str, Expr]) -> Outcome | None:
    """Whether f <= cap for every admitted size, as Query.prove answers it (a counterexample
    carries every size and the requested `values`); None where the shortcut does not apply."""
    ranges = sizes.ranges
    names = set(ranges)
    if not sizes.exact or any(not e.free_vars() <= names for e in [f, *values.values()]):
        return None
    simp = Simplifier(sizes.bounds())
    if not all(growing(e, simp) for e in [f, *values.values()]):  # (so no value divides by zero either)
        return None
    point = {name: r.hi for name, r in ranges.items()}
    if evaluate(f, point) <= cap:
        return Outcome(Verdict.PROVED)
    for name, r in ranges.items():  # lexicographically smallest: the order Query.prove shrinks in
        ok, bad = -1, r.count() - 1  # f fails at index bad (its value now) and holds at ok and below
        while bad - ok > 1:
            mid = (ok + bad) // 2
            if evaluate(f, {**point, name: r.at(mid)}) > cap:
                bad = mid
            else:
                ok = mid
        point[name] = r.at(bad)
    return Outcome(Verdict.COUNTEREXAMPLE, dict(point), values={k: evaluate(e, point) for k, e in values.items()})


def prove_at_most(ctx: "VerifyContext", f: Expr, cap: int, values: Mapping[str, Expr]) -> Outcome:
    """f <= cap for every admitted size: by evaluation where at_most applies, else by a query
    (over the integers first where proved_over_integers tries, then over bit-vectors)."""
    out = at_most(ctx.admitted, f, cap, values)
    if out is None and proved_over_integers(ctx, [f, const(cap)], lambda q: q.le(f, const(cap))):
        out = Outcome(Verdict.PROVED)
    if out is None:
        q = ctx.query([f, const(cap)])
        out = q.prove(q.le(f, const(cap)), values=values)
    return out


def proved_over_integers(ctx: "VerifyContext", hint: list[Expr], claim: Callable) -> bool:
    """Whether z3 proves claim(q), a claim over the sizes alone, over the integers within
    INTEGER_MS, tried where an assumption is more than a range (a product of extents bounded):
    such a product is one term there, where over bit-vectors z3 stalls (gridDim.x =
    max(T0_0 * c, T0_0 * T1_0 * c) under T0_0 * T1_0 * c <= 2^31 - 1, c = ceil(ceil(T0_1 * T0_2 /
    256) / 4): 45 s and no verdict). Only a proof is taken from it: a counterexample is the
    bit-vector query's, as before. False where a term has no integer rendering (XOR)."""
    if ctx.admitted.exact or not all(e.free_vars() <= set(ctx.fusion.symbols) for e in hint):
        return False
    try:
        q = ctx.query(hint, timeout_ms=INTEGER_MS, integers=True)
        return q.prove(claim(q), shrink_units=0).proved
    except (KeyError, ValueError):
        return False
