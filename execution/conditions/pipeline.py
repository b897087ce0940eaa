"""What a circular buffer needs to be lowered (PIPELINE-STAGES, and LOWERING-SUPPORTED through
lowering.py): a serial circular loop, at least two stages, 0 <= prefetch < stages, buffers of one
loop agreeing, and copies of a kind the pipeline lowers. How the pipeline runs is
execution/pipeline.py."""

from __future__ import annotations


from ...hw.cp_async import is_cp_async
from ...model.types import THREAD_TYPES as LAUNCHED_THREADS, MemoryType, ParallelType
from ...model.options import WarpSpecialized
from ...model.mma_op import is_wgmma_op
from ...hw.tma import is_tma_op
from ...hw.bulk_copy import is_async_bulk_op, is_bulk_copy
from ...model.iterdomain import Split
from ...model.expr import try_int
from ..circular import circular_axis, circular_tensors
from ..problems import Problem
from ..loops import execution_order, loop_groups
from ..circular import is_register_copy, is_shared_copy


def stage_problems(fusion) -> list:
    """PIPELINE-STAGES: each circular buffer has a serial circular loop, at least two stages and
    0 <= prefetch < stages, and the circular buffers of one loop agree on both numbers."""
    out = []
    order = execution_order(fusion)
    computed = {t.name for t in order}
    by_loop: dict[int, list] = {}
    groups = None
    for tv in circular_tensors(fusion):
        if tv.name not in computed:
            continue
        c = tv.circular
        where = dict(tensor=tv.name, location=c.origin or tv.origin)
        pos = circular_axis(tv)
        if pos is None:
            out.append(Problem(
                f"{tv.name} is circular-buffered but not inlined into a loop: its compute-at position is 0, so no "
                f"loop iterates over its tiles",
                hint=f"inline {tv.name} right after its serial (K) loop axis: inline_at(k + 1) for loop axis k",
                values={"compute_at": tv.compute_at, "stages": c.stages}, **where))
            continue
        axis = tv.loop[pos]
        register = tv.memory_type is MemoryType.Local
        loops = (ParallelType.Serial, ParallelType.Unroll) if register else (ParallelType.Serial,)
        # a loop of one iteration (K one tile) is a circular loop too: its prologue's copies past
        # the extent are predicated off, as for a symbolic K of one tile (nvFuser accepts both)
        if axis.parallel_type not in loops or axis.is_broadcast:
            kind = "a broadcast" if axis.is_broadcast else f"parallelized on {axis.parallel_type}"
            out.append(Problem(
                f"{tv.name}'s circular loop, its axis {pos} ({axis.label()}) just left of its compute-at position "
                f"{tv.compute_at}, is {kind}: a circular buffer needs a {'serial or unrolled' if register else 'serial'} "
                f"loop over its tiles",
                hint=f"inline {tv.name} right after its serial (K) loop axis (inline_at(k + 1) for that axis k)",
                ids=(axis.name,), values={"axis": pos, "compute_at": tv.compute_at}, **where))
            continue
        if register:
            out += _sources_inside(tv, pos, where)
        if c.stages < 2:
            out.append(Problem(
                f"{tv.name} is circular-buffered with {c.stages} stage: a stage cannot be refilled while it is read, "
                f"so one stage leaves no copy in flight (the loop would wait for each tile in full)",
                hint=f"circular_buffer({tv.name}, 2) or more stages (2 stages, 1 copy ahead)",
                values={"stages": c.stages, "prefetch": c.prefetch},
                notes=("nvFuser refuses it too (TensorView::circularBuffer: \"Unsupported stage number\")",), **where))
        elif not 0 <= c.prefetch < c.stages:
            raw = "CPASYNC-WAIT" if is_cp_async(tv.definition) else "PIPELINE-RAW"  # TMA stages, registers: RAW
            why = ("a stage would be refilled before the iteration that reads it is done (PIPELINE-WAR)"
                   if c.prefetch >= c.stages else f"the copy of an iteration would be issued after its reads ({raw})")
            out.append(Problem(
                f"{tv.name} prefetches {c.prefetch} copies ahead with {c.stages} stages; the prefetch must be at least 0 "
                f"and below the stages: {why}",
                hint=f"use a prefetch from 0 to {c.stages - 1} (circular_buffer({c.stages}) prefetches "
                     f"{c.stages - 1}), or more stages",
                values={"stages": c.stages, "prefetch": c.prefetch}, **where))
        groups = groups or loop_groups(fusion, order)
        group = groups.of.get((tv.name, pos))
        if group is not None:
            by_loop.setdefault(group.index, []).append(tv)
    for tvs in by_loop.values():
        first = tvs[0]
        for tv in tvs[1:]:
            if _kind(tv) != _kind(first):
                out.append(Problem(
                    f"{first.name} ({_kind(first)}) and {tv.name} ({_kind(tv)}) are circular-buffered over one loop: "
                    f"tileproof pipelines a loop's circular buffers as one kind of copy (cp.async's commit and wait "
                    f"groups, TMA's mbarriers, the barriers of plain copies into shared memory, or registers in "
                    f"program order), and the other's copies would not be waited for",
                    hint=f"copy {tv.name} as {first.name} is copied, or circular-buffer it over another loop",
                    tensor=tv.name, values={"stages": tv.circular.stages, "prefetch": tv.circular.prefetch},
                    location=tv.circular.origin or tv.origin))
                continue
            a, b = first.circular, tv.circular
            if (a.stages, a.prefetch) != (b.stages, b.prefetch):
                out.append(Problem(
                    f"{first.name} ({a.stages} stages, prefetch {a.prefetch}) and {tv.name} ({b.stages} stages, prefetch "
                    f"{b.prefetch}) are circular-buffered over one loop with different numbers; tileproof pipelines a "
                    f"loop with one wait per iteration, for one prefetch",
                    hint=f"give {tv.name} the numbers of {first.name}: circular_buffer({a.stages}, {a.prefetch})",
                    tensor=tv.name, values={"stages": b.stages, "prefetch": b.prefetch},
                    location=b.origin or tv.origin))
    return out


