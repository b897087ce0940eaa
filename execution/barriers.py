"""Where the kernel synchronises: __syncthreads and mbarrier waits in a loop nest, placed once.

nest.py runs this pass, then the pipelines' and wgmma's; the code generator lowers the nest they
place (codegen/lower/loop_nest.py) and the verifier's SMEM-RACE rule checks it (verifier/rules/races.py). The nest is any tree of
loops (nodes with a `body`) whose leaves are statements; `Hazards` says what a leaf writes and
reads of on-chip memory and whether a loop repeats (a serial or unrolled loop, not a
thread/block index).

Read after write: between the statement writing an on-chip tensor and each statement reading
it, in the innermost scope holding both, unless a barrier already sits between.
Write after read: when that scope repeats, the next iteration's write must wait for this
iteration's reads: a barrier after the last reader, unless one already sits on the way round.
Statements are predicated one by one and thread/block "loops" are not conditionals, so every
barrier is reached by every thread of the block.

TMA: a load's data arrive on its mbarrier, so its readers need a wait, not a barrier: all
threads wait in the copy's own scope (one wait per copy issued), just before the first child
that reads the tile. A TMA store reads shared memory through the async proxy, so the barrier
before it is preceded by fence.proxy.async in the writing threads; it reads asynchronously
until its issuing thread's cp.async.bulk.wait_group.read (a BulkStoreWait): where the tile is
rewritten in the next iteration, the wait and a barrier go just before the rewrite (the store
runs on while the next iteration computes), and the kernel ends with one (a block's shared
memory must outlive the reads). A global tensor a TMA store writes and the block reads back
(insert_store_completions, run last): every thread waits for its stores to complete
(cp.async.bulk.wait_group 0, then fence.proxy.async.global), then a barrier, before the reader.

cp.async: each thread's copies complete only after it commits them to a group and waits for
the group (cp.async.wait_group), and other threads see them after a barrier that follows the
wait: a CpAsyncWait (commit, then wait until none is in flight) and the barrier go where the
read-after-write barrier would. A circular-buffered copy is pipelined over its loop instead:
pipeline.py's insert_pipelines, run after this pass (nest.py), places its prologue, waits and barriers.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable

from ..model.expr import const

Path = list[tuple[list, int]]  # (scope, index in scope) from the root down to a statement


class Async(enum.Enum):
    """How a statement touches on-chip memory besides plain thread loads and stores."""

    NONE = "threads"
    TMA_LOAD = "TMA load"  # written by the copy engine, complete on an mbarrier
    TMA_STORE = "TMA store"  # read by the copy engine (the async proxy)
    CP_ASYNC = "cp.async"  # written by the thread's async copies, complete after cp.async.wait_group
    WGMMA = "wgmma"  # read by the warpgroup's asynchronous MMA, complete after wgmma.wait_group (wgmma_order.py)
    # one thread's asynchronous tcgen05.mma: reads its shared tiles, writes its tensor-memory accumulators,
    # complete when the mbarrier its tcgen05.commit arrives on completes (tcgen05_order.py)
    TCGEN05 = "tcgen05.mma"


@dataclass(frozen=True)
class Access:
    """What a statement does to on-chip memory."""

    writes: str | None
    reads: frozenset[str]
    kind: Async = Async.NONE
    barrier: str | None = None  # a TMA load's mbarrier
    # a circular-buffered cp.async or TMA load: (stages, prefetch, depth of its circular loop in
    # the statement's path); execution/pipeline.py places its waits and barriers
    circular: tuple[int, int, int] | None = None
    specialized: object | None = None  # its WarpSpecialized type (execution/warp_roles.py), if any
    war_mbarrier: bool = False  # Pipelined(uses_mbarrier_for_war=True): refills wait on empty mbarriers
    private: bool = False  # a register circular buffer: each thread's own copy, ordered by program order
    stores: str | None = None  # a TMA store's global tensor


@dataclass
class Sync:
    """__syncthreads(): `why` names the on-chip tensor and the hazard. fence_async: the threads
    first order their shared-memory writes before the async proxy (a TMA store reads them)."""

    why: str
    fence_async: bool = False


@dataclass
class TmaWait:
    """All threads wait for the current phase of a load's mbarrier, then flip their phase bit.
    In a circular buffer's loop (`stages` > 1: one mbarrier per stage) iteration i waits on
    mbarrier i % stages (`index`: i, filled in by the code generator), with that stage's phase
    bit: the loop loads each stage exactly as often as it waits for it (the prologue and the
    refills load iterations 0 .. E - 1 once each), so the k-th wait on a stage's mbarrier is for
    its k-th load, in this run of the loop and in the next (an outer loop)."""

    barrier: str
    why: str
    stages: int = 0
    index: str | None = None


@dataclass
class CpAsyncWait:
    """Every thread commits its cp.async copies not yet committed as one group (when `commit`;
    an empty group where it issued none), then waits until at most `pending` of its groups are
    in flight (cp.async.commit_group; cp.async.wait_group pending)."""

    pending: int
    why: str
    commit: bool = True


@dataclass
class BulkStoreWait:
    """Every thread waits until the TMA stores it issued have read their shared memory
    (cp.async.bulk.wait_group.read 0; each store is its own bulk group; a thread that issued
    none passes at once). complete: until they have also written global memory
    (cp.async.bulk.wait_group 0, no .read), then fence.proxy.async.global orders those
    async-proxy writes before the thread's later generic-proxy accesses (a barrier after it
    carries them to the block's other threads)."""

    why: str
    complete: bool = False


