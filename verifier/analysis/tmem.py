"""Tensor-memory accesses as the TMEM rules (verifier/rules/tmem.py) prove them and the code
generator (codegen/lower/tmem.py) lowers them: each access model with its tensor-memory lane and
column, whether whole warps execute it, and the tcgen05 pattern it matches. Proved over every
thread of the block (linear id x + y*bdx + z*bdx*bdy), every loop point and every register;
each question is decided once per access."""

from __future__ import annotations

import z3

from ...model.expr import add, const, floordiv, mod, mul, substitute, var
from ...model.indexing import linear_offset
from ...model.tcgen05 import TmemPattern, pattern_offset
from ..access import AccessModel, active, build, executes
from ..context import VerifyContext
from ..solver import Outcome


def access_models(ctx: VerifyContext) -> list[AccessModel]:
    """Every access to a tensor-memory tensor, with its lane and column (none without tensor memory)."""
    if not ctx.target.has_tmem:
        return []
    return ctx.memo(("tmem-models",), lambda: [with_lanes_and_columns(ctx, build(ctx, a)) for a in ctx.tmem_accesses])


def with_lanes_and_columns(ctx: VerifyContext, m: AccessModel) -> AccessModel:
    """m with addresses "lane" and "column": the accessed tensor's allocation offsets on its lane
    and column sides."""
    alloc = ctx.allocations[m.acc.tensor.name]
    m.addresses["lane"] = linear_offset(alloc.strides("lane"), m.indices)
    m.addresses["column"] = linear_offset(alloc.strides("column"), m.indices)
    return m


def collective(ctx: VerifyContext, m: AccessModel) -> Outcome:
    """Whether whole warps execute the access (proved: a thread executes it only if all 32 lanes of its warp do)."""
    return ctx.memo(("tmem-collective", id(m)), lambda: _prove_collective(ctx, m))


def _prove_collective(ctx: VerifyContext, m: AccessModel) -> Outcome:
    # Formal statement: forall t, l < 32: active(t) => (32*(t/32) + l < B and active(32*(t/32) + l))
    other = var("other lane")
    tid = m.tid
    mate = add(mul(floordiv(tid, 32), 32), other)
    env = m.thread_env(mate)
    q = ctx.query(m.hint_exprs(env) + [mate], {**m.ranges, "other lane": const(32)})
    claim = z3.Implies(active(q, m), z3.And(q.lt(mate, m.block_threads), active(q, m, env)))
    return q.prove(claim, values={"thread": tid, "warp": floordiv(tid, 32), "mate": mate, "B": m.block_threads},
                   smallest=tid)


def matching_pattern(ctx: VerifyContext, m: AccessModel) -> tuple[TmemPattern | None, dict]:
    """(the first tcgen05 pattern the access is proved to match or None, the outcome per pattern tried)."""
    return ctx.memo(("tmem-pattern", id(m)), lambda: _find_pattern(ctx, m))


def _find_pattern(ctx: VerifyContext, m: AccessModel) -> tuple[TmemPattern | None, dict]:
    outcomes = {}
    for p in TmemPattern:
        out = _pattern_outcome(ctx, m, p)
        outcomes[p] = out
        if out is not None and out.proved:
            return p, outcomes
    return None, outcomes


def _pattern_outcome(ctx: VerifyContext, m: AccessModel, p: TmemPattern) -> Outcome | None:
    # Formal statement: forall t, s, r: executes(t, s, r) =>
    #   (lane, col)(t, s, r) == (lane, col)(32*(t/32), s, 0) + offset_p(t % 32, r)
    tid = m.tid
    lane_in_warp = mod(tid, 32)
    n = m.num_regs.value if m.num_regs.is_const else None
    if n is None or n % p.registers_per_repetition:
        return None
    dl, dc = pattern_offset(p, lane_in_warp, m.reg, n)
    base = m.warp_base_env()
    want_lane, want_col = add(substitute(m.addresses['lane'], base), dl), add(substitute(m.addresses['column'], base), dc)
    q = ctx.query(m.hint_exprs() + [want_lane, want_col], m.ranges)
    claim = z3.Implies(executes(q, m), z3.And(q.eq(m.addresses['lane'], want_lane), q.eq(m.addresses['column'], want_col)))
    return q.prove(claim, values={"thread": tid, "warp": floordiv(tid, 32), "lane": m.addresses['lane'], "column": m.addresses['column'],
                                  "expected lane": want_lane, "expected column": want_col, "register": m.reg},
                   smallest=tid if p is TmemPattern.P32x32b else None)  # only 32x32b's witness is the headline
