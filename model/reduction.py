"""Reductions: tp.sum, tp.max and tp.min over axes (nvFuser's ReductionOp) and rFactor.

The output of a reduction keeps each reduced axis in its logical domain as a reduction
IterDomain (IterType.Reduction), as nvFuser does; its shape (the arrays run() binds, the axes
other ops see) drops them (nvFuser's keep_dim=False). The op maps the output's root axes one to
one to the input's, so the index algebra reads the input at every point of the output's loop
nest, reduction loops included.

How a reduction's statement runs (init, accumulate, the block's combine, store) is derived in
execution/reduction.py, once for the verifier and the code generator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING


from .errors import ScheduleError
from .fusion import Op
from .iterdomain import IterDomain, as_index, replay
from .tensor_base import _normalize_contiguity, check_tensor
from .types import (
    DataType, IterType, OpKind, ParallelType,
)

if TYPE_CHECKING:
    from .tensor import TensorView

REDUCTIONS = ("sum", "max", "min")
COMBINE = {"sum": "add", "max": "maximum", "min": "minimum", "fms": "add",
           # a Welford output's (model/welford.py): the three partials combine together, by Chan's formula
           "welford_avg": "welford", "welford_var_sum": "welford", "welford_n": "welford"}  # fms: an MmaOp (model/mma_op.py), a sum of products  # the binary op (model/ops.py BINARY) that combines two partials
LOOPS = (ParallelType.Serial, ParallelType.Unroll, ParallelType.Unswitch)  # a reduction axis bound to these is a loop of its statement
_LOWEST = {"int8": -2 ** 7, "int32": -2 ** 31, "int64": -2 ** 63}
_HIGHEST = {"int8": 2 ** 7 - 1, "int32": 2 ** 31 - 1, "int64": 2 ** 63 - 1}


def element_axes(tv: TensorView) -> list[int]:
    """The positions of tv's logical axes that are in its shape: all but reduction axes."""
    return [k for k, i in enumerate(tv.logical) if not i.is_reduction]


def is_reduction_tensor(tv: TensorView) -> bool:
    """Whether tv is computed by a reduction (tp.sum, tp.max, tp.min, or the partial one of an rfactor)."""
    return tv.definition is not None and tv.definition.kind is OpKind.REDUCTION


def neutral(op_name: str, dtype: DataType) -> int | float:
    """The value a combine leaves unchanged, representable in `dtype` (a partial of an rfactor is
    stored in the reduction's dtype): 0 for sum; for max -inf, or the integer dtype's lowest;
    for min +inf, or the integer dtype's highest."""
    if op_name in ("sum", "fms") or op_name.startswith("welford_"):  # a Welford state starts empty: 0, 0, 0
        return 0 if dtype.is_integer else 0.0
    if op_name == "min":
        return _HIGHEST[dtype.name] if dtype.is_integer else float("inf")
    return _LOWEST[dtype.name] if dtype.is_integer else float("-inf")


# -- the ops ---------------------------------------------------------------------------------------

def _axes(func: str, tv: TensorView, axes) -> list[int]:
    """`axes` (positions in tv's shape, negative from the end) as positions of tv.logical, sorted: a
    reduction's output keeps its reduced axes in its logical domain, not in its shape."""
    shape = element_axes(tv)
    n = len(shape)
    single = as_index(axes)
    if single is not None:
        listed = [single]
    elif isinstance(axes, (list, tuple)):
        listed = list(axes)
    else:
        raise ScheduleError(f"{func}: axes must be an int or a list of ints, got {type(axes).__name__} {axes!r:.60}")
    if not listed:
        raise ScheduleError(f"{func}: axes is empty; name at least one axis of {tv.name} to reduce")
    out = []
    for a in listed:
        k = as_index(a)
        if k is None:
            raise ScheduleError(f"{func}: axes must hold ints, got {type(a).__name__} {a!r:.60}")
        if not -n <= k < n:
            raise ScheduleError(f"{func}: axis {k} is out of range for {tv.name} with {n} dimensions")
        k %= n
        if shape[k] in out:
            raise ScheduleError(f"{func}: axis {k} appears twice in axes {list(listed)}")
        if tv.logical[shape[k]].is_broadcast:
            raise ScheduleError(
                f"{func}: axis {k} of {tv.name} ({tv.logical[shape[k]].label()}) is a broadcast axis, which holds one "
                f"value: there is nothing to reduce; drop it from axes")
        out.append(shape[k])
    return sorted(out)


