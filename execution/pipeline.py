"""Circular buffering of cp.async copies over a serial loop (and of register tiles over an
unrolled one), and the order in which a loop issues, commits, waits for and reads a
circular-buffered tensor.

Circular buffering (nvFuser's TensorView::circularBuffer, its Pipelined form):
`tv.circular_buffer(stages, prefetch)` on a shared tensor a cp.async fills inside a serial loop
(the circular loop: tv's loop axis just left of its compute-at position) allocates `stages`
tiles; iteration i's data lives in tile i % stages (Allocation.stage_offset). insert_pipelines
rewrites the loop nest, after execution/barriers.py placed the other barriers:

    Prologue        before the loop: for p in [0, P): the copy of iteration p (if p < extent),
                    then commit                                          (P = prefetch)
    loop i:         cp.async.wait_group P - 1           (iteration i's group is complete)
                    __syncthreads                       (read after write: every thread's copies;
                                                         write after read: iteration i - 1's reads)
                    Prefetched: the copy of iteration i + P (if i + P < extent), into stage
                    (i + P) % S, which iteration i + P - S <= i - 1 read; commit
                    ... the readers of stage i % S ...

A TMA-loaded stage a TMA store reads is read until the issuing thread's
cp.async.bulk.wait_group.read: each iteration waits so before its barrier (and an outer loop
before the barrier ahead of the next prologue), so the refill follows the stores' reads.

One barrier per iteration orders both hazards where 1 <= P <= S - 1 (CUTLASS's multistage order;
nvFuser issues the refill first and needs a second barrier at the end when P = S - 1). With
P = 0 the loop issues, commits and waits for its own copies before the barrier. With P >= S the
refill comes before the read: PIPELINE-WAR rejects it, PIPELINE-STAGES too. A loop shorter than
the prologue simply issues fewer copies (the predicates), and the groups stay counted since every
iteration commits one group, empty or not.

Registers (nvFuser's circular buffering of shared-memory reads): a register tensor a plain copy
or ldmatrix fills from shared memory, circular-buffered over its loop (the k-slice loop of a
matmul, unrolled), is pipelined the same way without commits, waits or barriers, since a
thread's registers are its own and program order orders them:

    Prologue        before the loop: for p in [0, P): the copy of iteration p (if p < extent)
    loop i:         Prefetched: the copy of iteration i + P (if i + P < extent), into stage
                    (i + P) % S; ... the readers of stage i % S ...

So the load of the next fragments is issued before the tensor-core instructions of this one,
into other registers. Its sources must be complete before the loop starts (PIPELINE-STAGES):
the prefetched copy reads iteration i + P's data in iteration i.

A Timeline is what one iteration of the loop around a cp.async copy and one of its readers
does, step by step, taken from the loop nest with its barriers and waits placed
(execution/nest.py): ISSUE (the copy), COMMIT (cp.async.commit_group), WAIT
(cp.async.wait_group N), SYNC (__syncthreads) and READ (the reader's statement). Iteration k
of the loop reads the data of iteration k; its copy fills the data of iteration k + prefetch,
which lives in stage (k + prefetch) % stages of the tensor's buffer. Without circular
buffering prefetch is 0 and there is one stage.

The verifier's CPASYNC-WAIT, PIPELINE-RAW and PIPELINE-WAR rules decide from a Timeline, for a symbolic
iteration, that every read sees its own data complete and that no stage is refilled while
its previous data is still read (verifier/analysis/pipeline.py); the code generator emits the
nest the Timeline was read from. Pure data: no z3.
"""

from __future__ import annotations

import copy
import enum
from dataclasses import dataclass, field, replace

from .barriers import (
    Async, BulkStoreWait, CpAsyncCommit, CpAsyncWait, Hazards, Path, Sync, TmaWait, repeats, runs, scope_repeats,
    split_point, statement_paths,
)
from .barriers import WgmmaCommit, WgmmaWait
from .rotation import Rotated
from ..model.expr import Expr, const
from ..model.options import Pipelined, WarpSpecialized
from ..model.tensor import TensorView
from .circular import circular_axis, circular_tensors
from .loops import copied_nest
from .warp_roles import (EMPTY_PREFIX, SpecializedLoop, StageDrain, StageEmptyWait, StageRelease, WarpRoles, release_lag,
                         split_roles, walk_nodes)


# -- the loop nest, pipelined --------------------------------------------------------------------

@dataclass
class Prologue:
    """Before the circular loop: for p in [0, prefetch), the copies in `body` for iteration p
    where p < the loop's extent, then a commit (one group per p, empty or not). `index` and
    `extent`: the loop's index variable and extent (filled in by the code generator)."""

    stages: int
    prefetch: int
    body: list
    index: str | None = None
    extent: Expr | None = None
    asynchronous: bool = True  # cp.async copies, committed one group per iteration; False: registers
    tma: bool = False  # TMA loads, each completing on its stage's mbarrier: no commits
    shared: bool = False  # plain copies into shared memory: complete when written, no commits
    repeats_itself = True  # a loop of its own (barriers.scope_repeats)

    @property
    def iterations(self) -> int:
        """How many times its body runs (barriers.runs): the prefetch count."""
        return self.prefetch


