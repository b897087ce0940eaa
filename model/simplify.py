"""The one range analysis and simplifier of the index algebra (expr.py).

`bounds(e, ranges)` is the interval of the values e takes where every variable lies in its
range; `simplify(e, ranges)` rewrites e into an expression equal to it at every such point,
with fewer div/mod nodes; `less_than(e, bound, ranges)` proves 0 <= e < bound there. The
verifier (verifier/solver.py) simplifies every term before rendering it to z3 (smaller
bit-blasted circuits), settles the comparisons the intervals decide and sizes its bit-vectors
from `bounds`. The code generator (codegen/) simplifies the indices and predicates it prints:
a merge followed by a split, `(o * 4 + v) // 4` with `v < 4`, is printed as `o`, so the C++
has no 64-bit division and a vectorized access is seen to be contiguous.

Ranges: `ranges[v]` is either an Expr `hi`, a loop index with 0 <= v < hi (how Query and the
code generator state a loop nest), or a pair of ints (lo, hi) with lo <= v <= hi (an extent
symbol's admitted values). Every variable is non-negative (indices and sizes are); one that
`ranges` does not name has no known upper bound.

Unknown: an `Interval` end that is None is unknown; no bound on that side is proved.

Peak: `Interval.peak` bounds the magnitude of every value computed on the way to e as the
renderers compute it: every subterm's, a sum's partial sums and a product's partial products
(left to right), a ceildiv's numerator a + b - 1. A fixed-width rendering that holds the peak
computes e exactly (codegen/lower/index_width.py chooses 32-bit indices from it).

Every rewrite is an equality at every point of the ranges, both over the integers and in
the unsigned fixed-width arithmetic of the solver and of the C++ as long as no value wraps
(the solver checks that from `bounds`). A divisor that may be 0 blocks every rewrite and
bound that needs it: z3 defines x / 0 as all ones, Python raises.
"""

from __future__ import annotations

from functools import lru_cache
from math import gcd, isqrt
from typing import Callable, Mapping, NamedTuple, Union

from .expr import BUILDERS, Expr, add, as_expr, const, floordiv, mod, mul, substitute


class Interval(NamedTuple):
    """lo <= value <= hi; an end that is None is unknown. peak: no value computed on the way has
    a larger magnitude (see the module docstring; None: unknown, also where only the ends are
    known, e.g. a variable's range)."""

    lo: int | None
    hi: int | None
    peak: int | None = None


Ranges = Mapping[str, Union[Expr, "tuple[int, int]"]]  # see the module docstring

UNKNOWN = Interval(None, None)
NON_NEGATIVE = Interval(0, None)


def bounds(e: Expr, ranges: Ranges) -> Interval:
    """The values e takes where every variable lies in its range."""
    return Simplifier(ranges).bounds(e)


def simplify(e: Expr, ranges: Ranges) -> Expr:
    """An expression equal to e at every point of the ranges, with fewer div/mod nodes."""
    return Simplifier(ranges).simplify(e)


def less_than(e: Expr, bound: Expr, ranges: Ranges) -> bool:
    """Proves 0 <= e < bound at every point of the ranges (False: not proved)."""
    return Simplifier(ranges).less_than(e, bound)


def with_value(e: Expr, name: str, value: int) -> Expr:
    """e with variable `name` fixed to value."""
    return substitute(e, {name: as_expr(value)})


