"""The visibility claims and their proofs, shared by the visibility rules
(verifier/rules/visibility.py: GLOBAL-VISIBILITY, SMEM-BLOCK-VISIBILITY, THREAD-VISIBILITY)
and the tensor-core layout rules (verifier/rules/mma.py: MMA-OPERAND-LAYOUT, MMA-ACCUM-LAYOUT).

A consumer may only read elements its own block (for registers: its own thread) wrote, at the
address where they were written. For each op and input, `Claim`s say which launch indices the
writer of an element must share with its reader; `check_claims(ctx, code)` proves the claims of
one rule over the execution model (execution/statements.py) the code generator emits: every consumer
point that executes and every producer point that writes the element it reads, with their
predicates (thread/block extents, holes, single writer) and addresses; a failing proof's findings
are built by verifier/analysis/visibility_report.py.
"""


from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Iterator

import z3

from ...execution.statements import Cond, CondKind, TensorExecution, bound_types, store_execution, tensor_execution
from ...execution.grid_reduction import last_block_types
from ...execution.loops import loop_groups
from ...model.expr import Expr, const, substitute, try_int, var
from ...model.fusion import Op
from ...execution.indexing import indices_from_logical, indices_from_root, linear_offset
from ...execution.conditions.lowering import completed_in_block, global_intermediates, launch_axis_clashes
from ...execution.nest import read_back
from ...model.mma_op import is_mma
from ...execution.mma import fragments, well_formed
from ...execution.mma_execution import lane_types, mma_execution
from ...execution.promotion import loop_extents, promoted_positions, promotion
from ...model.tensor import TensorView
from ...model.types import BLOCK_TYPES, THREAD_TYPES, LoadStoreOpType, MemoryType, ParallelType
from ..context import VerifyContext
from ..diagnostics import Diagnostic
from ..solver import Outcome, Verdict
from .visibility_report import WRITER, misread_findings

ON_CHIP = (MemoryType.Shared, MemoryType.Tensor, MemoryType.Local)  # private to a block (Local: to a thread)
LAUNCH_TYPES = THREAD_TYPES + BLOCK_TYPES
# registers a layout rule places in other lanes on purpose (LDSM-REGISTER-LAYOUT proves them)
LANE_EXCHANGES = (LoadStoreOpType.StMatrix,)


@dataclass(frozen=True)
class Claim:
    """Which launch indices the writer of an element must share with its reader."""

    code: str
    compare: tuple[ParallelType, ...]  # must be equal: the reader's and the writer's index
    premise: tuple[ParallelType, ...]  # assumed equal (checked by another claim)
    address: bool  # the writer stored the element at the address the reader reads
    block_hand_off: bool = False  # a TMA store completed in the block before its reads: the block is the owner


