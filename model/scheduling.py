"""Schedule-wide helpers: transform propagation and parallelize_all_like.

`propagate_transforms(ref)` replays ref's transforms on every other tensor
(nvFuser's TransformPropagator over MaxLogicalDomainInfoSpanningTree), reusing
IterDomains an earlier propagation already created, then orders each loop
domain like ref's."""

from __future__ import annotations

from typing import Iterable

from .errors import ScheduleError, user_location
from .iterdomain import Merge, replay, wrong_enum
from .mapping import IdMap
from .tensor import TensorView
from .tensor_base import apply_replayed
from .types import ParallelType


def _check_ref(op: str, ref) -> None:
    if not isinstance(ref, TensorView):
        raise ScheduleError(f"{op}: expected a reference TensorView for ref, got {type(ref).__name__} {ref!r:.60}")


def _listed(arg: str, values, element: str) -> list:
    """values as a list; a lone value or a string (iterable, but not a list of them) is refused."""
    if isinstance(values, (str, bytes, ParallelType, TensorView)) or not hasattr(values, "__iter__"):
        raise ScheduleError(f"parallelize_all_like: {arg} must be a list of {element}, "
                            f"got {type(values).__name__} {values!r}")
    return list(values)


def propagate_transforms(ref: TensorView) -> None:
    """Replay ref's splits, merges and swizzles on every other tensor of its fusion, on the axes
    that map to ref's, then order each loop domain like ref's (best effort: a tensor without an
    axis a transform needs keeps its own). A broadcast axis maps to the axis an op meets it on,
    so it is split, merged and ordered like that axis; a merge of an axis with one the tensor
    lacks because that one is a broadcast elsewhere (a tensor before its tp.broadcast) stands for
    the axis the tensor has. Parallel types are not copied: parallelize_all_like does that.
    Raises ScheduleError, changing nothing, where the replay would change a loop axis left of a
    tensor's compute-at position or of where a producer is inlined into it (propagate before
    inlining). nvFuser: TransformPropagator over MaxLogicalDomainInfoSpanningTree
    (ReplayTransformations with PairwiseLogicalDomainMap, which maps broadcasts; validateDomain
    refuses a domain that would invalidate a compute-at or max producer position).

        t2.split(0, 128); tp.propagate_transforms(t2); tp.parallelize_all_like(t2)"""
    _check_ref("propagate_transforms", ref)
    fusion = ref.fusion
    idmap = IdMap(fusion, map_broadcast=True)
    before = {id(tv): (list(tv.loop), list(tv.history)) for tv in fusion.tensors}
    for tv in fusion.tensors:
        if tv is ref:
            continue
        _replay(idmap, ref, tv)
    held = _inlined_positions(fusion)
    for tv in fusion.tensors:
        old = before[id(tv)][0]
        k = next((k for k, (a, b) in enumerate(zip(old, tv.loop)) if a is not b), min(len(old), len(tv.loop)))
        if k == len(old) == len(tv.loop) or k >= held[id(tv)][0]:
            continue
        position, why = held[id(tv)]
        new = tv.loop[k].label() if k < len(tv.loop) else "no axis"
        for t in fusion.tensors:
            t.loop, t.history = before[id(t)][0], before[id(t)][1]
        raise ScheduleError(
            f"propagate_transforms: replaying {ref.name}'s transforms would change {tv.name}'s loop axis {k} "
            f"({old[k].label()} -> {new}), left of {why} {position}; propagate before inlining "
            f"(nvFuser's TransformPropagator refuses the same)")


def _inlined_positions(fusion) -> dict[int, tuple[int, str]]:
    """Per tensor (by id): the loop axes inlining holds fixed (its compute-at position, or the
    largest at which a producer is inlined into it: nvFuser's max producer position) and what holds
    them."""
    held = {}
    for tv in fusion.tensors:
        p = tv.inlined_producer()
        held[id(tv)] = ((p.compute_at, f"where its producer {p.name} is inlined into it, position")
                        if p is not None and p.compute_at > tv.compute_at else
                        (tv.compute_at, "its compute-at position"))
    return held


def _broadcast_elsewhere(idmap: IdMap, missing, tv: TensorView) -> bool:
    """Whether ref's ID `missing`, absent from tv, derives only from axes tv lacks and some
    tensor holds as a broadcast (nvFuser's ReplayTransformations forwards a merge with such an
    ID to the other input)."""
    own = set().union(*(idmap.root_classes(i) for i in tv.root + tv.logical))
    classes = idmap.root_classes(missing)
    return bool(classes) and all(idmap.holds_broadcast(c) and c not in own for c in classes)