@dataclass
class Prefetched:
    """In the circular loop's body: the copies in `body` for iteration i + prefetch, where that
    is below the loop's extent (stage (i + prefetch) % stages)."""

    stages: int
    prefetch: int
    body: list
    index: str | None = None
    extent: Expr | None = None
    asynchronous: bool = True
    tma: bool = False
    shared: bool = False
    repeats_itself = False


@dataclass
class _CircularLoop:
    """What insert_pipelines gathers of one circular loop from its copies' statement paths."""

    scope: list  # the list holding the loop
    loop: object
    stages: int
    prefetch: int
    asynchronous: bool  # cp.async or TMA copies (False: plain copies, into registers or shared memory)
    shared: bool  # plain copies into shared memory
    outer: bool  # an enclosing scope repeats (the loop runs more than once)
    spec: object  # the copies' WarpSpecialized, if any
    ancestors: list  # the loop's ancestors from the root, outermost first
    war: bool  # Pipelined(uses_mbarrier_for_war=True)
    children: list = field(default_factory=list)  # the loop's children holding the copies
    barriers: list = field(default_factory=list)  # the TMA loads' mbarriers


SPLIT_COPIES = (Async.NONE, Async.CP_ASYNC)  # copies whose loops inside the circular loop split off with them


def isolate_circular_copies(tree: list, hazards: Hazards) -> None:
    """In place: a circular copy whose circular loop lies outside thread axes (or broadcast axes)
    it shares with its readers (nvFuser's circular axis: execution/circular.py) gets a scope of
    those axes of its own, before its readers' scope, so that its circular loop's body holds the
    copies apart from the reads. A thread axis is a scope, not a loop: running its copies first
    and its reads after, each thread still writes the other stage before it reads this one.
    A register copy's serial and unrolled loops there are split too (loop fission, as nvFuser's
    circular-buffer pass clones the copies' nest into the prologue and main loop): the registers
    are allocated across those loops (execution/circular.py allocation_position), each thread
    copies into and reads its own, and the copy reads sources complete before the circular loop
    (PIPELINE-STAGES), so the iteration's copies may all come before its reads. A split loop is
    two: its copies, then everything else in one loop (_copies_apart)."""
    changed = True
    while changed:
        changed = False
        for _, acc, path in statement_paths(tree, hazards):
            if acc.circular is None:
                continue
            for depth in range(acc.circular[2] + 1, len(path) - 1):
                scope, at = path[depth]
                node = scope[at]
                if not _shared_scope(node, hazards) and not (acc.kind in SPLIT_COPIES and _is_loop(node)):
                    break
                copies, rest = _copies_apart(node.body, depth, hazards)
                if copies and rest:
                    parts = []
                    for run in (copies, rest):
                        part = copy.copy(node)
                        part.body = run
                        parts.append(part)
                    scope[at:at + 1] = parts
                    changed = True
                    break
            if changed:
                break


def _shared_scope(node, hazards: Hazards) -> bool:
    """A loop of the nest that is a thread or block index, or runs once."""
    if not hasattr(node, "key") or not hasattr(node, "body"):
        return False
    if not hazards.repeats(node):
        return True
    extent = hazards.extent(node) if hazards.extent is not None else None
    return getattr(extent, "op", None) == "const" and extent.value == 1


def _is_loop(node) -> bool:
    """A loop node of the nest (serial, unrolled or a thread scope)."""
    return hasattr(node, "key") and hasattr(node, "body")


def _copies_apart(nodes: list, depth: int, hazards: Hazards) -> tuple[list, list]:
    """The body `nodes` of a node at `depth` in the nest as (those holding only circular copies
    whose circular loop is outside that node, the others), each in its order: the copies go
    first, into one loop, and the others stay together in one loop after them, so that a
    register tensor written and read inside the loop (allocated per iteration) is read in the
    iteration that wrote it (a loop per run of nodes ran the writes of every iteration before
    any read). A copy circular over this node or a loop inside it stays with its readers."""
    def copies_only(n) -> bool:
        found = [acc for _, acc, _ in statement_paths([n], hazards)]
        return bool(found) and all(acc.circular is not None and acc.circular[2] < depth for acc in found)

    copies = [n for n in nodes if copies_only(n)]
    return copies, [n for n in nodes if not any(n is c for c in copies)]


