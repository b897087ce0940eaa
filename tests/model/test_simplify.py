"""The one range analysis and simplifier (model/simplify.py): `bounds` contains every value,
`simplify` is an identity on every point of its ranges (by enumeration and at random
points), and a verifier query decides the same verdict with and without it (z3)."""

from __future__ import annotations

import itertools
import random

import pytest

from tileproof.model import expr as E
from tileproof.model.expr import OPS, evaluate
from tileproof.model.simplify import INTERVAL, Simplifier, bounds, less_than, simplify, with_value
from tileproof.verifier.solver import Query, Verdict

from support.expr_gen import random_expr

x, y, t, n = E.var("x"), E.var("y"), E.var("t"), E.var("n")


def random_intervals(rng: random.Random) -> dict[str, tuple[int, int]]:
    out = {}
    for v in "abc":  # d stays unnamed: rewrites that need its upper bound must not fire
        lo = rng.choice([0, 0, 0, 1, 3])
        out[v] = (lo, lo + rng.choice([0, 1, 3, 7, 31, 100, 1000]))
    return out


def test_every_op_has_an_interval_rule():
    assert set(INTERVAL) == set(OPS) - {"const", "var"}


# -- simplify is an identity on its ranges ------------------------------------------------


def test_simplify_is_an_identity_on_every_point_of_small_ranges():
    rng = random.Random(7)
    rewritten = 0
    for _ in range(600):
        e = random_expr(rng, 3)
        ranges = {v: E.const(rng.randint(1, 6)) for v in "abc"}
        s = simplify(e, ranges)
        rewritten += s != e
        for point in itertools.product(*(range(r.value) for r in ranges.values())):
            env = dict(zip("abc", point))
            assert evaluate(s, env) == evaluate(e, env), (str(e), str(s), env)
    assert rewritten > 200


def test_simplify_is_an_identity_under_symbolic_ranges():
    """a < n with n a size the ranges do not bound: the variable and merge rules of less_than."""
    rng = random.Random(8)
    for _ in range(300):
        e = random_expr(rng, 3, "abcn")
        ranges = {"a": n, "b": E.const(4), "c": E.mul(n, 2)}
        s = simplify(e, ranges)
        for size in range(1, 5):
            for a, b, c in itertools.product(range(size), range(4), range(2 * size)):
                env = {"a": a, "b": b, "c": c, "n": size}
                assert evaluate(s, env) == evaluate(e, env), (str(e), str(s), env)


def test_simplify_is_an_identity_inside_intervals():
    rng = random.Random(3)
    rewritten = 0
    for _ in range(3000):
        ranges = random_intervals(rng)
        e = random_expr(rng, 5, "abcd")
        s = simplify(e, ranges)
        rewritten += s != e
        for _ in range(20):
            env = {v: rng.randint(lo, hi) for v, (lo, hi) in ranges.items()} | {"d": rng.randint(0, 500)}
            assert evaluate(s, env) == evaluate(e, env), (str(e), str(s), ranges, env)
    assert rewritten > 1000


def test_bounds_contain_every_value():
    rng = random.Random(5)
    for _ in range(2000):
        ranges = random_intervals(rng)
        e = random_expr(rng, 4, "abcd")
        r = bounds(e, ranges)
        for _ in range(20):
            env = {v: rng.randint(lo, hi) for v, (lo, hi) in ranges.items()} | {"d": rng.randint(0, 500)}
            value = evaluate(e, env)
            assert (r.lo is None or r.lo <= value) and (r.hi is None or value <= r.hi), (str(e), r, env)


def test_unknown_is_none_at_that_end():
    assert bounds(x, {}) == (0, None, None)  # a variable no range names: non-negative, no upper bound
    assert bounds(E.mul(x, 4), {"x": E.const(8)}) == (0, 28, 28)
    assert bounds(E.mod(n, 16), {}) == (0, 15, None)  # n itself is computed, and unbounded
    assert bounds(x, {"x": n}) == (0, None, None)
    assert bounds(x, {"x": n, "n": (1, 64)}) == (0, 63, 63)


# -- the peak: the largest value computed on the way ------------------------------------------


