"""Lowering a TMA copy: one cp.async.bulk.tensor per point of the consumer's non-Bulk loops; and a
1-D bulk copy (tp.LoadStoreOpType.CpAsyncBulk): one cp.async.bulk of the run its Bulk loops cover.

Everything comes from model.tma_layout, the functions the verifier proved: the box origin
(the instruction's coordinates) and the tile's first byte in shared memory (the
instruction's shared address), with the consumer's loop indices replaced by the kernel's
loop variables. The tensor map is the inferred TMA (dims innermost first), encoded at
launch. Bulk IDs are not loops: the instruction covers them. A 1-D bulk copy has no tensor map: its
source and destination are the run's first element (execution/bulk_copy.py, what BULK-COPY-*
proved), its size the run's bytes; its mbarriers, stages and pipelines are a TMA load's.
"""

from __future__ import annotations

import math

from ...model.expr import Expr, add, const, mod, mul, product, try_int
from ...execution.circular import circular_access, circular_axis, specialization, war_mbarrier
from ...model.fusion import Op
from ...model.tensor import TensorView
from ...hw.mbarrier import expect_tx_bytes, load_arrivals
from ...hw.bulk_copy import bulk_copy, is_async_bulk_op, is_bulk_copy
from ...hw.tma import InferredTma, TmaInfo, infer_tma
from ...execution.bulk_copy import bulk_issue
from ...execution.indexing import block_dims
from ...execution.promotion import broadcast_loops
from ...execution.tma_issue import build_issue
from ...execution.cluster import cluster_dims
from ...model.types import BLOCK_TYPES, THREAD_TYPES, Direction, ParallelType
from ..errors import UnsupportedSchedule
from ..ir import Cond, MBarrier, TensorMap, TmaCopy
from .loop_nest import LoopClass, NotLowered
from ...model.simplify import less_than, simplify

MAX_TMA_RANK = 5  # PTX ISA cp.async.bulk.tensor .dim = .1d .. .5d (verifier/analysis/tma.py MAX_RANK)


def is_tma(tv: TensorView) -> bool:
    """tv is written by the bulk-copy engine: a TMA, or a 1-D bulk copy."""
    return is_async_bulk_op(tv.definition)


