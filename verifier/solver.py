"""Solver plumbing: a fresh z3 context per query, the z3 renderer of the index algebra,
and the verdict discipline (unsat = proved, sat = counterexample, unknown = not proved).

Queries use bit-vectors wide enough for every subterm (proved from upper bounds;
a term that could wrap aborts the query instead). TILEPROOF_THEORY=int switches
queries without XOR to integer arithmetic, for comparison. Before rendering, a term is
simplified with the variable intervals the query asserts (Simplifier), and a comparison
those intervals decide becomes a constant. Several claims over the same variables may
share one query (one context); each claim gets a fresh solver.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

import sympy
import z3

from ..model.expr import _BUILDERS as _BUILD
from ..model.expr import Expr, add, const, floordiv, mod, mul

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


Interval = tuple[int, int]


def _coeff(t: Expr) -> tuple[int, Expr | None]:
    """A term as (constant coefficient, the rest): 8*x -> (8, x), 8 -> (8, None), x -> (1, x)."""
    if t.op == "const":
        return t.value, None  # type: ignore[return-value]
    if t.op == "mul" and t.args[-1].op == "const":  # mul() keeps its coefficient last
        rest = t.args[:-1]
        return t.args[-1].value, rest[0] if len(rest) == 1 else Expr("mul", rest)  # type: ignore[return-value]
    return 1, t


class Simplifier:
    """Rewrites an index expression into one equal to it wherever every variable lies in
    its interval (the query asserts those intervals, so the rewrite decides the same
    question): fewer div/mod nodes means smaller bit-blasted circuits. Only identities of
    floor division on non-negative values are used; a variable without a known interval
    blocks every rewrite that would need one."""

    def __init__(self, bounds: Mapping[str, Interval]):
        self.bounds = bounds
        self._done: dict[Expr, Expr] = {}
        self._range: dict[Expr, Interval | None] = {}

    def range(self, e: Expr) -> Interval | None:
        """[lo, hi] of e over the variables' intervals, None when unknown."""
        if e in self._range:
            return self._range[e]
        r: Interval | None
        if e.op == "const":
            r = (e.value, e.value)  # type: ignore[assignment]
        elif e.op == "var":
            r = self.bounds.get(e.value)  # type: ignore[arg-type]
        else:
            rs = [self.range(a) for a in e.args]
            r = None if any(x is None for x in rs) else _interval(e.op, rs)  # type: ignore[arg-type]
        self._range[e] = r
        return r

    def __call__(self, e: Expr) -> Expr:
        out = self._done.get(e)
        if out is None:
            out = self._rewrite(e)
            r = self.range(out)
            if r is not None and r[0] == r[1]:
                out = const(r[0])
            self._done[e] = out
        return out

    def _nonneg(self, e: Expr) -> bool:
        r = self.range(e)
        return r is not None and r[0] >= 0

    def _rewrite(self, e: Expr) -> Expr:
        if e.op in ("const", "var"):
            return e
        args = [self(a) for a in e.args]
        if e.op == "mul":
            out = mul(*args)
            k, rest = _coeff(out)
            if rest is not None and rest.op == "add" and k != 1:
                return add(*(self(mul(t, k)) for t in rest.args))  # k*(a + b) = k*a + k*b: lets div/mod split it
            return out
        if e.op in ("floordiv", "mod"):
            a, b = args
            ra, rb = self.range(a), self.range(b)
            if ra is not None and rb is not None and ra[0] >= 0 and rb[0] > 0 and ra[1] < rb[0]:
                return const(0) if e.op == "floordiv" else a  # a < b
            if b.op == "const" and b.value > 0 and ra is not None and ra[0] >= 0:  # type: ignore[operator]
                return self._by_const(e.op, a, b.value)  # type: ignore[arg-type]
        return _BUILD[e.op](*args)

    def _by_const(self, op: str, a: Expr, c: int) -> Expr:
        """a // c or a % c for a >= 0 and a constant c > 0."""
        if a.op == op == "floordiv" and a.args[1].op == "const":
            return self(floordiv(a.args[0], a.args[1].value * c))  # (x // d) // c = x // (d*c)
        if op == "mod" and a.op == "mod" and a.args[1].op == "const" and a.args[1].value % c == 0:
            return self(mod(a.args[0], c))  # (x % (k*c)) % c = x % c
        terms = a.args if a.op == "add" else (a,)
        if all(self._nonneg(t) for t in terms):
            whole, rest = [], []  # (c*q + r) // c = q + r // c and (c*q + r) % c = r % c
            for t in terms:
                k, x = _coeff(t)
                if k % c == 0:
                    whole.append(mul(const(k // c), x) if x is not None else const(k // c))
                else:
                    rest.append(t)
            if whole:
                r = add(*rest) if rest else const(0)
                if op == "mod":
                    return self(mod(r, c))
                return self(add(*whole, floordiv(r, c)))
        return floordiv(a, c) if op == "floordiv" else mod(a, c)


def _interval(op: str, rs: list[Interval]) -> Interval | None:
    if op == "add":
        return sum(r[0] for r in rs), sum(r[1] for r in rs)
    if op == "mul":
        lo, hi = 1, 1
        for a, b in rs:
            corners = (lo * a, lo * b, hi * a, hi * b)
            lo, hi = min(corners), max(corners)
        return lo, hi
    if op == "max":
        return max(r[0] for r in rs), max(r[1] for r in rs)
    (a0, a1), (b0, b1) = rs
    if a0 < 0 or b0 < 0:
        return None
    if op == "xor":
        return 0, (1 << max(a1, b1).bit_length()) - 1
    if b0 == 0:
        return None  # a zero divisor: leave it to the theory
    if op == "floordiv":
        return a0 // b1, a1 // b0
    if op == "ceildiv":
        return -(-a0 // b1), -(-a1 // b0)
    if op == "mod":
        return (a0, a1) if a1 < b0 else (0, min(a1, b1 - 1))
    return None


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
                 symbols: Mapping[str, Interval] | None = None, timeout_ms: int = DEFAULT_TIMEOUT_MS):
        """`hint`: every expression the query will use (picks the theory and width);
        `ranges`: variable -> exclusive upper bound (an Expr over symbols);
        `symbols`: symbol -> [lo, hi], the admitted values (asserted here)."""
        self.ctx = z3.Context()
        self.timeout_ms = timeout_ms
        self.facts: list = []
        self._vars: dict[str, z3.ExprRef] = {}
        self._terms: dict[Expr, z3.ExprRef] = {}
        hint = list(hint) + list(ranges.values())
        self.bv = not USE_INT or any(e.has_op("xor") for e in hint)
        symbols = dict(symbols or {})
        ub = {name: hi for name, (_, hi) in symbols.items()}
        for name, hi in ranges.items():
            ub[name] = max(upper_bound(hi, ub) - 1, 0)
        memo: dict = {}
        for e in hint:
            upper_bound(e, ub, memo)
        # every subterm must fit, not only the roots: (a * 4096 + b) % 64 is small, its inner sum is not
        top = max(list(memo.values()) + list(ub.values()) + [1])
        self.width = min(max(top.bit_length() + 2, 8), 160)
        self._ub, self._ub_memo = ub, memo
        # the intervals the facts below assert, for simplifying terms before rendering
        self.simplify = Simplifier({**symbols, **{name: (0, ub[name]) for name in ranges}})
        for name, (lo, hi) in symbols.items():
            v = self.var(name)
            if lo == hi:
                self.facts.append(v == self.val(lo))
            elif self.bv:
                self.facts += [z3.UGE(v, self.val(lo)), z3.ULE(v, self.val(hi))]
            else:
                self.facts += [v >= lo, v <= hi]
        for name, hi in ranges.items():
            self.in_range(name, hi)

    def admits(self, exprs: Iterable[Expr]) -> bool:
        """Whether a claim over exprs fits this query's theory and width (so it may share it)."""
        exprs = list(exprs)
        if not self.bv and any(e.has_op("xor") for e in exprs):
            return False
        memo: dict = {}
        for e in exprs:
            upper_bound(e, self._ub, memo)
        return min(max(max(list(memo.values()) + [1]).bit_length() + 2, 8), 160) <= self.width

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
            t = self._render(self.simplify(e))
            self._terms[e] = t
        return t

    def _render(self, e: Expr) -> z3.ExprRef:
        t = self._terms.get(e)
        if t is None:
            if e.op == "const":
                t = self.val(e.value)  # type: ignore[arg-type]
            elif e.op == "var":
                t = self.var(e.value)  # type: ignore[arg-type]
            else:
                table = Z3_BV if self.bv else Z3_INT
                t = table[e.op](*(self._render(a) for a in e.args))
            if self.bv and upper_bound(e, self._ub, self._ub_memo) >= 1 << (self.width - 1):
                # fail closed: a wrapped bit-vector would decide a different question
                raise OverflowError(f"bit-vector width {self.width} too small for {e}")
            self._terms[e] = t
        return t

    # comparisons that respect the theory (bit-vectors are unsigned here); one that the
    # asserted intervals decide is a constant
    def _decided(self, a: Expr, b: Expr, strict: bool):
        ra, rb = self.simplify.range(self.simplify(a)), self.simplify.range(self.simplify(b))
        if ra is None or rb is None:
            return None
        if ra[1] < rb[0] or (not strict and ra[1] == rb[0]):
            return z3.BoolVal(True, self.ctx)
        if ra[0] > rb[1] or (strict and ra[0] == rb[1]):
            return z3.BoolVal(False, self.ctx)
        return None

    def lt(self, a: Expr, b: Expr):
        known = self._decided(a, b, True)
        if known is not None:
            return known
        x, y = self.term(a), self.term(b)
        return z3.ULT(x, y) if self.bv else x < y

    def le(self, a: Expr, b: Expr):
        known = self._decided(a, b, False)
        if known is not None:
            return known
        x, y = self.term(a), self.term(b)
        return z3.ULE(x, y) if self.bv else x <= y

    def eq(self, a: Expr, b: Expr):
        return self.term(a) == self.term(b)

    def ne(self, a: Expr, b: Expr):
        return self.term(a) != self.term(b)

    def in_range(self, name: str, hi: Expr, lo: int = 0) -> None:
        """lo <= name < hi (asserted as is: the intervals the simplifier uses come from here)."""
        v, h = self.var(name), self.term(hi)
        if self.bv:
            self.facts += [z3.UGE(v, self.val(lo)), z3.ULT(v, h)]
        else:
            self.facts += [v >= lo, v < h]

    def add(self, *facts) -> None:
        self.facts.extend(facts)

    def assume_sympy(self, cond: sympy.Basic) -> None:
        self.facts.append(self._sympy_bool(cond))

    # -- decide -----------------------------------------------------------------
    def prove(self, claim, *, values: Mapping[str, Expr] | None = None, smallest: Expr | None = None) -> Outcome:
        """Is `claim` true for every assignment satisfying the facts? A counterexample
        carries every variable of the query and the requested derived `values`; with
        `smallest`, a few more solves shrink that expression (readable witnesses)."""
        # simplify, then the SMT core: on the bundled examples' queries half the solving time
        # of the default QF_BV pipeline (eager bit-blasting to SAT), the same verdicts
        s = z3.Then("simplify", "smt", ctx=self.ctx).solver()
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