@dataclass(frozen=True)
class CpAsyncCommit:
    """Every thread commits its cp.async copies not yet committed as one group, an empty group
    where it issued none (cp.async.commit_group), and goes on without waiting."""

    why: str


@dataclass(frozen=True)
class Hazards:
    """The nest's vocabulary: what a leaf accesses (None: not a statement), whether a loop repeats
    and how many times it runs (its extent)."""

    access: Callable[[object], Access | None]
    repeats: Callable[[object], bool]
    extent: Callable[[object], object] | None = None


def statement_paths(nodes: list, hazards: Hazards, prefix: Path | None = None) -> list[tuple[object, Access, Path]]:
    out = []
    for k, n in enumerate(nodes):
        here = (prefix or []) + [(nodes, k)]
        if hasattr(n, "body"):
            out += statement_paths(n.body, hazards, here)
        elif not isinstance(n, (Sync, TmaWait, CpAsyncWait, CpAsyncCommit, BulkStoreWait, Tcgen05Commit, Tcgen05Wait)):
            acc = hazards.access(n)
            if acc is not None:
                out.append((n, acc, here))
    return out


def split_point(a: Path, b: Path) -> int:
    """Depth of the innermost scope holding both statements (where their paths part)."""
    d = 0
    while d < min(len(a), len(b)) and a[d][1] == b[d][1]:
        d += 1
    return d


def scope_repeats(path: Path, depth: int, hazards: Hazards) -> bool:
    """The scope at `depth` lies inside a repeating loop (it runs more than once per thread)."""
    return any(repeats(scope[k], hazards) for scope, k in path[:depth])


def runs(node, hazards: Hazards):
    """How many times a node with a body runs it: a pipeline node that says so itself (a circular
    buffer's prologue: `iterations`), else the loop's extent; None where the nest does not say."""
    own = getattr(node, "iterations", None)
    if own is not None:
        return const(own)
    return hazards.extent(node) if hazards.extent is not None else None


def repeats(node, hazards: Hazards) -> bool:
    """Whether a node with a body runs it more than once (a pipeline's nodes say so themselves)."""
    own = getattr(node, "repeats_itself", None)
    return own if own is not None else hazards.repeats(node)


class _Plan:
    """Planned barriers and waits per scope: position p is just before child p."""

    def __init__(self):
        self.at: dict[int, tuple[list, dict[int, list]]] = {}

    def _entry(self, scope: list):
        return self.at.setdefault(id(scope), (scope, {}))

    def has_between(self, scope: list, lo: int, hi: int, fence: bool = False) -> bool:
        """A barrier (one with the async-proxy fence, if asked) at some p with lo < p <= hi."""
        return any(lo < p <= hi and any(isinstance(n, Sync) and (n.fence_async or not fence) for n in nodes)
                   for p, nodes in self._entry(scope)[1].items())

    def has_wait(self, scope: list, lo: int, hi: int, barrier: str) -> bool:
        return any(lo < p <= hi and any(isinstance(n, TmaWait) and n.barrier == barrier for n in nodes)
                   for p, nodes in self._entry(scope)[1].items())

    def has_cp_async_wait(self, scope: list, lo: int, hi: int) -> bool:
        """A full cp.async wait (none left in flight) at some p with lo < p <= hi; each is placed
        with a barrier at its position, after it."""
        return any(lo < p <= hi and any(isinstance(n, CpAsyncWait) and n.pending == 0 for n in nodes)
                   for p, nodes in self._entry(scope)[1].items())

    def has_store_wait(self, scope: list, p: int) -> bool:
        return any(isinstance(n, BulkStoreWait) for n in self._entry(scope)[1].get(p, []))

    def add(self, scope: list, p: int, node: Sync | TmaWait | CpAsyncWait | BulkStoreWait) -> None:
        nodes = self._entry(scope)[1].setdefault(p, [])
        same = [n for n in nodes if type(n) is type(node)] if isinstance(node, (Sync, CpAsyncWait, BulkStoreWait)) \
            else []
        if same and isinstance(node, Sync):  # one barrier per position, fenced if any hazard needs the fence
            same[0].fence_async |= node.fence_async
        elif not same:  # one cp.async or bulk store wait per position
            nodes.append(node)

    def insert(self) -> None:
        for scope, at in self.at.values():
            for p in sorted(at, reverse=True):
                # waits first: a barrier placed with them then also orders the waited data
                ordered = ([n for n in at[p] if isinstance(n, (TmaWait, CpAsyncWait, BulkStoreWait))]
                           + [n for n in at[p] if isinstance(n, Sync)])
                scope[p:p] = ordered


