"""Random index expressions for the algebra's tests (test_simplify.py, test_index_algebra.py).

Every op of model/expr.py appears, with the shapes the simplifier rewrites: a merge put back
together ((x // d) * d + x % d), sums of multiples of a divisor, nested div/mod. Divisors are
never zero: constants, or a subexpression plus one (every value is non-negative).
"""

from __future__ import annotations

import random

from tileproof.model import expr as E

DIVISORS = [1, 2, 3, 4, 6, 8, 16, 32, 64, 128]
CONSTANTS = DIVISORS + [0, 5, 7, 40]
CHOICES = ["add", "mul", "floordiv", "mod", "floordiv", "mod", "ceildiv", "xor", "max", "merge"]


def random_expr(rng: random.Random, depth: int, names: str = "abc") -> E.Expr:
    if depth == 0 or rng.random() < 0.2:
        return E.var(rng.choice(names)) if rng.random() < 0.6 else E.const(rng.choice(CONSTANTS))
    op = rng.choice(CHOICES)
    a = random_expr(rng, depth - 1, names)
    if op in ("floordiv", "mod", "ceildiv", "merge"):
        b = E.const(rng.choice(DIVISORS)) if rng.random() < 0.7 else E.add(random_expr(rng, depth - 1, names), 1)
        if op == "merge":
            return E.add(E.mul(E.floordiv(a, b), b), E.mod(a, b))
    elif op == "mul" and rng.random() < 0.7:
        b = E.const(rng.choice(DIVISORS))
    else:
        b = random_expr(rng, depth - 1, names)
    return E.BUILDERS[op](a, b)
