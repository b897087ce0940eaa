"""Compute-at positions: inline_at, inline_all_at, inline_most.

A tensor may be inlined into its consumers at position p when, for every
consumer, its loop axes k < p meet consumer loop axes in order (model/loop_alignment.py: a
consumer axis the tensor has no part in, the broadcast a BroadcastOp makes, is passed over, as
nvFuser's getMatchedLeafPosWithoutReplayCasP does; every consumer places them alike) that are the
same iteration (IdMap) or that the tensor's axis is promoted to (mapping.promoted: a broadcast),
neither vectorized (a vector is produced whole, not per element), no tensor is inlined past
its own reduction axes (its consumers read totals, after its loops), nor along a logical axis one
consumer reduces while another reads it after that total (model/unmappable.py: a persistent axis,
nvFuser's unmappable dims; softmax's exp(x - max), read by the sum and by the division by it).
The best-effort forms (inline_most, inline_all_at) also stop before a Bulk or an Unroll axis of the
tensor or of a consumer, as nvFuser's do (MaxPosCalculator::isAllowedID with best_effort): a TMA tile
axis is covered by one instruction and is not a loop another tensor can share, and an unrolled loop
is left to the statements bound to it. inline_at may still be asked to go past an Unroll axis:
the producer then runs in the unrolled loop (model/loop_map.py gives it the type). Every form then
moves the position left past the tensor's innermost broadcast loop axes, as nvFuser's inlineAt
does: a TMA tile [b, K/64, b{4}, ...] is loaded once per K step, not once per iteration of the
loop its broadcast b{4} would share.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import ScheduleError, user_location
from .loop_alignment import matched_positions
from .mapping import IdMap
from .tensor_base import TensorBase
from .types import OpKind, ParallelType
from .unmappable import unmappable_axes
from .welford import is_welford

# what best-effort inlining stops before, besides what every inlining does (nvFuser's isAllowedID,
# best_effort): a TMA tile axis, an unrolled loop, a grouped axis (nvFuser's
# validateAndConvertIterDomainGrouping: the compute-at position stays left of a Group axis), and a
# tensor-core instruction's axis (one instruction computes its whole tile: LOWERING-SUPPORTED)
STOPS_BEST_EFFORT = {ParallelType.Bulk: "a TMA tile axis (Bulk)", ParallelType.Unroll: "unrolled (Unroll)",
                     ParallelType.Group: "grouped (Group)", ParallelType.Mma: "a tensor-core instruction's axis (Mma)"}

if TYPE_CHECKING:
    from .tensor import TensorView


def max_inline_position(tv: TensorView, idmap: IdMap | None = None, *,
                        best_effort: bool = False, unmappable: dict[int, str] | None = None) -> tuple[int, str]:
    """The largest legal compute-at position and why it stops there (`best_effort`: inline_most's
    and inline_all_at's, stopping before a Bulk, Unroll, Group or Mma axis of tv or of a consumer too).
    `unmappable`: model/unmappable.py's unmappable_axes of the fusion, when already built.
    nvFuser: MaxPosCalculator::getMaxPosAll."""
    idmap = idmap or IdMap(tv.fusion)
    unmappable = unmappable_axes(tv.fusion) if unmappable is None else unmappable
    consumers = tv.fusion.consumers(tv)
    if tv.is_fusion_input or not consumers:
        return 0, "fusion inputs and tensors without consumers are not inlined"
    # the consumer loop position each of tv's loop axes shares, past the consumer's own broadcasts
    matched = {c.name: matched_positions(idmap, tv, c, len(tv.loop)) for c in consumers}
    placed = {name: at for name, (at, _) in matched.items()}
    for k, i in enumerate(tv.loop):
        if i.is_reduction and tv.online is None:  # its consumers read the totals, after the reduction's loops
            return k, f"axis {k} of {tv.name} ({i.label()}) is a reduction axis"
        if i.parallel_type is ParallelType.Vectorize:
            return k, f"axis {k} of {tv.name} ({i.label()}) is vectorized"
        persistent = next((unmappable[a.uid] for a in _logical_sources(tv, i) if a.uid in unmappable), None)
        if persistent is not None:
            return k, (f"axis {k} of {tv.name} ({i.label()}) is persistent: {persistent} "
                       f"(nvFuser's unmappable dims)")
        if best_effort and i.parallel_type in STOPS_BEST_EFFORT:
            return k, f"axis {k} of {tv.name} ({i.label()}) is {STOPS_BEST_EFFORT[i.parallel_type]}"
        for c in consumers:
            at = placed[c.name]
            if k >= len(at):
                stop = matched[c.name][1]
                where = f"{c.name}'s axis {stop}" if stop < len(c.loop) else f"an axis of {c.name}"
                return k, f"axis {k} of {tv.name} ({i.label()}) does not map to {where}"
            ck = c.loop[at[k]]
            if ck.parallel_type is ParallelType.Vectorize:
                return k, f"axis {at[k]} of consumer {c.name} ({ck.label()}) is vectorized"
            if best_effort and ck.parallel_type in STOPS_BEST_EFFORT:
                why = STOPS_BEST_EFFORT[ck.parallel_type]
                return k, f"axis {at[k]} of consumer {c.name} ({ck.label()}) is {why}"
        if len({tuple(at[:k + 1]) for at in placed.values()}) > 1:
            return k, f"axis {k} of {tv.name} ({i.label()}) lies at different positions of its consumers' loops"
    return len(tv.loop), "every axis maps"


def _logical_sources(tv: TensorView, i) -> list:
    """The logical IDs of tv that loop ID i derives from (nvFuser's isAllowedID walks the same)."""
    if i in tv.logical:
        return [i]
    t = i.definition
    return [] if t is None else [a for x in t.inputs for a in _logical_sources(tv, x)]


def set_compute_at(tv: TensorView, pos: int, *, best_effort: bool, idmap: IdMap | None = None) -> None:
    if isinstance(pos, bool) or not isinstance(pos, int):
        raise ScheduleError(f"inline_at: position must be an int, got {pos!r}")
    n = len(tv.loop)
    p = pos + n + 1 if pos < 0 else pos
    if not 0 <= p <= n:
        raise ScheduleError(f"inline_at: position {pos} is out of range for {tv.name} with {n} loop axes")
    limit, why = max_inline_position(tv, idmap, best_effort=best_effort)
    if p > limit:
        if not best_effort:
            raise ScheduleError(f"inline_at: {tv.name} can be inlined at most at position {limit}: {why}")
        p = limit
    _set_position(tv, hoisted_past_broadcasts(tv, p), raise_only=best_effort)


def _set_position(tv: TensorView, pos: int, *, raise_only: bool) -> None:
    """tv's compute-at position set to pos; `raise_only` (the best-effort forms): only where pos is
    deeper, as nvFuser's inlineAt ("if (pos <= compute_at_pos_) return"), so that inline_most on a
    scheduled fusion keeps every position it does not deepen. An explicit inline_at may also move a
    position out (nvFuser ignores it; here it applies, as reports' inline_at(k) fixes do)."""
    if raise_only and pos <= tv.compute_at:
        return
    tv.compute_at = pos
    tv.compute_at_origin = user_location()  # rules about the position point at the call that set it


def hoisted_past_broadcasts(tv: TensorView, pos: int) -> int:
    """pos moved left past tv's innermost broadcast loop axes: a statement is not placed inside
    loops it does not vary in (nvFuser's TensorView::inlineAt, 'hoist inner most broadcast')."""
    if _reads_running_max(tv):
        return pos  # an online max's running value varies along its loop, which may be a broadcast one of tv's
    while pos > 0 and tv.loop[pos - 1].is_broadcast:
        pos -= 1
    return pos


def _reads_running_max(tv: TensorView) -> bool:
    """Whether tv is computed from an online max (model/online.py) by ops that reduce nothing."""
    stack = list(tv.definition.inputs) if tv.definition is not None else []
    while stack:
        t = stack.pop()
        if t.online is not None:
            return True
        if t.definition is not None and t.definition.kind is not OpKind.REDUCTION:
            stack.extend(t.definition.inputs)
    return False


def inline_all_at(ref: TensorView, pos: int) -> None:
    """Inline every tensor at the position that corresponds to ref's `pos` (best effort)."""
    if not isinstance(ref, TensorBase):
        raise ScheduleError(f"inline_all_at: expected a TensorView, got {type(ref).__name__}")
    n = len(ref.loop)
    p = pos + n + 1 if isinstance(pos, int) and pos < 0 else pos
    if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p <= n:
        raise ScheduleError(f"inline_all_at: position {pos!r} is out of range for {ref.name} with {n} loop axes")
    idmap = IdMap(ref.fusion)
    keys = {idmap.key(i) for i in ref.loop[:p]}
    for tv in ref.fusion.tensors:
        if tv.is_fusion_input:
            continue
        k = 0
        while k < len(tv.loop) and idmap.key(tv.loop[k]) in keys:
            k += 1
        set_compute_at(tv, k, best_effort=True, idmap=idmap)
    _siblings_alike(ref.fusion)


def inline_most(fusion) -> None:
    """Inline every tensor as far as it goes: up to a vectorized, Bulk, Unroll, Group or Mma axis,
    or the first axis that does not map to a consumer's; a position already deeper stays (nvFuser:
    inlineMost)."""
    idmap, unmappable = IdMap(fusion), unmappable_axes(fusion)
    for tv in fusion.tensors:
        if not tv.is_fusion_input:
            at = max_inline_position(tv, idmap, best_effort=True, unmappable=unmappable)[0]
            _set_position(tv, hoisted_past_broadcasts(tv, at), raise_only=True)
    _siblings_alike(fusion)


def _siblings_alike(fusion) -> None:
    """The outputs of one Welford op (model/welford.py) at the smallest position of those with
    consumers: siblings share their loops, as nvFuser's MaxPosCalculator takes the least position
    over siblingTvsOf; an output nothing reads (the count of tp.var_mean) bounds nothing."""
    for group in fusion.reduction_groups:
        if is_welford(group[0]):
            read = [t.compute_at for t in group if fusion.consumers(t)]
            at = min(read or [t.compute_at for t in group])
            for t in group:
                t.compute_at = at
