"""Performance warnings that are cheap to establish: a global access of one warp that moves
more 32-byte sectors than the bytes it uses need, and a grid too small to occupy the GPU.
Each is shown on a concrete instance (the first warp of block 0 at the first loop point,
for sizes the schedule admits), so what a warning says is a fact, not an estimate."""

from __future__ import annotations

import itertools
import math
from typing import Iterator

import sympy

from ...execution.statements import element_offset
from ...model.expr import Expr, add, compiled, const, evaluate, product
from ...model.expr import expr_str
from ...model.types import BLOCK_TYPES, LoadStoreOpType, MemoryType
from ..access import THREAD_VARS, build, var_name
from ..context import VerifyContext
from ..diagnostics import Diagnostic, Severity
from ..findings import finding
from ..registry import rule
from ..solver import Verdict

SECTOR = 32  # bytes: the unit in which L2 and DRAM serve a warp's global access
WASTE = 2  # warn when a warp moves at least this many times the sectors its bytes need
SAMPLE_EXTENTS = (4096, 8192, 16384, 2048, 1024, 512, 256, 128, 64, 32)  # typical sizes to sample, in order
SAMPLE_TRIES = 200
GRID_TIMEOUT_MS = 200  # a warning may give up: no proof in time, no warning
MAX_VECTOR = 16  # elements of the widest vector access (16 bytes of int8)
BIG_KERNEL = 1 << 20  # output elements from which idle SMs cost more than the launch itself


def _work_unit(ctx: VerifyContext) -> str:
    """What GRID-SIZE counts: output elements, times the extents they reduce for a reduction's output."""
    reduced = any(i.is_reduction for t in ctx.fusion.outputs for i in t.logical)
    return "output elements times the extents they reduce" if reduced else "output elements"