class Simplifier:
    """`bounds`, `simplify` and `less_than` over one set of ranges, remembering every
    subterm's answer (a verifier query asks about the same subterms many times)."""

    def __init__(self, ranges: Ranges, steps: Mapping[str, int] | None = None):
        self.ranges = ranges
        self.steps = steps  # symbol -> k where only multiples of k are admitted (multiple_of)
        self._bounds: dict[Expr, Interval] = {}
        self._simplified: dict[Expr, Expr] = {}

    # -- range analysis ------------------------------------------------------------
    def bounds(self, e: Expr) -> Interval:
        got = self._bounds.get(e)
        if got is None:
            if e.op == "const":
                got = Interval(e.value, e.value)  # type: ignore[arg-type]
                got = got._replace(peak=_magnitude(got))
            elif e.op == "var":
                got = self._variable(e.value)  # type: ignore[arg-type]
                got = got._replace(peak=_magnitude(got))
            else:
                args = [self.bounds(a) for a in e.args]
                got = INTERVAL[e.op](*args)
                got = got._replace(peak=_peak(e.op, args, got))
            self._bounds[e] = got
        return got

    def _variable(self, name: str) -> Interval:
        r = self.ranges.get(name)
        if r is None:
            return NON_NEGATIVE
        if isinstance(r, Expr):
            hi = self.bounds(r).hi
            return Interval(0, None if hi is None else max(hi - 1, 0))
        return Interval(*r)

    def _non_negative(self, e: Expr) -> bool:
        lo = self.bounds(e).lo
        return lo is not None and lo >= 0

    def less_than(self, e: Expr, bound: Expr) -> bool:
        """0 <= e < bound at every point of the ranges."""
        r, b = self.bounds(e), self.bounds(bound)
        if r.lo is not None and r.lo >= 0 and r.hi is not None and b.lo is not None and r.hi < b.lo:
            return True
        if e.op == "var" and self.ranges.get(e.value) == bound:  # type: ignore[arg-type]
            return True
        if e.op == "mod" and e.args[1] == bound and b.lo is not None and b.lo >= 1:
            return True
        return self._merged_less_than(e, bound)

    def _merged_less_than(self, e: Expr, bound: Expr) -> bool:
        """x * E + y < X * E when x < X and y < E (a merge's index against its extent)."""
        if e.op != "add" or len(e.args) != 2:
            return False
        for outer, inner in (e.args, e.args[::-1]):
            for x in _factors(outer)[0]:
                scale = exact_quotient(outer, x)
                quotient = exact_quotient(bound, scale) if scale is not None else None
                if quotient is not None and self.less_than(x, quotient) and self.less_than(inner, scale):
                    return True
        return False

    # -- rewriting -----------------------------------------------------------------
    def simplify(self, e: Expr) -> Expr:
        out = self._simplified.get(e)
        if out is None:
            out = self._rewrite(e)
            r = self.bounds(out)
            if r.lo is not None and r.lo == r.hi:
                out = const(r.lo)
            self._simplified[e] = out
        return out

    def _rewrite(self, e: Expr) -> Expr:
        if e.op in ("const", "var"):
            return e
        args = list(map(self.simplify, e.args))
        if e.op in ("floordiv", "mod"):
            return self._divide(e.op, *args)
        if e.op == "xor":
            return self._xor(*args)
        out = BUILDERS[e.op](*args)
        return self._recombine(out) if out.op == "add" else out

    def _divide(self, op: str, a: Expr, b: Expr) -> Expr:
        """a // b or a % b, both simplified."""
        if self.less_than(a, b):
            return const(0) if op == "floordiv" else a
        divisor = self.bounds(b)
        if divisor.lo is None or divisor.lo < 1 or not self._non_negative(a):
            return BUILDERS[op](a, b)
        c = b.const_value()
        inner = a.args[1].const_value() if a.op in ("floordiv", "mod") else None
        if c is not None and inner is not None and inner > 0:
            if op == a.op == "floordiv":
                return self.simplify(floordiv(a.args[0], inner * c))  # (x // d) // c = x // (d*c)
            if op == a.op == "mod" and inner % c == 0:
                return self.simplify(mod(a.args[0], c))  # (x % (k*c)) % c = x % c
        if (c is not None and op == a.op == "mod" and self.steps and multiple_of(a.args[1], c, self.steps)
                and (self.bounds(a.args[1]).lo or 0) >= 1):
            return self.simplify(mod(a.args[0], c))  # the same where an assumption makes the divisor k*c (N % 4 == 0)
        terms = _summands(a)
        if not all(self._non_negative(t) for t in terms):
            return BUILDERS[op](a, b)
        quotients, rest = [], []  # (b*q + r) // b = q + r // b and (b*q + r) % b = r % b
        for t in terms:
            q = exact_quotient(t, b)
            if q is None:
                rest.append(t)
            else:
                quotients.append(q)
        if quotients:
            r = add(*rest) if rest else const(0)
            if op == "mod":
                return self.simplify(mod(r, b))
            return self.simplify(add(*quotients, floordiv(r, b)))
        g = gcd(c, *(_factors(t)[1] for t in terms)) if c is not None and op == "floordiv" else 1
        if g > 1:  # (g*x) // (g*c) = x // c
            return self.simplify(floordiv(add(*(exact_quotient(t, const(g)) for t in terms)), c // g))
        if c is not None and c > 1 and len(terms) > 1:
            out = self._small_rest(op, terms, c)
            if out is not None:
                return out
        return BUILDERS[op](a, b)

    def _small_rest(self, op: str, terms: list[Expr], c: int) -> Expr | None:
        """(g x + y) // (g k) = x // k and (g x + y) % (g k) = g (x % k) + y where 0 <= y < g, for
        the largest such divisor g of c: a merged index split by another factor, ((64 ty + mn) // 128
        = ty // 2 for mn < 64), written alike wherever it is built."""
        for g in _divisors(c):
            high = [u for u in terms if multiple_of(u, g, self.steps)]
            low = [u for u in terms if not any(u is h for h in high)]
            if not high or not low:
                continue
            rest = self.bounds(add(*low))
            if rest.lo is None or rest.lo < 0 or rest.hi is None or rest.hi >= g:
                continue
            x = add(*(q if (q := exact_quotient(u, const(g))) is not None else floordiv(u, g) for u in high))
            if op == "floordiv":
                return self.simplify(floordiv(x, c // g))
            return self.simplify(add(mul(mod(x, c // g), g), *low))
        return None

    def _xor(self, a: Expr, b: Expr) -> Expr:
        """a ^ b, both simplified, with the summands of one side that are multiples of 2^k taken
        out where the rest of it and the other side lie in [0, 2^k): (H + L) ^ y = H + (L ^ y), no
        carry reaching H's bits and y having none of them (a swizzle's XOR of a tile's low bits
        beside its symbolic start)."""
        for x, y in ((a, b), (b, a)):
            terms, other = _summands(x), self.bounds(y)
            if len(terms) < 2 or other.hi is None or not self._non_negative(y) or \
                    not all(self._non_negative(u) for u in terms):
                continue
            k = other.hi.bit_length()
            while True:
                high = [u for u in terms if multiple_of(u, 1 << k, self.steps)]
                low = [u for u in terms if not any(u is h for h in high)]
                top = self.bounds(add(*low)).hi if low else 0
                if top is None or not high:
                    break
                if top.bit_length() <= k:
                    return self.simplify(add(*high, BUILDERS["xor"](add(*low) if low else const(0), y)))
                k = top.bit_length()
        return BUILDERS["xor"](a, b)

    def _recombine(self, e: Expr) -> Expr:
        """(x // d) * d * k + (x % d) * k = x * k: a merge's split index put back together (for
        every x and d, also d = 0 in z3)."""
        terms = _summands(e)
        for j, u in enumerate(terms):
            mods = [f for f in _factors(u)[0] if f.op == "mod"]
            if len(mods) != 1:
                continue
            x, d = mods[0].args
            k = exact_quotient(u, mods[0])
            whole = self.simplify(floordiv(x, d))  # as simplified: (y // 4) // 2 is y // 8
            for i, t in enumerate(terms):
                quotient = exact_quotient(t, whole) if i != j else None
                if quotient is not None and exact_quotient(quotient, d) == k:
                    out = add(*(a for n, a in enumerate(terms) if n not in (i, j)), mul(x, k))
                    return self._recombine(out) if out.op == "add" else out
        return e


@lru_cache(maxsize=None)
def _divisors(c: int) -> tuple[int, ...]:
    """The divisors of c above 1, largest first."""
    small = [d for d in range(1, isqrt(c) + 1) if c % d == 0]
    return tuple(sorted({x for d in small for x in (d, c // d) if x > 1}, reverse=True))


def multiple_of(e: Expr, n: int, steps: Mapping[str, int] | None = None) -> bool:
    """Whether e is a multiple of n for every value of its (non-negative) variables: a constant
    multiple, a product with one, a sum of them, a symbol admitted at multiples of n only
    (`steps`: an assumption N % 4 == 0), and a remainder of two of them ((n a) % (n b) = n (a % b))."""
    if n == 1:
        return True
    if e.op == "const":
        return e.value % n == 0  # type: ignore[operator]
    if e.op == "var":
        return bool(steps) and steps.get(e.value, 1) % n == 0  # type: ignore[union-attr, arg-type]
    if e.op == "mul":
        return any(multiple_of(a, n, steps) for a in e.args)
    if e.op in ("add", "mod"):
        return all(multiple_of(a, n, steps) for a in e.args)
    return False


# -- the interval of each op from its arguments' intervals ---------------------------------


def _sum(*rs: Interval) -> Interval:
    los, his = [r.lo for r in rs], [r.hi for r in rs]
    return Interval(None if None in los else sum(los), None if None in his else sum(his))  # type: ignore[arg-type]


def _product(*rs: Interval) -> Interval:
    if all(r.lo is not None and r.lo >= 0 for r in rs):
        lo, hi = 1, 1
        for r in rs:
            lo *= r.lo  # type: ignore[operator]
            hi = None if hi is None or r.hi is None else hi * r.hi
        if any(r.hi == 0 for r in rs):
            hi = 0
        return Interval(lo, hi)
    if any(r.lo is None or r.hi is None for r in rs):
        return UNKNOWN
    lo, hi = 1, 1
    for r in rs:
        corners = (lo * r.lo, lo * r.hi, hi * r.lo, hi * r.hi)  # type: ignore[operator]
        lo, hi = min(corners), max(corners)
    return Interval(lo, hi)


def _maximum(*rs: Interval) -> Interval:
    los = [r.lo for r in rs if r.lo is not None]
    his = [r.hi for r in rs]
    return Interval(max(los) if los else None, None if None in his else max(his))  # type: ignore[type-var]


def _both_non_negative(a: Interval, b: Interval) -> bool:
    """The division and xor intervals below need it."""
    return a.lo is not None and a.lo >= 0 and b.lo is not None and b.lo >= 0


def _floordiv(a: Interval, b: Interval) -> Interval:
    if not _both_non_negative(a, b):
        return UNKNOWN
    if b.lo < 1:  # type: ignore[operator]
        return NON_NEGATIVE  # x / 0 is all ones in z3
    return Interval(0 if b.hi is None else a.lo // b.hi,  # type: ignore[operator]
                    None if a.hi is None else a.hi // b.lo)  # type: ignore[operator]


def _ceildiv(a: Interval, b: Interval) -> Interval:
    if not _both_non_negative(a, b):
        return UNKNOWN
    if b.lo < 1:  # type: ignore[operator]
        return NON_NEGATIVE
    return Interval(min(a.lo, 1) if b.hi is None else -(-a.lo // b.hi),  # type: ignore[operator, type-var]
                    None if a.hi is None else -(-a.hi // b.lo))  # type: ignore[operator]


def _mod(a: Interval, b: Interval) -> Interval:
    if not _both_non_negative(a, b):
        return UNKNOWN
    if b.lo >= 1 and a.hi is not None and a.hi < b.lo:  # type: ignore[operator]
        return a
    his = [a.hi] + ([b.hi - 1] if b.hi is not None and b.lo >= 1 else [])  # type: ignore[operator]
    known = [h for h in his if h is not None]  # x % 0 is x in z3
    return Interval(0, min(known) if known else None)


def _xor(a: Interval, b: Interval) -> Interval:
    if not _both_non_negative(a, b):
        return UNKNOWN
    if a.hi is None or b.hi is None:
        return NON_NEGATIVE
    return Interval(0, (1 << max(a.hi, b.hi).bit_length()) - 1)


# op -> the interval of its value from its arguments' intervals (every op of expr.OPS but
# const and var; tested)
INTERVAL: dict[str, Callable[..., Interval]] = {
    "add": _sum,
    "mul": _product,
    "floordiv": _floordiv,
    "ceildiv": _ceildiv,
    "mod": _mod,
    "xor": _xor,
    "max": _maximum,
}


# -- the largest magnitude computed on the way ------------------------------------------------


def _magnitude(r: Interval) -> int | None:
    return None if r.lo is None or r.hi is None else max(abs(r.lo), abs(r.hi))


def _partial_sums(*rs: Interval) -> int | None:
    """(a + b) + c: every prefix of the sum is computed."""
    return _most(_magnitude(_sum(*rs[:k])) for k in range(2, len(rs)))


def _partial_products(*rs: Interval) -> int | None:
    """(a * b) * c: no prefix is larger than the product of the factors' magnitudes (at least 1:
    a factor 0 at the end does not shrink what came before it)."""
    out = 1
    for m in map(_magnitude, rs):
        if m is None:
            return None
        out *= max(m, 1)
    return out


def _ceildiv_numerator(a: Interval, b: Interval) -> int | None:
    """ceildiv(a, b) is rendered (a + b - 1) / b."""
    ma, mb = _magnitude(a), _magnitude(b)
    return None if ma is None or mb is None else ma + mb


def _most(values) -> int | None:
    """The largest of values (0 if none), None if one is unknown."""
    values = list(values)
    return None if None in values else max(values, default=0)


# op -> the largest magnitude its rendering computes besides its value and its arguments' (the
# ops not named compute none)
PARTIAL: dict[str, Callable[..., int | None]] = {
    "add": _partial_sums,
    "mul": _partial_products,
    "ceildiv": _ceildiv_numerator,
}


def _peak(op: str, args: list[Interval], value: Interval) -> int | None:
    partial = PARTIAL[op](*args) if op in PARTIAL else 0
    return _most([partial, _magnitude(value), *(a.peak for a in args)])


# -- products and sums as factor lists -------------------------------------------------------


def _summands(a: Expr) -> list[Expr]:
    """a as a flat sum, a constant times a sum multiplied out: 8*(4*x + y) -> 32*x, 8*y (so a
    division can split it; elsewhere the product stays, one multiplication fewer in the C++)."""
    out: list[Expr] = []
    for t in a.args if a.op == "add" else (a,):
        factors, k = _factors(t)
        if k != 1 and len(factors) == 1 and factors[0].op == "add":
            out.extend(mul(s, k) for s in _summands(factors[0]))
        else:
            out.append(t)
    return out


def _factors(t: Expr) -> tuple[list[Expr], int]:
    """A product as (its non-constant factors, its constant coefficient)."""
    if t.is_const:
        return [], t.value  # type: ignore[return-value]
    parts = list(t.args) if t.op == "mul" else [t]
    coeff = 1
    symbolic = []
    for p in parts:
        if p.is_const:
            coeff *= p.value  # type: ignore[operator]
        else:
            symbolic.append(p)
    return symbolic, coeff


def exact_quotient(t: Expr, b: Expr) -> Expr | None:
    """t / b when b divides t as a product of factors, else None."""
    t_f, t_c = _factors(t)
    b_f, b_c = _factors(b)
    if b_c == 0 or t_c % b_c:
        return None
    remaining = list(t_f)
    for f in b_f:
        if f not in remaining:
            return None
        remaining.remove(f)
    return mul(*remaining, t_c // b_c)
