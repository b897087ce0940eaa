"""Solver plumbing: a fresh z3 context per query, the z3 renderer of the index algebra,
and the verdict discipline (unsat = proved, sat = counterexample, unknown = not proved).

Every variable of a query is a symbol or has a range, and the query asserts them. From
those ranges model/simplify.py gives the bounds that size the bit-vectors (wide enough for
every subterm; a term that could wrap, or has no upper bound, aborts the query instead),
simplifies each term before it is rendered, and settles the comparisons they decide.
TILEPROOF_THEORY=int switches queries without XOR to integer arithmetic, for comparison.
Several claims over the same variables may share one query (one context); each claim gets
a fresh solver. The queries of one verify share its z3 context and what they would build the
same (query_share.py: range analyses, rendered terms, the facts of equal ranges), never a
solver or an assertion. A claim z3's rewriter alone makes true needs no solver (_valid_alone).
"""

from __future__ import annotations

import enum
import functools
import os
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

import sympy
import z3
from z3.z3 import _to_expr_ref

from ..model.expr import Expr, from_sympy, var
from ..model.fusion import MAX_EXTENT  # noqa: F401 - the bound of every symbol; rules size strides by it
from .query_share import QueryShare, Span

DEFAULT_TIMEOUT_MS = int(os.environ.get("TILEPROOF_TIMEOUT_MS", "20000"))
# A proof's limit is z3's resource count, not the clock, so that a verdict does not depend on the
# machine or its load: a limit of T ms allows T * UNITS_PER_MS units, and the clock stops only a
# solve WALL_FACTOR times slower. Measured on a 2-core machine: the slowest proof the fuzz slice
# decides (SMEM-BLOCK-VISIBILITY of a symbolic 192-row persistent tile) took 116 million units in
# 17.5 s, 6600 a ms; stalled bit-vector claims count 2000 to 3200 a ms, so they give up later
UNITS_PER_MS = int(os.environ.get("TILEPROOF_UNITS_PER_MS", "7000"))
WALL_FACTOR = 6
DUMP_SMT = os.environ.get("TILEPROOF_DUMP_SMT") == "1"
# bit-vectors by default: every value is bounded, and bounded div/mod chains that stall
# integer arithmetic (20 s on PerformantVectorizedCopy) take milliseconds as bit-vectors
USE_INT = os.environ.get("TILEPROOF_THEORY") == "int"
# a counterexample is made readable (its sizes, then the rule's `smallest`, then the loop
# indices and threads shrunk toward their smallest values) within this many extra solves and seconds
# of solving (counted in resource units, as proofs are: the same counterexample on any machine)
SHRINK_CHECKS = 48
SHRINK_SECONDS = float(os.environ.get("TILEPROOF_SHRINK_SECONDS", "0.1"))
# before that, a counterexample at large sizes is tried at a few small fixed ones (each free extent
# symbol at its smallest admitted value, then one or two a step above it): fixed sizes turn
# divisions by a symbol into divisions by a constant, so these solves are quick where shrinking
# the symbolic model is not; within this many solves of SIZE_PROBE_MS, and seconds per verify
SIZE_PROBES = 8
SIZE_PROBE_MS = 100
SIZE_PROBE_SECONDS = float(os.environ.get("TILEPROOF_SIZE_PROBE_SECONDS", "1.0"))
# a claim that divides by a symbolic term (a persistent grid's tile index by the count of N tiles)
# is first tried with each such quotient and remainder an uninterpreted function of its operands,
# bounded as they are (remainder < divisor, quotient <= dividend): bit-blasting a division by a
# variable is the costly part, and a claim proved so holds for the real terms too; a failure (the
# claim needed the division) falls through to the full proof. 1500: the stmatrix epilogue's
# ALLOCATION-DISTINCT with a thread-bound output axis (fuzz seed 106 case 405) needs about 1.2 s
# here and took 30 s of full proof without it
ABSTRACT_MS = 1500
# the rewriting _valid_alone may do before a claim goes to the solver (the bundled examples' claims
# take under 1000 steps)
SIMPLIFY_STEPS = 100_000
_DIVISIONS = (z3.Z3_OP_BUDIV, z3.Z3_OP_BUDIV_I, z3.Z3_OP_IDIV)
_REMAINDERS = (z3.Z3_OP_BUREM, z3.Z3_OP_BUREM_I, z3.Z3_OP_MOD)


