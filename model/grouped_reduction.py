"""Grouped reductions: tp.group_reductions (nvFuser's groupReductions) and the rfactor of a group.

Grouping reductions of the same iteration space says they run as one: nvFuser replaces them with
one GroupedReductionOp whose outputs are siblings, scheduled alike afterwards (a parallel type set
on one holds for all: model/loop_map.py gives a sibling's Serial loop axis its sibling's type, as
nvFuser's loop map maps siblings). The members run in one loop nest (execution/loops.py: their
loops are one, their accumulations run together, a producer inlined into two of them is computed
once there). The values are those of the separate reductions: nvFuser lowers a group's block,
warp and serial reductions one per output and combines only grid reductions in one round
(GroupedGridReduction); tileproof lowers every reduction of a group one per tensor, grid ones too
(each its own workspace and semaphore).

`group_reductions` checks at the call what nvFuser's validateReductionGrouping checks (an NVF_CHECK
there, a ScheduleError here); REDUCTION-GROUP (verifier/rules/reduction.py, through
`group_problems` in execution/conditions/reduction.py) checks again at verify time that the
grouped tensors are still scheduled alike. The groups are `Fusion.reduction_groups` (tuples of
tensors), part of the fingerprint.

Imports model/ only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from .errors import ScheduleError
from .fusion import MMA_OP
from .iterdomain import replay
from .mapping import IdMap
from .reduction import REDUCTIONS, is_reduction_tensor, rfactor
from .tensor_base import apply_replayed
from .welford import combine_partials, is_welford

if TYPE_CHECKING:
    from .tensor import TensorView


def group_of(tv) -> tuple | None:
    """The group tv's reduction belongs to (Fusion.reduction_groups), or None."""
    return next((g for g in tv.fusion.reduction_groups if any(t is tv for t in g)), None)


def _loops(tv) -> str:
    return "[" + ", ".join(i.label() for i in tv.loop) + "]"


def _depends_on(tv, outputs: Sequence) -> object | None:
    """The first of `outputs` that tv is computed from (tv itself aside), or None."""
    ids = {id(t) for t in outputs}
    stack, seen = list(tv.fusion.producers(tv)), set()
    while stack:
        t = stack.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        if id(t) in ids:
            return t
        stack.extend(tv.fusion.producers(t))
    return None


def grouping_mismatch(ref, tv, idmap: IdMap) -> str | None:
    """Why tv cannot run grouped with ref (nvFuser's validateReductionGrouping, one pair), or None:
    their logical domains (rank, broadcast and reduction axes in the same places, each pair of
    axes the same iteration), their loop domains (rank, each pair of axes derived by the same
    transforms) and their compute-at positions."""
    if len(tv.logical) != len(ref.logical):
        return (f"{tv.name} has {len(tv.logical)} logical axes, {ref.name} {len(ref.logical)}: grouped reductions "
                f"iterate one domain")
    if len(tv.loop) != len(ref.loop):
        return (f"{tv.name} has {len(tv.loop)} loop axes ({_loops(tv)}), {ref.name} {len(ref.loop)} "
                f"({_loops(ref)}): grouped reductions are scheduled alike")
    for k, (a, b) in enumerate(zip(ref.logical, tv.logical)):
        if a.is_broadcast != b.is_broadcast or a.is_reduction != b.is_reduction:
            return (f"logical axis {k} is {a.label()} in {ref.name} but {b.label()} in {tv.name}: broadcast and "
                    f"reduction axes must be in the same places")
        if not a.is_broadcast and not idmap.same(a, b):
            return (f"logical axis {k} of {ref.name} ({a.label()}) and of {tv.name} ({b.label()}) are not the same "
                    f"iteration (they do not come from one axis of a common producer, so their extents may differ)")
    for k, (a, b) in enumerate(zip(ref.loop, tv.loop)):
        if not idmap.same(a, b):
            return (f"loop axis {k} of {ref.name} ({a.label()}) and of {tv.name} ({b.label()}) are transformed "
                    f"differently ({ref.name}: {_loops(ref)}; {tv.name}: {_loops(tv)})")
    if tv.compute_at != ref.compute_at:
        return (f"{ref.name} is inlined at {ref.compute_at} and {tv.name} at {tv.compute_at}: grouped reductions "
                f"share their compute-at position")
    return None