def computed(e: E.Expr, env: dict[str, int]) -> tuple[int, list[int]]:
    """e's value at env, and every value its rendering computes on the way (codegen/emit/cuda_expr.py:
    n-ary sums, products and max left to right, ceildiv as (a + b - 1) / b)."""
    if e.op == "const":
        return e.value, [e.value]
    if e.op == "var":
        return env[e.value], [env[e.value]]
    values, seen = [], []
    for a in e.args:
        v, s = computed(a, env)
        values.append(v)
        seen += s
    if e.op in ("add", "mul", "max"):
        acc = values[0]
        for v in values[1:]:
            acc = acc + v if e.op == "add" else acc * v if e.op == "mul" else max(acc, v)
            seen.append(acc)
        return acc, seen
    if e.op == "ceildiv":
        seen += [values[0] + values[1], values[0] + values[1] - 1]
    out = evaluate(e, env)
    return out, seen + [out]


def test_the_peak_bounds_every_value_computed_on_the_way():
    """Brute force at small sizes: every subterm, partial sum and product, and ceildiv numerator
    at every point of the ranges lies within the peak, which is known wherever the ends are."""
    rng = random.Random(11)
    reached = 0
    for _ in range(1500):
        ranges = random_intervals(rng)
        ranges = {v: (lo, min(hi, lo + 7)) for v, (lo, hi) in ranges.items()}
        e = random_expr(rng, 4)
        r = bounds(e, ranges)
        assert r.peak is not None and r.peak >= max(abs(r.lo), abs(r.hi)), (str(e), r)
        top = 0
        for point in itertools.product(*(range(lo, hi + 1) for lo, hi in ranges.values())):
            value, seen = computed(e, dict(zip(ranges, point)))
            assert r.lo <= value <= r.hi and max(map(abs, seen)) <= r.peak, (str(e), r, point)
            top = max(top, *map(abs, seen))
        reached += top == r.peak
    assert reached > 700  # mostly tight, not merely large


def test_the_peak_counts_what_is_computed_before_the_value():
    a, b, z = E.var("a"), E.var("b"), E.var("z")
    ranges = {"a": (0, 2**31), "b": (1, 2**31), "z": (0, 0)}
    assert bounds(E.Expr("ceildiv", (a, b)), ranges).peak == 2**32  # the numerator a + b - 1, after a + b
    assert bounds(E.Expr("mul", (a, b, z)), ranges).peak == 2**62  # a * b is computed before * z
    assert bounds(E.Expr("mod", (E.Expr("mul", (a, b)), E.const(7))), ranges).peak == 2**62
    assert bounds(E.Expr("add", (a, b, E.const(-2**31))), ranges).peak == 2**32  # a + b, then less
    assert bounds(E.var("stride.T0.0"), ranges).peak is None  # a run-time stride: unbounded
    assert bounds(E.floordiv(a, z), ranges).peak is None  # x / 0: all ones in z3


# -- the rewrites ---------------------------------------------------------------------------


def test_typical_index_rewrites():
    ranges = {"x": (0, 127), "y": (0, 1), "t": (0, 0)}
    tid = E.add(x, E.mul(y, 128), E.mul(t, 256))
    assert simplify(E.mod(tid, 32), ranges) == E.mod(x, 32)  # the other threads' terms are multiples of 32
    assert simplify(E.floordiv(tid, 32), ranges) == E.add(E.mul(y, 4), E.floordiv(x, 32))
    assert simplify(E.floordiv(E.floordiv(x, 4), 8), ranges) == E.floordiv(x, 32)
    assert simplify(E.mod(E.mod(x, 8), 4), ranges) == E.mod(x, 4)
    assert simplify(E.floordiv(E.mod(x, 4), 16), ranges) == E.const(0)
    assert simplify(E.floordiv(E.mul(E.floordiv(x, 8), 2), 4), ranges) == E.floordiv(x, 16)  # (2*q) // 4 = q // 2
    assert simplify(E.mod(E.add(E.mul(E.floordiv(x, 32), 32), E.mod(x, 8)), 128), ranges) == E.add(
        E.mul(E.floordiv(x, 32), 32), E.mod(x, 8))  # already below 128
    assert simplify(E.mod(n, 32), ranges) == E.mod(n, 32)


