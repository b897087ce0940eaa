"""Visibility of on-chip memory across thread blocks: shared and tensor memory belong to
one thread block (registers to one thread of it), so a consumer may only read the elements
its own block wrote. Proved over every consumer point that executes and every producer
point that writes the element it reads, with the predicates the code generator emits
(thread/block extents, holes, single writer)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import z3

from ...model.expr import Expr, const, substitute, var
from ...model.fusion import Op
from ...model.indexing import indices_from_logical, indices_from_loop, loop_var, producer_logical, valid_item_bounds
from ...model.tensor import TensorView
from ...model.types import BLOCK_TYPES, THREAD_TYPES, MemoryType, ParallelType
from ..context import VerifyContext
from ..diagnostics import Diagnostic
from ..findings import finding, format_values, undecided
from ..registry import rule

ON_CHIP = (MemoryType.Shared, MemoryType.Tensor, MemoryType.Local)  # private to a block (Local: to a thread)
WRITER = "writer "  # prefix of the producer's thread/block variables (renamed apart from the reader's)


@dataclass
class Side:
    """One tensor's loop nest as the generated kernel runs it: index variables and their
    ranges, the conditions under which a point executes, and each block index."""

    tv: TensorView
    ranges: dict[str, Expr]  # variable -> exclusive bound
    conds: list[tuple[Expr, str, Expr]]  # (lhs, "<" or "==", rhs): the point executes
    idx: dict[int, Expr]  # uid -> index of every ID of tv
    block: dict[ParallelType, Expr]  # the block index of each launched block type


def _loop_nest(ctx: VerifyContext, tv: TensorView, rename: dict[str, Expr]) -> Side:
    """tv's loop points (codegen/statements.py: an extent-1 axis has index 0; a thread or
    block index runs over the launch and is bounded by the tensor's own extent, except on
    a broadcast axis; holes are predicated; a global store that no launched block axis
    of its own parallelizes is written by block 0 only)."""
    launch = ctx.block_dims
    env = {i.uid: const(0) for i in tv.loop if i.static_extent == 1}
    idx = {u: substitute(e, rename) for u, e in indices_from_loop(tv, env).items()}
    index = {p: substitute(var(p.cuda_name), rename) for p in THREAD_TYPES + BLOCK_TYPES}
    ranges: dict[str, Expr] = {index[p].value: launch[p] for p in THREAD_TYPES + BLOCK_TYPES  # type: ignore[misc]
                               if p in launch}
    conds: list[tuple[Expr, str, Expr]] = []
    own = set()
    for i in tv.loop:
        p = i.parallel_type
        if p in THREAD_TYPES or p in BLOCK_TYPES:
            if not i.is_broadcast:
                own.add(p)
                conds.append((index[p], "<", i.extent_expr))
        else:
            ranges[loop_var(tv, i).value] = i.extent_expr  # type: ignore[index]
    conds += [(b.value, "<", b.extent) for b in valid_item_bounds(tv, idx)]
    if tv.memory_type is MemoryType.Global:
        conds += [(index[p], "==", const(0)) for p in BLOCK_TYPES if p in launch and p not in own]
    block = {p: index[p] for p in BLOCK_TYPES if p in launch}
    return Side(tv, ranges, conds, idx, block)


def _writer(ctx: VerifyContext, tv: TensorView) -> Side:
    rename = {p.cuda_name: var(WRITER + p.cuda_name) for p in THREAD_TYPES + BLOCK_TYPES}
    return ctx.memo(("visibility-writer", tv.name), lambda: _loop_nest(ctx, tv, rename))


def _bound_types(tv: TensorView) -> list[ParallelType]:
    """Block types that split tv's elements between blocks (a broadcast axis does not)."""
    return [i.parallel_type for i in tv.loop if i.parallel_type in BLOCK_TYPES and not i.is_broadcast]


def _same_by_construction(op: Op, k: int, types: list[ParallelType]) -> bool:
    """Each block index of the consumer is, as a function of the element it reads, the
    producer's block index of that element: the two block-bound IDs have one and the same
    index expression in the shared logical indices. At every point that executes, every ID's
    index lies in its extent (holes are predicated), where split, merge and XOR swizzle
    undo each other: an ID's index is its forward image from the logical indices, so the
    blocks agree and no query is needed."""
    producer, consumer = op.inputs[k], op.output
    element = [var(f"logical {j}") for j in range(len(producer.logical))]
    read = []
    for j, src in enumerate(op.logical_map[k]):
        mapped = src is not None and not producer.logical[src].is_broadcast
        read.append(element[src] if mapped else var(f"{consumer.name} logical {j}"))
    fwd_p, fwd_c = indices_from_logical(producer, element), indices_from_logical(consumer, read)
    for p in types:
        ip = next(i for i in producer.loop if i.parallel_type is p and not i.is_broadcast)
        ic = [i for i in consumer.loop if i.parallel_type is p and not i.is_broadcast]
        if not ic or ip.uid not in fwd_p or ic[0].uid not in fwd_c:
            return False
        if fwd_p[ip.uid] != fwd_c[ic[0].uid]:
            return False
    return True