def group_reductions(tensors) -> None:
    """Run the reductions computing `tensors` (outputs of tp.sum / tp.max / tp.min over one
    iteration space, scheduled alike) as one group (nvFuser's groupReductions): afterwards a
    parallel type given to a loop axis of one is its siblings' too, and `t.rfactor(axes,
    tensors)` rfactors them together. Raises ScheduleError where nvFuser's check throws: a tensor
    that is no such reduction (an MmaOp, an input, one already grouped), tensors of different
    fusions, logical domains that are not the same iteration (two inputs whose extents may
    differ), loop domains transformed differently (split by 128 and by 64), different compute-at
    positions, or one reduction computed from another's output.

        t1 = tp.sum(t0, [1]); t2 = tp.max(t0, [1])
        tp.group_reductions([t1, t2])"""
    if isinstance(tensors, (str, bytes)) or not hasattr(tensors, "__iter__"):
        raise ScheduleError(f"group_reductions: tensors must be a list of reduction outputs (TensorViews), got "
                            f"{type(tensors).__name__} {tensors!r:.60}")
    tensors = list(tensors)
    if not tensors:
        raise ScheduleError("group_reductions: tensors is empty; name the reduction outputs to group")
    fusion = getattr(tensors[0], "fusion", None)
    for tv in tensors:
        if not hasattr(tv, "logical") or not hasattr(tv, "fusion"):
            raise ScheduleError(f"group_reductions: tensors must hold TensorViews, got {type(tv).__name__} {tv!r:.60}")
        if tv.fusion is not fusion:
            raise ScheduleError(f"group_reductions: {tv.name} belongs to fusion {tv.fusion.name}, {tensors[0].name} "
                                f"to {fusion.name}; grouped reductions are of one fusion")
        if sum(t is tv for t in tensors) > 1:
            raise ScheduleError(f"group_reductions: {tv.name} appears twice in tensors")
        if tv.definition is None:
            raise ScheduleError(f"group_reductions: {tv.name} has no definition (a fusion input); group the "
                                f"outputs of tp.sum, tp.max or tp.min")
        op = tv.definition
        if not is_reduction_tensor(tv) or op.name == MMA_OP or op.name not in REDUCTIONS:
            raise ScheduleError(f"group_reductions: {tv.name} is not the output of a reduction (tp.sum, tp.max, "
                                f"tp.min) but of `{op}`")
        if group_of(tv) is not None:
            raise ScheduleError(f"group_reductions: {tv.name} is already grouped with "
                                f"{', '.join(t.name for t in group_of(tv) if t is not tv)}; group each reduction once")
    ref = tensors[0]
    idmap = IdMap(fusion)
    for tv in tensors[1:]:
        why = grouping_mismatch(ref, tv, idmap)
        if why is not None:
            raise ScheduleError(f"group_reductions: {ref.name} and {tv.name} cannot be grouped: {why}")
    for tv in tensors:
        for inp in tv.definition.inputs:
            source = inp if any(inp is t for t in tensors) else _depends_on(inp, tensors)
            if source is not None:
                raise ScheduleError(
                    f"group_reductions: {tv.name} reads {inp.name}, which is computed from {source.name}, another "
                    f"reduction of the group: grouped reductions run at once, so none may depend on another")
    fusion.reduction_groups.append(tuple(tensors))


def _replay_like(ref, tv) -> None:
    """Replay ref's transforms and loop order on tv, a sibling whose logical axes map one to one to
    ref's and which is not transformed yet (nvFuser's TransformReplay::selfReplay); the parallel
    types are copied by position."""
    idmap = IdMap(tv.fusion)
    have = {idmap.key(b): b for b in tv.logical}
    for t in ref.history:
        ins = [have.get(idmap.key(i)) for i in t.inputs]
        new = replay(t, ins, tv.fusion.next_iterdomain_number)
        apply_replayed(tv, new)
        for o, ref_o in zip(new.outputs, t.outputs):
            have[idmap.key(ref_o)] = o
    tv.loop = [have[idmap.key(i)] for i in ref.loop]
    for mine, theirs in zip(tv.loop, ref.loop):
        mine.set_parallel_type(theirs.parallel_type, theirs.parallel_origin)


def rfactor_group(tv, axes, tensors) -> list:
    """TensorView.rfactor(axes, tensors): rfactor every reduction of tv's group (`tensors`, the
    group in its order) on the loop axes `axes`, tv's transforms replayed first on the others
    (which must still be untransformed, or transformed as tv); the partial reductions form a group
    of their own and the group stays grouped. Returns the partial tensors in `tensors`' order.
    nvFuser: TensorView::rFactor(axes, tvs)."""
    group = group_of(tv)
    if group is None:
        raise ScheduleError(f"rfactor: tensors is given but {tv.name} is not grouped (tp.group_reductions); "
                            f"rfactor it alone: {tv.name}.rfactor(axes)")
    if isinstance(tensors, (str, bytes)) or not hasattr(tensors, "__iter__"):
        raise ScheduleError(f"rfactor: tensors must be the list of {tv.name}'s group, got {tensors!r:.60}")
    tensors = list(tensors)
    if len(tensors) != len(group) or any(a is not b for a, b in zip(tensors, group)):
        raise ScheduleError(f"rfactor: tensors must be {tv.name}'s group in its order "
                            f"[{', '.join(t.name for t in group)}], got [{', '.join(getattr(t, 'name', repr(t)) for t in tensors)}]")
    idmap = IdMap(tv.fusion)
    for other in group:
        if other is tv:
            continue
        if other.history and grouping_mismatch(tv, other, idmap) is not None:
            raise ScheduleError(f"rfactor: {other.name} is transformed ({_loops(other)}) differently from "
                                f"{tv.name} ({_loops(tv)}); schedule one of the group and rfactor through it")
        if other.compute_at:
            raise ScheduleError(f"rfactor: {other.name} is inlined at {other.compute_at}; rfactor before inlining")
    for other in group:
        if other is not tv and not other.history:
            _replay_like(tv, other)
    groups = tv.fusion.reduction_groups
    groups.remove(group)  # rfactor refuses a grouped tensor alone
    partials = [rfactor(t, axes) for t in group]
    groups += [tuple(partials), group]
    if is_welford(tv):  # each final output combines the three partial states (model/welford.py)
        combine_partials(group, partials)
    return partials


__all__ = ["group_of", "group_reductions", "grouping_mismatch", "rfactor_group"]