def insert_pipelines(tree: list, hazards: Hazards) -> None:
    """Pipeline every loop whose body holds circular-buffered copies (their Access.circular),
    in place: the Prologue before the loop, the Prefetched copies first in its body, and for
    cp.async copies the commit, the wait and the barriers (module docstring); a warp-specialized
    loop's copies go to a producer warpgroup instead (execution/warp_roles.py). Called by
    barriers.insert_barriers."""
    loops: dict[int, _CircularLoop] = {}
    for _, acc, path in statement_paths(tree, hazards):
        if acc.circular is None or any(isinstance(scope[k], (Prologue, Prefetched)) for scope, k in path):
            continue
        stages, prefetch, depth = acc.circular
        if depth >= len(path) - 1:
            continue  # no loop at that depth: PIPELINE-STAGES rejects the schedule
        scope, at = path[depth]
        asynchronous = acc.kind in (Async.CP_ASYNC, Async.TMA_LOAD)
        entry = loops.get(id(scope[at]))
        if entry is None:
            entry = loops[id(scope[at])] = _CircularLoop(
                scope, scope[at], stages, prefetch, asynchronous, not asynchronous and not acc.private,
                scope_repeats(path, depth, hazards), acc.specialized, [s[k] for s, k in path[:depth]], acc.war_mbarrier)
        if acc.kind is Async.TMA_LOAD and acc.barrier not in entry.barriers:
            entry.barriers.append(acc.barrier)
        child = scope[at].body[path[depth + 1][1]]  # the node, not its index: prologues shift indices
        if not any(child is c for c in entry.children):
            entry.children.append(child)
    specialized = []
    for cl in loops.values():
        scope, loop, children, barriers = cl.scope, cl.loop, cl.children, cl.barriers
        stages, prefetch, asynchronous, outer, spec, war = cl.stages, cl.prefetch, cl.asynchronous, cl.outer, cl.spec, cl.war
        shared = cl.shared
        copies = [n for n in loop.body if any(n is c for c in children)]
        rest = [n for n in loop.body if not any(n is c for c in children)]
        tma = bool(barriers)
        if spec is not None and tma:  # the producer warpgroup loads, the consumers wait for each stage's data
            waits = [TmaWait(b, "this iteration's tile, loaded by the producer warpgroup (stage i % stages, its "
                                "next phase)", stages) for b in barriers]
            loop.body[:] = waits + rest
            tensors = {a.writes for c in copies for _, a, _ in statement_paths([c], hazards)}
            specialized.append(SpecializedLoop(loop, scope, cl.ancestors, copies, barriers, stages, prefetch, spec,
                                               _read_by_threads(rest, tensors, hazards)))
            continue
        if shared and prefetch >= 1:  # plain copies into shared memory: complete when written; the barrier
            # at the top orders this iteration's stage after every thread's writes and the refill after the
            # previous iteration's reads of its stage (the last reads of it): one barrier per iteration
            loop.body[:] = [Sync("this iteration's stage is written by every thread; the stage refilled below "
                                 "was read in the previous iteration"),
                            Prefetched(stages, prefetch, copies, asynchronous=False, shared=True)] + rest
        elif shared:  # no prefetch: this iteration's copies, then the barrier before any thread reads them
            war = [Sync("the stage read here is refilled at the top of the next iteration")] if stages == 1 else []
            loop.body[:] = [Prefetched(stages, prefetch, copies, asynchronous=False, shared=True),
                            Sync("this iteration's stage, written by every thread, read below")] + rest + war
        elif not asynchronous:  # registers: the next iteration's copy ahead of this one's reads
            loop.body[:] = [Prefetched(stages, prefetch, copies, asynchronous=False)] + rest
        elif tma and war:  # empty mbarriers instead of barriers: each refill waits for its stage's release
            empty = EMPTY_PREFIX + barriers[0].removeprefix("tp_bar_")
            threads = _read_by_threads(rest, {a.writes for c in copies for _, a, _ in statement_paths([c], hazards)},
                                       hazards)
            lag = 0 if threads else release_lag(stages, prefetch)  # thread reads are done when they are made
            waits = [TmaWait(b, "this iteration's tile loaded by TMA (stage i % stages, its next phase)", stages)
                     for b in barriers]
            free = StageEmptyWait(empty, stages, f"stage (i + {prefetch}) % {stages} released by every warpgroup "
                                                 f"(its data of iteration i - {stages - prefetch} read)")
            copies = [free, *copies]
            refill = Prefetched(stages, prefetch, copies, tma=True)  # without prefetch, before its own wait
            loop.body[:] = [*([*waits, refill] if prefetch >= 1 else [refill, *waits]), *rest,
                            StageRelease(empty, stages, lag, f"this warpgroup's reads of datum i - {lag} are done: its "
                                                             f"stage may be refilled" if not threads else
                                         "this thread's reads of datum i are done: its stage may be refilled",
                                         every_thread=threads)]
            at = next(k for k, n in enumerate(scope) if n is loop)
            if lag:
                scope.insert(at + 1, StageRelease(empty, stages, lag, "the last data's reads are done (after the "
                                                                      "loop's final wgmma.wait_group)", tail=True))
            scope.insert(at, Prologue(stages, prefetch, copied_nest(copies), asynchronous=True, tma=True))
            continue
        elif tma:  # each thread waits for its stage's mbarrier itself; the barrier after it orders the refill
            # after every thread's reads of that stage in the previous iterations (and their waits); a TMA
            # store's reads end at its issuing thread's bulk wait, before that barrier
            waits = [TmaWait(b, "this iteration's tile loaded by TMA (stage i % stages, its next phase)", stages)
                     for b in barriers]
            war = [*_store_waits(rest, copies, hazards, "the TMA stores of earlier iterations have read the stage "
                                                        "refilled below"),
                   Sync("every thread's reads of the stage refilled below are done (previous iterations)")]
            loop.body[:] = ([*waits, *war, Prefetched(stages, prefetch, copies, tma=True)] if prefetch >= 1 else
                            [*war, Prefetched(stages, prefetch, copies, tma=True), *waits]) + rest
        elif prefetch >= 1:  # the refill after the read-after-write barrier, which also orders the refill
            # after the previous iteration's reads of its stage: one barrier per iteration
            loop.body[:] = [CpAsyncWait(prefetch - 1, f"this iteration's copies are complete, at most "
                                        f"{prefetch - 1} newer group(s) in flight", commit=False),
                            Sync("this iteration's stage is complete for every thread; the stage refilled "
                                 "below was read in the previous iteration"),
                            Prefetched(stages, prefetch, copies), CpAsyncCommit("the refill's group")] + rest
        else:  # no prefetch: the copies of this very iteration, waited for at once
            war = [Sync("the stage read here is refilled at the top of the next iteration")] if stages == 1 else []
            loop.body[:] = [Prefetched(stages, prefetch, copies),
                            CpAsyncWait(0, "this iteration's copies are complete"),
                            Sync("this iteration's stage, copied by every thread, read below")] + rest + war
        at = next(k for k, n in enumerate(scope) if n is loop)  # an earlier prologue may have moved it
        if outer and (asynchronous or shared):  # the next outer iteration's prologue refills the stages read here
            scope.insert(at + 1, Sync(f"every thread's reads of the circular buffer are done before the next "
                                      f"iteration's prologue refills its stages"))
            scope[at + 1:at + 1] = _store_waits(rest, copies, hazards, "the TMA stores have read the circular "
                                                                      "buffer before the next prologue refills it")
        scope.insert(at, Prologue(stages, prefetch, copied_nest(copies), asynchronous=asynchronous, tma=tma, shared=shared))
    if specialized:
        split_roles(tree, specialized)


