"""Each TMA instruction as the solver sees it: the TMA's access model (ranges, active threads)
and its issue functions (execution/tma_issue.py build_issue: coordinates, shared addresses,
swizzle), built once per verify for every TMA whose tile has a place in shared memory. Shared by
the TMA shared-memory rules (verifier/rules/tma_smem.py) and CLUSTER-MULTICAST
(verifier/rules/cluster.py), which proves a multicast box against the issuer's.

May import model/, execution/, hw/ and verifier's access.py, context.py and solver.py; never
verifier/rules/.
"""

from __future__ import annotations

import z3

from ...execution.tma_issue import TmaIssue, build_issue, hw_swizzle
from ...hw.tma import InferredTma
from ...model.expr import Expr, add
from ...model.types import Direction, IterType, MemoryType, ParallelType
from ..access import AccessModel, active, build
from ..context import Access, VerifyContext
from ..solver import Outcome
from .tma import inferred_tmas


class Issue:
    """A TMA with its access model (ranges, active threads) and its issue functions."""

    def __init__(self, ctx: VerifyContext, tma: InferredTma):
        self.info = info = tma.info
        # a TMA load stores into the shared tensor, a TMA store loads from it
        acc = (Access(tma.op, Direction.STORE, info.smem, info.smem, -1) if info.direction is Direction.LOAD
               else Access(tma.op, Direction.LOAD, info.smem, info.consumer, 0))
        self.m: AccessModel = build(ctx, acc)
        self.alloc = ctx.allocations[info.smem.name]
        self.t: TmaIssue = build_issue(tma, self.alloc)
        self.unswizzled, self.tile_start = self.t.unswizzled, self.t.tile_start  # computed once: the claims share them
        self.hw_address = hw_swizzle(add(self.tile_start, self.t.hw_offset), info.swizzle_bytes)
        self._exprs: list[Expr] | None = None
        self.where = dict(tensor=info.smem.name, ids=[a.id.name for a in self.alloc.allocated()],
                          location=info.smem.origin or tma.op.origin)

    def exprs(self) -> list[Expr]:
        if self._exprs is None:
            t = self.t
            self._exprs = ([t.smem_offset, self.unswizzled, self.tile_start, t.hw_offset,
                            add(self.tile_start, t.hw_offset), self.hw_address, t.footprint, t.row_pitch,
                            self.alloc.bytes_expr] + list(t.tile_coords) + list(t.box_origin)
                           + [d.tile_expr for d in self.info.dims] + [b.value for b in t.issue_bounds]
                           + [b.extent for b in t.issue_bounds] + self.m.hint_exprs())
        return self._exprs

    def issued(self, q) -> z3.BoolRef:
        """The copy is issued at this point: the thread takes part and no coordinate is a hole."""
        bounds = [q.lt(b.value, b.extent) for b in self.t.issue_bounds]
        return z3.And(active(q, self.m), *bounds)

    def in_tile(self, q) -> z3.BoolRef:
        return z3.And(*[q.lt(c, d.tile_expr) for c, d in zip(self.t.tile_coords, self.info.dims)])

    def prove(self, ctx: VerifyContext, claim, extra: list[Expr], values: dict[str, Expr], tile=True,
              smallest: Expr | None = None) -> Outcome:
        # the claims about one copy share a query: same variables, ranges and terms
        def claimed(q):
            cond = z3.And(self.issued(q), self.in_tile(q)) if tile else self.issued(q)
            return z3.Implies(cond, claim(q))

        # the shared query is over bit-vectors (the swizzle's XOR); the claim alone may have none (or one the
        # ranges simplify away), and then the integers decide it first: a tile start over symbolic tile counts
        # took z3 9 s over bit-vectors and 0.01 s over the integers (fuzz seed 64 case 1464)
        mine = extra + list(values.values()) + [b for i in self.t.issue_bounds for b in (i.value, i.extent)]
        if tile:
            mine += list(self.t.tile_coords) + [d.tile_expr for d in self.info.dims]
        # the access's sizing hints may hold the swizzle's XOR where the claim does not: only its others go
        mine += [h for h in self.m.hint_exprs() if not h.has_op("xor")]
        out = ctx.proof_over_integers_first(mine, self.m.ranges, claimed, values=values, smallest=smallest)
        if out is not None:
            return out
        q = ctx.shared_query(("tma-issue", id(self)), self.exprs() + extra + list(values.values()), self.m.ranges)
        out = q.prove(claimed(q), values=values, smallest=smallest)
        return ctx.retried_over_integers(out, mine, self.m.ranges, claimed, values=values, smallest=smallest)

    def tile_values(self) -> dict[str, Expr]:
        return {f"tile coordinate {k}": c for k, c in enumerate(self.t.tile_coords)}


def tma_issues(ctx: VerifyContext) -> list[Issue]:
    """The Issue of every inferred TMA whose tile has a place in shared memory (once per verify)."""
    return ctx.memo(("tma-issues",), lambda: [Issue(ctx, t) for t in inferred_tmas(ctx)
                                              if t.info.ok and not _unindexed(ctx, t)])


def _unindexed(ctx: VerifyContext, tma: InferredTma) -> bool:
    """No tile to place: not inferred, tile and non-tile IDs mixed (TMA-MIXED-TRANSFORM), or a
    vectorized or broadcast tile ID (TMA-BULK-PLACEMENT: the loop is no TMA's)."""
    misplaced = any(i.parallel_type is ParallelType.Vectorize
                    or (i.parallel_type is ParallelType.Bulk and i.iter_type is not IterType.Iteration)
                    for i in tma.info.consumer.loop)
    return (tma.info.smem.memory_type is not MemoryType.Shared or not tma.info.dims or tma.mixes_tile
            or misplaced)