def test_simplify_folds_a_merge_followed_by_a_split():
    o, v = E.var("o"), E.var("v")
    merged = E.add(E.mul(o, 4), v)
    assert simplify(E.floordiv(merged, 4), {"o": n, "v": E.const(4)}) == o
    assert simplify(E.mod(merged, 4), {"o": n, "v": E.const(4)}) == v
    b = E.add(E.mul(E.var("b"), 128), t)
    assert simplify(E.add(E.mul(E.floordiv(b, n), n), E.mod(b, n)), {"t": E.const(128)}) == b
    y8 = E.floordiv(y, 4)  # the split inner index, simplified ((y // 4) // 2 = y // 8), still rejoins
    parts = E.add(E.mul(E.floordiv(y8, 2), 128), E.mul(E.mod(y8, 2), 64), E.mul(E.mod(y, 4), 16))
    assert simplify(parts, {"y": E.const(64)}) == E.mul(y, 16)


def test_an_assumed_multiple_divisor_folds_a_remainder_of_a_remainder():
    """(x % N) % 4 = x % 4 where N is admitted at multiples of 4 only (steps: N % 4 == 0), at every
    point; without the step, or with a step 4 does not divide, it stays."""
    o, v = E.var("o"), E.var("v")
    flat = E.add(E.mul(o, 4), v)
    ranges = {"o": E.const(50), "v": E.const(4), "n": (1, 64)}
    folded = Simplifier(ranges, {"n": 4}).simplify(E.mod(E.mod(flat, n), 4))
    assert folded == v
    for size, a, b in itertools.product(range(4, 65, 4), range(50), range(4)):
        assert evaluate(E.mod(E.mod(flat, n), 4), {"o": a, "v": b, "n": size}) == b
    assert Simplifier(ranges, {"n": 2}).simplify(E.mod(E.mod(flat, n), 4)) != v
    assert Simplifier(ranges).simplify(E.mod(E.mod(flat, n), 4)) != v


def test_a_divisor_that_may_be_zero_blocks_the_rewrites_that_need_it():
    """x / 0 is all ones in z3 (Python raises): nothing may assume a divisor is positive."""
    ranges = {"x": E.const(8), "y": E.const(4)}
    assert bounds(E.floordiv(x, y), ranges).hi is None
    assert bounds(E.mod(x, y), ranges)[:2] == (0, 7)  # x % 0 = x
    assert simplify(E.floordiv(E.mul(x, y), y), ranges) == E.floordiv(E.mul(x, y), y)
    assert simplify(E.floordiv(E.mul(x, y), y), {**ranges, "y": (1, 3)}) == x
    assert not less_than(E.mod(x, y), y, ranges)
    assert less_than(E.mod(x, n), n, {"n": (1, 100)})


def test_less_than_on_symbolic_bounds():
    big_x, big_e = E.var("X"), E.var("E")
    ranges = {"x": big_x, "y": big_e}
    assert less_than(x, big_x, ranges)
    assert less_than(E.add(E.mul(x, big_e), y), E.mul(big_x, big_e), ranges)  # a merge's index
    assert not less_than(E.add(E.mul(x, big_e), y, 1), E.mul(big_x, big_e), ranges)
    assert less_than(E.mul(x, 4), E.const(32), {"x": E.const(8)})
    assert not less_than(E.mul(x, 4), E.const(28), {"x": E.const(8)})


def test_with_value_fixes_one_variable():
    assert with_value(E.add(E.mul(x, 4), y), "x", 3) == E.add(y, 12)


# -- the verifier's use of it ---------------------------------------------------------------


