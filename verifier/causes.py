"""Root causes first: one mistake in a schedule often breaks several rules (a swizzle on the
wrong axes makes the TMA swizzle mode, the row width and the bijection fail too). A rule that
finds the mistake itself and verifies a fix on a copy of the fusion records the copy
(propose_fix); here every other error whose rule no longer reports it on the
fixed copy is marked as following from the cause, and so is each warning about a tensor the
cause or its consequences name that its rule no longer reports there (the other warnings'
rules are not re-run: they would spend their time budgets again). The report lists one block
per cause, the cause first and its consequences right after it, so that a reader meets the
mistake before its symptoms; every error's block comes before the warnings (ordered).
"""

from __future__ import annotations

import copy
import re
from typing import Callable, Iterable, Iterator, Mapping

from ..model.errors import TileproofError
from ..model.fusion import Fusion
from ..model.mma_op import is_mma
from ..execution import loops
from ..model.types import MemoryType, ParallelType
from .context import VerifyContext
from .diagnostics import Diagnostic, Report, Severity
from .registry import RULES


def propose_fix(ctx: VerifyContext, key: str, fixed: VerifyContext) -> str:
    """Record that the diagnostic a rule is about to report has a verified fix, `fixed` (the
    context of the fusion with it applied); returns the diagnostic's id (`key`, made unique)."""
    fixes = _fixes(ctx)
    n = sum(1 for k in fixes if k == key or k.startswith(key + "#"))
    did = key if n == 0 else f"{key}#{n + 1}"
    fixes[did] = fixed
    return did


def fix_holds(fixed: VerifyContext, codes: Iterable[str]) -> bool:
    """Whether no rule of `codes` reports an error on `fixed` (the context of a copy of the fusion
    with a proposed fix applied), the rules run as verify runs them (in registration order, each
    told which others run); a rule that crashes there counts as an error: the fix is not proposed."""
    fixed.running = frozenset(codes)
    for code in [c for c in RULES if c in fixed.running]:
        try:
            if any(d.severity is Severity.ERROR for d in RULES[code].func(fixed)):
                return False
        except Exception:  # noqa: BLE001 - a fix is proposed only when it is verified
            return False
    return True


def propose_change(ctx: VerifyContext, d: Diagnostic, change: Callable[[Fusion], None], codes: Iterable[str]) -> bool:
    """Make d the root cause of what `change` (scheduling calls on a copy of the fusion) fixes,
    when the copy has no error of the rules `codes`; the caller's help names the calls. Returns
    whether the fix held (not where the calls raise: they are no fix; nor on a copy that is itself
    a fix's, whose rules check the fix and propose none)."""
    if ctx.memo(("a fix's copy",), lambda: False):
        return False
    # the calls go to a copy of the schedule as written, snapshotted after them as verify snapshots
    # it: the snapshot's views of inputs (a copy of a global input read in place) follow the change
    written = ctx.source if ctx.source is not None else ctx.fusion
    fixed_fusion = copy.deepcopy(written)
    try:
        change(fixed_fusion)
        if ctx.source is not None:
            fixed_fusion = fixed_fusion.snapshot()
    except TileproofError:
        return False
    fixed = VerifyContext(fixed_fusion, ctx.target, ctx.bind, shrink_seconds=0, query_ms=FIX_QUERY_MS)
    fixed.memo(("a fix's copy",), lambda: True)
    holds = fix_holds(fixed, codes)
    ctx.queries += fixed.queries
    if holds:
        d.id = propose_fix(ctx, f"{d.code}:{d.tensor}", fixed)
    return holds


def propose_inline(ctx: VerifyContext, d: Diagnostic, name: str, at: int, codes: Iterable[str]) -> str | None:
    """`name`.inline_at(at), proposed on d where a copy of the schedule with it passes `codes`
    (propose_change); the call, or None."""
    if propose_change(ctx, d, lambda fusion: fusion.tensor(name).inline_at(at), codes):
        return f"{name}.inline_at({at})"
    return None


