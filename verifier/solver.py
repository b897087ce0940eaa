"""Solver plumbing: a fresh z3 context per query, the z3 renderer of the index algebra,
and the verdict discipline (unsat = proved, sat = counterexample, unknown = not proved).

Queries use bit-vectors wide enough for every subterm (proved from upper bounds;
a term that could wrap aborts the query instead). TILEPROOF_THEORY=int switches
queries without XOR to integer arithmetic, for comparison.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

import sympy
import z3

from ..model.expr import Expr

MAX_EXTENT = 2**31 - 1  # symbolic extents are assumed to fit int32 indexing
DEFAULT_TIMEOUT_MS = int(os.environ.get("TILEPROOF_TIMEOUT_MS", "20000"))
DUMP_SMT = os.environ.get("TILEPROOF_DUMP_SMT") == "1"
# bit-vectors by default: every value is bounded, and bounded div/mod chains that stall
# integer arithmetic (20 s on PerformantVectorizedCopy) take milliseconds as bit-vectors
USE_INT = os.environ.get("TILEPROOF_THEORY") == "int"


def _ite_max(args):
    out = args[0]
    for a in args[1:]:
        out = z3.If(a > out, a, out) if not z3.is_bv(a) else z3.If(z3.UGT(a, out), a, out)
    return out


def _prod(args):
    out = args[0]
    for a in args[1:]:
        out = out * a
    return out


def _sum(args):
    out = args[0]
    for a in args[1:]:
        out = out + a
    return out


Z3_INT: dict[str, Callable] = {
    "add": lambda *a: _sum(a),
    "mul": lambda *a: _prod(a),
    "floordiv": lambda a, b: a / b,
    "ceildiv": lambda a, b: (a + b - 1) / b,
    "mod": lambda a, b: a % b,
    "xor": None,  # not expressible over integers: such queries use bit-vectors
    "max": lambda *a: _ite_max(a),
}
Z3_BV: dict[str, Callable] = {
    "add": lambda *a: _sum(a),
    "mul": lambda *a: _prod(a),
    "floordiv": lambda a, b: z3.UDiv(a, b),
    "ceildiv": lambda a, b: z3.UDiv(a + b - 1, b),
    "mod": lambda a, b: z3.URem(a, b),
    "xor": lambda a, b: a ^ b,
    "max": lambda *a: _ite_max(a),
}


@dataclass
class Outcome:
    status: str  # "proved", "counterexample", "unknown"
    model: dict[str, int] = field(default_factory=dict)
    reason: str = ""
    values: dict[str, int] = field(default_factory=dict)  # requested derived values

    @property
    def proved(self) -> bool:
        return self.status == "proved"


def upper_bound(e: Expr, ub: Mapping[str, int], memo: dict | None = None) -> int:
    """An upper bound of a non-negative expression given upper bounds of its variables."""
    memo = {} if memo is None else memo
    got = memo.get(e)
    if got is not None:
        return got
    if e.op == "const":
        r = e.value
    elif e.op == "var":
        r = ub.get(e.value, MAX_EXTENT)  # type: ignore[arg-type]
    else:
        a = [upper_bound(x, ub, memo) for x in e.args]
        divisor = e.args[1].value if e.op in ("floordiv", "ceildiv", "mod") and e.args[1].is_const else None
        if e.op == "add":
            r = sum(a)
        elif e.op == "mul":
            r = 1
            for x in a:
                r *= x
        elif e.op == "floordiv":
            r = a[0] // divisor if divisor else a[0]
        elif e.op == "ceildiv":
            r = -(-a[0] // divisor) if divisor else a[0]
        elif e.op == "mod":
            r = max(min(a[0], a[1] - 1), 0)
        elif e.op == "xor":
            r = (1 << max(a).bit_length()) - 1
        else:
            r = max(a)
    memo[e] = r  # type: ignore[assignment]
    return r  # type: ignore[return-value]


def _sides(c) -> tuple:
    """A relation as (positive terms, negated negative terms): bit-vectors never see a
    negative value."""
    diff = sympy.expand(c.lhs - c.rhs)
    pos, neg = sympy.Integer(0), sympy.Integer(0)
    for term in sympy.Add.make_args(diff):
        coeff, _ = term.as_coeff_Mul()
        if coeff < 0:
            neg += -term
        else:
            pos += term
    return pos, neg


def assumption_terms(cond) -> list[Expr]:
    """The terms an assumption puts into a query (they must fit its bit-vector width)."""
    from ..model.expr import from_sympy

    out: list[Expr] = []
    for rel in cond.atoms(sympy.core.relational.Relational) if not isinstance(cond, bool) else ():
        out.extend(from_sympy(x) for x in _sides(rel))
    return out


class Query:
    """One question to z3. Variables get ranges; `prove(claim)` checks claim for all of them."""

    def __init__(self, hint: Iterable[Expr], ranges: Mapping[str, Expr], *,
                 symbol_bounds: Mapping[str, int] | None = None, timeout_ms: int = DEFAULT_TIMEOUT_MS):
        """`hint`: every expression the query will use (picks the theory and width);
        `ranges`: variable -> exclusive upper bound (an Expr over symbols);
        `symbol_bounds`: symbol -> largest admitted value."""
        self.ctx = z3.Context()
        self.timeout_ms = timeout_ms
        self.facts: list = []
        self._vars: dict[str, z3.ExprRef] = {}
        self._terms: dict[Expr, z3.ExprRef] = {}
        hint = list(hint) + list(ranges.values())
        self.bv = not USE_INT or any(e.has_op("xor") for e in hint)
        ub = dict(symbol_bounds or {})
        for name, hi in ranges.items():
            ub[name] = max(upper_bound(hi, ub) - 1, 0)
        memo: dict = {}
        for e in hint:
            upper_bound(e, ub, memo)
        # every subterm must fit, not only the roots: (a * 4096 + b) % 64 is small, its inner sum is not
        top = max(list(memo.values()) + list(ub.values()) + [1])
        self.width = min(max(top.bit_length() + 2, 8), 160)
        self._ub, self._ub_memo = ub, memo
        for name, hi in ranges.items():
            self.in_range(name, hi)

    def var(self, name: str) -> z3.ExprRef:
        v = self._vars.get(name)
        if v is None:
            v = z3.BitVec(name, self.width, self.ctx) if self.bv else z3.Int(name, self.ctx)
            self._vars[name] = v
        return v

    def val(self, n: int) -> z3.ExprRef:
        return z3.BitVecVal(n, self.width, self.ctx) if self.bv else z3.IntVal(n, self.ctx)

    def term(self, e: Expr) -> z3.ExprRef:
        t = self._terms.get(e)
        if t is None:
            if e.op == "const":
                t = self.val(e.value)  # type: ignore[arg-type]
            elif e.op == "var":
                t = self.var(e.value)  # type: ignore[arg-type]
            else:
                table = Z3_BV if self.bv else Z3_INT
                t = table[e.op](*(self.term(a) for a in e.args))
            if self.bv and upper_bound(e, self._ub, self._ub_memo) >= 1 << (self.width - 1):
                # fail closed: a wrapped bit-vector would decide a different question
                raise OverflowError(f"bit-vector width {self.width} too small for {e}")
            self._terms[e] = t
        return t

    # comparisons that respect the theory (bit-vectors are unsigned here)
    def lt(self, a: Expr, b: Expr):
        x, y = self.term(a), self.term(b)
        return z3.ULT(x, y) if self.bv else x < y

    def le(self, a: Expr, b: Expr):
        x, y = self.term(a), self.term(b)
        return z3.ULE(x, y) if self.bv else x <= y

    def eq(self, a: Expr, b: Expr):
        return self.term(a) == self.term(b)

    def ne(self, a: Expr, b: Expr):
        return self.term(a) != self.term(b)

    def in_range(self, name: str, hi: Expr, lo: int = 0) -> None:
        """lo <= name < hi."""
        v = self.var(name)
        if self.bv:
            self.facts.append(z3.UGE(v, self.val(lo)))
        else:
            self.facts.append(v >= lo)
        self.facts.append(self.lt(Expr("var", (), name), hi))

    def add(self, *facts) -> None:
        self.facts.extend(facts)

    def assume_sympy(self, cond: sympy.Basic) -> None:
        self.facts.append(self._sympy_bool(cond))

    # -- decide -----------------------------------------------------------------
    def prove(self, claim, *, values: Mapping[str, Expr] | None = None, smallest: Expr | None = None) -> Outcome:
        """Is `claim` true for every assignment satisfying the facts? A counterexample
        carries every variable of the query and the requested derived `values`; with
        `smallest`, a few more solves shrink that expression (readable witnesses)."""
        s = z3.Solver(ctx=self.ctx)
        s.set("timeout", self.timeout_ms)
        s.add(*self.facts)
        s.add(z3.Not(claim))
        if DUMP_SMT:
            print(s.sexpr())
        r = s.check()
        if r == z3.unsat:
            return Outcome("proved")
        if r == z3.unknown:
            return Outcome("unknown", reason=s.reason_unknown())
        m = s.model()
        if smallest is not None:
            m = self._shrink(s, m, self.term(smallest))
        model = {name: self._as_int(m.eval(v, model_completion=True)) for name, v in self._vars.items()}
        derived = {k: self._as_int(m.eval(self.term(e), model_completion=True)) for k, e in (values or {}).items()}
        return Outcome("counterexample", model, values=derived)

    def _shrink(self, s: z3.Solver, m, target, rounds: int = 8):
        s.set("timeout", max(self.timeout_ms // 10, 100))
        for _ in range(rounds):
            current = m.eval(target, model_completion=True)
            s.push()
            s.add(z3.ULT(target, current) if self.bv else target < current)
            better = s.check() == z3.sat
            if better:
                m = s.model()
            s.pop()
            if not better:
                break
        return m

    def satisfiable(self, condition) -> Outcome:
        """Find an assignment where condition holds (status 'counterexample' = found)."""
        return self.prove(z3.Not(condition))

    @staticmethod
    def _as_int(v) -> int:
        return v.as_long() if z3.is_bv_value(v) else int(v.as_long())

    # -- sympy assumptions -------------------------------------------------------
    def _sympy_bool(self, c):
        if c is sympy.true:
            return z3.BoolVal(True, self.ctx)
        if c is sympy.false:
            return z3.BoolVal(False, self.ctx)
        if isinstance(c, sympy.And):
            return z3.And(*[self._sympy_bool(a) for a in c.args])
        if isinstance(c, sympy.Or):
            return z3.Or(*[self._sympy_bool(a) for a in c.args])
        if isinstance(c, sympy.Not):
            return z3.Not(self._sympy_bool(c.args[0]))
        if isinstance(c, sympy.core.relational.Relational):
            pos, neg = _sides(c)
            a, b = self._sympy_term(pos), self._sympy_term(neg)
            op = type(c)
            if op is sympy.Eq:
                return a == b
            if op is sympy.Ne:
                return a != b
            ops = {
                sympy.StrictLessThan: (z3.ULT, lambda x, y: x < y),
                sympy.LessThan: (z3.ULE, lambda x, y: x <= y),
                sympy.StrictGreaterThan: (z3.UGT, lambda x, y: x > y),
                sympy.GreaterThan: (z3.UGE, lambda x, y: x >= y),
            }
            bvf, intf = ops[op]
            return bvf(a, b) if self.bv else intf(a, b)
        raise ValueError(f"unsupported assumption {c}")

    def _sympy_term(self, e):
        from ..model.expr import from_sympy

        return self.term(from_sympy(e))