def release_read_ahead(tree: list, hazards) -> None:
    """In place, after the loops are rotated and the wgmma waits placed: in a rotated consumer
    loop, the buffers read only by its rotated statements (each iteration's reads are the next
    datum's, waited for within the iteration: attention's K, read by the next tile's Q K^T) get
    empty mbarriers of their own, released at the top of each iteration for that iteration's
    datum, whose reads ended in the iteration before (or before the loop, datum 0's); the other
    buffers keep the loop's release point, with their own empty mbarriers. As nvFuser gives each
    TMA load its mbarriers and arrives for the write-after-read after the tensor's last use
    (device_lower/pass/circular_buffer.cpp), so the producer refills a stage of K an iteration
    earlier than one release for both would let it. PIPELINE-RAW, -WAR and -PHASE prove the
    result (each load's Timeline follows its own empty mbarriers)."""
    roles = next((n for n in tree if isinstance(n, WarpRoles)), None)
    if roles is None:
        return
    for at, (made, loop, empty, lag) in enumerate(roles.loops):
        key = getattr(loop, "key", None)
        if not any(isinstance(n, Rotated) and n.loop_key == key for n in loop.body):
            continue
        own = [n for n in made.body if not isinstance(n, StageEmptyWait) and not _waits_elsewhere(n, empty)]
        loads = [(c, {a.writes: a.barrier for _, a, _ in statement_paths([c], hazards)}) for c in own]

        def ahead_only(tensor) -> bool:
            paths = [p for _, a, p in statement_paths(loop.body, hazards) if tensor in a.reads]
            return bool(paths) and all(any(isinstance(sc[k], Rotated) and sc[k].loop_key == key for sc, k in p)
                                       for p in paths)

        early = [(c, bars) for c, bars in loads if bars and all(ahead_only(t) for t in bars)]
        late = [(c, bars) for c, bars in loads if not any(c is e for e, _ in early)]
        if not early or not late:
            continue
        first = EMPTY_PREFIX + next(iter(early[0][1].values())).removeprefix("tp_bar_")
        second = EMPTY_PREFIX + next(iter(late[0][1].values())).removeprefix("tp_bar_")
        wait = next(n for n in made.body if isinstance(n, StageEmptyWait) and n.barrier == empty)
        nested = [n for n in made.body if not isinstance(n, StageEmptyWait) and _waits_elsewhere(n, empty)]
        made.body[:] = ([StageEmptyWait(first, wait.stages, wait.why), *(c for c, _ in early),
                         StageEmptyWait(second, wait.stages, wait.why), *(c for c, _ in late)] + nested)
        for n in walk_nodes(tree):
            if isinstance(n, (StageRelease, StageDrain)) and n.barrier == empty:
                n.barrier = second
        loop.body.insert(0, StageRelease(first, wait.stages, 0, "this warpgroup's reads of datum i (the rotated "
                                                               "statements' of the iteration before) are done: its "
                                                               "stage may be refilled"))
        producer = roles.body[0].body
        drain = next(k for k, n in enumerate(producer) if isinstance(n, StageDrain) and n.barrier == second)
        producer.insert(drain, StageDrain(first, wait.stages, producer[drain].why))
        roles.loops[at] = (made, loop, second, lag)
        roles.empty_of.update({b: first for _, bars in early for b in bars.values()})


