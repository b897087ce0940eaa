"""Warp specialization on the loop nest (the verifier's and the code generator's): a producer
warpgroup issues a circular buffer's TMA loads, the consumer warpgroups read the stages
(nvFuser's WarpSpecialized circular buffering; CUTLASS's PipelineTmaAsync).

    tv.circular_buffer(4, 2, tp.WarpSpecialized(tp.ParallelType.TIDy, num_registers=(40, 232)))

The block gets the producer's indices on the WarpSpecialized axis (`on`) after the C the fusion
binds to it: one warpgroup, as nvFuser pads it (hw/threads.py producer_indices): threadIdx.y == C
over TIDx 128; threadIdx.x >= C, 128 more threads, on TIDx alone (its first thread issues the
loads; every consumer statement runs where threadIdx.x < C). Each stage s has two mbarriers: full[s]
(the TMA load's, one arrival with its bytes) and empty[s] (one arrival per consumer warpgroup).
insert_pipelines hands each warp-specialized circular loop to split_roles, which rewrites the
nest into

    WarpRoles
      Role(producer)  the loops around the circular loop, and in it, for iteration i:
                        StageEmptyWait   wait empty[i % S] (phase bits start at 1: the first wait
                                         on each stage passes, the stage never held data)
                        the TMA loads of data i into stage i % S (completing on full[i % S])
                      after its loops, StageDrain: one more wait on every stage's empty
                      mbarrier, for its last release (the block stays until no consumer,
                      of this block or of another in its cluster, arrives on it)
      Role(consumer)  the nest without those loads; the circular loop's iteration i:
                        TmaWait          wait full[i % S] (the stage's next phase)
                        ... the reads (a wgmma batch) ...
                        StageRelease     arrive on empty[(i - L) % S] for data i - L (i >= L)
                      after the loop: StageRelease(tail) for the last L data

Circular loops nested in one another (attention's Q over a persistent block's row tiles, K and V
over the key tiles inside: attention(q_stages=2)) make one producer nest: the inner loop's copy
goes into the outer one's producer iteration, after its loads, so the producer loads each datum
in the order the consumers wait for it; each loop has its own full and empty mbarriers, and the
consumers release an outer datum after the inner loop's reads of it are waited for.

L = 1 where S - prefetch >= 2 (the batch of iteration i stays in flight while iteration i + 1's
is issued, wgmma.wait_group 1, execution/wgmma_order.py), else 0. Each role runs the same loops,
so each loads and releases every datum once per run of the circular loop, in order: the n-th
wait on a stage's full (empty) mbarrier is for its n-th load (release), in this run and the
next. PIPELINE-RAW and PIPELINE-WAR prove the order on this nest (verifier/analysis/pipeline.py);
WS-ROLES and WS-REGISTERS check what the rewrite assumes. Pure data: no z3.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from ..model.options import WarpSpecialized
from ..model.expr import product, try_int, var
from ..model.types import THREAD_TYPES
from .loops import execution_order
from .circular import specialization
from .indexing import block_dims, producer_padding

EMPTY_PREFIX = "tp_empty_"  # the empty mbarriers of a loop: tp_empty_<its first buffer>[stages]


@dataclass
class StageEmptyWait:
    """The producer waits for empty mbarrier `barrier`[i % stages]'s phase (its own bit per
    stage, flipped per wait; `index`: i, filled in by the code generator). In a Pipelined loop
    with mbarrier WAR (execution/pipeline.py) the wait precedes the copies of iteration i + `ahead`,
    by the threads that issue them (`guard`, the code generator's)."""

    barrier: str
    stages: int
    why: str
    index: str | None = None
    ahead: int = 0
    guard: list = field(default_factory=list)


@dataclass
class StageDrain:
    """The producer's wait, after its loops, for the last release of each of `barrier`'s
    `stages` (its next phase per stage: the release of the last datum loaded there, or the
    initial free phase of a stage never loaded)."""

    barrier: str
    stages: int
    why: str


@dataclass
class StageRelease:
    """The first thread of each consumer warpgroup arrives on empty mbarrier `barrier`[d % stages]
    for the datum d its warpgroup is done with: d = i - lag in iteration i of the circular loop
    (where i >= lag); `tail`: after the loop, for d in [extent - lag, extent). `every_thread`:
    the stage is read by threads, not wgmma: each thread arrives after its own reads (a
    warpgroup's first thread's reads say nothing of its other threads'). `index` and `extent`:
    the loop's (filled in by the code generator)."""

    barrier: str
    stages: int
    lag: int
    why: str
    tail: bool = False
    index: str | None = None
    extent: object = None
    every_thread: bool = False


@dataclass
class Role:
    """One side of a WarpRoles split: the producer's loads or the consumers' nest."""

    producer: bool
    body: list
    elected: list = field(default_factory=list)  # the code generator's: the one thread running it
    repeats_itself = False


@dataclass
class WarpRoles:
    """The kernel body split by warpgroup role (`spec`): body = [producer Role, consumer Role].
    `loops`: (producer circular loop, consumer circular loop, the empty mbarriers, consumer
    warpgroups per empty phase) per warp-specialized loop."""

    spec: WarpSpecialized
    body: list
    loops: list = field(default_factory=list)
    consumer_threads: int = 0  # the code generator's: the consumer role's threads (its named barriers)
    consumer_indices: int = 0  # the code generator's: the consumers' indices on spec.on (the producer's follow)
    producer_indices: int = 1  # the code generator's: the producer's indices on spec.on (hw/threads.py)
    repeats_itself = False
    empty_of: dict = field(default_factory=dict)  # a load's full mbarriers -> its empty ones, where not its loop's

    @property
    def innermost(self) -> list:
        """The `loops` entries whose consumer loop holds no other's (where loops nest, Q's over the
        row tiles around K's and V's over the key tiles, the inner one: its iterations issue the
        wgmma batches)."""
        return [p for p in self.loops
                if not any(q is not p and any(n is q[1] for n in walk_nodes(p[1].body)) for q in self.loops)]


def walk_nodes(nodes: list):
    """Every node of `nodes` and of the bodies nested in them, in order."""
    for n in nodes:
        yield n
        body = getattr(n, "body", None)
        if isinstance(body, list):
            yield from walk_nodes(body)


@dataclass
class SpecializedLoop:
    """What insert_pipelines found of a warp-specialized circular loop: the loop node, its
    ancestors from the root (outermost first), the TMA loads (children of the loop), their
    mbarriers (full), stages and prefetch; `threads`: the stages are read by threads (each
    consumer thread releases after its reads), not wgmma."""

    loop: object
    scope: list  # the list holding the loop
    ancestors: list
    copies: list
    barriers: list
    stages: int
    prefetch: int
    spec: WarpSpecialized
    threads: bool = False


def release_lag(stages: int, prefetch: int) -> int:
    """Iterations a consumer keeps a datum after its read: 1 where the stages leave room for one
    wgmma batch in flight (stages - prefetch >= 2), else 0."""
    return 1 if stages - prefetch >= 2 else 0


def split_roles(tree: list, loops: list[SpecializedLoop]) -> None:
    """Rewrite the nest (in place) into producer and consumer roles (module docstring); each
    loop's copies are already out of loop.body, which holds its full waits and the reads."""
    producer: list = []
    pairs = []
    made_of: dict[int, object] = {}  # a circular loop's id -> the producer's copy of it
    for sl in sorted(loops, key=lambda sl: len(sl.ancestors)):  # a loop before the loops inside it
        empty = EMPTY_PREFIX + sl.barriers[0].removeprefix("tp_bar_")
        lag = 0 if sl.threads else release_lag(sl.stages, sl.prefetch)  # thread reads are done when made
        made = copy.copy(sl.loop)
        made.body = [StageEmptyWait(empty, sl.stages, f"stage i % {sl.stages} released by every consumer "
                                                      f"warpgroup (its data of iteration i - {sl.stages} read)"),
                     *sl.copies]
        sl.loop.body.append(StageRelease(empty, sl.stages, lag, f"this warpgroup's reads of datum i - {lag} are "
                                                                f"done: its stage may be refilled" if not sl.threads
                                         else "this thread's reads of datum i are done: its stage may be refilled",
                                         every_thread=sl.threads))
        if lag:
            at = next(k for k, n in enumerate(sl.scope) if n is sl.loop)
            sl.scope.insert(at + 1, StageRelease(empty, sl.stages, lag, "the last data's reads are done (after the "
                                                                        "loop's final wgmma.wait_group)", tail=True))
        made_of[id(sl.loop)] = made
        node = made
        for anc in reversed(sl.ancestors):
            host = made_of.get(id(anc))
            if host is not None:  # inside another circular loop: its producer iteration loads this loop's data
                host.body.append(node)  # after that loop's own loads, as the consumers read them
                node = None
                break
            outer = copy.copy(anc)
            outer.body = [node]
            node = outer
        if node is not None:
            producer.append(node)
        producer.append(StageDrain(empty, sl.stages, "every stage's last release, before the block may exit: "
                                                     "no consumer (of any block of the cluster) arrives later"))
        pairs.append((made, sl.loop, empty, lag))
    tree[:] = [WarpRoles(loops[0].spec, [Role(True, producer), Role(False, list(tree))], pairs)]


# -- what the rewrite assumes (WS-ROLES) and setmaxnreg's obligations (WS-REGISTERS) -------------

REGISTER_FILE = 65536  # 32-bit registers per SM (and the most one block may hold), sm_90a and sm_100a
MIN_REGISTERS, MAX_REGISTERS, REGISTER_STEP = 24, 256, 8  # setmaxnreg's range (PTX ISA 9.7.19.5)


def specialized_tensors(fusion, order=None) -> list:
    return [t for t in (order if order is not None else execution_order(fusion)) if specialization(t) is not None]


def role_threads(fusion) -> tuple[int | None, int | None]:
    """(threads per index of the warp-specialized axis, the consumers' indices on it): the block
    the fusion binds, without the producer's indices (producer_indices); None where symbolic."""
    tvs = specialized_tensors(fusion)
    if not tvs:
        return None, None
    on = specialization(tvs[0]).on
    dims = block_dims(fusion)
    at = THREAD_TYPES.index(on)
    inner = try_int(product([dims.get(p) for p in THREAD_TYPES[:at] if p in dims])) if at else 1
    launched = try_int(dims[on])
    return inner, None if launched is None else launched - producer_padding(dims, on)


def role_padding(fusion) -> int:
    """The producer's indices on the warp-specialized axis (indexing.producer_padding); 1 where
    the kernel is not warp-specialized."""
    tvs = specialized_tensors(fusion)
    return producer_padding(block_dims(fusion), specialization(tvs[0]).on) if tvs else 1


def role_implied(fusion):
    """A test of a statement's Cond: whether every consumer warpgroup of a warp-specialized
    kernel satisfies it by its role (`threadIdx.<on> < consumers`: the launch has the
    producer's indices after them; with one consumer index, also a single writer's
    `threadIdx.<on> == 0`: a shared tile the consumers write without binding `on`); None where
    the kernel is not warp-specialized."""
    tvs = specialized_tensors(fusion)
    if not tvs:
        return None
    on, consumers = var(specialization(tvs[0]).on.cuda_name), role_threads(fusion)[1]
    return lambda c: consumers is not None and c.lhs == on and (
        (c.op == "<" and try_int(c.rhs) == consumers) or (c.op == "==" and consumers == 1 and try_int(c.rhs) == 0))


def registers_per_thread(threads: int) -> int:
    """What __launch_bounds__(threads, 1) lets ptxas give each thread: REGISTER_FILE / threads
    registers, in steps of 8, at most 255."""
    return min(255, REGISTER_FILE // threads // REGISTER_STEP * REGISTER_STEP)


def register_pool(inner: int, consumers: int, padding: int = 1) -> dict:
    """The registers a warp-specialized block starts with (registers_per_thread, in setmaxnreg's
    steps of 8: the pool setmaxnreg shares out is `entry` x `threads`), `inner` threads an index
    of the axis, `consumers` and `padding` (the producer's) indices; `producer`: its threads."""
    producer = inner * padding
    threads = inner * consumers + producer
    return {"threads": threads, "producer": producer,
            "entry": registers_per_thread(threads) // REGISTER_STEP * REGISTER_STEP}


__all__ = ["EMPTY_PREFIX", "register_pool", "walk_nodes", "registers_per_thread", "role_implied", "role_padding", "role_threads",
           "specialized_tensors", "Role", "SpecializedLoop", "StageDrain", "StageEmptyWait", "StageRelease",
           "WarpRoles", "release_lag", "split_roles"]
