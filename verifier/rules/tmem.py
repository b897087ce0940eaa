"""Tensor memory: target support, warp-collective access, whole 32-bit registers (8-, 16- and
64-bit elements packed), tcgen05 patterns, warp -> sub-partition mapping, vector widths.
Proved over every thread of the block (linear id x + y*bdx + z*bdx*bdy), every loop point and
every register; the access models and the warp-collective, packing and pattern proofs are
verifier/analysis/tmem.py, shared with the code generator."""

from __future__ import annotations

import copy
import math
from typing import Iterator

import z3

from ...model.expr import Expr, const, floordiv, mod, try_int
from ...model.types import Direction, MemoryType, ParallelType
from ..access import THREAD_VARS, AccessModel, executes
from ..analysis.tmem import access_models, collective, matching_pattern, packed, packing, registers
from ..causes import fix_holds
from ..context import VerifyContext
from ..diagnostics import Diagnostic
from ..findings import finding, report_outcome, undecided
from ..registry import RULES, rule
from ..solver import Outcome, Verdict


def _where(m: AccessModel) -> dict:
    ids = [i.name for i in m.acc.consumer.loop]
    return dict(tensor=m.acc.consumer.name, ids=ids, location=m.acc.op.origin,
                labels=[f"tensor memory {m.acc.tensor.name} created at {m.acc.tensor.origin}"])


def _thread_values(m: AccessModel, model: dict[str, int]) -> dict[str, int]:
    """threadIdx values of the witness, for the thread dimensions the block has."""
    return {k: model[k] for k, d in zip(THREAD_VARS, m.dims) if k in model and d != const(1)}


def _loop_values(m: AccessModel, model: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in model.items() if k in m.ranges and k not in THREAD_VARS}


