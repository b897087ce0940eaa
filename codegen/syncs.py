"""__syncthreads placement for shared-memory tensors.

Read after write: between the statement writing a shared tensor and each statement
reading it, in the innermost scope holding both, unless a barrier already sits between.
Write after read: when that scope repeats (it is inside a serial loop), the next
iteration's write must wait for this iteration's reads: a barrier after the last
reader, unless one already sits on the way round. Statements are predicated one by
one and thread/block "loops" are not conditionals, so every barrier is reached by
every thread of the block.

TMA: a load's data arrive on its mbarrier, so its readers need a wait, not a barrier:
all threads wait in the copy's own scope (one wait per copy issued), just before the
first child that reads the tile. A TMA store reads shared memory through the async
proxy, so the barrier before it is preceded by fence.proxy.async in the writing threads.
"""

from __future__ import annotations

from .kernel_ir import Compute, Loop, MatrixCopy, Sync, TmaCopy, TmaWait

Path = list[tuple[list, int]]  # (scope, index in scope) from the root down to a statement


def _paths(nodes: list, prefix: Path | None = None) -> list[tuple[Compute | TmaCopy | MatrixCopy, Path]]:
    out = []
    for k, n in enumerate(nodes):
        here = (prefix or []) + [(nodes, k)]
        if isinstance(n, Loop):
            out += _paths(n.body, here)
        elif isinstance(n, (Compute, TmaCopy, MatrixCopy)):
            out.append((n, here))
    return out


def writes(n) -> str | None:
    """The on-chip tensor a statement writes (a TMA store writes global memory)."""
    if isinstance(n, TmaCopy):
        return n.smem if n.direction == "load" else None
    return n.out.tensor


def reads(n) -> set[str]:
    if isinstance(n, TmaCopy):
        return {n.smem} if n.direction == "store" else set()
    return {o.tensor for o in n.ins}


def _is_tma_load(n) -> bool:
    return isinstance(n, TmaCopy) and n.direction == "load"


def _is_tma_store(n) -> bool:
    return isinstance(n, TmaCopy) and n.direction == "store"


def _split_point(a: Path, b: Path) -> int:
    """Depth of the innermost scope holding both statements (where their paths part)."""
    d = 0
    while d < min(len(a), len(b)) and a[d][1] == b[d][1]:
        d += 1
    return d


def _repeats(path: Path, depth: int) -> bool:
    """The scope at `depth` lies inside a serial loop (it runs more than once per thread)."""
    return any(scope[k].kind in ("serial", "unroll") for scope, k in path[:depth])


class _Barriers:
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

    def add(self, scope: list, p: int, node: Sync | TmaWait) -> None:
        nodes = self._entry(scope)[1].setdefault(p, [])
        same = [n for n in nodes if isinstance(n, Sync)] if isinstance(node, Sync) else []
        if same:  # one barrier per position, fenced if any hazard needs the fence
            same[0].fence_async |= node.fence_async
        else:
            nodes.append(node)

    def insert(self) -> None:
        for scope, at in self.at.values():
            for p in sorted(at, reverse=True):
                # waits first: a barrier placed with them then also orders the waited data
                ordered = [n for n in at[p] if isinstance(n, TmaWait)] + [n for n in at[p] if isinstance(n, Sync)]
                scope[p:p] = ordered


def insert_syncs(tree: list, shared: set[str]) -> None:
    stmts = _paths(tree)
    barriers = _Barriers()
    for name in sorted(shared):
        writers = [(s, p) for s, p in stmts if writes(s) == name]
        readers = [(s, p) for s, p in stmts if name in reads(s)]
        for w, wp in writers:
            for r, rp in readers:
                d = _split_point(wp, rp)
                scope, iw, ir = wp[d][0], wp[d][1], rp[d][1]
                if _is_tma_load(w):
                    _wait(barriers, w, wp, rp, d, name)
                elif not barriers.has_between(scope, iw, ir, fence=_is_tma_store(r)):
                    barriers.add(scope, ir, Sync(f"{name} written above, read below by other threads",
                                                 fence_async=_is_tma_store(r)))
                if _repeats(wp, d) and not _wraps(barriers, scope, iw, ir):
                    barriers.add(scope, ir + 1, Sync(f"{name} is rewritten in the next iteration"))
        for w, wp in writers:  # a load nobody reads still completes before the block moves on
            if _is_tma_load(w) and not barriers.has_wait(wp[-1][0], wp[-1][1], len(wp[-1][0]), w.barrier):
                barriers.add(wp[-1][0], wp[-1][1] + 1, TmaWait(w.barrier, f"{name} loaded by TMA"))
    barriers.insert()


def _wait(barriers: _Barriers, copy: TmaCopy, wp: Path, rp: Path, d: int, name: str) -> None:
    """Wait in the copy's own scope (so each copy issued is waited for once): before the
    child leading to the reader when the reader is in that scope, else right after the copy."""
    scope, iw = wp[-1]
    at = rp[d][1] if d == len(wp) - 1 else iw + 1
    if not barriers.has_wait(scope, iw, at, copy.barrier):
        barriers.add(scope, at, TmaWait(copy.barrier, f"{name} loaded by TMA, read below"))


def _wraps(barriers: _Barriers, scope: list, iw: int, ir: int) -> bool:
    """A barrier after the reader or before the writer (on the way to the next iteration)."""
    return barriers.has_between(scope, ir, len(scope)) or barriers.has_between(scope, -1, iw)
