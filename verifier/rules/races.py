"""Races on on-chip memory: every cross-thread hand-off through shared or tensor memory is
ordered by a barrier or an mbarrier wait of the kernel's loop nest (execution/nest.py places
them; this rule checks the placed nest, hazard by hazard)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import z3

from ...execution.barriers import Async, BulkStoreWait, Sync, TmaWait, scope_repeats, split_point, statement_paths
from ...execution.statements import store_execution, tensor_execution
from ...model.expr import Expr
from ...execution.indexing import linear_offset
from ...execution.loops import statement_tensor
from ...model.tensor import TensorView
from ...model.types import BLOCK_TYPES, THREAD_TYPES, LoadStoreOpType, MemoryType, OpKind
from ...execution.barriers import Tcgen05Wait, WgmmaWait
from ...execution.nest import PlacedNest, placed_nest
from ..context import VerifyContext
from ..diagnostics import Diagnostic
from ..findings import finding, undecided
from ..registry import rule
from ..solver import Outcome, Verdict

# ops whose on-chip side is touched by other lanes than the statement's thread (warp-collective
# or asynchronous): a hand-off between threads is assumed, not proved absent
COLLECTIVE = (LoadStoreOpType.LdMatrix, LoadStoreOpType.StMatrix, LoadStoreOpType.TMemLoad,
              LoadStoreOpType.TMemStore, LoadStoreOpType.TMA, LoadStoreOpType.CpAsync, LoadStoreOpType.CpAsyncBulk)
WRITER = "writer "
EXIT = "exit before read"  # the block may exit while a TMA store still reads its shared memory


def _handoff(ctx: VerifyContext, x: TensorView, reader: TensorView) -> Outcome | None:
    """Whether a thread may read an element of x that another thread of its block wrote
    (a counterexample names both threads and the offset); None: assumed (collective/async)."""
    # Formal statement: exists w executing x's statement, r executing reader's statement with
    #   blockIdx(w) == blockIdx(r) and address_x(w) == address_read(r) and threadIdx(w) != threadIdx(r)
    if x.memory_type is not MemoryType.Shared or any(
            op.op_type in COLLECTIVE for op in (x.definition, reader.definition) if op.kind is OpKind.LOAD_STORE):
        return None
    w = store_execution(x, ctx.block_dims).launched_apart(WRITER)
    strides = ctx.allocations[x.name].strides()
    reads = [k for k, t in enumerate(reader.definition.inputs) if t is x]
    if reads:
        r = tensor_execution(reader, ctx.block_dims)
        addr_r = linear_offset(strides, r.operand_indices(reads[0]))
    else:  # x's own statement reads it in place (an accumulator): where it stores
        r = store_execution(x, ctx.block_dims)
        addr_r = linear_offset(strides, r.indices)
    addr_w = linear_offset(strides, w.indices)
    threads = [p for p in THREAD_TYPES if p in w.launch_index]
    values: dict[str, Expr] = {"offset": addr_r}
    values.update({f"writer {p.cuda_name}": w.launch_index[p] for p in threads})
    values.update({f"reader {p.cuda_name}": r.launch_index[p] for p in threads})
    hint = [e for c in r.conds + w.conds for e in (c.lhs, c.rhs)] + [addr_w, addr_r] + list(values.values())
    q = ctx.query(hint, {**r.ranges, **w.ranges})
    conds = [q.holds(c) for c in r.conds + w.conds]
    same_block = [q.eq(w.launch_index[p], r.launch_index[p]) for p in BLOCK_TYPES if p in w.launch_index]
    same_thread = [q.eq(w.launch_index[p], r.launch_index[p]) for p in threads]
    premise = z3.And(*conds, *same_block, q.eq(addr_w, addr_r)) if conds or same_block else q.eq(addr_w, addr_r)
    claim = z3.And(*same_thread) if same_thread else z3.BoolVal(True, q.ctx)
    return q.prove(z3.Implies(premise, claim), values=values)


def _sync_in(scope: list, lo: int, hi: int, *, fence: bool = False) -> bool:
    """A barrier (with the async-proxy fence, if asked) among scope[lo:hi]."""
    return any(isinstance(n, Sync) and (n.fence_async or not fence) for n in scope[max(lo, 0):hi])


def _wait_in(scope: list, lo: int, hi: int, barrier: str) -> bool:
    return any(isinstance(n, TmaWait) and n.barrier == barrier for n in scope[max(lo, 0):hi])


def _completes(kind: Async, n) -> bool:
    """Whether node n completes the asynchronous reads of a `kind` statement before it: a
    wgmma.wait_group 0 (wgmma), the wait on a tcgen05.commit's mbarrier (tcgen05.mma)."""
    if kind is Async.WGMMA:
        return isinstance(n, WgmmaWait) and n.pending == 0
    return isinstance(n, Tcgen05Wait)


