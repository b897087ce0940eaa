"""TCGEN05-ASYNC-ORDER's check of the placed loop nest: execution/tcgen05_order.py places each
tcgen05.mma batch's commit and the wait on its mbarrier; this runs the nest abstractly and finds
any path that breaks PTX's ordering of the asynchronous MMA (PTX ISA 9.7.16.6, 9.7.16.11.1).

The state after a statement, over every path that reaches it:
    flight    the tcgen05.mma statements that may still run: (accumulator, shared tiles read, the
              mbarrier their commit arrives on, or None before a tcgen05.commit)
    pending   for each mbarrier, the numbers of commits since its last wait a path may have
              (0, 1, or 2 meaning two or more)
    unfenced  the accumulators whose MMA a wait completed with no tcgen05.fence::after_thread_sync
              (the wait's own, or a fenced barrier's: every barrier of a kernel with tensor memory
              is one) after it yet
A loop's state is the join (union) of the state before it and after each iteration, iterated to
a fixed point, so a loop that runs zero, one or many times is covered. The obligations:
    1 a statement reads or writes an accumulator only when no tcgen05.mma writing it is in flight:
      committed (tcgen05.commit by its issuing thread) and its mbarrier's phase waited for
    2 ... and after a tcgen05.fence::after_thread_sync that follows that wait
    3 a statement writes a shared tile only when no tcgen05.mma reading it is in flight
    4 each wait on a commit's mbarrier is for exactly one commit since the previous wait on it
      (none: the phase never completes, the wait hangs; two: the parity the thread waits for
      may be either commit's)
    5 at the kernel's end no tcgen05.mma is in flight (tcgen05.dealloc would free its accumulators)
Pure data: no z3.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from ...execution.barriers import Async, Hazards, Sync, Tcgen05Commit, Tcgen05Wait
from ...execution.reduction import Phase
from ...model.mma_op import is_tcgen05_op
from ...model.tensor import TensorView
from .async_order import OrderRun, Violation, path_text

CAP = 2  # commits counted since a wait: 0, 1, or 2 and more


@dataclass(frozen=True)
class Batch:
    """A tcgen05.mma statement that may still run."""

    accumulator: str
    tiles: frozenset[str]
    barrier: str | None  # the mbarrier its commit arrives on; None: not committed yet
    statement: str


@dataclass(frozen=True)
class State:
    flight: frozenset[Batch] = frozenset()
    pending: frozenset[tuple[str, int]] = frozenset()  # (mbarrier, commits since its last wait), per path
    unfenced: frozenset[tuple[str, str]] = frozenset()  # (accumulator, its MMA) completed by a wait, not fenced

    def join(self, other: State) -> State:
        return State(self.flight | other.flight, self.pending | other.pending, self.unfenced | other.unfenced)

    def commits(self, barrier: str) -> set[int]:
        """The commits since the last wait on `barrier` some path has (0 where none names it)."""
        counts = {n for b, n in self.pending if b == barrier}
        return counts or {0}


@dataclass(frozen=True)
class Leaf:
    """A statement's on-chip side: what it reads and writes, and whether it is a tcgen05.mma."""

    reads: frozenset[str]
    writes: frozenset[str]
    mma: bool
    text: str
    location: str | None


def leaf_of(node, hazards: Hazards) -> Leaf | None:
    """The tensors a barrier-nest leaf (a tensor, or a reduction's (tensor, Phase)) reads and writes."""
    tv, phase = node if isinstance(node, tuple) else (node, Phase.STATEMENT)
    if not isinstance(tv, TensorView) or tv.definition is None:
        return None
    acc = hazards.access(node)
    if acc is None:
        return None
    op = tv.definition
    writes = frozenset({acc.writes} if acc.writes else ())
    if acc.kind is Async.TCGEN05 and is_tcgen05_op(op):
        return Leaf(acc.reads, writes, True, f"{tv.name}'s tcgen05.mma", op.origin)
    text = f"`{op}`" if phase is Phase.STATEMENT else f"{tv.name}'s {phase.value}"
    return Leaf(acc.reads, writes, False, text, op.origin)


def _in_flight(b: Batch) -> str:
    return (f"{b.statement} (not yet committed)" if b.barrier is None else
            f"{b.statement} (committed to {b.barrier}, not waited for)")


def _batch_values(b: Batch, path: str) -> dict:
    """A counterexample's account of the batch in flight and the path it is found on."""
    return {"in flight": b.statement, "committed to": b.barrier or "nothing yet", "path": path}