def _kind(tv) -> str:
    """How a circular buffer's copies are pipelined (execution/pipeline.py insert_pipelines)."""
    if is_async_bulk_op(tv.definition):
        return "TMA or bulk copies"
    if is_cp_async(tv.definition):
        return "cp.async"
    return "registers" if tv.memory_type is MemoryType.Local else "plain copies into shared memory"


def _sources_inside(tv, pos: int, where: dict) -> list:
    """A register circular buffer's copy of iteration i + prefetch runs in iteration i: each
    source it reads must be complete before the circular loop, so computed outside it."""
    out = []
    for src in tv.definition.inputs:
        if src.definition is not None and src.compute_at > pos:
            out.append(Problem(
                f"{tv.name} is circular-buffered over its axis {pos} ({tv.loop[pos].label()}), but its source "
                f"{src.name} is computed inside that loop (compute-at position {src.compute_at}): the copy of "
                f"iteration i + {tv.circular.prefetch}, issued in iteration i, would read {src.name} before that "
                f"iteration writes it",
                hint=f"inline {src.name} at most at {pos}, outside {tv.name}'s circular loop, or circular-buffer "
                     f"{tv.name} over a loop inside {src.name}'s",
                ids=(tv.loop[pos].name,), values={"axis": pos, f"{src.name} compute_at": src.compute_at},
                **dict(where, location=src.compute_at_origin or where["location"])))
    return out


def _bulk_inner_holes(tv, at, c) -> list:
    """nvFuser's restriction on a circular-buffered 1-D bulk load: its loops inside the circular loop
    come from divisible splits (a constant extent, a multiple of the factor), as nvFuser's one
    predicate per iteration needs ('Loop domains between circular buffer and 1D TMA load requires
    divisible split', csrc/predicate_compute.cpp)."""
    out = []
    for i in tv.loop[at + 1:] if at is not None else []:
        split = i.definition
        if i.parallel_type is ParallelType.Bulk or not isinstance(split, Split):
            continue
        n, f = try_int(split.divided), try_int(split.factor)
        if n is None or f is None or n % f:
            out.append(Problem(
                f"{tv.name}'s 1-D bulk load runs in {i.label()}, inside its circular loop, from {split}, which is not "
                f"known divisible; tileproof, as nvFuser, requires the loops between a circular loop and its 1-D bulk "
                f"load to come from divisible splits",
                hint=f"split {split.in_.label()} by a factor that divides its extent, or move the loop outside the "
                     f"circular loop",
                tensor=tv.name, ids=(i.name,), values={"stages": c.stages}, location=c.origin or tv.origin))
    return out