def _claims(op: Op, k: int, launched) -> list[Claim]:
    p = op.inputs[k]
    if p.memory_type is MemoryType.Global and completed_in_block(op.output.fusion, p):
        # a TMA store the block waits for (complete, fenced) and syncs after before its reads
        # (execution/barriers.py insert_store_completions): the writer's block is the reader's
        return [Claim("GLOBAL-VISIBILITY", tuple(t for t in BLOCK_TYPES if t in launched), (), False, True)]
    if (is_mma(op.output) and not well_formed(op.output)) or (is_mma(p) and not well_formed(p)):
        return []  # no fragments to prove against: MMA-SHAPE / MMA-TARGET / MMA-DTYPE reject it
    if is_mma(p) and fragments(p).is_tcgen05 and p.memory_type is not MemoryType.Tensor:
        return []  # tcgen05.mma writes tensor memory only: MMA-WARP-COLLECTIVE rejects it
    if p.memory_type is MemoryType.Global and p.definition is not None:
        # no grid-wide barrier orders a store with another thread's load: the writer is the reader
        return [Claim("GLOBAL-VISIBILITY", tuple(t for t in LAUNCH_TYPES if t in launched), (), False)]
    if p.memory_type not in ON_CHIP or p.definition is None:
        return []
    if p.memory_type is not MemoryType.Shared and getattr(p.definition, "op_type", None) in LANE_EXCHANGES:
        return []  # stmatrix writes shared memory only, no register a reader could find: LDSM-THREAD-ROWS rejects it
    bound = bound_types(p)
    # a grid total (execution/grid_reduction.py) is in the last block of its segment only: the
    # reader must be that block, along the block types reduced too
    last = last_block_types(p, launched)
    blocks = tuple(t for t in BLOCK_TYPES if t in bound or t in last)
    threads = tuple(t for t in THREAD_TYPES if t in bound)
    out = []
    if blocks:
        out.append(Claim("SMEM-BLOCK-VISIBILITY", blocks, (), p.memory_type is MemoryType.Shared))
    register_operand = is_mma(op.output) and not fragments(op.output).in_shared("AB"[k])
    if is_mma(p) or register_operand:  # the lanes of a fragment (mma_execution's views): TIDx, and TIDy where
        # the warp(group)'s threads span both (split_lanes); every one of them must be the writer's
        lanes = lane_types(launched, fragments(p if is_mma(p) else op.output).inst.threads)
        threads = tuple(t for t in THREAD_TYPES if (t in threads or t in lanes) and t in launched)
    if p.memory_type is MemoryType.Local and (threads or blocks or _replayed(p)) and op.op_type not in LANE_EXCHANGES:
        code = ("MMA-OPERAND-LAYOUT" if is_mma(op.output) else "MMA-ACCUM-LAYOUT" if is_mma(p)
                else "THREAD-VISIBILITY")
        out.append(Claim(code, threads, blocks, True))
    return out


def _writer(ctx: VerifyContext, tv: TensorView) -> TensorExecution:
    def build():
        ex = mma_execution(tv, ctx.block_dims, "C") if is_mma(tv) else store_execution(tv, ctx.block_dims)
        return ex.launched_apart(WRITER)

    return ctx.memo(("visibility-writer", tv.name), build)


def _reader(ctx: VerifyContext, op: Op, k: int) -> TensorExecution:
    """The consumer's points reading input k whose values are read (an MmaOp reads its operands by
    fragment: mma_execution)."""
    if is_mma(op.output):
        return mma_execution(op.output, ctx.block_dims, "AB"[k])
    return tensor_execution(op.output, ctx.block_dims).reads_within().without_unread_holes()


def _replayed(tv: TensorView) -> bool:
    """Whether tv's loops past its compute-at position are replayed on its promoted loops
    (execution/promotion.py Promotion.replays): a point's register is its own loop's index, no
    forward image of the element it computes (b2[I1 % 4 != 0]: flat 4..7 put b[0] in register 2),
    so each read of it is proved, even by a single thread."""
    promo = promotion(tv) if tv.definition is not None else None
    return promo is not None and bool(promo.replays)


def _repeated(tv: TensorView, types) -> bool:
    """Whether several points write one element: a loop ID bound to one of `types` derives
    from a broadcast ID of extent other than 1 (a split broadcast repeats its one element), or
    is promoted to another tensor's loop (execution/promotion.py: it runs over that tensor's
    extent, computing or loading its own elements again for each of its points)."""
    hist = {id(t) for t in tv.history}
    stack = [i for i in tv.loop if i.parallel_type in types and not i.is_broadcast]
    promoted = {tv.loop[k].uid for k in promoted_positions(tv)} if promotion(tv) is not None else set()
    if any(i.uid in promoted for i in stack):
        return True
    while stack:
        i = stack.pop()
        if i.is_broadcast and i.static_extent != 1:
            return True
        t = i.definition
        if t is not None and id(t) in hist:
            stack.extend(t.inputs)
    return False


def _pinned(tv: TensorView, p: ParallelType) -> bool:
    """tv's statement runs at index 0 of p only: a single-writer predicate (execution.py), which
    along the block types of a grid total is the last block instead."""
    single = tv.memory_type is MemoryType.Global or (tv.memory_type is MemoryType.Shared and p in THREAD_TYPES)
    return single and p not in bound_types(tv) and p not in last_block_types(tv)


