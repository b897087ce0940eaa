"""WGMMA-ASYNC-ORDER's check of the placed loop nest: model/wgmma_order.py places wgmma's fences
and waits, this runs the nest abstractly and finds any path that breaks PTX's ordering.

The state after a statement, over every path that reaches it:
    unfenced  the register tensors written since the last wgmma.fence (at the kernel's start: any)
    flight    the wgmma statements whose batch may still run: (accumulator, A registers (RS),
              shared tiles read, commits since its group's commit; -1 before its commit, capped
              at CAP)
A loop's state is the join (union) of the state before it and after each iteration, iterated to
a fixed point, so a loop that runs zero, one or many times is covered; warp roles run from the
same state. The obligations (PTX ISA 9.7.15.7):
    1 a wgmma's register operands (its accumulator, its A fragment in the RS form) are not `unfenced`
    2 a thread's own statement reads or writes no accumulator and no A register of a batch in
      `flight` (PTX ISA 9.7.15.7.3: accessing either before a wgmma.wait_group covering the
      wgmma is undefined)
    3 a StageRelease of the datum `lag` iterations back has no batch reading shared tiles in
      flight but the newest `lag` committed ones (one per iteration) and those a rotated loop's
      next iteration issued in this one (they read the next datum); its tail release none
The fourth, a fence.proxy.async after generic-proxy writes to a wgmma operand, has nothing to
check here: wgmma reads only tiles the TMA loads (MMA-OPERAND-LAYOUT). Pure data: no z3.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from ...execution.barriers import Hazards
from ...model.mma_op import is_wgmma_op
from ...execution.reduction import Phase
from ...model.tensor import TensorView
from ...model.types import MemoryType
from ...execution.warp_roles import Role, StageRelease, WarpRoles
from ...execution.barriers import WgmmaCommit, WgmmaFence, WgmmaWait
from ...execution.rotation import Rotated
from .async_order import OrderRun, Violation, path_text

CAP = 3  # commits counted past a batch's own: more than any wait's `pending` needs
START = ("*", "the kernel's start")  # every register counts as written before the first fence


@dataclass(frozen=True)
class Batch:
    """A wgmma statement whose batch may still run."""

    accumulator: str
    tiles: frozenset[str]
    newer: int  # commits since its group's; -1: not committed yet
    statement: str
    registers: frozenset[str] = frozenset()  # its A fragment's register tensor (RS), read asynchronously
    ahead: bool = False  # issued by a rotated loop's next iteration in this one: it reads the next datum


@dataclass(frozen=True)
class State:
    unfenced: frozenset[tuple[str, str]] = frozenset({START})  # (register tensor, the statement writing it)
    flight: frozenset[Batch] = frozenset()

    def join(self, other: State) -> State:
        return State(self.unfenced | other.unfenced, self.flight | other.flight)


@dataclass(frozen=True)
class Leaf:
    """A statement's register side: what it reads and writes, and whether it is a wgmma."""

    reads: frozenset[str]
    writes: frozenset[str]
    wgmma: bool
    tiles: frozenset[str]
    text: str
    location: str | None


def leaf_of(node) -> Leaf | None:
    """The register side of a barrier-nest leaf (a tensor, or a reduction's (tensor, Phase))."""
    tv, phase = node if isinstance(node, tuple) else (node, Phase.STATEMENT)
    if not isinstance(tv, TensorView) or tv.definition is None:
        return None
    op = tv.definition

    def local(ts) -> frozenset[str]:
        return frozenset(t.name for t in ts if t.memory_type is MemoryType.Local)

    own, ins = local([tv]), local(op.inputs)
    where = op.origin
    if phase is Phase.ACCUMULATE and is_wgmma_op(op):
        tiles = frozenset(t.name for t in op.inputs if t.memory_type is MemoryType.Shared)
        return Leaf(ins | own, own, True, tiles, f"{tv.name}'s wgmma", where)
    if phase is Phase.INIT:
        return Leaf(frozenset(), own, False, frozenset(), f"{tv.name}'s init (its accumulators zeroed)", where)
    if phase is Phase.STORE:
        return Leaf(own, own, False, frozenset(), f"{tv.name}'s store (its accumulators read)", where)
    if phase is not Phase.STATEMENT:
        return Leaf(ins | own, own, False, frozenset(), f"{tv.name}'s {phase.value}", where)
    return Leaf(ins, own, False, frozenset(), f"`{op}`", where)


def _in_flight(b: Batch) -> str:
    if b.newer < 0:
        return f"{b.statement} (not yet committed)"
    count = f"{b.newer}" if b.newer < CAP else f"{CAP} or more"
    return f"{b.statement} (committed, {count} group{'' if b.newer == 1 else 's'} committed after it)"


