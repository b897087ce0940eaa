"""Where a tensor-memory access runs at the holes of an indivisible split. A tcgen05.ld/st is
.sync.aligned: nvFuser (csrc/predicate_compute.cpp, isLdStTMem) issues it with the thread
and block extents as its only predicate, so every warp of the issuing tensor's active threads
runs it at every loop point, holes included, and the code generator does the same
(codegen/lower/tmem.py): only the data around it is predicated (a store's register reads, a
load's write-back). That is safe when, at every point the instruction runs:

    inside     each thread's (lane, 32-bit column), the one tcgen05 puts its register at
               (the warp's base address plus the proved pattern's offset, as the code
               generator issues it), lies in the warp's sub-partition and in the tensor's own
               columns (Allocation.columns_allocated columns, what tcgen05.alloc gives a
               tensor alone in its region: the rounding up to a power of two covers the holes;
               exactly its columns in a region it shares, fusion.manage("tmem_regions"), where
               the next tensor's columns follow: execution/tmem_regions.py window)
    no clobber (stores) no cell written at a hole is a cell a valid element of the same
               allocation instance (block, loop iteration left of the compute-at position)
               is written to, so the garbage a hole writes never replaces a value

A load needs only `inside`: what it reads at a hole never leaves the registers it lands in
(the write-back is predicated by the holes). SPLIT-DIVISIBILITY (verifier/rules/divisibility.py)
excuses a split in a tensor-memory schedule that need not divide where these hold.
"""

from __future__ import annotations

import z3

from ...execution.accesses import packing, registers
from ...execution.tmem_regions import region_of
from ...hw.tcgen05 import pattern_offset
from ...hw.threads import WARP
from ...model.expr import Expr, add, const, floordiv, mod, substitute, var
from ...model.types import BLOCK_TYPES, THREAD_TYPES, Direction
from ..access import AccessModel, active, executes, var_name
from ..context import VerifyContext
from ..solver import Outcome
from .tmem import WORD_VAR, tcgen05_shape

BLOCK_VARS = frozenset(p.cuda_name for p in BLOCK_TYPES)
OTHER = "valid "  # the variables of the valid element a hole's store is compared with


def holes_inside(ctx: VerifyContext, m: AccessModel) -> Outcome | None:
    """Whether the access, run at its holes too, stays inside its tensor's allocation and (a
    store) writes no valid element's cell; None where it has no proved tcgen05 pattern (the
    TMEM rules report why), so where a hole lands is not known."""
    return ctx.memo(("tmem-holes", id(m)), lambda: _prove_inside(ctx, m))


def _prove_inside(ctx: VerifyContext, m: AccessModel) -> Outcome | None:
    # Formal statement: for the pattern p the access is lowered to (tcgen05_shape), R registers per
    #   instruction, element r's words h (word(r) + h its register), the cell the hardware moves
    #   hw(t, s, r, h) = (lane(base(t, s)) + dl_p(t % 32, word(r) + h),
    #                     word(column(base(t, s))) + dc_p(t % 32, word(r) + h, R))
    #   (base: the warp's first thread at element 0), for all admitted sizes, threads t, points s, r, h:
    #   inside:    active(t, s) => hw_lane / 32 == (t / 32) % 4 and hw_word < C
    #   no clobber (stores): for t', s', r', h' with s' in the allocation instance of s:
    #              active(t, s) and not valid(t, s, r) and executes(t', s', r')
    #              => hw(t, s, r, h) != (lane, word(column) + h')(t', s', r')
    #   (C: the tensor's columns in its region (execution/tmem_regions.py window): columns_allocated
    #   when alone, or its columns where symbolic; exactly its columns in a region it shares)
    pattern = tcgen05_shape(ctx, m)
    if pattern is None:
        return None
    pk = packing(m)
    words = {WORD_VAR: const(pk.words)} if pk.words > 1 else {}
    half = var(WORD_VAR) if words else const(0)
    tid, warp = m.tid, floordiv(m.tid, WARP)
    dl, dc = pattern_offset(pattern, mod(tid, WARP), add(pk.word(m.reg), half), registers(m))
    base = m.warp_base_env()
    lane = add(substitute(m.addresses["lane"], base), dl)
    word = add(pk.word(substitute(m.addresses["column"], base)), dc)
    columns = region_of(ctx.fusion, m.acc.tensor.name).window(m.acc.tensor.name)
    ranges = {**m.ranges, **words}
    values = {"thread": tid, "warp": warp, "lane": lane, "column": word, "columns": columns}
    hint = m.hint_exprs() + [lane, word, columns, mod(warp, 4)]
    if m.acc.direction is Direction.STORE:
        rename = _renamed(m, ranges)
        env = {k: var(v) for k, v in rename.items()}
        other_lane = substitute(m.addresses["lane"], env)
        other_word = add(pk.word(substitute(m.addresses["column"], env)), substitute(half, env))
        ranges.update({rename[k]: substitute(b, env) for k, b in ranges.items() if k in rename})
        hint += m.hint_exprs(env) + [other_lane, other_word]
        values.update({"valid lane": other_lane, "valid column": other_word})
    q = ctx.query(hint, ranges)
    claim = z3.And(q.eq(floordiv(lane, const(32)), mod(warp, 4)), q.lt(word, columns))
    if m.acc.direction is Direction.STORE:
        hole = z3.And(active(q, m), z3.Not(executes(q, m)))
        same = z3.And(q.eq(lane, other_lane), q.eq(word, other_word))
        claim = z3.And(claim, z3.Not(z3.And(hole, executes(q, m, env), same)))
    return q.prove(z3.Implies(active(q, m), claim), values=values, smallest=tid)


def _renamed(m: AccessModel, ranges: dict[str, Expr]) -> dict[str, str]:
    """Each variable of a point that may differ between a hole and the valid element it is
    compared with (threads, loops inside one allocation instance) -> its name for the latter; the
    block indices and the issuing tensor's loops left of its compute-at position (one instance
    each) stay shared."""
    c = m.acc.consumer
    instance = {var_name(m.acc, i) for k, i in enumerate(c.loop)
                if k < c.compute_at and i.parallel_type not in THREAD_TYPES + BLOCK_TYPES}
    return {k: OTHER + k for k in ranges if k not in BLOCK_VARS and k not in instance}
