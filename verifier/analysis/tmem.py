"""Tensor-memory accesses as the TMEM rules (verifier/rules/tmem.py) prove them: each access
model (execution/accesses.py, with its tensor-memory lane and column), whether whole warps
execute it, whether each thread's elements fill whole 32-bit registers, and the tcgen05 pattern
it matches. Proved over every thread of the block (linear id x + y*bdx + z*bdx*bdy), every loop
point and every register; each question is decided once per access. `tcgen05_shape` is what
verify records for the code generator (codegen/lower/tmem.py lowers the access to that pattern)."""

from __future__ import annotations

import itertools

import z3

from ...model.errors import InternalError
from ...model.expr import Expr, add, const, floordiv, mod, mul, substitute, var
from ...execution.accesses import packing, registers, tmem_access_models
from ...hw.tcgen05 import WORD_BYTES, TmemPattern, pattern_offset
from ...model.types import BLOCK_TYPES
from ..access import THREAD_VARS, AccessModel, active, executes, var_name
from ..context import VerifyContext
from ..solver import Outcome, Verdict
from ...hw.threads import WARP

BLOCK_VARS = tuple(p.cuda_name for p in BLOCK_TYPES)
WORD_VAR = "word"  # which 32-bit half of a 64-bit element


def access_models(ctx: VerifyContext) -> list[AccessModel]:
    """Every access to a tensor-memory tensor, with its lane and column (none without tensor memory)."""
    if not ctx.target.has_tmem:
        return []
    return ctx.memo(("tmem-models",), lambda: tmem_access_models(ctx.fusion, ctx.block_dims, ctx.thread_dims,
                                                                 ctx.allocations))


def tcgen05_shape(ctx: VerifyContext, m: AccessModel) -> TmemPattern | None:
    """The tcgen05 pattern the access is lowered to: the first one it is proved to match, where
    whole warps execute it and each thread's elements fill whole registers; None otherwise."""
    pattern, _ = matching_pattern(ctx, m)
    if pattern is None or not collective(ctx, m).proved or not packed(ctx, m).proved:
        return None
    return pattern


def collective(ctx: VerifyContext, m: AccessModel) -> Outcome:
    """Whether whole warps execute the access (proved: a thread executes it only if all 32 lanes of its warp do)."""
    return ctx.memo(("tmem-collective", id(m)), lambda: _prove_collective(ctx, m))


def _prove_collective(ctx: VerifyContext, m: AccessModel) -> Outcome:
    """Decided over the sizes alone where the active threads form a box (every activity condition
    bounds one thread index, or a block index, which is the same in a warp): per thread, z3 would
    divide sums of products of symbolic block sizes (minutes). A size with a partial warp is then
    handed to the per-thread proof, with the sizes fixed, for the witness thread."""
    box = _active_box(m)
    if box is None:
        return _prove_collective_per_thread(ctx, m)
    whole = _prove_whole_warps(ctx, m, box)
    if whole.status is not Verdict.COUNTEREXAMPLE:
        return whole
    sizes = {k: v for k, v in whole.model.items() if k not in m.ranges}
    witness = _prove_collective_per_thread(ctx, m, sizes)
    if witness.proved:
        raise InternalError(f"TMEM-WARP-COLLECTIVE: the {m.describe} has a partial warp at {sizes} by the box "
                            f"decision but none per thread")
    return witness


def _prove_collective_per_thread(ctx: VerifyContext, m: AccessModel, sizes: dict[str, int] | None = None) -> Outcome:
    # Formal statement: forall t, l < 32: active(t) => (32*(t/32) + l < B and active(32*(t/32) + l))
    other = var("other lane")
    tid = m.tid
    mate = add(mul(floordiv(tid, WARP), WARP), other)
    env = m.thread_env(mate)
    q = ctx.query(m.hint_exprs(env) + [mate], {**m.ranges, "other lane": const(WARP)})
    for name, value in (sizes or {}).items():
        q.add(q.eq(var(name), const(value)))
    claim = z3.Implies(active(q, m), z3.And(q.lt(mate, m.block_threads), active(q, m, env)))
    return q.prove(claim, values={"thread": tid, "warp": floordiv(tid, WARP), "mate": mate, "B": m.block_threads},
                   smallest=tid)


def _active_box(m: AccessModel) -> list[list[Expr]] | None:
    """The extents bounding threadIdx.x, .y, .z where the active threads are a box (conditions
    `threadIdx.v < extent` with extents over sizes; block-index conditions are warp-uniform);
    None for any other condition."""
    box: list[list[Expr]] = [[], [], []]
    for index, extent in m.active:
        name = index.value if index.op == "var" else None
        if extent.free_vars() & set(m.ranges):
            return None
        if name in THREAD_VARS:
            box[THREAD_VARS.index(name)].append(extent)
        elif name not in BLOCK_VARS:
            return None
    return box