def propose_memory_types(ctx: VerifyContext, d: Diagnostic, memory: Mapping[str, MemoryType],
                         codes: Iterable[str]) -> bool:
    """propose_change of set_memory_type(memory[name]) on each named tensor (never for a fusion
    input or output, which stays in global memory; a copy of an input that the snapshot reads in
    place, as a view of it, is neither)."""
    written = ctx.source if ctx.source is not None else ctx.fusion
    if any(t.name in memory for t in (*written.inputs, *written.outputs)):
        return False

    def change(fusion: Fusion) -> None:
        for t in fusion.tensors:
            if t.name in memory:
                t.set_memory_type(memory[t.name])

    return propose_change(ctx, d, change, codes)


def propose_retype(ctx: VerifyContext, d: Diagnostic, axes: Iterable[tuple[str, int, ParallelType | None]],
                   strict: Iterable[str], codes: Iterable[str], tries: int = 6, mates_first: bool = True) -> str | None:
    """Propose on d one parallelize call on one of `axes` (tensor name, loop position, the type to
    give it where its inlined loop-mates do not say one, None: no call then): the axis given the
    type its loop-mates have (the one it had before a parallelize gave it another), else the fallback; calls that
    restore a loop-mates' type first (`mates_first=False`: the fallback always, where the caller
    knows the type, as a TMA box's Bulk). The first call (of at most `tries`) whose copy has no error
    of the rules `strict` is proposed, else the first with none of `codes`. Returns the call, or
    None where none holds."""
    groups = ctx.memo("lowering-loop-groups", lambda: loops.loop_groups(ctx.fusion, idmap=ctx.idmap))
    calls = []
    for name, k, fallback in axes:
        t = ctx.fusion.tensor(name)
        if not mates_first:
            calls.append((True, name, k, fallback))
            continue
        mates = {m.loop[j].parallel_type for m, j in groups.of[(name, k)].members
                 if m is not t and m.loop[j].parallel_type is not ParallelType.Serial}  # the loop's type
        if not mates:  # not inlined: the type of the axes mapped to it (what parallelize_all_like gives)
            key = ctx.idmap.key(t.loop[k])
            mates = {i.parallel_type for u in ctx.fusion.tensors if u is not t and not u.is_fusion_input
                     for i in u.loop if i.parallel_type is not ParallelType.Serial and ctx.idmap.key(i) == key}
        restore = next(iter(mates)) if len(mates) == 1 and t.loop[k].parallel_type not in mates else None
        calls.append((restore is None, name, k, restore or fallback))
    calls = [c for _, name, k, ptype in sorted(calls, key=lambda c: c[0])
             if ptype is not None and ctx.fusion.tensor(name).loop[k].parallel_type is not ptype
             for c in _written_calls(ctx, groups, name, k, ptype)]
    for needed in (list(strict), list(codes)):
        for name, k, ptype in calls[:tries]:
            if propose_change(ctx, d, lambda f: f.tensor(name).axis(k).parallelize(ptype), needed):
                return f"{name}.axis({k}).parallelize(tp.ParallelType.{ptype.name})"
    return None


def unbound_type(t, k: int) -> ParallelType:
    """The type to give axis k of t where a parallelize gave it a wrong one and its loop says none:
    Mma for one of an MMA output's last three axes (the instruction tile's M, N and K) whose other
    two are Mma, else Serial."""
    tile = range(len(t.loop) - 3, len(t.loop))
    if is_mma(t) and k in tile and all(t.loop[j].parallel_type is ParallelType.Mma for j in tile if j != k):
        return ParallelType.Mma
    return ParallelType.Serial


def _written_calls(ctx: VerifyContext, groups, name: str, k: int, ptype: ParallelType) -> list[tuple[str, int, ParallelType]]:
    """The parallelize calls, on the schedule as written, that give loop axis k of `name` (as verify
    sees it) the type `ptype`: on that axis, or where the axis has `ptype` as written and its type
    came from the loop it shares (verify gives each loop's type to its Serial members), on the
    loop-mates that have that type as written."""
    at = written_axis(ctx, name, k)
    if at is None:
        return []
    if ctx.source is None or ctx.source.tensor(name).loop[at].parallel_type is not ptype:
        return [(name, at, ptype)]
    got = ctx.fusion.tensor(name).loop[k].parallel_type
    mates = [(m.name, written_axis(ctx, m.name, j)) for m, j in groups.of[(name, k)].members if m.name != name]
    return [(m, j, ptype) for m, j in mates if j is not None and ctx.source.tensor(m).loop[j].parallel_type is got]


