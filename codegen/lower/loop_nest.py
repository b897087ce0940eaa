"""The loop nest: which loops exist, which tensors share them, and in what order.

Each computed tensor iterates its loop domain. A tensor inlined at position p shares
its first p loops with its consumers (the compute-at relation maps those loop IDs,
IdMap-exact), so loop positions joined by inlining form one loop class. The classes, the
execution order and the nesting come from model/lowerable.py (loop_groups,
execution_order, nest), the functions the verifier's lowering rules check: a schedule
whose loops do not form one nest is rejected there (INLINE-LOOP-MAP,
INLINE-PARALLEL-MATCH, LOOP-NEST-ORDER), so reaching one here is a tileproof bug.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...model.errors import InternalError
from ...model.expr import Expr
from ...model.fusion import Fusion
from ...execution.loops import Nest, execution_order, loop_groups, nest
from ...execution.problems import Problem
from ...execution.conditions.lowering import nest_problems
from ...model.tensor import TensorView
from ...model.types import BLOCK_TYPES, THREAD_TYPES, ParallelType
from ..errors import UnsupportedSchedule
from ..ir import Loop, LoopKind

__all__ = ["LoopClass", "LoopClasses", "NotLowered", "build_tree", "execution_order", "refuse"]


class NotLowered(InternalError, UnsupportedSchedule):
    """A condition of model/lowerable.py failed while lowering. The rule named in `.rule`
    rejects such a schedule, so tp.compile never gets here (a tileproof bug); for
    tileproof.testing.compile_unverified it is the code generator refusing (UnsupportedSchedule)."""


def refuse(code: str, problems: list[Problem]) -> None:
    """Raise NotLowered for the first problem, if any."""
    if problems:
        raise NotLowered(f"{problems[0].message} (the verifier rejects this schedule with {code})", rule=code)


@dataclass
class LoopClass:
    key: int
    var: str  # C++ index: a counter name, or threadIdx.x / blockIdx.x
    index_var: str  # the algebra variable of this loop's index (execution/loops.py LoopGroup.index_var)
    extent: Expr
    parallel: ParallelType
    members: list[str] = field(default_factory=list)  # "T1 axis 0"

    @property
    def kind(self) -> LoopKind:
        p = self.parallel
        if p in THREAD_TYPES:
            return LoopKind.THREAD
        if p in BLOCK_TYPES:
            return LoopKind.BLOCK
        return LoopKind.UNROLL if p in (ParallelType.Unroll, ParallelType.Vectorize) else LoopKind.SERIAL


class LoopClasses:
    """(tensor, loop position) -> its LoopClass: one per loop group of model.lowerable."""

    def __init__(self, fusion: Fusion, order: list[TensorView]):
        groups = loop_groups(fusion, order)
        refuse("INLINE-LOOP-MAP", groups.unmapped)
        refuse("INLINE-PARALLEL-MATCH", groups.mismatched)
        refuse("LOOP-NEST-ORDER", nest_problems(fusion, order, groups))
        self.classes: dict[tuple[str, int], LoopClass] = {}
        for g in groups.groups:
            cls = LoopClass(g.index, g.var, g.index_var, g.extent, g.parallel, g.labels())
            for tv, k in g.members:
                self.classes[(tv.name, k)] = cls

    def of(self, tv: TensorView, k: int) -> LoopClass:
        return self.classes[(tv.name, k)]


def build_tree(items: list[tuple[list[LoopClass], object]]) -> list:
    """Nest each statement in its loop path (model.lowerable.nest: a loop is reused only while
    it is the last thing in its scope; a class whose loop was closed cannot be reopened)."""
    by_key = {cls.key: cls for path, _ in items for cls in path}
    tree, conflict = nest([([cls.key for cls in path], node) for path, node in items])
    if conflict is not None:
        cls = by_key[conflict.key]
        raise NotLowered(f"cannot order the loop nest: the loop of {', '.join(cls.members)} would be split in two "
                         f"around another computation (the verifier rejects this schedule with LOOP-NEST-ORDER)",
                         rule="LOOP-NEST-ORDER")

    def convert(nodes: list) -> list:
        out = []
        for n in nodes:
            if isinstance(n, Nest):
                cls = by_key[n.key]
                out.append(Loop(cls.var, cls.extent, cls.kind, ", ".join(cls.members), cls.key, convert(n.body)))
            else:
                out.append(n)
        return out

    return convert(tree)