def _prove_whole_warps(ctx: VerifyContext, m: AccessModel, box: list[list[Expr]]) -> Outcome:
    # Formal statement: for all admitted sizes, with a_d = min(b_d, extents bounding threadIdx.d) and the
    #   threads linearised x + bx*y + bx*by*z, the active box splits into whole warps:
    #   a_x < bx: a_x % 32 == 0 and (a_y == 1 or bx % 32 == 0) and (a_z == 1 or bx*by % 32 == 0)
    #   a_x == bx, a_y < by: bx*a_y % 32 == 0 and (a_z == 1 or bx*by % 32 == 0)
    #   a_x == bx, a_y == by: bx*by*a_z % 32 == 0
    # (each run of active x, [r*bx, r*bx + a_x), is followed by an inactive thread, so it starts and
    # ends on a warp boundary: the per-thread statement, for box-shaped activity)
    bx, by, _ = m.dims
    counts = [[b] + extents for b, extents in zip(m.dims, box)]  # a_d is one of these
    products = [mul(bx, a) for a in counts[1]] + [mul(bx, by, a) for a in counts[2]]
    q = ctx.query([a for c in counts for a in c] + products + [mul(bx, by), const(WARP)])

    def warps(e: Expr):
        return q.eq(mod(e, const(WARP)), const(0))

    def one(e: Expr):
        return q.eq(e, const(1))

    claims = []
    for (when_x, ax, x_cut), (when_y, ay, y_cut), (when_z, az, _) in itertools.product(
            *[_active_counts(q, c) for c in counts]):
        rows_apart = z3.Or(one(az), warps(mul(bx, by)))
        if x_cut:
            whole = z3.And(warps(ax), z3.Or(one(ay), warps(bx)), rows_apart)
        elif y_cut:
            whole = z3.And(warps(mul(bx, ay)), rows_apart)
        else:
            whole = warps(mul(bx, by, az))
        claims.append(z3.Implies(z3.And(when_x, when_y, when_z), whole))
    return q.prove(z3.And(*claims))


def _active_counts(q, counts: list[Expr]) -> list[tuple]:
    """How many indices of one thread dimension are active: (the sizes where it is counts[k],
    counts[k], whether that is fewer than the dimension counts[0]) for each k; the first of equal
    smallest counts is taken, so that the cases are exhaustive and disjoint."""
    out = []
    for k, a in enumerate(counts):
        smallest = [q.lt(a, x) for x in counts[:k]] + [q.le(a, x) for x in counts[k + 1:]]
        out.append((z3.And(*smallest, q.ctx) if smallest else z3.BoolVal(True, q.ctx), a, k > 0))
    return out


def packed(ctx: VerifyContext, m: AccessModel) -> Outcome:
    """Whether each thread's elements of one instruction fill whole 32-bit registers."""
    return ctx.memo(("tmem-packed", id(m)), lambda: _prove_packed(ctx, m))


def _prove_packed(ctx: VerifyContext, m: AccessModel) -> Outcome:
    # Formal statement: forall admitted sizes, t, loop points s: executes(t, s, 0) => n(s) * b % 4 == 0
    #   (n: the elements of the Vectorize'd IDs, b: the element bytes)
    pk = packing(m)
    first = {var_name(m.acc, i): const(0) for i in m.vector_ids}  # the thread's first element
    column = substitute(m.addresses["column"], first)
    moved = mul(m.num_regs, pk.element_bytes)
    q = ctx.query(m.hint_exprs() + [moved, column, const(WORD_BYTES)], m.ranges)
    claim = z3.Implies(executes(q, m, first), q.eq(mod(moved, const(WORD_BYTES)), const(0)))
    return q.prove(claim, values={"thread": m.tid, "elements": m.num_regs, "bytes": moved, "lane": substitute(
        m.addresses["lane"], first), "column": pk.word(column), "byte": pk.byte(column)}, smallest=m.tid)


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
    # Formal statement: with R(r) = word(r) + h the register of word h < words of element r, and
    #   word / byte the packing of model/tcgen05.py (32-bit elements: word(c) = c, byte(c) = 0):
    #   forall t, s, r, h: executes(t, s, r) =>
    #   lane(t, s, r) == lane(32*(t/32), s, 0) + dl_p(t % 32, R(r)) and
    #   word(col(t, s, r)) + h == word(col(32*(t/32), s, 0)) + dc_p(t % 32, R(r), n) and
    #   byte(col(t, s, r)) == byte(r) and byte(col(32*(t/32), s, 0)) == 0
    regs = registers(m)
    if regs is None or regs % p.registers_per_repetition:
        return None
    pk = packing(m)
    tid = m.tid
    lane, column = m.addresses["lane"], m.addresses["column"]
    half, ranges = (var(WORD_VAR), {**m.ranges, WORD_VAR: const(pk.words)}) if pk.words > 1 else (const(0), m.ranges)
    reg = add(pk.word(m.reg), half)
    dl, dc = pattern_offset(p, mod(tid, WARP), reg, regs)
    base = m.warp_base_env()
    base_column = substitute(column, base)
    want_lane, want_word = add(substitute(lane, base), dl), add(pk.word(base_column), dc)
    word, byte, want_byte, base_byte = add(pk.word(column), half), pk.byte(column), pk.byte(m.reg), pk.byte(base_column)
    q = ctx.query(m.hint_exprs() + [want_lane, want_word, word, byte, want_byte, base_byte], ranges)
    claim = z3.Implies(executes(q, m), z3.And(q.eq(lane, want_lane), q.eq(word, want_word), q.eq(byte, want_byte),
                                              q.eq(base_byte, const(0))))
    values = {"thread": tid, "warp": floordiv(tid, WARP), "lane": lane, "column": word, "expected lane": want_lane,
              "expected column": want_word, "register": reg, "element": m.reg}
    if pk.per_word > 1:
        values.update({"byte": byte, "expected byte": want_byte, "first byte": base_byte})
    return q.prove(claim, values=values,
                   smallest=tid if p is TmemPattern.P32x32b else None)  # only 32x32b's witness is the headline