def test_a_query_decides_the_same_with_the_simplifier():
    """Claims over bounded variables (loop ranges or symbol intervals), decided by z3 with
    and without simplification."""
    rng = random.Random(11)
    for k in range(150):
        intervals = random_intervals(rng)
        e, f = random_expr(rng, 4), random_expr(rng, 4)
        ranges = {v: E.const(hi + 1) for v, (_, hi) in intervals.items()} if k % 2 else {}
        symbols = {} if k % 2 else intervals
        verdicts = []
        for simplifying in (True, False):
            for claim in (lambda q: q.eq(e, f), lambda q: q.lt(e, E.add(f, 3)), lambda q: q.le(f, e)):
                q = Query([e, f, E.add(f, 3)], ranges, symbols=symbols, simplify=simplifying)
                out = q.prove(claim(q), values={"e": e, "f": f})
                if out.status is Verdict.COUNTEREXAMPLE:  # a true counterexample of the original claim
                    env = {v: out.model.get(v, 0) for v in "abc"}
                    assert (out.values["e"], out.values["f"]) == (evaluate(e, env), evaluate(f, env))
                verdicts.append(out.status)
        assert verdicts[:3] == verdicts[3:], (str(e), str(f), intervals)


def test_a_query_fails_closed_without_a_bound():
    q = Query([x], {"x": E.const(8), "y": E.const(4)})
    with pytest.raises(OverflowError, match="not proved to lie in 0 .. 127"):
        q.term(E.floordiv(x, E.var("y")))  # y may be 0
    with pytest.raises(ValueError, match="no range"):
        q.term(E.add(x, E.var("z")))


def test_a_query_whose_terms_may_be_negative_is_decided_over_the_integers():
    """(2 - n) % 3 == 0 for n = 2 and n = 5 in Python's semantics (an unsigned remainder of the
    wrapped difference would differ)."""
    rest = E.mod(E.add(2, E.mul(n, -1)), 3)
    q = Query([rest], {}, symbols={"n": (1, 6)})
    assert not q.bv
    q.add(q.ne(n, E.const(2)))
    out = q.prove(q.ne(rest, E.const(0)))
    assert out.status is Verdict.COUNTEREXAMPLE and out.model["n"] == 5


def test_a_query_sizes_its_bit_vectors_from_bounds():
    q = Query([E.mul(x, 1000)], {"x": E.const(1000)})
    assert q.width == (999 * 1000).bit_length() + 2
    assert q.admits([E.mul(x, 100)]) and not q.admits([E.mul(x, x, x)])


SMALL = {"a": E.const(4), "b": E.const(64), "c": E.const(8), "n": (1, 50)}


def _same_everywhere(e, s, ranges=SMALL, draws=3000):
    rng = random.Random(0)
    for _ in range(draws):
        env = {k: rng.randrange(r.value) if isinstance(r, E.Expr) else rng.randint(*r) for k, r in ranges.items()}
        assert evaluate(e, env) == evaluate(s, env), (e, s, env)


@pytest.mark.parametrize("build, want", [
    (lambda a, b, c, n: E.floordiv(a * 64 + b, 128), "a // 2"),  # a merged index split by another factor
    (lambda a, b, c, n: E.mod(a * 64 + b, 128), "b + 64*(a % 2)"),
    (lambda a, b, c, n: E.mod(n * 24 + a * 2 + 1, 48), "2*a + 24*(n % 2) + 1"),
    (lambda a, b, c, n: E.floordiv(n * c * 8 + a + b * 3, 12), None),  # 3 b reaches 189: no small rest
])
def test_a_division_by_g_k_of_g_x_plus_a_rest_below_g_drops_the_rest(build, want):
    e = build(*map(E.var, "abcn"))
    s = simplify(e, SMALL)
    assert str(s) == (want or str(e))
    _same_everywhere(e, s)


@pytest.mark.parametrize("build, want", [
    (lambda a, b, c, n: (a * 32 + b % 16 * 2 + n * c * 1024) ^ (c * 16), "n*c*1024 + (a*32 + (b % 16)*2 ^ c*16)"),
    (lambda a, b, c, n: (c * 16) ^ (a * 32 + n * c * 1024 + (b % 16) * 2), "n*c*1024 + (a*32 + (b % 16)*2 ^ c*16)"),
    (lambda a, b, c, n: (n * 64 + a) ^ (c * 16), None),  # 64 n is no multiple of 128, which c * 16 needs
])
def test_an_xor_of_low_bits_leaves_a_sum_s_high_multiples_out(build, want):
    e = build(*map(E.var, "abcn"))
    s = simplify(e, SMALL)
    assert str(s) == (want or str(e))
    _same_everywhere(e, s)