def _same_by_construction(op: Op, k: int, types, launch) -> bool:
    """Each launch index of the consumer is, as a function of the element it reads, the
    producer's index of that element: the two bound IDs have one and the same index
    expression in the shared logical indices. At every point that executes, every ID's
    index lies in its extent (holes are predicated), where split, merge and XOR swizzle
    undo each other: an ID's index is its forward image from the logical indices, so the
    indices agree, and so do the addresses (strides times the forward images of one
    element). Not so where a split broadcast repeats an element on either side: its loop
    index is not the image of the broadcast's logical index 0."""
    producer, consumer = op.inputs[k], op.output
    if (is_mma(producer) or is_mma(consumer)) and any(p in THREAD_TYPES for p in types):
        return False  # lanes hold elements by the fragment maps, not by loop IDs (blocks by loop IDs)
    if set(types) & set(last_block_types(producer, launch)):
        return False  # a grid total: its writer is the last block, not a loop ID's index
    if _replayed(producer):
        return False  # its replayed loops' indices are no forward images of its elements
    if _repeated(producer, types) or _repeated(consumer, types):
        return False
    element = [var(f"logical {j}") for j in range(len(producer.logical))]
    read = []
    for j, src in enumerate(op.logical_map[k]):
        mapped = src is not None and not producer.logical[src].is_broadcast
        read.append(element[src] if mapped else var(f"{consumer.name} logical {j}"))
    fwd_p, fwd_c = indices_from_logical(producer, element), indices_from_root(consumer, read)
    for p in types:
        if launch.get(p) == const(1) or (_pinned(producer, p) and _pinned(consumer, p)):
            continue  # both sides run at index 0 of p only (a launch of extent 1, or a single writer)
        ip = next((i for i in producer.loop if i.parallel_type is p and not i.is_broadcast), None)
        ic = [i for i in consumer.loop if i.parallel_type is p and not i.is_broadcast]
        if ip is None or not ic or ip.uid not in fwd_p or ic[0].uid not in fwd_c:
            return False
        if fwd_p[ip.uid] != fwd_c[ic[0].uid]:
            return False
    return True


def _pinned_at(w: TensorExecution, p: ParallelType) -> Expr:
    """The constant index of p the writer's single-writer predicate names: 0, or a warp-specialized
    load's producer index (execution/statements.py); 0 where it names none."""
    own = var(WRITER + p.cuda_name)
    return next((c.rhs for c in w.conds if c.kind is CondKind.SINGLE_WRITER and c.op == "==" and c.lhs == own
                 and not c.rhs.free_vars()), const(0))


def _witness(op: Op, k: int, r: TensorExecution, w: TensorExecution, types) -> dict[str, Expr] | None:
    """A writer point for each reader point, where the producer's loop nest lines up with the
    consumer's (same extents, position by position, as propagate_transforms leaves them): the
    writer's launch indices are the reader's, its loop counters the reader's at that position.
    A promoted producer's loops past the shared ones take the point of its tile that holds the
    element read, a thread-parallel one too where the claim leaves that thread free (not in
    `types`): the block's thread that loaded the element (a TMA box's issuing thread)."""
    producer, consumer = op.inputs[k], op.output
    # the reader's launch indices, but the index of a type the writer's store runs at alone (single writer)
    names: dict[str, Expr] = {WRITER + p.cuda_name: _pinned_at(w, p) if _pinned(producer, p) else var(p.cuda_name)
                              for p in LAUNCH_TYPES}
    extents = loop_extents(producer)
    promo = promotion(producer)
    # a promoted producer's loops past the shared ones: the point of its tile that holds the element read
    tile = indices_from_logical(producer, r.read_logical(k)) if promo is not None else {}
    free = {WRITER + p.cuda_name for p in LAUNCH_TYPES if p not in types and not _pinned(producer, p)}
    for j, i in enumerate(producer.loop):
        e = w.env[i.uid]
        if e.op != "var":
            continue
        if promo is not None and j >= promo.positions and (e.value not in names or e.value in free):
            names[e.value] = tile[i.uid]
            continue
        if e.value in names:
            continue
        if j >= len(consumer.loop) or consumer.loop[j].extent_expr != extents[j]:
            return None
        names[e.value] = r.env[consumer.loop[j].uid]
    return names