@rule("TARGET-TMEM", family="tmem")
def target_tmem(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Tensor memory is only used on a target that has it.

    What it checks:
        A tensor with memory type Tensor is verified for a target with tensor memory
        (sm_100a). Hopper (sm_90a) has none.
    Why the hardware needs it:
        tcgen05 instructions do not exist before Blackwell; ptxas rejects
        tcgen05.alloc for sm_90a.
    Example:
        target = "sm_90a"
        fusion, t0, t1, t2, t3 = tmem_copy("tmem", [128, 4])
        for t in (t1, t2, t3):
            t.axis(0).parallelize(tp.ParallelType.TIDx)
    Fix:
        target = "sm_100a"
        fusion, t0, t1, t2, t3 = tmem_copy("tmem", [128, 4])
        for t in (t1, t2, t3):
            t.axis(0).parallelize(tp.ParallelType.TIDx)
    References:
        PTX ISA 9.7.16 (tcgen05: sm_100a and later); docs/hardware.md#instructions-per-target
    """
    # Formal statement: none, structural: the target has tensor memory, or no computed tensor is in tensor memory
    if ctx.target.has_tmem:
        return
    for t in ctx.tensors_in(MemoryType.Tensor):
        yield finding(
            "TARGET-TMEM",
            f"{t.name} is in tensor memory, which {ctx.target.name} does not have",
            tensor=t.name, location=t.origin,
            counterexample={"tensor-memory lanes on target": ctx.target.tmem_lanes},
            hint="verify for target sm_100a, or keep the tensor in shared memory or registers on Hopper",
        )


@rule("TMEM-WARP-COLLECTIVE", family="tmem")
def tmem_warp_collective(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Tensor-memory loads and stores are executed by whole warps.

    What it checks:
        For every thread that executes a tcgen05 ld/st (its TID indices are within
        the issuing tensor's parallel extents), every thread of its warp exists in
        the block and executes it too. Threads are linearised x + y*bdx + z*bdx*bdy.
    Why the hardware needs it:
        tcgen05.ld/st are .sync.aligned warp instructions: all 32 threads of the warp
        must execute the same instruction; a partial warp is undefined behaviour.
    Example:
        target = "sm_100a"
        fusion, t0, t1, t2, t3 = tmem_copy("tmem", [16, 2])
        for t in (t1, t2, t3):
            t.axis(0).parallelize(tp.ParallelType.TIDx)  # 16 lanes: half a warp
    Fix:
        target = "sm_100a"
        fusion, t0, t1, t2, t3 = tmem_copy("tmem", [32, 2])
        for t in (t1, t2, t3):
            t.axis(0).parallelize(tp.ParallelType.TIDx)  # 32 lanes: a whole warp
    References:
        PTX ISA 9.7.16.8.3 (tcgen05.ld .sync.aligned); nvFuser PR #4070;
        docs/hardware.md#tensor-memory-load-and-store-shapes
    """
    # Formal statement: for every tcgen05 ld/st, for all admitted sizes, threads t, lanes l < 32:
    #   active(t) => 32*(t/32) + l < B and active(32*(t/32) + l)
    #   (active: TID indices within the issuing tensor's extents; B = bdx*bdy*bdz; analysis/tmem.py)
    for m in access_models(ctx):
        out = collective(ctx, m)
        yield from report_outcome("TMEM-WARP-COLLECTIVE", out, f"that the {m.describe} is warp-collective",
                                  lambda out: _not_collective(ctx, m, out), **_where(m))


def _not_collective(ctx: VerifyContext, m: AccessModel, out: Outcome) -> Diagnostic:
    v = out.values
    missing = (f"thread {v['mate']} does not exist (the block has {v['B']} threads)" if v["mate"] >= v["B"]
               else f"thread {v['mate']} does not execute it")
    return finding(
        "TMEM-WARP-COLLECTIVE",
        f"the {m.describe} is not warp-collective: thread {v['thread']} of warp {v['warp']} executes it "
        f"but {missing}",
        notes=[f"{m.acc.consumer.name} issues it over {', '.join(i.label() for i in m.acc.consumer.loop)}",
               f"threads per block: {' x '.join(str(d) for d in m.dims)}"],
        counterexample={**ctx.symbols_of(out.model), **_thread_values(m, out.model), "thread": v["thread"],
                        "warp": v["warp"], "missing thread": v["mate"]},
        hint="make the innermost thread extent a multiple of 32 (and every outer TID stride a multiple of 32)",
        **_where(m),
    )


@rule("TMEM-PACKING", family="tmem")
def tmem_packing(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Each thread's tensor-memory elements fill whole 32-bit registers.

    What it checks:
        For every tcgen05 ld/st, the elements one thread moves per instruction (the
        product of its Vectorize extents, 1 without one) times the element bytes is a
        multiple of 4: 4 int8 or 2 float16/bfloat16 elements per register, any count of
        32- and 64-bit elements, for every admitted size.
    Why the hardware needs it:
        A tensor-memory column is 32 bits wide and tcgen05.ld/st move whole 32-bit
        registers, one column each. Narrower elements are packed, (c * bytes) / 4 being
        the column of element c; a thread that moves 2 bytes would write (or read) the
        whole column, its neighbours' bytes included.
    Example:
        target = "sm_100a"
        fusion, t0, t1, t2, t3 = tmem_copy("tmem", [32, 4], dtype=tp.float16)
        for t in (t1, t2, t3):
            t.axis(0).parallelize(tp.ParallelType.TIDx)
    Fix:
        target = "sm_100a"
        fusion, t0, t1, t2, t3 = tmem_copy("tmem", [32, 4], dtype=tp.float16)
        for t in (t1, t2, t3):
            t.axis(0).parallelize(tp.ParallelType.TIDx)
        for t in (t2, t3):
            t.split(1, 2)
            t.axis(2).parallelize(tp.ParallelType.Vectorize)  # two halves: one 32-bit column
    References:
        PTX ISA 9.7.16.1 (tensor memory: 32-bit cells), 9.7.16.8.3 (tcgen05.ld/st .b32 registers);
        docs/hardware.md#tensor-memory-geometry
    """
    # Formal statement: for every tcgen05 ld/st, for all admitted sizes, threads t, loop points s:
    #   executes(t, s, 0) => n(s) * b % 4 == 0
    #   (n: the elements of the Vectorize'd IDs, 1 without one; b: the element bytes; analysis/tmem.py)
    for m in access_models(ctx):
        out = packed(ctx, m)
        yield from report_outcome("TMEM-PACKING", out, f"that the {m.describe} moves whole 32-bit registers",
                                  lambda out: _partial_register(ctx, m, out), **_where(m))


def _partial_register(ctx: VerifyContext, m: AccessModel, out: Outcome) -> Diagnostic:
    v = out.values
    pk = packing(m)
    dtype = m.acc.tensor.dtype
    first, last = v["byte"], v["byte"] + v["bytes"] - 1
    return finding(
        "TMEM-PACKING",
        f"the {m.describe} moves {v['elements']} {dtype} element{'s' if v['elements'] != 1 else ''} ({v['bytes']} "
        f"bytes) per thread, not whole 32-bit registers: thread {v['thread']} moves bytes {first}..{last} of "
        f"lane {v['lane']}, column {v['column']}",
        notes=[f"a tensor-memory column holds {pk.per_word} {dtype} elements; tcgen05.{'st' if m.acc.direction is Direction.STORE else 'ld'} "
               f"moves all 4 bytes of it, the bytes of the other elements included",
               f"{m.acc.consumer.name} issues it over {', '.join(i.label() for i in m.acc.consumer.loop)}"],
        counterexample={**ctx.symbols_of(out.model), **_thread_values(m, out.model), **_loop_values(m, out.model),
                        "thread": v["thread"], "elements": v["elements"], "bytes": v["bytes"], "lane": v["lane"],
                        "column": v["column"], "bytes of the column": f"{first}..{last}"},
        hint=f"vectorize a multiple of {pk.per_word} {dtype} elements per thread: split the innermost column axis "
             f"by {pk.per_word} (or a multiple) and parallelize the inner part with Vectorize",
        **_where(m),
    )


@rule("TMEM-ACCESS-PATTERN", family="tmem")
def tmem_access_pattern(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Each warp's tensor-memory access is one of the tcgen05 data-path patterns.

    What it checks:
        For every warp and loop iteration, the (lane, column) each thread touches,
        relative to the warp's first thread, equals one pattern's layout for every
        thread and register: 32x32b (lane = base + thread, one column per register),
        16x64b, 16x128b, 16x256b or 16x32bx2 (PTX formulas). Elements narrower than 32
        bits are packed: element c of a lane lies in column (c * bytes) / 4 from byte
        (c * bytes) % 4, element r of a thread's vector in register (r * bytes) / 4 at the
        same byte, so a register's elements must be consecutive in one lane and start at
        a column's first byte; a 64-bit element spans two registers and two adjacent
        columns. Checked once the access is warp-collective and packed (TMEM-PACKING).
    Why the hardware needs it:
        tcgen05.ld/st take one address per warp and move data in fixed shapes; an
        access that is not one of them cannot be issued as tcgen05 instructions.
    Example:
        target = "sm_100a"
        fusion, t0, t1, t2, t3 = tmem_copy("tmem", [32, 32])
        for t in (t1, t2, t3):
            t.axis(0).parallelize(tp.ParallelType.TIDy)
            t.axis(1).parallelize(tp.ParallelType.TIDx)
    Fix:
        target = "sm_100a"
        fusion, t0, t1, t2, t3 = tmem_copy("tmem", [32, 32])
        for t in (t1, t2, t3):
            t.axis(0).parallelize(tp.ParallelType.TIDx)
    References:
        PTX ISA 9.7.16.8 (tcgen05 data-path layouts); CUTLASS include/cute/atom/copy_traits_sm100.hpp;
        docs/hardware.md#tensor-memory-load-and-store-shapes
    """
    # Formal statement: for a warp-collective access whose elements fill whole registers (TMEM-PACKING), a
    #   constant R registers, exists pattern p (32x32b, 16x64b, ...; R a multiple of p's registers per
    #   repetition): for all admitted sizes, t, loop points s, elements r, words h of element r:
    #   executes(t, s, r) => (lane, word(column) + h, byte(column))(t, s, r) ==
    #   (lane, word(column), 0)(32*(t/32), s, 0) + (offset_p(t % 32, word(r) + h, R), byte(r))
    #   (word / byte: the packing of hw/tcgen05.py; 32-bit elements: word(c) = c, byte(c) = 0)
    for m in access_models(ctx):
        if not collective(ctx, m).proved or not packed(ctx, m).proved:
            continue
        found, outcomes = matching_pattern(ctx, m)
        if found is not None:
            continue
        unknown = [o for o in outcomes.values() if o is not None and o.status is Verdict.UNKNOWN]
        if unknown:
            yield undecided("TMEM-ACCESS-PATTERN", f"that the {m.describe} matches a tcgen05 pattern", unknown[0], **_where(m))
            continue
        tried = [(p, o) for p, o in outcomes.items() if o is not None]
        regs = registers(m)
        if not tried:  # each pattern's register count rules it out before any proof
            count = (f"{regs} registers per instruction, a multiple of no tcgen05 pattern's registers per "
                     f"repetition ({', '.join(str(p.registers_per_repetition) for p in outcomes)})" if regs is not None
                     else f"{m.num_regs} elements per instruction, not a constant: tcgen05.ld/st takes a fixed count")
            yield finding("TMEM-ACCESS-PATTERN", f"the {m.describe} moves {count}",
                          counterexample={"registers per instruction": regs if regs is not None else str(m.num_regs)},
                          hint="vectorize a power of two of 32-bit registers per thread (1, 2, 4, ... 128)", **_where(m))
            continue
        shown, first = tried[0]
        v = first.values
        notes = []
        for p, o in outcomes.items():
            if o is None:
                notes.append(f"not {p}: {regs} register{'s' if regs != 1 else ''} per instruction, not a multiple of "
                             f"{p.registers_per_repetition}")
            else:
                w = o.values
                notes.append(f"not {p}: thread {w['thread']} register {w['register']} touches ({_cell(w)}), the pattern "
                             f"needs ({_cell(w, 'expected ')})")
        if "byte" in v:
            notes.append(f"{m.acc.tensor.dtype} elements are packed {packing(m).per_word} to a 32-bit column and "
                         f"register: element c of a lane at column c / {packing(m).per_word}, element r of a thread's "
                         f"vector in register r / {packing(m).per_word}, each at byte (index % {packing(m).per_word}) "
                         f"x {packing(m).element_bytes}")
        yield finding(
            "TMEM-ACCESS-PATTERN",
            f"the {m.describe} matches no tcgen05 pattern: thread {v['thread']} of warp {v['warp']} touches "
            f"{_cell(v)}; {shown} needs {_cell(v, 'expected ')}",
            notes=notes,
            counterexample={**ctx.symbols_of(first.model), **_thread_values(m, first.model), **_loop_values(m, first.model),
                            "thread": v["thread"], "lane": v["lane"], "column": v["column"],
                            "expected lane": v["expected lane"], "expected column": v["expected column"],
                            **{k: v[k] for k in ("byte", "expected byte") if k in v}},
            hint="give each warp 32 consecutive lanes: the innermost TID axis (32 threads) must index the lane "
                 "axes with stride 1, left of the dimension separator"
                 + ("; a thread's vectorized elements must be consecutive in its lane" if "byte" in v else ""),
            **_where(m),
        )


def _cell(values: dict, prefix: str = "") -> str:
    """(lane, column) of a pattern witness, with the byte for packed elements."""
    byte = f", byte {values[prefix + 'byte']}" if prefix + "byte" in values else ""
    if not prefix and "first byte" in values and values["first byte"]:
        byte += f" (the warp's first element at byte {values['first byte']}, not at a column's start)"
    return f"lane {values[prefix + 'lane']}, column {values[prefix + 'column']}{byte}"


@rule("TMEM-SUBPARTITION", family="tmem")
def tmem_subpartition(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Warp i touches only the lanes of sub-partition i % 4.

    What it checks:
        For every thread, loop point and register of a tcgen05 ld/st that matches a
        pattern, lane / 32 == (linear thread id / 32) % 4. (A tensor with more than 128
        lanes is reported by TMEM-LANES instead.)
    Why the hardware needs it:
        The 128 lanes form 4 sub-partitions of 32; warp w of a warpgroup is wired to
        sub-partition w % 4 only. Any other lane is unreachable for that warp.
    Example:
        target = "sm_100a"
        fusion, t0, t1, t2, t3 = tmem_copy("tmem", [32, 2])
        for t in (t1, t2, t3):
            t.axis(0).parallelize(tp.ParallelType.TIDx)
            t.axis(1).parallelize(tp.ParallelType.TIDy)
    Fix:
        target = "sm_100a"
        fusion, t0, t1, t2, t3 = tmem_copy("tmem", [32, 2])
        for t in (t1, t2, t3):
            t.axis(0).parallelize(tp.ParallelType.TIDx)
    References:
        PTX ISA 9.7.16.8.1 (access restrictions); nvFuser PR #4016; docs/hardware.md#tensor-memory-sub-partitions
    """
    # Formal statement: for every packed, warp-collective tcgen05 ld/st that matches a pattern and whose
    #   tensor fits 128 lanes (proved), for all admitted sizes, t, loop points s, r < n:
    #   executes(t, s, r) => lane(t, s, r) / 32 == (t / 32) % 4
    for m in access_models(ctx):
        if not collective(ctx, m).proved or not packed(ctx, m).proved or matching_pattern(ctx, m)[0] is None:
            continue
        if not _fits_lanes(ctx, m):
            continue  # more than 128 lanes: TMEM-LANES already reports the root cause
        tid = m.tid
        warp = floordiv(tid, 32)
        q = ctx.query(m.hint_exprs() + [mod(warp, 4), floordiv(m.addresses['lane'], 32)], m.ranges)
        claim = z3.Implies(executes(q, m), q.eq(floordiv(m.addresses['lane'], 32), mod(warp, 4)))
        out = q.prove(claim, values={"thread": tid, "warp": warp, "lane": m.addresses['lane'], "column": m.addresses['column']}, smallest=tid)
        yield from report_outcome("TMEM-SUBPARTITION", out, f"the sub-partitions of the {m.describe}",
                                  lambda out: _wrong_subpartition(ctx, m, out), **_where(m))


def _wrong_subpartition(ctx: VerifyContext, m: AccessModel, out: Outcome) -> Diagnostic:
    v = out.values
    sub = v["warp"] % 4
    return finding(
        "TMEM-SUBPARTITION",
        f"the {m.describe} reaches the wrong sub-partition: warp {v['warp']} (thread {v['thread']}) touches "
        f"lane {v['lane']}, but warp {v['warp']} may only touch lanes {32 * sub}..{32 * sub + 31}",
        notes=["warp w of a warpgroup reaches only lanes 32*(w%4) .. 32*(w%4)+31"],
        counterexample={**ctx.symbols_of(out.model), **_thread_values(m, out.model), **_loop_values(m, out.model),
                        "thread": v["thread"], "warp": v["warp"], "lane": v["lane"],
                        "allowed lanes from": 32 * sub},
        hint=_subpartition_hint(ctx, m),
        **_where(m),
    )


THREAD_ORDER = (ParallelType.TIDz, ParallelType.TIDy, ParallelType.TIDx)  # outermost first
_PROPOSING: list[bool] = []  # set while a proposed fix is verified: no proposal inside a proposal


def _subpartition_hint(ctx: VerifyContext, m: AccessModel) -> str:
    """Which of the tensor's loop axes carry the lanes and which the threads, in the user's
    numbers, and (when the allocation is the loop domain) the reorder and separator calls that
    make the lanes exactly the thread axes, threadIdx.x innermost: proposed only when the copy of
    the fusion with them passes every tensor-memory rule."""
    tv = m.acc.tensor
    loop, alloc, sep = list(tv.loop), tv.get_allocation_domain(), tv.tmem_dim_sep
    lanes = alloc[:sep]

    def axis(i) -> str:
        return f"{i.label()} (loop axis {loop.index(i)})" if i in loop else i.label()

    threads = [i for i in loop if i.parallel_type in THREAD_ORDER]
    wanted = sorted(threads, key=lambda i: THREAD_ORDER.index(i.parallel_type))
    text = (f"{tv.name}'s lanes (left of its dimension separator) are {', '.join(map(axis, lanes)) or 'none'}; "
            f"warp w may only index lanes 32*(w%4).., so the lanes must be {tv.name}'s thread axes and nothing "
            f"else, threadIdx.x innermost: {', '.join(map(axis, wanted)) or 'none'}")
    extra = [i for i in lanes if i not in threads]
    missing = [i for i in threads if i not in lanes]
    extents = [try_int(i.extent_expr) for i in wanted]
    count = None if None in extents else math.prod(extents)
    moves = [f"move {', '.join(map(axis, extra))} right of the separator"] if extra else []
    if missing and count is not None and count > ctx.target.tmem_lanes:
        moves.append(f"the thread axes make {count} lanes, more than {ctx.target.tmem_lanes}: leave "
                     f"{', '.join(map(axis, missing))} serial or parallelize {'it' if len(missing) == 1 else 'them'} "
                     f"on blocks, so that the lanes need only {', '.join(map(axis, [i for i in wanted if i in lanes]))}")
        return text + "; " + "; ".join(moves)
    if missing:
        moves.append(f"move {', '.join(map(axis, missing))} left of the separator, outside TIDx (or leave "
                     f"{'it' if len(missing) == 1 else 'them'} serial)")
    fix = (ctx.memo(("tmem-subpartition-fix", tv.name), lambda: _subpartition_fix(ctx, tv, wanted))
           if alloc == loop and not _PROPOSING else None)  # one copy verified for the store and the load
    if fix is not None:
        moves.append(f"{fix} does it (verified: with it, the tensor-memory rules hold)")
    elif lanes != wanted:
        moves.append(f"order the lanes as {', '.join(map(axis, wanted))}")
    return text + "; " + "; ".join(moves)


def _subpartition_fix(ctx: VerifyContext, tv, wanted) -> str | None:
    """`tv.reorder({..}).set_tmem_dim_sep_pos(n)` putting the `wanted` thread axes first, in
    order, and everything else right of the separator, when a copy of the fusion with it has no
    tensor-memory error; else None."""
    loop = list(tv.loop)
    order = wanted + [i for i in loop if i not in wanted]
    old2new = dict(sorted((loop.index(i), new) for new, i in enumerate(order) if loop.index(i) != new))
    calls = f"{tv.name}.reorder({old2new}).set_tmem_dim_sep_pos({len(wanted)})" if old2new else \
        f"{tv.name}.set_tmem_dim_sep_pos({len(wanted)})"
    memo: dict[int, object] = {}
    fusion = copy.deepcopy(ctx.fusion, memo)
    fixed = memo[id(tv)]
    _PROPOSING.append(True)
    try:
        if old2new:
            fixed.reorder(old2new)
        fixed.set_tmem_dim_sep_pos(len(wanted))
        checked = VerifyContext(fusion, ctx.target, ctx.bind, shrink_seconds=0)  # judged by its verdicts only
        holds = fix_holds(checked, [c for c, r in RULES.items() if r.family == "tmem"] + ["TMEM-LANES", "TMEM-COLUMNS"])
    except Exception:  # noqa: BLE001 - a change the model refuses (compute-at, ...) is not proposed
        return None
    finally:
        _PROPOSING.pop()
    return calls if holds else None


def _fits_lanes(ctx: VerifyContext, m: AccessModel) -> bool:
    lanes = ctx.allocations[m.acc.tensor.name].lanes_expr
    return ctx.memo(("fits-lanes", lanes), lambda: _prove_fits(ctx, lanes))


def _prove_fits(ctx: VerifyContext, lanes: Expr) -> bool:
    q = ctx.query([lanes, const(ctx.target.tmem_lanes)])
    return q.prove(q.le(lanes, const(ctx.target.tmem_lanes))).proved


@rule("TMEM-VECTORIZE", family="tmem")
def tmem_vectorize(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Vectorized tensor-memory accesses move 1 to 128 32-bit registers, a power of two.

    What it checks:
        The vectorized IterDomains of a tcgen05 ld/st hold a constant number of elements
        that fill a power of two from 1 to 128 of 32-bit registers (the .x1 ... .x128
        forms; 8- and 16-bit elements packed, 64-bit ones two registers each). A vector
        that leaves a register partly filled is TMEM-PACKING's.
    Why the hardware needs it:
        tcgen05.ld/st encode the repetition count .num in {x1, x2, ..., x128}; other
        widths have no instruction.
    Example:
        target = "sm_100a"
        fusion, t0, t1, t2, t3 = tmem_copy("tmem", [128, 96])
        for t in (t1, t2, t3):
            t.axis(0).parallelize(tp.ParallelType.TIDx)
        t2.axis(1).parallelize(tp.ParallelType.Vectorize)
    Fix:
        target = "sm_100a"
        fusion, t0, t1, t2, t3 = tmem_copy("tmem", [128, 96])
        for t in (t1, t2, t3):
            t.axis(0).parallelize(tp.ParallelType.TIDx)
        t2.split(1, 32)
        t2.axis(2).parallelize(tp.ParallelType.Vectorize)
    References:
        PTX ISA 9.7.16.8.3 (tcgen05.ld .num); docs/hardware.md#tensor-memory-load-and-store-shapes
    """
    # Formal statement: for every vectorized tcgen05 ld/st that fills whole registers (TMEM-PACKING), for all admitted sizes s:
    #   n(s) x element bytes in {4 * 2^k : 0 <= k <= 7} (n: the elements of its Vectorize'd IDs)
    for m in access_models(ctx):
        if not m.vector_ids or not packed(ctx, m).proved:
            continue  # a partial register is TMEM-PACKING's
        width = m.num_regs * m.acc.tensor.dtype.bytes
        q = ctx.query([width, const(4 << 7)])
        allowed = [q.eq(width, const(4 << k)) for k in range(8)]
        out = q.prove(z3.Or(*allowed), values={"bytes": width})
        yield from report_outcome("TMEM-VECTORIZE", out, f"the vector width of the {m.describe}",
                                  lambda out: _bad_vector_width(ctx, m, out), **_where(m))


def _bad_vector_width(ctx: VerifyContext, m: AccessModel, out: Outcome) -> Diagnostic:
    b = out.values["bytes"]
    regs = f"{b / 4:g}"
    return finding(
        "TMEM-VECTORIZE",
        f"the {m.describe} is vectorized by {regs} 32-bit registers ({b} bytes); tcgen05 moves 1 to 128, a power of two",
        counterexample={**ctx.symbols_of(out.model), "registers": b // 4 if b % 4 == 0 else b / 4, "bytes": b},
        hint="split the vectorized axis by a power of two from 1 to 128 and vectorize the inner part",
        **{**_where(m), "ids": [i.name for i in m.vector_ids]},
    )
