"""The abstract run of the placed loop nest that the asynchronous-MMA order checks share
(wgmma_order.py for WGMMA-ASYNC-ORDER, tcgen05_order.py for TCGEN05-ASYNC-ORDER), and their
report as findings.

A check keeps its own state (a frozen dataclass with `join`), the nodes it steps itself (fences,
commits, waits, releases) and what a statement does to that state; the run walks the nest the
same way for both: statements in order, a loop that may run more than once from the state before
it joined with the state after each iteration until nothing changes (so zero, one or many
iterations are covered), the path (which iteration of which loop) carried along for the
counterexample, and the first path's violation kept per obligation and statement.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Callable

from ...execution.barriers import Hazards, repeats
from ...execution.nest import placed_nest
from ..context import VerifyContext
from ..diagnostics import Diagnostic
from ..findings import finding


@dataclass(frozen=True)
class Violation:
    obligation: int
    statement: str  # what breaks it
    location: str | None
    message: str
    counterexample: dict


def path_text(where: tuple[str, ...]) -> str:
    """The path a counterexample names: the roles and loop iterations it went through."""
    return ", ".join(where) or "the kernel"


@dataclass
class OrderRun(abc.ABC):
    """One abstract run over a placed nest. A check subclasses it: `node` steps the nodes of its
    own (then defers here), `leaf_of` and `statement` say what a statement does."""

    hazards: Hazards
    label: Callable[[object], str]
    found: dict = field(default_factory=dict)  # (obligation, statement) -> Violation, the first path's

    def report(self, v: Violation) -> None:
        self.found.setdefault((v.obligation, v.statement), v)

    def violations(self, tree: list, start) -> list[Violation]:
        """Every violation on some path of the nest from the state `start`, the first path's per
        obligation and statement."""
        self.at_end(self.nodes(tree, start, ()))
        return list(self.found.values())

    def nodes(self, nodes: list, s, where: tuple[str, ...]):
        for n in nodes:
            s = self.node(n, s, where)
        return s

    def node(self, n, s, where: tuple[str, ...]):
        if hasattr(n, "body"):
            if not repeats(n, self.hazards):
                return self.nodes(n.body, s, where)
            here = self.label(n)
            cur = s.join(self.nodes(n.body, self.iteration_start(s), where + (f"the first iteration of {here}",)))
            while True:
                nxt = cur.join(self.nodes(n.body, self.iteration_start(cur), where + (f"a later iteration of {here}",)))
                if nxt == cur:
                    return cur
                cur = nxt
        leaf = self.leaf_of(n)
        if leaf is None:
            return s
        return self.statement(leaf, s, where)

    def iteration_start(self, s):
        """The state entering an iteration of a loop (the check's own bookkeeping; unchanged here)."""
        return s

    @abc.abstractmethod
    def leaf_of(self, n):
        """A nest leaf's statement as the check sees it; None: the check ignores it."""

    @abc.abstractmethod
    def statement(self, leaf, s, where: tuple[str, ...]):
        """The state after the check's statement `leaf` (its obligations reported on the way)."""

    def at_end(self, s) -> None:
        """The obligations at the kernel's end (none unless the check has some)."""


def order_findings(ctx: VerifyContext, code: str, check_order, obligations: dict[int, str],
                   placed: str) -> Iterator[Diagnostic]:
    """Rule `code`'s findings: check_order's violations on the fusion's placed nest, each with the
    obligation it breaks. tileproof places `placed` itself, so any finding is its own bug."""
    nest_ = placed_nest(ctx.fusion)
    if nest_ is None:
        return
    for v in check_order(nest_.tree, nest_.hazards, nest_.label):
        yield finding(
            code, v.message,
            notes=[f"obligation {v.obligation}: {obligations[v.obligation]}",
                   "tileproof places these itself: this is a tileproof bug, please report it"],
            counterexample=v.counterexample,
            hint=f"report the schedule: tileproof places {placed} itself",
            tensor=None, location=v.location)


__all__ = ["OrderRun", "Violation", "order_findings", "path_text"]