@rule("GLOBAL-COALESCING", family="perf", severity=Severity.WARNING, premises=("LAUNCH-THREADS",))
def global_coalescing(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A warp's global loads and stores use the 32-byte sectors they move (a warning).

    What it checks:
        For every plain load from and store to global memory, at the first warp of block 0
        and the first point of its loop nest (every Vectorize element included), for sizes
        the schedule admits (its bindings, else typical sizes such as 4096 that the
        assumptions allow): the
        32-byte sectors the active lanes touch, against the sectors their bytes would fill
        if they were contiguous. Twice as many or more is reported with both numbers.
    Why the hardware needs it:
        Global memory is served in 32-byte sectors: a warp whose 32 lanes read 4-byte
        elements 4 KiB apart moves 32 sectors (1 KiB) for 128 useful bytes, and a kernel
        bound by memory bandwidth runs up to 8 times slower. The result stays correct,
        hence a warning.
    Example:
        fusion, t0, t1 = copy_chain("column_walk", [1024, 1024], copies=1)
        t1.axis(0).parallelize(tp.ParallelType.TIDx)
        t1.axis(1).parallelize(tp.ParallelType.BIDx)
    Fix:
        fusion, t0, t1 = copy_chain("row_walk", [1024, 1024], copies=1)
        t1.axis(0).parallelize(tp.ParallelType.BIDx)
        t1.axis(1).parallelize(tp.ParallelType.TIDx)
    References:
        CUDA C++ Best Practices Guide, coalesced access to global memory (32-byte segments);
        CUDA C++ Programming Guide, device memory accesses; docs/hardware.md#global-memory-sectors
    """
    # Formal statement: none, structural (an instance): at sample sizes s, block 0, loop point 0, lanes l < 32 of warp 0:
    #   sectors = |{floor(byte / 32) : byte touched by an active lane}|, used = |{byte touched}|;
    #   warn when sectors >= 2 * ceil(used / 32)
    sizes = _sample_sizes(ctx)
    if sizes is None:
        return
    for acc in ctx.accesses_to(MemoryType.Global):
        if acc.op.op_type is not LoadStoreOpType.Set:
            continue  # TMA moves whole boxes; its rules check their layout
        touched = _warp_bytes(ctx, acc, sizes)
        if touched is None or not touched:
            continue
        sectors = len({b // SECTOR for b in touched})
        needed = -(-len(touched) // SECTOR)
        if sectors < WASTE * needed:
            continue
        tv, verb = acc.tensor, "store to" if acc.tensor is acc.consumer else "load from"
        where = dict(tensor=acc.consumer.name, ids=[i.name for i in acc.consumer.loop if i.parallel_type.name == "TIDx"],
                     location=acc.op.origin)
        yield finding(
            "GLOBAL-COALESCING",
            f"a warp's {verb} {tv.name} moves {sectors} sectors of {SECTOR} B ({sectors * SECTOR} B) for the "
            f"{len(touched)} B it uses: {100 * len(touched) // (sectors * SECTOR)}% of the moved bytes are used",
            notes=[f"counted at the first warp of block 0, at the first point of {acc.consumer.name}'s loop nest"
                   + (f", for {', '.join(f'{k} = {v}' for k, v in sizes.items())}" if sizes else ""),
                   f"{SECTOR}-byte sectors are the unit of global memory traffic; lanes whose bytes are far "
                   f"apart each cost a sector"],
            counterexample={"sectors": sectors, "bytes used": len(touched), "sectors needed": needed, **sizes},
            hint=(f"parallelize {tv.name}'s innermost (contiguous) axis on threadIdx.x, or stage the tile "
                  f"through shared memory and read it there in the other order (a transpose)"),
            **where,
        )


def _warp_bytes(ctx: VerifyContext, acc, sizes: dict[str, int]) -> set[int] | None:
    """The bytes of `acc.tensor` the active lanes of warp 0 of block 0 touch at loop point 0
    (None: an index the sample cannot evaluate, e.g. a run-time stride)."""
    m = build(ctx, acc)
    dims = [_value(d, sizes) for d in m.dims]
    if None in dims:
        return None
    threads = dims[0] * dims[1] * dims[2]  # type: ignore[operator]
    try:
        offset = element_offset(acc.tensor, m.indices, None)
    except KeyError:
        return None  # no global layout (LOWERING-SUPPORTED reports it)
    vector = [var_name(acc, i) for i in m.vector_ids]
    extents = [_value(i.extent_expr, sizes) for i in m.vector_ids]
    if None in extents or math.prod(extents) > MAX_VECTOR:  # type: ignore[arg-type]
        return None  # not one vector access (VECTORIZE-WIDTH rejects it)
    base = {name: 0 for name in m.ranges}
    base.update(sizes)
    width = acc.tensor.dtype.bytes
    touched: set[int] = set()
    # the same indices at every lane and element: each compiled once (model/expr.py compiled)
    active = [(compiled(i), compiled(e)) for i, e in m.active]
    valid = [(compiled(c.lhs), compiled(c.rhs)) for c in m.valid]
    at = compiled(offset)
    for lane in range(min(32, threads)):  # type: ignore[type-var]
        env = dict(base)
        env.update(zip(THREAD_VARS, (lane % dims[0], lane // dims[0] % dims[1], lane // (dims[0] * dims[1]))))
        try:
            if not all(i(env) < e(env) for i, e in active):
                continue
            for k in range(math.prod(extents)):  # type: ignore[arg-type]
                point = dict(env)
                rest = k
                for name, n in reversed(list(zip(vector, extents))):
                    point[name], rest = rest % n, rest // n
                if not all(lhs(point) < rhs(point) for lhs, rhs in valid):
                    continue
                start = at(point) * width
                touched.update(range(start, start + width))
        except KeyError:
            return None  # a variable the sample does not give (a run-time stride)
    return touched


def _value(e: Expr, sizes: dict[str, int]) -> int | None:
    try:
        return evaluate(e, sizes)
    except KeyError:
        return None


def _sample_sizes(ctx: VerifyContext) -> dict[str, int] | None:
    """Values of the extent symbols the schedule admits: the bindings, and for the others the
    first combination of typical sizes the assumptions allow, else one z3 finds (None: no
    admitted size)."""
    free = [s for s in ctx.extent_symbols if s not in ctx.bind]
    # each symbol's first typical size its own assumptions allow (most assumptions name one symbol)
    own = {s: next((v for v in SAMPLE_EXTENTS if all(_holds(a, {s: v}) for a in ctx.fusion.assumptions
                                                     if {x.name for x in a.free_symbols} == {s})), 1)
           for s in free}
    candidates = itertools.chain([tuple(own[s] for s in free)],
                                 itertools.product(SAMPLE_EXTENTS, repeat=len(free)))
    for values in itertools.islice(candidates, SAMPLE_TRIES):
        sizes = {**dict(zip(free, values)), **ctx.bind}
        if all(_holds(a, sizes) for a in ctx.fusion.assumptions):
            return sizes
    q = ctx.query([])
    out = q.satisfiable(q.val(1) == q.val(1))
    if out.status is not Verdict.COUNTEREXAMPLE:
        return None
    return {**{s: out.model.get(s, 1) for s in free}, **ctx.bind}


def _holds(assumption, sizes: dict[str, int]) -> bool:
    value = assumption.subs({s: sizes[s.name] for s in assumption.free_symbols if s.name in sizes})
    return value is sympy.true


@rule("GRID-SIZE", family="perf", severity=Severity.WARNING)
def grid_size(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """The grid has at least one block per SM of the target (a warning).

    What it checks:
        The number of blocks of the launch (the product of the BIDx, BIDy, BIDz extents)
        against the SM count of the target's largest part (132 on an H100 SXM or H200 for
        sm_90a, 148 on a B200 for sm_100a): a grid that is smaller for every admitted size
        is reported where the outputs have 2^20 elements or more at some admitted size (a
        smaller kernel is bound by its launch, not by idle SMs).
    Why the hardware needs it:
        A block runs on one SM; a grid of 8 blocks keeps 8 of 132 SMs busy, so a kernel
        bound by memory bandwidth or compute reaches at most 8/132 of the GPU.
    Example:
        fusion, t0, t1 = copy_chain("eight_blocks", [8, 262144], copies=1)
        t1.split(1, 1024)
        t1.axis(0).parallelize(tp.ParallelType.BIDx)
        t1.axis(2).parallelize(tp.ParallelType.TIDx)
    Fix:
        fusion, t0, t1 = copy_chain("many_blocks", [8, 262144], copies=1)
        t1.split(1, 1024)
        t1.axis(0).parallelize(tp.ParallelType.BIDy)
        t1.axis(1).parallelize(tp.ParallelType.BIDx)
        t1.axis(2).parallelize(tp.ParallelType.TIDx)
    References:
        CUDA C++ Programming Guide, hardware implementation (a block executes on one
        multiprocessor); H100 and H200 datasheets (132 SMs), B200 (148 SMs);
        docs/hardware.md#streaming-multiprocessors
    """
    # Formal statement: (for all admitted sizes s: prod over launched block types b of extent_b(s) < sms(target))
    #   and (exists an admitted size s: elements of an output at s >= 2^20)
    dims = [ctx.block_dims[p] for p in BLOCK_TYPES if p in ctx.block_dims]
    blocks = product(dims)
    sms = ctx.target.sm_count
    work = add(*(product([i.extent_expr for i in t.logical if not i.is_broadcast]) for t in ctx.fusion.outputs))
    sizes = _sample_sizes(ctx)
    if sizes is None or (_value(blocks, sizes) or 0) >= sms:
        return  # an admitted size fills the GPU: nothing to prove
    q = ctx.query([blocks, work, const(sms), const(BIG_KERNEL)], timeout_ms=GRID_TIMEOUT_MS)
    if not q.prove(q.lt(blocks, const(sms))).proved:
        return
    # a size where the kernel is big enough for idle SMs to matter: the sample's, else z3's
    if (_value(work, sizes) or 0) >= BIG_KERNEL:
        count, elements = _value(blocks, sizes), _value(work, sizes)
        sizes = {k: v for k, v in sizes.items() if k in ctx.fusion.symbols and k not in ctx.bind}
    else:
        sample = q.prove(q.lt(work, const(BIG_KERNEL)), values={"blocks": blocks, "elements": work}, smallest=work)
        if sample.status is not Verdict.COUNTEREXAMPLE:
            return
        count, elements = sample.values["blocks"], sample.values["elements"]
        sizes = ctx.symbols_of(sample.model)
    when = f" (when {', '.join(f'{k} = {v}' for k, v in sizes.items())})" if sizes else ""
    yield finding(
        "GRID-SIZE",
        f"the grid has {count} block{'' if count == 1 else 's'}{when}, fewer than the {sms} SMs of "
        f"{ctx.target.sm_part}, for {elements} {_work_unit(ctx)}: "
        f"{'only 1 SM works' if count == 1 else f'at most {count} SMs work'}",
        notes=[f"blocks = {expr_str(blocks)} (the product of the block-index extents), below {sms} for every "
               f"admitted size",
               "a block runs on one SM; a memory- or compute-bound kernel needs every SM busy"],
        counterexample={**sizes, "blocks": count, "SMs": sms, "output elements": elements},
        hint="give blockIdx more of the work: split a larger axis, or merge axes before parallelizing on BIDx",
        tensor=ctx.fusion.outputs[0].name, location=ctx.fusion.origin,
    )