def _read_done(scope: list, ir: int, kind: Async, path: list) -> int | None:
    """Where the read at scope[ir] is over: there, or for a wgmma at the first wgmma.wait_group 0
    after it (a tcgen05.mma: the first wait on its commit's mbarrier); for one nested in scope[ir]
    (a loop; `path` the read's), at scope[ir] itself where such a wait follows the read in a body
    inside it: each run of that body waits for its reads (None: no such wait, the tensor cores may
    still read when the scope repeats)."""
    if kind not in (Async.WGMMA, Async.TCGEN05):
        return ir
    after = next((p for p in range(ir + 1, len(scope)) if _completes(kind, scope[p])), None)
    inner = [own[at + 1:] for own, at in path[next(k for k, (s, _) in enumerate(path) if s is scope) + 1:]]
    if after is None and any(_completes(kind, n) for rest in inner for n in rest):
        return ir  # a body inside scope[ir] waits after the read, each time it runs
    return after


def _store_read_then_sync(scope: list, iw: int, ir: int) -> bool:
    """A TMA store's reads at scope[ir] end at a BulkStoreWait followed by a barrier before the
    next iteration's write at scope[iw] (the way round: after the store, or before the write)."""
    way = scope[ir + 1:] + scope[:iw] if iw < ir else scope[ir + 1:iw]
    waited = next((p for p, n in enumerate(way) if isinstance(n, BulkStoreWait)), None)
    return waited is not None and _sync_in(way, waited + 1, len(way))


@dataclass(frozen=True)
class Hazard:
    kind: str  # "read after write" or "write after read"
    tensor: str
    writer: TensorView
    reader: TensorView


def unordered(nest_: PlacedNest) -> list[Hazard]:
    """Every writer -> reader pair of an on-chip tensor whose hazard no barrier or wait orders."""
    out = []
    stmts = statement_paths(nest_.tree, nest_.hazards)
    for name in sorted(nest_.on_chip):
        for w, wa, wp in stmts:
            if wa.writes != name or wa.circular is not None:
                continue  # a circular buffer's hand-offs: CPASYNC-WAIT and PIPELINE-WAR prove them
            for r, ra, rp in stmts:
                if name not in ra.reads:
                    continue
                if wp == rp:  # one statement reads what it writes (an update in place): no barrier orders a run's
                    # reads after its writes (execution/barriers.py puts one after it for the next run): a race
                    # exactly where some thread reads an element another one writes (_handoff)
                    out.append(Hazard("read after write", name, statement_tensor(w), statement_tensor(r)))
                    continue
                d = split_point(wp, rp)
                scope, iw, ir = wp[d][0], wp[d][1], rp[d][1]
                repeats = scope_repeats(wp, d, nest_.hazards)
                store = ra.kind is Async.TMA_STORE
                if wa.kind in (Async.CP_ASYNC, Async.TCGEN05):  # their waits: CPASYNC-WAIT, TCGEN05-ASYNC-ORDER
                    raw = True
                elif wa.kind is Async.TMA_LOAD:  # a wait in the copy's own scope, after the copy
                    own, at = wp[-1]
                    limit = rp[d][1] + 1 if d == len(wp) - 1 else len(own)
                    raw = _wait_in(own, at + 1, limit, wa.barrier)
                elif iw < ir:  # threads' writes reach the async proxy (TMA store, wgmma, tcgen05.mma) through the fence
                    raw = _sync_in(scope, iw + 1, ir, fence=store or ra.kind in (Async.WGMMA, Async.TCGEN05))
                else:  # the reader comes first: it reads the previous iteration's writes
                    raw = not repeats or _sync_in(scope, iw + 1, len(scope)) or _sync_in(scope, 0, ir)
                if not raw:
                    out.append(Hazard("read after write", name, statement_tensor(w), statement_tensor(r)))
                if repeats and store:  # the copy engine reads until the issuing thread's bulk wait
                    war = _store_read_then_sync(scope, iw, ir)
                elif repeats:
                    done = _read_done(scope, ir, ra.kind, rp)
                    war = done is not None and (_sync_in(scope, done + 1, len(scope)) or _sync_in(scope, 0, iw)
                                                if iw < ir else _sync_in(scope, done + 1, iw))
                if repeats and not war:
                    out.append(Hazard("write after read", name, statement_tensor(w), statement_tensor(r)))
    stores = [(r, ra) for r, ra, _ in stmts if ra.kind is Async.TMA_STORE]
    if stores and not (nest_.tree and isinstance(nest_.tree[-1], BulkStoreWait)):  # shared memory outlives the reads
        r, ra = stores[-1]
        out.append(Hazard(EXIT, next(iter(ra.reads)), statement_tensor(r), statement_tensor(r)))
    return out