def _waits_elsewhere(n, empty: str) -> bool:
    """Whether node n holds an empty wait on another mbarrier (a circular loop nested in this one)."""
    return any(isinstance(c, StageEmptyWait) and c.barrier != empty for c in walk_nodes(getattr(n, "body", None) or []))


def _store_waits(rest: list, copies: list, hazards: Hazards, why: str) -> list:
    """A BulkStoreWait where a TMA store in `rest` reads the tensors `copies` fill (its reads of a
    stage end only at its issuing thread's cp.async.bulk.wait_group.read), else nothing."""
    tensors = {a.writes for c in copies for _, a, _ in statement_paths([c], hazards)}
    stored = any(a.kind is Async.TMA_STORE and a.reads & tensors for _, a, _ in statement_paths(rest, hazards))
    return [BulkStoreWait(why)] if stored else []


def _read_by_threads(nodes: list, tensors: set, hazards: Hazards) -> bool:
    """Whether a statement of `nodes` reads one of `tensors` with thread loads (not a wgmma)."""
    return any(a.kind is not Async.WGMMA and a.reads & tensors for _, a, _ in statement_paths(nodes, hazards))


class Step(enum.Enum):
    """What a position of a loop body does to a cp.async-filled tensor."""

    ISSUE = "issue"  # the thread's copies for this iteration's data (+ prefetch)
    COMMIT = "commit"  # cp.async.commit_group
    WAIT = "wait"  # cp.async.wait_group N
    SYNC = "sync"  # __syncthreads
    READ = "read"  # the reader's statement, for this iteration's data
    MMA_WAIT = "wgmma wait"  # wgmma.wait_group N: an asynchronous reader's reads of N batches ago are done
    MMA_COMMIT = "wgmma commit"  # wgmma.commit_group alone (its wait later: a rotated loop's overlap)
    STORE_WAIT = "bulk store wait"  # cp.async.bulk.wait_group(.read) 0: the TMA stores issued so far have read
    EMPTY_WAIT = "empty wait"  # the producer waits until the consumers released the stage it refills
    RELEASE = "release"  # the consumers release the stage of the datum N iterations back (N: pending)


@dataclass(frozen=True)
class Event:
    step: Step
    pending: int = 0  # WAIT: N of cp.async.wait_group N
    stages: int = 0  # an mbarrier WAIT, EMPTY_WAIT or RELEASE: iteration i's is on mbarrier [i % stages]
    ahead: int = 0  # 1: in a rotated loop's next iteration (execution/rotation.py): iteration i's is for datum i + 1
    commit: bool = False  # an MMA_WAIT that commits first (wgmma.commit_group, then the wait)