def _depth(term) -> int:
    """The height of a z3 term's tree (1 for a leaf)."""
    heights: dict[int, int] = {}
    stack = [(term, False)]
    while stack:
        a, expanded = stack.pop()
        if a.get_id() in heights:
            continue
        kids = a.children() if z3.is_app(a) else []
        if expanded or not kids:
            heights[a.get_id()] = 1 + max((heights[k.get_id()] for k in kids), default=0)
        else:
            stack.append((a, True))
            stack.extend((k, False) for k in kids if k.get_id() not in heights)
    return heights[term.get_id()]


def _valid_alone(claim) -> bool:
    """Whether z3's rewriter alone makes claim true (`0 == 0`, `(a + 1) * 4 == a * 4 + 4`, a
    conjunction of comparisons the ranges decided): it then holds under any facts, and no solver
    is needed (on the bundled examples, three proofs in four). Within SIMPLIFY_STEPS rewrite
    steps; past them (or not true) the solver decides."""
    ref = claim.ctx_ref()
    if z3.Z3_get_bool_value(ref, claim.as_ast()) == z3.Z3_L_TRUE:
        return True
    try:
        return z3.Z3_get_bool_value(ref, z3.simplify(claim, max_steps=SIMPLIFY_STEPS).as_ast()) == z3.Z3_L_TRUE
    except z3.Z3Exception:  # "max. steps exceeded"
        return False


def units(ms: float) -> int:
    """z3's resource units for `ms` of solving (UNITS_PER_MS)."""
    return int(ms * UNITS_PER_MS)


