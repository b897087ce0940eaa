"""Empty mbarriers on the lowered tree. Warp specialization (model/warp_roles.py split the nest):
the producer's TMA loads are issued by its first thread, as their execution model says (the
single-writer predicate on the specialized axis is the producer's first index, execution/
statements.py; the role branch implies it where the producer is one index), and each loop's
empty mbarriers count one arrival per consumer warpgroup of the cluster. mbarrier WAR without a
producer (model/pipeline.py): each empty wait is the issuing thread's, and the empty mbarriers
count the block's warpgroups."""

from __future__ import annotations

import dataclasses

from ...execution.cluster import cluster_size
from ...hw.mbarrier import release_arrivals
from ...model.errors import InternalError
from ...execution.warp_roles import Role, WarpRoles, role_implied, role_padding, role_threads
from ...hw.threads import WARPGROUP
from ...execution.ping_pong import Turn
from ..ir import MBarrier, StageEmptyWait, StageRelease, TmaCopy, walk
from ...model.expr import product, try_int, var
from ...execution.indexing import thread_dims


def lower_roles(tree: list, fusion, mbarriers: list[MBarrier]) -> None:
    """In place: the producer's issuers, and the empty mbarriers appended to `mbarriers`. Where
    every load has the same issuing thread, that thread alone runs the producer's loops (the
    Role's `elected`), so that the producer's other warps do not spin on the empty mbarriers."""
    roles = next((n for n in tree if isinstance(n, WarpRoles)), None)
    if roles is None:
        return
    producer, consumer = roles.body
    if not (isinstance(producer, Role) and producer.producer):
        raise InternalError("a warp-specialized kernel's first role is not its producer")
    inner, indices = role_threads(fusion)
    if inner is None or indices is None:
        raise InternalError("a warp-specialized kernel's block is not constant (WS-ROLES)")
    axis = roles.spec.on.cuda_name
    roles.consumer_indices, roles.producer_indices = indices, role_padding(fusion)

    def issuer(n: TmaCopy) -> list:
        """The copy's issuer as its execution model states it (execution/statements.py), whose
        predicate on `axis` is the producer's first index; the role branch implies it where the
        producer is that one index."""
        on_axis = [c for c in n.issuer if axis in c.lhs.free_vars()]
        if [(c.lhs, c.op, try_int(c.rhs)) for c in on_axis] != [(var(axis), "==", indices)]:
            raise InternalError(f"a warp-specialized load's issuer on {axis} is {on_axis}, not the producer's first "
                                f"index {indices}")
        rest = [c for c in n.issuer if axis not in c.lhs.free_vars()]
        return (on_axis if roles.producer_indices > 1 else []) + rest

    issuers = {tuple(issuer(n)) for n in walk(producer.body) if isinstance(n, TmaCopy)}
    if len(issuers) == 1:
        producer.elected = list(next(iter(issuers)))
    _mapped(producer.body, lambda n: dataclasses.replace(n, issuer=[] if producer.elected else issuer(n))
            if isinstance(n, TmaCopy) else n)
    # the consumers' `threadIdx.<axis> < indices`, implied by their role: a predicate varying by warpgroup
    # would make ptxas serialize the wgmmas
    implied = role_implied(fusion)
    _mapped(consumer.body, lambda n: dataclasses.replace(n, conds=[c for c in n.conds if not implied(c)])
            if getattr(n, "conds", None) else n)
    roles.consumer_threads = inner * indices
    for n in walk(consumer.body):  # ping-pong: a turn barrier counts its warpgroup's threads and its predecessor's
        if isinstance(n, Turn):
            n.axis, n.groups, n.threads = axis, indices, 2 * inner
    # each consumer warpgroup (each consumer thread, where threads read the stages) releases a stage in
    # every block of its cluster (execution/cluster.py)
    every_thread = any(r.every_thread for r in walk(consumer.body) if isinstance(r, StageRelease))
    releasers = roles.consumer_threads if every_thread else roles.consumer_threads // WARPGROUP
    consumers = release_arrivals(releasers, cluster_size(fusion))
    for made, _, _, _ in roles.loops:
        for empty, copies in _copies_by_empty(made.body).items():
            stages = max((n.circular[0] for n in copies if n.circular), default=1)
            mbarriers.append(MBarrier(empty, consumers, ", ".join(sorted({c.smem for c in copies})), stages, empty=True))


def _copies_by_empty(body: list) -> dict[str, list]:
    """A producer loop's TMA copies by the empty mbarrier waited for before them (its body's
    waits in order: a buffer with empty mbarriers of its own, execution/pipeline.py
    release_read_ahead), not those of a circular loop inside it (a node that waits on empty
    mbarriers itself: Q's row-tile loop around K's and V's key-tile loop)."""
    out: dict[str, list] = {}
    current = None
    for n in body:
        if isinstance(n, StageEmptyWait):
            current = out.setdefault(n.barrier, [])
        elif current is not None and not any(isinstance(c, StageEmptyWait) for c in walk(getattr(n, "body", None) or [])):
            current += [c for c in walk([n]) if isinstance(c, TmaCopy)]
    return out


def lower_releases(tree: list, fusion, mbarriers: list[MBarrier]) -> None:
    """Pipelined loops with mbarrier WAR (model/pipeline.py), in place: each empty wait is run by
    the threads that issue the loads after it (the Prologue's or Prefetched node's), and each
    loop's empty mbarriers count one arrival per warpgroup of the block (each releases a stage
    after its wgmma.wait_group), or per thread where threads read the stages."""
    seen = set()
    for n in walk(tree):
        if isinstance(n, WarpRoles):
            return  # the producer's loads have their own thread (lower_roles)
        body = getattr(n, "body", None)
        waits = [c for c in body or () if isinstance(c, StageEmptyWait)]
        if not waits:
            continue
        copies = [c for c in walk(body) if isinstance(c, TmaCopy)]  # the copies may sit in loops of their own
        guard = []
        for c in copies:
            if c.issuer not in guard:
                guard.append(list(c.issuer))
        for w in waits:
            w.guard = [] if [] in guard else guard
            if w.barrier not in seen:
                seen.add(w.barrier)
                every_thread = any(r.every_thread for r in walk(tree) if isinstance(r, StageRelease)
                                   and r.barrier == w.barrier)
                threads = try_int(product(list(thread_dims(fusion))))
                if threads is None or (threads % WARPGROUP and not every_thread):
                    raise InternalError(f"a Pipelined loop with mbarrier WAR in a block of {threads} threads, not "
                                        f"whole warpgroups (its wgmma readers need them)")
                releasers = threads if every_thread else threads // WARPGROUP
                mbarriers.append(MBarrier(w.barrier, release_arrivals(releasers), ", ".join(sorted({c.smem for c in copies})),
                                          w.stages, empty=True))


def _mapped(nodes: list, leaf) -> None:
    """In place: every statement of the tree `nodes` replaced by leaf(statement)."""
    for k, n in enumerate(nodes):
        if hasattr(n, "body"):
            _mapped(n.body, leaf)
        else:
            nodes[k] = leaf(n)


__all__ = ["lower_releases", "lower_roles"]