@dataclass(frozen=True)
class Timeline:
    """One iteration of the loop around a copy of `tensor` and its reader `reader`, in program
    order (`body`), run `extent` times (1 where the copy and the read share no repeating loop).
    The ISSUE at iteration k fills the data of iteration k + `prefetch`, in stage
    (k + prefetch) % `stages`. Before the loop, `prologue_iterations` iterations k = -P'..-1 run
    the `prologue` steps only (the copies of data k + prefetch ahead of the loop). `private`: the
    copy fills the thread's own registers (no commits, waits or barriers to order it)."""

    tensor: str
    reader: str
    body: tuple[Event, ...]
    extent: Expr
    prefetch: int = 0
    stages: int = 1
    prologue: tuple[Event, ...] = ()
    prologue_iterations: int = 0
    private: bool = False  # a register circular buffer: each thread's own data, ordered by program order
    tma: bool = False  # TMA loads: a WAIT is every thread's own wait on iteration k's stage and phase
    async_read: bool = False  # the reader is a wgmma: its reads end at an MMA_WAIT, not with the statement
    store_read: bool = False  # the reader is a TMA store (async_read too): its reads end at a STORE_WAIT
    outer_ordered: bool = True  # in a repeating scope: a barrier after the loop (after its reads are done)
    synchronous: bool = False  # plain copies into shared memory: complete when issued, seen by all after a SYNC
    # warp-specialized (execution/warp_roles.py): `body` is the consumers' iteration, `producer` the
    # producer's (its ISSUE loads iteration k's data), `tail` the consumers' steps after the loop
    specialized: bool = False
    producer: tuple[Event, ...] = ()
    tail: tuple[Event, ...] = ()
    # a rotated consumer loop (execution/rotation.py): the steps of datum 0 before the loop (its
    # rotated statements' first iteration); the body's events with `ahead` 1 are for datum i + 1
    rotated: tuple[Event, ...] = ()

    @property
    def ahead(self) -> int:
        """The iterations the READ runs ahead of its datum (1 where it is rotated)."""
        return next((e.ahead for e in self.body if e.step is Step.READ), 0)

    @property
    def read_wait(self) -> Step:
        """The step that ends an asynchronous reader's reads."""
        return Step.STORE_WAIT if self.store_read else Step.MMA_WAIT

    def positions(self, step: Step, prologue: bool = False) -> list[int]:
        """The positions of `step` in one iteration (of the prologue, if asked)."""
        return [k for k, e in enumerate(self.prologue if prologue else self.body) if e.step is step]

    @property
    def width(self) -> int:
        """Positions per iteration: iteration k's position i is k * width + i in program order."""
        return max(len(self.body), len(self.prologue), 1)

    def describe(self) -> str:
        def text(events) -> str:
            return ", ".join(e.step.value + (f" {e.pending}" if e.step in (Step.WAIT, Step.MMA_WAIT) else "")
                             + (f" of iteration i - {e.pending}" if e.step is Step.RELEASE else "")
                             + (" (of iteration i + 1)" if e.ahead else "") for e in events)

        if self.specialized:
            before = f"consumers first: [{text(self.rotated)}]; " if self.rotated else ""
            return (f"producer loop x{self.extent}: [{text(self.producer)}]; {before}consumer loop x{self.extent}: "
                    f"[{text(self.body)}]; then [{text(self.tail)}]").replace("wait 0", "wait")

        pro = (f"prologue x{self.prologue_iterations}: [{text(self.prologue)}]; " if self.prologue_iterations else "")
        return f"{pro}loop x{self.extent}: [{text(self.body)}]".replace("wait 0", "wait") if self.tma else \
            f"{pro}loop x{self.extent}: [{text(self.body)}]"


def events_of(node, barrier: str | None = None) -> list[Event]:
    """The Steps a barrier-nest node stands for (a CpAsyncWait that commits is two; a circular
    buffer's wait on `barrier`, the TMA load's mbarriers, is a WAIT)."""
    if isinstance(node, TmaWait):
        return [Event(Step.WAIT, stages=node.stages)] if node.stages and node.barrier == barrier else []
    if isinstance(node, WgmmaWait):
        return [Event(Step.MMA_WAIT, node.pending, commit=node.commit)]
    if isinstance(node, WgmmaCommit):
        return [Event(Step.MMA_COMMIT)]
    if isinstance(node, BulkStoreWait):
        return [Event(Step.STORE_WAIT)]
    if isinstance(node, CpAsyncWait):
        return ([Event(Step.COMMIT)] if node.commit else []) + [Event(Step.WAIT, node.pending)]
    if isinstance(node, CpAsyncCommit):
        return [Event(Step.COMMIT)]
    if isinstance(node, Sync):
        return [Event(Step.SYNC)]
    return []


def in_prologue(path: Path) -> bool:
    """Whether a statement path runs inside a Prologue (a copy of a pipelined statement)."""
    return any(isinstance(scope[k], Prologue) for scope, k in path)


def timeline(tensor: str, reader: str, wp: Path, rp: Path, hazards: Hazards, barrier: str | None = None) -> Timeline:
    """The Timeline of the copy at path `wp` and the read at path `rp` (statement paths of the
    barrier nest, the copy's outside any Prologue): the steps of the innermost scope holding
    both, in order. That scope's loop gives the iterations (one where it does not repeat); a
    Prefetched copy its prefetch and stages, and the Prologue just before the loop the prologue's
    steps (issue, commit), one iteration per prefetched copy. Waits and barriers nested deeper
    than the scope are not counted: a scope holds the copy's and the read's own children.
    `barrier`: a TMA load's mbarriers, whose circular waits are the Timeline's WAITs."""
    d = split_point(wp, rp)
    scope, iw, ir = wp[d][0], wp[d][1], rp[d][1]
    if d > 0 and isinstance(scope[iw], Prefetched) and any(isinstance(n, StageEmptyWait) for n in scope[iw].body):
        return _released_timeline(tensor, reader, wp, rp, d, hazards, barrier)
    body: list[Event] = []
    for k, node in enumerate(scope):
        if k == iw:
            body.append(Event(Step.ISSUE))
        elif k == ir:
            body.append(Event(Step.READ))
        else:
            body += events_of(node, barrier)
    extent: Expr = const(1)
    prologue: tuple[Event, ...] = ()
    iterations, prefetch, stages = 0, 0, 1
    private = tma = False
    outer_ordered = True
    leaf_scope, leaf_at = rp[-1]
    reading = hazards.access(leaf_scope[leaf_at])
    store_read = reading is not None and reading.kind is Async.TMA_STORE
    async_read = reading is not None and reading.kind is Async.WGMMA or store_read
    synchronous = False
    if isinstance(scope[iw], Prefetched):
        prefetch, stages, tma = scope[iw].prefetch, scope[iw].stages, scope[iw].tma
        synchronous = scope[iw].shared  # plain copies into shared memory: complete when issued
        private = not scope[iw].asynchronous and not synchronous
    if d > 0:
        parent, at = wp[d - 1]
        owner = parent[at]
        if repeats(owner, hazards) and runs(owner, hazards) is not None:
            extent = runs(owner, hazards)
        before = parent[at - 1] if at > 0 else None
        if isinstance(scope[iw], Prefetched) and not private and scope_repeats(wp, d - 1, hazards):
            outer_ordered = _barrier_after(parent, at, async_read, store_read) or \
                any(isinstance(n, Sync) for n in parent[:at - 1])
        if isinstance(before, Prologue) and isinstance(scope[iw], Prefetched):
            steps = (Event(Step.ISSUE),) if private or tma or synchronous else (Event(Step.ISSUE), Event(Step.COMMIT))
            prologue, iterations = steps, max(before.prefetch, 0)
    return Timeline(tensor, reader, tuple(body), extent, prefetch, stages, prologue, iterations, private, tma,
                    async_read, store_read, outer_ordered, synchronous=synchronous)


