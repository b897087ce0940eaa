"""Shared-memory bank conflicts (a performance warning), proved absent over every
iteration or shown with the lanes that collide, the conflict's degree and a fix."""

from __future__ import annotations

from typing import Iterator

import z3

from ...model.expr import add, const, floordiv, mod, mul, substitute, var
from ...model.mma_op import is_wgmma_op
from ...model.types import LoadStoreOpType, MemoryType
from ..access import THREAD_VARS, AccessModel, build, executes
from ..analysis.bank_lanes import (
    BANKS, bank_fix, bank_lanes, byte_address, phase_lanes, why_swizzle_fails, worst_bank,
)
from ..context import VerifyContext
from ..diagnostics import Diagnostic
from ..findings import finding, report_outcome, when_clause
from ..registry import rule
from ..solver import Budget, Outcome, Verdict, units
from ..diagnostics import Severity

BANK_TIMEOUT_MS = 200  # a warning's proof per access, and the rule's whole budget of solving (readable
BANK_BUDGET_MS = 250  # counterexamples included): a verify stays under 0.5 s; what is left unproved is "not analysed"
MIN_PROOF_MS, MIN_READABLE_MS = 50, 20  # what an access's proof and its counterexample get once it is spent
MAX_ACCESS_BYTES = 16  # a thread's widest load or store