def _holds(q, cond: tuple[Expr, str, Expr]):
    a, op, b = cond
    return q.lt(a, b) if op == "<" else q.eq(a, b)


def _all(q, facts: list):
    """z3.And in the query's context (z3.And() of nothing would be another context's True)."""
    return z3.And(*facts) if facts else z3.BoolVal(True, q.ctx)


@rule("SMEM-BLOCK-VISIBILITY", family="visibility")
def smem_block_visibility(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A consumer reads only on-chip elements (shared, tensor, register memory) that its own block wrote.

    What it checks:
        For every op that reads a tensor P in shared, tensor or register (Local) memory
        into C: for every point of C's loop nest that executes (active threads and
        blocks, no hole, and block 0 alone for a global store that no block axis of C
        parallelizes, as the code generator predicates it) and every point of P's loop
        nest that writes the element of P read there (equal logical indices), the
        writer's blockIdx equals the reader's for every block type that a non-broadcast
        loop axis of P binds. A type C does not bind leaves the reader's blockIdx free
        over the launch (or 0 under the single-writer predicate). Where P merges a split
        broadcast into a block axis, several blocks write each element, and one of them
        must be the reader's block (a quantified query). Only blocks are compared:
        which thread of the block holds a register element is not checked here
        (ldmatrix/stmatrix and MMA fragments put elements in other threads' registers
        on purpose; their layouts have their own rules).
    Why the hardware needs it:
        Each thread block has its own shared memory and tensor memory, and registers
        belong to one thread of one block; a block cannot see what another block wrote
        there. A consumer that runs in block 0 while the producer parallelized the same
        elements over blockIdx.x reads memory that block 0 never wrote: a silently wrong
        result. nvFuser rejects such a schedule when lowering (parallel-dimension
        validation of the sync map).
    Example:
        with tp.Fusion("other_blocks_tile") as fusion:
            t0 = tp.make_contig_concrete_tensor([8, 32]); fusion.add_input(t0)
            t1 = tp.set(t0); t2 = tp.set(t1); fusion.add_output(t2)
        t1.set_memory_type(tp.MemoryType.Shared)
        t1.axis(0).parallelize(tp.ParallelType.BIDx)
        t1.axis(1).parallelize(tp.ParallelType.TIDx)
        t2.axis(1).parallelize(tp.ParallelType.TIDx)
    Fix:
        with tp.Fusion("own_blocks_tile") as fusion:
            t0 = tp.make_contig_concrete_tensor([8, 32]); fusion.add_input(t0)
            t1 = tp.set(t0); t2 = tp.set(t1); fusion.add_output(t2)
        t1.set_memory_type(tp.MemoryType.Shared)
        t1.axis(0).parallelize(tp.ParallelType.BIDx)
        t1.axis(1).parallelize(tp.ParallelType.TIDx)
        tp.parallelize_all_like(t1)
    References:
        CUDA C++ Programming Guide, memory hierarchy (shared memory is visible to the threads
        of one block); PTX ISA, tensor memory (allocated per CTA); nvFuser
        csrc/device_lower/analysis/sync_information.cpp (SyncMap: inconsistent parallelization)
    """
    for op in ctx.fusion.exprs:
        for k, p in enumerate(op.inputs):
            if p.memory_type in ON_CHIP and p.definition is not None and _bound_types(p):
                yield from _check(ctx, op, k)


def _repeated(tv: TensorView, types: list[ParallelType]) -> bool:
    """Whether several blocks may write one element: a block-bound loop ID derives from a
    broadcast ID of extent other than 1 (a split broadcast repeats its one element)."""
    hist = {id(t) for t in tv.history}
    stack = [i for i in tv.loop if i.parallel_type in types and not i.is_broadcast]
    while stack:
        i = stack.pop()
        if i.is_broadcast and i.static_extent != 1:
            return True
        t = i.definition
        if t is not None and id(t) in hist:
            stack.extend(t.inputs)
    return False


def _check(ctx: VerifyContext, op: Op, k: int) -> Iterator[Diagnostic]:
    # Formal statement: for every reader point r of C and writer point w of P,
    #   executes_C(r) and executes_P(w) and logical_P(w) == read_k(r)
    #   => for every block type b bound by a non-broadcast loop axis of P: blockIdx_b(w) == blockIdx_b(r)
    # (each element has one writer up to the block types P does not bind: P's loop domain is a
    # complete, non-overlapping cut of its transforms). Where a split broadcast makes several
    # blocks write one element (_repeated), one of them must be the reader's block:
    #   executes_C(r) => exists w: executes_P(w) and logical_P(w) == read_k(r) and blockIdx(w) == blockIdx(r)
    producer, consumer = op.inputs[k], op.output
    types = _bound_types(producer)
    if _same_by_construction(op, k, types):
        return
    r = _loop_nest(ctx, consumer, {})
    w = _writer(ctx, producer)
    read = producer_logical(op, k, r.idx)
    written = [w.idx[i.uid] for i in producer.logical]
    axes = [j for j, i in enumerate(producer.logical) if not i.is_broadcast]
    values = {f"{producer.name} logical {j}": read[j] for j in axes}
    values.update({f"reader {p.cuda_name}": r.block[p] for p in types})
    writer_values = {f"writer {p.cuda_name}": w.block[p] for p in types}
    hint = ([e for c in r.conds + w.conds for e in (c[0], c[2])] + read + written + list(values.values())
            + list(writer_values.values()))
    ranges = {**r.ranges, **w.ranges}
    q = ctx.query(hint, ranges)
    reader_runs = _all(q, [_holds(q, c) for c in r.conds])
    writes = _all(q, [_holds(q, c) for c in w.conds] + [q.eq(written[j], read[j]) for j in axes])
    same_block = _all(q, [q.eq(w.block[p], r.block[p]) for p in types])
    repeated = _repeated(producer, types)
    if not repeated:
        out = q.prove(z3.Implies(z3.And(reader_runs, writes), same_block), values={**values, **writer_values})
    else:
        bound = [q.var(name) for name in w.ranges]  # the query's interval facts do not reach them: restate
        within = [z3.And(z3.UGE(v, q.val(0)), z3.ULT(v, q.term(hi))) if q.bv else z3.And(v >= 0, v < q.term(hi))
                  for v, hi in zip(bound, w.ranges.values())]
        some_writer_here = z3.Exists(bound, _all(q, within + [writes, same_block]))
        out = q.prove(z3.Implies(reader_runs, some_writer_here), values=values)
        if out.status == "counterexample":  # name one block that does write the element
            q2 = ctx.query(hint, ranges)
            fixed = [name for name in list(r.ranges) + list(ctx.fusion.symbols) if name in out.model]
            q2.add(*[q2.var(name) == q2.val(out.model[name]) for name in fixed])
            writes2 = _all(q2, [_holds(q2, c) for c in w.conds] + [q2.eq(written[j], read[j]) for j in axes])
            out.values.update(q2.prove(z3.Not(writes2), values=writer_values).values)
    bound_ids = [i for i in producer.loop if i.parallel_type in types]
    where = dict(tensor=consumer.name, ids=[i.name for i in bound_ids], location=op.origin,
                 labels=[f"{producer.name} ({producer.memory_type.value.lower()} memory) parallelized on "
                         f"{', '.join(i.label() for i in bound_ids)}, created at {producer.origin}"])
    what = f"that {consumer.name} reads only the elements of {producer.name} its own block wrote"
    if out.status == "unknown":
        yield undecided("SMEM-BLOCK-VISIBILITY", what, out, **where)
        return
    if out.proved:
        return
    v = out.values
    sizes = ctx.symbols_of(out.model)
    when = f" when {format_values(sizes)}" if sizes else ""
    element = ", ".join(str(v[f"{producer.name} logical {j}"]) for j in axes)
    writer = ", ".join(f"{p.cuda_name} = {v[f'writer {p.cuda_name}']}" for p in types if f"writer {p.cuda_name}" in v)
    reader = ", ".join(f"{p.cuda_name} = {v[f'reader {p.cuda_name}']}" for p in types)
    point = {name: out.model[name] for name in r.ranges if name in out.model}
    memory = f"{producer.memory_type.value.lower()} memory"
    unbound = [p for p in types if p not in _bound_types(consumer)]
    notes = [f"{memory} is private to a thread block: the block that reads an element "
             f"must be the block that wrote it"]
    if unbound:
        single = consumer.memory_type is MemoryType.Global
        notes.append(f"{consumer.name} does not parallelize {', '.join(str(p) for p in unbound)}: "
                     + ("its store runs in block 0 only (single-writer predicate)" if single
                        else "every block runs its whole loop nest"))
    yield finding(
        "SMEM-BLOCK-VISIBILITY",
        f"{consumer.name} reads {producer.name}[{element}] in the block with {reader}{when}, but "
        + (f"only the block with {writer} writes that element of {memory}" if not repeated
           else f"that block does not write that element of {memory} (the block with {writer or '?'} does)"),
        notes=notes,
        counterexample={**sizes, **point, **v},
        hint=f"parallelize the axes of {consumer.name} that map to {producer.name}'s "
             f"{', '.join(str(p) for p in types)} axes on the same block index (schedule it like "
             f"{producer.name}: tp.propagate_transforms({producer.name}) and "
             f"tp.parallelize_all_like({producer.name})), or do not parallelize {producer.name} across blocks",
        **where,
    )