def _released_timeline(tensor: str, reader: str, wp: Path, rp: Path, d: int, hazards: Hazards,
                       barrier: str | None) -> Timeline:
    """The Timeline of a Pipelined loop with mbarrier WAR, as a warp-specialized one: the issuing
    thread's program (the prologue's and each Prefetched node's EMPTY_WAIT, ISSUE) loads data 0,
    1, .. in order, one empty wait per datum, as a producer warpgroup would; the loop body and
    the steps after the loop are the consumers'. Its waits are for releases of data at least
    S - prefetch - L >= 1 iterations back (release_lag), which the thread's own warpgroup made
    in an earlier iteration, so it never waits on itself."""
    scope, iw, ir = wp[d][0], wp[d][1], rp[d][1]
    parent, at = wp[d - 1]

    def loads(n) -> bool:  # a load, or a loop of them (an MN-major tile's boxes)
        return any(loads(c) for c in n.body) if hasattr(n, "body") else hazards.access(n) is not None

    def producer(nodes) -> tuple[Event, ...]:
        return tuple(Event(Step.EMPTY_WAIT, stages=n.stages) if isinstance(n, StageEmptyWait) else Event(Step.ISSUE)
                     for n in nodes if isinstance(n, StageEmptyWait) or loads(n))

    def events(nodes, read=None) -> tuple[Event, ...]:
        out: list[Event] = []
        for k, n in enumerate(nodes):
            if k == read:
                out.append(Event(Step.READ))
            elif isinstance(n, StageRelease):
                out.append(Event(Step.RELEASE, n.lag, n.stages))
            elif not isinstance(n, (Prefetched, Prologue)):
                out += events_of(n, barrier)
        return tuple(out)

    made = producer(scope[iw].body)
    before = parent[at - 1] if at > 0 else None
    if isinstance(before, Prologue) and producer(before.body) != made:  # the prologue's loads wait alike
        made = tuple(e for e in made if e.step is Step.ISSUE)
    reading = hazards.access(rp[-1][0][rp[-1][1]])
    count = runs(parent[at], hazards) if repeats(parent[at], hazards) else None
    extent = count if count is not None else const(1)
    return Timeline(tensor, reader, events(scope, ir), extent, scope[iw].prefetch, scope[iw].stages, tma=True,
                    async_read=reading is not None and reading.kind in (Async.WGMMA, Async.TMA_STORE),
                    store_read=reading is not None and reading.kind is Async.TMA_STORE, specialized=True, producer=made,
                    tail=events(parent[at + 1:]))