def reduction(name: str, tv, axes) -> TensorView:
    """`name` (sum, max or min) of tv over `axes`: a new tensor whose logical domain keeps the
    reduced axes as reduction IterDomains and whose shape drops them."""
    if name not in REDUCTIONS:
        raise ScheduleError(f"unknown reduction {name!r}; supported: {', '.join(REDUCTIONS)}")
    check_tensor(name, tv)
    if tv.dtype.is_bool:
        raise ScheduleError(f"{name}: {tv.name} is bool; reduce numbers: cast it first (tp.cast({tv.name}, "
                            f"tp.int32) counts the true values with tp.sum)")
    return reduce_axes(name, tv, _axes(name, tv, axes))


def reduce_axes(name: str, tv, reduced: list[int], dtype: DataType | None = None) -> TensorView:
    """The output of reduction `name` of tv over its logical positions `reduced` (checked), its op
    recorded: reduction IDs where reduced, tv's other axes' iteration types elsewhere; of `dtype`
    (tv's where None)."""
    shape = element_axes(tv)  # a reduction's output is reduced again over its shape (nvFuser's noReductions)
    ids = []
    for k in shape:
        kind = IterType.Reduction if k in reduced else tv.logical[k].iter_type
        ids.append(IterDomain(tv.logical[k].extent_expr, number=tv.fusion.next_iterdomain_number(), iter_type=kind))
    out = tv.new_tensor(ids, dtype or tv.dtype)
    tv.fusion._register_op(Op(OpKind.REDUCTION, [tv], out, [shape], name=name))
    return out


# -- rFactor ----------------------------------------------------------------------------------------

def _group(tv: TensorView) -> tuple:
    """The reductions tv is grouped with (tp.group_reductions, model/grouped_reduction.py), tv included;
    empty where it is not grouped."""
    return next((g for g in tv.fusion.reduction_groups if any(t is tv for t in g)), ())


def _derives(tv: TensorView) -> dict[int, set[int]]:
    """uid -> the uids of tv's root IDs it derives from."""
    out = {i.uid: {i.uid} for i in tv.root}
    for t in tv.history:
        src = set().union(*(out.get(x.uid, set()) for x in t.inputs))
        for o in t.outputs:
            out[o.uid] = src
    return out


