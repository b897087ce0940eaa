"""The range-aware simplifier (verifier/solver.py) only rewrites an expression into one equal
to it wherever the variables lie in their intervals, and a query decides the same verdict
with and without it."""

from __future__ import annotations

import random


from tileproof.model import expr as E
from tileproof.model.expr import evaluate
from tileproof.verifier.solver import Query, Simplifier

DIVISORS = [1, 2, 3, 4, 6, 8, 16, 32, 64, 128]


def random_expr(rng: random.Random, depth: int) -> E.Expr:
    if depth == 0 or rng.random() < 0.2:
        return E.var(rng.choice("abcd")) if rng.random() < 0.6 else E.const(rng.choice(DIVISORS + [0, 5, 7]))
    op = rng.choice(["add", "mul", "floordiv", "mod", "floordiv", "mod", "ceildiv", "xor", "max"])
    a = random_expr(rng, depth - 1)
    if op in ("floordiv", "mod", "ceildiv"):
        b = E.const(rng.choice(DIVISORS)) if rng.random() < 0.8 else E.add(random_expr(rng, depth - 1), 1)
    elif op == "mul" and rng.random() < 0.7:
        b = E.const(rng.choice(DIVISORS))
    else:
        b = random_expr(rng, depth - 1)
    return {"add": E.add, "mul": E.mul, "floordiv": E.floordiv, "ceildiv": E.ceildiv,
            "mod": E.mod, "xor": E.xor, "max": E.maximum}[op](a, b)


def random_bounds(rng: random.Random) -> dict[str, tuple[int, int]]:
    out = {}
    for v in "abc":  # d stays unbounded: rewrites that need its interval must not fire
        lo = rng.choice([0, 0, 0, 1, 3])
        out[v] = (lo, lo + rng.choice([0, 1, 3, 7, 31, 100, 1000]))
    return out


def test_simplified_expressions_evaluate_the_same_inside_the_intervals():
    rng = random.Random(3)
    rewritten = 0
    for _ in range(3000):
        bounds = random_bounds(rng)
        e = random_expr(rng, 5)
        s = Simplifier(bounds)(e)
        rewritten += s != e
        for _ in range(20):
            env = {v: rng.randint(lo, hi) for v, (lo, hi) in bounds.items()} | {"d": rng.randint(0, 500)}
            assert evaluate(s, env) == evaluate(e, env), (str(e), str(s), bounds, env)
    assert rewritten > 1000  # the test exercises the rewrites


def test_ranges_contain_every_value():
    rng = random.Random(5)
    for _ in range(2000):
        bounds = random_bounds(rng)
        e = random_expr(rng, 4)
        simp = Simplifier(bounds)
        r = simp.range(e)
        if r is None:
            continue
        for _ in range(20):
            env = {v: rng.randint(lo, hi) for v, (lo, hi) in bounds.items()} | {"d": 0}
            assert r[0] <= evaluate(e, env) <= r[1], (str(e), r, env)


def test_typical_index_rewrites():
    x, y, t = E.var("x"), E.var("y"), E.var("t")
    simp = Simplifier({"x": (0, 127), "y": (0, 1), "t": (0, 0)})
    tid = E.add(x, E.mul(y, 128), E.mul(t, 256))
    assert simp(E.mod(tid, 32)) == E.mod(x, 32)  # the other threads' terms are multiples of 32
    assert simp(E.floordiv(tid, 32)) == E.add(E.mul(y, 4), E.floordiv(x, 32))
    assert simp(E.floordiv(E.floordiv(x, 4), 8)) == E.floordiv(x, 32)
    assert simp(E.mod(E.mod(x, 8), 4)) == E.mod(x, 4)
    assert simp(E.floordiv(E.mod(x, 4), 16)) == E.const(0)
    assert simp(E.mod(E.add(E.mul(E.floordiv(x, 32), 32), E.mod(x, 8)), 128)) == E.add(
        E.mul(E.floordiv(x, 32), 32), E.mod(x, 8))  # already below 128
    unbounded = E.var("n")
    assert simp(E.mod(unbounded, 32)) == E.mod(unbounded, 32)


def test_a_query_decides_the_same_with_the_simplifier():
    """Claims over bounded variables, decided by z3 with and without simplification."""
    rng = random.Random(11)
    checked = 0
    for _ in range(300):
        bounds = random_bounds(rng)
        e, f = random_expr(rng, 4), random_expr(rng, 4)
        if "d" in e.free_vars() | f.free_vars():
            continue
        ranges = {v: E.const(hi + 1) for v, (_, hi) in bounds.items()}
        verdicts = []
        for simplify in (True, False):
            for claim in (lambda q: q.eq(e, f), lambda q: q.lt(e, E.add(f, 3)), lambda q: q.le(f, e)):
                q = Query([e, f, E.add(f, 3)], ranges)
                if not simplify:
                    q.simplify = Simplifier({})
                out = q.prove(claim(q), values={"e": e, "f": f})
                if out.status == "counterexample":  # a true counterexample of the original claim
                    env = {v: out.model.get(v, 0) for v in "abc"}
                    assert (out.values["e"], out.values["f"]) == (evaluate(e, env), evaluate(f, env))
                verdicts.append(out.status)
        assert verdicts[:3] == verdicts[3:], (str(e), str(f), bounds)
        checked += 1
    assert checked > 100