def specialized_timeline(tensor: str, reader: str, wp: Path, rp: Path, hazards: Hazards, barrier: str) -> Timeline | None:
    """The Timeline of a warp-specialized load at path `wp` (in the producer Role) and its read
    at `rp` (in the consumer Role): the producer's circular loop body (EMPTY_WAIT, ISSUE), the
    consumers' (the WAIT on `barrier`, the READ, wgmma waits, the RELEASE) and the consumers'
    steps after their loop. None where the paths are not a warp-specialized pair."""
    roles = wp[0][0][wp[0][1]]
    if not isinstance(roles, WarpRoles) or rp[0][0][rp[0][1]] is not roles:
        return None
    # the load's own circular loop: the innermost producer loop on its path (an outer one loads other data)
    depth = {id(p[0]): next((d for d, (sc, k) in enumerate(wp) if sc[k] is p[0]), -1) for p in roles.loops}
    made, loop, empty, _ = max(roles.loops, key=lambda p: depth[id(p[0])])
    empty = roles.empty_of.get(barrier, empty)  # a buffer with empty mbarriers of its own (release_read_ahead)
    dp = next((d for d, (sc, k) in enumerate(wp) if sc[k] is made), None)
    dc = next((d for d, (sc, k) in enumerate(rp) if sc[k] is loop), None)
    if dp is None or dc is None or dp + 1 >= len(wp) or dc + 1 >= len(rp):
        return None
    issue = wp[dp + 1][1]

    def own(n) -> bool:  # a rotation of this circular loop (another loop's, inside it, runs in this iteration)
        return isinstance(n, Rotated) and n.loop_key in (None, getattr(loop, "key", None))

    producer = [Event(Step.ISSUE) if k == issue else Event(Step.EMPTY_WAIT, stages=n.stages)
                for k, n in enumerate(made.body) if k == issue or (isinstance(n, StageEmptyWait) and n.barrier == empty)]

    def events(nodes, level=None, ahead=0, leaf=None):
        """The steps of `nodes`; `level`: the read path's depth whose scope is `nodes` (None: off it)."""
        at = rp[level][1] if level is not None and level < len(rp) else None
        out = []
        for k, n in enumerate(nodes):
            on_path = k == at and level + 1 < len(rp)
            if own(n):  # a rotated loop's next iteration: for datum i + 1
                out += events(n.body, level + 1 if on_path else None, 1, leaf=leaf)
            elif on_path and _shared_scope(n, hazards) and not isinstance(n, Rotated):
                out += [replace(e, ahead=ahead or e.ahead) for e in events(n.body, level + 1)]  # a thread scope
            elif k == at or (leaf is not None and _holds(n, leaf)):
                out.append(Event(Step.READ, ahead=ahead))
                leaf = None  # the first instance only
                if on_path and _waits_after(n.body if hasattr(n, "body") else [], rp[level + 1][1]):
                    out.append(Event(Step.MMA_WAIT, 0, ahead=ahead))  # an inner loop's every iteration waits
            elif isinstance(n, StageRelease) and n.barrier == empty:
                out.append(Event(Step.RELEASE, n.lag, n.stages, ahead=ahead))  # rotated: for datum i + 1 - lag
            else:
                out += [replace(e, ahead=ahead) for e in events_of(n, barrier)]
        return out

    scope, at = rp[dc]
    circular = hazards.access(wp[-1][0][wp[-1][1]]).circular  # the load's stages, not its waits'
    stages = circular[0] if circular else 1
    reading = hazards.access(rp[-1][0][rp[-1][1]])
    first = scope[at - 1] if at > 0 and own(scope[at - 1]) and scope[at - 1].first else None
    body = events(loop.body, dc + 1)
    # the rotated statements' first iteration, before the loop: the same read (by its leaf)
    rotated = tuple(events(first.body, ahead=1, leaf=rp[-1][0][rp[-1][1]])) if first is not None and \
        any(e.ahead for e in body if e.step is Step.READ) else ()
    return Timeline(tensor, reader, tuple(body), hazards.extent(loop), 0, stages, tma=True,
                    async_read=reading is not None and reading.kind in (Async.WGMMA, Async.TMA_STORE),
                    store_read=reading is not None and reading.kind is Async.TMA_STORE, specialized=True,
                    producer=tuple(producer), tail=tuple(events(scope[at + 1:])), rotated=rotated)


def _waits_after(body: list, at: int) -> bool:
    """Whether a loop body waits for every wgmma batch (wgmma.wait_group 0) after its child `at`
    in each iteration: then the reads of every iteration, the last one's too, are done when the
    loop ends."""
    return any(isinstance(n, WgmmaWait) and n.pending == 0 for n in body[at + 1:])


def _holds(n, leaf) -> bool:
    """Whether node n is the statement `leaf` or holds it."""
    if hasattr(n, "body"):
        return any(_holds(c, leaf) for c in n.body)
    return n is leaf or (isinstance(n, tuple) and n == leaf)


def _barrier_after(parent: list, at: int, async_read: bool, store_read: bool = False) -> bool:
    """A barrier after the circular loop parent[at], after the wgmma.wait_group 0 there that
    ends an asynchronous reader's reads (where the loop leaves a batch in flight), or, for a TMA
    store's reads, after a bulk store wait."""
    after = parent[at + 1:]
    start = 0
    if store_read:
        waits = [k for k, n in enumerate(after) if isinstance(n, BulkStoreWait)]
        if not waits:
            return False
        start = waits[0] + 1
    elif async_read:
        waits = [k for k, n in enumerate(after) if isinstance(n, WgmmaWait) and n.pending == 0]
        start = waits[0] + 1 if waits else 0
    return any(isinstance(n, Sync) for n in after[start:])


__all__ = ["Event", "Pipelined", "release_read_ahead", "WarpSpecialized", "Prefetched", "Prologue", "Step", "Timeline", "circular_axis",
           "circular_tensors", "events_of", "in_prologue", "insert_pipelines", "specialized_timeline", "timeline"]