class TmaLowering:
    """Builds TMA statements and collects the tensor maps and mbarriers they use."""

    def __init__(self, allocations, globals_):
        self.allocations = allocations
        self.globals = globals_
        self.tensor_maps: list[TensorMap] = []
        self.mbarriers: list[MBarrier] = []

    def statement(self, tv: TensorView, path: list[LoopClass], env: dict[int, Expr], ranges: dict[str, Expr],
                  issuer: list[Cond]) -> tuple[list[LoopClass], TmaCopy]:
        op = tv.definition
        if is_bulk_copy(op):
            return self._bulk(tv, path, env, ranges, issuer)
        tma = self._inferred(op)
        info = tma.info
        if info.rank > MAX_TMA_RANK:
            raise NotLowered(f"the TMA of {tv.name} has {info.rank} dimensions; cp.async.bulk.tensor has 1d to "
                             f"{MAX_TMA_RANK}d forms", rule="TMA-RANK")
        self._unshared(tv, path)
        issue = build_issue(tma, self.allocations[info.smem.name], env)
        coords = tuple(simplify(c, ranges) for c in issue.box_origin)
        bounds = []
        for b in issue.issue_bounds:
            value = simplify(b.value, ranges)
            if not less_than(value, b.extent, ranges):
                bounds.append(Cond(value, "<", b.extent, f"hole of {b.id.label()}"))
        tmap = self._tensor_map(info)
        barrier, circular, stage, arrive_when = None, None, None, None
        direction = info.direction
        if direction is Direction.LOAD:
            barrier = f"tp_bar_{tv.name}"
            alloc = self.allocations[info.smem.name]
            circular = circular_access(tv)
            if circular is not None:  # one mbarrier per stage: the copy completes on its stage's
                stage = simplify(mod(env[tv.loop[circular_axis(tv)].uid], const(alloc.stages)), ranges)
            arrive_when = self._mbarrier(tv, barrier, alloc.stages if circular else 1, circular, env, ranges)
        copy = TmaCopy(direction, tmap.param, info.smem.name, simplify(issue.dst_offset, ranges), coords,
                       expect_tx_bytes(info.bytes_per_transfer_expr), barrier, issuer, bounds, str(op), circular, stage,
                       specialization(tv) if circular is not None else None, circular is not None and war_mbarrier(tv),
                       _multicast(tv, env), arrive_when=arrive_when)
        return [c for i, c in zip(tv.loop, path) if i.parallel_type is not ParallelType.Bulk], copy

    def _bulk(self, tv: TensorView, path: list[LoopClass], env: dict[int, Expr], ranges: dict[str, Expr],
              issuer: list[Cond]) -> tuple[list[LoopClass], TmaCopy]:
        """One cp.async.bulk of the run tv's Bulk loops cover, from its first element, skipped where a
        hole at that element fails (BULK-COPY-BOUNDS proved the rest of the run then in bounds)."""
        copy = bulk_copy(tv.definition)
        if not copy.ok:
            raise UnsupportedSchedule(f"`{tv.definition}`: {'; '.join(copy.problems)}")
        self._unshared(tv, path)
        names = {u: e.value for u, e in env.items() if e.op == "var"}
        alloc = self.allocations[copy.smem.name]
        issue = bulk_issue(tv, block_dims(tv.fusion), alloc, names)
        bounds = []
        for c in issue.issue_bounds:
            value = simplify(c.lhs, ranges)
            if not less_than(value, c.rhs, ranges):
                bounds.append(Cond(value, c.op, c.rhs, c.why))
        es = copy.element_bytes
        smem_bytes = simplify(mul(issue.at_start(issue.smem_offset), const(es)), ranges)
        gmem_offset = simplify(issue.at_start(issue.gmem_offset), ranges)
        barrier, circular, stage, arrive_when = None, None, None, None
        if copy.direction is Direction.LOAD:
            barrier = f"tp_bar_{tv.name}"
            circular = circular_access(tv)
            if circular is not None:
                stage = simplify(mod(env[tv.loop[circular_axis(tv)].uid], const(alloc.stages)), ranges)
            arrive_when = self._mbarrier(tv, barrier, alloc.stages if circular else 1, circular, env, ranges)
        made = TmaCopy(copy.direction, "", copy.smem.name, smem_bytes, (), expect_tx_bytes(copy.bytes_expr), barrier,
                       issuer, bounds, str(tv.definition), circular, stage,
                       specialization(tv) if circular is not None else None, circular is not None and war_mbarrier(tv),
                       None, copy.gmem.name, gmem_offset, arrive_when=arrive_when)
        return [c for i, c in zip(tv.loop, path) if i.parallel_type is not ParallelType.Bulk], made

    def _mbarrier(self, tv: TensorView, barrier: str, stages: int, circular, env: dict[int, Expr],
                  ranges: dict[str, Expr]) -> list[Cond] | None:
        """Declares tv's load mbarrier, one arrival per issuing thread and copy of a phase; where the
        copies of a phase are not a constant count, one arrival per issuing thread, made where the
        returned conditions hold (its last copy of the phase: every loop inside the circular loop at
        its last index), the copies announcing their bytes alone (nvFuser's one arriveExpectTx per
        stage, whose bytes count every copy, in a form that also counts the copies a hole skips)."""
        per_phase = _copies_per_iteration(tv) if circular else 1
        self.mbarriers.append(MBarrier(barrier, load_arrivals(_issuers(tv), per_phase or 1), tv.name, stages))
        if per_phase is not None:
            return None
        return [Cond(simplify(env[i.uid], ranges), "==", simplify(i.extent_expr - 1, ranges),
                     f"the phase's last copy: {i.label()} at its last index") for i in _inside(tv)]

    @staticmethod
    def _unshared(tv: TensorView, path: list[LoopClass]) -> None:
        for i, cls in zip(tv.loop, path):
            if i.parallel_type is ParallelType.Bulk and len(cls.members) > 1:
                raise UnsupportedSchedule(
                    f"{tv.name}'s Bulk axis {i.label()} is shared through inlining with {', '.join(cls.members[1:])}; "
                    f"a tile axis is covered by the TMA instruction and cannot be a loop of another tensor")

    @staticmethod
    def _inferred(op: Op) -> InferredTma:
        tma = infer_tma(op)
        if not tma.info.ok:
            raise UnsupportedSchedule(f"`{op}`: the TMA could not be inferred: {'; '.join(tma.info.problems)}")
        if tma.mixes_tile:
            raise UnsupportedSchedule(f"`{op}` transforms tile and non-tile IDs together, so its shared-memory "
                                      f"layout is not proved; it is not lowered")
        return tma

    def _tensor_map(self, info: TmaInfo) -> TensorMap:
        # sizes and strides are the global layout's (model/global_layout.py), whose launch-time
        # strides the kernel binds from the array
        g = self.globals[info.gmem.name]
        dims = info.dims
        tmap = TensorMap(
            param=f"tmap_{info.consumer.name}",
            tensor=g.name,
            dtype=g.dtype,
            sizes=tuple(d.size_expr for d in dims),
            strides_bytes=tuple(d.stride_bytes_expr for d in dims[1:]),
            box=tuple(d.box_expr for d in dims),
            element_strides=tuple(d.element_stride_expr for d in dims),
            swizzle_bytes=info.swizzle_bytes,
            user_name=g.user_name,
        )
        self.tensor_maps.append(tmap)
        return tmap


