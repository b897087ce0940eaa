"""Shared-memory bank conflicts lane by lane, at one point: the words each lane of a warp
phase touches at a counterexample's iteration and sizes, the worst bank, why the tensor's
swizzle does not separate its lanes, and a swizzle call that does (SMEM-BANK-CONFLICT).

The counting evaluates the access model's address expressions (the ones the rule proves and
the kernel runs) in Python for the 32 lanes of one warp: no solver calls. A proposed swizzle is
judged the same way on a copy of the fusion, and proved within the rule's time budget when
time is left; nothing here is a proof about the user's schedule.
"""

from __future__ import annotations

import copy
import re
from typing import Callable, Mapping

from ...model.errors import ScheduleError
from ...model.expr import PY_EVAL, Expr, const, evaluate, mul, substitute, try_int
from ...execution.indexing import linear_offset
from ...model.iterdomain import IterDomain, Split, Swizzle
from ...model.types import Direction, LoadStoreOpType, ParallelType, SwizzleType
from ..access import AccessModel, build, var_name
from ..context import VerifyContext
from ..solver import Budget, Outcome
from .swizzle_axes import source_line

BANKS = 32
BANK_ROW = 4 * BANKS  # bytes: a stride that is a multiple of it never changes the bank
Prove = Callable[[VerifyContext, AccessModel, int, int, Budget], Outcome]  # (ctx, model, width, timeout_ms, budget)


def phase_lanes(width_bytes: int) -> int:
    """Lanes served together: the whole warp for <= 4-byte accesses, half-warps for
    8 bytes, quarter-warps for 16 (measured with ncu on H200)."""
    return 32 if width_bytes <= 4 else 16 if width_bytes == 8 else 8


def byte_address(ctx: VerifyContext, m: AccessModel) -> Expr:
    """The byte offset in the tensor of the vector's element 0 the point moves."""
    alloc = ctx.allocations[m.acc.tensor.name]
    first = {var_name(m.acc, i): const(0) for i in m.vector_ids}  # a vector starts at its element 0
    return substitute(mul(linear_offset(alloc.strides(), m.indices), m.acc.tensor.dtype.bytes), first)


def lane_env(m: AccessModel, model: Mapping[str, int], warp: int, lane: int) -> dict[str, int] | None:
    """The counterexample's values with the thread indices of `lane` of `warp`; None when that
    thread is not launched, does not take part, or its point is a hole."""
    env = dict(model)
    dims = [evaluate(d, env) for d in m.dims]
    tid = warp * 32 + lane
    if tid >= dims[0] * dims[1] * dims[2]:
        return None
    env.update({name: evaluate(e, env) for name, e in m.thread_env(const(tid)).items()})
    if not all(evaluate(i, env) < evaluate(e, env) for i, e in m.active):
        return None
    if not all(evaluate(c.lhs, env) < evaluate(c.rhs, env) for c in m.valid):
        return None
    return env


