"""Index maps derived from the IterDomain graph, shared by the verifier and the code generator.

Loop indices (and thread/block indices) -> every IterDomain of the consumer (backward
through its transforms) -> the producer's logical axes (through the op) -> the
producer's IterDomains (forward through its transforms) -> allocation offsets.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..hw.threads import producer_indices
from ..model.expr import Expr, add, const, floordiv, maximum, mod, mul, product, try_int, var
from ..model.iterdomain import IterDomain
from .promotion import promotion
from ..model.tensor import TensorView
from ..model.types import THREAD_TYPES, BLOCK_TYPES, ParallelType
from .circular import specialization


def loop_var(tv: TensorView, i: IterDomain) -> Expr:
    """The index of loop ID i: a thread/block index, or the loop counter `T2.i12`."""
    p = i.parallel_type
    if p in THREAD_TYPES or p in BLOCK_TYPES:
        return var(p.cuda_name)
    return var(f"{tv.name}.{i.name}")


def indices_from_loop(tv: TensorView, loop_env: dict[int, Expr] | None = None) -> dict[int, Expr]:
    """uid -> index for every ID of tv, computed backward from its loop domain (and, where its
    inlined loops iterate its consumer's space, from the consumer's IDs: execution/promotion.py)."""
    idx: dict[IterDomain, Expr] = {}
    for i in tv.loop:
        idx[i] = loop_env[i.uid] if loop_env and i.uid in loop_env else loop_var(tv, i)
    promo = promotion(tv)
    seeded: set[int] = set()
    if promo is not None:
        cidx = indices_from_loop(promo.consumer, promo.consumer_env(tv, {i.uid: e for i, e in idx.items()}))
        by_uid = {i.uid: i for i in tv.all_ids()}
        for u, c in promo.seeds.items():
            idx[by_uid[u]] = cidx[c.uid]
        seeded = set(promo.seeds)
        idx.update({i: cidx[i.uid] for i in promo.holes})  # the consumer's holes at this point (valid_item_bounds)
    for t in reversed(tv.history):
        if all(o in idx for o in t.outputs) and not all(x in idx for x in t.inputs):
            idx.update({x: e for x, e in t.backward(idx).items() if x.uid not in seeded})
    for t in tv.history:  # IDs scheduled from the loop or logical IDs (an allocation domain)
        if all(x in idx for x in t.inputs) and not all(o in idx for o in t.outputs):
            idx.update(t.forward(idx))
    return {i.uid: e for i, e in idx.items()}


def indices_from_logical(tv: TensorView, logical: list[Expr]) -> dict[int, Expr]:
    """uid -> index for every ID of tv, computed forward from its logical indices."""
    idx: dict[IterDomain, Expr] = dict(zip(tv.logical, logical))
    for t in tv.history:
        if all(x in idx for x in t.inputs):
            idx.update(t.forward(idx))
    return {i.uid: e for i, e in idx.items()}


def indices_from_root(tv: TensorView, root: list[Expr]) -> dict[int, Expr]:
    """uid -> index for every ID of tv, computed forward from its root indices (the logical
    ones but for an rfactor's partial reduction, whose logical domain derives from its root)."""
    idx: dict[IterDomain, Expr] = dict(zip(tv.root, root))
    for t in tv.history:
        if all(x in idx for x in t.inputs):
            idx.update(t.forward(idx))
    return {i.uid: e for i, e in idx.items()}


def producer_logical(op, k: int, consumer_idx: dict[int, Expr]) -> list[Expr]:
    """The logical indices of op.inputs[k] read at the consumer's point (the op maps the
    consumer's root axes to the producer's logical axes)."""
    out_logical = op.output.root
    producer = op.inputs[k]
    result: list[Expr] = [const(0)] * len(producer.logical)
    for j, src in enumerate(op.logical_map[k]):
        if src is not None and not producer.logical[src].is_broadcast:
            result[src] = consumer_idx[out_logical[j].uid]
    return result


@dataclass(frozen=True)
class Bound:
    """`value < extent` must hold for the point to be a valid item (not a hole)."""

    id: IterDomain
    value: Expr
    extent: Expr


def valid_item_bounds(tv: TensorView, idx: dict[int, Expr]) -> list[Bound]:
    """The bounds a point of tv's loop nest must satisfy to be executed (holes are predicated)."""
    promo = promotion(tv)
    loop_uids = {i.uid for i in tv.loop} | (promo.loop_only if promo else set())
    out = []
    for i in tv.all_ids() + (list(promo.holes) if promo else []):
        if i.uid in idx and i.uid not in loop_uids and not i.is_broadcast:
            out.append(Bound(i, idx[i.uid], i.extent_expr))
    return out


def linear_offset(ids_strides: dict[int, Expr], idx: dict[int, Expr]) -> Expr:
    return add(*(mul(idx[u], s) for u, s in ids_strides.items()))


def executed_tensors(fusion) -> list[TensorView]:
    return [t for t in fusion.tensors if t.definition is not None]


def block_dims(fusion) -> dict[ParallelType, Expr]:
    """blockDim/gridDim per parallel type: the largest extent bound to it (others predicate), and
    on a warp-specialized circular buffer's axis the producer's indices after the consumers':
    one warpgroup (hw/threads.py producer_indices: one index on TIDy over 128 threads of TIDx,
    128 on TIDx; execution/warp_roles.py). A broadcast axis sizes nothing where an iteration
    axis is bound to the type too (nvFuser's ParallelDimensionMap skips broadcasts: their every
    index holds the same value; parallelize_all_like binds them to the axes they meet). A view of
    an input (model/producer_aliases.py) runs nothing but sizes the launch as the tensor it was:
    nvFuser builds its ParallelDimensionMap before findTensorProducerAliases drops the op
    (TMemTestCompileOnly.WrongStride's global copy on TIDx{33} makes the block 33 threads wide)."""
    dims: dict[ParallelType, list[Expr]] = {}
    broadcast_dims: dict[ParallelType, list[Expr]] = {}
    roles = set()
    views = [t for t in fusion.tensors if t.name in fusion.views]
    for tv in executed_tensors(fusion) + views:
        promo = promotion(tv)
        for k, i in enumerate(tv.loop):
            if i.parallel_type in THREAD_TYPES or i.parallel_type in BLOCK_TYPES:
                # a promoted loop runs over its reference's extent (nvFuser's ParallelDimensionMap reads promoted IDs)
                extent = promo.extent(tv, k) if promo is not None and not i.is_broadcast else i.extent_expr
                (broadcast_dims if i.is_broadcast else dims).setdefault(i.parallel_type, []).append(extent)
        if specialization(tv) is not None:
            roles.add(specialization(tv).on)
    for p, es in broadcast_dims.items():
        dims.setdefault(p, es)  # bound to broadcasts only: they size it, as before
    out = {p: maximum(*es) for p, es in dims.items()}
    for p in roles:
        out[p] = add(out.get(p, const(1)), const(producer_padding(out, p)))
    return out


def producer_padding(dims: dict[ParallelType, Expr], on: ParallelType) -> int:
    """The indices a warp-specialized axis `on` gets for its producer in a block of `dims`:
    producer_indices of the threads on the other axes (nvFuser pads by 128 / those threads)."""
    return producer_indices(try_int(product([dims[q] for q in THREAD_TYPES if q != on and q in dims])))


def producer_start(dims: dict[ParallelType, Expr], on: ParallelType) -> Expr:
    """The warp-specialized producer's first index on `on` in a launch of `dims` (padded by
    block_dims): the consumers' extent, after which the producer's indices follow. Its first
    thread there issues the loads (statements.py's single writer on `on`)."""
    return add(dims[on], const(-producer_padding(dims, on)))


def thread_dims(fusion) -> tuple[Expr, Expr, Expr]:
    d = block_dims(fusion)
    return tuple(d.get(p, const(1)) for p in THREAD_TYPES)  # type: ignore[return-value]


def grid_dims(fusion) -> tuple[Expr, Expr, Expr]:
    """gridDim.x, .y, .z the kernel is launched with: the largest extent bound to BIDx / BIDy /
    BIDz (1 where none is). LAUNCH-GRID proves them within the hardware's limits."""
    d = block_dims(fusion)
    return tuple(d.get(p, const(1)) for p in BLOCK_TYPES)  # type: ignore[return-value]


def vector_index(indices: list[Expr], extents: list[Expr]) -> Expr:
    """The register (element of one instruction) at a point of the Vectorize IDs: their
    indices row-major over their extents, the last ID fastest. vector_point inverts it."""
    e: Expr = const(0)
    for index, extent in zip(indices, extents):
        e = add(mul(e, extent), index)
    return e


def vector_point(register: Expr | int, extents: list[Expr]) -> list[Expr]:
    """The index of each Vectorize ID at `register` (the inverse of vector_index)."""
    point, inner = [], const(1)
    for extent in reversed(extents):
        point.append(mod(floordiv(register, inner), extent))
        inner = mul(inner, extent)
    return point[::-1]
