"""tcgen05.mma's asynchrony placed on the loop nest (the verifier's and the code generator's).

One thread issues tcgen05.mma; the MMA reads its shared tiles and writes its accumulators in
tensor memory asynchronously, and tcgen05.commit.cta_group::1.mbarrier::arrive::one makes an
mbarrier complete its phase once every tcgen05.mma that thread issued before has done so
(PTX ISA 9.7.16.6.3, 9.7.16.11.1). Threads that read the accumulators (tcgen05.ld) wait on that
mbarrier first, then order their tcgen05 operations after the wait with
tcgen05.fence::after_thread_sync (9.7.16.6.4.2).

A batch is a maximal subtree holding nothing but tcgen05.mma statements and loops (the K tiles of
a tile, or one instruction): right after it the issuing thread commits to the accumulator's
mbarrier (a Tcgen05Commit) and every thread waits for that phase, then fences (a Tcgen05Wait). So
each wait is for exactly one commit, every reader of the accumulators runs after the wait of the
last batch writing them, and the batch's shared tiles are read before anything after the wait
rewrites them; nothing stays in flight (no pipelining of tcgen05.mma yet: a circular-buffered
operand is LOWERING-SUPPORTED's). TCGEN05-ASYNC-ORDER (verifier/analysis/tcgen05_order.py) proves
this placement on every path.
"""

from __future__ import annotations

from .barriers import Async, Hazards, Tcgen05Commit, Tcgen05Wait


def commit_barrier(accumulator: str) -> str:
    """The C++ name of the mbarrier tcgen05.mma into `accumulator` commits to."""
    return f"tp_mma_bar_{accumulator}"


def _only_tcgen05(n, hazards: Hazards) -> bool:
    if hasattr(n, "body"):
        return bool(n.body) and all(_only_tcgen05(c, hazards) for c in n.body)
    acc = hazards.access(n)
    return acc is not None and acc.kind is Async.TCGEN05


def _accumulators(n, hazards: Hazards) -> list[str]:
    """The accumulators the tcgen05.mma statements of batch n write, in order, once each."""
    if hasattr(n, "body"):
        return list(dict.fromkeys(a for c in n.body for a in _accumulators(c, hazards)))
    acc = hazards.access(n)
    return [acc.writes] if acc is not None and acc.writes else []


def insert_tcgen05_waits(nodes: list, hazards: Hazards) -> None:
    """In place: after every batch, its commit and the wait for it (module docstring)."""
    out = []
    for n in nodes:
        if _only_tcgen05(n, hazards):
            out.append(n)
            for name in _accumulators(n, hazards):
                bar = commit_barrier(name)
                out.append(Tcgen05Commit(bar, f"{name}'s tcgen05.mma above: its mbarrier completes when they have"))
                out.append(Tcgen05Wait(bar, f"{name}'s accumulators written and its shared tiles read"))
            continue
        if hasattr(n, "body"):
            insert_tcgen05_waits(n.body, hazards)
        out.append(n)
    nodes[:] = out


__all__ = ["commit_barrier", "insert_tcgen05_waits"]
