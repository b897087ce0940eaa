"""Where the kernel synchronises: __syncthreads and mbarrier waits in a loop nest, placed once.

The code generator inserts exactly these into the kernel (codegen/lower/syncs.py) and the verifier's
SMEM-RACE rule checks them on the same nest (verifier/rules/races.py). The nest is any tree of
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
before it is preceded by fence.proxy.async in the writing threads.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable

Path = list[tuple[list, int]]  # (scope, index in scope) from the root down to a statement


class Async(enum.Enum):
    """How a statement touches on-chip memory besides plain thread loads and stores."""

    NONE = "threads"
    TMA_LOAD = "TMA load"  # written by the copy engine, complete on an mbarrier
    TMA_STORE = "TMA store"  # read by the copy engine (the async proxy)


@dataclass(frozen=True)
class Access:
    """What a statement does to on-chip memory."""

    writes: str | None
    reads: frozenset[str]
    kind: Async = Async.NONE
    barrier: str | None = None  # a TMA load's mbarrier


@dataclass
class Sync:
    """__syncthreads(): `why` names the on-chip tensor and the hazard. fence_async: the threads
    first order their shared-memory writes before the async proxy (a TMA store reads them)."""

    why: str
    fence_async: bool = False


@dataclass
class TmaWait:
    """All threads wait for the current phase of a load's mbarrier, then flip their phase bit."""

    barrier: str
    why: str


@dataclass(frozen=True)
class Hazards:
    """The nest's vocabulary: what a leaf accesses (None: not a statement) and whether a loop repeats."""

    access: Callable[[object], Access | None]
    repeats: Callable[[object], bool]


def statement_paths(nodes: list, hazards: Hazards, prefix: Path | None = None) -> list[tuple[object, Access, Path]]:
    out = []
    for k, n in enumerate(nodes):
        here = (prefix or []) + [(nodes, k)]
        if hasattr(n, "body"):
            out += statement_paths(n.body, hazards, here)
        elif not isinstance(n, (Sync, TmaWait)):
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
    return any(hazards.repeats(scope[k]) for scope, k in path[:depth])


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


def insert_barriers(tree: list, on_chip: set[str], hazards: Hazards) -> None:
    """Insert the Syncs and TmaWaits the nest needs (in place)."""
    stmts = statement_paths(tree, hazards)
    plan = _Plan()
    for name in sorted(on_chip):
        writers = [(a, p) for _, a, p in stmts if a.writes == name]
        readers = [(a, p) for _, a, p in stmts if name in a.reads]
        for w, wp in writers:
            for r, rp in readers:
                d = split_point(wp, rp)
                scope, iw, ir = wp[d][0], wp[d][1], rp[d][1]
                store = r.kind is Async.TMA_STORE
                if w.kind is Async.TMA_LOAD:
                    _wait(plan, w, wp, rp, d, name)
                elif not plan.has_between(scope, iw, ir, fence=store):
                    plan.add(scope, ir, Sync(f"{name} written above, read below by other threads", fence_async=store))
                if scope_repeats(wp, d, hazards) and not _wraps(plan, scope, iw, ir):
                    plan.add(scope, ir + 1, Sync(f"{name} is rewritten in the next iteration"))
        for w, wp in writers:  # a load nobody reads still completes before the block moves on
            if w.kind is Async.TMA_LOAD and not plan.has_wait(wp[-1][0], wp[-1][1], len(wp[-1][0]), w.barrier):
                plan.add(wp[-1][0], wp[-1][1] + 1, TmaWait(w.barrier, f"{name} loaded by TMA"))
    plan.insert()


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