def _all(q, facts: list):
    """z3.And in the query's context (z3.And() of nothing would be another context's True)."""
    return z3.And(*facts) if facts else z3.BoolVal(True, q.ctx)


@dataclass
class Proof:
    outcome: Outcome
    repeated: bool
    element: list[int]  # the producer's non-broadcast logical axes
    address: tuple[Expr, Expr] | None  # (the reader's, the writer's)


def _prove(ctx: VerifyContext, op: Op, k: int, claim: Claim) -> Proof | None:
    # Formal statement: for every reader point r of C and writer point w of P,
    #   executes_C(r) and executes_P(w) and logical_P(w) == read_k(r) and premise(w, r)
    #   => for every compared type t: index_t(w) == index_t(r)  [and address_P(w) == address_read(r)]
    # (each element has one writer up to the types P does not bind: P's loop domain is a
    # complete, non-overlapping cut of its transforms). Where a split broadcast makes several
    # points write one element (_repeated), one of them must be the reader's:
    #   executes_C(r) => exists w: executes_P(w) and logical_P(w) == read_k(r) and premise(w, r)
    #                              and compared indices equal [and address_P(w) == address_read(r)]
    producer = op.inputs[k]
    types = claim.compare + claim.premise
    if _same_by_construction(op, k, types, ctx.block_dims):
        return None
    r = _reader(ctx, op, k)
    w = _writer(ctx, producer)
    read = r.read_logical(k)
    written = w.written_logical()
    axes = [j for j, i in enumerate(producer.logical) if not i.is_broadcast and not i.is_reduction]
    address = None
    if claim.address:
        strides = ctx.allocations[producer.name].strides()
        address = (linear_offset(strides, r.operand_indices(k)) if strides else const(0),
                   linear_offset(strides, w.indices) if strides else const(0))
    values = {f"{producer.name} logical {j}": read[j] for j in axes}
    values.update({f"reader {p.cuda_name}": r.launch_index[p] for p in types})
    writer_values = {f"writer {p.cuda_name}": w.launch_index[p] for p in types}
    if address:
        values["reader address"] = address[0]
        writer_values["writer address"] = address[1]
    iteration = _same_iteration(ctx, op, k, r, w)
    hint = ([e for c in r.conds + w.conds for e in (c.lhs, c.rhs)] + read + written + list(values.values())
            + list(writer_values.values()) + [e for pair in iteration for e in pair])
    ranges = {**r.ranges, **w.ranges}
    repeated = _repeated(producer, types)
    if not repeated and address and _same_allocated_indices(ctx, producer, r, w, k, claim):
        return Proof(Outcome(Verdict.PROVED), repeated, axes, address)
    def parts(q):
        """(the reader runs, a writer writes the element read, the claimed equalities) in q."""
        same = [q.eq(w.launch_index[p], r.launch_index[p]) for p in claim.compare]
        if address:
            same.append(q.eq(address[1], address[0]))
        return (_all(q, [q.holds(c) for c in r.conds]),
                _all(q, [q.holds(c) for c in w.conds] + [q.eq(written[j], read[j]) for j in axes]
                     + [q.eq(w.launch_index[p], r.launch_index[p]) for p in claim.premise]), same)

    def one_writer(q):  # every writer of the element read is the reader's
        reader_runs, writes, same = parts(q)
        return z3.Implies(z3.And(reader_runs, writes), _all(q, same))
    if not repeated:  # over the integers first where the terms have a rendering there (fuzz seed 95 case 1082:
        # a shared broadcast over merged symbolic axes on blockIdx.y, 20 s over bit-vectors)
        out = ctx.proof_over_integers_first(hint, ranges, one_writer, values={**values, **writer_values})
        if out is not None:
            return Proof(out, repeated, axes, address)
    q = ctx.query(hint, ranges)
    reader_runs, writes, same = parts(q)
    if repeated and (witness := _witness(op, k, r, w, types)) is not None:
        # one writer named as a function of the reader: proving it writes the element read
        # (quantifier-free) proves the existential below; if it does not, z3 searches for one
        ww = w.renamed(witness)
        wq = ctx.query(hint + [e for c in ww.conds for e in (c.lhs, c.rhs)] + ww.written_logical(), r.ranges)
        # what holds as written (a condition the reader's point states too, equal expressions) is left out
        given = {(c.lhs, c.op, c.rhs) for c in r.conds}
        pairs = [(ww.written_logical()[j], read[j]) for j in axes] + [
            (ww.launch_index[p], r.launch_index[p]) for p in types] + (
            [(linear_offset(ctx.allocations[producer.name].strides(), ww.indices), address[0])]
            if address and ctx.allocations[producer.name].strides() else [])
        # a writer index named by an expression (a tile's point) must lie in that index's range too
        inside = [(witness[n], substitute(bound, witness)) for n, bound in w.ranges.items()
                  if n in witness and not (witness[n].op == "var" and witness[n].value in r.ranges
                                           and r.ranges[witness[n].value] == substitute(bound, witness))]
        goals = ([([c.lhs, c.rhs], lambda q, c=c: q.holds(c)) for c in ww.conds if (c.lhs, c.op, c.rhs) not in given]
                 + [([a, b], lambda q, a=a, b=b: q.eq(a, b)) for a, b in pairs if a != b]
                 + [([e, b], lambda q, e=e, b=b: z3.And(q.le(const(0), e), q.lt(e, b))) for e, b in inside])
        left = ctx.unproved_over_integers(r.conds, goals, r.ranges)
        if not left or wq.prove(z3.Implies(_all(wq, [wq.holds(c) for c in r.conds]), _all(wq, [g(wq) for _, g in left])),
                                values=values).proved:
            return Proof(Outcome(Verdict.PROVED), repeated, axes, address)
    if not repeated:
        out = q.prove(one_writer(q), values={**values, **writer_values})
    else:
        bound = [q.var(name) for name in w.ranges if name not in r.ranges]  # restate: the query's
        within = [z3.And(z3.UGE(v, q.val(0)), z3.ULT(v, q.term(w.ranges[name])))  # facts do not reach them
                  if q.bv else z3.And(v >= 0, v < q.term(w.ranges[name]))
                  for v, name in zip(bound, [n for n in w.ranges if n not in r.ranges])]
        now = [q.eq(a, b) for a, b in iteration]  # the write of the reader's iteration: a later one overwrote others
        out = q.prove(z3.Implies(reader_runs, z3.Exists(bound, _all(q, within + [writes] + now + same))), values=values)
        if out.status is Verdict.COUNTEREXAMPLE:  # name a writer: in the reader's block/thread if one is there
            for near in (True, False):
                q2 = ctx.query(hint, ranges)
                fixed = [name for name in list(r.ranges) + list(ctx.fusion.symbols) if name in out.model]
                q2.add(*[q2.var(name) == q2.val(out.model[name]) for name in fixed])
                facts = ([q2.holds(c) for c in w.conds] + [q2.eq(written[j], read[j]) for j in axes]
                         + [q2.eq(w.launch_index[p], r.launch_index[p]) for p in claim.premise]
                         + [q2.eq(a, b) for a, b in iteration])
                if near:
                    facts += [q2.eq(w.launch_index[p], r.launch_index[p]) for p in claim.compare]
                found = q2.prove(z3.Not(_all(q2, facts)), values=writer_values)
                if found.status is Verdict.COUNTEREXAMPLE:
                    out.values.update(found.values)
                    break
    return Proof(out, repeated, axes, address)