def written_axis(ctx: VerifyContext, name: str, k: int) -> int | None:
    """The position in the schedule as written of loop axis k of `name` as verify sees it (the
    snapshot's loops may hold broadcast axes inlining inserted, model/loop_map.py); None where the
    axis is one of those."""
    if ctx.source is None:
        return k
    number = ctx.fusion.tensor(name).loop[k].number
    return next((j for j, i in enumerate(ctx.source.tensor(name).loop) if i.number == number), None)


# what a TMA tile's box decides: a box axis given another type breaks these together
BOX_CODES = ("TMA-ELEMENT-STRIDE", "TMA-INNER-BYTES", "TMA-BOX-SIZE", "TMA-TILE-CONTIGUITY", "TMA-WHOLE-TILES",
             "TMA-SWIZZLE-LAYOUT", "SMEM-ALIGNMENT", "TMA-COORD-ALIGN", "TMA-BULK-PLACEMENT", "INLINE-PARALLEL-MATCH")


def box_retyped(ctx: VerifyContext, findings: Iterable[Diagnostic], tile) -> Iterator[Diagnostic]:
    """The findings of a TMA rule about `tile` (the TMA's tile tensor), the first error among them
    given the parallelize call that makes an axis of the tile right of its first Bulk axis (serial,
    unrolled or a thread's) a box axis again, where a copy of the fusion with it verifies
    (propose_retype): a box axis given another type leaves a strided or short box, whose element
    stride, bytes, layout, alignment and swizzle then fail together."""
    proposed = False
    for d in findings:
        if not proposed and d.severity is Severity.ERROR:
            proposed = True
            first = next((k for k, i in enumerate(tile.loop) if i.parallel_type is ParallelType.Bulk), None)
            axes = [] if first is None else [
                (tile.name, k, ParallelType.Bulk) for k, i in enumerate(tile.loop)
                if k > first and k >= tile.compute_at and not i.is_broadcast
                and i.parallel_type not in (ParallelType.Bulk, ParallelType.Vectorize)]  # Vectorize: TMA-BULK-PLACEMENT's
            call = propose_retype(ctx, d, axes, BOX_CODES, BOX_CODES[:-1], mates_first=False) if axes else None
            if call is not None:
                d.hint += f"; or, where that axis belongs to the box: verified, {call} makes the box whole again"
        yield d


def _fixes(ctx: VerifyContext) -> dict[str, VerifyContext]:
    """diagnostic id -> the context of the fusion with that diagnostic's cause fixed (one per verify)."""
    return ctx.memo(("root-cause fixes",), dict)


# a fix's copy is judged by verdicts only: a claim it cannot decide within this counts as still
# failing (the fix not verified, or that finding not its consequence), so that checking causes
# costs a fraction of the verify (fuzz 116/469: ALLOCATION-DISTINCT re-run on each copy, 2.6 -> 6.9 s)
FIX_QUERY_MS = 300
CAUSES_CHECKED = 3  # causes whose consequences a verify looks for (one mistake rarely has more)


def group_by_cause(ctx: VerifyContext, report: Report) -> None:
    """Mark and reorder report.diagnostics in place (see the module docstring)."""
    fixes = _fixes(ctx)
    causes = [d for d in report.diagnostics if d.id in fixes]
    checked = 0
    for cause in causes:
        if cause.follows_from is not None:
            continue  # an earlier cause's fix removes it too: that cause explains its findings
        if checked == CAUSES_CHECKED:
            break  # each check re-runs the other errors' rules on the fixed copy (seconds, for z3's)
        checked += 1
        fixed = fixes[cause.id]
        # the other errors no cause explains yet, later causes among them (two rules may propose
        # the same fix: the one reported first keeps the others)
        others = [d for d in report.diagnostics if d.follows_from is None and d is not cause
                  and (d.id is None or d in causes) and d.severity is Severity.ERROR]
        still = _findings(fixed, {d.code for d in others})
        named = {cause.tensor} | {d.tensor for d in others if (d.code, d.tensor) not in still}
        warnings = [d for d in report.diagnostics if d.follows_from is None and d.severity is Severity.WARNING
                    and d.tensor is not None and d.tensor in named]
        still |= _findings(fixed, {d.code for d in warnings})
        ctx.queries += fixed.queries
        consequences = [d for d in others + warnings if (d.code, d.tensor) not in still]
        for d in consequences:
            d.follows_from = cause.id
        if consequences:
            listed = ", ".join(dict.fromkeys(f"{d.severity}[{d.code}]" for d in consequences))
            what = "the finding" if len(consequences) == 1 else f"the {len(consequences)} findings"
            cause.notes.append(f"this causes {what} listed after it ({listed}): with the fix below, "
                               f"{'it goes' if len(consequences) == 1 else 'they go'} away (re-verified)")
    _flatten(report.diagnostics)
    report.diagnostics = ordered(merge_repeats(report.diagnostics))