def insert_barriers(tree: list, on_chip: set[str], hazards: Hazards) -> None:
    """Insert the Syncs and TmaWaits the nest needs (in place)."""
    stmts = statement_paths(tree, hazards)
    plan = _Plan()
    for name in sorted(on_chip):
        writers = [(a, p) for _, a, p in stmts if a.writes == name]
        readers = [(a, p) for _, a, p in stmts if name in a.reads]
        if any(w.circular is not None for w, _ in writers):
            continue  # a circular buffer: pipeline.insert_pipelines places its waits and barriers
        for w, wp in writers:
            for r, rp in readers:
                if wp == rp:  # one statement reads what it writes (an update in place): nothing lies between
                    # (its threads' reads of one run are SMEM-RACE's); a repeat's next run reads this one's writes
                    scope, at = wp[-1]
                    if scope_repeats(wp, len(wp) - 1, hazards) and not _wraps(plan, scope, at, at):
                        plan.add(scope, at + 1, Sync(f"{name} is updated in place again in the next iteration"))
                    continue
                d = split_point(wp, rp)
                scope, iw, ir = wp[d][0], wp[d][1], rp[d][1]
                store = r.kind is Async.TMA_STORE
                # the reader is the async proxy (a TMA store, wgmma, tcgen05.mma): the writers fence first
                proxy = store or r.kind in (Async.WGMMA, Async.TCGEN05)
                if w.kind is Async.TCGEN05:
                    pass  # tcgen05.mma's accumulators: its commit's mbarrier, waited for after its batch (tcgen05_order.py)
                elif w.kind is Async.TMA_LOAD:
                    _wait(plan, w, wp, rp, d, name)
                elif w.kind is Async.CP_ASYNC:
                    if not plan.has_cp_async_wait(scope, iw, ir):  # the copies complete, then all threads see them
                        plan.add(scope, ir, CpAsyncWait(0, f"{name} written by cp.async, read below"))
                        plan.add(scope, ir, Sync(f"{name} written by cp.async above, read below by other threads"))
                elif not plan.has_between(scope, iw, ir, fence=proxy):
                    plan.add(scope, ir, Sync(f"{name} written above, read below by other threads", fence_async=proxy))
                if scope_repeats(wp, d, hazards) and store:  # its reads end at the wait, just before the rewrite
                    at = iw if iw < ir else ir + 1
                    plan.add(scope, at, BulkStoreWait(f"{name}'s TMA store of the previous iteration has read it"))
                    plan.add(scope, at, Sync(f"{name} is rewritten below, after its store's reads"))
                elif scope_repeats(wp, d, hazards) and not _wraps(plan, scope, iw, ir):
                    plan.add(scope, ir + 1, Sync(f"{name} is rewritten in the next iteration"))
        for w, wp in writers:  # a load nobody reads still completes before the block moves on
            if w.kind is Async.TMA_LOAD and not plan.has_wait(wp[-1][0], wp[-1][1], len(wp[-1][0]), w.barrier):
                plan.add(wp[-1][0], wp[-1][1] + 1, TmaWait(w.barrier, f"{name} loaded by TMA"))
    for _, w, wp in stmts:
        if w.kind is Async.TMA_LOAD and w.circular is None and w.writes in on_chip:
            _rearmed_after_waits(plan, w, wp, hazards)
    plan.insert()


def insert_store_completions(tree: list, stored: set[str], hazards: Hazards) -> None:
    """A global tensor a TMA store writes and statements of the same block read back (`stored`,
    execution/nest.py read_back): in the innermost scope holding the store and a reader, just
    before the child leading to the reader, every thread waits for its stores to complete
    (a complete BulkStoreWait, with the global proxy fence) and then a barrier, so every
    element the block stored is in global memory and visible to all its threads before any
    reads it. Where a repeating loop holds both, a read of one iteration may be of an element a
    later iteration stores: GLOBAL-INTERMEDIATE accepts only readers that share no repeating loop
    with the store (`store_completed`, execution/conditions/lowering.py)."""
    stmts = statement_paths(tree, hazards)
    plan = _Plan()
    for name in sorted(stored):
        for _, w, wp in stmts:
            if w.kind is not Async.TMA_STORE or w.stores != name:
                continue
            for _, r, rp in stmts:
                if name not in r.reads or r.kind is Async.TMA_STORE:
                    continue
                d = split_point(wp, rp)
                scope, ir = rp[d][0], rp[d][1]
                plan.add(scope, ir, BulkStoreWait(f"{name} stored by TMA above, read below", complete=True))
                plan.add(scope, ir, Sync(f"{name} stored by TMA above, read below by other threads"))
    plan.insert()