def _same_iteration(ctx: VerifyContext, op: Op, k: int, r: TensorExecution,
                    w: TensorExecution) -> list[tuple[Expr, Expr]]:
    """(writer's, reader's) counter of each loop the producer shares with the consumer that is no
    thread or block index and not allocated: an on-chip producer computed inside it writes the
    same storage at each of its iterations, so the element read is the one written in the
    reader's iteration, not one an earlier iteration left there."""
    producer, consumer = op.inputs[k], op.output
    allocation = ctx.allocations.get(producer.name)
    if producer.memory_type not in ON_CHIP or allocation is None:
        return []
    groups = loop_groups(producer.fusion)
    allocated = {a.id.uid for a in allocation.allocated()}
    launched = {WRITER + p.cuda_name for p in LAUNCH_TYPES} | {p.cuda_name for p in LAUNCH_TYPES}
    out = []
    for j in range(min(producer.compute_at, len(producer.loop), len(consumer.loop))):
        if groups.of.get((producer.name, j)) is not groups.of.get((consumer.name, j)):
            continue
        a, b = w.env[producer.loop[j].uid], r.env[consumer.loop[j].uid]
        if a.op == "var" and a.value not in launched and a != b and producer.loop[j].uid not in allocated:
            out.append((a, b))
    return out