@rule("SMEM-BANK-CONFLICT", family="bank", severity=Severity.WARNING, premises=("LAUNCH-THREADS",))
def smem_bank_conflict(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Shared-memory accesses are free of bank conflicts (a warning).

    What it checks:
        For every plain shared-memory load or store, every iteration and every pair of
        lanes of one warp that the hardware serves in the same phase (the whole warp
        for 4-byte accesses, half-warps for 8, quarter-warps for 16): the two lanes do
        not touch different 4-byte words of the same bank (bank = word % 32). A proof z3
        does not finish in 0.2 s (0.25 s for all accesses together) is reported as "not
        analysed" (a warning, like a conflict). A conflict is reported with its degree
        (n-way: the most distinct words one bank serves to the counterexample's warp phase,
        counted from the address expressions at its iteration) and the lanes of that bank;
        a swizzle call of two of the tensor's loop axes is proposed when it removes the
        conflict at that iteration, and proved to remove it when the budget leaves time.
    Why the hardware needs it:
        Shared memory has 32 banks; two different words of one bank in one phase are
        served one after the other, so an n-way conflict makes the access n times
        slower. The result stays correct, hence a warning.
    Example:
        with tp.Fusion("column_read") as fusion:
            t0 = tp.make_contig_concrete_tensor([32, 32]); fusion.add_input(t0)
            t1 = tp.set(t0); t2 = tp.transpose(t1, 0, 1); fusion.add_output(t2)
        t1.set_memory_type(tp.MemoryType.Shared)
        t1.axis(1).parallelize(tp.ParallelType.TIDx)
        t2.axis(1).parallelize(tp.ParallelType.TIDx)
    Fix:
        with tp.Fusion("column_read") as fusion:
            t0 = tp.make_contig_concrete_tensor([32, 32]); fusion.add_input(t0)
            t1 = tp.set(t0); t2 = tp.transpose(t1, 0, 1); fusion.add_output(t2)
        t1.set_memory_type(tp.MemoryType.Shared)
        t1.swizzle(tp.SwizzleType.XOR, 0, 1)
        t1.axis(1).parallelize(tp.ParallelType.TIDx)
        t2.axis(1).parallelize(tp.ParallelType.TIDx)
    References:
        CUDA C++ Programming Guide, shared memory (32 banks of 4-byte words); phases measured with ncu on H200;
        docs/hardware.md#shared-memory-banks
    """
    # Formal statement: for every plain (Set) shared-memory access of constant width w bytes, with
    #   P = phase_lanes(w) (32 / 16 / 8 lanes for w <= 4 / 8 / 16) and W = max(w / 4, 1) words:
    #   for all admitted sizes, threads t, loop points s, lanes l < 32, k1, k2 < W, u = 32*(t/32) + l:
    #   executes(t, s) and executes(u, s) and l != t % 32 and (t % 32) / P == l / P
    #   => not (a1 % 32 == a2 % 32 and a1 != a2), a1 = addr(t, s)/4 + k1, a2 = addr(u, s)/4 + k2
    #   (addr: the byte offset of the vector's element 0; see _check)
    budget = Budget(units(BANK_BUDGET_MS))  # resource units, as every limit: the same warnings on any machine
    for acc in ctx.accesses_to(MemoryType.Shared):
        if acc.op.op_type is not LoadStoreOpType.Set or is_wgmma_op(acc.op):
            continue  # TMA, ldmatrix/stmatrix and cp.async have their own phase rules; wgmma reads by descriptor
        m = build(ctx, acc)
        width = m.num_regs * acc.tensor.dtype.bytes
        w = width.value if width.is_const else None
        if w is None or w > MAX_ACCESS_BYTES:
            continue  # no one access (VECTORIZE-WIDTH refuses it): no warp phase to count banks in
        yield from _check(ctx, m, w, min(BANK_TIMEOUT_MS, max(budget.left_ms, MIN_PROOF_MS)), budget)


def _prove_free(ctx: VerifyContext, m: AccessModel, width: int, timeout_ms: int,
                budget: Budget | None = None) -> Outcome:
    """Whether the access is free of bank conflicts, within `timeout_ms` of solving; its solves
    are charged to `budget`, whose rest shapes the counterexample."""
    # Formal statement: forall lanes l1 != l2 of one warp in one phase, iteration s, words k1, k2:
    #   executes(l1, s) and executes(l2, s) => not (word1 % 32 == word2 % 32 and word1 != word2)
    lanes = phase_lanes(width)
    words = max(width // 4, 1)
    tid = m.tid
    other = add(mul(floordiv(tid, 32), 32), var("other lane"))
    env = m.thread_env(other)
    addr = byte_address(ctx, m)
    addr2 = substitute(addr, env)
    word1 = add(floordiv(addr, 4), var("word 1"))
    word2 = add(floordiv(addr2, 4), var("word 2"))
    hint = m.hint_exprs(env) + [addr, addr2, word1, word2, other, mod(word1, BANKS), mod(word2, BANKS),
                             floordiv(mod(tid, 32), lanes), floordiv(var("other lane"), lanes)]
    ranges = {**m.ranges, "other lane": const(32), "word 1": const(words), "word 2": const(words)}
    q = ctx.query(hint, ranges, timeout_ms=timeout_ms)
    same_phase = q.eq(floordiv(mod(tid, 32), lanes), floordiv(var("other lane"), lanes))
    conflict = z3.And(  # the other lane is a launched thread (a block of 20 threads has no lane 22)
        executes(q, m), q.lt(other, m.block_threads), executes(q, m, env), q.ne(mod(tid, 32), var("other lane")),
        same_phase,
        q.eq(mod(word1, BANKS), mod(word2, BANKS)), q.ne(word1, word2),
    )
    out = q.prove(z3.Not(conflict), values={"lane": mod(tid, 32), "other": var("other lane"), "address": addr,
                                            "other address": addr2, "bank": mod(word1, BANKS), "thread": tid},
                  smallest=tid,  # a readable conflict within the rule's budget too
                  shrink_units=None if budget is None else max(units(MIN_READABLE_MS), budget.left))
    if budget is not None:
        budget.charge(q.used)
    return out


def _check(ctx: VerifyContext, m: AccessModel, width: int, timeout_ms: int, budget: Budget) -> Iterator[Diagnostic]:
    out = _prove_free(ctx, m, width, timeout_ms, budget)
    where = dict(tensor=m.acc.tensor.name, ids=[i.name for i in m.acc.consumer.loop], location=m.acc.op.origin)
    if out.status is Verdict.UNKNOWN:  # a performance warning gives up rather than hold up the verdict
        yield finding("SMEM-BANK-CONFLICT", f"the {m.describe} was not analysed for bank conflicts: z3 gave no "
                      f"answer within {timeout_ms / 1000:g} s ({out.reason or 'unknown'})",
                      hint="bind the symbolic sizes (verify(..., bind={...})) to analyse it", **where)
        return
    yield from report_outcome("SMEM-BANK-CONFLICT", out, f"that the {m.describe} is free of bank conflicts",
                              lambda out: _conflict(ctx, m, out, width, where, budget), **where)


def _conflict(ctx: VerifyContext, m: AccessModel, out: Outcome, width: int, where: dict,
              budget: Budget) -> Diagnostic:
    """The warning for a counterexample: the conflict's degree and the lanes of its bank, counted
    over the counterexample's warp phase and iteration (bank_lanes), why the tensor's swizzle
    does not separate them, and a swizzle call that does where one is found within the budget."""
    v, lanes = out.values, phase_lanes(width)
    loops = {k: val for k, val in out.model.items() if k in m.ranges and k not in THREAD_VARS}
    warp, first = v["thread"] // 32, v["lane"] // lanes * lanes
    phase = bank_lanes(m, byte_address(ctx, m), out.model, warp, first, lanes, width)
    bank, words = worst_bank(phase) if phase else (v["bank"], {})
    if len(words) < 2:  # not counted (a value the model left out): the solver's pair
        bank, words = v["bank"], {v["address"] // 4: [v["lane"]], v["other address"] // 4: [v["other"]]}
    degree = len(words)
    firsts = [lane_list[0] for _, lane_list in sorted(words.items())]
    (w1, l1), (w2, l2) = sorted((w, ls[0]) for w, ls in words.items())[:2]
    notes = [f"{width}-byte accesses are served {lanes} lanes at a time; a bank serves one 4-byte word per pass, "
             f"so lanes {first}-{first + lanes - 1} take {degree} passes here instead of 1"]
    if any(len(ls) > 1 for ls in words.values()):  # lanes on one word are served together (a broadcast)
        notes.append(f"bank {bank}: " + "; ".join(f"byte {4 * w} by lane{'s' if len(ls) > 1 else ''} {_listed(ls)}"
                                                  for w, ls in sorted(words.items())))
    try:  # the explanation and the fix are extras of a warning: their failure must not reject the schedule
        notes += why_swizzle_fails(ctx, m, out.model, warp, firsts)
        hint = bank_fix(ctx, m, out.model, warp, first, width, degree, firsts, budget, _prove_free)
    except Exception as e:  # noqa: BLE001
        hint = (f"give lanes {_listed(firsts)} words in different banks (no concrete change: the search for one "
                f"failed, a tileproof bug, please report: {type(e).__name__}: {e})")
    return finding(
        "SMEM-BANK-CONFLICT",
        f"the shared-memory {m.describe} has {degree}-way bank conflicts{when_clause(ctx.symbols_of(out.model))}: "
        f"lanes {_listed(firsts)} of warp {warp} "
        f"access {degree} different words of bank {bank} (bytes {_listed([4 * w for w in sorted(words)])})",
        notes=notes,
        counterexample={**ctx.symbols_of(out.model), **loops, "lane": l1, "other lane": l2, "byte address": 4 * w1,
                        "other byte address": 4 * w2, "bank": bank, "conflict degree": degree},
        hint=hint,
        **where,
    )


def _listed(xs) -> str:
    """`0, 8, 16 and 24`; a longer even progression as `0, 128, ..., 3968` (`0-31` when the step is 1)."""
    xs = list(xs)
    steps = {b - a for a, b in zip(xs, xs[1:])}
    if len(xs) > 4 and len(steps) == 1:
        return f"{xs[0]}-{xs[-1]}" if steps == {1} else f"{xs[0]}, {xs[1]}, ..., {xs[-1]}"
    return str(xs[0]) if len(xs) == 1 else f"{', '.join(map(str, xs[:-1]))} and {xs[-1]}"