def _flatten(diagnostics: list[Diagnostic]) -> None:
    """Point each consequence at the root of its chain (a cause that follows an earlier one
    hands its own consequences to that one), so that every block is a root and what follows it."""
    by_id = {d.id: d for d in diagnostics if d.id is not None}
    for d in diagnostics:
        seen = set()
        while d.follows_from in by_id and by_id[d.follows_from].follows_from is not None and d.follows_from not in seen:
            seen.add(d.follows_from)
            d.follows_from = by_id[d.follows_from].follows_from


def merge_repeats(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """One error for a finding repeated on several tensors from the same line of the schedule (a
    parallel type that inlined producers share, one vector's operands): the same code, location,
    counterexample and cause, and the same message and help but for the tensor's name. The first
    is kept, with a note naming the other tensors; the others are dropped."""
    kept: list[Diagnostic] = []
    first: dict[tuple, Diagnostic] = {}
    for d in diagnostics:
        key = _repeat_key(d)
        head = first.get(key) if key is not None else None
        if head is None:
            if key is not None:
                first[key] = d
            kept.append(d)
            continue
        note = next((n for n in head.notes if n.startswith(_SAME)), None)
        if note is None:
            head.notes.append(f"{_SAME}{d.tensor}, from the same line of the schedule (reported once)")
        else:
            head.notes[head.notes.index(note)] = note.replace(", from the same line", f" and {d.tensor}, from the same line")
    return kept


_SAME = "the same finding holds for "


def _repeat_key(d: Diagnostic) -> tuple | None:
    """What two repeats of a finding share (None: the diagnostic is never merged)."""
    if not d.is_error or d.id is not None or not d.tensor or not d.location or d.internal:
        return None
    name = re.compile(rf"\b{re.escape(d.tensor)}\b")
    return (d.code, d.location, d.follows_from, name.sub("{t}", d.message), name.sub("{t}", d.hint or ""),
            repr(sorted(d.counterexample.items())) if d.counterexample else "")


def _findings(fixed: VerifyContext, codes: set[str]) -> set[tuple[str, str | None]]:
    """(code, tensor) of what the rules of `codes` find on the fixed fusion; a rule that crashes
    there keeps all of its findings (nothing is credited to the cause)."""
    found: set[tuple[str, str | None]] = set()
    for code in sorted(codes):
        try:
            found |= {(d.code, d.tensor) for d in RULES[code].func(fixed)}
        except Exception:  # noqa: BLE001 - the fix is judged conservatively
            found |= {(code, t.name) for t in fixed.fusion.tensors} | {(code, None)}
    return found


def ordered(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """One block per root cause, each cause followed by what follows from it; the blocks of
    errors first (causes before the other errors), then the warnings, each in report order."""
    ids = {d.id for d in diagnostics if d.id is not None}
    heads = [d for d in diagnostics if d.follows_from not in ids]
    rank = {id(d): (not d.is_error, d.id is None or d.follows_from is not None) for d in heads}
    out: list[Diagnostic] = []
    for head in sorted(heads, key=lambda d: rank[id(d)]):
        out.append(head)
        if head.id is not None:
            out += sorted((d for d in diagnostics if d.follows_from == head.id), key=lambda d: not d.is_error)
    return out
