"""What every rule sees: the frozen fusion, the target, the computed allocations,
the launch geometry, and a factory for z3 queries that carries the assumptions."""

from __future__ import annotations

from functools import cached_property
from typing import Iterable, Mapping

import z3

from ..execution.accesses import Access, accesses_to, tcgen05_accesses
from ..execution.allocation import Allocation, compute_allocation
from ..model.expr import Expr, const, substitute, try_int
from ..model.fusion import Fusion, Op, symbol_range
from ..execution.indexing import block_dims, executed_tensors, grid_dims, thread_dims
from ..model.loop_map import propagate_parallel_types
from ..model.mapping import IdMap
from ..execution.smem_plan import SmemPlan, plan_shared_memory
from ..model.targets import Target
from ..model.tensor import TensorView
from ..model.types import LoadStoreOpType, MemoryType
from .query_share import QueryShare
from .solver import Outcome, Query, ShrinkAccount, Verdict, assumption_terms

# a claim the bit-vectors left undecided, tried over the integers (retried_over_integers)
INTEGER_RETRY_MS = 5000
INTEGER_FIRST_MS = 1000  # proof_over_integers_first: a short try before the bit-vector query
from ..model.symbol_ranges import Admitted, admitted

VERIFY_SHRINK_SECONDS = 0.15  # of solving (resource units) to shrink all of a verify's counterexamples


def _divides_by_symbol(e: Expr) -> bool:
    """Whether e divides (or takes a remainder) by a term that is not a constant."""
    if e.op in ("floordiv", "ceildiv", "mod") and e.args[1].op != "const":
        return True
    return any(_divides_by_symbol(a) for a in e.args)


