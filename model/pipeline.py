"""The order in which a loop issues, commits, waits for and reads a cp.async-filled tensor.

A Timeline is what one iteration of the loop around a cp.async copy and one of its readers
does, step by step, taken from the loop nest with its barriers and waits placed
(model/barriers.py): ISSUE (the copy), COMMIT (cp.async.commit_group), WAIT
(cp.async.wait_group N), SYNC (__syncthreads) and READ (the reader's statement). Iteration k
of the loop reads the data of iteration k; its copy fills the data of iteration k + prefetch,
which lives in stage (k + prefetch) % stages of the tensor's buffer. Without circular
buffering prefetch is 0 and there is one stage.

The verifier's CPASYNC-WAIT and PIPELINE-WAR rules decide from a Timeline, for a symbolic
iteration, that every read sees its own data complete and that no stage is refilled while
its previous data is still read (verifier/analysis/pipeline.py); the code generator emits the
nest the Timeline was read from. Pure data: no z3.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .barriers import CpAsyncWait, Hazards, Path, Sync, split_point
from .expr import Expr, const


class Step(enum.Enum):
    """What a position of a loop body does to a cp.async-filled tensor."""

    ISSUE = "issue"  # the thread's copies for this iteration's data (+ prefetch)
    COMMIT = "commit"  # cp.async.commit_group
    WAIT = "wait"  # cp.async.wait_group N
    SYNC = "sync"  # __syncthreads
    READ = "read"  # the reader's statement, for this iteration's data


@dataclass(frozen=True)
class Event:
    step: Step
    pending: int = 0  # WAIT: N of cp.async.wait_group N


@dataclass(frozen=True)
class Timeline:
    """One iteration of the loop around a copy of `tensor` and its reader `reader`, in program
    order (`body`), run `extent` times (1 where the copy and the read share no repeating loop).
    The ISSUE at iteration k fills the data of iteration k + `prefetch`, in stage
    (k + prefetch) % `stages`. Before the loop, `prologue_iterations` iterations k = -P'..-1 run
    the `prologue` steps only (the copies of data k + prefetch ahead of the loop)."""

    tensor: str
    reader: str
    body: tuple[Event, ...]
    extent: Expr
    prefetch: int = 0
    stages: int = 1
    prologue: tuple[Event, ...] = ()
    prologue_iterations: int = 0

    def positions(self, step: Step, prologue: bool = False) -> list[int]:
        """The positions of `step` in one iteration (of the prologue, if asked)."""
        return [k for k, e in enumerate(self.prologue if prologue else self.body) if e.step is step]

    @property
    def width(self) -> int:
        """Positions per iteration: iteration k's position i is k * width + i in program order."""
        return max(len(self.body), len(self.prologue), 1)

    def describe(self) -> str:
        def text(events) -> str:
            return ", ".join(e.step.value + (f" {e.pending}" if e.step is Step.WAIT else "") for e in events)

        pro = (f"prologue x{self.prologue_iterations}: [{text(self.prologue)}]; " if self.prologue_iterations else "")
        return f"{pro}loop x{self.extent}: [{text(self.body)}]"


def events_of(node) -> list[Event]:
    """The Steps a barrier-nest node stands for (a CpAsyncWait that commits is two)."""
    if isinstance(node, CpAsyncWait):
        return ([Event(Step.COMMIT)] if node.commit else []) + [Event(Step.WAIT, node.pending)]
    if isinstance(node, Sync):
        return [Event(Step.SYNC)]
    return []


def timeline(tensor: str, reader: str, wp: Path, rp: Path, hazards: Hazards) -> Timeline:
    """The Timeline of the copy at path `wp` and the read at path `rp` (statement paths of the
    barrier nest): the steps of the innermost scope holding both, in order. That scope's loop
    gives the iterations (one where it does not repeat). Waits and barriers nested deeper
    than the scope are not counted: a scope holds the copy's and the read's own children."""
    d = split_point(wp, rp)
    scope, iw, ir = wp[d][0], wp[d][1], rp[d][1]
    body: list[Event] = []
    for k, node in enumerate(scope):
        if k == iw:
            body.append(Event(Step.ISSUE))
        elif k == ir:
            body.append(Event(Step.READ))
        else:
            body += events_of(node)
    extent: Expr = const(1)
    if d > 0:
        owner = wp[d - 1][0][wp[d - 1][1]]
        if hazards.repeats(owner) and hazards.extent is not None:
            extent = hazards.extent(owner)
    return Timeline(tensor, reader, tuple(body), extent)


__all__ = ["Event", "Step", "Timeline", "events_of", "timeline"]
