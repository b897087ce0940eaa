"""Schedule-wide helpers: transform propagation and parallelize_all_like.

`propagate_transforms(ref)` replays ref's transforms on every other tensor
(nvFuser's TransformPropagator over MaxLogicalDomainInfoSpanningTree), reusing
IterDomains an earlier propagation already created, then orders each loop
domain like ref's."""

from __future__ import annotations

from typing import Iterable

from .errors import ScheduleError
from .iterdomain import Merge, Split, Swizzle
from .mapping import IdMap
from .tensor import TensorView, apply_replayed
from .types import ParallelType


def _check_ref(op: str, ref) -> None:
    if not isinstance(ref, TensorView):
        raise ScheduleError(f"{op}: expected a reference TensorView, got {type(ref).__name__}")


def propagate_transforms(ref: TensorView) -> None:
    _check_ref("propagate_transforms", ref)
    fusion = ref.fusion
    idmap = IdMap(fusion)
    for tv in fusion.tensors:
        if tv is ref:
            continue
        _replay(idmap, ref, tv)


def _replay(idmap: IdMap, ref: TensorView, tv: TensorView) -> None:
    have = idmap.by_key(tv)
    for t in ref.history:
        if all(idmap.key(o) in have for o in t.outputs):
            continue
        ins = [have.get(idmap.key(i)) for i in t.inputs]
        if any(i is None or i not in tv.loop for i in ins):
            continue  # best effort: this tensor lacks an input (e.g. a broadcast-only axis)
        if isinstance(t, Split):
            new = Split.make(ins[0], t.factor, t.inner_split, t.outer.origin)
        elif isinstance(t, Merge):
            new = Merge.make(ins[0], ins[1], t.out.origin)
        elif isinstance(t, Swizzle):
            new = Swizzle.make(ins[0], ins[1], t.x_out.origin)
        else:  # pragma: no cover
            raise TypeError(f"unknown transform {t!r}")
        apply_replayed(tv, new)
        for o in new.outputs:
            have[idmap.key(o)] = o
    ref_keys = [idmap.key(i) for i in ref.loop]
    by_key = {idmap.key(i): i for i in tv.loop}
    ordered = [by_key[k] for k in ref_keys if k in by_key]
    rest = [i for i in tv.loop if i not in ordered]
    tv.loop = ordered + rest


def parallelize_all_like(ref: TensorView, parallel_types: Iterable[ParallelType] | None = None,
                         tensors: Iterable[TensorView] | None = None) -> None:
    """Copy ref's parallel types onto the mapped loop IDs of the other tensors."""
    _check_ref("parallelize_all_like", ref)
    types = None if parallel_types is None else set(parallel_types)
    for p in types or ():
        if not isinstance(p, ParallelType):
            raise ScheduleError(f"parallelize_all_like: {p!r} is not a tp.ParallelType")
    idmap = IdMap(ref.fusion)
    ref_types = {idmap.key(i): i.parallel_type for i in ref.loop}
    for tv in (ref.fusion.tensors if tensors is None else tensors):
        if tv is ref:
            continue
        for i in tv.loop:
            p = ref_types.get(idmap.key(i))
            if p is not None and (types is None or p in types):
                i.parallel_type = p
