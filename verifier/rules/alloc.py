"""Allocations: budgets (shared memory, tensor-memory lanes and columns, threads per block)
and layouts (distinct elements at distinct addresses)."""

from __future__ import annotations

from typing import Iterator

import z3

from ...execution.allocation import Allocation, complete_cut_below
from ...execution.statements import store_execution
from ...execution.tmem_regions import TmemRegion, tmem_regions
from ...execution.mma_execution import mma_execution
from ...execution.mma import well_formed
from ...execution.reduction import block_reductions
from ...execution.smem_plan import SCRATCH, dynamic_limit, static_bytes
from ...model.expr import Expr, const, evaluate, product, var
from ...execution.indexing import linear_offset
from ...model.expr import expr_str
from ...model.simplify import Simplifier
from ...model.tensor_base import fixed_by
from ...model.types import BLOCK_TYPES, DEVICE_TYPES, THREAD_TYPES, MemoryType
from ..context import VerifyContext
from ..diagnostics import Diagnostic
from ..findings import finding, report_outcome, report_values, when_clause
from ..monotone import growing, prove_at_most
from ..registry import rule
from ..solver import Outcome, Verdict


def _table(alloc) -> list[dict]:
    return [
        {"tensor": alloc.tensor.name, "id": a.id.name, "label": a.id.label(), "allocated": a.allocated,
         "rule": a.rule, "reason": a.reason, "side": a.side}
        for a in alloc.ids
    ]


