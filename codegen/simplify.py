"""Range-aware rewriting of index expressions before they are printed.

The index algebra builds `(o * 4 + v) // 4` and `(o * 4 + v) % 4` for a merge followed
by a split; inside the loop nest `v < 4` holds, so they are `o` and `v`. Rewriting them
keeps the emitted C++ cheap (no 64-bit divisions) and lets a vectorized access be seen
as contiguous. Every rewrite is an equality for all points with `0 <= var < range`
(indices are non-negative), which tests/test_codegen.py checks by enumeration.
"""

from __future__ import annotations

from typing import Mapping

from ..model.expr import Expr, add, as_expr, const, floordiv, mod, mul, substitute, try_int

Ranges = Mapping[str, Expr]  # variable -> exclusive upper bound


def simplify(e: Expr, ranges: Ranges) -> Expr:
    if e.op in ("const", "var"):
        return e
    args = [simplify(a, ranges) for a in e.args]
    e = substitute(Expr(e.op, tuple(args), e.value), {})  # rebuild with the builders' folding
    if e.op == "floordiv":
        return _floordiv(e.args[0], e.args[1], ranges)
    if e.op == "mod":
        return _mod(e.args[0], e.args[1], ranges)
    if e.op == "add":
        return _recombine(e)
    return e


def _floordiv(a: Expr, b: Expr, ranges: Ranges) -> Expr:
    if less_than(a, b, ranges):
        return const(0)
    quotients, rest = _split_multiples(a, b)
    if not quotients:
        return floordiv(a, b)
    rest_div = const(0) if less_than(rest, b, ranges) else _floordiv(rest, b, ranges)
    return add(*quotients, rest_div)  # (q * b + r) // b == q + r // b for r >= 0


def _mod(a: Expr, b: Expr, ranges: Ranges) -> Expr:
    _, rest = _split_multiples(a, b)
    if less_than(rest, b, ranges):
        return rest
    return mod(rest, b)


def _recombine(e: Expr) -> Expr:
    """(x // d) * d * k + (x % d) * k == x * k: a merge's split index put back together."""
    terms = list(e.args)
    for a, t in enumerate(terms):
        for b, u in enumerate(terms):
            joined = _rejoin(t, u) if a != b else None
            if joined is not None:
                rest = [x for k, x in enumerate(terms) if k not in (a, b)]
                return _recombine_or_keep(add(*rest, joined))
    return e


def _recombine_or_keep(e: Expr) -> Expr:
    return _recombine(e) if e.op == "add" else e


def _rejoin(t: Expr, u: Expr) -> Expr | None:
    u_f, u_c = _factors(u)
    mods = [f for f in u_f if f.op == "mod"]
    if len(mods) != 1:
        return None
    x, d = mods[0].args
    k = exact_quotient(u, mods[0])
    quotient = exact_quotient(t, floordiv(x, d))
    if k is None or quotient is None or exact_quotient(quotient, d) != k:
        return None
    return mul(x, k)


def _terms(a: Expr) -> tuple[Expr, ...]:
    return a.args if a.op == "add" else (a,)


def _split_multiples(a: Expr, b: Expr) -> tuple[list[Expr], Expr]:
    """The quotients of a's terms that b divides, and the sum of the other terms."""
    quotients, rest = [], []
    for t in _terms(a):
        q = exact_quotient(t, b)
        if q is None:
            rest.append(t)
        else:
            quotients.append(q)
    return quotients, add(*rest) if rest else const(0)


def _factors(t: Expr) -> tuple[list[Expr], int]:
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


def less_than(e: Expr, bound: Expr, ranges: Ranges) -> bool:
    """Proves 0 <= e < bound at every point of the ranges."""
    ub, limit = upper_bound(e, ranges), try_int(bound)
    if ub is not None and limit is not None:
        return ub < limit
    if e.op == "var" and ranges.get(e.value) == bound:  # type: ignore[arg-type]
        return True
    if e.op == "mod" and e.args[1] == bound:
        return True
    return _merged_less_than(e, bound, ranges)


def _merged_less_than(e: Expr, bound: Expr, ranges: Ranges) -> bool:
    """x * E + y < X * E when x < X and y < E (a merge's index against its extent)."""
    if e.op != "add" or len(e.args) != 2:
        return False
    for outer, inner in (e.args, e.args[::-1]):
        for x in _factors(outer)[0]:
            scale = exact_quotient(outer, x)
            quotient = exact_quotient(bound, scale) if scale is not None else None
            if quotient is not None and less_than(x, quotient, ranges) and less_than(inner, scale, ranges):
                return True
    return False


def upper_bound(e: Expr, ranges: Ranges) -> int | None:
    """The largest value of e over the ranges (None when unbounded or symbolic)."""
    if e.op == "const":
        return e.value  # type: ignore[return-value]
    if e.op == "var":
        r = ranges.get(e.value)  # type: ignore[arg-type]
        n = try_int(r) if r is not None else None
        return None if n is None else n - 1
    if e.op == "mod":
        b = try_int(e.args[1])
        a = upper_bound(e.args[0], ranges)
        if b is None:
            return a
        return b - 1 if a is None else min(a, b - 1)
    if e.op in ("floordiv", "ceildiv") and try_int(e.args[1]) is None:
        return upper_bound(e.args[0], ranges)  # a symbolic divisor is at least 1
    ubs = [upper_bound(a, ranges) for a in e.args]
    if any(u is None for u in ubs):
        return None
    return _bound_of(e.op, ubs)


def _bound_of(op: str, ubs: list[int]) -> int:
    if op == "add":
        return sum(ubs)
    if op == "mul":
        out = 1
        for u in ubs:
            out *= u
        return out
    if op == "floordiv":  # a constant divisor (symbolic ones are handled above)
        return ubs[0] // max(ubs[1], 1)
    if op == "ceildiv":
        return -(-ubs[0] // max(ubs[1], 1))
    if op == "xor":
        return (1 << max(ubs).bit_length()) - 1
    return max(ubs)  # max


def with_value(e: Expr, name: str, value: int) -> Expr:
    """e with variable `name` fixed to value."""
    return substitute(e, {name: as_expr(value)})