def unsupported_pipelines(fusion, order) -> list:
    """What LOWERING-SUPPORTED rejects of circular buffering: tileproof pipelines cp.async, TMA and
    plain copies into shared memory, and plain copies or ldmatrix into registers."""
    out = []
    for tv in order:
        c = getattr(tv, "circular", None)
        if c is None:
            continue
        shared = tv.memory_type is MemoryType.Shared
        if not (shared and (is_cp_async(tv.definition) or is_async_bulk_op(tv.definition))) and not is_register_copy(tv) \
                and not is_shared_copy(tv):
            out.append(Problem(
                f"{tv.name} is circular-buffered, but it is neither a shared tensor filled by a copy (cp.async, TMA or "
                f"tp.set) nor registers filled by a copy (`{tv.definition}`, {tv.memory_type.value.lower()} memory); "
                f"tileproof circular-buffers those only",
                hint=f"fill {tv.name} with a copy (tp.set, cp.async or TMA) into shared memory, or with a plain copy or "
                     f"ldmatrix into registers, or drop circular_buffer",
                tensor=tv.name, values={"stages": c.stages}, location=c.origin or tv.origin))
        at = circular_axis(tv)
        if shared and is_bulk_copy(tv.definition):
            out += _bulk_inner_holes(tv, at, c)
        if isinstance(c.type, WarpSpecialized):
            if not (shared and is_async_bulk_op(tv.definition)):
                out.append(Problem(
                    f"{tv.name} is circular-buffered with WarpSpecialized, but it is not a shared tensor a TMA loads "
                    f"(`{tv.definition}`); tileproof's producer warpgroup issues TMA loads only",
                    hint=f"load {tv.name} with tv.cache_after(tp.LoadStoreOpType.TMA) into shared memory, or use "
                         f"tp.Pipelined()",
                    tensor=tv.name, values={"stages": c.stages}, location=c.origin or tv.origin))
        elif is_bulk_copy(tv.definition):
            out.append(Problem(
                f"{tv.name} is a 1-D bulk load (CpAsyncBulk) circular-buffered with {type(c.type).__name__}; "
                f"tileproof, as nvFuser, pipelines 1-D bulk loads with WarpSpecialized only",
                hint=f"use {tv.name}.circular_buffer(..., tp.WarpSpecialized(tp.ParallelType.TIDy)), or load "
                     f"{tv.name} by TMA (tp.LoadStoreOpType.TMA)",
                tensor=tv.name, values={"stages": c.stages}, location=c.origin or tv.origin))
        elif c.type.uses_mbarrier_for_war:
            readers = tv.fusion.consumers(tv)
            by_wgmma = [r for r in readers if r.definition is not None and is_wgmma_op(r.definition)]
            mixed = by_wgmma and len(by_wgmma) < len(readers)
            if not (shared and is_tma_op(tv.definition)) or mixed:
                thread_reader = next(r for r in readers if r not in by_wgmma) if mixed else None
                out.append(Problem(
                    f"{tv.name} is circular-buffered with Pipelined(uses_mbarrier_for_war=True), but "
                    + (f"{by_wgmma[0].name} reads it with a wgmma and {thread_reader.name} with threads "
                       f"(`{thread_reader.definition}`): a stage is released after a warpgroup's wgmma.wait_group, or "
                       f"by each thread after its reads, not both" if mixed else
                       f"it is not a shared tensor a TMA loads (`{tv.definition}`): tileproof lowers mbarrier WAR "
                       f"for TMA loads only"),
                    hint="use tp.Pipelined() (uses_mbarrier_for_war=False): a __syncthreads guards the refill",
                    tensor=tv.name, values={"stages": c.stages}, location=c.origin or tv.origin))
            threads_outside = [i for i in (tv.loop[:at] if at is not None else []) if i.parallel_type in LAUNCHED_THREADS]
            if not by_wgmma and threads_outside:
                out.append(Problem(
                    f"{tv.name} is circular-buffered with Pipelined(uses_mbarrier_for_war=True) and read by threads, "
                    f"each of which releases a stage on its empty mbarrier, but its circular loop runs inside "
                    f"{threads_outside[0].label()}: threads outside that axis's extent would not arrive",
                    hint=f"put {tv.name}'s thread axes inside its circular loop, or use tp.Pipelined()",
                    tensor=tv.name, ids=(threads_outside[0].name,), location=c.origin or tv.origin))
    return out
