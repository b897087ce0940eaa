"""Query.prove's first attempt on a claim that divides by a symbolic term (solver.py
_proved_without_symbolic_division): each such quotient and remainder a free variable bounded as
the term is. Sound (whatever it proves holds at every point, checked by enumeration on random
claims), useful (it proves claims that need only the bounds), and never the last word (a claim
that needs the division itself is proved, or refuted, by the full query)."""

from __future__ import annotations

import itertools
import random

from tileproof.model import expr as E
from tileproof.model.expr import evaluate
from tileproof.verifier.solver import Query, Verdict

from support.expr_gen import random_expr

SIZE = 9  # a, b, c in 0 .. 8
RANGES = {name: E.const(SIZE) for name in "abc"}


def _query(exprs):
    return Query(exprs, RANGES)


def test_whatever_the_abstraction_proves_holds_everywhere():
    rng = random.Random(5)
    proved = tried = 0
    points = list(itertools.product(range(SIZE), repeat=3))
    for _ in range(1200):
        f, g = random_expr(rng, 3), random_expr(rng, 3)
        if not any(e.op in ("floordiv", "mod", "ceildiv") and e.args[1].op != "const" for e in _subterms(f)):
            continue
        q = _query([f, g])
        claim = q.le(f, g)
        tried += 1
        if q._proved_without_symbolic_division(claim):
            proved += 1
            env = {}
            for a, b, c in points:
                env.update(a=a, b=b, c=c)
                assert evaluate(f, env) <= evaluate(g, env), (str(f), str(g), env)
    assert tried > 300 and proved > 10, (tried, proved)


def _subterms(e):
    yield e
    for a in e.args:
        yield from _subterms(a)


def test_a_claim_that_needs_only_the_bounds_is_proved_so():
    a, b = E.var("a"), E.var("b")
    d = E.add(b, E.const(1))
    q = _query([E.mod(a, d), d])
    assert q._proved_without_symbolic_division(q.lt(E.mod(a, d), d))  # a % (b + 1) < b + 1
    q = _query([E.floordiv(a, d), a])
    assert q._proved_without_symbolic_division(q.le(E.floordiv(a, d), a))


def test_a_claim_that_needs_the_division_falls_through_to_the_full_proof():
    a, b = E.var("a"), E.var("b")
    d = E.add(b, E.const(1))
    whole = E.add(E.mul(E.floordiv(a, d), d), E.mod(a, d))  # (a / d) d + a % d == a
    q = _query([whole, a])
    claim = q.term(whole) == q.term(a)
    assert not q._proved_without_symbolic_division(claim) or str(q.term(whole)) == str(q.term(a))
    assert q.prove(claim).status is Verdict.PROVED
    q = _query([E.mod(a, d), b])
    out = q.prove(q.lt(E.mod(a, d), b))  # false at b = 0: a % 1 == 0, not < 0
    assert out.status is Verdict.COUNTEREXAMPLE and out.model["b"] == 0