def check(s: z3.Solver, allowed: int) -> tuple[z3.CheckSatResult, int]:
    """s.check() within `allowed` resource units (the clock a backstop WALL_FACTOR times longer):
    its result and the units it used."""
    s.set("rlimit", max(1, allowed))
    s.set("timeout", max(1, allowed * WALL_FACTOR // UNITS_PER_MS))
    before = _units_used(s)
    r = s.check()
    return r, _units_used(s) - before


def _units_used(s: z3.Solver) -> int:
    """The resource units z3 has counted in s's context so far ("rlimit count"; none yet: 0)."""
    stats = s.statistics()
    ref = stats.ctx.ref()
    for i in reversed(range(z3.Z3_stats_size(ref, stats.stats))):  # it is among the last: from the end
        if z3.Z3_stats_get_key(ref, stats.stats, i) == "rlimit count":
            if z3.Z3_stats_is_uint(ref, stats.stats, i):
                return int(z3.Z3_stats_get_uint_value(ref, stats.stats, i))
            return z3.Z3_stats_get_double_value(ref, stats.stats, i)
    return 0


def why_unknown(s: z3.Solver, ms: int) -> str:
    """z3's reason for no verdict from `s`, checked within `ms` of solving (check), said plainly
    ("canceled" is z3's word for either limit)."""
    reason = s.reason_unknown()
    if reason in ("canceled", "timeout", "max. resource limit exceeded"):
        return f"no answer within its limit of {ms * UNITS_PER_MS:,} resource units (about {ms / 1000:g} s of solving)"
    return reason


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


class Verdict(enum.Enum):
    """What z3 answered: unsat (the claim holds), sat (a counterexample), or unknown (a timeout
    or an undecided theory, which rules report as a rejection, never an accept)."""

    PROVED = "proved"
    COUNTEREXAMPLE = "counterexample"
    UNKNOWN = "unknown"


@dataclass
class Outcome:
    status: Verdict
    model: dict[str, int] = field(default_factory=dict)  # a counterexample: every variable of the query
    reason: str = ""  # unknown: z3's reason (a timeout, an incomplete theory)
    values: dict[str, int] = field(default_factory=dict)  # requested derived values

    def __post_init__(self):
        if not isinstance(self.status, Verdict):
            raise TypeError(f"Outcome: status must be a Verdict, got {self.status!r}")

    @property
    def proved(self) -> bool:
        return self.status is Verdict.PROVED


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


@functools.lru_cache(maxsize=4096)
def _side_exprs(c) -> tuple[Expr, Expr]:
    """_sides(c) in the index algebra (every query of a verify asserts the same assumptions:
    converted once)."""
    pos, neg = _sides(c)
    return from_sympy(pos), from_sympy(neg)


def assumption_terms(cond) -> list[Expr]:
    """The terms an assumption puts into a query (they must fit its bit-vector width)."""
    out: list[Expr] = []
    for rel in cond.atoms(sympy.core.relational.Relational) if not isinstance(cond, bool) else ():
        out.extend(_side_exprs(rel))
    return out


def _width(top: int | None) -> int:
    """Bits for values up to top, two to spare (the widest when top is unknown: the terms
    without a bound then fail closed when rendered)."""
    return 160 if top is None else min(max(top.bit_length() + 2, 8), 160)


class Query:
    """One question to z3. Variables get ranges; `prove(claim)` checks claim for all of them."""

    def __init__(self, hint: Iterable[Expr], ranges: Mapping[str, Expr], *,
                 symbols: Mapping[str, tuple[int, int]] | None = None, timeout_ms: int = DEFAULT_TIMEOUT_MS,
                 simplify: bool = True, shrink: "ShrinkAccount | None" = None, steps: Mapping[str, int] | None = None,
                 context: "z3.Context | None" = None, integers: bool = False,
                 shared: "QueryShare | None" = None):
        """`hint`: every expression the query will use (picks the theory and width);
        `ranges`: variable -> exclusive upper bound (an Expr over symbols);
        `symbols`: symbol -> [lo, hi], the admitted values (asserted here);
        `steps`: symbol -> k where the facts (an assumption S % k == 0) admit only multiples of k,
        so that shrinking a counterexample probes those alone (and the simplifier reduces
        (x % S) % k to x % k);
        `simplify=False` renders terms as given and decides no comparison itself (tests
        compare the verdicts); `context`: the z3 context to build terms in (one verify's queries
        share one: making a context costs about a millisecond), each query with its own solver;
        `integers=True`: integer arithmetic even where bit-vectors would be chosen (the terms, as
        simplified, must hold no XOR: ValueError); `shared`: what the queries of one verify share
        (verifier/query_share.py; VerifyContext's), else this query's own."""
        self._shared = shared if shared is not None else QueryShare()
        self.ctx = context if context is not None else z3.Context()
        self.shrink = shrink if shrink is not None else ShrinkAccount(SHRINK_SECONDS)
        self.timeout_ms = timeout_ms
        self.used = 0  # resource units of every solve so far (a rule's own budget charges them)
        self._own: list = []  # the facts this query adds to those of its symbols and ranges (facts)
        self._vars: dict[str, z3.ExprRef] = {}
        hint = list(hint) + list(ranges.values())
        symbols = dict(symbols or {})
        self.symbols = symbols
        self.steps = dict(steps or {})
        # where each variable lies, as the facts below assert it: the ranges of model/simplify.py,
        # for bounds (theory and width), simplifying terms before rendering and deciding comparisons
        self.ranges: dict[str, Expr | tuple[int, int]] = {**symbols, **ranges}
        self.analysis, self._spans = self._shared.range_analysis(self.ranges, self.steps)
        self.simplifying = simplify
        # every subterm must fit, not only the roots: (a * 4096 + b) % 64 is small, its inner sum is not
        lo, hi = self._span(hint + [var(name) for name in self.ranges])
        # bit-vectors are unsigned: a term that may be negative ((2 - N) % 3) is decided over the
        # integers, whose division and remainder are Python's for a positive divisor
        if integers and any(self.analysis.simplify(e).has_op("xor") for e in hint):
            raise ValueError("an XOR has no integer rendering: this query needs bit-vectors")
        self.bv = not integers and (any(e.has_op("xor") for e in hint) or not (USE_INT or lo is None or lo < 0))
        self.width = _width(hi)
        self._bounds = dict(ranges)
        self._r = self._shared.rendering(self.ctx, self.bv, self.width,
                                         (simplify, tuple(symbols.items()), tuple(ranges.items()),
                                          tuple(self.steps.items())))
        self._terms = self._r.terms
        if self._r.order is not None:  # named as another query over the same ranges did
            self._vars = {name: self._r.vars[name] for name in self._r.order}
            return
        # every variable with a range, in the order the facts name them (a counterexample lists
        # them so, and shrinks them in this order); a bound that does not fit fails closed here
        for name in symbols:
            self.var(name)
        for name, hi in ranges.items():
            self.var(name)
            self.term(hi)
        self._r.order = tuple(self._vars)

    @property
    def facts(self) -> list:
        """What every solve of this query assumes: the symbols' admitted values, each variable in
        its range, the assumptions, and the facts added (add)."""
        if self._r.facts is None:  # made once for the queries that share them, when a solver needs them
            facts: list = []
            for name, (lo, hi) in self.symbols.items():
                v = self.var(name)
                if lo == hi:
                    facts.append(v == self.val(lo))
                elif self.bv:
                    facts += [z3.UGE(v, self.val(lo)), z3.ULE(v, self.val(hi))]
                else:
                    facts += [v >= lo, v <= hi]
            for name, hi in self._bounds.items():
                facts += self._in_range(name, hi)
            self._r.facts = facts
        return self._r.facts + self._own

    def _span(self, exprs: Iterable[Expr]) -> Span:
        """The smallest and the largest value of any subterm of exprs (None: not bounded)."""
        spans = [self._span_of(e) for e in exprs]
        los, his = [s[0] for s in spans], [s[1] for s in spans]
        return (None if None in los else min(los, default=0),  # type: ignore[type-var]
                None if None in his else max(his, default=1))  # type: ignore[type-var]

    def _span_of(self, e: Expr) -> Span:
        got = self._spans.get(e)
        if got is None:
            lo, hi, _ = self.analysis.bounds(e)  # the ends (not the peak)
            for a in e.args:
                sub_lo, sub_hi = self._span_of(a)
                lo = None if lo is None or sub_lo is None else min(lo, sub_lo)
                hi = None if hi is None or sub_hi is None else max(hi, sub_hi)
            got = self._spans[e] = (lo, hi)
        return got

    def admits(self, exprs: Iterable[Expr]) -> bool:
        """Whether a claim over exprs fits this query's theory and width (so it may share it)."""
        exprs = list(exprs)
        if not self.bv:
            return not any(e.has_op("xor") for e in exprs)
        lo, hi = self._span(exprs)
        return lo is not None and lo >= 0 and _width(hi) <= self.width

    def var(self, name: str) -> z3.ExprRef:
        v = self._vars.get(name)
        if v is None:
            if name not in self.ranges:  # the simplifier would take it for a non-negative index
                raise ValueError(f"variable {name!r} has no range in this query")
            v = self._r.vars.get(name)
            if v is None:
                v = self._r.vars[name] = z3.BitVec(name, self.width, self.ctx) if self.bv else z3.Int(name, self.ctx)
            self._vars[name] = v
        return v

    def val(self, n: int) -> z3.ExprRef:
        v = self._r.vals.get(n)
        if v is None:
            v = self._r.vals[n] = z3.BitVecVal(n, self.width, self.ctx) if self.bv else z3.IntVal(n, self.ctx)
        return v

    def term(self, e: Expr) -> z3.ExprRef:
        t = self._terms.get(e)
        if t is None:
            t = self._render(self.analysis.simplify(e) if self.simplifying else e)
            self._terms[e] = t
        return t

    def _render(self, e: Expr) -> z3.ExprRef:
        t = self._terms.get(e)
        if t is None:
            args: list = []
            if e.op == "const":
                t = self.val(e.value)  # type: ignore[arg-type]
            elif e.op == "var":
                t = self.var(e.value)  # type: ignore[arg-type]
            else:
                table = Z3_BV if self.bv else Z3_INT
                args = [self._render(a) for a in e.args]
                t = table[e.op](*args)
            if self.bv:
                # fail closed: a wrapped bit-vector would decide a different question
                lo, hi, _ = self.analysis.bounds(e)  # the ends (not the peak)
                if lo is None or lo < 0 or hi is None:
                    raise OverflowError(f"{e} is not proved to lie in 0 .. {(1 << (self.width - 1)) - 1}, "
                                        f"so no unsigned bit-vector holds it")
                if hi >= 1 << (self.width - 1):
                    raise OverflowError(f"bit-vector width {self.width} too small for {e}")
            if not (e.op in ("floordiv", "ceildiv", "mod") and e.args[1].op != "const") and \
                    all(a in self._r.undivided_exprs for a in e.args):
                self._r.undivided_exprs.add(e)
                self._r.undivided.add(t.as_ast().value)
            self._terms[e] = t
        return t

    # comparisons that respect the theory (bit-vectors are unsigned here); one that the
    # asserted intervals decide is a constant
    def _decided(self, a: Expr, b: Expr, strict: bool):
        if not self.simplifying:
            return None
        ra = self.analysis.bounds(self.analysis.simplify(a))
        rb = self.analysis.bounds(self.analysis.simplify(b))
        if ra.hi is not None and rb.lo is not None and (ra.hi < rb.lo or (not strict and ra.hi == rb.lo)):
            return z3.BoolVal(True, self.ctx)
        if ra.lo is not None and rb.hi is not None and (ra.lo > rb.hi or (strict and ra.lo == rb.hi)):
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

    def holds(self, cond):
        """A predicate conjunct of the execution model (`lhs < rhs` or `lhs == rhs`)."""
        return self.lt(cond.lhs, cond.rhs) if cond.op == "<" else self.eq(cond.lhs, cond.rhs)

    def in_range(self, name: str, hi: Expr, lo: int = 0) -> None:
        """lo <= name < hi (asserted as is: the intervals the simplifier uses come from here)."""
        self._own += self._in_range(name, hi, lo)

    def _in_range(self, name: str, hi: Expr, lo: int = 0) -> list:
        v, h = self.var(name), self.term(hi)
        return [z3.UGE(v, self.val(lo)), z3.ULT(v, h)] if self.bv else [v >= lo, v < h]

    def add(self, *facts) -> None:
        self._own.extend(facts)

    def assume_sympy(self, cond: sympy.Basic) -> None:
        fact = self._r.assumed.get(cond)
        if fact is None:
            fact = self._r.assumed[cond] = self._sympy_bool(cond)
        self._own.append(fact)

    # -- decide -----------------------------------------------------------------
    def prove(self, claim, *, values: Mapping[str, Expr] | None = None, smallest: Expr | None = None,
              shrink_units: int | None = None) -> Outcome:
        """Is `claim` true for every assignment satisfying the facts? A counterexample
        carries every variable of the query and the requested derived `values`. It is the
        smallest one a few more solves find (_readable): each extent symbol as small as the
        claim's failure allows (1 where it does not depend on the symbol), then the expression
        `smallest` (the rule's witness, e.g. a thread id), then the other variables;
        `shrink_units` caps that search further (a warning rule's own budget)."""
        if _valid_alone(claim) or self._proved_without_symbolic_division(claim):
            return Outcome(Verdict.PROVED)
        s = self._solver(z3.Not(claim))
        if DUMP_SMT:
            print(s.sexpr())
        r, used = self._check(s, units(self.timeout_ms))
        if r == z3.unsat:
            return Outcome(Verdict.PROVED)
        if r == z3.unknown:
            return Outcome(Verdict.UNKNOWN, reason=why_unknown(s, self.timeout_ms))
        m = self._readable(s, s.model(), smallest, shrink_units, used)
        model = {name: self._as_int(m.eval(v, model_completion=True)) for name, v in self._vars.items()}
        derived = {k: self._as_int(m.eval(self.term(e), model_completion=True)) for k, e in (values or {}).items()}
        return Outcome(Verdict.COUNTEREXAMPLE, model, values=derived)

    def _solver(self, *assertions) -> z3.Solver:
        """A solver holding the facts and `assertions`: simplify, then the SMT core (on the bundled
        examples' queries half the solving time of the default QF_BV pipeline, the same verdicts)."""
        s = self._shared.tactic(self.ctx).solver()
        ref = self.ctx.ref()
        for fact in (*self.facts, *assertions):
            if isinstance(fact, z3.BoolRef):  # as Solver.add, without its checks and conversions
                z3.Z3_solver_assert(ref, s.solver, fact.as_ast())
            else:
                s.add(fact)
        return s

    def _check(self, s: z3.Solver, allowed: int) -> tuple[z3.CheckSatResult, int]:
        """check(s, allowed), its units added to the query's."""
        r, used = check(s, allowed)
        self.used += used
        return r, used

    def _proved_without_symbolic_division(self, claim) -> bool:
        """Whether claim holds with each division and remainder by a non-constant term replaced
        by a fresh variable bounded as the term is, or failing that by an uninterpreted function of
        its operands so bounded (ABSTRACT_MS each): if so it holds for the terms. The function
        keeps that equal operands give equal quotients (two points of one thread whose indices
        agree divide the same value); the fresh variables, where they suffice, are quicker. False
        where the claim has none, has a quantifier, or needs the division itself."""
        found = self._symbolic_divisions(claim)
        if not found:
            return False
        return self._proved_abstracted(claim, found, congruent=False) or \
            self._proved_abstracted(claim, found, congruent=True)

    def _proved_abstracted(self, claim, found, congruent: bool) -> bool:
        pairs, functions = [], {}
        for t in sorted(found, key=_depth):  # operands first: a term's operands are abstracted in its own
            if not congruent:
                pairs.append((t, z3.FreshConst(t.sort(), "abstracted")))
                continue
            kind = t.decl().kind()
            f = functions.get((kind, t.sort()))
            if f is None:
                f = functions[(kind, t.sort())] = z3.Function(
                    f"abstracted_{'remainder' if kind in _REMAINDERS else 'quotient'}", t.sort(), t.sort(), t.sort())
            pairs.append((t, f(*[z3.substitute(a, *pairs) if pairs else a for a in t.children()])))
        zero = self.val(0)
        bounds = []
        for t, v in pairs:
            x, d = (v.arg(0), v.arg(1)) if congruent else (z3.substitute(t.arg(0), *pairs), z3.substitute(t.arg(1), *pairs))
            if t.decl().kind() in _REMAINDERS:  # x % d < d (z3's: d > 0 for integers)
                bounds.append(z3.Implies(z3.UGT(d, zero), z3.ULT(v, d)) if self.bv else z3.Implies(d > 0, z3.And(v >= 0, v < d)))
            else:  # x / d <= x for d >= 1 (x >= 0 for integers)
                bounds.append(z3.Implies(z3.UGT(d, zero), z3.ULE(v, x)) if self.bv
                              else z3.Implies(z3.And(d > 0, x >= 0), z3.And(v >= 0, v <= x)))
        s = self._solver(*bounds, z3.Not(z3.substitute(claim, *pairs)))
        return self._check(s, units(min(self.timeout_ms, ABSTRACT_MS)))[0] == z3.unsat

    def _symbolic_divisions(self, claim) -> list | None:
        """The divisions and remainders by a non-constant term in claim, depth first (None where
        it has a quantifier or a bound variable: one must not be captured by a free one). Read
        through z3's C API (no Python object per node); rendered terms without one are not entered."""
        ref, undivided = self.ctx.ref(), self._r.undivided
        found, seen, stack = [], set(), [claim.as_ast()]
        while stack:
            a = stack.pop()
            if a.value in seen or a.value in undivided:
                continue
            seen.add(a.value)
            kind = z3.Z3_get_ast_kind(ref, a)
            if kind in (z3.Z3_QUANTIFIER_AST, z3.Z3_VAR_AST):
                return None
            if kind != z3.Z3_APP_AST:
                continue  # a numeral
            app = z3.Z3_to_app(ref, a)
            kind, args = z3.Z3_get_decl_kind(ref, z3.Z3_get_app_decl(ref, app)), [
                z3.Z3_get_app_arg(ref, app, i) for i in range(z3.Z3_get_app_num_args(ref, app))]
            if kind in _DIVISIONS + _REMAINDERS and not z3.Z3_is_numeral_ast(ref, args[1]):
                found.append(_to_expr_ref(a, self.ctx))  # as ExprRef.children makes them
            stack.extend(args)
        return found

    def _readable(self, s: z3.Solver, m, smallest: Expr | None, allowed: int | None = None, solved_in: int = 0):
        """The counterexample m at small fixed sizes where a few quick solves find one
        (_small_sizes), then shrunk, term by term, within SHRINK_CHECKS solves and SHRINK_SECONDS
        of solving (and `allowed` units): the free extent symbols toward their smallest admitted
        value, then `smallest`, then the other variables toward 0. Each term is fixed at its
        smallest value before the next one shrinks, so a later term never grows an earlier one
        back. Every model found satisfies the same facts and the negated claim: only its values
        change. A solve that took more than the budget (`solved_in` units) is not followed by any:
        a probe is the same question with one more bound, and would run out. Where the budget ends
        before every size has shrunk, one more probe (_rest_smallest) tries the sizes left at their
        smallest, so that a size the counterexample does not depend on is not left near 2^31."""
        fixed: set[str] = set()
        stalled = False  # a size probe went unanswered: the probe after shrinking is not tried either
        if allowed is None or allowed > 0:
            probed = self._small_sizes(s, m)
            stalled = probed == ()
            if probed:
                m, solved_in, fixed = probed
        targets = [(self.var(name), lo, self.steps.get(name, 1)) for name, (lo, hi) in self.symbols.items()
                   if lo < hi and name not in fixed]
        if smallest is not None:
            targets.append((self.term(smallest), 0, 1))
        targets += [(v, 0, 1) for name, v in list(self._vars.items()) if name not in self.symbols]
        share = units(SHRINK_SECONDS * 1000)
        budget = Budget(min(share, self.shrink.left, share if allowed is None else allowed), SHRINK_CHECKS,
                        units(self.timeout_ms))
        left = [name for name, (lo, hi) in self.symbols.items() if lo < hi and name not in fixed]
        if solved_in > budget.left:
            return m if stalled else self._rest_smallest(s, m, left)
        for term, lo, step in targets:
            if budget.spent:
                break
            m = self._minimize(s, m, term, lo, budget, step)
            s.add(term == m.eval(term, model_completion=True))
            left = [name for name in left if not term.eq(self.var(name))]
        self.shrink.left -= budget.used
        return m if stalled else self._rest_smallest(s, m, left)

    def _rest_smallest(self, s: z3.Solver, m, names: list[str]):
        """m, or a counterexample with the sizes `names` (those not shrunk, the others fixed on s)
        at their smallest admitted values where a quick solve (a probe of _small_sizes' budget)
        finds one: all of them, else all but one, that one free (a violation that needs one size
        large, such as a buffer shared once M > 4096)."""
        names = [n for n in names if self._as_int(m.eval(self.var(n), model_completion=True)) > self.symbols[n][0]]
        tries = [names] + [[n for n in names if n != free] for free in names] if len(names) > 1 else [names]
        for pinned in tries:
            if not pinned or self.shrink.probe_left <= 0:
                break
            s.push()
            s.add(*[self.var(n) == self.val(self.symbols[n][0]) for n in pinned])
            r, took = self._probe(s)
            found = s.model() if r == z3.sat else None
            s.pop()
            if found is not None:
                return found
            if r == z3.unknown:  # the other tries ask the same question with one size fewer pinned (_probe)
                return m
        return m

    def _small_sizes(self, s: z3.Solver, m):
        """The counterexample m again at small sizes, if a few solves with the free extent symbols
        fixed find one (SIZE_PROBES): all at their smallest admitted value, then one, then two of
        them a step (their assumed multiple) above it, never above m's. Returns (model, units of
        the solve that found it, the symbols now fixed on s), None where no probe found one, or ()
        where a probe went unanswered (the series ends there: _probe)."""
        free = [(name, lo, self.steps.get(name, 1)) for name, (lo, hi) in self.symbols.items() if lo < hi]
        now = {name: self._as_int(m.eval(self.var(name), model_completion=True)) for name, _, _ in free}
        if not free or all(now[name] == lo for name, lo, _ in free):
            return None
        ups = [()] + [(i,) for i in range(len(free))] + [(i, j) for i in range(len(free)) for j in range(i + 1, len(free))]
        for values in ({name: lo + (step if i in up else 0) for i, (name, lo, step) in enumerate(free)}
                       for up in ups[:SIZE_PROBES]):
            if self.shrink.probe_left <= 0:
                break
            if any(values[name] > now[name] for name in values):
                continue
            pinned = [self.var(name) == self.val(v) for name, v in values.items()]
            s.push()
            s.add(*pinned)
            r, took = self._probe(s)
            found = s.model() if r == z3.sat else None
            s.pop()
            if found is not None:
                s.add(*pinned)  # the shrinking that follows keeps these sizes
                return found, took, set(values)
            if r == z3.unknown:
                return ()
        return None

    def _probe(self, s: z3.Solver):
        """One size probe (check within SIZE_PROBE_MS and what the verify's probes have left):
        its result and units. A probe with no answer is charged its whole allowance and ends the
        series: the next probes ask the same question with other sizes pinned, and stalled where
        one did (fuzz seed 300 case 2242: eleven in a row stopped at the clock, 0.75 s each, having
        counted a third of their units)."""
        allowed = min(units(SIZE_PROBE_MS), self.shrink.probe_left)
        r, took = self._check(s, allowed)
        self.shrink.probe_left -= allowed if r == z3.unknown else took
        return r, took

    def _minimize(self, s: z3.Solver, m, term, lo: int, budget: "Budget", unit: int = 1):
        """A model where `term` is as small as it gets (at least lo), starting from model m. The
        first probes are lo (the usual answer) and just below m's value (one solve shows that m's
        value is the smallest, where the search below takes one per bit of it); then steps
        doubling up from lo until one is met, and bisection below it. Every value term takes is
        lo plus a multiple of `unit` (a size the assumptions make a multiple of it): the search
        counts in units."""
        cur = (self._as_int(m.eval(term, model_completion=True)) - lo) // unit
        bad, step = -1, 1  # no model has term <= lo + bad * unit; m has term == lo + cur * unit
        first = [0, cur - 1]
        while bad + 1 < cur and not budget.spent:
            forced = bool(first)
            probe = first.pop(0) if forced else min(bad + step, cur - 1) if step else (bad + cur) // 2
            if probe <= bad or probe >= cur:
                continue
            s.push()
            s.add(z3.ULE(term, self.val(lo + probe * unit)) if self.bv else term <= lo + probe * unit)
            r, used = self._check(s, budget.next())
            budget.charge(used)
            better = s.model() if r == z3.sat else None
            s.pop()
            if r == z3.unknown:
                budget.checks = 0  # out of time: keep the smallest model so far
            elif better is not None:
                m, cur = better, (self._as_int(better.eval(term, model_completion=True)) - lo) // unit
                if not forced:  # found one at most probe: bisect between bad and it
                    step = 0
            else:
                bad = probe
                step = step * 2 if step else 0
        return m

    def satisfiable(self, condition) -> Outcome:
        """Find an assignment where condition holds (Verdict.COUNTEREXAMPLE = found)."""
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
            pos, neg = _side_exprs(c)
            a, b = self.term(pos), self.term(neg)
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



class ShrinkAccount:
    """Resource units that shrinking counterexamples may still spend (`seconds` of solving),
    shared by the queries of one verify (VerifyContext), so that many rejections do not add up
    past the verify budget."""

    def __init__(self, seconds: float):
        self.left = units(seconds * 1000)
        self.probe_left = units(SIZE_PROBE_SECONDS * 1000) if seconds > 0 else 0  # Query._small_sizes


class Budget:
    """What a series of solves may still spend: resource units and, optionally, solves (the
    shrinking of one counterexample; a warning rule's own share of a verify)."""

    def __init__(self, allowed: int, checks: int | None = None, limit_units: int | None = None):
        self.left = allowed
        self.checks = checks
        self.limit = limit_units
        self.used = 0

    @property
    def spent(self) -> bool:
        return self.left <= 0 or (self.checks is not None and self.checks <= 0)

    @property
    def left_ms(self) -> int:
        """What is left, as ms of solving (a proof's limit)."""
        return self.left // UNITS_PER_MS

    def next(self) -> int:
        """The units the next solve may use: what is left, at most one proof's limit."""
        return max(1, self.left if self.limit is None else min(self.limit, self.left))

    def charge(self, used: int) -> None:
        """Units spent (a solve's, or a query's); one solve, where solves are counted."""
        self.left -= used
        self.used += used
        if self.checks is not None:
            self.checks -= 1
