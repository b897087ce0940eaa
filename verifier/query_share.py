"""What the z3 queries of one verify share (verifier/solver.py's Query; VerifyContext holds one
QueryShare): what each would otherwise build the same, again and again.

- per set of ranges: the range analysis (model/simplify.py's Simplifier, which the ranges alone
  decide) and the spans of subterms the query's theory and width are chosen from;
- per z3 context, theory and width: the variables and constants;
- per z3 context, theory, width, symbols and ranges: the rendered terms (a Rendering), the
  facts of the symbols and ranges, and those of each assumption;
- per z3 context: the tactic each solver is made from.

Never a solver or an assertion: each query keeps its own facts and makes its own solvers, so no
query sees another's. Nothing outlives the verify (its VerifyContext).

May import model/ and z3; never the rest of verifier/ (solver.py imports it).
"""

from __future__ import annotations

from typing import Mapping

import z3

from ..model.expr import Expr
from ..model.simplify import Simplifier

Span = tuple["int | None", "int | None"]  # the smallest and the largest value, None: unknown


class Rendering:
    """What a query builds in z3 before its claims: the variables (every one with a range, in
    the order the facts name them), the rendered terms and the facts of its symbols, ranges and
    assumptions."""

    def __init__(self, atoms: "tuple[dict, dict]"):
        self.order: tuple[str, ...] | None = None  # the variables, once named
        self.terms: dict[Expr, z3.ExprRef] = {}
        # the variables and constants, shared wider: by every query of the context, theory and width
        self.vars, self.vals = atoms
        # the rendered Exprs, and the addresses of their z3 terms, with no division or remainder by
        # a non-constant: the search for symbolic divisions (Query._symbolic_divisions) need not
        # enter them (the terms stay alive in `terms`, so an address stays theirs)
        self.undivided_exprs: set[Expr] = set()
        self.undivided: set[int] = set()
        self.facts: list | None = None  # those of the symbols and ranges, made when a solver needs them
        self.assumed: dict = {}  # sympy assumption -> its z3 fact


class QueryShare:
    """The shared part of one verify's queries (module docstring); a Query without one gets its
    own."""

    def __init__(self):
        self._analyses: dict = {}
        self._atoms: dict = {}
        self._renderings: dict = {}
        self._tactics: dict = {}

    def range_analysis(self, ranges: Mapping, steps: Mapping[str, int] | None = None) -> tuple[Simplifier, dict[Expr, Span]]:
        """The simplifier over `ranges` (and the symbols' `steps`) and its memo of subterm spans."""
        key = (frozenset(ranges.items()), frozenset((steps or {}).items()))
        got = self._analyses.get(key)
        if got is None:
            got = self._analyses[key] = (Simplifier(dict(ranges), steps), {})
        return got

    def rendering(self, ctx: z3.Context, bv: bool, width: int, key: tuple) -> Rendering:
        """The Rendering of the queries in `ctx` over bit-vectors of `width` (bv) or the
        integers whose symbols, ranges and simplification `key` names."""
        got = self._renderings.get((ctx, bv, width, key))
        if got is None:
            atoms = self._atoms.setdefault((ctx, bv, width), ({}, {}))
            got = self._renderings[(ctx, bv, width, key)] = Rendering(atoms)
        return got

    def tactic(self, ctx: z3.Context) -> z3.Tactic:
        """simplify, then the SMT core: every solver of a query is made from it (each fresh)."""
        got = self._tactics.get(ctx)
        if got is None:
            got = self._tactics[ctx] = z3.Then("simplify", "smt", ctx=ctx)
        return got