def rfactor(tv: TensorView, axes) -> TensorView:
    """TensorView.rfactor: the partial reduction over the loop axes `axes`, which is returned;
    tv then reduces the remaining reduction axes of the partial one."""
    fusion = tv.fusion
    op = tv.definition
    if not is_reduction_tensor(tv):
        raise ScheduleError(f"rfactor: {tv.name} is not the output of a reduction (tp.sum, tp.max, tp.min)")
    group = _group(tv)
    if group:
        raise ScheduleError(f"rfactor: {tv.name} is grouped with {', '.join(t.name for t in group if t is not tv)} "
                            f"(tp.group_reductions); rfactor the group together: {tv.name}.rfactor(axes, "
                            f"[{', '.join(t.name for t in group)}])")
    if tv.online is not None or len(op.inputs) == 2 and op.name == "sum" or op.rescale_max is not None:
        raise ScheduleError(f"rfactor: {tv.name} is online (set_online); rfactor before set_online")
    if len(op.inputs) != 1 and op.name != "fms" and not op.name.startswith("welford_"):
        raise ScheduleError(f"rfactor: {tv.name} is the output of `{op}`; tileproof rfactors tp.sum, tp.max, tp.min "
                            f"and tp.fused_multiply_sum")
    if as_index(axes) is not None:
        axes = [axes]
    if not isinstance(axes, (list, tuple)) or not axes:
        raise ScheduleError(f"rfactor: axes must be an int or a non-empty list of loop positions, got {axes!r:.60}")
    picked = []
    for a in axes:
        k = tv._norm_axis("rfactor", a, "axes entry")
        if not tv.loop[k].is_reduction:
            raise ScheduleError(f"rfactor: axis {k} of {tv.name} ({tv.loop[k].label()}) is not a reduction axis; "
                                f"rfactor moves reduction axes into the partial reduction")
        if k in picked:
            raise ScheduleError(f"rfactor: axis {k} appears twice in axes {list(axes)}")
        picked.append(k)
    left = [k for k, i in enumerate(tv.loop) if i.is_reduction and k not in picked]
    if not left:
        raise ScheduleError(f"rfactor: axes {list(axes)} are all of {tv.name}'s reduction axes; leave at least one "
                            f"for {tv.name} to reduce (split a reduction axis first)")
    roots = {i.uid for i in tv.root}
    if any(i.uid not in roots for i in tv.logical):  # its logical axes are the loop axes of an earlier rfactor
        raise ScheduleError(f"rfactor: {tv.name} is the partial reduction of an earlier rfactor; rfactor the reduction "
                            f"that reads it again (its remaining reduction axes), whose partial then reads {tv.name}")
    if tv.compute_at:
        raise ScheduleError(f"rfactor: {tv.name} is inlined at {tv.compute_at}; rfactor before inlining")
    if tv.allocation is not None:
        raise ScheduleError(f"rfactor: {tv.name} has an allocation domain; rfactor before setting it")

    # The partial tensor takes tv's domain: its root is tv's logical domain, its logical domain the
    # iteration axes plus the loop IDs the reduction axes became; reduction loop IDs not rfactored
    # become its iteration axes (one partial per point of them).
    with fusion:
        part = tv.new_tensor(list(tv.logical), tv.dtype)
    derives = _derives(tv)
    reduced_roots = {i.uid for i in tv.logical if i.is_reduction}
    reduction_leaves = [i for i in tv.loop if derives[i.uid] & reduced_roots]
    first = next(k for k, i in enumerate(tv.logical) if i.is_reduction)
    logical = [i for i in tv.logical[:first] if not i.is_reduction] + reduction_leaves \
        + [i for i in tv.logical[first:] if not i.is_reduction]
    part.root, part.logical = list(tv.root), logical  # the root: what the op maps (a committed logical domain permutes it)
    part.history, part.loop = list(tv.history), list(tv.loop)
    for k in left:
        tv.loop[k].iter_type = IterType.Iteration
    part.contiguity = _normalize_contiguity(None, part.logical, "rfactor")
    op.output, part.definition = part, op

    # tv: fresh IDs, one per logical axis of the partial tensor that the partial one does not reduce;
    # the iteration transforms replayed on them, so loop positions and parallel types stay.
    numbers = fusion.next_iterdomain_number
    new: dict[int, IterDomain] = {}
    root, mapping = [], []
    for k, i in enumerate(part.logical):
        if i.is_reduction:
            continue
        was_reduction = i in reduction_leaves
        copy = IterDomain(i.extent_expr, number=numbers(),
                          iter_type=IterType.Reduction if was_reduction else i.iter_type, origin=i.origin)
        new[i.uid] = copy
        root.append(copy)
        mapping.append(k)
    history = []
    for t in part.history:
        if not all(x.uid in new for x in t.inputs) or any(derives[x.uid] & reduced_roots for x in t.inputs):
            continue  # a transform of the reduction axes: the partial tensor did it
        r = replay(t, [new[x.uid] for x in t.inputs], numbers)
        history.append(r)
        for o, ro in zip(t.outputs, r.outputs):
            new[o.uid] = ro
    old_positions = {i.uid: k for k, i in enumerate(tv.logical)}
    tv.logical = tv.root = root
    tv.history = history
    tv.loop = [new[i.uid] for k, i in enumerate(part.loop) if k not in picked]
    for old, i in zip([i for k, i in enumerate(part.loop) if k not in picked], tv.loop):
        i.set_parallel_type(old.parallel_type, old.parallel_origin)
    tv.contiguity = _normalize_contiguity(None, tv.logical, "rfactor")
    tv.allocation = None
    # consumers of tv name its axes by logical position: renumber them for the new logical domain
    position = {old_positions[i.uid]: j for j, i in enumerate(part.logical) if i.uid in old_positions}
    renumber = {old: root.index(new[part.logical[j].uid]) for old, j in position.items()
                if part.logical[j].uid in new and not part.logical[j].is_reduction}
    for use in fusion.uses_of(tv):
        for k, t in enumerate(use.inputs):
            if t is tv:
                use.logical_map[k] = [None if a is None else renumber[a] for a in use.logical_map[k]]
    # an MmaOp's partial keeps the products; tv sums the partial's terms (nvFuser's split-K rFactor)
    final = Op(OpKind.REDUCTION, [part], tv, [mapping], name="sum" if op.name == "fms" else op.name)
    fusion.exprs.insert(fusion.exprs.index(op) + 1, final)
    tv.definition = final
    # the partial tensor was registered last: move it before tv, so fusion order stays producers first
    fusion.tensors.remove(part)
    fusion.tensors.insert(fusion.tensors.index(tv), part)
    return part