# Equal allocated indices give equal offsets (one stride per index): a stronger claim than the
# offsets' equality, without the products of symbolic strides that stall z3 on the offsets (a
# persistent grid's accumulator allocated over all ceil(M / 128) x ceil(N / 256) tiles: 20 s and
# no verdict). Tried first, with a short limit; where it fails the offsets' claim is asked.
INDICES_MS = 2000


def _same_allocated_indices(ctx: VerifyContext, producer, r, w, k: int, claim) -> bool:
    # Formal statement: for every reader point r of C and writer point w of P,
    #   executes_C(r) and executes_P(w) and logical_P(w) == read_k(r) and premise(w, r)
    #   => for every compared type t: index_t(w) == index_t(r) and for every allocated ID j of P:
    #      index_j(w) == read_index_j(r)
    read_at = r.operand_indices(k)
    pairs = [(w.indices[a.id.uid], read_at[a.id.uid]) for a in ctx.allocations[producer.name].allocated()]
    pairs += [(w.launch_index[p], r.launch_index[p]) for p in claim.compare]
    hint = ([e for c in r.conds + w.conds for e in (c.lhs, c.rhs)] + r.read_logical(k) + w.written_logical()
            + [e for pair in pairs for e in pair] + [e for p in claim.premise
                                                      for e in (w.launch_index[p], r.launch_index[p])])
    s = ctx.query(hint, {**r.ranges, **w.ranges}, timeout_ms=INDICES_MS)
    axes = [j for j, i in enumerate(producer.logical) if not i.is_broadcast and not i.is_reduction]
    read, written = r.read_logical(k), w.written_logical()
    runs = _all(s, [s.holds(c) for c in r.conds])
    wrote = _all(s, [s.holds(c) for c in w.conds] + [s.eq(written[j], read[j]) for j in axes]
                 + [s.eq(w.launch_index[p], r.launch_index[p]) for p in claim.premise])
    return s.prove(z3.Implies(z3.And(runs, wrote), _all(s, [s.eq(a, b) for a, b in pairs])), shrink_units=0).proved


def _proof(ctx: VerifyContext, op: Op, k: int, claim: Claim) -> Proof | None:
    return ctx.memo(("visibility", claim.code, id(op), k), lambda: _prove(ctx, op, k, claim))


_ENUMERATED = 256  # the most writer points prove_owned_read tries one by one


