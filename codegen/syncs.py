"""__syncthreads placement for shared-memory tensors.

Read after write: between the statement writing a shared tensor and each statement
reading it, in the innermost scope holding both, unless a barrier already sits between.
Write after read: when that scope repeats (it is inside a serial loop), the next
iteration's write must wait for this iteration's reads: a barrier after the last
reader, unless one already sits on the way round. Statements are predicated one by
one and thread/block "loops" are not conditionals, so every barrier is reached by
every thread of the block.
"""

from __future__ import annotations

from .kernel_ir import Compute, Loop, Sync

Path = list[tuple[list, int]]  # (scope, index in scope) from the root down to a statement


def _paths(nodes: list, prefix: Path | None = None) -> list[tuple[Compute, Path]]:
    out = []
    for k, n in enumerate(nodes):
        here = (prefix or []) + [(nodes, k)]
        if isinstance(n, Loop):
            out += _paths(n.body, here)
        elif isinstance(n, Compute):
            out.append((n, here))
    return out


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
    """Planned barrier positions per scope: position p is just before child p."""

    def __init__(self):
        self.at: dict[int, tuple[list, set[int], dict[int, str]]] = {}

    def _entry(self, scope: list):
        return self.at.setdefault(id(scope), (scope, set(), {}))

    def has_between(self, scope: list, lo: int, hi: int) -> bool:
        """A barrier at some p with lo < p <= hi."""
        return any(lo < p <= hi for p in self._entry(scope)[1])

    def add(self, scope: list, p: int, why: str) -> None:
        _, positions, reasons = self._entry(scope)
        positions.add(p)
        reasons.setdefault(p, why)

    def insert(self) -> None:
        for scope, positions, reasons in self.at.values():
            for p in sorted(positions, reverse=True):
                scope.insert(p, Sync(reasons[p]))


def insert_syncs(tree: list, shared: set[str]) -> None:
    stmts = _paths(tree)
    barriers = _Barriers()
    for name in sorted(shared):
        writers = [(s, p) for s, p in stmts if s.out.tensor == name]
        readers = [(s, p) for s, p in stmts if any(o.tensor == name for o in s.ins)]
        for _, wp in writers:
            for _, rp in readers:
                d = _split_point(wp, rp)
                scope, iw, ir = wp[d][0], wp[d][1], rp[d][1]
                if not barriers.has_between(scope, iw, ir):
                    barriers.add(scope, ir, f"{name} written above, read below by other threads")
                if _repeats(wp, d) and not _wraps(barriers, scope, iw, ir):
                    barriers.add(scope, ir + 1, f"{name} is rewritten in the next iteration")
    barriers.insert()


def _wraps(barriers: _Barriers, scope: list, iw: int, ir: int) -> bool:
    """A barrier after the reader or before the writer (on the way to the next iteration)."""
    return barriers.has_between(scope, ir, len(scope)) or barriers.has_between(scope, -1, iw)