def _multicast(tv: TensorView, env: dict[int, Expr]) -> tuple[str, int, Expr, int] | None:
    """(the cluster axis, the mask of the blocks along it from the first one's CTA rank, the rank
    along the axis that issues this copy, the CTA-rank distance of neighbours along the axis):
    ranks count x fastest, so the receivers are `extent` ranks `stride` apart. The copies of one iteration (tv's loops inside its circular loop) take
    turns over the ranks, so that a tile split into as many boxes as the cluster has blocks is
    loaded a box by each (CUTLASS's multicast split); a single copy, by the first."""
    m = tv.multicast_on
    if m is None:
        return None
    dims = cluster_dims(tv.fusion)
    at = BLOCK_TYPES.index(m.on)
    stride = math.prod(dims[:at])
    copy: Expr = const(0)
    for i in _inside(tv):
        copy = add(mul(copy, i.extent_expr), env[i.uid])
    return m.on.cuda_name[-1], sum(1 << (j * stride) for j in range(dims[at])), mod(copy, const(dims[at])), stride


def _inside(tv: TensorView) -> list:
    """tv's own loops inside its circular loop that issue copies (not Bulk: the instruction covers
    those; not a loop over broadcasts, which runs once: execution/promotion.py broadcast_loops)."""
    at = circular_axis(tv)
    once = broadcast_loops(tv.fusion)
    return [] if at is None else [i for k, i in enumerate(tv.loop) if k > at and (tv.name, k) not in once
                                  and i.parallel_type not in (ParallelType.Bulk, *THREAD_TYPES, *BLOCK_TYPES)]


def _copies_per_iteration(tv: TensorView) -> int | None:
    """A circular buffer's copies per iteration of its circular loop: the trip counts of tv's own
    loops inside it (not Bulk: the instruction covers those), None where that is not a constant.
    Each arrives on the stage's mbarrier, whose phase completes when all have (and their bytes have
    landed); the waits follow the circular loop's iteration, not each copy (model/pipeline.py)."""
    inside = _inside(tv)
    return try_int(product([i.extent_expr for i in inside])) if inside else 1


def _issuers(tv: TensorView) -> int:
    """Threads issuing one copy each per execution: the consumer's thread-parallel extents."""
    extents = [i.extent_expr for i in tv.loop if i.parallel_type in THREAD_TYPES and not i.is_broadcast]
    n = try_int(product(extents)) if extents else 1
    if n is None:
        raise UnsupportedSchedule(f"{tv.name} issues its TMA from a symbolic number of threads "
                                  f"({', '.join(str(e) for e in extents)}); the mbarrier needs a constant count")
    return n


__all__ = ["TmaLowering", "is_tma"]