@rule("SMEM-RACE", family="races")
def smem_race(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Every cross-thread hand-off through shared or tensor memory is ordered by a barrier or wait.

    What it checks:
        On the kernel's loop nest with the barriers and mbarrier waits the code generator
        places (execution/nest.py): for every on-chip tensor, every statement that writes it
        and every statement that reads it, (read after write) a __syncthreads between the
        write and the read in the innermost scope holding both (with fence.proxy.async before
        it where the reader is the async proxy: a TMA store, a wgmma, a tcgen05.mma), or, for a
        TMA load, an mbarrier wait after the copy in its own scope before the reader (a
        tcgen05.mma's accumulators: TCGEN05-ASYNC-ORDER proves their wait); and (write after
        read) where that scope repeats, a barrier between the read and the next iteration's
        write (for a wgmma or tcgen05.mma, which read asynchronously, between the wgmma.wait_group
        0 or the wait on the commit's mbarrier after it and that write). A pair needs ordering when some thread reads an element another thread of its
        block wrote (z3 over both statements' executed points, same block, same shared-memory
        offset, different threadIdx; collective and asynchronous accesses always do). The
        counterexample names the two threads and the offset.
    Why the hardware needs it:
        Threads of a block run unordered: without a barrier a reader may load the element
        before its writer stored it (read after write), or a writer may overwrite it in the
        next iteration while a reader still needs the old value (write after read); a TMA
        load's data are visible only after its mbarrier phase completes.
    Example:
        none: tileproof places every barrier itself, so no schedule written with today's API
        fails this rule; it proves the placement on every schedule (tests/rules/test_races.py
        removes barriers and shows the races it then reports)
    Fix:
        none: a report of this rule on an unmodified schedule is a tileproof bug
    References:
        CUDA C++ Programming Guide, __syncthreads and shared memory; PTX ISA, mbarrier
        (test_wait / try_wait with phase parity) and the async proxy (fence.proxy.async);
        docs/hardware.md#barriers-and-mbarriers
    """
    # Formal statement: structural on the barrier-placed nest: every writer -> reader pair of an on-chip
    #   tensor x has a barrier (a TMA load: its mbarrier wait) between write and read, and where their
    #   common scope repeats, between read and next write; an unordered pair is a race unless x is shared,
    #   neither access is collective or asynchronous, and (_handoff) for all admitted sizes, writer points
    #   w, reader points r: executes_x(w) and executes_reader(r) and blockIdx(w) == blockIdx(r)
    #   and address_x(w) == address_read(r) => threadIdx(w) == threadIdx(r)
    nest_ = placed_nest(ctx.fusion)
    if nest_ is None:
        return
    tensors = {t.name: t for t in ctx.fusion.tensors}
    for h in unordered(nest_):
        x = tensors[h.tensor]
        if h.kind == EXIT:
            yield finding(
                "SMEM-RACE", f"the block may exit while {h.reader.name}'s TMA store still reads {x.name}: no "
                             f"cp.async.bulk.wait_group.read ends the kernel",
                notes=["tileproof places barriers itself: this is a tileproof bug, please report it"],
                counterexample={"hazard": h.kind}, hint="report the schedule", tensor=h.reader.name,
                location=h.reader.definition.origin)
            continue
        out = ctx.memo(("handoff", h.tensor, h.reader.name), lambda: _handoff(ctx, x, h.reader))
        where = dict(tensor=h.reader.name, location=h.reader.definition.origin,
                     labels=[f"{x.name} ({x.memory_type.value.lower()} memory) written by {h.writer.name}'s statement"])
        if out is not None and out.status is Verdict.UNKNOWN:
            yield undecided("SMEM-RACE", f"whether threads hand {x.name} over to {h.reader.name}", out, **where)
            continue
        if out is not None and out.proved:
            continue  # each thread reads only what it wrote itself: no barrier is needed
        v = out.values if out is not None else {}
        threads = ", ".join(f"{k} = {val}" for k, val in v.items() if k != "offset")
        between = (f" (offset {v['offset']}: {threads})" if v else " (a collective or asynchronous access)")
        yield finding(
            "SMEM-RACE",
            f"{h.kind} race on {x.name}: no barrier orders {h.writer.name}'s write and {h.reader.name}'s "
            f"read{between}",
            notes=["tileproof places barriers itself: this is a tileproof bug, please report it"],
            counterexample={**v, "hazard": h.kind},
            hint="report the schedule; until it is fixed, inline the reader and writer differently",
            **where,
        )