def store_completed(tree: list, hazards: Hazards, w: Path, r: Path) -> bool:
    """Between the TMA store at `w` and the reader at `r`, in the innermost scope holding both:
    a complete BulkStoreWait followed by a barrier, and no loop holding both repeats."""
    d = split_point(w, r)
    if d >= min(len(w), len(r)) or scope_repeats(w, d, hazards):
        return False
    scope, iw, ir = w[d][0], w[d][1], r[d][1]
    if iw >= ir:
        return False
    way = scope[iw + 1:ir]
    waited = next((k for k, n in enumerate(way) if isinstance(n, BulkStoreWait) and n.complete), None)
    return waited is not None and any(isinstance(n, Sync) for n in way[waited + 1:])


def _rearmed_after_waits(plan: _Plan, w: Access, wp: Path, hazards: Hazards) -> None:
    """A load issued again on its mbarrier (a repeating loop holds it) arms the barrier's next
    phase only after every thread has waited for this one: a thread that has not yet tested the
    phase it waits for would see the next one, of the same parity, pending, and wait forever. A
    barrier between the wait and the next issue, in the copy's own scope after the wait or in any
    scope between it and the innermost repeating loop, unless one is planned there already."""
    def again(node) -> bool:  # a loop running more than once
        count = runs(node, hazards)
        return repeats(node, hazards) and (count is None or count.const_value() != 1)

    inner = max((d for d in range(len(wp) - 1) if again(wp[d][0][wp[d][1]])), default=None)
    if inner is None:
        return  # the load is issued once per block
    own, iw = wp[-1]
    waits = [p for p, nodes in plan._entry(own)[1].items()
             if p > iw and any(isinstance(n, TmaWait) and n.barrier == w.barrier for n in nodes)]
    if not waits:
        return
    at = min(waits)
    if plan.has_between(own, at - 1, len(own)) or plan.has_between(own, -1, iw):
        return
    if any(plan.has_between(scope, -1, len(scope)) for scope, _ in wp[inner + 1:-1]):
        return
    plan.add(own, at, Sync(f"{w.writes}'s mbarrier is armed again in the next iteration: every thread has "
                           f"waited for this phase first"))


def _wait(plan: _Plan, w: Access, wp: Path, rp: Path, d: int, name: str) -> None:
    """Wait in the copy's own scope (so each copy issued is waited for once): before the
    child leading to the reader when the reader is in that scope, else right after the copy."""
    scope, iw = wp[-1]
    at = rp[d][1] if d == len(wp) - 1 else iw + 1
    if not plan.has_wait(scope, iw, at, w.barrier):
        plan.add(scope, at, TmaWait(w.barrier, f"{name} loaded by TMA, read below"))


def _wraps(plan: _Plan, scope: list, iw: int, ir: int) -> bool:
    """A barrier after the reader or before the writer (on the way to the next iteration)."""
    return plan.has_between(scope, ir, len(scope)) or plan.has_between(scope, -1, iw)


@dataclass
class Tcgen05Commit:
    """tcgen05.commit.cta_group::1.mbarrier::arrive::one by the thread that issued the batch of
    tcgen05.mma above: mbarrier `barrier` completes its current phase once every tcgen05.mma that
    thread issued before has written its accumulators and read its shared tiles."""

    barrier: str
    why: str = ""


@dataclass
class Tcgen05Wait:
    """Every thread waits for the current phase of `barrier` (a Tcgen05Commit's), then flips its
    phase bit; then, with `fence`, tcgen05.fence::after_thread_sync orders the thread's later
    tcgen05 operations (its tcgen05.ld of the accumulators) after the wait."""

    barrier: str
    why: str = ""
    fence: bool = True


@dataclass
class WgmmaFence:
    """wgmma.fence.sync.aligned before a batch of wgmma: orders the accumulators' earlier register
    writes (zeroing, an earlier batch's stores) before the asynchronous reads."""

    why: str = ""


@dataclass
class WgmmaCommit:
    """wgmma.commit_group alone: the batches issued since the last commit become one group, waited
    for later (execution/wgmma_order.py's rotated loops)."""

    why: str = ""


@dataclass
class WgmmaWait:
    """wgmma.commit_group (when `commit`), then wgmma.wait_group `pending`: all but the newest
    `pending` committed batches have written their accumulators and read their shared tiles."""

    pending: int = 0
    why: str = ""
    commit: bool = True