class VerifyContext:
    def __init__(self, fusion: Fusion, target: Target, bind: Mapping[str, int] | None = None, *,
                 shrink_seconds: float = VERIFY_SHRINK_SECONDS, query_ms: int | None = None):
        """`shrink_seconds`: the solving that making counterexamples readable may take, all rules
        together, counted in z3's resource units (0 for a copy of the fusion that is judged by its
        verdicts: its findings are never shown). `query_ms`: at most this much solving a query (a
        copy judged by its verdicts, where an undecided claim counts as a finding)."""
        self.query_ms = query_ms
        if getattr(fusion, "frozen", False):  # as the kernel is lowered: each loop's type on its Serial members
            propagate_parallel_types(fusion)
        self.fusion = fusion
        self.source: Fusion | None = None  # the schedule as written, where `fusion` is verify's snapshot of it
        self.target = target
        self.bind = dict(bind or {})
        self.queries = 0
        self.shrink = ShrinkAccount(shrink_seconds)
        # the codes of the rules verify runs on this context (None for a copy a rule judges itself):
        # a rule may leave a claim to another only when that one runs
        self.running: frozenset[str] | None = None
        # what this verify's queries share (verifier/query_share.py): never a solver or an assertion
        self._shared_by_queries = QueryShare()

    @cached_property
    def idmap(self) -> IdMap:
        return IdMap(self.fusion)

    @cached_property
    def allocations(self) -> dict[str, Allocation]:
        return {t.name: compute_allocation(t) for t in self.fusion.tensors if not t.is_fusion_input}

    @cached_property
    def smem_plan(self) -> SmemPlan:
        """Where each shared-memory buffer starts, as the kernel lays them out (execution/smem_plan.py)."""
        return plan_shared_memory(self.fusion, self.allocations)

    @cached_property
    def block_dims(self):
        return block_dims(self.fusion)

    @cached_property
    def thread_dims(self) -> tuple[Expr, Expr, Expr]:
        return thread_dims(self.fusion)

    @cached_property
    def grid_dims(self) -> tuple[Expr, Expr, Expr]:
        return grid_dims(self.fusion)

    def executed(self) -> list[TensorView]:
        return executed_tensors(self.fusion)

    def tensors_in(self, memory: MemoryType) -> list[TensorView]:
        return [t for t in self.fusion.tensors if t.memory_type is memory and not t.is_fusion_input]

    def accesses_to(self, memory: MemoryType) -> list[Access]:
        return accesses_to(self.fusion, memory)

    @cached_property
    def tmem_accesses(self) -> list[Access]:
        """The tcgen05.ld / tcgen05.st accesses (a tcgen05.mma's accumulation is none)."""
        return tcgen05_accesses(self.fusion)

    def memo(self, key, compute):
        """Decide identical questions once (propagated schedules repeat them per tensor)."""
        cache = self.__dict__.setdefault("_memo", {})
        if key not in cache:
            cache[key] = compute()
        return cache[key]

    @cached_property
    def extent_symbols(self) -> list[str]:
        """The fusion's extent symbols, and any other symbol an extent uses (a split by a factor
        that is no extent symbol: SYMBOLIC-FACTOR rejects it; the other rules treat it as a size)."""
        names = list(self.fusion.symbols)
        for tv in self.fusion.tensors:
            for i in tv.all_ids():
                names += sorted(i.extent_expr.free_vars() - set(names))
        return names

    def symbol_bounds(self) -> dict[str, tuple[int, int]]:
        """Each extent symbol's admitted values: its binding, else symbol_range()."""
        return {name: (self.bind[name],) * 2 if name in self.bind else symbol_range() for name in self.extent_symbols}

    @cached_property
    def admitted(self) -> Admitted:
        """symbol_bounds() narrowed by the assumptions that bound one symbol (M <= 128, M % 16 == 0):
        the ranges every query asserts, and sizes its bit-vectors by."""
        return admitted(self.symbol_bounds(), self.fusion.assumptions)

    @cached_property
    def _assumption_terms(self) -> list[Expr]:
        """The terms the fusion's assumptions put into every query (solver.assumption_terms)."""
        return [t for a in self.fusion.assumptions for t in assumption_terms(a)]

    @cached_property
    def z3_context(self):
        """The z3 context this verify's queries build their terms in, each with its own solver."""
        return z3.Context()

    @cached_property
    def _first_context(self):
        """The z3 context of proof_over_integers_first's queries."""
        return z3.Context()

    def query(self, hint: Iterable[Expr], ranges: Mapping[str, Expr] | None = None,
              timeout_ms: int | None = None, integers: bool = False, context: z3.Context | None = None) -> Query:
        """A fresh query whose symbols range over admitted sizes (assumptions, bindings);
        `timeout_ms` shortens z3's default time limit (a warning rule that may give up);
        `integers=True` decides it over the integers (Query's `integers`); `context`: the z3
        context to build its terms in (default z3_context, the verify's)."""
        self.queries += 1
        hint = list(hint) + self._assumption_terms
        if self.query_ms is not None:
            timeout_ms = self.query_ms if timeout_ms is None else min(timeout_ms, self.query_ms)
        limit = {} if timeout_ms is None else {"timeout_ms": timeout_ms}
        q = Query(hint, dict(ranges or {}), symbols=self.admitted.bounds(), steps=self.admitted.steps(),
                  shrink=self.shrink, context=context or self.z3_context, integers=integers,
                  shared=self._shared_by_queries, **limit)
        for a in self.fusion.assumptions:
            q.assume_sympy(a)
        return q

    def retried_over_integers(self, out: Outcome, hint: Iterable[Expr], ranges: Mapping[str, Expr], claim,
                              **prove) -> Outcome:
        """`out`, or where z3 left it undecided over bit-vectors, the verdict of `claim(q)` over
        the integers: bit-vector products of two symbolic terms stall z3 where integer arithmetic
        does not (a tile allocated whole over symbolic M and K tiles: 20 s and no verdict). Only a
        claim whose terms hold no XOR has an integer rendering; `prove`: Query.prove's keywords."""
        if out.status is not Verdict.UNKNOWN:
            return out
        try:
            q = self.query(hint, ranges, timeout_ms=INTEGER_RETRY_MS, integers=True)
            again = q.prove(claim(q), **prove)
        except (KeyError, ValueError):  # an XOR after all (no integer rendering): the unknown stands
            return out
        return out if again.status is Verdict.UNKNOWN else again

    def proof_over_integers_first(self, hint: Iterable[Expr], ranges: Mapping[str, Expr], claim,
                                  **prove) -> Outcome | None:
        """The proof of `claim(q)` over the integers within INTEGER_FIRST_MS; None where z3 does not
        prove it there (a counterexample is left to the caller's bit-vector query, whose shrinking
        makes it readable) or it has no integer rendering (an XOR in its terms, `hint`, that the
        ranges do not simplify away). `prove`: Query.prove's keywords."""
        try:  # in a context of their own: terms added to the verify's context change how z3 takes its later queries
            q = self.query(hint, ranges, timeout_ms=INTEGER_FIRST_MS, integers=True, context=self._first_context)
            out = q.prove(claim(q), **prove)
        except (KeyError, ValueError):  # an XOR after all: no integer rendering
            return None
        return out if out.status is Verdict.PROVED else None

    def unproved_over_integers(self, premises, goals, ranges: Mapping[str, Expr]) -> list:
        """The goals, (terms, goal) pairs with goal(q) a claim over `terms`, that are not proved
        one by one over the integers where the XOR-free `premises` (Conds) hold: fewer premises,
        a stronger claim, so each one proved holds. Only goals that divide by a symbolic term
        are tried: a conjunction through divisions by symbolic tile counts (a persistent grid's
        tile index) takes z3 seconds to tens of seconds over bit-vectors and 0.01 s a conjunct
        over the integers. The rest (no such division, or an XOR: no integer rendering) is left
        for the caller's bit-vector query."""
        plain = [c for c in premises if not (c.lhs.has_op("xor") or c.rhs.has_op("xor"))]
        left = []
        for terms, goal in goals:
            if not any(_divides_by_symbol(t) for t in terms) or any(t.has_op("xor") for t in terms):
                left.append((terms, goal))
                continue
            q = self.query(list(terms) + [e for c in plain for e in (c.lhs, c.rhs)], ranges,
                           timeout_ms=INTEGER_RETRY_MS, integers=True)
            if not q.prove(z3.Implies(z3.And(*[q.holds(c) for c in plain], q.ctx), goal(q)), shrink_units=0).proved:
                left.append((terms, goal))
        return left

    def shared_query(self, key, hint: Iterable[Expr], ranges: Mapping[str, Expr]) -> Query:
        """A query for a group of claims over the same variables (`key` names the group): they
        share its z3 context, each with a fresh solver, when their terms fit its bit-vector width."""
        hint, ranges = list(hint), dict(ranges)
        pool = self.__dict__.setdefault("_shared_queries", {}).setdefault(key, [])
        for ranges_of, q in pool:
            if ranges_of == ranges and q.admits(hint):
                return q
        q = self.query(hint, ranges)
        pool.append((ranges, q))
        return q

    def concrete(self, e: Expr) -> int | None:
        return try_int(substitute(e, {k: const(v) for k, v in self.bind.items()}))

    def symbols_of(self, model: Mapping[str, int]) -> dict[str, int]:
        """The extent symbols of a counterexample (what size breaks the schedule)."""
        return {k: v for k, v in model.items() if k in self.fusion.symbols and k not in self.bind}


def is_tmem_op(op: Op) -> bool:
    return op.op_type in (LoadStoreOpType.TMemLoad, LoadStoreOpType.TMemStore)