def _replay(idmap: IdMap, ref: TensorView, tv: TensorView) -> None:
    have = idmap.by_key(tv)  # ref's ID's key -> tv's ID standing for it
    for t in ref.history:
        if all(idmap.key(o) in have for o in t.outputs):
            continue
        ins = [have.get(idmap.key(i)) for i in t.inputs]
        if isinstance(t, Merge) and ins.count(None) == 1:
            found = next(i for i in ins if i is not None)
            missing = t.inputs[ins.index(None)]
            if _broadcast_elsewhere(idmap, missing, tv):
                have[idmap.key(t.out)] = found
            continue
        if any(i is None or i not in tv.loop for i in ins):
            continue  # best effort: this tensor lacks an input (e.g. a reduced axis)
        if len({i.is_reduction for i in ins}) > 1:
            continue  # a reduction axis merges or swizzles only with reduction axes (TensorView.merge)
        new = replay(t, ins, tv.fusion.next_iterdomain_number)
        apply_replayed(tv, new)
        for o, ref_o in zip(new.outputs, t.outputs):
            have[idmap.key(ref_o)] = o
    ordered = []
    for i in ref.loop:
        mine = have.get(idmap.key(i))
        if mine is not None and mine in tv.loop and mine not in ordered:
            ordered.append(mine)
    tv.loop = ordered + [i for i in tv.loop if i not in ordered]


def parallelize_all_like(ref: TensorView, parallel_types: Iterable[ParallelType] | None = None,
                         tensors: Iterable[TensorView] | None = None, *, pos: int = -1,
                         parallelize_inputs_on_did: bool = False) -> None:
    """Copy the parallel types of ref's loop IDs left of `pos` (default -1: all of them) onto the
    loop IDs of other tensors that map to them in nvFuser's permissive map: a broadcast maps to
    the axis an op meets it on, both ways, and a merge with a tensor's new broadcast axis to its
    other input (IdMap permissive). `parallel_types`: only these types (default all); `tensors`:
    only these tensors (default every tensor of the fusion). Fusion inputs are left alone (their
    loops are their consumers'), unless `parallelize_inputs_on_did`: then they take device types.
    nvFuser: scheduler_utils::parallelizeAllLike (ComputeAtMap PERMISSIVE_RESIZE).

        t2.axis(0).parallelize(tp.ParallelType.BIDx); tp.parallelize_all_like(t2)"""
    _check_ref("parallelize_all_like", ref)
    listed_types = [] if parallel_types is None else _listed("parallel_types", parallel_types, "tp.ParallelType")
    for p in listed_types:
        if not isinstance(p, ParallelType):
            raise wrong_enum("parallelize_all_like", "parallel_types", ParallelType, p)
    types = None if parallel_types is None else set(listed_types)
    targets = ref.fusion.tensors if tensors is None else _listed("tensors", tensors, "TensorView")
    for tv in targets:
        if not isinstance(tv, TensorView):
            raise ScheduleError(f"parallelize_all_like: tensors must hold TensorViews, got {type(tv).__name__} {tv!r}")
        if tv.fusion is not ref.fusion:
            raise ScheduleError(f"parallelize_all_like: tensors holds {tv.name}, which belongs to another fusion "
                                f"than ref {ref.name}")
    n = len(ref.loop)
    if isinstance(pos, bool) or not isinstance(pos, int) or not -n - 1 <= pos <= n:
        raise ScheduleError(f"parallelize_all_like: pos must be an int in [{-n - 1}, {n}] for {ref.name} "
                            f"of {n} loop axes, got {pos!r}")
    if not isinstance(parallelize_inputs_on_did, bool):
        raise ScheduleError(f"parallelize_all_like: parallelize_inputs_on_did must be a bool, "
                            f"got {parallelize_inputs_on_did!r}")
    idmap = IdMap(ref.fusion, permissive=True)
    ref_ids = {idmap.key(i): i for i in ref.loop[:pos if pos >= 0 else pos + n + 1]}
    here = user_location()
    for tv in targets:
        if tv is ref or (tv.is_fusion_input and not parallelize_inputs_on_did):
            continue
        for i in tv.loop:
            r = ref_ids.get(idmap.key(i))
            if r is None or (tv.is_fusion_input and not r.parallel_type.is_device):
                continue
            if types is None or r.parallel_type in types:
                i.set_parallel_type(r.parallel_type, r.parallel_origin or here)  # where ref's axis got it