def cache_before(tv: TensorView, op_type) -> TensorView:
    """TensorView.cache_before of a reduction's output: a new (register) tensor takes tv's domain
    and computes the reduction; tv becomes a copy of its shape (fresh IDs, no reduction axes),
    as nvFuser's cacheBefore does. Returns the new tensor."""
    fusion = tv.fusion
    old = tv.definition
    if tv.compute_at:
        raise ScheduleError(f"cache_before: {tv.name} is inlined at {tv.compute_at}; cache before inlining")
    if _group(tv) and tv.definition.name.startswith("welford_"):
        raise ScheduleError(f"cache_before: {tv.name} is an output of tp.welford (with "
                            f"{', '.join(t.name for t in _group(tv) if t is not tv)}); tileproof does not cache one "
                            f"output of a multi-output op before it: copy it after instead (tp.set({tv.name}))")
    if _group(tv):
        raise ScheduleError(f"cache_before: {tv.name} is a grouped reduction (tp.group_reductions); call "
                            f"cache_before before grouping and group the caches")
    with fusion:
        new = tv.new_tensor(list(tv.logical), tv.dtype)
    new.root, new.logical, new.history, new.loop = list(tv.root), list(tv.logical), list(tv.history), list(tv.loop)
    new.allocation = None
    new.contiguity = _normalize_contiguity(None, new.logical, "cache_before")
    old.output, new.definition = new, old
    axes = element_axes(new)
    numbers = fusion.next_iterdomain_number
    copies = [IterDomain(new.logical[k].extent_expr, number=numbers(), iter_type=new.logical[k].iter_type,
                         origin=new.logical[k].origin) for k in axes]
    renumber = {k: j for j, k in enumerate(axes)}
    tv.logical = tv.root = copies
    tv.loop, tv.history, tv.allocation = list(copies), [], None
    tv.contiguity = _normalize_contiguity(None, copies, "cache_before")
    for use in fusion.uses_of(tv):
        for k, t in enumerate(use.inputs):
            if t is tv:
                use.logical_map[k] = [None if a is None else renumber[a] for a in use.logical_map[k]]
    op = Op(OpKind.LOAD_STORE, [new], tv, [axes], name="set", op_type=op_type)
    fusion.exprs.insert(fusion.exprs.index(old) + 1, op)
    tv.definition = op
    fusion.tensors.remove(new)
    fusion.tensors.insert(fusion.tensors.index(tv), new)
    return new


# -- how a reduction statement runs -----------------------------------------------------------------



# -- what the code generator lowers (the verifier's reduction rules report these) ---------------------



__all__ = ["COMBINE", "REDUCTIONS", "cache_before", "element_axes", "is_reduction_tensor", "neutral", "reduce_axes",
           "reduction", "rfactor"]