def prove_owned_read(ctx: VerifyContext, reader: TensorExecution, producer: TensorView, read: list[Expr]) -> Outcome:
    """A read that is no op's input (an online max's growth, read by the statement that rescales an
    MmaOp's accumulators: execution/online.py): at every point of `reader` that executes, reading
    register tensor `producer`'s element at logical index `read`, some point of the producer's
    store wrote that element in the reader's own thread (equal indices for every launch type the
    producer binds; along the others each thread writes its own copy)."""
    # Formal statement: for every reader point r that executes:
    #   exists writer point w: executes_P(w) and logical_P(w) == read(r)
    #                          and for each launch type t P binds: index_t(w) == index_t(r)
    w = _writer(ctx, producer)
    written = w.written_logical()
    axes = [j for j, i in enumerate(producer.logical) if not i.is_broadcast and not i.is_reduction]
    bound = [p for p in LAUNCH_TYPES if p in reader.launch_index and p in w.launch_index
             and any(i.parallel_type is p for i in producer.loop)]
    values = {f"{producer.name} logical {j}": read[j] for j in axes}
    values.update({f"reader {p.cuda_name}": reader.launch_index[p] for p in LAUNCH_TYPES if p in reader.launch_index})
    hint = [e for c in reader.conds + w.conds for e in (c.lhs, c.rhs)] + read + written + list(values.values())
    ranges = {**reader.ranges, **w.ranges}
    q = ctx.query(hint, ranges)
    free = [name for name in w.ranges if name not in reader.ranges]
    runs = _all(q, [q.holds(c) for c in reader.conds])
    # the writer's launch indices equal the reader's: substituted (within the writer's ranges), not searched
    same = {e.value: reader.launch_index[p] for p in bound for e in (w.launch_index[p],)
            if e.op == "var" and e.value in free}
    free = [name for name in free if name not in same]
    launched = [Cond(e, "<", w.ranges[name], "the writer's launch index") for name, e in same.items()]

    def writes_at(env: dict) -> z3.BoolRef:
        env = {**same, **env}
        return _all(q, [q.holds(c) for c in launched] + [q.holds(c.renamed(env)) for c in w.conds]
                    + [q.eq(substitute(written[j], env), read[j]) for j in axes]
                    + [q.eq(substitute(w.launch_index[p], env), reader.launch_index[p]) for p in bound])
    sizes = [try_int(w.ranges[name]) for name in free]
    if all(s is not None for s in sizes) and math.prod(sizes) <= _ENUMERATED:
        # the writer's own loops few and constant (a thread's rows of a fragment): each point in turn,
        # no quantifier (the existential over div / mod of a persistent tile index left z3 undecided)
        body = z3.Or([writes_at({name: const(v) for name, v in zip(free, point)})
                      for point in itertools.product(*(range(s) for s in sizes))])
        return q.prove(z3.Implies(runs, body), values=values)
    bound_vars = [q.var(name) for name in free]
    within = [z3.And(z3.UGE(v, q.val(0)), z3.ULT(v, q.term(w.ranges[name]))) if q.bv else
              z3.And(v >= 0, v < q.term(w.ranges[name])) for v, name in zip(bound_vars, free)]
    writes = _all(q, within + [writes_at({})])
    body = z3.Exists(bound_vars, writes) if bound_vars else writes
    return q.prove(z3.Implies(runs, body), values=values)


def check_claims(ctx: VerifyContext, code: str) -> Iterator[Diagnostic]:
    """The findings of rule `code`: each of its claims (Claim) about an op reading a tensor
    another op wrote, proved over both execution models, that fails or is undecided."""
    clashing = ctx.memo(("launch-axis-clashes",), lambda: {p.tensor for p in launch_axis_clashes(ctx.fusion)})
    unbuffered = ctx.memo(("global-intermediates",), lambda: {
        p.tensor for p in global_intermediates(ctx.fusion) if not read_back(ctx.fusion.tensor(p.tensor))})
    for op in ctx.fusion.exprs:
        if op.output.name in clashing or any(t.name in clashing for t in op.inputs):
            continue  # one index bound to two axes has no single value: PARALLEL-TYPE-UNIQUE rejects it
        for k in range(len(op.inputs)):
            if set(last_block_types(op.inputs[k])) & bound_types(op.output):
                continue  # every block would read a grid total, only in the last: REDUCTION-GRID rejects the allreduce
            if op.inputs[k].name in unbuffered:
                continue  # a global intermediate the kernel has no buffer for (no TMA store's read-back): GLOBAL-INTERMEDIATE rejects it
            claims = _claims(op, k, ctx.block_dims)
            for claim in claims:
                if claim.code != code:
                    continue
                if claim.premise and any(_disproved(ctx, op, k, c) for c in claims
                                         if c.code != code and (ctx.running is None or c.code in ctx.running)):
                    continue  # the block claim has a counterexample, reported by its rule: that cause alone
                proof = _proof(ctx, op, k, claim)
                if proof is not None:
                    yield from misread_findings(ctx, op, k, claim, proof)


def _disproved(ctx: VerifyContext, op: Op, k: int, claim: Claim) -> bool:
    """Whether claim has a counterexample (an undecided one does not hide this rule's own)."""
    proof = _proof(ctx, op, k, claim)
    return proof is not None and proof.outcome.status is Verdict.COUNTEREXAMPLE