class _Run(OrderRun):
    """The run of async_order.py with wgmma's nodes: the warp roles (each from the state where
    they split), the fences, the commits and waits, the stage releases, a rotated loop's next
    iteration (run or not: its guard; its batches read the next datum until the loop's next
    iteration begins)."""

    ahead = False

    def iteration_start(self, s: State) -> State:
        return replace(s, flight=frozenset(replace(b, ahead=False) for b in s.flight))

    def node(self, n, s: State, where: tuple[str, ...]) -> State:
        if isinstance(n, Rotated):
            before, self.ahead = self.ahead, not n.first
            try:
                ran = self.nodes(n.body, s, where + ("the rotated statements of the next iteration",))
            finally:
                self.ahead = before
            return s.join(ran)
        if isinstance(n, WgmmaCommit):
            return replace(s, flight=frozenset(replace(b, newer=min(b.newer + 1, CAP)) for b in s.flight))
        if isinstance(n, WarpRoles):
            out = None
            for role in n.body:
                after = self.node(role, s, where + (("the producer" if role.producer else "the consumers"),))
                out = after if out is None else out.join(after)
            return out or s
        if isinstance(n, Role):
            return self.nodes(n.body, s, where)
        if isinstance(n, WgmmaFence):
            return replace(s, unfenced=frozenset())
        if isinstance(n, WgmmaWait):
            flight = s.flight
            if n.commit:
                flight = frozenset(replace(b, newer=min(b.newer + 1, CAP)) for b in flight)
            return replace(s, flight=frozenset(b for b in flight if b.newer < 0 or b.newer < n.pending))
        if isinstance(n, StageRelease):
            self._release(n, s, where)
            return s
        return super().node(n, s, where)

    def leaf_of(self, n) -> Leaf | None:
        return leaf_of(n)

    def statement(self, leaf: Leaf, s: State, where: tuple[str, ...]) -> State:
        path = path_text(where)
        if leaf.wgmma:
            stale = sorted(((t, w) for t, w in s.unfenced if t == "*" or t in leaf.reads | leaf.writes),
                           key=lambda x: (x[0] == "*", x))  # the statement before the kernel's start
            if stale:
                t, w = stale[0]
                self.report(Violation(
                    1, leaf.text, leaf.location,
                    f"{leaf.text} is issued in {path} after {w} wrote "
                    f"{'its registers' if t == '*' else t} with no wgmma.fence between: the asynchronous MMA may "
                    f"read the accumulators before that write",
                    {"wgmma": leaf.text, "register write": w, "path": path}))
            batch = Batch(next(iter(leaf.writes), ""), leaf.tiles, -1, leaf.text, leaf.reads - leaf.writes, self.ahead)
            return replace(s, flight=s.flight | {batch})
        touched = leaf.reads | leaf.writes
        for b in sorted(s.flight, key=lambda b: (b.statement, b.newer)):
            hit = sorted(({b.accumulator} | b.registers) & touched)
            if hit:
                t = b.accumulator if b.accumulator in hit else hit[0]
                self.report(Violation(
                    2, leaf.text, leaf.location,
                    f"{leaf.text} {'reads' if t in leaf.reads else 'writes'} {t} in {path} "
                    f"while {_in_flight(b)} may still " + ("write it" if t == b.accumulator else
                                                           "read it (its A fragment)") +
                    ": no wgmma.commit_group and wgmma.wait_group cover that batch first",
                    {"statement": leaf.text, "in flight": b.statement, "commits since": b.newer, "path": path}))
                break
        return replace(s, unfenced=s.unfenced | {(t, leaf.text) for t in leaf.writes})

    def _release(self, n: StageRelease, s: State, where: tuple[str, ...]) -> None:
        allowed = 0 if n.tail else n.lag
        late = sorted((b for b in s.flight if b.tiles and not b.ahead and (b.newer < 0 or b.newer >= allowed)),
                      key=lambda b: (b.statement, b.newer))
        if late:
            b = late[0]
            which = ("after the loop, for the last data" if n.tail else
                     f"for the datum {n.lag} iteration{'' if n.lag == 1 else 's'} back")
            path = path_text(where)
            self.report(Violation(
                3, f"the release of {n.barrier}", None,
                f"the consumers arrive on {n.barrier} {which} in {path} while {_in_flight(b)}, which reads "
                f"{', '.join(sorted(b.tiles))}, may still run: the producer may refill a stage the tensor cores read",
                {"release": n.barrier, "lag": allowed, "in flight": b.statement, "commits since": b.newer,
                 "path": path}))


def check_order(tree: list, hazards: Hazards, label: Callable[[object], str]) -> list[Violation]:
    """Every violation of the obligations (module docstring) on some path of the nest, the first
    path's per obligation and statement."""
    return _Run(hazards, label).violations(tree, State())


__all__ = ["Violation", "check_order", "leaf_of"]