def bank_lanes(m: AccessModel, address: Expr, model: Mapping[str, int], warp: int, first: int, lanes: int,
               width: int) -> dict[int, list[int]] | None:
    """lane -> the 4-byte words it touches, for the lanes first .. first + lanes - 1 of `warp`
    that execute at the counterexample's point; None when the model lacks a value."""
    words = max(width // 4, 1)
    out: dict[int, list[int]] = {}
    try:
        for lane in range(first, first + lanes):
            env = lane_env(m, model, warp, lane)
            if env is not None:
                start = evaluate(address, env) // 4
                out[lane] = [start + k for k in range(words)]
    except (KeyError, ZeroDivisionError):
        return None
    return out


def worst_bank(phase: Mapping[int, list[int]]) -> tuple[int, dict[int, list[int]]]:
    """(bank, word -> lanes) of the bank with the most distinct words (the conflict's degree);
    lanes on one word are a broadcast, not a conflict."""
    banks: dict[int, dict[int, list[int]]] = {}
    for lane, words in sorted(phase.items()):
        for w in words:
            banks.setdefault(w % BANKS, {}).setdefault(w, []).append(lane)
    if not banks:
        return 0, {}
    bank = max(sorted(banks), key=lambda b: len(banks[b]))
    return bank, banks[bank]


def degree(phase: Mapping[int, list[int]] | None) -> int | None:
    return None if phase is None else max(len(worst_bank(phase)[1]), 1)


class _Lane:
    """One lane's values at the counterexample (lane_env), and the subterms evaluated there: the
    index expressions of a tensor's IDs share most of their subterms."""

    def __init__(self, env: dict[str, int]):
        self.env = env
        self.known: dict[Expr, int] = {}

    def value(self, e: Expr) -> int:
        v = self.known.get(e)
        if v is None:
            if e.op == "const":
                v = e.value  # type: ignore[assignment]
            elif e.op == "var":
                v = self.env[e.value]  # type: ignore[index]
            else:
                v = PY_EVAL[e.op](*(self.value(a) for a in e.args))
            self.known[e] = v  # type: ignore[assignment]
        return v  # type: ignore[return-value]


def _lane_envs(m: AccessModel, model: Mapping[str, int], warp: int, lanes: list[int]) -> list[_Lane] | None:
    """lane_env of each of `lanes`, computed once for all the indices read from them; None when
    one of them does not execute or the counterexample lacks a value."""
    try:
        envs = [lane_env(m, model, warp, lane) for lane in lanes]
    except (KeyError, ZeroDivisionError):
        return None
    return None if any(env is None for env in envs) else [_Lane(env) for env in envs]  # type: ignore[arg-type]


def _indices(m: AccessModel, envs: list[_Lane] | None, uid: int) -> list[int] | None:
    if envs is None or uid not in m.indices:
        return None
    try:
        return [lane.value(m.indices[uid]) for lane in envs]
    except (KeyError, ZeroDivisionError):  # a value the counterexample does not give
        return None


def _differing(ctx: VerifyContext, m: AccessModel, envs: list[_Lane] | None) -> list[IterDomain]:
    """The allocated IDs of the tensor whose index differs between the colliding lanes (envs)."""
    out = []
    for a in ctx.allocations[m.acc.tensor.name].allocated():
        values = _indices(m, envs, a.id.uid)
        if values is not None and len(set(values)) > 1:
            out.append(a.id)
    return out


def _stride_bytes(ctx: VerifyContext, m: AccessModel, i: IterDomain) -> int | None:
    stride = ctx.allocations[m.acc.tensor.name].strides().get(i.uid)
    value = try_int(stride) if stride is not None else None
    return None if value is None else value * m.acc.tensor.dtype.bytes


def why_swizzle_fails(ctx: VerifyContext, m: AccessModel, model: Mapping[str, int], warp: int,
                      lanes: list[int]) -> list[str]:
    """For a swizzled tensor: what about each XOR swizzle leaves `lanes` (one per colliding word)
    in one bank, from their index values at the counterexample's point."""
    tv = m.acc.tensor
    notes = []
    envs = _lane_envs(m, model, warp, lanes)
    differ = ", ".join(i.label() for i in _differing(ctx, m, envs)) or "no allocated ID"
    for t in (t for t in tv.history if isinstance(t, Swizzle)):
        xs = _indices(m, envs, t.x_in.uid)
        ys = _indices(m, envs, t.y_out.uid)
        if xs is None or ys is None:
            continue
        by = f"{tv.name}'s {t}" + (f" ({t.x_out.origin})" if t.x_out.origin else "")
        shown = ", ".join(map(str, lanes))
        if len(set(xs)) == 1:
            notes.append(f"{by} does not separate lanes {shown}: they have the same {t.x_in.label()} = {xs[0]}, "
                         f"so the XOR moves their words alike; they differ in {differ}, which it does not XOR in")
            continue
        stride = _stride_bytes(ctx, m, t.y_out)
        if stride is not None and stride % BANK_ROW == 0:
            notes.append(f"{by} gives lanes {shown} different {t.y_out.label()} ({', '.join(map(str, ys))}), but "
                         f"{t.y_out.label()} has a stride of {stride} bytes, a multiple of {BANK_ROW} (32 banks of "
                         f"4 bytes): the XOR moves words by whole rows of banks and never changes their bank")
        else:
            notes.append(f"{by} gives lanes {shown} the XORed {t.y_out.label()} = {', '.join(map(str, ys))}, "
                         f"which still leaves their words in one bank (they differ in {differ})")
    return notes


def tensor_variable(tv) -> str:
    """The Python variable the user's code holds the tensor in, where its creation line assigns
    exactly one (`t1 = tp.set(t0)`), else the tensor's name."""
    line = source_line(tv.origin) or ""
    found = re.findall(r"(?:^|;)\s*([A-Za-z_]\w*)\s*=(?!=)", line)
    return found[0] if len(found) == 1 else tv.name


def bank_fix(ctx: VerifyContext, m: AccessModel, model: Mapping[str, int], warp: int, first: int, width: int,
             now: int, lanes: list[int], budget: Budget, prove: Prove) -> str:
    """A change to the schedule for a `now`-way conflict of `lanes`: a swizzle call on two loop
    axes of the tensor (judged on a copy of the fusion at the counterexample's point, proved
    free of conflicts when the budget leaves time), else what the change must do."""
    tv, name = m.acc.tensor, m.acc.tensor.name
    shown = ", ".join(map(str, lanes))
    if tv.definition is not None and tv.definition.op_type is LoadStoreOpType.TMA:
        return (f"{name} is written by TMA, so its layout is the TMA box's (a plain swizzle of {name} would not be "
                f"where TMA writes): give the TMA a swizzle mode (split each tile row into 16-byte chunks and XOR a "
                f"row axis into the chunk axis; tileproof explain TMA-SWIZZLE-LAYOUT), or let lanes {shown} of "
                f"{m.acc.consumer.name} {'read' if m.acc.direction is Direction.LOAD else 'write'} words in "
                f"different banks (consecutive elements of a row)")
    found = _swizzle_candidates(ctx, m, model, warp, first, width, now, lanes, budget, prove)
    if found is not None:
        (x, y), after, proved = found
        loop = tv.loop
        parallel = any(loop[p].parallel_type is not ParallelType.Serial for p in (x, y))
        evidence = (f"tileproof then proves the {m.describe} free of bank conflicts" if proved else
                    f"at the iteration above, lanes {first}-{first + phase_lanes(width) - 1} then take {after} "
                    f"pass{'es' if after > 1 else ''} instead of {now}")
        return (f"swizzle {name}'s loop axes {x} ({loop[x].label()}) and {y} ({loop[y].label()}): "
                f"{tensor_variable(tv)}.swizzle(tp.SwizzleType.XOR, {x}, {y}) after its last split, merge or reorder"
                f"{' and before parallelizing them' if parallel else ''}; {evidence}")
    differ = _differing(ctx, m, _lane_envs(m, model, warp, lanes))
    named = ", ".join(i.label() for i in differ) or "the IDs they differ in"
    for t in (t for t in tv.history if isinstance(t, Swizzle)):
        split = t.x_in.definition
        if isinstance(split, Split) and any(i in (split.outer, split.inner) for i in differ):
            return (f"XOR all of {split.in_.label()} into {t.y_in.label()}, not only its part {t.x_in.label()}: "
                    f"lanes {shown} differ in {named}, which the swizzle leaves out; swizzle before "
                    f"`{split}`" + (f" ({split.outer.origin})" if split.outer.origin else "")
                    + " (a suggestion, not verified)")
    change = f"make {name}'s swizzle XOR" if any(isinstance(t, Swizzle) for t in tv.history) else "XOR-swizzle"
    return (f"{change} an axis in which lanes {shown} differ ({named}) into an axis of {name} whose stride is not a "
            f"multiple of {BANK_ROW} bytes, so that the XOR changes their banks (split both to one power-of-two "
            f"extent first)")


def _swizzle_candidates(ctx, m, model, warp, first, width, now, lanes, budget, prove):
    """((x, y), degree after, proved) of the best swizzle of two loop axes of the tensor: x an
    axis the colliding lanes differ in, y an allocated axis whose stride changes the bank."""
    tv = m.acc.tensor
    if m.acc.direction is Direction.STORE and m.acc.consumer is tv:
        return None  # the swizzle would change the writer's own loop: judged by the proof only, not here
    loop = tv.loop
    rows, cols = [], []
    envs = _lane_envs(m, model, warp, lanes)
    for p, i in enumerate(loop):
        if p < tv.compute_at or (try_int(i.extent_expr) or 0) < 2:
            continue
        values = _indices(m, envs, i.uid)
        if values is not None and len(set(values)) > 1:
            rows.append(p)
        stride = _stride_bytes(ctx, m, i)
        if stride is not None and stride % BANK_ROW:
            cols.append(p)
    pairs = [(x, y) for x in rows for y in cols if x != y and _bijective(try_int(loop[x].extent_expr),
                                                                        try_int(loop[y].extent_expr))]
    best = None
    for x, y in pairs[:4]:
        if budget.spent:
            break
        fixed = _with_swizzle(ctx, m, x, y)
        if fixed is None:
            continue
        ctx2, m2 = fixed
        after = degree(bank_lanes(m2, byte_address(ctx2, m2), model, warp, first, phase_lanes(width), width))
        if after is not None and after < now and (best is None or after < best[1]):
            best = ((x, y), after, ctx2, m2)
        if after == 1:
            break
    if best is None:
        return None
    left_ms = budget.left_ms
    proved = False
    if left_ms >= 20:
        out = prove(best[2], best[3], width, left_ms, budget)
        ctx.queries += best[2].queries
        proved = out.proved
    return best[0], best[1], proved


def _bijective(ex: int | None, ey: int | None) -> bool:
    return ex is not None and ey is not None and ey % (1 << (ex - 1).bit_length()) == 0


def _with_swizzle(ctx: VerifyContext, m: AccessModel, x: int, y: int):
    """(context, access model) of a copy of the fusion whose accessed tensor also swizzles its
    loop axes x and y (their parallel types kept, as when the call precedes parallelizing)."""
    memo: dict[int, object] = {}
    copied = copy.deepcopy(ctx.fusion, memo)
    tv = memo[id(m.acc.tensor)]
    kept = [(tv.loop[p].parallel_type, tv.loop[p].parallel_origin) for p in (x, y)]
    try:
        tv.swizzle(SwizzleType.XOR, x, y)
    except ScheduleError:
        return None
    for p, (kind, origin) in zip((x, y), kept):
        tv.loop[p].set_parallel_type(kind, origin)
    fixed = VerifyContext(copied, ctx.target, ctx.bind, shrink_seconds=0)  # judged by its verdicts only
    acc = m.acc
    op = memo[id(acc.op)]
    same = [a for a in fixed.accesses_to(tv.memory_type)
            if a.op is op and a.direction is acc.direction and a.input_index == acc.input_index]
    return (fixed, build(fixed, same[0])) if len(same) == 1 else None