class _Run(OrderRun):
    """The run of async_order.py with tcgen05's nodes: the commits, the waits on their
    mbarriers, the fenced barriers; and the kernel's end."""

    def node(self, n, s: State, where: tuple[str, ...]) -> State:
        if isinstance(n, Tcgen05Commit):
            flight = frozenset(replace(b, barrier=n.barrier) if b.barrier is None else b for b in s.flight)
            pending = frozenset((b, c) for b, c in s.pending if b != n.barrier) | \
                frozenset((n.barrier, min(c + 1, CAP)) for c in s.commits(n.barrier))
            return replace(s, flight=flight, pending=pending)
        if isinstance(n, Tcgen05Wait):
            return self._wait(n, s, where)
        if isinstance(n, Sync):  # every barrier of a kernel with tensor memory is fenced (codegen/lower/tmem.py)
            return replace(s, unfenced=frozenset())
        return super().node(n, s, where)

    def leaf_of(self, n) -> Leaf | None:
        return leaf_of(n, self.hazards)

    def _wait(self, n: Tcgen05Wait, s: State, where: tuple[str, ...]) -> State:
        path = path_text(where)
        wrong = sorted(c for c in s.commits(n.barrier) if c != 1)
        if wrong:
            c = wrong[0]
            self.report(Violation(
                4, f"the wait on {n.barrier}", None,
                f"the threads wait on {n.barrier} in {path} after "
                + ("no tcgen05.commit since its last phase: the phase they wait for never completes (the kernel hangs)"
                   if c == 0 else "two or more tcgen05.commits since its last wait: the phase parity they wait for "
                                  "may be either commit's, not the last"),
                {"mbarrier": n.barrier, "commits since the last wait": c if c < CAP else f"{CAP} or more",
                 "path": path}))
        done = {b for b in s.flight if b.barrier == n.barrier}
        completed = frozenset((b.accumulator, b.statement) for b in done)
        pending = frozenset((b, c) for b, c in s.pending if b != n.barrier) | {(n.barrier, 0)}
        unfenced = s.unfenced | completed if not n.fence else frozenset()
        return State(s.flight - done, pending, unfenced)

    def statement(self, leaf: Leaf, s: State, where: tuple[str, ...]) -> State:
        path = path_text(where)
        touched = leaf.reads | leaf.writes
        for b in sorted(s.flight, key=lambda b: (b.statement, b.barrier or "")):
            if leaf.mma and b.accumulator in leaf.writes:
                continue  # the same thread's next MMA into the accumulator: the tensor core orders its own
            if b.accumulator in touched:
                self._touches_in_flight(
                    1, leaf, b, path,
                    f"{leaf.text} {'reads' if b.accumulator in leaf.reads else 'writes'} {b.accumulator} in {path} "
                    f"while {_in_flight(b)} may still write it: no wait on its commit's mbarrier comes first")
                break
            hit = sorted(b.tiles & leaf.writes)
            if hit and not leaf.mma:
                self._touches_in_flight(
                    3, leaf, b, path,
                    f"{leaf.text} writes {hit[0]} in {path} while {_in_flight(b)}, which reads it, may still run: "
                    f"the tensor cores may read the new data")
                break
        stale = sorted((a, m) for a, m in s.unfenced if a in touched)
        if stale and not leaf.mma:
            a, m = stale[0]
            self.report(Violation(
                2, leaf.text, leaf.location,
                f"{leaf.text} {'reads' if a in leaf.reads else 'writes'} {a} in {path} after the wait for {m} with no "
                f"tcgen05.fence::after_thread_sync between: its tcgen05 access may be ordered before the wait",
                {"statement": leaf.text, "waited for": m, "path": path}))
        if leaf.mma:
            tiles = frozenset(leaf.reads)
            for a in leaf.writes:
                s = replace(s, flight=s.flight | {Batch(a, tiles, None, leaf.text)})
        return s

    def _touches_in_flight(self, obligation: int, leaf: Leaf, b: Batch, path: str, message: str) -> None:
        """Report `leaf` touching what the batch `b`, still in flight, writes or reads (obligations 1, 3)."""
        self.report(Violation(obligation, leaf.text, leaf.location, message,
                              {"statement": leaf.text, **_batch_values(b, path)}))

    def at_end(self, s: State) -> None:
        for b in sorted(s.flight, key=lambda b: (b.statement, b.barrier or "")):
            self.report(Violation(
                5, b.statement, None,
                f"the kernel ends (tcgen05.dealloc frees {b.accumulator}'s columns) while {_in_flight(b)} may "
                f"still write them",
                _batch_values(b, "the kernel's end")))


def check_order(tree: list, hazards: Hazards, label: Callable[[object], str]) -> list[Violation]:
    """Every violation of the obligations (module docstring) on some path of the nest, the first
    path's per obligation and statement."""
    return _Run(hazards, label).violations(tree, State())


__all__ = ["Violation", "check_order", "leaf_of"]
