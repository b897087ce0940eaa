"""wgmma's asynchrony, placed by construction: a batch of wgmma (a loop nest holding nothing but
wgmma MmaIssues, at its outermost such loop) gets a wgmma.fence before it and a commit_group +
wait_group 0 after it, so the instructions of the batch are issued back to back, and everything
after the batch (the barrier before a tile is refilled, the accumulators' store, the next
batch's fence) finds them complete: PTX ISA 9.7.15.7 (async proxy; wgmma.fence before the first
wgmma and after register writes to its accumulators, wgmma.wait_group before they are read and
before the shared tiles are reused)."""

from __future__ import annotations

from ..ir import Loop, MmaIssue, WgmmaFence, WgmmaWait


def _only_wgmma(n) -> bool:
    if isinstance(n, MmaIssue):
        return bool(n.descriptors)
    return isinstance(n, Loop) and bool(n.body) and all(_only_wgmma(c) for c in n.body)


def batch_wgmma(nodes: list) -> None:
    """In place: each maximal wgmma-only node of the tree between a fence and a wait."""
    out = []
    for n in nodes:
        if _only_wgmma(n):
            out += [WgmmaFence("the accumulators' earlier register writes, before the asynchronous wgmma"), n,
                    WgmmaWait(0, "the batch's accumulators written and its shared tiles read")]
            continue
        if hasattr(n, "body"):
            batch_wgmma(n.body)
        out.append(n)
    nodes[:] = out


__all__ = ["batch_wgmma"]
