"""The sizes each extent symbol is admitted at, narrowed by the assumptions that bound it alone.

`fusion.assume("M <= 128")` or `"M % 16 == 0"` is asserted in every query anyway; read here as
the symbol's range too, it also sizes the query's bit-vectors and the simplifier's intervals
(model/simplify.py), so a term of M <= 128 is decided in 10-bit rather than 40-bit arithmetic
and comparisons the ranges settle never reach z3. The narrowing only drops sizes an assumption
excludes; any other assumption (M * N <= 4096, an Or) is left to the queries.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import lcm
from typing import Iterable, Mapping

import sympy

from ..model.fusion import symbol_bound


@dataclass(frozen=True)
class SizeRange:
    """The multiples of `step` in [lo, hi]."""

    lo: int
    hi: int
    step: int = 1

    def count(self) -> int:
        return (self.hi - self.lo) // self.step + 1

    def at(self, k: int) -> int:
        """The k-th admitted value, from 0."""
        return self.lo + k * self.step


@dataclass(frozen=True)
class Admitted:
    """Each symbol's SizeRange; `exact` when every assumption is one of those bounds, so that
    the admitted sizes are exactly the product of the ranges."""

    ranges: dict[str, SizeRange]
    exact: bool

    def bounds(self) -> dict[str, tuple[int, int]]:
        return {name: (r.lo, r.hi) for name, r in self.ranges.items()}

    def steps(self) -> dict[str, int]:
        return {name: r.step for name, r in self.ranges.items() if r.step > 1}


def admitted(bounds: Mapping[str, tuple[int, int]], assumptions: Iterable[sympy.Basic]) -> Admitted:
    """`bounds` (symbol -> [lo, hi]) narrowed by every assumption that bounds one symbol by a
    constant (`S <= c`, `S < c`, `S >= c`, `S > c`, `S == c`, `S % m == 0`, and conjunctions of
    them). When the assumptions leave a symbol no size, the bounds stay as given and inexact
    (the ASSUMPTIONS-SATISFIABLE rule reports it, from the assumptions as stated)."""
    out = {name: SizeRange(lo, hi) for name, (lo, hi) in bounds.items()}
    exact = True
    for cond in assumptions:
        for part in sympy.And.make_args(cond):
            got = symbol_bound(part)
            if got is None or got[0] not in out:
                exact = False
                continue
            name, lo, hi, step = got
            r = out[name]
            step = lcm(r.step, step)
            a = max(r.lo, lo if lo is not None else r.lo)
            b = min(r.hi, hi if hi is not None else r.hi)
            a, b = -(-a // step) * step, b // step * step  # the multiples of step inside [a, b]
            if a > b:
                return Admitted({name: SizeRange(lo, hi) for name, (lo, hi) in bounds.items()}, False)
            out[name] = SizeRange(a, b, step)
    return Admitted(out, exact)