@rule("SMEM-CAPACITY", family="alloc")
def smem_capacity(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """The shared memory a block allocates fits the target's per-block limit.

    What it checks:
        The block's dynamic shared memory as the kernel lays it out (execution/smem_plan.py:
        every shared-memory tensor, allocated per the three allocation rules (not allocated
        across BID/DID, always allocated across TID, otherwise by compute-at position), each
        at its alignment, then the block reductions' scratch) is at most the target's opt-in
        limit (232448 bytes on sm_90a) less the static shared memory the kernel declares (its
        mbarriers and tensor memory's address slot, rounded up to the 1024 bytes the dynamic
        base is aligned to) for every admitted size.
    Why the hardware needs it:
        A launch that asks for more shared memory than the block may have fails with
        CUDA_ERROR_INVALID_VALUE; the kernel never runs. Static and dynamic shared memory
        count together.
    Example:
        fusion, t0, t1, t2 = copy_chain("big_smem", [1024, 1024])
        t1.set_memory_type(tp.MemoryType.Shared)  # the whole 4 MiB tensor in one block's shared memory
    Fix:
        fusion, t0, t1, t2 = copy_chain("tiled_smem", [1024, 1024])
        t1.set_memory_type(tp.MemoryType.Shared)
        for t in (t1, t2):
            t.axis(0).parallelize(tp.ParallelType.BIDx)  # a 4 KiB row a block
    References:
        CUDA driver API cuFuncSetAttribute (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES); measured on H200;
        docs/hardware.md#shared-memory-per-block
    """
    # Formal statement: for all admitted sizes s (symbol ranges, bindings, assumptions):
    #   plan.total(s) <= target.smem_bytes_per_block - roundup(static bytes, 1024)
    #   (plan.total: the last buffer's end, each buffer at its alignment; bytes_T = element bytes x
    #   product of T's allocated extents)
    allocs = [ctx.allocations[t.name] for t in ctx.tensors_in(MemoryType.Shared)]
    scratch = ctx.smem_plan.buffers.get(SCRATCH)  # block reductions' partials (model/reduction.py)
    if not allocs and scratch is None:
        return
    total = ctx.smem_plan.total
    cap = dynamic_limit(ctx.fusion, ctx.target.smem_bytes_per_block)
    out = prove_at_most(ctx, total, cap, {"bytes": total, **{a.tensor.name: a.bytes_expr for a in allocs},
                                          **({SCRATCH: scratch.bytes} if scratch else {})})
    first = allocs[0].tensor if allocs else block_reductions(ctx.fusion, ctx.executed())[0].tensor
    where = dict(tensor=first.name if len(allocs) <= 1 else None,
                 ids=[x.id.name for a in allocs for x in a.allocated()], location=first.memory_origin or first.origin)
    yield from report_outcome("SMEM-CAPACITY", out, "that shared memory fits",
                              lambda out: _over_capacity(ctx, allocs, out, where), **where)


def _over_capacity(ctx: VerifyContext, allocs: list[Allocation], out: Outcome, where: dict) -> Diagnostic:
    sizes = ctx.symbols_of(out.model)
    cap = dynamic_limit(ctx.fusion, ctx.target.smem_bytes_per_block)
    static = static_bytes(ctx.fusion)
    parts = ", ".join([f"{a.tensor.name} {out.values[a.tensor.name]}" for a in allocs]
                      + ([f"block reduction scratch {out.values[SCRATCH]}"] if SCRATCH in out.values else [])
                      + (["alignment padding"] if int(out.values["bytes"]) > sum(
                          int(out.values[a.tensor.name]) for a in allocs) + int(out.values.get(SCRATCH, 0)) else []))
    has = (f"{ctx.target.name} has {ctx.target.smem_bytes_per_block} per block, {cap} beside the kernel's "
           f"{static} bytes of mbarriers{' and tensor-memory slot' if static % 8 else ''} (the dynamic base at a "
           f"multiple of 1024)" if static else f"{ctx.target.name} has {cap} per block")
    if not allocs or int(out.values.get(SCRATCH, 0)) > max(int(out.values[a.tensor.name]) for a in allocs):
        return finding(
            "SMEM-CAPACITY",
            f"not enough shared memory{when_clause(sizes)}: needs {out.values['bytes']} bytes ({parts}), {has}",
            notes=["a block reduction combines one partial per thread and accumulator register in shared memory"],
            counterexample={**sizes, "bytes": out.values["bytes"], "limit": cap},
            hint="launch fewer threads per block, or give the block reductions fewer iteration axes inside their "
                 "reduction loops (fewer accumulator registers)",
            **where)
    biggest = max(allocs, key=lambda a: int(out.values[a.tensor.name]))  # the largest: tile it first
    big = biggest.tensor.name
    staged = [f"{a.tensor.name} holds {a.stages} stages of its tile (circular_buffer), each "
              f"{int(out.values[a.tensor.name]) // a.stages} bytes" for a in allocs if a.stages > 1]
    return finding(
        "SMEM-CAPACITY",
        f"not enough shared memory{when_clause(sizes)}: needs {out.values['bytes']} bytes ({parts}), {has}",
        table=[row for a in allocs for row in _table(a)],
        notes=["each IterDomain's row says whether it is allocated and which rule decided"] + staged,
        counterexample={**sizes, "bytes": out.values["bytes"], "limit": cap},
        hint=(f"circular-buffer {big} with fewer stages, or tile it smaller" if biggest.stages > 1 else
              f"tile {big}: parallelize an outer axis of {big} on BIDx, or inline it (inline_at) so only a tile "
              f"is live"),
        **where,
    )


@rule("TMEM-LANES", family="alloc")
def tmem_lanes(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A tensor-memory tensor fits in the 128 lanes.

    What it checks:
        The product of the extents of the allocated IterDomains left of the TMem
        dimension separator is at most 128 for every admitted size.
    Why the hardware needs it:
        Tensor memory has 128 lanes (rows) of 512 32-bit columns per CTA; the lane
        part of an address cannot name a 129th row.
    Example:
        target = "sm_100a"
        fusion, t0, t1, t2, t3 = tmem_copy("lanes", [256, 32])
        for t in (t1, t2, t3):
            t.axis(0).parallelize(tp.ParallelType.TIDx)  # 256 lanes
    Fix:
        target = "sm_100a"
        fusion, t0, t1, t2, t3 = tmem_copy("lanes", [256, 32])
        for t in (t1, t2, t3):
            t.split(0, 128)
            t.axis(0).parallelize(tp.ParallelType.BIDx)
            t.axis(1).parallelize(tp.ParallelType.TIDx)
        t2.set_tmem_dim_sep_pos(2)  # 128 lanes a block
    References:
        PTX ISA 9.7.16.1 (tensor memory: 128 lanes x 512 columns); docs/hardware.md#tensor-memory-geometry
    """
    # Formal statement: on a target with tensor memory, for every tensor-memory tensor T, for all
    #   admitted sizes s: product of T's allocated lane-side extents (s) <= target.tmem_lanes (128)
    if not ctx.target.has_tmem:
        return
    for t in ctx.tensors_in(MemoryType.Tensor):
        a = ctx.allocations[t.name]
        yield from _budget(ctx, "TMEM-LANES", a, a.lanes_expr, ctx.target.tmem_lanes, "lanes", "lane")


@rule("TMEM-COLUMNS", family="alloc")
def tmem_columns(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Tensor-memory tensors fit in the 512 columns.

    What it checks:
        Each tensor's column count, ceil(product of allocated extents right of the
        TMem dimension separator x element bytes / 4), is at most 512 for every
        admitted size; the tensors that share one region (fusion.manage("tmem_regions",
        [[a, b]]), laid out one after another) use at most 512 columns together for
        every admitted size; and the regions (a tensor in no list is a region of its
        own), each rounded up to a power of two of at least 32 columns (what
        tcgen05.alloc takes), sum to at most 512.
    Why the hardware needs it:
        tcgen05.alloc hands out columns in powers of two from 32 to 512; a request it
        cannot satisfy blocks forever. A region's tensors sit side by side in its
        columns, so they must fit in it together.
    Example:
        target = "sm_100a"
        fusion, t0, t1, t2, t3 = tmem_copy("cols", [32, 1024])
        for t in (t1, t2, t3):
            t.axis(0).parallelize(tp.ParallelType.TIDx)  # 1024 columns a lane
    Fix:
        target = "sm_100a"
        fusion, t0, t1, t2, t3 = tmem_copy("cols", [32, 1024])
        for t in (t1, t2, t3):
            t.axis(0).parallelize(tp.ParallelType.TIDx)
            t.split(1, 256)
            t.axis(1).parallelize(tp.ParallelType.BIDx)  # 256 columns a block
    References:
        PTX ISA 9.7.16.7.1 (tcgen05.alloc: nCols a power of two in [32, 512]);
        docs/hardware.md#tensor-memory-allocation
    """
    # Formal statement: on a target with tensor memory, for every tensor-memory tensor T, for all
    #   admitted sizes s: ceildiv(product of T's allocated column-side extents (s) x bytes, 4) <= 512;
    #   then, each passing, for every region R of more than one tensor, for all admitted sizes s:
    #   sum over T in R of columns_T(s) <= 512;
    #   then structural, only when each passed and every column count is a constant:
    #   sum over regions R of max(32, next power of two >= sum over T in R of columns_T) <= 512
    if not ctx.target.has_tmem:
        return
    allocs = [ctx.allocations[t.name] for t in ctx.tensors_in(MemoryType.Tensor)]
    failed = False
    for a in allocs:
        for d in _budget(ctx, "TMEM-COLUMNS", a, a.columns_expr, ctx.target.tmem_columns, "columns", "column"):
            failed = True
            yield d
    regions = tmem_regions(ctx.fusion)
    for region in regions if not failed else ():
        if region.shared:
            for d in _region_budget(ctx, region):
                failed = True
                yield d
    rounded = [r.columns_allocated for r in regions]
    names = ["+".join(r.names) for r in regions]
    if not failed and len(regions) > 1 and None not in rounded and sum(rounded) > ctx.target.tmem_columns:
        last = regions[-1].allocations[-1].tensor
        yield finding(
            "TMEM-COLUMNS",
            f"not enough tensor-memory columns: the allocations need {sum(rounded)} columns together "
            f"({', '.join(f'{n} {r}' for n, r in zip(names, rounded))}), has {ctx.target.tmem_columns}",
            notes=["each tcgen05.alloc takes a power of two of at least 32 columns"],
            table=[row for a in allocs for row in _table(a)],
            hint="inline the tensors further or parallelize column axes on BID so fewer columns are live",
            tensor=last.name, location=last.memory_origin or last.origin,
            labels=[f"tensor memory {n} ({c} columns) created at {r.allocations[0].tensor.origin}"
                    for r, n, c in zip(regions[:-1], names[:-1], rounded[:-1])],
        )


def _region_budget(ctx, region: TmemRegion) -> Iterator[Diagnostic]:
    """The tensors of one shared region fit in the 512 columns together, for every admitted size."""
    have = ctx.target.tmem_columns
    per_tensor = {f"{a.tensor.name} columns": a.columns_expr for a in region.allocations}
    out = prove_at_most(ctx, region.columns_expr, have, {"need": region.columns_expr, **per_tensor})
    last = region.allocations[-1].tensor
    label = "+".join(region.names)
    where = {"tensor": last.name, "location": ctx.fusion.tmem_regions_origin or last.memory_origin or last.origin,
             "labels": [f"tensor memory {a.tensor.name} at column {expr_str(region.offset_expr(a.tensor.name))} "
                        f"of the region, created at {a.tensor.origin}" for a in region.allocations]}

    def over_budget(out: Outcome) -> Diagnostic:
        sizes = ctx.symbols_of(out.model)
        parts = ", ".join(f"{n} {out.values[f'{n} columns']}" for n in region.names)
        return finding(
            "TMEM-COLUMNS",
            f"not enough tensor-memory columns{when_clause(sizes)}: the region {label} needs {out.values['need']} "
            f"columns ({parts}, side by side), has {have}",
            notes=[("fusion.manage(\"tmem_regions\", ...) lays a region's tensors out one after another in one "
                    "tcgen05.alloc")],
            table=[row for a in region.allocations for row in _table(a)],
            counterexample={**sizes, **{k: out.values[k] for k in per_tensor}, "columns": out.values["need"],
                            "limit": have},
            hint="give the tensors regions of their own (leave them out of tmem_regions), or allocate fewer columns "
                 "of each (inline further, parallelize column axes on BID)",
            **where,
        )

    yield from report_outcome("TMEM-COLUMNS", out, f"that the tensor-memory region {label} fits the columns",
                              over_budget, **where)


def _budget(ctx, code, alloc, need, have, unit, side) -> Iterator[Diagnostic]:
    t = alloc.tensor
    out = prove_at_most(ctx, need, have, {"need": need})
    where = dict(tensor=t.name, ids=[x.id.name for x in alloc.allocated(side)], location=t.memory_origin or t.origin)

    def over_budget(out: Outcome) -> Diagnostic:
        sizes = ctx.symbols_of(out.model)
        formula = " * ".join(str(x.id.extent) for x in alloc.allocated(side)) or "1"
        return finding(
            code,
            f"not enough tensor-memory {unit}{when_clause(sizes)}: {t.name} needs {out.values['need']}, has {have}",
            notes=[f"{unit} = {formula}" + (f" (x {t.dtype.bytes} bytes / 4)" if unit == "columns" else ""),
                   "each IterDomain's row says whether it is allocated and which rule decided"],
            table=_table(alloc),
            counterexample={**sizes, unit: out.values["need"], "limit": have},
            hint=f"move allocated {side} axes to BID parallelization or left of the compute-at position, "
                 f"or move the dimension separator (set_tmem_dim_sep_pos)",
            **where,
        )

    yield from report_outcome(code, out, f"that {t.name} fits the tensor-memory {unit}", over_budget, **where)


@rule("LAUNCH-THREADS", family="alloc")
def launch_threads(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A block has at most 1024 threads, and at most 1024 x 1024 x 64 along x, y, z.

    What it checks:
        blockDim.x * blockDim.y * blockDim.z, each the largest extent parallelized on
        TIDx / TIDy / TIDz, is at most the target's limit for every admitted size, and
        each of them is at most its dimension's limit (blockDim.z at most 64).
    Why the hardware needs it:
        A launch with more threads per block fails (measured: 1025 fails on H200), and so
        does one with blockDim.z = 96 (cuLaunchKernel: invalid argument, measured on H100).
    Example:
        fusion, t0, t1 = copy_chain("threads", [64, 32], copies=1)
        t1.axis(0).parallelize(tp.ParallelType.TIDy)
        t1.axis(1).parallelize(tp.ParallelType.TIDx)
    Fix:
        fusion, t0, t1 = copy_chain("threads", [64, 32], copies=1)
        t1.axis(0).parallelize(tp.ParallelType.BIDx)
        t1.axis(1).parallelize(tp.ParallelType.TIDx)
    References:
        CUDA C++ Programming Guide, compute capabilities table (1024 threads per block;
        maximum x-, y- and z-dimension of a block 1024, 1024, 64); docs/hardware.md#threads-per-block
    """
    # Formal statement: for all admitted sizes s: bdx(s) * bdy(s) * bdz(s) <= target.max_threads_per_block
    #   and bd_p(s) <= target.max_block_dims[p] for p in x, y, z,
    #   bd_p = the largest extent parallelized on TID_p (1 where none is)
    dims = ctx.thread_dims
    total = product(list(dims))
    limit = ctx.target.max_threads_per_block
    block = {"blockDim.x": dims[0], "blockDim.y": dims[1], "blockDim.z": dims[2]}
    out = prove_at_most(ctx, total, limit, {"threads": total, **block})
    yield from report_outcome(
        "LAUNCH-THREADS", out, "that the block fits 1024 threads",
        lambda out: finding(
            "LAUNCH-THREADS",
            f"a block of {out.values['threads']} threads ({out.values['blockDim.x']} x {out.values['blockDim.y']} x "
            f"{out.values['blockDim.z']}) exceeds the {limit}-thread limit",
            counterexample={**ctx.symbols_of(out.model), **{k: out.values[k] for k in block}},
            hint="parallelize some of those axes on BIDx/BIDy/BIDz or leave them serial",
            **_widest_axes(ctx, THREAD_TYPES, out.model)),
        **_widest_axes(ctx, THREAD_TYPES, {}))
    if not out.proved:
        return  # one finding per launch: the per-dimension limits below are smaller claims
    for p, (name, extent), most in zip(THREAD_TYPES, block.items(), ctx.target.max_block_dims):
        yield from report_values(
            ctx, "LAUNCH-THREADS", prove_at_most(ctx, extent, most, {name: extent}),
            f"that {name} is at most {most}",
            lambda v, when, name=name, most=most: f"{name} is {v[name]}{when}, over the hardware's limit of {most}",
            [name], hint=f"put the {p} axis on TIDx/TIDy (up to 1024) or on a BID, or split it "
                         f"so that at most {most} of it is on {p}", **_widest_axes(ctx, (p,), {}))


@rule("LAUNCH-GRID", family="alloc")
def launch_grid(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """The grid has at most 2^31 - 1 blocks along x and 65535 along y and z.

    What it checks:
        gridDim.x, gridDim.y and gridDim.z, each the largest extent parallelized on
        BIDx / BIDy / BIDz (the expressions the kernel is launched with), are at most
        2^31 - 1, 65535 and 65535 for every admitted size: a symbolic extent is proved
        over its range and the fusion's assumptions, and a counterexample names the
        sizes whose grid the GPU refuses.
    Why the hardware needs it:
        cuLaunchKernel refuses a grid over these limits with CUDA_ERROR_INVALID_VALUE;
        the kernel never runs (measured on H200: 65535 blocks along y or z launch, 65536
        do not; 2^31 - 1 along x launch, 2^31 do not). 70000 rows on BIDy, or a persistent grid of 2^31 blocks,
        compile but cannot be launched.
    Example:
        fusion, t0, t1 = copy_chain("rows_on_bidy", [70000, 32], copies=1)
        t1.axis(0).parallelize(tp.ParallelType.BIDy)
        t1.axis(1).parallelize(tp.ParallelType.TIDx)
    Fix:
        fusion, t0, t1 = copy_chain("rows_on_bidx", [70000, 32], copies=1)
        t1.axis(0).parallelize(tp.ParallelType.BIDx)
        t1.axis(1).parallelize(tp.ParallelType.TIDx)
    References:
        CUDA C++ Programming Guide, compute capabilities table (maximum x-dimension of a
        grid of thread blocks 2^31 - 1, maximum y- and z-dimension 65535);
        docs/hardware.md#grid-dimensions
    """
    # Formal statement: for all admitted sizes s (symbol ranges, bindings, assumptions) and p in x, y, z:
    #   gd_p(s) <= target.max_grid_dims[p], gd_p = the largest extent parallelized on BID_p (1 where none is),
    #   the gridDim the kernel is launched with (execution/indexing.py grid_dims)
    for p, extent, most in zip(BLOCK_TYPES, ctx.grid_dims, ctx.target.max_grid_dims):
        if p not in ctx.block_dims:
            continue  # gridDim 1
        name = f"gridDim.{p.cuda_name[-1]}"
        yield from report_values(
            ctx, "LAUNCH-GRID", prove_at_most(ctx, extent, most, {name: extent}),
            f"that {name} is at most {most}",
            lambda v, when, name=name, most=most: f"{name} is {v[name]}{when}, over the hardware's limit of {most}",
            [name], notes=[f"{name} = {expr_str(extent)}, the largest extent parallelized on {p.value}"],
            hint=_grid_hint(ctx, p, extent, most), **_widest_axes(ctx, (p,), {}))


def _grid_hint(ctx: VerifyContext, p, extent: Expr, most: int) -> str:
    fixes = ["put the axis on BIDx (up to 2^31 - 1 blocks)"] if p is not BLOCK_TYPES[0] else []
    fixes.append(f"split it so that at most {most} of it is on {p.value} (a serial loop over the rest)")
    bound = _largest_size(ctx, extent, most)
    if bound is not None:
        fixes.append(f'assume the sizes it fits: fusion.assume("{bound[0]} <= {bound[1]}")')
    elif extent.free_vars():
        fixes.append("bound the sizes with fusion.assume")
    if len(fixes) == 1:
        return fixes[0]
    return ", ".join(fixes[:-1]) + ("," if len(fixes) > 2 else "") + " or " + fixes[-1]


def _largest_size(ctx: VerifyContext, extent: Expr, most: int) -> tuple[str, int] | None:
    """(S, n) where extent depends on one size S, grows with it, and is at most `most` exactly
    for the admitted S <= n (n >= the smallest admitted S); None otherwise."""
    free = extent.free_vars()
    if len(free) != 1 or not ctx.admitted.exact:
        return None
    (name,) = free
    r = ctx.admitted.ranges.get(name)
    if r is None or not growing(extent, Simplifier(ctx.admitted.bounds())) or evaluate(extent, {name: r.lo}) > most:
        return None
    ok, bad = 0, r.count()  # the admitted values at indices <= ok fit, those at >= bad do not
    while bad - ok > 1:
        mid = (ok + bad) // 2
        ok, bad = (mid, bad) if evaluate(extent, {name: r.at(mid)}) <= most else (ok, mid)
    return name, r.at(ok)


def _widest_axes(ctx: VerifyContext, types, sizes: dict[str, int]) -> dict:
    """Where a block- or grid-size finding points: for each of `types` the loop axis that sets its
    launch dimension (the widest one parallelized on it, at the counterexample's `sizes`; the
    first when they cannot be compared), the widest of them the primary location, the others
    labels."""
    def width(i) -> int:
        try:
            return evaluate(i.extent_expr, sizes)
        except (KeyError, ValueError):  # a symbolic extent without a counterexample
            return 0

    axes = []
    for p in types:
        bound = [(tv, i) for tv in ctx.executed() for i in tv.loop if i.parallel_type is p]
        if bound:
            axes.append(max(bound, key=lambda a: width(a[1])))
    if not axes:
        return dict(location=ctx.fusion.origin)
    axes.sort(key=lambda a: -width(a[1]))  # stable: x before y before z among equals
    (tv, i), rest = axes[0], axes[1:]
    return dict(tensor=tv.name, ids=[j.name for t, j in axes if t is tv], location=_parallelized_at(tv, i),
                labels=[f"{j.label()} of {t.name} parallelized at {_parallelized_at(t, j)}" for t, j in rest])


def _parallelized_at(tv, i) -> str | None:
    """The user's line that bound i's parallel type (else made it, else made its tensor)."""
    return i.parallel_origin or i.origin or tv.origin


OTHER = "other "


@rule("ALLOCATION-DISTINCT", family="alloc")
def allocation_distinct(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Two elements of an on-chip tensor that are live together never share an address.

    What it checks:
        For every shared-memory, tensor-memory or register tensor and every two points of its
        statement in one instance of its allocation (the same block; for registers the same thread;
        the same iteration of the loops left of its compute-at position), both executed:
        if they write different logical elements, their offsets in the allocation differ.
    Why the hardware needs it:
        All writes of one instance happen before its consumer reads it, so an element whose
        address another element reuses is overwritten before it is read. An allocation
        domain that leaves out a loop axis (for example a block axis that became a serial
        or vectorized loop) does exactly that: measured on H100, a TMA store whose shared
        producer's allocation lacked its Vectorize{8} axis stored 1792 of 2048 elements wrong.
    Example:
        fusion, t0, t1, t2 = copy_chain("reused", [64, 32])
        t1.set_memory_type(tp.MemoryType.Shared)
        for t in (t1, t2):
            t.split(0, 8)
            t.axis(2).parallelize(tp.ParallelType.TIDx)
        t1.set_allocation_domain([t1.axis(1), t1.axis(2)])
    Fix:
        fusion, t0, t1, t2 = copy_chain("reused", [64, 32])
        t1.set_memory_type(tp.MemoryType.Shared)
        for t in (t1, t2):
            t.split(0, 8)
            t.axis(0).parallelize(tp.ParallelType.BIDx)
            t.axis(2).parallelize(tp.ParallelType.TIDx)
        t1.set_allocation_domain([t1.axis(1), t1.axis(2)])
    References:
        nvFuser doc/dev/tma.md and the allocation rules of its lowering (block-parallel and
        left-of-compute-at IDs are not allocated; every other ID the tensor iterates is);
        docs/hardware.md#distinct-addresses-for-live-elements
    """
    # Formal statement: for each Shared/Tensor/Local tensor x, for all admitted sizes and points p, q of x's
    #   statement: executes(p) and executes(q) and blockIdx(p) == blockIdx(q)
    #   and (x Local => threadIdx(p) == threadIdx(q)) and loop_k(p) == loop_k(q) for the non-launched
    #   loop axes k < compute_at(x) and the device axes, and logical(p) != logical(q)  =>  offset(p) != offset(q)
    for x in ctx.fusion.tensors:
        if x.definition is None or x.memory_type not in (MemoryType.Shared, MemoryType.Local, MemoryType.Tensor):
            continue
        if _distinct_by_construction(ctx, x):
            continue
        out = ctx.memo(("allocation-distinct", x.name), lambda x=x: _prove_distinct(ctx, x))
        yield from report_outcome(
            "ALLOCATION-DISTINCT", out, f"that {x.name}'s elements have distinct addresses",
            lambda out, x=x: _shared_address(ctx, x, out), tensor=x.name,
            ids=[a.id.name for a in ctx.allocations[x.name].allocated()], location=x.allocation_origin or x.origin)


def _private_to(x) -> tuple:
    """The launch types whose indices separate instances of x's allocation: blocks own their
    shared and tensor memory, threads their registers."""
    return BLOCK_TYPES + (THREAD_TYPES if x.memory_type is MemoryType.Local else ())


def _instance_keys(x) -> list:
    """x's loop IDs that name an instance of its allocation rather than an element of it."""
    return [i for k, i in enumerate(x.loop) if i.parallel_type in DEVICE_TYPES + _private_to(x)
            or (k < x.compute_at and i.parallel_type not in THREAD_TYPES + BLOCK_TYPES)]


def _distinct_by_construction(ctx: VerifyContext, x) -> bool:
    """The allocation is a row-major layout of x's own loop IDs covering every loop ID that
    varies within an instance: two points of one instance writing different elements differ
    in an allocated loop index, each within its extent, so their offsets differ."""
    allocated = {a.id.uid for a in ctx.allocations[x.name].allocated()}
    loop = {i.uid for i in x.loop}
    keys = {i.uid for i in _instance_keys(x)}
    varying = {i.uid for i in x.loop if i.static_extent != 1 and not i.is_broadcast}
    if allocated <= loop:
        return varying <= allocated | keys
    # an allocation domain scheduled from the loop (padding splits, merges, XOR swizzles) is a
    # one-to-one image of the loop indices when it is a complete cut below the loop domain; an ID
    # it leaves out must be one instance's: a key, or fixed by the keys (a persistent grid's tile
    # [Mo, No] is fixed by its loop and blockIdx.x)
    domain = x.get_allocation_domain()
    dropped = [i for i in domain if i.uid not in allocated]
    fixed = fixed_by(x, _instance_keys(x))
    return (complete_cut_below(x, domain)
            and all(i.uid in keys or i.uid in fixed or i.static_extent == 1 for i in dropped))


def _instance(x, ex) -> list[Expr]:
    """The indices naming the allocation instance a point of x's statement writes into: its
    block (and, for registers, its thread), its device, its iteration of the loops left of
    the compute-at position."""
    return ([ex.launch_index[t] for t in _private_to(x) if t in ex.launch_index]
            + [ex.env[i.uid] for i in _instance_keys(x) if i.parallel_type not in THREAD_TYPES + BLOCK_TYPES])


def _prove_distinct(ctx: VerifyContext, x) -> Outcome:
    # an MmaOp's register output is written by each lane at its elements of the C fragment (where
    # the fragments are defined: MMA-SHAPE reports an MmaOp without them)
    p = mma_execution(x, ctx.block_dims, "C") if well_formed(x) else store_execution(x, ctx.block_dims)
    # the other point of the same instance: its instance indices are p's own (not equal variables,
    # which z3 would have to carry through every division of a persistent grid's tile index)
    instance = {e.value for e in _instance(x, p) if e.op == "var"}
    q = p.renamed({name: var(OTHER + name) for name in p.ranges if name not in instance})
    strides = ctx.allocations[x.name].strides()
    addr_p, addr_q = linear_offset(strides, p.indices), linear_offset(strides, q.indices)
    # a broadcast axis holds one element, whatever index a split of it gives; a reduction axis is no element's
    real = [k for k, i in enumerate(x.logical) if not i.is_broadcast and not i.is_reduction]
    elem_p = [e for k, e in enumerate(p.written_logical()) if k in real]
    elem_q = [e for k, e in enumerate(q.written_logical()) if k in real]
    same, same_q = _instance(x, p), _instance(x, q)
    values: dict[str, Expr] = {"offset": addr_p, "other offset": addr_q}
    values.update({f"element {k}": e for k, e in enumerate(elem_p)})
    values.update({f"other element {k}": e for k, e in enumerate(elem_q)})
    hint = ([e for c in p.conds + q.conds for e in (c.lhs, c.rhs)] + [addr_p, addr_q] + elem_p + elem_q
            + same + same_q)
    index_p = [p.indices[a.id.uid] for a in ctx.allocations[x.name].allocated()]
    index_q = [q.indices[a.id.uid] for a in ctx.allocations[x.name].allocated()]
    if (_same_indices_same_element(ctx, p, q, elem_p, elem_q, same, same_q, index_p, index_q)
            and _inner_indices_in_range(ctx, x, p)):
        return Outcome(Verdict.PROVED)
    s = ctx.query(hint, {**p.ranges, **q.ranges})
    differ = z3.Or(*[z3.Not(s.eq(a, b)) for a, b in zip(elem_p, elem_q)]) if elem_p else z3.BoolVal(False, s.ctx)
    premise = z3.And(*[s.holds(c) for c in p.conds + q.conds], *[s.eq(a, b) for a, b in zip(same, same_q)],
                     differ, s.eq(addr_p, addr_q))
    return s.prove(z3.Not(premise), values=values)


# The offset is a mixed-radix number over the allocated indices (strides: the product of the
# extents right of each): where every index but the outermost lies in [0, its extent), equal
# offsets mean equal indices. So two sufficient claims, each free of the products of symbolic
# extents that stall z3 on the offsets (a persistent grid's whole M x N tile allocated: 20 s and
# no verdict), prove ALLOCATION-DISTINCT's: different elements of one instance have different
# allocated indices, and an executed point's inner indices lie within their extents.
RADIX_MS = 2000


def _same_indices_same_element(ctx, p, q, elem_p, elem_q, same, same_q, index_p, index_q) -> bool:
    # Formal statement: for all admitted sizes and points p, q of x's statement: executes(p) and
    #   executes(q) and instance(p) == instance(q) and index_k(p) == index_k(q) for every allocated
    #   ID k  =>  logical(p) == logical(q)
    if not elem_p:
        return True
    hint = ([e for c in p.conds + q.conds for e in (c.lhs, c.rhs)] + elem_p + elem_q + same + same_q
            + index_p + index_q)
    s = ctx.query(hint, {**p.ranges, **q.ranges}, timeout_ms=RADIX_MS)
    premise = z3.And(*[s.holds(c) for c in p.conds + q.conds], *[s.eq(a, b) for a, b in zip(same, same_q)],
                     *[s.eq(a, b) for a, b in zip(index_p, index_q)],
                     z3.Or(*[z3.Not(s.eq(a, b)) for a, b in zip(elem_p, elem_q)]))
    return s.prove(z3.Not(premise), shrink_units=0).proved


def _inner_indices_in_range(ctx, x, p) -> bool:
    # Formal statement: for all admitted sizes and points p of x's statement, for every allocated
    #   ID k but the outermost: executes(p)  =>  0 <= index_k(p) < extent_k
    for a in ctx.allocations[x.name].allocated()[1:]:
        e, extent = p.indices[a.id.uid], a.id.extent_expr
        s = ctx.query([e, extent] + [t for c in p.conds for t in (c.lhs, c.rhs)], p.ranges, timeout_ms=RADIX_MS)
        inside = z3.And(s.le(const(0), e), s.lt(e, extent))
        if not s.prove(z3.Implies(z3.And(*[s.holds(c) for c in p.conds], s.ctx), inside), shrink_units=0).proved:
            return False
    return True


def _shared_address(ctx: VerifyContext, x, out: Outcome) -> Diagnostic:
    v = out.values
    n = len([i for i in x.logical if not i.is_broadcast and not i.is_reduction])
    first = ", ".join(str(v[f"element {k}"]) for k in range(n))
    second = ", ".join(str(v[f"other element {k}"]) for k in range(n))
    scope = "thread" if x.memory_type is MemoryType.Local else "block"
    alloc = ctx.allocations[x.name]
    return finding(
        "ALLOCATION-DISTINCT",
        f"{x.name}[{first}] and {x.name}[{second}] are both stored at offset {v['offset']} of {x.name} "
        f"in one {scope}: the later write overwrites the other before it is read",
        notes=[f"{x.name} is allocated as " + (" * ".join(a.id.label() for a in alloc.allocated()) or "1 element")
               + f" ({x.memory_type.value}); its loop is [{', '.join(i.label() for i in x.loop)}]"],
        counterexample={**ctx.symbols_of(out.model), **{f"element axis {k}": v[f"element {k}"] for k in range(n)},
                        **{f"other element axis {k}": v[f"other element {k}"] for k in range(n)},
                        "offset": v["offset"]},
        hint=f"allocate every axis {x.name} iterates within one {scope}: include it in set_allocation_domain, "
             f"or parallelize it on {'a thread or ' if scope == 'thread' else ''}a block index",
        tensor=x.name, ids=[a.id.name for a in alloc.allocated()], location=x.allocation_origin or x.origin)
