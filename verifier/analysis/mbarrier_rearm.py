"""PIPELINE-PHASE's claim on a TMA load that is not circular-buffered but issued again on its
mbarrier (a repeating loop holds it): every thread's wait for one phase comes before the next
issue arms the next phase, with a __syncthreads between.

An mbarrier wait tests parity: a thread that has not yet tested phase k when phase k + 1
completes sees phase k + 2 pending, of k's parity, and waits for it; the load of the last
iteration then leaves it waiting forever (a hang; nvFuser's tutorial BasicTMA with four boxes
loaded one after the other hung so on an H200). The order is decided on the placed nest's text:
every iteration of the innermost repeating loop holding the load runs the same steps (statements
are predicated, barriers are unconditional), so going round that loop's body, from each wait for
the load's barrier to the next issue of the load, a barrier must lie on the way. Loops nested in
the body that repeat may run zero times, so their barriers do not count (one of extent 1 is its body)."""

from __future__ import annotations

from dataclasses import dataclass

from ...execution.barriers import Access, Async, Hazards, Path, Sync, TmaWait, repeats, runs, statement_paths


@dataclass(frozen=True)
class Rearm:
    """A load whose next issue may arm its mbarrier before every thread waited for the last phase."""

    leaf: object
    access: Access
    loop: object  # the innermost repeating loop holding the load
    steps: tuple[str, ...]  # that loop's body as the check reads it: ISSUE, WAIT, SYNC


def unordered_rearms(tree: list, hazards: Hazards) -> list[Rearm]:
    out = []
    for leaf, acc, path in statement_paths(tree, hazards):
        if acc.kind is not Async.TMA_LOAD or acc.circular is not None:
            continue
        loop = _innermost_repeating(path, hazards)
        if loop is None:
            continue
        steps = tuple(_steps(loop.body, leaf, acc.barrier, hazards))
        if not _ordered(steps):
            out.append(Rearm(leaf, acc, loop, steps))
    return out


def _innermost_repeating(path: Path, hazards: Hazards):
    """The innermost loop holding the statement that runs more than once (one of extent 1 does not)."""
    loops = [scope[k] for scope, k in path[:-1] if repeats(scope[k], hazards) and not _runs_once(scope[k], hazards)]
    return loops[-1] if loops else None


def _runs_once(loop, hazards: Hazards) -> bool:
    extent = runs(loop, hazards)
    return extent is not None and extent.const_value() == 1


def _steps(nodes: list, leaf, barrier: str, hazards: Hazards):
    for n in nodes:
        if n is leaf:
            yield "ISSUE"
        elif isinstance(n, TmaWait) and n.barrier == barrier and not n.stages:
            yield "WAIT"
        elif isinstance(n, Sync):
            yield "SYNC"
        elif hasattr(n, "body") and (not repeats(n, hazards) or _runs_once(n, hazards)):
            yield from _steps(n.body, leaf, barrier, hazards)


def _ordered(steps: tuple[str, ...]) -> bool:
    """Going round the body from each WAIT, a SYNC comes before the next ISSUE."""
    n = len(steps)
    for i, s in enumerate(steps):
        if s != "WAIT":
            continue
        for j in range(1, n + 1):
            nxt = steps[(i + j) % n]
            if nxt == "SYNC":
                break
            if nxt == "ISSUE":
                return False
    return True
